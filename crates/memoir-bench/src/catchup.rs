//! The search index's per-request catch-up: what
//! `SearchIndex::update` costs before every search (`POST /v1/search`,
//! `memoir mcp`) on a store of N sessions, from the change journal, against
//! the full pass it replaces (the store listed, a `stat` per session: what
//! every update cost before, and still the fallback when the journal cannot
//! answer), measured in the same run on the same store.
//!
//! `memoir-bench catchup [--sessions N] [--messages M] [--runs R]`
//! (default 10,000 sessions × 10 messages, 50 runs of each case). Cases:
//! nothing changed; one session appended by another writer (a plain
//! `FileStore`, no index hook) before each update; one session created
//! before each update (the store directory is re-read). The full pass is
//! forced by removing the journal before each update.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::{load_average, num, percentile};
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::search::SearchIndex;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

fn id_of(i: usize) -> String {
    format!("catchup-{i:06}")
}

fn session(store: &FileStore, id: &str, messages: usize) {
    store.create(&SessionMeta::new(id)).expect("create");
    let records: Vec<Record> = (0..messages)
        .map(|j| {
            Record::Message(Message::user(format!(
                "message {j} of {id}: the build failed on the migration step"
            )))
        })
        .collect();
    store.append(id, &records, None).expect("append");
}

/// Time `runs` updates, each after `before(run)`; milliseconds.
fn time_updates(
    ix: &mut SearchIndex,
    runs: usize,
    mut before: impl FnMut(usize),
    full_scan: bool,
) -> Vec<f64> {
    (0..runs)
        .map(|run| {
            before(run);
            let t = Instant::now();
            let report = ix.update().expect("update");
            let ms = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(report.full_scan, full_scan, "{report:?}");
            ms
        })
        .collect()
}

/// Run the benchmark.
pub fn main() {
    let sessions = num("--sessions", 10_000);
    let messages = num("--messages", 10);
    let runs = num("--runs", 50).max(1);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let writer = FileStore::new(dir, Durability::None);
    let t = Instant::now();
    for i in 0..sessions {
        session(&writer, &id_of(i), messages);
    }
    eprintln!(
        "generated {sessions} sessions x {messages} messages in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let mut ix = SearchIndex::open(dir).expect("open");
    let t = Instant::now();
    let first = ix.update().expect("first update");
    eprintln!(
        "indexed {} messages in {:.1}s",
        first.messages,
        t.elapsed().as_secs_f64()
    );
    // Let the directory's mtime settle (a change within 2 s is re-checked).
    std::thread::sleep(Duration::from_millis(2100));
    ix.update().expect("settling update");
    let journal = dir.join("index").join("changes");
    let mut full = time_updates(
        &mut ix,
        runs,
        |_| {
            let _ = std::fs::remove_file(&journal);
        },
        true,
    );
    ix.update().expect("back to the journal");
    let mut quiet = time_updates(&mut ix, runs, |_| {}, false);
    let mut appended = time_updates(
        &mut ix,
        runs,
        |run| {
            let id = id_of(run * 7919 % sessions.max(1));
            let m = Message::assistant(format!("appended by another writer, run {run}"));
            writer
                .append(&id, &[Record::Message(m)], None)
                .expect("append");
        },
        false,
    );
    let mut created = time_updates(
        &mut ix,
        runs,
        |run| session(&writer, &id_of(sessions + run), messages),
        false,
    );
    let full_p50 = percentile(&mut full, 0.5);
    println!(
        "\n### Search catch-up per request, {sessions} sessions x {messages} messages \
         ({runs} runs each, load {})\n",
        load_average()
    );
    println!("| `SearchIndex::update` | p50 ms | p99 ms | full pass / this (p50) |");
    println!("|---|---|---|---|");
    let row = |name: &str, v: &mut Vec<f64>| {
        let p50 = percentile(v, 0.5);
        let p99 = percentile(v, 0.99);
        println!(
            "| {name} | {p50:.3} | {p99:.3} | {:.1}x |",
            full_p50 / p50.max(1e-9)
        );
    };
    row(
        "full pass (no usable journal: list + `stat` per session)",
        &mut full,
    );
    row("journal, nothing changed", &mut quiet);
    row(
        "journal, one session appended by another writer",
        &mut appended,
    );
    row(
        "journal, one session created (directory re-read)",
        &mut created,
    );
    drop(ix);
    check(dir, sessions + runs);
}

/// The store still has every session (the benchmark wrote what it meant to).
fn check(dir: &Path, expected: usize) {
    let (listed, _) = FileStore::new(dir, Durability::None).list().expect("list");
    assert_eq!(listed.len(), expected);
}
