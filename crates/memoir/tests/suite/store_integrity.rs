//! File-store integrity: repair idempotence, atomic batches, seq
//! continuation, special files, temp sweeping, read-only reads and fsync
//! poisoning through the fault-injection seam. Real files in temp dirs.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::fault::FaultPlan;
use memoir::store::file::FileStore;
use memoir::store::{Durability, IssueKind, LogStore};
use memoir::transcript::Session;
use memoir::Error;

fn store(dir: &Path) -> FileStore {
    FileStore::new(dir, Durability::Fsync)
}

fn msg(text: &str) -> Record {
    Record::Message(Message::user(text))
}

fn texts(store: &FileStore, id: &str) -> Vec<String> {
    let t = memoir::transcript::read_in(store, id).unwrap();
    t.messages.iter().map(|m| m.text_content()).collect()
}

fn with_session(dir: &Path, id: &str, n: usize) -> (FileStore, PathBuf) {
    let s = store(dir);
    s.create(&SessionMeta::new(id)).unwrap();
    for i in 0..n {
        s.append(id, &[msg(&format!("m{i}"))], None).unwrap();
    }
    let path = s.path_of(id).unwrap();
    (s, path)
}

fn append_raw(path: &Path, bytes: &[u8]) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn a_leftover_identical_torn_side_file_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = with_session(dir.path(), "s", 2);
    let offset = fs::metadata(&path).unwrap().len();
    append_raw(&path, b"{\"seq\":3,\"record\":\"mess");
    // A repair that crashed after saving the side file, before truncating.
    let side = dir.path().join(format!("s.jsonl.torn-{offset}"));
    fs::write(&side, b"{\"seq\":3,\"record\":\"mess").unwrap();
    let s = store(dir.path());
    let a = s.append("s", &[msg("after")], None).unwrap();
    assert_eq!(a.first_seq, 3);
    assert_eq!(a.repaired.unwrap().saved_to, side);
    assert_eq!(texts(&s, "s"), ["m0", "m1", "after"]);
    assert!(s.read("s").unwrap().report.is_clean());
}

#[test]
fn a_leftover_different_torn_side_file_is_kept_and_a_new_name_used() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = with_session(dir.path(), "s", 1);
    let offset = fs::metadata(&path).unwrap().len();
    append_raw(&path, b"{\"seq\":2,\"record\":\"message\",\"ro");
    // A side file cut short by a full disk while it was being written.
    let side = dir.path().join(format!("s.jsonl.torn-{offset}"));
    fs::write(&side, b"{\"seq\":2").unwrap();
    let s = store(dir.path());
    let a = s.append("s", &[msg("after")], None).unwrap();
    let saved = a.repaired.unwrap().saved_to;
    assert_eq!(saved, dir.path().join(format!("s.jsonl.torn-{offset}.1")));
    assert_eq!(
        fs::read(&side).unwrap(),
        b"{\"seq\":2",
        "the old copy is untouched"
    );
    assert_eq!(
        fs::read(&saved).unwrap(),
        b"{\"seq\":2,\"record\":\"message\",\"ro"
    );
    assert_eq!(texts(&s, "s"), ["m0", "after"]);
}

#[test]
fn a_full_disk_during_repair_leaves_the_session_appendable() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = with_session(dir.path(), "s", 1);
    append_raw(&path, b"{\"seq\":2,\"rec");
    let before = fs::read(&path).unwrap();
    let plan = FaultPlan::new();
    let s = FileStore::with_faults(dir.path(), Durability::Fsync, plan.clone());
    plan.fail_write(1); // the side file's write
    assert!(matches!(
        s.append("s", &[msg("x")], None),
        Err(Error::Io { op: "write", .. })
    ));
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "nothing cut before the copy is safe"
    );
    plan.fail_truncate(1); // now the copy succeeds but the cut fails
    assert!(s.append("s", &[msg("x")], None).is_err());
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Space is back: the next append repairs (reusing the copy) and goes on.
    let a = s.append("s", &[msg("after")], None).unwrap();
    assert_eq!(a.first_seq, 2);
    assert!(a.repaired.is_some());
    assert_eq!(texts(&s, "s"), ["m0", "after"]);
}

