//! `cache`: a persistent, checksummed, size-bounded embedding cache.
//!
//! [`CachedEmbedder`] wraps any [`EmbeddingProvider`]. Each vector is stored
//! under `(model_id, BLAKE3(lane, input))`, so rebuilding an index never
//! re-embeds a text the same model has already embedded, in this process or an
//! earlier one. The format is documented in `docs/FORMAT.md` ("Embedding
//! cache"); in short:
//!
//! - one append-only file per model, `<dir>/v1/<slug>-<hash16>.mec`, starting
//!   with a header naming the model id and width (checksummed);
//! - fixed-size records `key (32) | vector (4·dims, f32 LE) | check (16)`,
//!   where `key = BLAKE3(lane ‖ 0x00 ‖ text)` (lane `doc` or `query`) and
//!   `check` is the first 16 bytes of `BLAKE3(key ‖ vector bytes)`.
//!
//! Every record is verified when the file is opened and again when it is
//! read; a bad record is dropped and its text embedded again (counted in
//! [`CacheStats::corrupt`]). A torn tail is cut back to the last whole record.
//! When the file outgrows [`CacheConfig::max_bytes`] it is compacted to 3/4 of
//! that bound, keeping the most recently used entries (recency is tracked in
//! memory; on open, file order stands in for it, and compaction writes entries
//! oldest first, so the order survives).
//!
//! Several processes may share a cache directory: appends and compaction take
//! an exclusive file lock, and records are whole-or-rejected thanks to the
//! checksums. A process sees other processes' new entries when it reopens the
//! cache. Cache I/O failures after opening never fail an embedding: the vector
//! is returned and the failure counted in [`CacheStats::errors`].

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{EmbeddingError, EmbeddingProvider};

/// File magic: the first 8 bytes of every cache file.
pub const MAGIC: &[u8; 8] = b"MEMOIREC";
/// The on-disk format version written and accepted.
pub const FORMAT_VERSION: u32 = 1;
/// Default bound on one model's cache file: 512 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;

const KEY_LEN: usize = 32;
const CHECK_LEN: usize = 16;

/// Where and how big the cache is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// The cache directory (files go under `<dir>/v1/`).
    pub dir: PathBuf,
    /// Upper bound on one model's cache file, in bytes; compaction brings it
    /// back to 3/4 of this. At least one record is always kept.
    pub max_bytes: u64,
}

impl CacheConfig {
    /// A cache in `dir` with the default size bound.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Set the size bound.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The default directory: `$MEMOIR_HOME/cache/embeddings`.
    pub fn default_dir() -> Result<PathBuf, EmbeddingError> {
        crate::paths::memoir_home()
            .map(|h| h.join("cache").join("embeddings"))
            .map_err(|e| EmbeddingError::Config(e.to_string()))
    }
}

/// Counters of a [`CachedEmbedder`] (since it was opened).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Texts answered from the cache.
    pub hits: u64,
    /// Texts sent to the wrapped provider.
    pub misses: u64,
    /// Records found corrupt (at open or on read) and dropped.
    pub corrupt: u64,
    /// Entries removed by compaction.
    pub evicted: u64,
    /// Cache I/O failures that were ignored (the vector was still returned).
    pub errors: u64,
    /// Live entries now.
    pub entries: u64,
    /// Size of the cache file now, in bytes.
    pub file_bytes: u64,
}

/// Which lane a text was embedded for: part of the key, since asymmetric
/// models embed queries and documents differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Doc,
    Query,
}

fn key_of(lane: Lane, text: &str) -> [u8; KEY_LEN] {
    let mut h = blake3::Hasher::new();
    h.update(match lane {
        Lane::Doc => b"doc\0".as_slice(),
        Lane::Query => b"query\0".as_slice(),
    });
    h.update(text.as_bytes());
    *h.finalize().as_bytes()
}

fn check_of(key: &[u8], vec_bytes: &[u8]) -> [u8; CHECK_LEN] {
    let mut h = blake3::Hasher::new();
    h.update(key);
    h.update(vec_bytes);
    let mut out = [0u8; CHECK_LEN];
    out.copy_from_slice(&h.finalize().as_bytes()[..CHECK_LEN]);
    out
}

