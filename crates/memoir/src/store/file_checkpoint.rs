//! "What changed in a file store since a cache last looked", answered
//! without a `stat` per transcript: the one implementation shared by the
//! listing snapshot ([`crate::manager::index`]) and the search index's
//! catch-up (`crate::search`).
//!
//! A cache keeps a [`Checkpoint`]: the boot it was taken in, the change
//! journal position it has consumed ([`super::changes`]) and the store
//! directory's modification time. [`Checkpoint::changes`] then names:
//!
//! - the sessions the journal noted since (appends, tail repairs, touches:
//!   writers note **before** changing, under the transcript's append lock,
//!   so a cache must take that lock shared before it looks at one of them:
//!   [`lock_shared`]);
//! - when the directory's mtime moved, or was too recent to rule out a
//!   second change within the same clock tick (racy git: "not settled"), the
//!   sessions the directory gained or lost (creates, deletes, restores are
//!   not journalled), read from its names only;
//! - or nothing at all ([`None`]) when the journal cannot say (missing,
//!   restarted, compacted, shorter) or the machine rebooted since (the
//!   journal is never synced): the cache then does its full pass, taking a
//!   new checkpoint first with [`Checkpoint::before_full_scan`].
//!
//! A few cached sessions per catch-up are also checked against a `stat`
//! ([`sample`]), so a writer that bypassed the journal (an older build, a
//! hand edit) is noticed eventually.

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashSet};
use std::fs::{self, File};
use std::hash::Hash;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use super::changes::{Journal, Position, Since};
use super::EXT;
use crate::error::{Error, IoContext, Result};

/// Entries checked against their transcript per catch-up (32). Tests of the
/// change journal set it to 0, so that only the journal can reveal a change;
/// nothing else should touch it.
#[doc(hidden)]
pub static VERIFY_SAMPLE: AtomicUsize = AtomicUsize::new(32);

/// The change journal is compacted by a cache that consumed it once it is
/// this long.
const COMPACT_AT: u64 = 1 << 20;

/// A directory modification time this close to now may be followed by
/// another change within the same clock tick (racy-git): not settled.
const SETTLE_NS: i64 = 2_000_000_000;

/// What a cache has seen of a store directory (stored by the cache: the
/// listing snapshot's header, the search index's `meta` table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The kernel's boot id when it was taken (the journal is not synced,
    /// so a checkpoint from before a crash of the machine is not trusted).
    pub boot: String,
    /// Epoch of the change journal consumed.
    pub epoch: String,
    /// Offset up to which the change journal was consumed.
    pub offset: u64,
    /// The store directory's modification time (ns) before it was read.
    pub dir_mtime_ns: i64,
    /// False when that time was too recent to rule out a change within the
    /// same clock tick: the next catch-up reads the directory again.
    pub dir_settled: bool,
    /// Sessions whose transcript could not be read (retried when they change).
    #[serde(default)]
    pub unreadable: Vec<String>,
    /// Transcript names that are no valid session id.
    #[serde(default)]
    pub bad_names: usize,
}

/// What changed since a [`Checkpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Sessions to look at again (valid ids): named by the journal, or new
    /// in the directory. A cache adds the ones its [`sample`] found stale.
    pub changed: BTreeSet<String>,
    /// Known sessions (or unreadable ones) whose transcript left the directory.
    pub gone: HashSet<String>,
    /// The directory's transcript ids, when it was read (its mtime moved or
    /// was not settled).
    pub live: Option<HashSet<String>>,
    /// Whether the journal moved on (even when it named nothing new).
    pub moved: bool,
    /// The journal position the changes were computed from (where
    /// [`Checkpoint::finish`] goes back to when they were not all applied).
    pub from: Position,
    /// The checkpoint to store once every change is applied: the journal's
    /// new end, the directory's time and bad names when it was read, and the
    /// old unreadable ids minus the changed and gone ones (the cache adds the
    /// ones it failed to read).
    pub next: Checkpoint,
}