#[test]
fn a_batch_is_atomic_for_readers_and_a_partial_one_is_cut_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (s, path) = with_session(dir.path(), "s", 1);
    let full = fs::metadata(&path).unwrap().len();
    let a = s
        .append("s", &[msg("b1"), msg("b2"), msg("b3")], None)
        .unwrap();
    assert_eq!((a.first_seq, a.last_seq), (2, 4));
    assert_eq!(texts(&s, "s"), ["m0", "b1", "b2", "b3"]);
    let bytes = fs::read(&path).unwrap();
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), 5);
    // A crash after two of the three lines (cut at a line boundary and mid-line).
    for cut in [
        bytes.len() - lines[4].len(),
        bytes.len() - lines[4].len() / 2,
        full as usize + lines[2].len() / 3,
    ] {
        fs::write(&path, &bytes[..cut]).unwrap();
        let fresh = store(dir.path());
        let log = fresh.read("s").unwrap();
        assert_eq!(log.last_seq, 1, "cut {cut}: none of the batch is visible");
        assert_eq!(texts(&fresh, "s"), ["m0"]);
        assert!(
            log.report.issues.iter().any(|i| matches!(
                i.kind,
                IssueKind::PartialBatch { last_seq: 4, .. } | IssueKind::TornTail { .. }
            )),
            "{:?}",
            log.report
        );
        let a = fresh.append("s", &[msg("next")], None).unwrap();
        assert_eq!(
            a.first_seq, 2,
            "cut {cut}: the append replaces the partial batch"
        );
        let cut_at = a.repaired.expect("the partial batch is cut").offset;
        assert_eq!(cut_at, full, "cut {cut}: the whole batch goes aside");
        let log = fresh.read("s").unwrap();
        assert!(log.report.is_clean(), "cut {cut}: {:?}", log.report);
        assert_eq!(texts(&fresh, "s"), ["m0", "next"]);
        for e in fs::read_dir(dir.path()).unwrap() {
            let p = e.unwrap().path();
            if p.to_string_lossy().contains(".torn-") {
                fs::remove_file(p).unwrap();
            }
        }
    }
}

#[test]
fn an_append_after_a_copied_older_tail_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = with_session(dir.path(), "s", 20);
    let bytes = fs::read(&path).unwrap();
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    // Lines 3 and 4 copied to the end (a reordered/copied tail).
    append_raw(&path, &[lines[3], lines[4]].concat());
    let s = store(dir.path());
    let a = s.append("s", &[msg("after")], None).unwrap();
    assert_eq!(a.first_seq, 21, "continues after the highest verified seq");
    let t = memoir::transcript::read_in(&s, "s").unwrap();
    assert_eq!(t.last_seq, 21);
    assert_eq!(t.messages.last().unwrap().text_content(), "after");
    assert_eq!(t.messages.len(), 21);
    // The copies are reported, the new record is not.
    assert!(t
        .report
        .issues
        .iter()
        .all(|i| matches!(i.kind, IssueKind::SkippedOutOfOrder { .. })));
    assert_eq!(t.report.issues.len(), 2);
}

