//! Catching caches up with a file store from its change journal (the
//! search catch-up, sharing the listing's "what changed since"): appends, compactions, deletes, restores and creates by other
//! processes are found by the next search without a `stat` per session; a
//! writer the journal announced is waited for; a full pass never loses a
//! change made while it looks; SIGKILL in the middle of a catch-up loses
//! nothing; a journal that cannot answer falls back to the full pass.
//!
//! The writing processes are this test binary itself, re-run with
//! `MEMOIR_CATCHUP_WRITER` set. Every test sets the random checks of cached
//! sessions against a `stat` to 0, so only the journal and the store
//! directory can reveal a change.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::search::{SearchFilter, SearchIndex, SearchMode, SearchQuery};
use memoir::store::file::changes::Journal;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

use crate::support::flaky_store::FlakyStore;

const WRITER_ENV: &str = "MEMOIR_CATCHUP_WRITER";

fn journal_only() {
    memoir::store::file::checkpoint::VERIFY_SAMPLE.store(0, Ordering::Relaxed);
}

fn store(dir: &Path) -> Arc<dyn LogStore> {
    Arc::new(FileStore::new(dir, Durability::None))
}

fn make(st: &dyn LogStore, id: &str, text: &str) {
    st.create(&SessionMeta::new(id)).unwrap();
    say(st, id, text);
}

fn say(st: &dyn LogStore, id: &str, text: &str) {
    st.append(id, &[Record::Message(Message::user(text))], None)
        .unwrap();
}

/// The sessions whose messages match `word` (lexical), sorted.
fn sessions_with(ix: &SearchIndex, word: &str) -> Vec<String> {
    let hits = ix
        .search(&SearchQuery {
            text: word.into(),
            k: 50,
            mode: SearchMode::Lexical,
            filter: SearchFilter::default(),
        })
        .unwrap();
    let mut ids: Vec<String> = hits.into_iter().map(|h| h.session).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The store directory's mtime must be old enough for a checkpoint to be
/// used without reading the directory (a change within 2 s is re-checked).
fn settle() {
    std::thread::sleep(Duration::from_millis(2100));
}

/// Run as a writer when asked to: `<dir>\n<op> <id> [word]...` with op
/// `append`, `rewrite`, `delete`, `restore`, `create` or `bulk` (`bulk N M`:
/// M messages to each of sessions s0..sN), all through a plain store (no
/// manager, no index hook), as another agent's process would.
#[test]
fn catchup_writer_process() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let mut lines = spec.lines();
    let st = FileStore::new(lines.next().unwrap(), Durability::None);
    for line in lines {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["append", id, word] => say(&st, id, &format!("late {word} note")),
            ["rewrite", id, word] => st
                .append(
                    id,
                    &[Record::Rewrite {
                        messages: vec![Message::assistant(format!("summary: {word}"))],
                    }],
                    None,
                )
                .map(|_| ())
                .unwrap(),
            ["delete", id] => st.delete(id).unwrap(),
            ["restore", id] => st.restore(id).unwrap(),
            ["create", id, word] => make(&st, id, &format!("fresh {word} session")),
            ["bulk", n, m] => {
                let (n, m): (usize, usize) = (n.parse().unwrap(), m.parse().unwrap());
                for i in 0..n {
                    let records: Vec<Record> = (0..m)
                        .map(|j| Record::Message(Message::user(format!("bulk {i} {j} wombat"))))
                        .collect();
                    st.append(&format!("s{i}"), &records, None).unwrap();
                }
            }
            _ => panic!("bad writer line {line:?}"),
        }
    }
}

/// Run the writer on `dir` with these operations and wait for it.
fn write_in_other_process(dir: &Path, ops: &[&str]) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "catchup::catchup_writer_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_ENV, format!("{}\n{}", dir.display(), ops.join("\n")))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the writer failed");
}

