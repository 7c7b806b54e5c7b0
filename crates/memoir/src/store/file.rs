//! The embedded store: one append-only JSONL file per session.
//!
//! Layout: `<dir>/<id>.jsonl` (mode 0600, directory 0700). An append takes an
//! exclusive `flock` on the file, settles its tail (see below), writes every
//! new record in one `write` call on an `O_APPEND` descriptor, syncs per
//! [`Durability`], and only then returns. A failed write is rolled back by
//! truncating to the length before it, so a full disk never leaves half a
//! record; a failed sync also poisons the session for this store
//! ([`Error::Poisoned`]) until [`FileStore::reverify`].
//!
//! Settling the tail, when the store did not write the file's last bytes
//! itself: every line is frame-checked (no payload parse) with the reader's
//! own rules ([`scan::Scanner::frames_only`]), so the next `seq` follows the
//! last record a reader applies, wherever it is in the file; a torn last line
//! and a multi-record batch whose last record is missing are cut, after their
//! bytes are saved to `<id>.jsonl.torn-<offset>` (written under a temp name,
//! reused when an identical copy exists, so a repair interrupted at any step
//! can simply run again).
//!
//! Concurrent appends to one session through one store share one `write`
//! and one sync (group commit, `file_group.rs`); every change to a
//! transcript is first noted in the change journal (`file_changes.rs`) for
//! listing caches; whole reads verify lines on several threads
//! (`file_read.rs`).
//!
//! Transcripts are opened with `O_NOFOLLOW | O_NONBLOCK` and checked with
//! `fstat`: symlinks, FIFOs, directories and devices are refused with
//! [`Error::NotRegularFile`]. Reads never create the store directory.
//!
//! Unix only: it relies on `O_APPEND`, `flock`, `pread` and inode numbers.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};

use super::fault::{FaultPlan, Io};
use super::{
    line, scan, sort_newest_first, Appended, Durability, Listed, LogStore, RawLog, RecordSink,
    SeqRecord, Span, TornTail,
};
use crate::blob::{ExternalizePolicy, PayloadStore};
use crate::error::{Error, IoContext, Result};
use crate::frame::{self, Hash, ZERO_HASH};
use crate::id;
use crate::paths;
use crate::record::{Record, SessionMeta};

#[path = "file_changes.rs"]
pub mod changes;
#[path = "file_checkpoint.rs"]
pub mod checkpoint;
#[path = "file_group.rs"]
mod file_group;
#[path = "file_read.rs"]
mod file_read;
#[path = "file_trash.rs"]
mod file_trash;

/// File extension of transcripts.
pub const EXT: &str = "jsonl";

/// Subdirectory of the store directory holding caches over the transcripts:
/// the change journal ([`changes`]) and the session index
/// ([`crate::manager::index`]).
pub const INDEX_DIR: &str = "index";

/// A temp file younger than this is never swept (its writer may be on
/// another host, where its pid means nothing).
const TEMP_GRACE: Duration = Duration::from_secs(60);
/// A temp file older than this is swept even when its pid is alive (pid reuse).
const TEMP_MAX_AGE: Duration = Duration::from_secs(3600);

/// A first line longer than this is not read as a header (a hostile file
/// cannot make a listing allocate without bound).
const MAX_HEADER_BYTES: u64 = 16 << 20;

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
    /// Sessions whose file had a failed sync (or rollback) in this store.
    poisoned: Mutex<HashSet<String>>,
    /// Stale temp files were swept once by this store.
    swept: AtomicBool,
    io: Io,
    /// Which payloads go to `<dir>/blobs/` (see [`LogStore::blobs`]).
    blob_policy: ExternalizePolicy,
    /// Where every change to a transcript is noted first.
    journal: changes::Journal,
    /// Appends waiting to share one write and sync, per session.
    groups: file_group::Groups,
}

