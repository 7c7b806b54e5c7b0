//! The listing snapshot and the change journal with real
//! processes: sessions appended by other processes (through the store, with
//! no index update, as `memoir serve` appends; or killed with SIGKILL between
//! an append and its index update) are listed fresh from the snapshot, and a
//! corrupt, stale or orphaned snapshot is detected and rebuilt.
//!
//! The appending processes are this test binary itself, re-run with
//! `MEMOIR_LISTING_APPENDER` set.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use memoir::manager::{IndexEntry, ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::record::Record;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::read_in;

use crate::support::flaky_store::FlakyStore;

const APPENDER_ENV: &str = "MEMOIR_LISTING_APPENDER";

fn options() -> ManagerOptions {
    ManagerOptions {
        durability: Durability::None,
        ..Default::default()
    }
}

fn manager(dir: &Path) -> SessionManager {
    // Only the change journal may reveal a change here: no random checks
    // of entries against their transcripts (they would hide a missed note).
    memoir::manager::index::VERIFY_SAMPLE.store(0, std::sync::atomic::Ordering::Relaxed);
    SessionManager::open(dir, options()).unwrap()
}

fn sessions(dir: &Path, n: usize) -> Vec<String> {
    let mut m = manager(dir);
    (0..n)
        .map(|i| {
            let id = m.create_session(&format!("session {i}"), None).unwrap();
            m.add_messages([Message::user(format!("first of {i}"))])
                .unwrap();
            m.flush().unwrap();
            id
        })
        .collect()
}