#[test]
fn changes_by_other_processes_are_found_by_the_next_search_from_the_journal() {
    if std::env::var(WRITER_ENV).is_ok() {
        return;
    }
    journal_only();
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    for id in ["a", "b", "c", "d", "e"] {
        make(st.as_ref(), id, &format!("opening words of {id}"));
    }
    let mut ix = SearchIndex::open_store(st.clone(), &tmp.path().join("search")).unwrap();
    assert!(
        ix.update().unwrap().full_scan,
        "the first update lists the store"
    );
    settle();
    let quiet = ix.update().unwrap();
    assert!(!quiet.full_scan, "{quiet:?}");
    assert_eq!((quiet.sessions, quiet.unchanged), (5, 5), "{quiet:?}");
    // Appends and a compaction only: the journal alone tells.
    write_in_other_process(
        tmp.path(),
        &["append a quokka", "rewrite b marsupial", "append c quokka"],
    );
    let r = ix.update().unwrap();
    assert!(!r.full_scan, "{r:?}");
    assert_eq!((r.extended, r.reindexed, r.unchanged), (3, 0, 2), "{r:?}");
    assert_eq!(sessions_with(&ix, "quokka"), ["a", "c"]);
    assert_eq!(sessions_with(&ix, "marsupial"), ["b"]);
    // Deletes, restores and creates change the directory instead.
    st.delete("d").unwrap();
    settle();
    assert_eq!(ix.update().unwrap().removed, 1);
    settle();
    write_in_other_process(tmp.path(), &["delete c", "restore d", "create f narwhal"]);
    let r = ix.update().unwrap();
    assert!(!r.full_scan, "{r:?}");
    assert_eq!((r.removed, r.reindexed), (1, 2), "{r:?}");
    assert!(
        sessions_with(&ix, "quokka") == ["a"],
        "a deleted session is no hit"
    );
    assert_eq!(sessions_with(&ix, "opening"), ["a", "b", "d", "e"]);
    assert_eq!(sessions_with(&ix, "narwhal"), ["f"]);
    assert_eq!(r.sessions, 5);
}

/// The bytes an append of `text` to session `id` of `dir` would write,
/// made in a copy of its transcript (so no journal note and no lock).
fn pending_append(dir: &Path, id: &str, text: &str) -> Vec<u8> {
    let twin = tempfile::tempdir().unwrap();
    let name = format!("{id}.jsonl");
    let original = fs::read(dir.join(&name)).unwrap();
    fs::write(twin.path().join(&name), &original).unwrap();
    say(&FileStore::new(twin.path(), Durability::None), id, text);
    fs::read(twin.path().join(&name)).unwrap()[original.len()..].to_vec()
}

/// Act as a writer in the middle of an append to `id`: its transcript's
/// append lock held and the change noted in the journal, the bytes not yet
/// written. Returns the lock (the open transcript) and the bytes.
fn announce_append(dir: &Path, id: &str, text: &str) -> (fs::File, Vec<u8>) {
    let bytes = pending_append(dir, id, text);
    let file = OpenOptions::new()
        .append(true)
        .open(dir.join(format!("{id}.jsonl")))
        .unwrap();
    file.lock().unwrap();
    assert!(Journal::new(dir).note(id).unwrap(), "the journal exists");
    (file, bytes)
}

fn finish_append(mut file: fs::File, bytes: &[u8]) {
    file.write_all(bytes).unwrap();
    file.unlock().unwrap();
}

#[test]
fn a_catch_up_waits_for_a_writer_the_journal_announced() {
    journal_only();
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    for id in ["p", "q", "r"] {
        make(st.as_ref(), id, &format!("words of {id}"));
    }
    let mut ix = SearchIndex::open_store(st.clone(), &tmp.path().join("search")).unwrap();
    ix.update().unwrap();
    settle();
    ix.update().unwrap();
    let (lock, bytes) = announce_append(tmp.path(), "q", "an ocelot appears");
    let updater = std::thread::spawn(move || {
        let r = ix.update().unwrap();
        (ix, r)
    });
    // The writer takes its time; the update must wait for it, not read
    // the transcript as it was and move past the journal's note.
    std::thread::sleep(Duration::from_millis(400));
    finish_append(lock, &bytes);
    let (mut ix, r) = updater.join().unwrap();
    assert!(!r.full_scan, "{r:?}");
    assert_eq!(sessions_with(&ix, "ocelot"), ["q"], "{r:?}");
    let again = ix.update().unwrap();
    assert_eq!((again.extended, again.messages), (0, 0), "{again:?}");
    assert_eq!(sessions_with(&ix, "ocelot"), ["q"]);
}

