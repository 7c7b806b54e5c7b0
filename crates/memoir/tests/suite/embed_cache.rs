//! The persistent embedding cache with real files: persistence across
//! reopen, corruption detection (by damaging the file on disk), torn tails,
//! size-bounded eviction, lanes and model separation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use memoir::embed::cache::{file_name_for, FORMAT_VERSION, MAGIC};
use memoir::embed::{CacheConfig, CachedEmbedder, EmbeddingError, EmbeddingProvider, HashEmbedder};

/// Counts the texts it is asked to embed; optionally returns a bad width.
struct Counting {
    inner: HashEmbedder,
    id: String,
    calls: AtomicUsize,
    bad_width: bool,
}

impl Counting {
    fn new(dims: usize, id: &str) -> Arc<Self> {
        Arc::new(Self {
            inner: HashEmbedder::new(dims),
            id: id.to_string(),
            calls: AtomicUsize::new(0),
            bad_width: false,
        })
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl EmbeddingProvider for Counting {
    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut v = self.inner.embed_sync(text);
        if self.bad_width {
            v.push(0.0);
        }
        Ok(v)
    }
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        // A different lane gives a different vector, as asymmetric models do.
        self.embed(&format!("query: {text}"))
    }
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }
    fn model_id(&self) -> String {
        self.id.clone()
    }
}

fn texts(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("text number {i} about topic {}", i % 7))
        .collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

const DIMS: usize = 16;
const RECORD: u64 = 32 + 4 * DIMS as u64 + 16;

fn header_len(id: &str) -> u64 {
    (8 + 4 + 4 + 4 + id.len() + 16) as u64
}

#[test]
fn second_open_embeds_nothing_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t = texts(50);
    let p = Counting::new(DIMS, "count@16");
    let c = CachedEmbedder::open(p.clone(), CacheConfig::new(tmp.path())).expect("open");
    let first = c.embed_batch(&refs(&t)).expect("embed");
    assert_eq!(p.calls(), 50);
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.entries), (0, 50, 50));
    assert_eq!(s.file_bytes, header_len("count@16") + 50 * RECORD);
    drop(c);

    let p2 = Counting::new(DIMS, "count@16");
    let c2 = CachedEmbedder::open(p2.clone(), CacheConfig::new(tmp.path())).expect("reopen");
    let again = c2.embed_batch(&refs(&t)).expect("embed");
    assert_eq!(p2.calls(), 0, "everything came from the cache");
    assert_eq!(first, again);
    let s = c2.stats();
    assert_eq!((s.hits, s.misses, s.corrupt), (50, 0, 0));
    // Single embeds hit too; duplicates inside a batch are embedded once.
    c2.embed(&t[3]).expect("embed");
    c2.embed_batch(&["new", "new", "new"]).expect("embed");
    assert_eq!(p2.calls(), 1);

    // The file is where the format says, with the documented header.
    let path = tmp
        .path()
        .join(format!("v{FORMAT_VERSION}"))
        .join(file_name_for("count@16"));
    assert_eq!(c2.path(), path);
    let bytes = std::fs::read(&path).expect("read cache file");
    assert_eq!(&bytes[..8], MAGIC);
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);
    assert_eq!(
        u32::from_le_bytes(bytes[12..16].try_into().unwrap()),
        DIMS as u32
    );
}

#[test]
fn corrupt_records_are_detected_and_recomputed() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t = texts(10);
    let id = "count@16";
    let p = Counting::new(DIMS, id);
    let c = CachedEmbedder::open(p.clone(), CacheConfig::new(tmp.path())).expect("open");
    let good = c.embed_batch(&refs(&t)).expect("embed");
    let path = c.path();
    drop(c);

    // Flip one byte inside record 4's vector.
    let mut bytes = std::fs::read(&path).expect("read");
    let off = (header_len(id) + 4 * RECORD + 32 + 5) as usize;
    bytes[off] ^= 0x40;
    std::fs::write(&path, &bytes).expect("write");

    let p2 = Counting::new(DIMS, id);
    let c2 = CachedEmbedder::open(p2.clone(), CacheConfig::new(tmp.path())).expect("reopen");
    assert_eq!(c2.stats().corrupt, 1);
    assert_eq!(c2.stats().entries, 9);
    let got = c2.embed_batch(&refs(&t)).expect("embed");
    assert_eq!(got, good, "the damaged entry was recomputed, not served");
    assert_eq!(p2.calls(), 1);

    // Damage while open: detected on read, recomputed.
    let mut bytes = std::fs::read(&path).expect("read");
    let off = (header_len(id) + 2 * RECORD + 40) as usize;
    bytes[off] ^= 0x01;
    std::fs::write(&path, &bytes).expect("write");
    let v = c2.embed(&t[2]).expect("embed");
    assert_eq!(v, good[2]);
    assert_eq!(p2.calls(), 2);
    assert_eq!(c2.stats().corrupt, 2);
}

