//! The file store's trash under crashes and concurrent writers: a restore killed between its link and its unlink, a
//! delete racing eight writers, and the manager's view of both.

use std::sync::{Arc, Barrier};

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

fn msg(text: &str) -> Record {
    Record::Message(Message::user(text))
}

/// The state a restore leaves when killed between `link` and `unlink`: the
/// live name and the trash entry are two links of one inode.
fn half_restored(store: &FileStore, id: &str) {
    store.delete(id).unwrap();
    let trashed = store.trash_dir().join(format!("{id}.jsonl"));
    std::fs::hard_link(&trashed, store.path_of(id).unwrap()).unwrap();
}

#[test]
fn a_half_done_restore_is_live_and_delete_really_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path(), Durability::None);
    store.create(&SessionMeta::new("twice")).unwrap();
    store.append("twice", &[msg("kept")], None).unwrap();
    half_restored(&store, "twice");
    // Listed once, as live; not in the trash listing.
    assert_eq!(store.list().unwrap().0.len(), 1);
    assert!(store.list_deleted().unwrap().is_empty());
    assert!(matches!(
        store.purge("twice"),
        Err(memoir::Error::NotFound(_))
    ));
    // Delete must not be a no-op rename between two links of one inode.
    store.delete("twice").unwrap();
    assert!(
        !store.path_of("twice").unwrap().exists(),
        "still live after delete"
    );
    assert!(store.list().unwrap().0.is_empty());
    assert_eq!(store.list_deleted().unwrap().len(), 1);
    assert_eq!(store.read_deleted("twice").unwrap().last_seq, 1);
    // A restore killed half-way is finished by the next restore.
    half_restored_again(&store, "twice");
    store.restore("twice").unwrap();
    assert!(store.list_deleted().unwrap().is_empty());
    assert_eq!(store.read("twice").unwrap().last_seq, 1);
    store.append("twice", &[msg("after")], Some(2)).unwrap();
}

/// Re-create the double state from a session already in the trash.
fn half_restored_again(store: &FileStore, id: &str) {
    let trashed = store.trash_dir().join(format!("{id}.jsonl"));
    std::fs::hard_link(&trashed, store.path_of(id).unwrap()).unwrap();
    // ...and take it back to trash-only, as `delete` would.
    store.delete(id).unwrap();
    std::fs::hard_link(&trashed, store.path_of(id).unwrap()).unwrap();
}

#[test]
fn the_manager_lists_a_half_restored_session_once_and_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = SessionManager::open(
        dir.path(),
        ManagerOptions {
            durability: Durability::None,
            ..Default::default()
        },
    )
    .unwrap();
    let id = m.create_session("task", None).unwrap();
    m.create_session("other", None).unwrap();
    let store = FileStore::new(dir.path(), Durability::None);
    half_restored(&store, &id);
    let listed: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(listed.iter().filter(|x| **x == id).count(), 1);
    assert!(m.list_trash().unwrap().is_empty());
    assert!(m.delete_session(&id).unwrap());
    let listed: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert!(
        !listed.contains(&id),
        "delete said yes but the session stays listed"
    );
    assert_eq!(m.list_trash().unwrap().len(), 1);
}

#[test]
fn a_different_session_in_the_trash_is_never_overwritten_by_delete() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path(), Durability::None);
    store.create(&SessionMeta::new("dup")).unwrap();
    store.append("dup", &[msg("first life")], None).unwrap();
    store.delete("dup").unwrap();
    // The store itself lets the id be created again (the manager refuses).
    store.create(&SessionMeta::new("dup")).unwrap();
    assert!(matches!(
        store.delete("dup"),
        Err(memoir::Error::SessionExists(_))
    ));
    assert_eq!(
        store.read_deleted("dup").unwrap().last_seq,
        1,
        "first life kept"
    );
    assert_eq!(store.read("dup").unwrap().last_seq, 0);
}

/// Eight writers, each with its own store handle (its own descriptors and
/// locks, as separate processes have), append as fast as they can while the
/// session is deleted. Right after `delete` returns, the test takes the
/// trashed file's append lock itself, notes its last `seq` and holds the lock
/// a while, so writers that opened the transcript before the rename queue up
/// behind it: once it lets go, none of them may write (they get `NotFound`),
/// and every acknowledged record is in the trashed log exactly once.
#[test]
fn no_append_lands_in_the_trash_after_delete_returned() {
    const WRITERS: usize = 8;
    for round in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let id = format!("hot-{round}");
        let main = FileStore::new(dir.path(), Durability::None);
        main.create(&SessionMeta::new(id.clone())).unwrap();
        let barrier = Arc::new(Barrier::new(WRITERS + 1));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (dir, id, barrier) = (dir.path().to_path_buf(), id.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let store = FileStore::new(&dir, Durability::Flush);
                    barrier.wait();
                    let mut acked = 0u64;
                    for i in 0.. {
                        match store.append(&id, &[msg(&format!("w{w}-{i}"))], None) {
                            Ok(_) => acked += 1,
                            Err(memoir::Error::NotFound(_)) => break,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    acked
                })
            })
            .collect();
        barrier.wait();
        std::thread::sleep(std::time::Duration::from_millis(5));
        main.delete(&id).unwrap();
        let trashed_path = main.trash_dir().join(format!("{id}.jsonl"));
        let held = std::fs::File::open(&trashed_path).unwrap();
        held.lock().unwrap();
        let at_delete = main.read_deleted(&id).unwrap().last_seq;
        std::thread::sleep(std::time::Duration::from_millis(30));
        held.unlock().unwrap();
        let acked: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
        let trashed = main.read_deleted(&id).unwrap();
        assert_eq!(
            trashed.last_seq, at_delete,
            "round {round}: records landed in the trash after delete returned"
        );
        assert_eq!(
            acked, trashed.last_seq,
            "round {round}: every ack in the log once"
        );
        assert!(trashed.report.is_clean(), "{:?}", trashed.report);
    }
}
