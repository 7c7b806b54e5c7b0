//! Session manager benchmark.
//!
//! 1. 10,000 messages added one by one through `SessionManager::add_message`
//!    with the default batching (every 10 messages or 0.5 s), against the
//!    seed's design at the same batching: one JSON document per session,
//!    rewritten whole (temp file + rename) on every flush, plus its
//!    read-merge-write of a shared index. Wall time and bytes written (the
//!    process's `wchar` from `/proc/self/io`), without and with fsync.
//! 2. `list_sessions` over 10,000 sessions: from the listing
//!    snapshot (page cache warm, and dropped when run as root), after another
//!    writer appended to 10 sessions, without the snapshot (a `stat` per
//!    transcript), and after the index directory was deleted (full rebuild);
//!    against the seed's `Session::list` (a header read per transcript).
//!
//! Run: `cargo run --release -p memoir-bench -- manager` (release profile). Sizes can
//! be changed with `MEMOIR_BENCH_MESSAGES` and `MEMOIR_BENCH_SESSIONS`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::store::Durability;
use serde_json::{json, Value};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Bytes this process has passed to `write`-like calls so far.
fn wchar() -> u64 {
    fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("wchar: ").map(|v| v.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

/// The i-th message of the synthetic conversation (~200 characters of text).
fn text(i: usize) -> String {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    format!(
        "{role} turn {i}: {}",
        "the quick brown fox jumps over the lazy dog; ".repeat(4)
    )
}

fn message(i: usize) -> Message {
    if i.is_multiple_of(2) {
        Message::user(text(i))
    } else {
        Message::assistant(text(i))
    }
}

// ----- the seed's design (seeds.md C.2-C.5), reimplemented for comparison --

/// One JSON document per session, rewritten whole on each flush, with a
/// shared `sessions_index.json` read, merged and rewritten each time.
struct SeedDesign {
    dir: PathBuf,
    id: String,
    messages: Vec<Value>,
    dirty: usize,
    last_flush: Option<Instant>,
    fsync: bool,
}

impl SeedDesign {
    const BATCH: usize = 10;
    const INTERVAL: Duration = Duration::from_millis(500);

    fn new(dir: &Path, fsync: bool) -> SeedDesign {
        fs::create_dir_all(dir).unwrap();
        let mut s = SeedDesign {
            dir: dir.to_path_buf(),
            id: "session_1700000000_abc12345".into(),
            messages: Vec::new(),
            dirty: 0,
            last_flush: None,
            fsync,
        };
        s.messages.push(
            json!({"role": "user", "content": "task", "timestamp": "1700000000", "tokens": 1}),
        );
        s.dirty = 1;
        s.flush();
        s
    }

    fn add_message(&mut self, i: usize) {
        let content = text(i);
        let tokens = content.chars().count() / 4;
        self.messages.push(json!({
            "role": if i.is_multiple_of(2) { "user" } else { "assistant" },
            "content": content,
            "timestamp": "1700000001",
            "tokens": tokens,
        }));
        self.dirty += 1;
        let due = self
            .last_flush
            .is_none_or(|t| t.elapsed() >= Self::INTERVAL);
        if self.dirty >= Self::BATCH || due {
            self.flush();
        }
    }

    fn atomic_write(&self, path: &Path, bytes: &[u8]) {
        let tmp = self
            .dir
            .join(format!(".tmp_{}", uuid::Uuid::new_v4().simple()));
        let mut f = fs::File::create(&tmp).unwrap();
        f.write_all(bytes).unwrap();
        if self.fsync {
            f.sync_all().unwrap();
        }
        fs::rename(&tmp, path).unwrap();
        if self.fsync {
            fs::File::open(&self.dir).unwrap().sync_all().unwrap();
        }
    }

    fn flush(&mut self) {
        if self.dirty == 0 {
            return;
        }
        let doc = json!({
            "schema_version": 1,
            "session_id": self.id,
            "created_at": "1700000000",
            "messages": self.messages,
        });
        let path = self.dir.join(format!("{}.json", self.id));
        self.atomic_write(&path, &serde_json::to_vec(&doc).unwrap());
        // touch_index: load, merge this entry, save.
        let index_path = self.dir.join("sessions_index.json");
        let mut index: BTreeMap<String, Value> = fs::read(&index_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let tokens: u64 = self
            .messages
            .iter()
            .map(|m| m["tokens"].as_u64().unwrap_or(0))
            .sum();
        index.insert(
            self.id.clone(),
            json!({"session_id": self.id, "created_at": "1700000000", "last_activity": "1700000002",
                   "total_messages": self.messages.len(), "total_tokens": tokens,
                   "title": "task", "status": "active"}),
        );
        self.atomic_write(&index_path, &serde_json::to_vec(&index).unwrap());
        self.dirty = 0;
        self.last_flush = Some(Instant::now());
    }
}

struct Run {
    wall: Duration,
    bytes: u64,
}

fn run_seed(n: usize, fsync: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let w0 = wchar();
    let t0 = Instant::now();
    let mut s = SeedDesign::new(dir.path(), fsync);
    for i in 0..n {
        s.add_message(i);
    }
    s.flush();
    Run {
        wall: t0.elapsed(),
        bytes: wchar() - w0,
    }
}

fn run_manager(n: usize, durability: Durability) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let w0 = wchar();
    let t0 = Instant::now();
    let mut m = SessionManager::for_project(
        dir.path(),
        ManagerOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap();
    let id = m.create_session("task", None).unwrap();
    for i in 0..n {
        m.add_message(message(i)).unwrap();
    }
    m.flush().unwrap();
    let run = Run {
        wall: t0.elapsed(),
        bytes: wchar() - w0,
    };
    assert_eq!(m.read_session_messages(&id).unwrap().len(), n + 1);
    run
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Run this benchmark (`memoir-bench manager ...`).
pub fn main() {
    let n = env_usize("MEMOIR_BENCH_MESSAGES", 10_000);
    let sessions = env_usize("MEMOIR_BENCH_SESSIONS", 10_000);

    println!("## add_message x {n}, default batching (10 messages / 0.5 s)\n");
    println!("| durability | design | wall | bytes written | seed / manager (time) | seed / manager (bytes) |");
    println!("|---|---|---|---|---|---|");
    for (label, durability, fsync) in [
        ("no fsync", Durability::Flush, false),
        ("fsync", Durability::Fsync, true),
    ] {
        let seed = run_seed(n, fsync);
        let mgr = run_manager(n, durability);
        println!(
            "| {label} | seed: whole-file rewrite | {} | {} | | |",
            ms(seed.wall),
            mib(seed.bytes)
        );
        println!(
            "| {label} | manager: append records | {} | {} | {:.1}x | {:.1}x |",
            ms(mgr.wall),
            mib(mgr.bytes),
            seed.wall.as_secs_f64() / mgr.wall.as_secs_f64(),
            seed.bytes as f64 / mgr.bytes.max(1) as f64
        );
    }

    println!("\n## list_sessions over {sessions} sessions\n");
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    {
        let mut m = SessionManager::for_project(
            dir.path(),
            ManagerOptions {
                durability: Durability::None,
                ..Default::default()
            },
        )
        .unwrap();
        for i in 0..sessions {
            m.create_session(&text(i), None).unwrap();
            m.add_messages([message(i + 1), message(i + 2)]).unwrap();
        }
        m.flush().unwrap();
    }
    eprintln!("setup: {sessions} sessions in {}", ms(t0.elapsed()));
    let store_dir = dir.path().join(".memoir/sessions");
    let index_dir = store_dir.join("index");
    let m = SessionManager::for_project(dir.path(), ManagerOptions::default()).unwrap();
    // Wall and CPU (all threads of the process) of one listing.
    let time_list = |want: Expect| {
        let (c0, t) = (cpu(), Instant::now());
        let r = m.list_sessions_report().unwrap();
        let wall = t.elapsed();
        let cpu_time = cpu().saturating_sub(c0);
        assert_eq!(r.entries.len(), sessions);
        match want {
            Expect::Snapshot => assert!(
                !r.full_scan && r.rebuilt == 0,
                "{r:?}",
                r = (r.full_scan, r.rebuilt)
            ),
            Expect::FullScan => assert!(
                r.full_scan && r.rebuilt == 0,
                "{r:?}",
                r = (r.full_scan, r.rebuilt)
            ),
            Expect::Rebuild => assert!(r.rebuilt == sessions, "rebuilt {}", r.rebuilt),
        }
        (wall, cpu_time)
    };
    time_list(Expect::FullScan); // writes the snapshot
                                 // Let the directory's mtime settle (a change within 2 s makes the next
                                 // listing read the directory again), then warm the page cache.
    std::thread::sleep(Duration::from_millis(2100));
    time_list(Expect::Snapshot);
    let mut rows: Vec<(&str, Duration, Duration)> = Vec::new();
    let (w, c) = median2((0..7).map(|_| time_list(Expect::Snapshot)).collect());
    rows.push(("snapshot, page cache warm", w, c));
    if drop_caches() {
        let (w, c) = median2(
            (0..3)
                .map(|_| {
                    drop_caches();
                    time_list(Expect::Snapshot)
                })
                .collect(),
        );
        rows.push(("snapshot, page cache dropped (cold)", w, c));
    }
    // Another writer (no index update, as `memoir serve` appends) touched 10
    // sessions: the journal names them, only they are re-read.
    let store = memoir::store::file::FileStore::new(&store_dir, Durability::None);
    let ids: Vec<String> = m
        .list_sessions()
        .unwrap()
        .iter()
        .take(10)
        .map(|e| e.id.clone())
        .collect();
    let mut after_append = Vec::new();
    for _ in 0..3 {
        for id in &ids {
            memoir::store::LogStore::append(
                &store,
                id,
                &[memoir::Record::Message(message(7))],
                None,
            )
            .unwrap();
        }
        let t = Instant::now();
        let c0 = cpu();
        let r = m.list_sessions_report().unwrap();
        after_append.push((t.elapsed(), cpu().saturating_sub(c0)));
        assert_eq!(r.rebuilt, ids.len(), "the 10 appended sessions are rebuilt");
    }
    let (w, c) = median2(after_append);
    rows.push(("snapshot + 10 sessions appended by another writer", w, c));
    let snapshot = index_dir.join("listing");
    let (w, c) = median2(
        (0..3)
            .map(|_| {
                fs::remove_file(&snapshot).unwrap();
                time_list(Expect::FullScan)
            })
            .collect(),
    );
    rows.push(("no snapshot: stat every transcript (entries fresh)", w, c));
    let (w, c) = median2(
        (0..3)
            .map(|_| {
                fs::remove_dir_all(&index_dir).unwrap();
                time_list(Expect::Rebuild)
            })
            .collect(),
    );
    rows.push(("index deleted: rebuilt from every transcript", w, c));
    // The peer: the seed's listing, one header read per transcript.
    let t = Instant::now();
    let c0 = cpu();
    let peer = memoir::transcript::Session::list(&store_dir).unwrap();
    let (pw, pc) = (t.elapsed(), cpu().saturating_sub(c0));
    assert_eq!(peer.len(), sessions);
    println!("| listing | wall (median) | CPU, all threads (mean) | per session (wall) | wall vs `Session::list` |");
    println!("|---|---|---|---|---|");
    for (label, w, c) in rows {
        println!(
            "| {label} | {} | {} | {:.2} µs | {:.2}x |",
            ms(w),
            ms(c),
            w.as_secs_f64() * 1e6 / sessions as f64,
            w.as_secs_f64() / pw.as_secs_f64()
        );
    }
    println!(
        "| peer: `Session::list` (reads every header), warm | {} | {} | {:.2} µs | 1.00x |",
        ms(pw),
        ms(pc),
        pw.as_secs_f64() * 1e6 / sessions as f64
    );
}

/// What a timed listing must have done.
#[derive(Clone, Copy)]
enum Expect {
    Snapshot,
    FullScan,
    Rebuild,
}

/// The median wall time and the mean CPU time of several runs.
fn median2(v: Vec<(Duration, Duration)>) -> (Duration, Duration) {
    let cpu = v.iter().map(|(_, c)| *c).sum::<Duration>() / v.len().max(1) as u32;
    let mut walls: Vec<Duration> = v.into_iter().map(|(w, _)| w).collect();
    walls.sort();
    (walls[walls.len() / 2], cpu)
}

/// CPU time of this process so far (user + system, every thread, exited
/// ones included), from `/proc/self/stat` in clock ticks (10 ms at 100 Hz):
/// compare differences over several calls, not one.
fn cpu() -> Duration {
    let ticks = fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the `(comm)`: state is field 3; utime, stime are 14, 15.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Drop the page cache (root only); false when not allowed.
fn drop_caches() -> bool {
    let _ = std::process::Command::new("sync").status();
    fs::write("/proc/sys/vm/drop_caches", b"3").is_ok()
}