#[test]
fn a_full_pass_never_loses_a_change_announced_before_it_looked() {
    journal_only();
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    for id in ["u", "v"] {
        make(st.as_ref(), id, &format!("words of {id}"));
    }
    // The journal exists (a listing started it); a writer announced an
    // append to `v` and is still writing while the first update looks.
    Journal::new(tmp.path()).position().unwrap();
    let (lock, bytes) = announce_append(tmp.path(), "v", "a pangolin arrives");
    let mut ix = SearchIndex::open_store(st.clone(), &tmp.path().join("search")).unwrap();
    let first = ix.update().unwrap();
    assert!(first.full_scan);
    assert!(sessions_with(&ix, "pangolin").is_empty());
    finish_append(lock, &bytes);
    let r = ix.update().unwrap();
    assert!(!r.full_scan, "{r:?}");
    assert_eq!(sessions_with(&ix, "pangolin"), ["v"], "{r:?}");
}

#[test]
fn a_full_listing_never_loses_a_change_announced_before_it_looked() {
    journal_only();
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    make(st.as_ref(), "u", "words of u");
    // The listing's full scan takes the same checkpoint as the search's.
    let m = SessionManager::open(
        tmp.path(),
        ManagerOptions {
            durability: Durability::None,
            ..Default::default()
        },
    )
    .unwrap();
    Journal::new(tmp.path()).position().unwrap();
    let (lock, bytes) = announce_append(tmp.path(), "u", "a second message");
    let full = m.list_sessions_report().unwrap();
    assert!(full.full_scan);
    finish_append(lock, &bytes);
    let listed = m.list_sessions_report().unwrap();
    assert!(!listed.full_scan);
    let u = listed.entries.iter().find(|e| e.id == "u").unwrap();
    assert_eq!(
        u.messages, 2,
        "the append made during the full scan is listed"
    );
}

/// Run as the indexer to be killed: one update of the index in `dir`.
#[test]
fn catchup_update_until_killed() {
    let Ok(dir) = std::env::var("MEMOIR_CATCHUP_KILL_DIR") else {
        return;
    };
    // Batches of 20,000: the 30,000 new messages need two commits.
    let mut ix = SearchIndex::open(Path::new(&dir))
        .unwrap()
        .with_batch_docs(20_000);
    ix.update().unwrap();
    fs::write(Path::new(&dir).join("finished"), b"1").unwrap();
}

#[test]
fn sigkill_during_a_catch_up_loses_nothing_and_the_next_one_completes_it() {
    if std::env::var(WRITER_ENV).is_ok() {
        return;
    }
    journal_only();
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    let sessions = 200;
    for i in 0..sessions {
        make(st.as_ref(), &format!("s{i}"), "first words");
    }
    let mut ix = SearchIndex::open(tmp.path()).unwrap();
    ix.update().unwrap();
    settle();
    ix.update().unwrap();
    drop(ix);
    // 30,000 new messages: more than one committed batch (the child's 20,000).
    write_in_other_process(tmp.path(), &["bulk 200 150"]);
    let db = memoir::search::index_path(tmp.path()).unwrap();
    let indexed = |db: &Path| -> i64 {
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| c.query_row("SELECT count(*) FROM docs", [], |r| r.get(0)))
            .unwrap_or(0)
    };
    let before = indexed(&db);
    assert_eq!(before, sessions as i64);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "catchup::catchup_update_until_killed",
            "--nocapture",
        ])
        .env("MEMOIR_CATCHUP_KILL_DIR", tmp.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while indexed(&db) == before {
        assert!(
            start.elapsed().as_secs() < 120,
            "the catch-up never committed"
        );
        assert!(child.try_wait().unwrap().is_none(), "the child died");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !tmp.path().join("finished").exists(),
        "the child finished before the kill; the test proves nothing"
    );
    let partial = indexed(&db);
    assert!(partial > before && partial < before + 30_000, "{partial}");
    let mut ix = SearchIndex::open(tmp.path()).unwrap();
    assert!(!ix.rebuilt_on_open());
    let r = ix.update().unwrap();
    assert!(!r.full_scan, "replayed from the checkpoint it had: {r:?}");
    assert!(r.extended > 0, "{r:?}");
    assert_eq!(
        ix.stats().unwrap().messages,
        before as u64 + 30_000,
        "every message exactly once"
    );
    for id in ["s0", "s100", "s199"] {
        let hits = ix
            .search(&SearchQuery {
                text: "wombat".into(),
                k: 1000,
                mode: SearchMode::Lexical,
                filter: SearchFilter {
                    session: Some(id.into()),
                    ..Default::default()
                },
            })
            .unwrap();
        assert_eq!(hits.len(), 150, "{id}");
    }
}