impl Changes {
    /// Nothing changed: the cache is current and its checkpoint need not be
    /// rewritten.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.gone.is_empty() && !self.moved && self.live.is_none()
    }
}

impl Checkpoint {
    /// The change journal position consumed.
    pub fn position(&self) -> Position {
        Position {
            epoch: self.epoch.clone(),
            offset: self.offset,
        }
    }

    /// A checkpoint for a full pass over `store_dir`, taken BEFORE looking
    /// (starting the journal when it does not exist yet). Its position is
    /// the start of the journal's current epoch, not its end: a writer that
    /// noted a session just before may still be changing its transcript
    /// while the pass looks, so the next catch-up re-checks every session
    /// noted in this epoch (under each one's lock). `None` where no boot id
    /// is known or the journal cannot be written (e.g. a read-only store):
    /// every catch-up is then a full pass.
    pub fn before_full_scan(store_dir: &Path, journal: &Journal) -> Option<Checkpoint> {
        let boot = boot_id()?;
        let position = journal.position().ok()?.epoch_start();
        let dir_mtime_ns = mtime_ns(&fs::metadata(store_dir).ok()?);
        Some(Checkpoint {
            boot,
            epoch: position.epoch,
            offset: position.offset,
            dir_mtime_ns,
            dir_settled: settled(dir_mtime_ns),
            unreadable: Vec::new(),
            bad_names: 0,
        })
    }

    /// What changed in `store_dir` since this checkpoint, or `None` when
    /// that cannot be known (another boot, the journal restarted, compacted
    /// or lost, the directory gone): the caller then does its full pass.
    /// `known` (called only when the directory is read) gives the sessions
    /// the cache holds.
    pub fn changes<K, E>(
        &self,
        store_dir: &Path,
        journal: &Journal,
        known: impl FnOnce() -> std::result::Result<HashSet<K>, E>,
    ) -> std::result::Result<Option<Changes>, E>
    where
        K: Borrow<str> + Hash + Eq,
        E: From<Error>,
    {
        if boot_id().as_deref() != Some(self.boot.as_str()) {
            return Ok(None);
        }
        let Since::Changes { ids, end } = journal
            .since(&self.position())
            .ctx("read", journal.path())?
        else {
            return Ok(None);
        };
        let dir_mtime = match fs::metadata(store_dir) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            other => mtime_ns(&other.ctx("stat", store_dir)?),
        };
        let mut next = self.clone();
        let moved = end != self.position();
        next.epoch = end.epoch;
        next.offset = end.offset;
        let mut changed: BTreeSet<String> = ids
            .into_iter()
            .filter(|id| crate::id::validate(id).is_ok())
            .collect();
        let mut gone = HashSet::new();
        let mut live = None;
        if dir_mtime != self.dir_mtime_ns || !self.dir_settled {
            let (ids, bad_names) = transcript_ids(store_dir)?;
            let known = known()?;
            let unreadable: HashSet<&str> = self.unreadable.iter().map(String::as_str).collect();
            let is_known = |id: &str| known.contains(id) || unreadable.contains(id);
            changed.extend(ids.iter().filter(|id| !is_known(id)).cloned());
            gone.extend(
                known
                    .iter()
                    .map(Borrow::borrow)
                    .chain(unreadable.iter().copied())
                    .filter(|id| !ids.contains(*id))
                    .map(str::to_string),
            );
            next.bad_names = bad_names;
            next.dir_mtime_ns = dir_mtime;
            next.dir_settled = settled(dir_mtime);
            live = Some(ids);
        }
        next.unreadable
            .retain(|id| !changed.contains(id) && !gone.contains(id));
        Ok(Some(Changes {
            changed,
            gone,
            live,
            moved,
            from: self.position(),
            next,
        }))
    }

    /// Finish a catch-up that started at position `from` ([`Changes::from`];
    /// this checkpoint being its [`Changes::next`]). `settled`: every change was applied and
    /// is known current, so the journal's new end is kept (and a long journal
    /// compacted: [`Checkpoint::compact_journal`]). Otherwise the position
    /// goes back to `from`: the next catch-up sees the same changes again, and
    /// a change the journal announced is never consumed without being seen
    /// (a transient error, an entry that could not be stored).
    pub fn finish(&mut self, journal: &Journal, from: &Position, settled: bool) {
        if settled {
            self.compact_journal(journal);
        } else {
            self.epoch = from.epoch.clone();
            self.offset = from.offset;
        }
    }

    /// Once the journal consumed up to this checkpoint is long, start it
    /// afresh (when nothing was noted since) and move the checkpoint to the
    /// new epoch. Other caches of the store then do one full pass.
    pub fn compact_journal(&mut self, journal: &Journal) {
        if self.offset <= COMPACT_AT {
            return;
        }
        if let Ok(Some(fresh)) = journal.compact(&self.position()) {
            self.epoch = fresh.epoch;
            self.offset = fresh.offset;
        }
    }
}

