//! [`ArtifactStore`]: the content-addressed, reference-counted blob store.
//!
//! Two backends behind one type: files under `<root>/blobs/` (durable, shared
//! between processes) and memory (tests, throwaway views). Layout of the file
//! backend:
//!
//! ```text
//! <root>/blobs/.lock                     advisory lock held by every mutation
//! <root>/blobs/<h[0..2]>/<h>             the bytes; h = BLAKE3(bytes), 64 hex
//! <root>/blobs/<h[0..2]>/<h>.refs        reference count, ASCII decimal + "\n"
//! ```
//!
//! Every file is written with [`crate::paths::atomic_write`] (temp file, fsync,
//! rename, fsync of the directory), so a crash leaves either the old or the new
//! file, never a torn one. A missing `.refs` file means a count of 0. Every
//! load re-hashes the bytes and fails with [`BlobError::Corrupt`] when they do
//! not match their name. Blobs are deleted only by [`ArtifactStore::remove`]
//! and by the garbage collector [`ArtifactStore::gc`], which deletes the blobs
//! whose count is 0.

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use super::{check_hash, hash_bytes, is_valid_hash, BlobError};
use crate::error::IoContext;
use crate::paths::{atomic_write, create_private_dir, sync_dir};

/// Temp files older than this are left-overs of a crashed writer; `gc` removes them.
const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// One stored blob, as listed by [`ArtifactStore::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobInfo {
    /// Its BLAKE3 hash (64 lowercase hex digits).
    pub hash: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its persisted reference count.
    pub ref_count: u64,
}

/// What a garbage collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Blobs deleted because nothing referenced them.
    pub removed_blobs: usize,
    /// Bytes those blobs held.
    pub removed_bytes: u64,
    /// Blobs still referenced and kept.
    pub kept_blobs: usize,
    /// Stray files removed: reference counts without a blob, stale temp files.
    pub removed_strays: usize,
}

#[derive(Debug)]
struct MemBlob {
    bytes: Arc<[u8]>,
    refs: u64,
    /// When it was last stored (the file backend's modification time).
    stored: SystemTime,
}

/// A blob backend other than files and memory: PostgreSQL's blobs table,
/// a remote `memoir serve`. It stores bytes under their hash and lists them;
/// [`ArtifactStore`] verifies every load and runs the collection on top.
/// Such backends keep no reference counts (their blobs are transcript
/// payloads, kept by reachability: [`crate::transcript::blobs`]).
pub trait BlobBackend: Send + Sync + std::fmt::Debug {
    /// Store `bytes` under `hash` (their BLAKE3, checked by the caller);
    /// storing the same bytes again only refreshes the blob's stored time.
    fn put(&self, hash: &str, bytes: &[u8], media_type: Option<&str>) -> Result<(), BlobError>;
    /// The bytes stored under `hash`, as stored (`None` when absent).
    fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, BlobError>;
    /// Whether a blob is stored under `hash`.
    fn contains(&self, hash: &str) -> Result<bool, BlobError>;
    /// Delete the blob; whether it existed.
    fn remove(&self, hash: &str) -> Result<bool, BlobError>;
    /// Every blob: hash, size and when it was last stored.
    fn list(&self) -> Result<Vec<(String, u64, SystemTime)>, BlobError>;
    /// Where the blob lives, for messages (e.g. `postgres://.../blobs/<hash>`).
    fn locate(&self, hash: &str) -> PathBuf;
    /// True when this side never collects these blobs: another party does
    /// (a remote server collects its own after its purges).
    fn collected_elsewhere(&self) -> bool {
        false
    }
}

/// The error of a reference-count operation on a backend without counts.
fn uncounted() -> BlobError {
    BlobError::Storage(
        crate::error::StoreError::Unsupported {
            operation: "count blob references",
        }
        .into(),
    )
}

#[derive(Debug)]
enum Backend {
    Custom(Arc<dyn BlobBackend>),
    Memory(Mutex<HashMap<String, MemBlob>>),
    File {
        /// `<root>/blobs`.
        dir: PathBuf,
        /// Serialises this process's mutations; the `.lock` file serialises processes.
        mutex: Mutex<()>,
    },
}

/// A content-addressed blob store with reference counts. `Send + Sync`; share
/// it as `Arc<ArtifactStore>`.
#[derive(Debug)]
pub struct ArtifactStore {
    backend: Backend,
}

