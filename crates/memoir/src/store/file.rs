//! The embedded store: one append-only JSONL file per session.
//!
//! Layout: `<dir>/<id>.jsonl` (mode 0600, directory 0700). An append takes an
//! exclusive `flock` on the file, cuts a torn tail left by a crash (saving the
//! bytes to `<id>.jsonl.torn-<offset>`), finds the last verified record, writes
//! every new record in one `write` call on an `O_APPEND` descriptor, syncs per
//! [`Durability`], and only then returns. A failed write is rolled back by
//! truncating to the length before it, so a full disk never leaves half a record.
//!
//! Unix only: it relies on `O_APPEND`, `flock`, `pread` and inode numbers.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use std::os::unix::fs::{FileExt, MetadataExt};

use super::{scan, sort_newest_first, Appended, Durability, Listed, LogStore, RawLog, TornTail};
use crate::blob::{ExternalizePolicy, PayloadStore};
use crate::error::{Error, IoContext, Result};
use crate::id;
use crate::paths;
use crate::record::{Record, SessionMeta};
use crate::transcript::codec::{self, Hash, ZERO_HASH};

#[path = "file_trash.rs"]
mod file_trash;

/// File extension of transcripts.
pub const EXT: &str = "jsonl";

/// What we last knew about the end of a transcript, to skip re-reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tail {
    ino: u64,
    len: u64,
    seq: u64,
    hash: Hash,
}

/// A directory of session transcripts.
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    durability: Durability,
    tails: Mutex<HashMap<String, Tail>>,
    /// Which payloads go to `<dir>/blobs/` (see [`LogStore::blobs`]).
    blob_policy: ExternalizePolicy,
}

impl FileStore {
    /// A store over `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>, durability: Durability) -> Self {
        FileStore {
            dir: dir.into(),
            durability,
            tails: Mutex::new(HashMap::new()),
            blob_policy: ExternalizePolicy::TRANSCRIPT,
        }
    }

    /// Builder: which payloads go to the blob store beside the transcripts
    /// (default [`ExternalizePolicy::TRANSCRIPT`]: above 64 KiB;
    /// [`ExternalizePolicy::NEVER`] keeps everything inline).
    pub fn with_blob_policy(mut self, policy: ExternalizePolicy) -> Self {
        self.blob_policy = policy;
        self
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store and session id a transcript path belongs to.
    pub fn for_path(path: &Path, durability: Durability) -> Result<(FileStore, String)> {
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| Error::Invalid(format!("{} is not a transcript path", path.display())))?
            .to_string();
        id::validate(&id)?;
        let dir = path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .to_path_buf();
        Ok((FileStore::new(dir, durability), id))
    }

    /// Path of the transcript of `id` (validated).
    pub fn path_of(&self, id: &str) -> Result<PathBuf> {
        id::validate(id)?;
        Ok(self.dir.join(format!("{id}.{EXT}")))
    }

    /// Path of the ownership lock of `id`.
    pub fn lock_path_of(&self, id: &str) -> Result<PathBuf> {
        id::validate(id)?;
        Ok(self.dir.join(format!("{id}.lock")))
    }

    fn sync(&self) -> bool {
        self.durability != Durability::None
    }

    fn cached_tail(&self, id: &str) -> Option<Tail> {
        self.tails.lock().ok()?.get(id).copied()
    }

    fn remember_tail(&self, id: &str, tail: Tail) {
        if let Ok(mut tails) = self.tails.lock() {
            if tails.len() > 4096 {
                tails.clear();
            }
            tails.insert(id.to_string(), tail);
        }
    }

    /// Establish the verified end of the file, repairing a torn tail.
    /// Called with the append lock held.
    fn settle_tail(
        &self,
        id: &str,
        file: &mut File,
        path: &Path,
    ) -> Result<(Tail, Option<TornTail>)> {
        let meta = file.metadata().ctx("stat", path)?;
        let (ino, len) = (inode(&meta), meta.len());
        if let Some(t) = self.cached_tail(id) {
            if t.ino == ino && t.len == len && suffix_names(file, len, &t.hash) {
                return Ok((t, None));
            }
        }
        let mut repaired = None;
        let mut end = len;
        if len > 0 && read_at(file, len - 1, 1).ctx("read", path)? != b"\n" {
            let start = line_start_before(file, len).ctx("read", path)?;
            let mut partial = read_at(file, start, (len - start) as usize).ctx("read", path)?;
            if codec::decode(&mut partial).is_ok() {
                // A complete record that only lacks its newline: keep it.
                file.write_all(b"\n").ctx("write", path)?;
                end = len + 1;
            } else {
                let saved_to = path.with_extension(format!("{EXT}.torn-{start}"));
                let mut side = paths::private_new_file()
                    .open(&saved_to)
                    .ctx("create", &saved_to)?;
                side.write_all(&partial).ctx("write", &saved_to)?;
                if self.sync() {
                    side.sync_all().ctx("fsync", &saved_to)?;
                }
                file.set_len(start).ctx("truncate", path)?;
                if self.sync() {
                    file.sync_data().ctx("fsync", path)?;
                }
                end = start;
                repaired = Some(TornTail {
                    offset: start,
                    bytes: len - start,
                    saved_to,
                });
            }
        }
        // Walk back to the last line that verifies.
        let mut line_end = end;
        while line_end > 0 {
            let start = line_start_before(file, line_end - 1).ctx("read", path)?;
            let line = read_at(file, start, (line_end - 1 - start) as usize).ctx("read", path)?;
            if let Ok((seq, _, hash)) = codec::verify_frame(&line) {
                let tail = Tail {
                    ino,
                    len: end,
                    seq,
                    hash,
                };
                return Ok((tail, repaired));
            }
            line_end = start;
        }
        Err(Error::NoHeader(path.to_path_buf()))
    }
}