/// Run as an appender when asked to: `<dir>\n<count or "forever">\n<id>...`;
/// appends one message per call round-robin through the store (no index).
#[test]
fn listing_appender_process() {
    let Ok(spec) = std::env::var(APPENDER_ENV) else {
        return;
    };
    let mut lines = spec.lines();
    let dir = lines.next().unwrap();
    let count: Option<usize> = lines.next().unwrap().parse().ok();
    let ids: Vec<&str> = lines.collect();
    let store = FileStore::new(dir, Durability::None);
    let mut i = 0;
    while count.is_none_or(|c| i < c) {
        let id = ids[i % ids.len()];
        let m = Message::assistant(format!("appended {i} by {}", std::process::id()));
        store.append(id, &[Record::Message(m)], None).unwrap();
        i += 1;
        if count.is_some() {
            // Paced, so the parent's listings overlap the appends even when
            // this process starts late on a loaded machine.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn appender(dir: &Path, count: Option<usize>, ids: &[String]) -> Child {
    let count = count.map_or("forever".to_string(), |c| c.to_string());
    // Its stderr goes beside the store (outside it), for a failure message.
    let log = fs::File::create(stderr_path(dir, &ids[0])).unwrap();
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "listing::listing_appender_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            APPENDER_ENV,
            format!("{}\n{count}\n{}", dir.display(), ids.join("\n")),
        )
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn stderr_path(dir: &Path, first_id: &str) -> std::path::PathBuf {
    dir.with_extension(format!("{first_id}.stderr"))
}

/// Each session's message count and last seq, read from its transcript.
fn truth(dir: &Path, ids: &[String]) -> Vec<(String, usize, u64)> {
    let store = FileStore::new(dir, Durability::None);
    let mut out: Vec<_> = ids
        .iter()
        .map(|id| {
            let t = read_in(&store, id).unwrap();
            (id.clone(), t.messages.len(), t.last_seq)
        })
        .collect();
    out.sort();
    out
}

fn listed(entries: &[IndexEntry]) -> Vec<(String, usize, u64)> {
    let mut out: Vec<_> = entries
        .iter()
        .map(|e| (e.id.clone(), e.messages, e.last_seq))
        .collect();
    out.sort();
    out
}

/// The store directory's mtime must be old enough for the snapshot to be
/// used without reading the directory (a change within 2 s is re-checked).
fn settle() {
    std::thread::sleep(Duration::from_millis(2100));
}

#[test]
fn appends_by_other_processes_while_listing_are_listed_fresh() {
    if std::env::var(APPENDER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ids = sessions(dir.path(), 8);
    let m = manager(dir.path());
    assert!(m.list_sessions_report().unwrap().full_scan, "first listing");
    settle();
    assert!(!m.list_sessions_report().unwrap().full_scan);
    let before: usize = truth(dir.path(), &ids).iter().map(|t| t.1).sum();
    let children: Vec<Child> = (0..3)
        .map(|k| appender(dir.path(), Some(60), &ids[k * 2..k * 2 + 4]))
        .collect();
    // List while they append: counts only grow, never past the truth.
    let mut last = listed(&m.list_sessions().unwrap());
    let mut listings = 0;
    let mut children = children;
    while children.iter_mut().any(|c| c.try_wait().unwrap().is_none()) {
        let now = listed(&m.list_sessions().unwrap());
        assert_eq!(
            now.len(),
            last.len(),
            "a session vanished: {last:?} -> {now:?}"
        );
        for (before, after) in last.iter().zip(&now) {
            assert_eq!(before.0, after.0);
            assert!(
                after.1 >= before.1,
                "{} went back: {before:?} -> {after:?}",
                after.0
            );
        }
        last = now;
        listings += 1;
    }
    for (k, c) in children.iter_mut().enumerate() {
        let status = c.wait().unwrap();
        let log = stderr_path(dir.path(), &ids[k * 2]);
        let said = fs::read_to_string(&log).unwrap_or_default();
        let _ = fs::remove_file(&log);
        assert!(status.success(), "appender {k} failed ({status}): {said}");
    }
    assert!(listings > 0, "no listing overlapped the appenders");
    let report = m.list_sessions_report().unwrap();
    assert_eq!(
        listed(&report.entries),
        truth(dir.path(), &ids),
        "after {listings} listings; rebuilt {}, full scan {}, journal:\n{}",
        report.rebuilt,
        report.full_scan,
        fs::read_to_string(dir.path().join("index").join("changes")).unwrap_or_default()
    );
    assert_eq!(
        report.entries.iter().map(|e| e.messages).sum::<usize>(),
        before + 180,
        "every acknowledged append is counted"
    );
    assert!(
        !report.full_scan,
        "the snapshot was used, not a stat of every transcript"
    );
}

#[test]
fn an_appender_killed_mid_run_is_listed_as_its_transcripts_say() {
    if std::env::var(APPENDER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ids = sessions(dir.path(), 4);
    let m = manager(dir.path());
    m.list_sessions().unwrap();
    settle();
    let mut child = appender(dir.path(), None, &ids);
    let path = dir.path().join(format!("{}.jsonl", ids[3]));
    let start_len = fs::metadata(&path).unwrap().len();
    let deadline = Instant::now() + Duration::from_secs(60);
    while fs::metadata(&path).unwrap().len() < start_len + 4096 {
        assert!(Instant::now() < deadline, "the appender made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = fs::remove_file(stderr_path(dir.path(), &ids[0]));
    let report = m.list_sessions_report().unwrap();
    assert_eq!(listed(&report.entries), truth(dir.path(), &ids));
    assert!(!report.full_scan);
    assert!(report.rebuilt >= 1, "the appended sessions were re-read");
}

#[test]
fn a_corrupt_stale_or_orphaned_snapshot_is_detected_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let ids = sessions(dir.path(), 5);
    let m = manager(dir.path());
    let snapshot = dir.path().join("index").join("listing");
    let journal = dir.path().join("index").join("changes");
    m.list_sessions().unwrap();
    assert!(snapshot.exists() && journal.exists());
    let want = truth(dir.path(), &ids);

    // A flipped byte, a cut, or an empty file: never trusted, rebuilt.
    let good = fs::read(&snapshot).unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x20;
    for bad in [flipped, good[..good.len() - 9].to_vec(), Vec::new()] {
        fs::write(&snapshot, &bad).unwrap();
        let r = m.list_sessions_report().unwrap();
        assert!(r.full_scan, "a damaged snapshot must not be used");
        assert_eq!(listed(&r.entries), want);
        assert_ne!(fs::read(&snapshot).unwrap(), bad, "rewritten");
    }

    // A snapshot whose journal is gone (or restarted): what changed since is
    // unknown, so every transcript is checked.
    let store = FileStore::new(dir.path(), Durability::None);
    fs::remove_file(&journal).unwrap();
    store
        .append(&ids[0], &[Record::Message(Message::user("unseen"))], None)
        .unwrap();
    let r = m.list_sessions_report().unwrap();
    assert!(r.full_scan);
    assert_eq!(listed(&r.entries), truth(dir.path(), &ids));

    // Sessions that appear or vanish behind the index's back (a transcript
    // moved in by hand, one removed) change the directory: picked up
    // without a full scan.
    settle();
    assert!(!m.list_sessions_report().unwrap().full_scan);
    let other = tempfile::tempdir().unwrap();
    let moved_in = sessions(other.path(), 1).remove(0);
    fs::rename(
        other.path().join(format!("{moved_in}.jsonl")),
        dir.path().join(format!("{moved_in}.jsonl")),
    )
    .unwrap();
    fs::remove_file(dir.path().join(format!("{}.jsonl", ids[4]))).unwrap();
    let r = m.list_sessions_report().unwrap();
    assert!(!r.full_scan);
    let mut now: Vec<String> = ids[..4].to_vec();
    now.push(moved_in);
    assert_eq!(listed(&r.entries), truth(dir.path(), &now));
    assert_eq!(r.removed, 1, "the vanished session's entry is removed");
}

#[test]
fn a_transient_read_error_never_drops_a_session_from_later_listings() {
    if std::env::var(APPENDER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ids = sessions(dir.path(), 3);
    let index = memoir::manager::index::Index::new(dir.path());
    let reader = FlakyStore::new(dir.path(), false);
    index.list(&reader).unwrap();
    // Another process appends (noted in the change journal); the next
    // listing's read of that transcript fails once.
    let writer = FileStore::new(dir.path(), Durability::None);
    let m = Message::assistant("appended while the disk hiccuped");
    writer.append(&ids[1], &[Record::Message(m)], None).unwrap();
    reader.set_failing(true);
    let during = index.list(&reader).unwrap();
    assert_eq!(
        during.entries.len(),
        3,
        "a session whose read failed for a transient reason is still listed"
    );
    assert_eq!(during.unreadable, 0, "and not counted as unreadable");
    reader.set_failing(false);
    let after = index.list(&reader).unwrap();
    assert_eq!(listed(&after.entries), truth(dir.path(), &ids));
    assert!(!after.full_scan, "caught up from the journal");
}

/// Sessions written through the ingest API (what importers use) keep their
/// listing entries current as they are created and appended to: the first
/// listing rebuilds none of them, and each entry is the one a rebuild from
/// the transcript gives (a fork's counts its inherited messages).
#[test]
fn ingested_sessions_are_listed_without_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let m = manager(dir.path());
    let with_usage = |text: &str, tokens: u64| {
        let mut msg = Message::assistant(text);
        msg.usage = Some(memoir::message::Usage {
            input_tokens: tokens,
            output_tokens: tokens / 2,
            ..Default::default()
        });
        Record::Message(msg)
    };
    m.create_with_header(memoir::record::SessionMeta::new("ingested-a"))
        .unwrap();
    m.append_records_to(
        "ingested-a",
        &[
            Record::Message(Message::user("first question")),
            with_usage("first answer", 100),
        ],
    )
    .unwrap();
    m.append_records_to(
        "ingested-a",
        &[
            Record::Title {
                title: "renamed".into(),
            },
            Record::Message(Message::user("second question")),
            with_usage("second answer", 40),
        ],
    )
    .unwrap();
    let point = m.fork_reference("ingested-a", 2).unwrap().unwrap();
    let mut fork = memoir::record::SessionMeta::new("ingested-b");
    fork.parent = Some(point);
    m.create_with_header(fork).unwrap();
    m.append_records_to("ingested-b", &[with_usage("another answer", 7)])
        .unwrap();
    m.create_with_header(memoir::record::SessionMeta::new("ingested-c"))
        .unwrap();

    let listing = m.list_sessions_report().unwrap();
    assert_eq!(listing.entries.len(), 3);
    assert_eq!(listing.rebuilt, 0, "entries rebuilt by the first listing");
    for e in &listing.entries {
        let want = IndexEntry::from_transcript(&m.read_stored(&e.id).unwrap());
        assert_eq!(
            (
                &e.title,
                e.messages,
                e.inherited,
                e.estimated_tokens,
                &e.message_usage,
                e.last_seq
            ),
            (
                &want.title,
                want.messages,
                want.inherited,
                want.estimated_tokens,
                &want.message_usage,
                want.last_seq
            ),
            "{}",
            e.id
        );
    }
    let b = listing
        .entries
        .iter()
        .find(|e| e.id == "ingested-b")
        .unwrap();
    assert_eq!((b.messages, b.inherited), (3, 2));
}

#[test]
fn a_memoised_listing_is_reused_until_the_store_changes() {
    let dir = tempfile::tempdir().unwrap();
    let ids = sessions(dir.path(), 4);
    let m = manager(dir.path());
    let mut memo = memoir::manager::ListingMemo::default();
    let first = m.list_sessions_memo(&mut memo).unwrap();
    assert_eq!(listed(&first), truth(dir.path(), &ids));
    settle();
    // Listed once more so the snapshot records a settled directory.
    let settled = m.list_sessions_memo(&mut memo).unwrap();
    assert_eq!(listed(&settled), truth(dir.path(), &ids));

    // Unchanged: the kept entries themselves, the snapshot not even read.
    let snapshot = dir.path().join("index").join("listing");
    fs::write(&snapshot, b"not a snapshot").unwrap();
    let again = m.list_sessions_memo(&mut memo).unwrap();
    assert!(std::sync::Arc::ptr_eq(&settled, &again));

    // Appended to by another writer (the store only, no index update) and a
    // session created by another manager: both seen at the next listing.
    let store = FileStore::new(dir.path(), Durability::None);
    store
        .append(&ids[1], &[Record::Message(Message::user("later"))], None)
        .unwrap();
    let mut more = ids.clone();
    more.extend(sessions(dir.path(), 1));
    let fresh = m.list_sessions_memo(&mut memo).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&again, &fresh));
    assert_eq!(listed(&fresh), truth(dir.path(), &more));
    assert_eq!(listed(&fresh), listed(&m.list_sessions().unwrap()));
}