/// The cache file name for a model id: a readable slug plus a hash of the
/// exact id.
pub fn file_name_for(model_id: &str) -> String {
    let slug: String = model_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    let hash = blake3::hash(model_id.as_bytes()).to_hex();
    format!("{slug}-{}.mec", &hash.as_str()[..16])
}

fn header_bytes(model_id: &str, dims: usize) -> Vec<u8> {
    let mut h = Vec::with_capacity(20 + model_id.len() + CHECK_LEN);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    h.extend_from_slice(&(dims as u32).to_le_bytes());
    h.extend_from_slice(&(model_id.len() as u32).to_le_bytes());
    h.extend_from_slice(model_id.as_bytes());
    let check = blake3::hash(&h);
    h.extend_from_slice(&check.as_bytes()[..CHECK_LEN]);
    h
}

struct Entry {
    slot: u64,
    tick: u64,
}

struct State {
    path: PathBuf,
    file: File,
    header_len: u64,
    record_len: usize,
    dims: usize,
    /// Whole records in the file (live, dead and corrupt).
    slots: u64,
    index: HashMap<[u8; KEY_LEN], Entry>,
    tick: u64,
    max_bytes: u64,
}

/// An [`EmbeddingProvider`] that answers from a persistent cache and asks the
/// wrapped provider only for texts it has not seen; see the [module docs](self).
pub struct CachedEmbedder {
    inner: Arc<dyn EmbeddingProvider>,
    model_id: String,
    dims: usize,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    evicted: AtomicU64,
    errors: AtomicU64,
}

impl std::fmt::Debug for CachedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedEmbedder")
            .field("model_id", &self.model_id)
            .field("stats", &self.stats())
            .finish()
    }
}

