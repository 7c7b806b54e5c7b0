//! Large payloads live in the blob store, in transcripts too:
//! a 20 MB tool output is written once, a rewrite or another session carrying
//! it adds no payload bytes, load gives back the original bytes, a missing or
//! corrupt blob is reported (never a crash), and the collector keeps exactly
//! the blobs a live or trashed session references.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use memoir::blob::{ArtifactStore, BlobProblem, ExternalizePolicy, BLOB_REF_PREFIX};
use memoir::message::{Block, Message, Role};
use memoir::record::{ForkPoint, Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::blobs::{collect_garbage, referenced_blobs};
use memoir::transcript::Session;

const MB: usize = 1024 * 1024;

/// A 20 MB tool output that does not compress to nothing: numbered lines.
fn big_output(tag: &str) -> String {
    let mut s = String::with_capacity(20 * MB + 64);
    let mut i = 0u64;
    while s.len() < 20 * MB {
        s.push_str(&format!("{tag} line {i:08} of a very long build log\n"));
        i += 1;
    }
    s
}

fn tool_turn(id: &str, output: &str) -> Vec<Message> {
    vec![
        Message::user("build it"),
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: id.into(),
                name: "bash".into(),
                input: serde_json::json!({"cmd": "make"}),
            }],
        ),
        Message::tool_result(id, output, false),
    ]
}

fn blob_files(dir: &Path) -> Vec<(String, u64)> {
    let store = ArtifactStore::at(dir);
    store
        .list()
        .unwrap()
        .into_iter()
        .map(|b| (b.hash, b.size))
        .collect()
}

fn file_len(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

#[test]
fn a_20_mb_tool_output_is_written_once_and_read_back_verbatim() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(tmp.path(), Durability::Fsync));
    let output = big_output("a");
    let s = Session::create_in(store.clone(), SessionMeta::new("big")).unwrap();
    s.append_messages(&tool_turn("call_1", &output)).unwrap();

    let transcript_len = file_len(&s.path);
    assert!(
        transcript_len < 16 * 1024,
        "transcript is {transcript_len} bytes"
    );
    let blobs = blob_files(tmp.path());
    assert_eq!(blobs.len(), 1);
    assert_eq!(blobs[0].1, output.len() as u64);

    // The record is plain JSON holding the documented reference object.
    let text = fs::read_to_string(&s.path).unwrap();
    let line = text.lines().find(|l| l.contains("\"blob\"")).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let found = v.to_string();
    assert!(
        found.contains(&format!("\"blob\":\"{}\"", blobs[0].0)),
        "{found:.400}"
    );
    assert!(found.contains(&format!("\"size\":{}", output.len())));
    assert!(found.contains("\"media_type\":\"text/plain\""));
    assert!(found.contains("\"preview\":\"a line 00000000 of a very long build log"));

    // Load returns the original bytes.
    let t = Session::read(&s.path).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.messages, tool_turn("call_1", &output));

    // A rewrite carrying it (a compaction keeping the tool turn) adds no
    // payload bytes: the record references the same blob.
    let mut kept = vec![Message::assistant("Summary: built it.")];
    kept.extend(tool_turn("call_1", &output));
    s.append(&Record::Rewrite {
        messages: kept.clone(),
    })
    .unwrap();
    let grown = file_len(&s.path) - transcript_len;
    assert!(grown < 8 * 1024, "the rewrite added {grown} bytes");
    assert_eq!(blob_files(tmp.path()), blobs, "no new blob");
    assert_eq!(Session::read(&s.path).unwrap().messages, kept);

    // A fork and a second session carrying the same payload share the blob.
    let mut meta = SessionMeta::new("fork");
    meta.parent = Some(ForkPoint {
        session: "big".into(),
        seq: 3,
        messages: 3,
        parent_created_at: None,
    });
    let fork = Session::create_in(store.clone(), meta).unwrap();
    fork.append_messages(&[Message::tool_result("call_1", output.as_str(), false)])
        .unwrap();
    let other = Session::create_in(store.clone(), SessionMeta::new("other")).unwrap();
    other
        .append_messages(&tool_turn("call_9", &output))
        .unwrap();
    assert_eq!(
        blob_files(tmp.path()),
        blobs,
        "content addressing: one blob"
    );
    assert!(file_len(&other.path) < 16 * 1024);
    let ft = fork.transcript().unwrap();
    assert_eq!(ft.messages.len(), 4);
    assert_eq!(
        ft.messages[2], ft.messages[3],
        "inherited and own payload both resolve"
    );
    assert!(ft.report.is_clean());
}

#[test]
fn small_payloads_stay_inline_and_the_threshold_is_configurable() {
    let tmp = tempfile::tempdir().unwrap();
    let payload = "x".repeat(2000);
    let default: Arc<dyn LogStore> = Arc::new(FileStore::new(tmp.path(), Durability::Fsync));
    let s = Session::create_in(default, SessionMeta::new("small")).unwrap();
    s.append_messages(&[Message::tool_result("c", payload.as_str(), false)])
        .unwrap();
    assert!(
        blob_files(tmp.path()).is_empty(),
        "2 KB is below the 64 KiB default"
    );
    assert!(fs::read_to_string(&s.path).unwrap().contains(&payload));

    let low: Arc<dyn LogStore> = Arc::new(
        FileStore::new(tmp.path(), Durability::Fsync)
            .with_blob_policy(ExternalizePolicy::TRANSCRIPT.min_bytes(1000)),
    );
    let s = Session::create_in(low.clone(), SessionMeta::new("low")).unwrap();
    let text = "y".repeat(3000);
    s.append_messages(&[
        Message::tool_result("c", payload.as_str(), false),
        Message::assistant(text.as_str()),
    ])
    .unwrap();
    assert_eq!(
        blob_files(tmp.path()).len(),
        2,
        "a tool result and a long text"
    );
    let raw = fs::read_to_string(&s.path).unwrap();
    assert!(!raw.contains(&payload) && !raw.contains(&text));
    let t = Session::open_in(low, "low").unwrap().transcript().unwrap();
    assert_eq!(
        t.messages,
        vec![
            Message::tool_result("c", payload.as_str(), false),
            Message::assistant(text.as_str())
        ]
    );

    let never: Arc<dyn LogStore> = Arc::new(
        FileStore::new(tmp.path(), Durability::Fsync).with_blob_policy(ExternalizePolicy::NEVER),
    );
    let s = Session::create_in(never, SessionMeta::new("never")).unwrap();
    s.append_messages(&[Message::tool_result("c", "z".repeat(100_000), false)])
        .unwrap();
    assert_eq!(blob_files(tmp.path()).len(), 2, "nothing externalized");
}