/// Holds the in-process mutex and the cross-process file lock.
struct WriteGuard<'a> {
    _mutex: MutexGuard<'a, ()>,
    _file: fs::File,
}

fn lock_mutex<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the protected data half
    // written (every file write is atomic), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ArtifactStore {
    /// Open (creating if needed) the file-backed store under `<root>/blobs`.
    pub fn open(root: &Path) -> Result<Self, BlobError> {
        let store = ArtifactStore::at(root);
        if let Some(dir) = store.dir() {
            create_private_dir(dir)?;
        }
        Ok(store)
    }

    /// The file-backed store under `<root>/blobs`, created on the first
    /// write (reading a store that was never written finds nothing).
    pub fn at(root: &Path) -> Self {
        ArtifactStore {
            backend: Backend::File {
                dir: root.join("blobs"),
                mutex: Mutex::new(()),
            },
        }
    }

    /// A store over another backend ([`BlobBackend`]: PostgreSQL, HTTP).
    pub fn custom(backend: Arc<dyn BlobBackend>) -> Self {
        ArtifactStore {
            backend: Backend::Custom(backend),
        }
    }

    /// A store that lives in memory only (tests, throwaway views).
    pub fn in_memory() -> Self {
        ArtifactStore {
            backend: Backend::Memory(Mutex::new(HashMap::new())),
        }
    }

    /// True when collection after a purge is not this side's job (see
    /// [`BlobBackend::collected_elsewhere`]).
    pub fn collected_elsewhere(&self) -> bool {
        match &self.backend {
            Backend::Custom(b) => b.collected_elsewhere(),
            Backend::Memory(_) | Backend::File { .. } => false,
        }
    }

    /// The blob directory of a file-backed store (`None` in memory).
    pub fn dir(&self) -> Option<&Path> {
        match &self.backend {
            Backend::File { dir, .. } => Some(dir),
            Backend::Memory(_) | Backend::Custom(_) => None,
        }
    }

    /// Where the blob `hash` lives (file backend). `hash` must be valid.
    pub fn blob_path(&self, hash: &str) -> Option<PathBuf> {
        self.dir()
            .filter(|_| is_valid_hash(hash))
            .map(|d| d.join(&hash[..2]).join(hash))
    }

    fn refs_path(dir: &Path, hash: &str) -> PathBuf {
        dir.join(&hash[..2]).join(format!("{hash}.refs"))
    }

    fn write_lock<'a>(dir: &Path, mutex: &'a Mutex<()>) -> Result<WriteGuard<'a>, BlobError> {
        let guard = lock_mutex(mutex);
        create_private_dir(dir)?;
        let path = dir.join(".lock");
        let mut opts = fs::OpenOptions::new();
        opts.create(true).truncate(false).read(true).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts.open(&path).ctx("open lock file", &path)?;
        file.lock().ctx("lock", &path)?;
        Ok(WriteGuard {
            _mutex: guard,
            _file: file,
        })
    }

    fn read_refs(dir: &Path, hash: &str) -> Result<u64, BlobError> {
        let path = Self::refs_path(dir, hash);
        match fs::read_to_string(&path) {
            Ok(s) => s.trim().parse::<u64>().map_err(|e| BlobError::BadRefCount {
                path,
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
            Err(e) => Err(crate::Error::Io {
                op: "read",
                path,
                source: e,
            }
            .into()),
        }
    }

    fn write_refs(dir: &Path, hash: &str, n: u64) -> Result<(), BlobError> {
        let path = Self::refs_path(dir, hash);
        atomic_write(&path, format!("{n}\n").as_bytes())?;
        Ok(())
    }

    /// Store `bytes` and take one reference to them; returns their hash.
    ///
    /// Identical content is stored once: a second `put` only increments the
    /// count. A stored copy that no longer verifies is rewritten.
    pub fn put(&self, bytes: &[u8]) -> Result<String, BlobError> {
        self.store_bytes(bytes, 1, None)
    }

    /// Store `bytes` without taking a reference (the count is unchanged, 0
    /// for a new blob); returns their hash. For holders that are found by
    /// scanning rather than counted: transcripts, whose blobs
    /// [`crate::transcript::blobs::collect_garbage`] keeps while any session
    /// references them. An existing blob's modification time is refreshed,
    /// so a collection running meanwhile sees it as fresh.
    pub fn put_unreferenced(&self, bytes: &[u8]) -> Result<String, BlobError> {
        self.store_bytes(bytes, 0, None)
    }

    /// [`ArtifactStore::put_unreferenced`] of a payload whose media type is
    /// known (kept by backends that store one, e.g. PostgreSQL).
    pub fn put_payload(&self, bytes: &[u8], media_type: &str) -> Result<String, BlobError> {
        self.store_bytes(bytes, 0, Some(media_type))
    }

    fn store_bytes(
        &self,
        bytes: &[u8],
        refs: u64,
        media_type: Option<&str>,
    ) -> Result<String, BlobError> {
        let hash = hash_bytes(bytes);
        match &self.backend {
            Backend::Custom(b) => {
                if refs > 0 {
                    return Err(uncounted());
                }
                b.put(&hash, bytes, media_type)?;
            }
            Backend::Memory(map) => {
                let mut map = lock_mutex(map);
                let entry = map.entry(hash.clone()).or_insert_with(|| MemBlob {
                    bytes: Arc::from(bytes),
                    refs: 0,
                    stored: SystemTime::now(),
                });
                entry.refs = entry.refs.saturating_add(refs);
                entry.stored = SystemTime::now();
            }
            Backend::File { dir, mutex } => {
                let _guard = Self::write_lock(dir, mutex)?;
                let path = dir.join(&hash[..2]).join(&hash);
                let intact = match fs::read(&path) {
                    Ok(existing) => hash_bytes(&existing) == hash,
                    Err(e) if e.kind() == ErrorKind::NotFound => false,
                    Err(e) => return Err(e).ctx("read", path).map_err(Into::into),
                };
                if !intact {
                    create_private_dir(&dir.join(&hash[..2]))?;
                    atomic_write(&path, bytes)?;
                } else if refs == 0 {
                    let now = fs::FileTimes::new().set_modified(SystemTime::now());
                    fs::File::options()
                        .write(true)
                        .open(&path)
                        .and_then(|f| f.set_times(now))
                        .ctx("touch", &path)?;
                }
                if refs > 0 {
                    let n = Self::read_refs(dir, &hash)?;
                    Self::write_refs(dir, &hash, n.saturating_add(refs))?;
                }
            }
        }
        Ok(hash)
    }

    /// Store UTF-8 text; see [`ArtifactStore::put`].
    pub fn put_str(&self, text: &str) -> Result<String, BlobError> {
        self.put(text.as_bytes())
    }

    /// Take one more reference to a stored blob; returns the new count.
    pub fn retain(&self, hash: &str) -> Result<u64, BlobError> {
        self.adjust_refs(hash, |n| n.saturating_add(1))
    }

    /// Drop one reference; returns the new count (never below 0). The blob
    /// stays until [`ArtifactStore::gc`] runs.
    pub fn release(&self, hash: &str) -> Result<u64, BlobError> {
        self.adjust_refs(hash, |n| n.saturating_sub(1))
    }

    /// Apply `change` to a stored blob's reference count under the write lock.
    fn adjust_refs(&self, hash: &str, change: impl Fn(u64) -> u64) -> Result<u64, BlobError> {
        check_hash(hash)?;
        match &self.backend {
            Backend::Custom(_) => Err(uncounted()),
            Backend::Memory(map) => {
                let mut map = lock_mutex(map);
                let b = map
                    .get_mut(hash)
                    .ok_or_else(|| BlobError::NotFound(hash.to_string()))?;
                b.refs = change(b.refs);
                Ok(b.refs)
            }
            Backend::File { dir, mutex } => {
                let _guard = Self::write_lock(dir, mutex)?;
                if !dir.join(&hash[..2]).join(hash).is_file() {
                    return Err(BlobError::NotFound(hash.to_string()));
                }
                let n = change(Self::read_refs(dir, hash)?);
                Self::write_refs(dir, hash, n)?;
                Ok(n)
            }
        }
    }

    /// The persisted reference count of a stored blob.
    pub fn ref_count(&self, hash: &str) -> Result<u64, BlobError> {
        check_hash(hash)?;
        match &self.backend {
            Backend::Custom(b) => match b.contains(hash)? {
                true => Ok(0),
                false => Err(BlobError::NotFound(hash.to_string())),
            },
            Backend::Memory(map) => lock_mutex(map)
                .get(hash)
                .map(|b| b.refs)
                .ok_or_else(|| BlobError::NotFound(hash.to_string())),
            Backend::File { dir, .. } => {
                if !dir.join(&hash[..2]).join(hash).is_file() {
                    return Err(BlobError::NotFound(hash.to_string()));
                }
                Self::read_refs(dir, hash)
            }
        }
    }

    /// Whether a blob with this hash is stored (not verified).
    pub fn contains(&self, hash: &str) -> bool {
        if !is_valid_hash(hash) {
            return false;
        }
        match &self.backend {
            Backend::Custom(b) => b.contains(hash).unwrap_or(false),
            Backend::Memory(map) => lock_mutex(map).contains_key(hash),
            Backend::File { dir, .. } => dir.join(&hash[..2]).join(hash).is_file(),
        }
    }

    /// Load a blob and verify that its bytes hash to `hash`.
    pub fn load(&self, hash: &str) -> Result<Vec<u8>, BlobError> {
        check_hash(hash)?;
        let (bytes, path) = match &self.backend {
            Backend::Custom(b) => match b.get(hash)? {
                Some(bytes) => (bytes, b.locate(hash)),
                None => return Err(BlobError::NotFound(hash.to_string())),
            },
            Backend::Memory(map) => {
                let bytes = lock_mutex(map)
                    .get(hash)
                    .map(|b| b.bytes.to_vec())
                    .ok_or_else(|| BlobError::NotFound(hash.to_string()))?;
                (bytes, PathBuf::new())
            }
            Backend::File { dir, .. } => {
                let path = dir.join(&hash[..2]).join(hash);
                match fs::read(&path) {
                    Ok(b) => (b, path),
                    Err(e) if e.kind() == ErrorKind::NotFound => {
                        return Err(BlobError::NotFound(hash.to_string()))
                    }
                    Err(e) => return Err(e).ctx("read", path).map_err(Into::into),
                }
            }
        };
        let actual = hash_bytes(&bytes);
        if actual != hash {
            return Err(BlobError::Corrupt {
                hash: hash.to_string(),
                actual,
                path,
            });
        }
        Ok(bytes)
    }

    /// Load a blob as UTF-8 text (verified like [`ArtifactStore::load`]).
    pub fn load_string(&self, hash: &str) -> Result<String, BlobError> {
        String::from_utf8(self.load(hash)?).map_err(|_| BlobError::NotText(hash.to_string()))
    }

    /// Delete a blob and its count whatever the count is. Returns whether it existed.
    pub fn remove(&self, hash: &str) -> Result<bool, BlobError> {
        check_hash(hash)?;
        match &self.backend {
            Backend::Custom(b) => b.remove(hash),
            Backend::Memory(map) => Ok(lock_mutex(map).remove(hash).is_some()),
            Backend::File { dir, mutex } => {
                let _guard = Self::write_lock(dir, mutex)?;
                let existed = remove_if_exists(&dir.join(&hash[..2]).join(hash))?;
                remove_if_exists(&Self::refs_path(dir, hash))?;
                sync_dir(&dir.join(&hash[..2]))
                    .or_else(|e| if existed { Err(e) } else { Ok(()) })?;
                Ok(existed)
            }
        }
    }

    /// Every stored blob with its size and count, sorted by hash.
    pub fn list(&self) -> Result<Vec<BlobInfo>, BlobError> {
        let mut out = match &self.backend {
            Backend::Custom(b) => b
                .list()?
                .into_iter()
                .map(|(hash, size, _)| BlobInfo {
                    hash,
                    size,
                    ref_count: 0,
                })
                .collect(),
            Backend::Memory(map) => lock_mutex(map)
                .iter()
                .map(|(h, b)| BlobInfo {
                    hash: h.clone(),
                    size: b.bytes.len() as u64,
                    ref_count: b.refs,
                })
                .collect(),
            Backend::File { dir, .. } => {
                let mut out = Vec::new();
                for shard in shard_dirs(dir)? {
                    for entry in fs::read_dir(&shard).ctx("read directory", &shard)? {
                        let entry = entry.ctx("read directory", &shard)?;
                        let name = entry.file_name().to_string_lossy().into_owned();
                        if is_valid_hash(&name) {
                            let size = entry.metadata().ctx("stat", entry.path())?.len();
                            out.push(BlobInfo {
                                ref_count: Self::read_refs(dir, &name)?,
                                hash: name,
                                size,
                            });
                        }
                    }
                }
                out
            }
        };
        out.sort_by(|a, b| a.hash.cmp(&b.hash));
        Ok(out)
    }

    /// Number of stored blobs and their total size in bytes.
    pub fn stats(&self) -> Result<(usize, u64), BlobError> {
        let list = self.list()?;
        Ok((list.len(), list.iter().map(|b| b.size).sum()))
    }

    /// Garbage-collect: delete every blob whose reference count is 0, count
    /// files without a blob, and temp files left by a crashed writer (older
    /// than an hour).
    pub fn gc(&self) -> Result<GcReport, BlobError> {
        let mut report = GcReport::default();
        match &self.backend {
            // Without counts, "count 0" is every blob: collect by
            // reachability instead (`gc_keeping`).
            Backend::Custom(_) => return Err(uncounted()),
            Backend::Memory(map) => {
                let mut map = lock_mutex(map);
                map.retain(|_, b| {
                    if b.refs == 0 {
                        report.removed_blobs += 1;
                        report.removed_bytes += b.bytes.len() as u64;
                        false
                    } else {
                        report.kept_blobs += 1;
                        true
                    }
                });
            }
            Backend::File { dir, mutex } => {
                let _guard = Self::write_lock(dir, mutex)?;
                let now = SystemTime::now();
                for shard in shard_dirs(dir)? {
                    let mut changed = false;
                    let mut names: Vec<(String, fs::Metadata)> = Vec::new();
                    for entry in fs::read_dir(&shard).ctx("read directory", &shard)? {
                        let entry = entry.ctx("read directory", &shard)?;
                        let meta = entry.metadata().ctx("stat", entry.path())?;
                        names.push((entry.file_name().to_string_lossy().into_owned(), meta));
                    }
                    for (name, meta) in &names {
                        let path = shard.join(name);
                        if is_valid_hash(name) {
                            if Self::read_refs(dir, name)? == 0 {
                                remove_if_exists(&path)?;
                                remove_if_exists(&Self::refs_path(dir, name))?;
                                report.removed_blobs += 1;
                                report.removed_bytes += meta.len();
                                changed = true;
                            } else {
                                report.kept_blobs += 1;
                            }
                        } else if let Some(h) = name.strip_suffix(".refs") {
                            // (The count of a blob removed above is already gone.)
                            if is_valid_hash(h)
                                && !shard.join(h).exists()
                                && remove_if_exists(&path)?
                            {
                                report.removed_strays += 1;
                                changed = true;
                            }
                        } else if name.starts_with('.') && name.ends_with(".tmp") {
                            let old = meta
                                .modified()
                                .ok()
                                .and_then(|m| now.duration_since(m).ok())
                                .is_some_and(|age| age > STALE_TEMP_AGE);
                            if old {
                                remove_if_exists(&path)?;
                                report.removed_strays += 1;
                                changed = true;
                            }
                        }
                    }
                    if changed {
                        sync_dir(&shard)?;
                    }
                }
            }
        }
        Ok(report)
    }
}

impl ArtifactStore {
    /// Garbage-collect by reachability: delete every blob that is not in
    /// `keep`, has a reference count of 0 and was stored longer than `grace`
    /// ago (a writer that stored a blob and has not yet appended the record
    /// naming it is not robbed). Stray files are cleaned as by
    /// [`ArtifactStore::gc`].
    pub fn gc_keeping(
        &self,
        keep: &std::collections::HashSet<String>,
        grace: Duration,
    ) -> Result<GcReport, BlobError> {
        let mut report = GcReport::default();
        let now = SystemTime::now();
        let old = |t: SystemTime| now.duration_since(t).is_ok_and(|age| age >= grace);
        match &self.backend {
            Backend::Custom(b) => {
                for (hash, size, stored) in b.list()? {
                    if keep.contains(&hash) || !old(stored) {
                        report.kept_blobs += 1;
                        continue;
                    }
                    if b.remove(&hash)? {
                        report.removed_blobs += 1;
                        report.removed_bytes += size;
                    }
                }
            }
            Backend::Memory(map) => {
                let mut map = lock_mutex(map);
                map.retain(|h, b| {
                    if b.refs == 0 && !keep.contains(h) && old(b.stored) {
                        report.removed_blobs += 1;
                        report.removed_bytes += b.bytes.len() as u64;
                        false
                    } else {
                        report.kept_blobs += 1;
                        true
                    }
                });
            }
            Backend::File { dir, mutex } => {
                if !dir.is_dir() {
                    return Ok(report);
                }
                let _guard = Self::write_lock(dir, mutex)?;
                for shard in shard_dirs(dir)? {
                    let mut changed = false;
                    for entry in fs::read_dir(&shard).ctx("read directory", &shard)? {
                        let entry = entry.ctx("read directory", &shard)?;
                        let name = entry.file_name().to_string_lossy().into_owned();
                        if !is_valid_hash(&name) {
                            continue;
                        }
                        let meta = entry.metadata().ctx("stat", entry.path())?;
                        let fresh = meta.modified().map_or(true, |m| !old(m));
                        if keep.contains(&name) || fresh || Self::read_refs(dir, &name)? > 0 {
                            report.kept_blobs += 1;
                            continue;
                        }
                        remove_if_exists(&entry.path())?;
                        remove_if_exists(&Self::refs_path(dir, &name))?;
                        report.removed_blobs += 1;
                        report.removed_bytes += meta.len();
                        changed = true;
                    }
                    if changed {
                        sync_dir(&shard)?;
                    }
                }
                drop(_guard);
                // Strays (counts without a blob, stale temp files) as `gc` does;
                // every blob left has a count > 0, is kept, or is fresh.
                let strays = self.gc_strays()?;
                report.removed_strays += strays;
            }
        }
        Ok(report)
    }

    /// Remove reference counts without a blob and stale temp files.
    fn gc_strays(&self) -> Result<usize, BlobError> {
        let Backend::File { dir, mutex } = &self.backend else {
            return Ok(0);
        };
        let _guard = Self::write_lock(dir, mutex)?;
        let now = SystemTime::now();
        let mut removed = 0;
        for shard in shard_dirs(dir)? {
            for entry in fs::read_dir(&shard).ctx("read directory", &shard)? {
                let entry = entry.ctx("read directory", &shard)?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                let stray = if let Some(h) = name.strip_suffix(".refs") {
                    is_valid_hash(h) && !shard.join(h).exists()
                } else if name.starts_with('.') && name.ends_with(".tmp") {
                    let meta = entry.metadata().ctx("stat", &path)?;
                    meta.modified()
                        .ok()
                        .and_then(|m| now.duration_since(m).ok())
                        .is_some_and(|age| age > STALE_TEMP_AGE)
                } else {
                    false
                };
                if stray && remove_if_exists(&path)? {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}

fn remove_if_exists(path: &Path) -> Result<bool, BlobError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(crate::Error::Io {
            op: "remove",
            path: path.to_path_buf(),
            source: e,
        }
        .into()),
    }
}

/// The `<2 hex>` shard directories under `dir`, sorted.
fn shard_dirs(dir: &Path) -> Result<Vec<PathBuf>, BlobError> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
        other => other.ctx("read directory", dir)?,
    };
    for entry in entries {
        let entry = entry.ctx("read directory", dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_shard =
            name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if is_shard && entry.path().is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_dedups_and_counts() {
        let s = ArtifactStore::in_memory();
        let a = s.put(b"same").unwrap();
        let b = s.put(b"same").unwrap();
        assert_eq!(a, b);
        assert_eq!(s.ref_count(&a).unwrap(), 2);
        assert_eq!(s.release(&a).unwrap(), 1);
        assert_eq!(s.release(&a).unwrap(), 0);
        assert_eq!(s.release(&a).unwrap(), 0, "release saturates at zero");
        assert_eq!(s.load(&a).unwrap(), b"same");
        let r = s.gc().unwrap();
        assert_eq!(r.removed_blobs, 1);
        assert!(!s.contains(&a));
        assert!(matches!(s.load(&a), Err(BlobError::NotFound(_))));
    }

    #[test]
    fn file_layout_is_sharded_by_two_hex_digits() {
        let tmp = tempfile::tempdir().unwrap();
        let s = ArtifactStore::open(tmp.path()).unwrap();
        let h = s.put(b"layout").unwrap();
        let p = tmp.path().join("blobs").join(&h[..2]).join(&h);
        assert!(p.is_file());
        assert_eq!(s.blob_path(&h).unwrap(), p);
        let refs = fs::read_to_string(p.with_file_name(format!("{h}.refs"))).unwrap();
        assert_eq!(refs, "1\n");
    }
}