#[test]
fn a_journal_that_cannot_answer_means_a_full_pass_that_misses_nothing() {
    journal_only();
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    make(st.as_ref(), "x", "plain words");
    make(st.as_ref(), "y", "plain words");
    let mut ix = SearchIndex::open_store(st.clone(), &tmp.path().join("search")).unwrap();
    ix.update().unwrap();
    settle();
    assert!(!ix.update().unwrap().full_scan);
    let journal = tmp.path().join("index").join("changes");
    // Lost (and the append it would have named goes unnoted).
    fs::remove_file(&journal).unwrap();
    say(st.as_ref(), "x", "an axolotl swims");
    let r = ix.update().unwrap();
    assert!(r.full_scan, "{r:?}");
    assert_eq!(sessions_with(&ix, "axolotl"), ["x"]);
    // Compacted by another cache: a new epoch.
    let j = Journal::new(tmp.path());
    j.compact(&j.position().unwrap())
        .unwrap()
        .expect("compacted");
    say(st.as_ref(), "y", "a tapir naps");
    let r = ix.update().unwrap();
    assert!(r.full_scan, "{r:?}");
    assert_eq!(sessions_with(&ix, "tapir"), ["y"]);
    let r = ix.update().unwrap();
    assert!(!r.full_scan, "{r:?}");
    assert_eq!(r.messages, 0);
}

#[test]
fn a_transient_read_error_never_consumes_a_change_unseen() {
    journal_only();
    let tmp = tempfile::tempdir().unwrap();
    let flaky = Arc::new(FlakyStore::new(tmp.path(), true));
    make(flaky.as_ref(), "a", "an okapi grazes");
    make(flaky.as_ref(), "b", "plain words");
    let mut ix = SearchIndex::open_store(flaky.clone(), &tmp.path().join("search")).unwrap();
    // The first full pass cannot read: it keeps no checkpoint.
    assert!(ix.update().unwrap().full_scan);
    flaky.set_failing(false);
    let r = ix.update().unwrap();
    assert!(r.full_scan, "a full pass again: {r:?}");
    assert_eq!(sessions_with(&ix, "okapi"), ["a"]);
    settle();
    assert!(!ix.update().unwrap().full_scan);
    // Another writer appends (noted in the journal); the next read fails.
    say(
        &FileStore::new(tmp.path(), Durability::None),
        "b",
        "a capybara appears",
    );
    flaky.set_failing(true);
    let during = ix.update().unwrap();
    assert_eq!(
        during.unreadable, 0,
        "not recorded as unreadable: {during:?}"
    );
    assert!(sessions_with(&ix, "capybara").is_empty());
    flaky.set_failing(false);
    let after = ix.update().unwrap();
    assert!(!after.full_scan, "{after:?}");
    assert_eq!(sessions_with(&ix, "capybara"), ["b"], "{after:?}");
}