/// An error that says nothing about the transcript (I/O, a busy or
/// unavailable resource): a catch-up retries the session next time instead
/// of recording it as unreadable.
pub fn is_transient(e: &Error) -> bool {
    matches!(
        e.kind(),
        crate::error::ErrorKind::Io
            | crate::error::ErrorKind::Busy
            | crate::error::ErrorKind::Unavailable
    )
}

/// The id of the running boot (`None` where the kernel does not say: then
/// no checkpoint is trusted).
pub fn boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_string())
}

fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

fn settled(mtime_ns: i64) -> bool {
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    now.saturating_sub(mtime_ns) > SETTLE_NS
}

/// Up to [`VERIFY_SAMPLE`] indices below `len`, picked at random (a
/// different few each call): which cached sessions to check against a `stat`.
pub fn sample(len: usize) -> impl Iterator<Item = usize> {
    let n = VERIFY_SAMPLE.load(Ordering::Relaxed);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize ^ d.as_secs() as usize);
    let stride = if len == 0 { 0 } else { (len / n.max(1)).max(1) };
    (0..n.min(len)).map(move |k| (seed % len.max(1) + k * stride) % len.max(1))
}

/// A transcript locked shared: an append, repair or delete the journal
/// announced has finished, and none starts until it is dropped.
#[derive(Debug)]
pub struct SharedLock {
    file: File,
}

impl SharedLock {
    /// The transcript's metadata (`fstat` of the locked file).
    pub fn metadata(&self) -> std::io::Result<fs::Metadata> {
        self.file.metadata()
    }
}