impl LogStore for FileStore {
    fn blobs(&self) -> Option<PayloadStore> {
        Some(PayloadStore::beside(&self.dir, self.blob_policy))
    }

    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        let path = self.path_of(&meta.id)?;
        paths::create_private_dir(&self.dir)?;
        let mut line = Vec::new();
        let hash = codec::encode_into(&mut line, 0, &ZERO_HASH, &Record::Meta(meta.clone()))?;
        // Write the header to a temp file, then hard-link it into place: the
        // link fails if the id exists, and no reader ever sees a headerless file.
        let tmp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            meta.id,
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let result = (|| {
            let mut f = paths::private_new_file().open(&tmp).ctx("create", &tmp)?;
            f.write_all(&line).ctx("write", &tmp)?;
            if self.sync() {
                f.sync_all().ctx("fsync", &tmp)?;
            }
            match fs::hard_link(&tmp, &path) {
                Ok(()) => Ok(f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    Err(Error::SessionExists(meta.id.clone()))
                }
                Err(e) => Err(e).ctx("link", &path),
            }
        })();
        let _ = fs::remove_file(&tmp);
        let f = result?;
        if self.sync() {
            paths::sync_dir(&self.dir)?;
        }
        let ino = f.metadata().map(|m| inode(&m)).unwrap_or(0);
        self.remember_tail(
            &meta.id,
            Tail {
                ino,
                len: line.len() as u64,
                seq: 0,
                hash,
            },
        );
        Ok(Appended {
            first_seq: 0,
            last_seq: 0,
            repaired: None,
        })
    }

    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        let path = self.path_of(id)?;
        let mut file = match OpenOptions::new().read(true).append(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(id.to_string()))
            }
            Err(e) => return Err(e).ctx("open", &path),
        };
        file.lock().ctx("lock", &path)?;
        // Deleted (renamed into the trash) while we waited for the lock?
        let result = file_trash::ensure_still_live(&file, &path, id)
            .and_then(|()| self.append_locked(id, &mut file, &path, records, expected_next));
        let _ = file.unlock();
        result
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        let path = self.path_of(id)?;
        let file = open_existing(&path, id)?;
        scan::scan(BufReader::with_capacity(1 << 20, file)).ctx("read", &path)
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        let path = self.path_of(id)?;
        let file = open_existing(&path, id)?;
        Ok(header_of(file))
    }

    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(e).ctx("read directory", &self.dir),
        };
        let mut out = Vec::new();
        let mut unreadable = 0;
        for entry in entries {
            let entry = entry.ctx("read directory", &self.dir)?;
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some(EXT) {
                continue;
            }
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                unreadable += 1;
                continue;
            };
            let header = File::open(&path).ok().and_then(header_of);
            match header {
                Some(meta) if meta.id == stem => out.push(Listed {
                    meta,
                    location: path,
                }),
                _ => unreadable += 1,
            }
        }
        sort_newest_first(&mut out);
        Ok((out, unreadable))
    }

    fn location(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.{EXT}"))
    }

    fn durability(&self) -> Durability {
        self.durability
    }

    fn delete(&self, id: &str) -> Result<()> {
        self.delete_to_trash(id)
    }

    fn restore(&self, id: &str) -> Result<()> {
        self.restore_from_trash(id)
    }

    // Trash, lease and activity: see `file_trash.rs`.
    fn list_deleted(&self) -> Result<Vec<super::DeletedListed>> {
        self.list_trash()
    }

    fn read_deleted(&self, id: &str) -> Result<RawLog> {
        self.read_trashed(id)
    }

    fn purge(&self, id: &str) -> Result<()> {
        self.purge_trashed(id)
    }

    fn acquire_lease(&self, id: &str) -> Result<super::Lease> {
        self.lease(id)
    }

    fn touch(&self, id: &str) -> Result<()> {
        self.touch_file(id)
    }

    fn last_activity(&self, id: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
        self.modified(id)
    }

    fn index_dir(&self) -> Option<&Path> {
        Some(&self.dir)
    }
}

