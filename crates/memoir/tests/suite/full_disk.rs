//! A real full disk: every write step on a small tmpfs that is
//! filled to the last byte. CI (`.ci/run`, as root) mounts one and names it in
//! `MEMOIR_TEST_TMPFS`; without it the test fails under CI (`CI` set) and
//! elsewhere prints a notice and passes.
//! The `RLIMIT_FSIZE` variant lives in `memoir-cli/tests/cli/processes.rs`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use memoir::blob::ArtifactStore as BlobStore;
use memoir::manager::SessionManager;
use memoir::message::Message;
use memoir::record::SessionMeta;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;

/// Fill the file system holding `dir` until a write fails; returns the filler.
fn fill(dir: &Path) -> PathBuf {
    let filler = dir.join("filler");
    let mut f = fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 16 * 1024];
    while f.write_all(&chunk).is_ok() {}
    // Take the last partial pages too.
    while f.write_all(&[0u8]).is_ok() {}
    let _ = f.sync_all();
    filler
}

fn no_temp_files(dir: &Path) {
    let temps: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "temp files left: {temps:?}");
}

fn last_seq(store: &FileStore, id: &str) -> u64 {
    let log = store.read(id).unwrap();
    assert!(log.report.is_clean(), "{id}: {:?}", log.report);
    log.last_seq
}

#[test]
fn every_write_step_on_a_full_tmpfs_fails_cleanly_and_recovers() {
    let Some(root) = std::env::var_os("MEMOIR_TEST_TMPFS") else {
        assert!(
            !crate::support::in_ci(),
            "MEMOIR_TEST_TMPFS is not set, but CI is: the full-disk test must run in CI \
             (.ci/run mounts a small tmpfs as root and names it there)"
        );
        eprintln!("skipped: MEMOIR_TEST_TMPFS is not set (CI mounts a small tmpfs; see .ci/run)");
        return;
    };
    let base = Path::new(&root).join(format!("full-{}", std::process::id()));
    let dir = base.join("sessions");
    fs::create_dir_all(&dir).unwrap();
    let store = FileStore::new(&dir, Durability::Fsync);
    store.create(&SessionMeta::new("a")).unwrap();
    store.create(&SessionMeta::new("torn")).unwrap();
    let s = Session::open(&dir.join("a.jsonl")).unwrap();
    s.append_messages(&[Message::user("before")]).unwrap();
    let mut m = SessionManager::open(&dir, Default::default()).unwrap();
    m.append_session_messages("a", vec![Message::user("indexed")])
        .unwrap();
    // A torn tail whose repair must save its bytes first.
    fs::OpenOptions::new()
        .append(true)
        .open(dir.join("torn.jsonl"))
        .unwrap()
        .write_all(&vec![b'x'; 64 * 1024])
        .unwrap();
    let blobs = BlobStore::open(&base.join("blobs")).unwrap();
    let a_seq = last_seq(&store, "a");

    let filler = fill(&base);
    let big = "y".repeat(256 * 1024);
    // Append and batch append: refused, nothing half-written.
    assert!(s.append_messages(&[Message::user(&big)]).is_err());
    assert!(s
        .append_messages(&[
            Message::user(&big),
            Message::user(&big),
            Message::user(&big)
        ])
        .is_err());
    assert_eq!(last_seq(&store, "a"), a_seq);
    // Repair: the side copy cannot be written, so nothing is cut.
    let torn_len = fs::metadata(dir.join("torn.jsonl")).unwrap().len();
    assert!(store
        .append(
            "torn",
            &[memoir::Record::Message(Message::user(&big))],
            None
        )
        .is_err());
    assert_eq!(
        fs::metadata(dir.join("torn.jsonl")).unwrap().len(),
        torn_len
    );
    // Create and fork: either refused with nothing left, or complete.
    let mut header = SessionMeta::new("b");
    header.title = Some(big.clone());
    assert!(store.create(&header).is_err());
    assert!(!dir.join("b.jsonl").exists());
    match m.fork_session("a", None) {
        Ok(f) => assert!(Session::read(&dir.join(format!("{}.jsonl", f.id)))
            .unwrap()
            .report
            .is_clean()),
        Err(e) => eprintln!("fork refused: {e}"),
    }
    // Index update.
    let _ = m.append_session_messages("a", vec![Message::user(&big)]);
    // Blob write: refused, and no partial blob is visible.
    let blob = vec![7u8; 512 * 1024];
    assert!(blobs.put(&blob).is_err());
    no_temp_files(&dir);

    // Space again: every step works and every earlier record is intact.
    fs::remove_file(filler).unwrap();
    let after = s.append_messages(&[Message::user("after")]).unwrap();
    assert_eq!(after.first_seq, last_seq(&store, "a"));
    let repaired = store
        .append(
            "torn",
            &[memoir::Record::Message(Message::user("ok"))],
            None,
        )
        .unwrap();
    assert!(repaired.repaired.is_some());
    store.create(&header).unwrap();
    m.fork_session("a", None).unwrap();
    let hash = blobs.put(&blob).unwrap();
    assert_eq!(blobs.load(&hash).unwrap(), blob);
    let t = Session::read(&dir.join("a.jsonl")).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    let texts: Vec<String> = t.messages.iter().map(|m| m.text_content()).collect();
    assert_eq!(texts.first().map(String::as_str), Some("before"));
    assert_eq!(texts.last().map(String::as_str), Some("after"));
    assert!(m.list_sessions().unwrap().iter().any(|e| e.id == "a"));
    fs::remove_dir_all(&base).unwrap();
}