impl FileStore {
    /// A store over `dir` (created on first write, never by a read).
    pub fn new(dir: impl Into<PathBuf>, durability: Durability) -> Self {
        let dir = dir.into();
        FileStore {
            journal: changes::Journal::new(&dir),
            groups: file_group::Groups::default(),
            dir,
            durability,
            tails: Mutex::new(HashMap::new()),
            blob_policy: ExternalizePolicy::TRANSCRIPT,
            poisoned: Mutex::new(HashSet::new()),
            swept: AtomicBool::new(false),
            io: Io::default(),
        }
    }

    /// A store whose writes, syncs and truncates fail as `plan` says: the
    /// fault-injection seam for tests of full disks and failing syncs.
    pub fn with_faults(
        dir: impl Into<PathBuf>,
        durability: Durability,
        plan: Arc<FaultPlan>,
    ) -> Self {
        FileStore {
            io: Io::new(Some(plan)),
            ..FileStore::new(dir, durability)
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

    /// Note in the change journal that `id` is about to change (called with
    /// its append lock held; see [`changes`]). A journal that exists but
    /// cannot be written fails the change: caches would not see it. Returns
    /// whether there was a journal to note in.
    fn note_change(&self, id: &str) -> Result<bool> {
        self.journal
            .note(id)
            .ctx("write change journal", self.journal.path())
    }

    /// After a change made when [`FileStore::note_change`] found no journal:
    /// note it if a listing started one meanwhile (best effort; the change
    /// is already made).
    fn note_change_after(&self, id: &str, noted: bool) {
        if !noted {
            let _ = self.journal.note(id);
        }
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

    fn forget_tail(&self, id: &str) {
        if let Ok(mut tails) = self.tails.lock() {
            tails.remove(id);
        }
    }

    fn is_poisoned(&self, id: &str) -> bool {
        self.poisoned.lock().map_or(true, |p| p.contains(id))
    }

    fn poison(&self, id: &str) {
        self.forget_tail(id);
        if let Ok(mut p) = self.poisoned.lock() {
            p.insert(id.to_string());
        }
    }

    /// Re-verify session `id` after a failed sync: forget what this store
    /// believed about its tail, re-read the whole file under the append lock
    /// (settling a torn tail or partial batch), and accept writes again.
    /// Returns the `seq` the next append will get.
    pub fn reverify(&self, id: &str) -> Result<u64> {
        let (tail, _) = self.settle_from_scratch(id)?;
        if let Ok(mut p) = self.poisoned.lock() {
            p.remove(id);
        }
        self.remember_tail(id, tail);
        Ok(tail.seq + 1)
    }

    /// Cut a torn tail or an unfinished batch from session `id` now (what the
    /// next append would do), saving the cut bytes aside. `None` when the
    /// tail was already clean.
    pub fn repair(&self, id: &str) -> Result<Option<TornTail>> {
        let (tail, repaired) = self.settle_from_scratch(id)?;
        self.remember_tail(id, tail);
        Ok(repaired)
    }

    /// Forget what this store believed about session `id`'s tail and settle
    /// it again from the file, under the append lock (noted in the change
    /// journal: a repair may cut bytes).
    fn settle_from_scratch(&self, id: &str) -> Result<(Tail, Option<TornTail>)> {
        let path = self.path_of(id)?;
        let mut file = open_transcript(&path, id, true)?;
        file.lock().ctx("lock", &path)?;
        self.forget_tail(id);
        let settled = self.note_change(id).and_then(|noted| {
            let settled = self.settle_tail(id, &mut file, &path);
            self.note_change_after(id, noted);
            settled
        });
        let _ = file.unlock();
        settled
    }

    /// Establish the end a reader will see, repairing a torn tail or a
    /// partial batch. Called with the append lock held.
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
        let reader = BufReader::with_capacity(1 << 20, ReadAt { file, pos: 0 });
        let (scanner, unterminated) =
            scan::scan_with(reader, scan::Scanner::frames_only()).ctx("read", path)?;
        let mut cut_from = scanner.pending_batch_start();
        let mut needs_newline = false;
        if let Some(start) = unterminated {
            let last = read_at(file, start, (len - start) as usize).ctx("read", path)?;
            if frame::verify(&last).is_ok() {
                needs_newline = cut_from.is_none();
            } else {
                cut_from = Some(cut_from.map_or(start, |c| c.min(start)));
            }
        }
        let Some((seq, hash)) = scanner.last().filter(|_| scanner.has_header()) else {
            return Err(Error::NoHeader(path.to_path_buf()));
        };
        let mut repaired = None;
        let mut end = len;
        if let Some(start) = cut_from {
            let bytes = read_at(file, start, (len - start) as usize).ctx("read", path)?;
            let saved_to = self.save_aside(id, path, start, &bytes)?;
            self.io.set_len(file, start).ctx("truncate", path)?;
            if self.sync() {
                self.io.sync(file, false).ctx("fsync", path)?;
            }
            end = start;
            repaired = Some(TornTail {
                offset: start,
                bytes: len - start,
                saved_to,
            });
        } else if needs_newline {
            // A complete record that only lacks its newline: keep it.
            self.io.write_all(file, b"\n").ctx("write", path)?;
            end = len + 1;
        }
        Ok((
            Tail {
                ino,
                len: end,
                seq,
                hash,
            },
            repaired,
        ))
    }

    /// Save the bytes cut at `offset` to `<id>.jsonl.torn-<offset>`: written
    /// under a temp name, synced, then linked into place; a side file already
    /// holding the same bytes (a repair that crashed before its truncate) is
    /// reused, and one holding other bytes gets a `.<n>` suffix next to it.
    fn save_aside(&self, id: &str, path: &Path, offset: u64, bytes: &[u8]) -> Result<PathBuf> {
        let base = format!("{id}.{EXT}.torn-{offset}");
        for n in 0..1000u32 {
            let name = if n == 0 {
                base.clone()
            } else {
                format!("{base}.{n}")
            };
            let candidate = self.dir.join(&name);
            match fs::symlink_metadata(&candidate) {
                Ok(m) if m.is_file() && m.len() == bytes.len() as u64 => {
                    if fs::read(&candidate).ctx("read", &candidate)? == bytes {
                        if self.sync() {
                            paths::sync_dir(&self.dir)?;
                        }
                        return Ok(candidate);
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx("stat", &candidate),
            }
            let tmp = temp_path(&self.dir, &name);
            let written = (|| {
                let mut f = paths::private_new_file().open(&tmp).ctx("create", &tmp)?;
                self.io.write_all(&mut f, bytes).ctx("write", &tmp)?;
                if self.sync() {
                    self.io.sync(&f, true).ctx("fsync", &tmp)?;
                }
                match fs::hard_link(&tmp, &candidate) {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(e).ctx("link", &candidate),
                }
            })();
            let _ = fs::remove_file(&tmp);
            if written? {
                if self.sync() {
                    paths::sync_dir(&self.dir)?;
                }
                return Ok(candidate);
            }
        }
        Err(Error::Corrupt {
            path: path.to_path_buf(),
            detail: format!("too many different torn side files at offset {offset}"),
        })
    }

    /// Remove temp files (`.<name>.<pid>.<uuid>.tmp`) left in the store
    /// directory by killed writers: older than a minute and either their pid
    /// is gone or they are older than an hour. Returns what was removed.
    pub fn sweep_stale_temps(&self) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        for path in stale_temps(&self.dir)? {
            match fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).ctx("remove", &path),
            }
        }
        Ok(removed)
    }
}

impl LogStore for FileStore {
    fn blobs(&self) -> Option<PayloadStore> {
        Some(PayloadStore::beside(&self.dir, self.blob_policy))
    }

    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        let path = self.path_of(&meta.id)?;
        paths::create_private_dir(&self.dir)?;
        if !self.swept.swap(true, Ordering::Relaxed) {
            // Leftovers of killed creates, forks and repairs.
            let _ = self.sweep_stale_temps();
        }
        let mut line = Vec::new();
        let hash = line::encode_into(&mut line, 0, &ZERO_HASH, &Record::Meta(meta.clone()))?;
        // Write the header to a temp file, then hard-link it into place: the
        // link fails if the id exists, and no reader ever sees a headerless file.
        let tmp = temp_path(&self.dir, &format!("{}.{EXT}", meta.id));
        let result = (|| {
            let mut f = paths::private_new_file().open(&tmp).ctx("create", &tmp)?;
            self.io.write_all(&mut f, &line).ctx("write", &tmp)?;
            if self.sync() {
                self.io.sync(&f, true).ctx("fsync", &tmp)?;
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
        // Concurrent appends to one session share a write and a sync (see
        // `file_group.rs`); an empty append or a header goes alone.
        if !records.is_empty() && !records.iter().any(|r| matches!(r, Record::Meta(_))) {
            let payloads = records
                .iter()
                .map(line::payload_of)
                .collect::<std::result::Result<Vec<_>, _>>()?;
            if let Some(result) = self.append_grouped(id, payloads, expected_next) {
                return result;
            }
        }
        let mut file = open_transcript(&path, id, true)?;
        file.lock().ctx("lock", &path)?;
        // Deleted (renamed into the trash) while we waited for the lock?
        let result = file_trash::ensure_still_live(&file, &path, id)
            .and_then(|()| self.note_change(id))
            .and_then(|noted| {
                let appended = self.append_locked(id, &mut file, &path, records, expected_next);
                self.note_change_after(id, noted);
                appended
            });
        let _ = file.unlock();
        result
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        let path = self.path_of(id)?;
        let file = open_transcript(&path, id, false)?;
        file_read::read_log(&file).ctx("read", &path)
    }

    fn read_each(&self, id: &str, sink: &mut dyn RecordSink) -> Result<RawLog> {
        let path = self.path_of(id)?;
        let file = open_transcript(&path, id, false)?;
        file_read::read_log_each(&file, sink).ctx("read", &path)
    }

    fn read_span(&self, id: &str, span: Span) -> Result<Option<SeqRecord>> {
        let path = self.path_of(id)?;
        let file = open_transcript(&path, id, false)?;
        let size = file.metadata().ctx("stat", &path)?.len();
        // A span from an index is derived data: one past the file's end
        // (a log cut since) is no record, and the file's size bounds what
        // is read.
        let Some(end) = span.offset.checked_add(span.len) else {
            return Ok(None);
        };
        if end > size || span.len == 0 {
            return Ok(None);
        }
        let mut bytes = vec![0u8; span.len as usize];
        file.read_exact_at(&mut bytes, span.offset)
            .ctx("read", &path)?;
        Ok(match line::decode(&mut bytes) {
            Ok(d) if !matches!(d.record, Record::Meta(_)) => Some(SeqRecord {
                seq: d.seq,
                record: d.record,
            }),
            _ => None,
        })
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        let path = self.path_of(id)?;
        let file = open_transcript(&path, id, false)?;
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
            // Symlinks, FIFOs and devices are never opened (`memoir doctor` names them).
            if !entry.file_type().is_ok_and(|t| t.is_file()) {
                unreadable += 1;
                continue;
            }
            let header = open_transcript(&path, stem, false).ok().and_then(header_of);
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
        if self.is_poisoned(id) {
            return Err(Error::Poisoned {
                id: id.to_string(),
                path: path.to_path_buf(),
            });
        }
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
        self.remember_tail(id, tail);
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
        let (hash, seq) = line::encode_batch(&mut buf, first_seq, &tail.hash, records)?;
        self.forget_tail(id);
        if let Err(e) = self.io.write_all(file, &buf) {
            // Roll back a partial write (e.g. a full disk) so no torn record stays.
            if self.io.set_len(file, tail.len).is_err() {
                self.poison(id);
            }
            return Err(e).ctx("write", path);
        }
        if self.durability == Durability::Fsync {
            if let Err(e) = self.io.sync(file, false) {
                // The kernel may have dropped dirty pages: nothing in the page
                // cache is trusted until the file is re-verified.
                let _ = self.io.set_len(file, tail.len);
                self.poison(id);
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

/// The `seq` of the verified line that ends at byte `len` of a transcript
/// (reads only that line). `None` when it does not end a verified line.
pub(crate) fn last_seq_at(path: &Path, len: u64) -> Option<u64> {
    const BLOCK: u64 = 64 * 1024;
    if len == 0 {
        return None;
    }
    let file = File::open(path).ok()?;
    let read = |offset: u64, n: u64| -> Option<Vec<u8>> {
        let mut buf = vec![0u8; n as usize];
        file.read_exact_at(&mut buf, offset).ok()?;
        Some(buf)
    };
    if read(len - 1, 1)? != b"\n" {
        return None;
    }
    let end = len - 1;
    let mut start = 0;
    let mut hi = end;
    while hi > 0 {
        let lo = hi.saturating_sub(BLOCK);
        let block = read(lo, hi - lo)?;
        if let Some(pos) = block.iter().rposition(|&b| b == b'\n') {
            start = lo + pos as u64 + 1;
            break;
        }
        hi = lo;
    }
    let line = read(start, end - start)?;
    crate::frame::verify(&line).ok().map(|f| f.seq)
}

/// Open a transcript without following a symlink or blocking on a FIFO, and
/// refuse anything that is not a regular file.
fn open_transcript(path: &Path, id: &str, append: bool) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true)
        .append(append)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound(id.to_string()))
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Error::NotRegularFile {
                path: path.to_path_buf(),
                kind: "symlink",
            })
        }
        Err(e) => {
            if let Ok(m) = fs::symlink_metadata(path) {
                if !m.is_file() {
                    return Err(Error::NotRegularFile {
                        path: path.to_path_buf(),
                        kind: file_kind(&m.file_type()),
                    });
                }
            }
            return Err(e).ctx("open", path);
        }
    };
    let meta = file.metadata().ctx("stat", path)?;
    if !meta.is_file() {
        return Err(Error::NotRegularFile {
            path: path.to_path_buf(),
            kind: file_kind(&meta.file_type()),
        });
    }
    Ok(file)
}

/// What a non-regular file is, for error messages.
pub fn file_kind(t: &fs::FileType) -> &'static str {
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() || t.is_char_device() {
        "device"
    } else if t.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

/// A temp name beside `name` in `dir`, owned by this process:
/// `.<name>.<pid>.<uuid>.tmp` (the pattern [`stale_temps`] recognises).
fn temp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ))
}