fn cache_err(what: &str, path: &Path, e: impl std::fmt::Display) -> EmbeddingError {
    EmbeddingError::Cache(format!("{what} {}: {e}", path.display()))
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, offset)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::Seek;
    file.seek(std::io::SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

impl CachedEmbedder {
    /// Open (or create) the cache for `inner`'s model under `config.dir`.
    /// Scans and verifies the existing file; fails only if the directory or
    /// file cannot be created or read.
    pub fn open(
        inner: Arc<dyn EmbeddingProvider>,
        config: CacheConfig,
    ) -> Result<Self, EmbeddingError> {
        let model_id = inner.model_id();
        let dims = inner.dimensions();
        if dims == 0 {
            return Err(EmbeddingError::Config(format!(
                "model {model_id} reports width 0"
            )));
        }
        let dir = config.dir.join(format!("v{FORMAT_VERSION}"));
        crate::paths::create_private_dir(&dir).map_err(|e| EmbeddingError::Cache(e.to_string()))?;
        let path = dir.join(file_name_for(&model_id));
        let header = header_bytes(&model_id, dims);
        let record_len = KEY_LEN + 4 * dims + CHECK_LEN;
        let mut opts = OpenOptions::new();
        opts.read(true).append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts.open(&path).map_err(|e| cache_err("open", &path, e))?;
        let mut state = State {
            path: path.clone(),
            file,
            header_len: header.len() as u64,
            record_len,
            dims,
            slots: 0,
            index: HashMap::new(),
            tick: 0,
            max_bytes: config
                .max_bytes
                .max(header.len() as u64 + record_len as u64),
        };
        let corrupt = state.load(&header)?;
        Ok(Self {
            inner,
            model_id,
            dims,
            state: Mutex::new(state),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            corrupt: AtomicU64::new(corrupt),
            evicted: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// Open the cache in the default directory (`$MEMOIR_HOME/cache/embeddings`).
    pub fn open_default(inner: Arc<dyn EmbeddingProvider>) -> Result<Self, EmbeddingError> {
        Self::open(inner, CacheConfig::new(CacheConfig::default_dir()?))
    }

    /// The cache file of this model.
    pub fn path(&self) -> PathBuf {
        self.lock().map(|s| s.path.clone()).unwrap_or_default()
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &Arc<dyn EmbeddingProvider> {
        &self.inner
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        let (entries, file_bytes) = match self.lock() {
            Ok(s) => (
                s.index.len() as u64,
                s.header_len + s.slots * s.record_len as u64,
            ),
            Err(_) => (0, 0),
        };
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            entries,
            file_bytes,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, EmbeddingError> {
        self.state
            .lock()
            .map_err(|_| EmbeddingError::Cache("cache state poisoned by a panic".into()))
    }

    fn embed_lane(&self, lane: Lane, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let keys: Vec<[u8; KEY_LEN]> = texts.iter().map(|t| key_of(lane, t)).collect();
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        {
            let mut st = self.lock()?;
            for (i, k) in keys.iter().enumerate() {
                match st.get(k) {
                    Ok(Some(v)) => out[i] = Some(v),
                    Ok(None) => {}
                    Err(Corrupt) => {
                        self.corrupt.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        // Misses, deduplicated (the same text twice in one batch is embedded once).
        let mut miss_pos: HashMap<[u8; KEY_LEN], usize> = HashMap::new();
        let mut miss_texts: Vec<&str> = Vec::new();
        let mut miss_keys: Vec<[u8; KEY_LEN]> = Vec::new();
        for (i, slot) in out.iter().enumerate() {
            if slot.is_none() && !miss_pos.contains_key(&keys[i]) {
                miss_pos.insert(keys[i], miss_texts.len());
                miss_texts.push(texts[i]);
                miss_keys.push(keys[i]);
            }
        }
        let hits = out.iter().filter(|v| v.is_some()).count() as u64;
        self.hits.fetch_add(hits, Ordering::Relaxed);
        self.misses
            .fetch_add(texts.len() as u64 - hits, Ordering::Relaxed);
        if !miss_texts.is_empty() {
            let fresh = match lane {
                Lane::Doc => self.inner.embed_batch(&miss_texts)?,
                Lane::Query => {
                    let mut v = Vec::with_capacity(miss_texts.len());
                    for t in &miss_texts {
                        v.push(self.inner.embed_query(t)?);
                    }
                    v
                }
            };
            if fresh.len() != miss_texts.len() {
                return Err(EmbeddingError::BackendError(format!(
                    "provider returned {} vectors for {} texts",
                    fresh.len(),
                    miss_texts.len()
                )));
            }
            for v in &fresh {
                if v.len() != self.dims {
                    return Err(EmbeddingError::DimensionMismatch {
                        expected: self.dims,
                        got: v.len(),
                    });
                }
            }
            {
                let mut st = self.lock()?;
                match st.append(&miss_keys, &fresh) {
                    Ok(evicted) => {
                        self.evicted.fetch_add(evicted, Ordering::Relaxed);
                    }
                    Err(_) => {
                        self.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            for (i, slot) in out.iter_mut().enumerate() {
                if slot.is_none() {
                    if let Some(&j) = miss_pos.get(&keys[i]) {
                        *slot = Some(fresh[j].clone());
                    }
                }
            }
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| EmbeddingError::BackendError("cache lost a vector".into())))
            .collect()
    }
}

/// A record failed its checksum.
struct Corrupt;

impl State {
    /// Read or create the header and index every valid record. Returns the
    /// number of corrupt records seen.
    fn load(&mut self, header: &[u8]) -> Result<u64, EmbeddingError> {
        self.file
            .lock()
            .map_err(|e| cache_err("lock", &self.path, e))?;
        let r = self.load_locked(header);
        let _ = self.file.unlock();
        r
    }

    fn load_locked(&mut self, header: &[u8]) -> Result<u64, EmbeddingError> {
        let len = self
            .file
            .metadata()
            .map_err(|e| cache_err("stat", &self.path, e))?
            .len();
        let mut head = vec![0u8; header.len()];
        let header_ok = len >= header.len() as u64
            && read_at(&self.file, &mut head, 0).is_ok()
            && head == header;
        let mut corrupt = 0;
        if !header_ok {
            // New file, other model, other version or a damaged header: start over.
            if len > 0 {
                corrupt += 1;
            }
            self.file
                .set_len(0)
                .map_err(|e| cache_err("truncate", &self.path, e))?;
            self.file
                .write_all(header)
                .map_err(|e| cache_err("write", &self.path, e))?;
            self.slots = 0;
            return Ok(corrupt);
        }
        let body = len - self.header_len;
        let whole = body / self.record_len as u64;
        if !body.is_multiple_of(self.record_len as u64) {
            // Torn tail from an interrupted append.
            self.file
                .set_len(self.header_len + whole * self.record_len as u64)
                .map_err(|e| cache_err("truncate", &self.path, e))?;
        }
        self.slots = whole;
        let mut reader = std::io::BufReader::with_capacity(1 << 20, &self.file);
        std::io::Seek::seek(&mut reader, std::io::SeekFrom::Start(self.header_len))
            .map_err(|e| cache_err("seek", &self.path, e))?;
        let mut rec = vec![0u8; self.record_len];
        for slot in 0..whole {
            reader
                .read_exact(&mut rec)
                .map_err(|e| cache_err("read", &self.path, e))?;
            let (key, rest) = rec.split_at(KEY_LEN);
            let (vec_bytes, check) = rest.split_at(4 * self.dims);
            if check_of(key, vec_bytes) != check {
                corrupt += 1;
                continue;
            }
            let mut k = [0u8; KEY_LEN];
            k.copy_from_slice(key);
            // A later record for the same key wins.
            self.index.insert(k, Entry { slot, tick: slot });
        }
        self.tick = whole;
        Ok(corrupt)
    }

    fn offset(&self, slot: u64) -> u64 {
        self.header_len + slot * self.record_len as u64
    }

    /// Read and verify one entry; a bad record is dropped from the index.
    fn get(&mut self, key: &[u8; KEY_LEN]) -> Result<Option<Vec<f32>>, Corrupt> {
        let Some(entry) = self.index.get(key) else {
            return Ok(None);
        };
        let mut rec = vec![0u8; self.record_len];
        let ok = read_at(&self.file, &mut rec, self.offset(entry.slot)).is_ok() && {
            let (k, rest) = rec.split_at(KEY_LEN);
            let (vec_bytes, check) = rest.split_at(4 * self.dims);
            k == key && check_of(k, vec_bytes) == check
        };
        if !ok {
            self.index.remove(key);
            return Err(Corrupt);
        }
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.index.get_mut(key) {
            e.tick = tick;
        }
        let v = rec[KEY_LEN..KEY_LEN + 4 * self.dims]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Some(v))
    }

    fn encode(&self, key: &[u8; KEY_LEN], v: &[f32], buf: &mut Vec<u8>) {
        let start = buf.len();
        buf.extend_from_slice(key);
        for x in v {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        let check = check_of(key, &buf[start + KEY_LEN..]);
        buf.extend_from_slice(&check);
    }

    /// Append records (under an exclusive file lock); compact if over the
    /// bound. Returns the number of entries evicted.
    fn append(&mut self, keys: &[[u8; KEY_LEN]], vecs: &[Vec<f32>]) -> std::io::Result<u64> {
        let mut buf = Vec::with_capacity(keys.len() * self.record_len);
        for (k, v) in keys.iter().zip(vecs) {
            self.encode(k, v, &mut buf);
        }
        self.file.lock()?;
        let r = self.append_locked(keys, &buf);
        let _ = self.file.unlock();
        r
    }

    fn append_locked(&mut self, keys: &[[u8; KEY_LEN]], buf: &[u8]) -> std::io::Result<u64> {
        // Another process may have appended (or left a torn tail): align.
        let len = self.file.metadata()?.len();
        let body = len.saturating_sub(self.header_len);
        let whole = body / self.record_len as u64;
        if !body.is_multiple_of(self.record_len as u64) {
            self.file.set_len(self.offset(whole))?;
        }
        self.file.write_all(buf)?;
        for (i, k) in keys.iter().enumerate() {
            self.tick += 1;
            self.index.insert(
                *k,
                Entry {
                    slot: whole + i as u64,
                    tick: self.tick,
                },
            );
        }
        self.slots = whole + keys.len() as u64;
        if self.offset(self.slots) > self.max_bytes {
            return self.compact_locked();
        }
        Ok(0)
    }

    /// Rewrite the file with the most recently used entries, oldest first,
    /// down to 3/4 of the bound. Called with the file lock held.
    fn compact_locked(&mut self) -> std::io::Result<u64> {
        let target = (self.max_bytes / 4 * 3).max(self.header_len + self.record_len as u64);
        let keep_n = ((target - self.header_len) / self.record_len as u64).max(1) as usize;
        let mut entries: Vec<([u8; KEY_LEN], u64, u64)> = self
            .index
            .iter()
            .map(|(k, e)| (*k, e.slot, e.tick))
            .collect();
        entries.sort_unstable_by_key(|e| std::cmp::Reverse(e.2));
        let before = entries.len();
        entries.truncate(keep_n);
        entries.reverse(); // oldest first
        let tmp = self
            .path
            .with_extension(format!("mec.tmp-{}", std::process::id()));
        let mut header = vec![0u8; self.header_len as usize];
        read_at(&self.file, &mut header, 0)?;
        let result = (|| -> std::io::Result<(File, HashMap<[u8; KEY_LEN], Entry>, u64)> {
            let mut opts = OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                opts.mode(0o600);
            }
            let out = opts.open(&tmp)?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, &out);
            w.write_all(&header)?;
            let mut rec = vec![0u8; self.record_len];
            let mut index = HashMap::with_capacity(entries.len());
            let mut slot = 0u64;
            for (key, old_slot, tick) in &entries {
                if read_at(&self.file, &mut rec, self.offset(*old_slot)).is_err() {
                    continue;
                }
                let (k, rest) = rec.split_at(KEY_LEN);
                let (vb, check) = rest.split_at(4 * self.dims);
                if k != key || check_of(k, vb) != check {
                    continue; // corrupt: drop it now
                }
                w.write_all(&rec)?;
                index.insert(*key, Entry { slot, tick: *tick });
                slot += 1;
            }
            w.flush()?;
            drop(w);
            out.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .open(&self.path)?;
            Ok((file, index, slot))
        })();
        match result {
            Ok((file, index, slots)) => {
                let evicted = (before - index.len()) as u64;
                // The old handle's lock goes with it; the new file is unlocked.
                self.file = file;
                self.index = index;
                self.slots = slots;
                Ok(evicted)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

impl EmbeddingProvider for CachedEmbedder {
    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed_lane(Lane::Doc, &[text])?;
        v.pop()
            .ok_or_else(|| EmbeddingError::BackendError("no vector".into()))
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.embed_lane(Lane::Doc, texts)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed_lane(Lane::Query, &[text])?;
        v.pop()
            .ok_or_else(|| EmbeddingError::BackendError("no vector".into()))
    }

    fn dimensions(&self) -> usize {
        self.dims
    }

    fn model_id(&self) -> String {
        self.model_id.clone()
    }

    fn warm(&self) -> Result<(), EmbeddingError> {
        self.inner.warm()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::HashEmbedder;

    #[test]
    fn file_names_are_safe_and_distinct() {
        let a = file_name_for("Qwen/Qwen3-Embedding-0.6B@512");
        let b = file_name_for("Qwen/Qwen3-Embedding-0.6B@1024");
        assert!(!a.contains('/') && !a.contains('@'), "{a}");
        assert_ne!(a, b);
        assert!(a.ends_with(".mec"));
    }

    #[test]
    fn lanes_have_distinct_keys() {
        assert_ne!(key_of(Lane::Doc, "x"), key_of(Lane::Query, "x"));
        assert_eq!(key_of(Lane::Doc, "x"), key_of(Lane::Doc, "x"));
    }

    #[test]
    fn header_round_trip_and_record_len() {
        let h = header_bytes("hash-v1@8", 8);
        assert_eq!(&h[..8], MAGIC);
        assert_eq!(h.len(), 8 + 4 + 4 + 4 + 9 + 16);
        let tmp = tempfile::tempdir().unwrap();
        let c = CachedEmbedder::open(Arc::new(HashEmbedder::new(8)), CacheConfig::new(tmp.path()))
            .unwrap();
        let st = c.stats();
        assert_eq!(st.file_bytes, h.len() as u64);
        assert_eq!(std::fs::read(c.path()).unwrap(), h);
    }
}