#[test]
fn special_files_are_refused_in_read_list_and_append() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    s.create(&SessionMeta::new("ok")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.jsonl")).unwrap();
    let target = dir.path().join("real");
    fs::write(&target, b"").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("link.jsonl")).unwrap();
    let fifo = dir.path().join("fifo.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    fs::create_dir(dir.path().join("dir.jsonl")).unwrap();
    for (id, kind) in [
        ("zero", "symlink"),
        ("link", "symlink"),
        ("fifo", "fifo"),
        ("dir", "directory"),
    ] {
        for result in [
            s.read(id).map(|_| ()),
            s.read_header(id).map(|_| ()),
            s.append(id, &[msg("x")], None).map(|_| ()),
        ] {
            match result {
                Err(Error::NotRegularFile { kind: k, .. }) => assert_eq!(k, kind, "{id}"),
                other => panic!("{id}: {other:?}"),
            }
        }
    }
    let (listed, unreadable) = s.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(unreadable, 4);
    assert_eq!(
        fs::metadata(&target).unwrap().len(),
        0,
        "nothing written through a link"
    );
}

#[test]
fn stale_temp_files_are_swept_and_live_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path()).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    let uuid = "0123456789abcdef0123456789abcdef";
    // pid 4194304 exceeds Linux's pid_max: never alive.
    let dead = dir.path().join(format!(".f.jsonl.4194304.{uuid}.tmp"));
    let live = dir
        .path()
        .join(format!(".g.jsonl.{}.{uuid}.tmp", std::process::id()));
    let young = dir.path().join(format!(".h.jsonl.4194304.{uuid}.tmp"));
    let unrelated = dir.path().join(".notes.tmp");
    for p in [&dead, &live, &young, &unrelated] {
        fs::write(p, b"partial").unwrap();
    }
    for p in [&dead, &live, &unrelated] {
        fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    store(dir.path()).create(&SessionMeta::new("new")).unwrap();
    assert!(!dead.exists(), "a dead writer's temp file is swept");
    assert!(live.exists() && young.exists() && unrelated.exists());
}

#[test]
fn reads_never_create_the_store_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope").join("sessions");
    assert!(Session::list(&missing).unwrap().is_empty());
    assert!(matches!(
        Session::find(&missing, "abc"),
        Err(Error::NotFound(_))
    ));
    let m = memoir::manager::SessionManager::open(&missing, Default::default()).unwrap();
    assert!(m.list_sessions().unwrap().is_empty());
    assert!(!missing.exists(), "a read created {}", missing.display());
}

#[test]
fn a_failed_fsync_poisons_the_session_until_reverified() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let s = FileStore::with_faults(dir.path(), Durability::Fsync, plan.clone());
    s.create(&SessionMeta::new("s")).unwrap();
    s.append("s", &[msg("one")], None).unwrap();
    plan.fail_sync(1);
    assert!(matches!(
        s.append("s", &[msg("lost")], None),
        Err(Error::Io { op: "fsync", .. })
    ));
    match s.append("s", &[msg("refused")], None) {
        Err(Error::Poisoned { id, .. }) => assert_eq!(id, "s"),
        other => panic!("expected Poisoned, got {other:?}"),
    }
    // Another session of the same store is unaffected.
    s.create(&SessionMeta::new("t")).unwrap();
    s.append("t", &[msg("fine")], None).unwrap();
    assert_eq!(s.reverify("s").unwrap(), 2);
    s.append("s", &[msg("two")], None).unwrap();
    assert_eq!(texts(&s, "s"), ["one", "two"]);
    assert!(s.read("s").unwrap().report.is_clean());
}

#[test]
fn a_failed_write_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let s = FileStore::with_faults(dir.path(), Durability::Flush, plan.clone());
    s.create(&SessionMeta::new("s")).unwrap();
    plan.fail_write(1);
    let big: Vec<Record> = (0..5)
        .map(|i| msg(&format!("{i}{}", "y".repeat(5000))))
        .collect();
    assert!(s.append("s", &big, None).is_err());
    let log = s.read("s").unwrap();
    assert!(
        log.report.is_clean() && log.last_seq == 0,
        "{:?}",
        log.report
    );
    s.append("s", &big, None).unwrap();
    assert_eq!(s.read("s").unwrap().last_seq, 5);
    let _ = Arc::strong_count(&plan);
}