impl Drop for SharedLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Lock the transcript of `id` in `store_dir` shared (waiting for a writer
/// that holds it). `None` when it is gone; symlinks, FIFOs and other special
/// files are refused ([`Error::NotRegularFile`]).
pub fn lock_shared(store_dir: &Path, id: &str) -> Result<Option<SharedLock>> {
    crate::id::validate(id)?;
    let path = store_dir.join(format!("{id}.{EXT}"));
    let file = match super::open_transcript(&path, id, false) {
        Ok(f) => f,
        Err(Error::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    file.lock_shared().ctx("lock", &path)?;
    Ok(Some(SharedLock { file }))
}

/// The ids of the transcripts in `dir` (names only: no `stat` where the
/// file system reports types), and how many `.jsonl` names are no valid id.
pub fn transcript_ids(dir: &Path) -> Result<(HashSet<String>, usize)> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok((HashSet::new(), 0)),
        Err(e) => return Err(e).ctx("read directory", dir),
    };
    let mut ids = HashSet::new();
    let mut bad = 0;
    let suffix = format!(".{EXT}");
    for entry in entries {
        let entry = entry.ctx("read directory", dir)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Some(id) = name.strip_suffix(&suffix) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if crate::id::validate(id).is_ok() {
            ids.insert(id.to_string());
        } else {
            bad += 1;
        }
    }
    Ok((ids, bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript(dir: &Path, id: &str) {
        fs::write(dir.join(format!("{id}.{EXT}")), b"{}\n").unwrap();
    }

    fn changes(at: &Checkpoint, dir: &Path, known: &[&str]) -> Option<Changes> {
        let journal = Journal::new(dir);
        at.changes(dir, &journal, || {
            Ok::<_, Error>(known.iter().copied().collect::<HashSet<&str>>())
        })
        .unwrap()
    }

    #[test]
    fn lock_shared_refuses_special_files_as_such_not_as_transient_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        transcript(dir, "real");
        assert!(lock_shared(dir, "real").unwrap().is_some());
        assert!(lock_shared(dir, "missing").unwrap().is_none());
        std::os::unix::fs::symlink(
            dir.join(format!("real.{EXT}")),
            dir.join(format!("link.{EXT}")),
        )
        .unwrap();
        fs::create_dir(dir.join(format!("dir.{EXT}"))).unwrap();
        for (id, kind) in [("link", "symlink"), ("dir", "directory")] {
            let e = lock_shared(dir, id).unwrap_err();
            assert!(
                matches!(&e, Error::NotRegularFile { kind: k, .. } if *k == kind),
                "{id}: {e:?}"
            );
            // Unreadable as it stands, so a catch-up records it instead of
            // retrying it on every request.
            assert!(!is_transient(&e), "{id}: {e:?}");
        }
    }

    #[test]
    fn changes_name_journal_ids_and_directory_moves_and_refuse_what_they_cannot_know() {
        let Some(_) = boot_id() else {
            return; // no boot id: no checkpoint is ever trusted
        };
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        transcript(dir, "a");
        transcript(dir, "b");
        let journal = Journal::new(dir);
        let mut at = Checkpoint::before_full_scan(dir, &journal).unwrap();
        assert_eq!(at.offset, journal.position().unwrap().offset, "empty epoch");
        at.unreadable = vec!["broken".into()];
        journal.note("a").unwrap();
        journal.note("../escape").unwrap();
        transcript(dir, "c");
        transcript(dir, "bad name");
        // The directory just changed (not settled): its names are read.
        let ch = changes(&at, dir, &["a", "b", "gone"]).unwrap();
        assert_eq!(ch.changed.iter().collect::<Vec<_>>(), ["a", "c"]);
        let mut gone: Vec<&String> = ch.gone.iter().collect();
        gone.sort();
        assert_eq!(gone, ["broken", "gone"]);
        assert!(ch.live.is_some() && ch.moved && !ch.is_empty());
        assert_eq!(ch.next.bad_names, 1);
        assert!(ch.next.unreadable.is_empty(), "gone ones are dropped");
        assert_eq!(ch.next.offset, journal.position().unwrap().offset);
        // Settled and nothing since: empty, without reading the directory.
        let mut settled_at = ch.next.clone();
        settled_at.dir_settled = true;
        let again = changes(&settled_at, dir, &[]).unwrap();
        assert!(again.is_empty(), "{again:?}");
        // Another boot, another epoch, or a shorter journal: unknown.
        let other_boot = Checkpoint {
            boot: "another boot".into(),
            ..settled_at.clone()
        };
        assert_eq!(changes(&other_boot, dir, &[]), None);
        let past_end = Checkpoint {
            offset: settled_at.offset + 1,
            ..settled_at.clone()
        };
        assert_eq!(changes(&past_end, dir, &[]), None);
        let mut compacted = settled_at.clone();
        compacted.offset = COMPACT_AT + 1;
        compacted.compact_journal(&journal); // not at the journal's end: kept
        assert_eq!(compacted.epoch, settled_at.epoch);
        journal.compact(&settled_at.position()).unwrap().unwrap();
        assert_eq!(changes(&settled_at, dir, &[]), None);
    }
}
