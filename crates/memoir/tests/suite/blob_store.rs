//! The content-addressed blob store on disk: round trips, dedup and
//! persisted reference counts, corruption detection, garbage collection,
//! concurrent writers, and message externalization shared by sessions.

use std::fs;
use std::sync::Arc;

use memoir::blob::{
    blob_ref, externalize, hash_bytes, parse_blob_ref, referenced_blobs, release_refs, resolve,
    retain_refs, ArtifactStore, BlobError, ExternalizePolicy,
};
use memoir::message::{Block, Message, Role};

#[test]
fn round_trip_dedup_and_counts_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let a;
    {
        let s = ArtifactStore::open(tmp.path()).unwrap();
        a = s.put(b"hello blob").unwrap();
        assert_eq!(a, hash_bytes(b"hello blob"));
        assert_eq!(s.put(b"hello blob").unwrap(), a);
        assert_eq!(s.ref_count(&a).unwrap(), 2);
        assert_eq!(s.stats().unwrap(), (1, 10));
    }
    let s = ArtifactStore::open(tmp.path()).unwrap();
    assert_eq!(s.ref_count(&a).unwrap(), 2, "counts are persisted");
    assert_eq!(s.load(&a).unwrap(), b"hello blob");
    assert_eq!(s.retain(&a).unwrap(), 3);
    assert_eq!(s.release(&a).unwrap(), 2);
    let list = s.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].size, list[0].ref_count), (10, 2));
}

#[test]
fn corrupted_and_truncated_blobs_are_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let s = ArtifactStore::open(tmp.path()).unwrap();
    let h = s.put(b"precious tool output").unwrap();
    let path = s.blob_path(&h).unwrap();
    fs::write(&path, b"precious tool outpuT").unwrap();
    match s.load(&h) {
        Err(BlobError::Corrupt { hash, actual, .. }) => {
            assert_eq!(hash, h);
            assert_eq!(actual, hash_bytes(b"precious tool outpuT"));
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    fs::write(&path, b"precious").unwrap();
    assert!(matches!(s.load(&h), Err(BlobError::Corrupt { .. })));
    // Putting the content again repairs the stored copy.
    s.put(b"precious tool output").unwrap();
    assert_eq!(s.load(&h).unwrap(), b"precious tool output");
    fs::remove_file(&path).unwrap();
    assert!(matches!(s.load(&h), Err(BlobError::NotFound(_))));
}

#[test]
fn bad_hashes_never_touch_the_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let s = ArtifactStore::open(tmp.path()).unwrap();
    for bad in ["", "../../etc/passwd", &"A".repeat(64), &"0".repeat(63)] {
        assert!(matches!(s.load(bad), Err(BlobError::InvalidHash(_))));
        assert!(matches!(s.retain(bad), Err(BlobError::InvalidHash(_))));
        assert!(!s.contains(bad));
    }
    assert!(matches!(
        s.retain(&hash_bytes(b"never stored")),
        Err(BlobError::NotFound(_))
    ));
}

#[test]
fn gc_deletes_only_unreferenced_blobs_and_strays() {
    let tmp = tempfile::tempdir().unwrap();
    let s = ArtifactStore::open(tmp.path()).unwrap();
    let keep = s.put(b"kept").unwrap();
    let drop = s.put(b"dropped!").unwrap();
    assert_eq!(s.release(&drop).unwrap(), 0);
    // A count file whose blob vanished, and a stale temp file of a crashed writer.
    let orphan = hash_bytes(b"orphan");
    let shard = tmp.path().join("blobs").join(&orphan[..2]);
    fs::create_dir_all(&shard).unwrap();
    fs::write(shard.join(format!("{orphan}.refs")), "1\n").unwrap();
    let tmpfile = tmp.path().join("blobs").join(&keep[..2]).join(".x.1.tmp");
    fs::write(&tmpfile, b"partial").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    fs::File::options()
        .write(true)
        .open(&tmpfile)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let report = s.gc().unwrap();
    assert_eq!(report.removed_blobs, 1);
    assert_eq!(report.removed_bytes, 8);
    assert_eq!(report.kept_blobs, 1);
    assert_eq!(report.removed_strays, 2);
    assert!(s.contains(&keep));
    assert!(!s.contains(&drop));
    assert!(!tmpfile.exists());
    assert_eq!(s.gc().unwrap().removed_blobs, 0);
    assert!(s.remove(&keep).unwrap());
    assert!(!s.remove(&keep).unwrap());
}

#[test]
fn concurrent_puts_lose_no_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Arc::new(ArtifactStore::open(tmp.path()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    s.put(b"shared payload").unwrap();
                    s.put(format!("own {t} {i}").as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.ref_count(&hash_bytes(b"shared payload")).unwrap(), 40);
    assert_eq!(s.stats().unwrap().0, 41);
}

#[test]
fn a_payload_is_stored_once_for_every_session_that_carries_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ArtifactStore::open(tmp.path()).unwrap();
    let output = "line of build log\n".repeat(1000);
    let image = "iVBORw0KGgo".repeat(1000);
    let session = |extra: &str| {
        vec![
            Message::user(format!("build it {extra}")),
            Message::tool_result("c1", output.clone(), false),
            Message::new(
                Role::User,
                vec![Block::Image {
                    media_type: "image/png".into(),
                    data: image.clone(),
                }],
            ),
        ]
    };
    let policy = ExternalizePolicy::default();
    let (mut a, mut b) = (session("a"), session("b"));
    let (orig_a, orig_b) = (a.clone(), b.clone());
    assert_eq!(externalize(&mut a, &store, &policy).unwrap(), 2);
    assert_eq!(externalize(&mut b, &store, &policy).unwrap(), 2);
    assert_eq!(
        store.stats().unwrap().0,
        2,
        "two distinct payloads, stored once each"
    );
    let refs = referenced_blobs(&a);
    assert_eq!(refs, referenced_blobs(&b));
    for h in &refs {
        assert_eq!(store.ref_count(h).unwrap(), 2);
    }
    match &a[1].content[0] {
        Block::ToolResult { content, .. } => {
            assert_eq!(
                parse_blob_ref(content),
                Some(hash_bytes(output.as_bytes()).as_str())
            );
            assert_eq!(content, &blob_ref(&hash_bytes(output.as_bytes())));
        }
        other => panic!("unexpected {other:?}"),
    }
    // A fork copies session a's messages and takes its own references.
    let fork = a.clone();
    assert_eq!(retain_refs(&fork, &store).unwrap(), 2);
    // Session b goes away.
    release_refs(&b, &store).unwrap();
    assert_eq!(
        store.gc().unwrap().removed_blobs,
        0,
        "a and the fork still hold them"
    );
    let mut back = a.clone();
    resolve(&mut back, &store).unwrap();
    assert_eq!(back, orig_a);
    release_refs(&a, &store).unwrap();
    release_refs(&fork, &store).unwrap();
    assert_eq!(store.gc().unwrap().removed_blobs, 2);
    let mut gone = b.clone();
    assert!(matches!(
        resolve(&mut gone, &store),
        Err(BlobError::NotFound(_))
    ));
    let _ = orig_b;
}