/// The pid a temp file name `.<name>.<pid>.<uuid>.tmp` was written by.
pub fn temp_owner(file_name: &str) -> Option<u32> {
    let inner = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let mut parts = inner.rsplitn(3, '.');
    let uuid = parts.next()?;
    let pid = parts.next()?;
    parts.next()?;
    (uuid.len() == 32 && uuid.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Temp files in `dir` whose writer is gone (see [`FileStore::sweep_stale_temps`]).
pub fn stale_temps(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx("read directory", dir),
    };
    let now = SystemTime::now();
    let proc_mounted = Path::new("/proc/self").exists();
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.ctx("read directory", dir)?;
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        let owner_gone = proc_mounted && !Path::new(&format!("/proc/{pid}")).exists();
        if age >= TEMP_GRACE && (owner_gone || age >= TEMP_MAX_AGE) {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// `Read` over a file by position (the append descriptor's cursor is never moved).
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
/// The verified header of a transcript: its first line only.
fn header_of(file: File) -> Option<SessionMeta> {
    // Headers are a few hundred bytes: a small first read keeps listing cost
    // independent of transcript size.
    let mut reader = BufReader::with_capacity(1024, file.take(MAX_HEADER_BYTES));
    let mut first = Vec::new();
    reader.read_until(b'\n', &mut first).ok()?;
    if first.last() == Some(&b'\n') {
        first.pop();
    }
    match line::decode(&mut first).ok()? {
        line::Decoded {
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

/// Does the file end with the `h` suffix naming `hash`? (Cheap cache check.)
fn suffix_names(file: &mut File, len: u64, hash: &Hash) -> bool {
    let want = frame::line_suffix(hash);
    let n = want.len() as u64;
    len >= n && read_at(file, len - n, n as usize).is_ok_and(|got| got == want)
}