#[test]
fn torn_tail_and_bad_header_are_repaired() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t = texts(5);
    let id = "count@16";
    let p = Counting::new(DIMS, id);
    let c = CachedEmbedder::open(p, CacheConfig::new(tmp.path())).expect("open");
    c.embed_batch(&refs(&t)).expect("embed");
    let path = c.path();
    drop(c);

    // Cut the last record in half (an interrupted append).
    let len = std::fs::metadata(&path).expect("stat").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(len - RECORD / 2).expect("truncate");
    drop(f);
    let p2 = Counting::new(DIMS, id);
    let c2 = CachedEmbedder::open(p2.clone(), CacheConfig::new(tmp.path())).expect("reopen");
    assert_eq!(c2.stats().entries, 4);
    assert_eq!(c2.stats().file_bytes, header_len(id) + 4 * RECORD);
    c2.embed_batch(&refs(&t)).expect("embed");
    assert_eq!(p2.calls(), 1, "only the torn record is recomputed");
    assert_eq!(
        std::fs::metadata(&path).expect("stat").len(),
        header_len(id) + 5 * RECORD,
        "the new record is aligned"
    );
    drop(c2);

    // Damage the header: the file is started over.
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[17] ^= 0xff;
    std::fs::write(&path, &bytes).expect("write");
    let p3 = Counting::new(DIMS, id);
    let c3 = CachedEmbedder::open(p3.clone(), CacheConfig::new(tmp.path())).expect("reopen");
    assert_eq!(c3.stats().entries, 0);
    assert_eq!(c3.stats().corrupt, 1);
    c3.embed_batch(&refs(&t)).expect("embed");
    assert_eq!(p3.calls(), 5);
}

#[test]
fn size_is_bounded_and_recent_entries_survive() {
    let tmp = tempfile::tempdir().expect("tmp");
    let id = "count@16";
    let max = header_len(id) + 20 * RECORD;
    let cfg = CacheConfig::new(tmp.path()).with_max_bytes(max);
    let p = Counting::new(DIMS, id);
    let c = CachedEmbedder::open(p.clone(), cfg.clone()).expect("open");
    let t = texts(100);
    c.embed(&t[0]).expect("embed");
    for (i, chunk) in t[1..].chunks(5).enumerate() {
        c.embed_batch(
            chunk
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice(),
        )
        .expect("embed");
        // Keep text 0 hot.
        c.embed(&t[0]).expect("embed");
        let s = c.stats();
        assert!(s.file_bytes <= max, "round {i}: {} > {max}", s.file_bytes);
    }
    let s = c.stats();
    assert!(s.evicted > 0);
    assert!(s.entries <= 20);
    let before = p.calls();
    c.embed(&t[0]).expect("embed");
    assert_eq!(
        p.calls(),
        before,
        "the most recently used entry survived eviction"
    );
    c.embed(&t[2]).expect("embed");
    assert_eq!(p.calls(), before + 1, "an old entry was evicted");
    drop(c);
    // The compacted file reopens cleanly with the same entries.
    let c2 = CachedEmbedder::open(Counting::new(DIMS, id), cfg).expect("reopen");
    assert_eq!(c2.stats().corrupt, 0);
    assert!(c2.stats().entries > 0);
}

#[test]
fn lanes_and_models_are_separate() {
    let tmp = tempfile::tempdir().expect("tmp");
    let a = Counting::new(DIMS, "model-a@16");
    let b = Counting::new(DIMS, "model-b@16");
    let ca = CachedEmbedder::open(a.clone(), CacheConfig::new(tmp.path())).expect("open");
    let cb = CachedEmbedder::open(b.clone(), CacheConfig::new(tmp.path())).expect("open");
    assert_ne!(ca.path(), cb.path());
    let d = ca.embed("same text").expect("embed");
    let q = ca.embed_query("same text").expect("embed");
    assert_ne!(d, q, "query lane is not served from the document lane");
    assert_eq!(a.calls(), 2);
    assert_eq!(ca.embed_query("same text").expect("embed"), q);
    assert_eq!(a.calls(), 2);
    cb.embed("same text").expect("embed");
    assert_eq!(b.calls(), 1, "another model never sees model a's entries");
}

#[test]
fn wrong_widths_are_not_stored() {
    let tmp = tempfile::tempdir().expect("tmp");
    let p = Arc::new(Counting {
        inner: HashEmbedder::new(DIMS),
        id: "bad@16".into(),
        calls: AtomicUsize::new(0),
        bad_width: true,
    });
    let c = CachedEmbedder::open(p, CacheConfig::new(tmp.path())).expect("open");
    let err = c.embed("x").unwrap_err();
    assert_eq!(
        err,
        EmbeddingError::DimensionMismatch {
            expected: DIMS,
            got: DIMS + 1
        }
    );
    assert_eq!(c.stats().entries, 0);
}

#[test]
fn concurrent_threads_share_one_cache() {
    let tmp = tempfile::tempdir().expect("tmp");
    let p = Counting::new(DIMS, "count@16");
    let c = Arc::new(CachedEmbedder::open(p.clone(), CacheConfig::new(tmp.path())).expect("open"));
    let t = Arc::new(texts(40));
    let mut handles = Vec::new();
    for k in 0..4 {
        let (c, t) = (c.clone(), t.clone());
        handles.push(std::thread::spawn(move || {
            for i in 0..40 {
                let v = c.embed(&t[(i + k * 10) % 40]).expect("embed");
                assert_eq!(v.len(), DIMS);
            }
        }));
    }
    for h in handles {
        h.join().expect("thread");
    }
    let s = c.stats();
    assert_eq!(s.hits + s.misses, 160);
    assert_eq!(s.entries, 40);
    assert!(p.calls() >= 40 && p.calls() < 160, "{}", p.calls());
}