#[test]
fn a_missing_or_corrupt_blob_is_reported_never_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(
        FileStore::new(tmp.path(), Durability::Fsync)
            .with_blob_policy(ExternalizePolicy::TRANSCRIPT.min_bytes(100)),
    );
    let s = Session::create_in(store.clone(), SessionMeta::new("rot")).unwrap();
    let output = "important output ".repeat(100);
    s.append_messages(&tool_turn("call_1", &output)).unwrap();
    let hash = blob_files(tmp.path())[0].0.clone();
    let path = ArtifactStore::at(tmp.path()).blob_path(&hash).unwrap();

    // Corrupt one byte.
    let mut bytes = fs::read(&path).unwrap();
    bytes[10] ^= 0x20;
    fs::write(&path, &bytes).unwrap();
    let t = Session::read(&s.path).unwrap();
    assert!(!t.report.is_clean());
    assert!(t.report.issues.is_empty(), "the chain itself is fine");
    assert_eq!(t.report.blobs.len(), 1);
    assert_eq!(t.report.blobs[0].problem, BlobProblem::Corrupt);
    assert_eq!(t.report.blobs[0].seq, 3);
    assert_eq!(t.report.blobs[0].hash, hash);
    // The message keeps its shape, holding the reference.
    match &t.messages[2].content[0] {
        Block::ToolResult {
            tool_use_id,
            content,
            ..
        } => {
            assert_eq!(tool_use_id, "call_1");
            assert_eq!(content, &format!("{BLOB_REF_PREFIX}{hash}"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let verified = Session::verify(&s.path).unwrap();
    assert_eq!(verified.blobs.len(), 1, "verify reports it");
    assert!(verified.blobs[0].to_string().contains("corrupt"));

    // Missing.
    fs::remove_file(&path).unwrap();
    let t = Session::read(&s.path).unwrap();
    assert_eq!(t.report.blobs[0].problem, BlobProblem::Missing);
    // A session that carries the unresolved message on (a rewrite) keeps
    // the reference, and a restored blob resolves again.
    s.append(&Record::Rewrite {
        messages: t.messages.clone(),
    })
    .unwrap();
    ArtifactStore::at(tmp.path())
        .put_unreferenced(output.as_bytes())
        .unwrap();
    let t = Session::read(&s.path).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.messages, tool_turn("call_1", &output));
}

#[test]
fn gc_keeps_blobs_of_live_and_trashed_sessions_and_removes_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let live = FileStore::new(tmp.path(), Durability::Fsync)
        .with_blob_policy(ExternalizePolicy::TRANSCRIPT.min_bytes(100));
    let live: Arc<FileStore> = Arc::new(live);
    let as_dyn: Arc<dyn LogStore> = live.clone();
    let a = Session::create_in(as_dyn.clone(), SessionMeta::new("a")).unwrap();
    a.append_messages(&tool_turn("c1", &"payload of a ".repeat(50)))
        .unwrap();
    let b = Session::create_in(as_dyn.clone(), SessionMeta::new("b")).unwrap();
    b.append_messages(&tool_turn("c2", &"payload of b ".repeat(50)))
        .unwrap();
    let blobs = ArtifactStore::at(tmp.path());
    let orphan = blobs.put_unreferenced(b"nobody references me").unwrap();
    let counted = blobs
        .put(b"a view's chunk text, reference counted")
        .unwrap();
    assert_eq!(blobs.list().unwrap().len(), 4);

    // b goes to the trash: still restorable, so its blob stays.
    live.delete("b").unwrap();
    // The store's own trash listing covers it.
    let stores: [&dyn LogStore; 1] = [live.as_ref()];
    let referenced = referenced_blobs(&stores).unwrap();
    assert_eq!(referenced.len(), 2);

    // A grace period protects fresh blobs (a writer mid-append).
    let r = collect_garbage(&stores, &blobs, Duration::from_secs(3600)).unwrap();
    assert_eq!(r.removed_blobs, 0);
    let r = collect_garbage(&stores, &blobs, Duration::ZERO).unwrap();
    assert_eq!(r.removed_blobs, 1, "only the orphan");
    assert!(!blobs.contains(&orphan));
    assert!(
        blobs.contains(&counted),
        "a counted blob is the view's: kept"
    );
    assert_eq!(blobs.list().unwrap().len(), 3);

    // Purging b lets its blob go.
    live.purge("b").unwrap();
    let r = collect_garbage(&stores, &blobs, Duration::ZERO).unwrap();
    assert_eq!(r.removed_blobs, 1);
    let t = a.transcript().unwrap();
    assert!(t.report.is_clean(), "a's payload survived every collection");
}
