//! Golden files of the payload formats, beside `golden`'s
//! transcripts: a session whose large tool output lives in the blob store
//! (`tests/golden/v1/blobs/`: the transcript holding the reference object and
//! the content-addressed blob file), and an embedding-cache file
//! (`tests/golden/v1/embed-cache/`). Like `golden`, each test reads the stored
//! bytes with today's code and re-writes the same bytes from fixed inputs;
//! `MEMOIR_REGEN_GOLDEN=1` regenerates (only ever into a new `v2/`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use memoir::blob::ArtifactStore;
use memoir::embed::cache::{file_name_for, CacheConfig, CachedEmbedder};
use memoir::embed::{EmbeddingProvider, HashEmbedder};
use memoir::message::{Block, Message, Role};
use memoir::record::{Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::blobs::externalize_records;
use memoir::transcript::read_in;

const SESSION: &str = "20260101T001000-00000000b10b";
const CACHE_TEXTS: [&str; 3] = ["cargo test failed", "the README", "fork at seq 5"];
const CACHE_DIMS: usize = 8;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1")
}

/// 80 KiB of numbered build-log lines: above the 64 KiB transcript threshold.
fn big_output() -> String {
    (0..3000)
        .map(|i| format!("build line {i:05} of the golden log\n"))
        .collect::<String>()[..80 * 1024]
        .to_owned()
}

fn blob_records() -> Vec<Record> {
    let mut user = Message::user("Run the build.");
    user.timestamp = Utc.with_ymd_and_hms(2026, 1, 1, 0, 10, 1).single();
    vec![
        Record::Message(user),
        Record::Message(Message::tool_result("call_b1", big_output(), false)),
    ]
}

/// Every file under `root`, relative path → bytes, sorted.
fn files_under(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The blob session's files, generated: the transcript and the blob store.
fn generate_blobs() -> Vec<(String, Vec<u8>)> {
    let tmp = tempfile::tempdir().unwrap();
    let store = FileStore::new(tmp.path(), Durability::None);
    let mut meta = SessionMeta::new(SESSION);
    meta.created_at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 10, 0).single().unwrap();
    meta.provider = "anthropic".into();
    meta.model = "claude-sonnet-4-5".into();
    store.create(&meta).unwrap();
    let records = blob_records();
    let records = externalize_records(&store, &records).unwrap();
    store.append(SESSION, &records, None).unwrap();
    files_under(tmp.path())
        .into_iter()
        .filter(|(name, _)| {
            name.ends_with(".jsonl") || (name.starts_with("blobs/") && !name.ends_with(".lock"))
        })
        .collect()
}

/// The embedding cache's file for the fixed texts, generated.
fn generate_cache() -> Vec<(String, Vec<u8>)> {
    let tmp = tempfile::tempdir().unwrap();
    let cache = CachedEmbedder::open(
        Arc::new(HashEmbedder::new(CACHE_DIMS)),
        CacheConfig::new(tmp.path()),
    )
    .unwrap();
    for text in CACHE_TEXTS {
        cache.embed(text).unwrap();
    }
    cache.embed_query(CACHE_TEXTS[0]).unwrap();
    drop(cache);
    files_under(tmp.path())
}

fn check_or_regen(sub: &str, generated: Vec<(String, Vec<u8>)>) {
    let root = golden_dir().join(sub);
    if std::env::var("MEMOIR_REGEN_GOLDEN").is_ok_and(|v| v == "1") {
        for (name, bytes) in &generated {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        return;
    }
    let stored = files_under(&root);
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&stored),
        names(&generated),
        "{sub}: the set of files changed"
    );
    for ((name, want), (_, got)) in stored.iter().zip(&generated) {
        assert!(
            want == got,
            "{sub}/{name}: today's writer no longer produces the v1 bytes"
        );
    }
}

#[test]
fn golden_blob_session_is_rewritten_byte_for_byte() {
    check_or_regen("blobs", generate_blobs());
}

#[test]
fn golden_blob_session_reads_back_the_payload() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, bytes) in files_under(&golden_dir().join("blobs")) {
        let path = tmp.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let line = std::fs::read_to_string(tmp.path().join(format!("{SESSION}.jsonl"))).unwrap();
    let expected_hash = blake3::hash(big_output().as_bytes()).to_hex().to_string();
    assert!(
        line.contains(&format!("\"blob\":\"{expected_hash}\"")),
        "the transcript holds the reference object, not the payload"
    );
    assert!(line.len() < 4096, "payload inline: {} bytes", line.len());
    let blobs = ArtifactStore::at(tmp.path());
    assert_eq!(blobs.load_string(&expected_hash).unwrap(), big_output());

    let store = FileStore::new(tmp.path(), Durability::None);
    let t = read_in(&store, SESSION).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.messages.len(), 2);
    assert_eq!(t.messages[1].role, Role::Tool);
    match &t.messages[1].content[..] {
        [Block::ToolResult { content, .. }] => {
            assert!(*content == big_output(), "the payload read back differs")
        }
        other => panic!("not one tool result: {} blocks", other.len()),
    }
}

#[test]
fn golden_embedding_cache_is_rewritten_byte_for_byte() {
    check_or_regen("embed-cache", generate_cache());
}

#[test]
fn golden_embedding_cache_serves_every_stored_vector() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, bytes) in files_under(&golden_dir().join("embed-cache")) {
        let path = tmp.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let hash = HashEmbedder::new(CACHE_DIMS);
    assert!(tmp
        .path()
        .join("v1")
        .join(file_name_for(&hash.model_id()))
        .is_file());
    let cache = CachedEmbedder::open(Arc::new(hash.clone()), CacheConfig::new(tmp.path())).unwrap();
    for text in CACHE_TEXTS {
        assert_eq!(cache.embed(text).unwrap(), hash.embed(text).unwrap());
    }
    assert_eq!(
        cache.embed_query(CACHE_TEXTS[0]).unwrap(),
        hash.embed_query(CACHE_TEXTS[0]).unwrap()
    );
    let stats = cache.stats();
    assert_eq!(
        (stats.hits, stats.misses, stats.corrupt),
        (4, 0, 0),
        "{stats:?}"
    );
}
