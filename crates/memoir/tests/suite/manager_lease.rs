//! The owner lease across real processes: a manager in another process holds
//! the session it drives; a second manager is refused with the holder named;
//! when the holder is killed with SIGKILL, the next manager takes the lease
//! over and reports whose it was.
//!
//! The holder is this test binary itself, re-run with `MEMOIR_LEASE_HOLDER`
//! set (it switches to the session, writes `holder-ready` and waits).

use std::process::{Command, Stdio};

use memoir::manager::{ManagerError, ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::store::Durability;

const HOLDER_ENV: &str = "MEMOIR_LEASE_HOLDER";

fn options() -> ManagerOptions {
    ManagerOptions {
        durability: Durability::None,
        ..Default::default()
    }
}

/// Run as the holder process when asked to (a no-op test otherwise).
#[test]
fn lease_holder_process() {
    let Ok(spec) = std::env::var(HOLDER_ENV) else {
        return;
    };
    let (dir, id) = spec.split_once('\n').unwrap();
    let mut m = SessionManager::open(std::path::Path::new(dir), options()).unwrap();
    assert!(m.switch_session(id).unwrap());
    assert!(m.lease().is_some());
    std::fs::write(std::path::Path::new(dir).join("holder-ready"), b"").unwrap();
    std::thread::sleep(std::time::Duration::from_secs(120));
}

#[test]
fn a_live_holder_is_refused_and_a_killed_one_is_taken_over() {
    if std::env::var(HOLDER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let mut m = SessionManager::open(dir.path(), options()).unwrap();
        m.create_session("driven elsewhere", None).unwrap()
    };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "manager_lease::lease_holder_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER_ENV, format!("{}\n{id}", dir.path().display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = dir.path().join("holder-ready");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the holder never got ready"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the holder exited early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut m = SessionManager::open(dir.path(), options()).unwrap();
    match m.switch_session(&id) {
        Err(ManagerError::Store(memoir::Error::Busy { pid, .. })) => assert_eq!(pid, child.id()),
        other => panic!("expected Busy naming pid {}, got {other:?}", child.id()),
    }
    // SIGKILL: the holder cannot release anything; the kernel drops its lock.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(m.switch_session(&id).unwrap());
    let lease = m.lease().expect("the lease was taken over");
    let dead = lease
        .recovered_from
        .as_ref()
        .expect("the dead holder is named");
    assert_eq!(dead.pid, child.id());
    assert_eq!(lease.holder.pid, std::process::id());
}

/// Two managers on one store: while the first drives a session (holding its
/// owner lease), the second's `append_session_messages` is refused with
/// `Busy` naming the holder and writes nothing; once the first lets go, the
/// same append goes through.
#[test]
fn an_append_from_a_second_manager_honours_the_lease() {
    if std::env::var(HOLDER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut first = SessionManager::open(dir.path(), options()).unwrap();
    let id = first.create_session("driven", None).unwrap();
    first.add_message(Message::user("mine")).unwrap();
    first.flush().unwrap();
    assert!(first.lease().is_some());

    let mut second = SessionManager::open(dir.path(), options()).unwrap();
    match second.append_session_messages(&id, vec![Message::user("intruder")]) {
        Err(ManagerError::Store(memoir::Error::Busy { id: busy, pid, .. })) => {
            assert_eq!(busy, id);
            assert_eq!(pid, std::process::id());
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    let texts = |m: &SessionManager| -> Vec<String> {
        m.read_session_messages(&id)
            .unwrap()
            .iter()
            .map(Message::text_content)
            .collect()
    };
    let before = texts(&second);
    assert_eq!(before.last().map(String::as_str), Some("mine"));
    assert!(!before.iter().any(|t| t == "intruder"), "{before:?}");

    drop(first);
    second
        .append_session_messages(&id, vec![Message::user("after")])
        .unwrap();
    let mut want = before;
    want.push("after".into());
    assert_eq!(texts(&second), want);
}