/// Subdirectory holding deleted transcripts until they are restored.
pub const TRASH_DIR: &str = ".deleted";

impl FileStore {
    fn append_locked(
        &self,
        id: &str,
        file: &mut File,
        path: &Path,
        records: &[Record],
        expected_next: Option<u64>,
    ) -> Result<Appended> {
        let (tail, repaired) = self.settle_tail(id, file, path)?;
        let first_seq = tail.seq + 1;
        if let Some(expected) = expected_next {
            if expected != first_seq {
                return Err(Error::Conflict {
                    id: id.to_string(),
                    expected,
                    actual: first_seq,
                });
            }
        }
        if records.is_empty() {
            return Ok(Appended {
                first_seq,
                last_seq: tail.seq,
                repaired,
            });
        }
        if records.iter().any(|r| matches!(r, Record::Meta(_))) {
            return Err(Error::Invalid(
                "a header record can only be written by create".into(),
            ));
        }
        let mut buf = Vec::new();
        let mut hash = tail.hash;
        let mut seq = tail.seq;
        for record in records {
            seq += 1;
            hash = codec::encode_into(&mut buf, seq, &hash, record)?;
        }
        if let Err(e) = file.write_all(&buf) {
            // Roll back a partial write (e.g. a full disk) so no torn record stays.
            let _ = file.set_len(tail.len);
            return Err(e).ctx("write", path);
        }
        if self.durability == Durability::Fsync {
            if let Err(e) = file.sync_data() {
                let _ = file.set_len(tail.len);
                return Err(e).ctx("fsync", path);
            }
        }
        self.remember_tail(
            id,
            Tail {
                ino: tail.ino,
                len: tail.len + buf.len() as u64,
                seq,
                hash,
            },
        );
        Ok(Appended {
            first_seq,
            last_seq: seq,
            repaired,
        })
    }
}

fn open_existing(path: &Path, id: &str) -> Result<File> {
    match File::open(path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotFound(id.to_string())),
        Err(e) => Err(e).ctx("open", path),
    }
}

/// The verified header of a transcript: its first line only.
fn header_of(file: File) -> Option<SessionMeta> {
    // Headers are a few hundred bytes: a small first read keeps listing cost
    // independent of transcript size.
    let mut reader = BufReader::with_capacity(1024, file);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).ok()?;
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    match codec::decode(&mut line).ok()? {
        codec::Decoded {
            seq: 0,
            record: Record::Meta(meta),
            ..
        } => Some(meta),
        _ => None,
    }
}

fn inode(meta: &fs::Metadata) -> u64 {
    meta.ino()
}

fn read_at(file: &mut File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// Offset just after the last `\n` strictly before `end` (0 if none).
fn line_start_before(file: &mut File, end: u64) -> std::io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let mut hi = end;
    while hi > 0 {
        let lo = hi.saturating_sub(BLOCK);
        let block = read_at(file, lo, (hi - lo) as usize)?;
        if let Some(pos) = block.iter().rposition(|&b| b == b'\n') {
            return Ok(lo + pos as u64 + 1);
        }
        hi = lo;
    }
    Ok(0)
}

/// Does the file end with the `h` suffix naming `hash`? (Cheap cache check.)
fn suffix_names(file: &mut File, len: u64, hash: &Hash) -> bool {
    let want = format!("\"h\":\"{}\"}}\n", codec::hex(hash));
    let n = want.len() as u64;
    len >= n && read_at(file, len - n, n as usize).is_ok_and(|got| got == want.as_bytes())
}
