//! Usage summaries: per session, the responses it owns (what
//! [`super::count`] finds in its records before cross-session
//! de-duplication), kept next to a file store so that a usage report reads
//! one small file instead of every session log.
//!
//! Derived, rebuildable and checked data (`docs/FORMAT.md`, "Usage
//! summaries"):
//!
//! - `<store>/index/usage/<id>.usage`: one session's summary, a base and
//!   the deltas appended after it: each append ([`note_append`]) adds a
//!   delta of the responses it brought when the file ends right before
//!   them (reading only the last delta, so an append costs the same on a
//!   session of ten responses or ten thousand); once the deltas outweigh
//!   the base, or when they cannot be added, the whole summary is folded
//!   or recomputed from the log and written anew, as whenever a report had
//!   to recompute it;
//! - `<store>/index/usage.summary`: every session's summary in one file,
//!   written by a report that found something to refresh.
//!
//! Each summary records what it was computed from: the log's length,
//! modification time and inode, and the `seq` of its last record. A report
//! `stat`s every log; a summary whose source differs is stale and is taken
//! from the session's own file when that one matches, else recomputed from
//! the log for that session only. A file that is missing, torn, of another
//! version or whose checksum fails is rebuilt (with a notice), never
//! trusted. Both files are written whole to a temporary file and renamed
//! into place (the store-wide file synced first); deltas are appended under
//! an exclusive lock of the session's file. A summary is written only
//! while the log is locked shared (no append in flight) and ends with the
//! record it covers, so concurrent writers never leave a wrong summary that
//! looks current.
//!
//! Each response keeps its hashed identity and `message.id`, its model,
//! time, tokens and request count, and the `seq` of the records it was read
//! from: cross-session de-duplication, every grouping (any time zone,
//! 5-hour blocks), every filter and the per-response long-context prices
//! stay exactly those of a scan of the logs, and a fork's inherited usage
//! is read from its parents' summaries ([`Ancestors`]).

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::count::{self, Ancestors, Found, Owned, SessionResponses, SessionSource};
use crate::error::{Error, IoContext, Result};
use crate::message::{Usage, UsageSource};
use crate::record::{Record, SessionMeta};
use crate::store::file::checkpoint::lock_shared;
use crate::store::file::{last_seq_at, EXT, INDEX_DIR};
use crate::store::{Appended, Listed, LogStore};

/// Version of the summary format this build reads and writes.
pub const SUMMARY_VERSION: u32 = 3;

/// The store-wide summary file, inside the store's index directory.
pub const SUMMARY_FILE: &str = "usage.summary";

/// The directory of per-session summaries, inside the index directory.
pub const SESSION_DIR: &str = "usage";

/// Extension of a per-session summary.
const SESSION_EXT: &str = "usage";

/// First bytes of every summary file.
const MAGIC: &[u8; 8] = b"memoirUS";

/// Sessions recomputed per thread at least (fewer run on one thread).
const SHARE: usize = 32;

/// What a summary was computed from: the log as it was on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// Log length in bytes.
    pub(crate) len: u64,
    /// Log modification time, ns since the Unix epoch.
    pub(crate) mtime_ns: i64,
    /// Log inode.
    pub(crate) ino: u64,
    /// `seq` of the last record covered.
    pub(crate) last_seq: u64,
}

impl Stamp {
    fn of(meta: &fs::Metadata, last_seq: u64) -> Stamp {
        Stamp {
            len: meta.len(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
            ino: meta.ino(),
            last_seq,
        }
    }

    /// Same file state (the `seq` is not part of what a `stat` shows).
    fn same_file(&self, other: &Stamp) -> bool {
        (self.len, self.mtime_ns, self.ino) == (other.len, other.mtime_ns, other.ino)
    }
}

/// One session's summary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// Session id (the log's file name).
    pub(crate) id: String,
    /// The log it was computed from.
    pub(crate) stamp: Stamp,
    /// The verified header; `None` when the log has none a listing accepts
    /// (an unreadable listing entry).
    pub(crate) meta: Option<SessionMeta>,
    /// The responses it owns; `None` when its records could not be read.
    pub(crate) owned: Option<Owned>,
}

/// What a report found when it read the summaries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refresh {
    /// Sessions summarised.
    pub sessions: usize,
    /// Summaries taken from the session's own file (written by an append).
    pub from_appends: usize,
    /// Summaries recomputed from the session log (missing, stale or damaged).
    pub recomputed: usize,
    /// Readable notes on damaged summary files (each was rebuilt).
    pub notices: Vec<String>,
}

/// Every session's summary, current.
pub(crate) struct Summaries {
    entries: HashMap<String, Entry>,
    /// The sessions a walk loaded and handed back, for [`Ancestors`].
    walked: HashMap<String, SessionResponses>,
    /// `.jsonl` names that are not regular files or not UTF-8.
    not_files: usize,
    /// What reading them found.
    pub(crate) refresh: Refresh,
}

fn summary_path(store_dir: &Path) -> PathBuf {
    store_dir.join(INDEX_DIR).join(SUMMARY_FILE)
}

fn session_path(store_dir: &Path, id: &str) -> PathBuf {
    store_dir
        .join(INDEX_DIR)
        .join(SESSION_DIR)
        .join(format!("{id}.{SESSION_EXT}"))
}

fn log_path(store_dir: &Path, id: &str) -> PathBuf {
    store_dir.join(format!("{id}.{EXT}"))
}

/// Read the summaries of the file store in `store_dir` (read through
/// `store`), refreshing what is missing, stale or damaged, and store the
/// result for the next report (best effort: a read-only store still
/// reports).
pub(crate) fn load(store: &dyn LogStore, store_dir: &Path) -> Result<Summaries> {
    let mut refresh = Refresh::default();
    let path = summary_path(store_dir);
    let mut cached: HashMap<String, Entry> = match fs::read(&path) {
        Ok(bytes) if of_another_version(&bytes) => HashMap::new(),
        Ok(bytes) => match decode_file(&bytes) {
            Ok(entries) => entries.into_iter().map(|e| (e.id.clone(), e)).collect(),
            Err(why) => {
                refresh.notices.push(format!(
                    "usage summary {} is damaged ({why}); rebuilt from the session logs",
                    path.display()
                ));
                HashMap::new()
            }
        },
        Err(e) if e.kind() == ErrorKind::NotFound => HashMap::new(),
        Err(e) => {
            refresh.notices.push(format!(
                "usage summary {} could not be read ({e}); rebuilt from the session logs",
                path.display()
            ));
            HashMap::new()
        }
    };
    let (live, not_files) = live_logs(store_dir)?;
    let mut entries: HashMap<String, Entry> = HashMap::with_capacity(live.len());
    let mut stale: Vec<&str> = Vec::new();
    for (id, stamp) in &live {
        match cached.remove(id.as_str()) {
            Some(e) if e.stamp.same_file(stamp) => {
                entries.insert(id.clone(), e);
            }
            _ => stale.push(id.as_str()),
        }
    }
    // Something to write back: a session changed, appeared or went away.
    let changed = !stale.is_empty() || !cached.is_empty();
    let mut recompute: Vec<&str> = Vec::new();
    for id in stale {
        match read_session_file(store_dir, id) {
            Ok(Some(e)) if live.get(id).is_some_and(|s| e.stamp.same_file(s)) => {
                refresh.from_appends += 1;
                entries.insert(id.to_string(), e);
            }
            Ok(_) => recompute.push(id),
            Err(why) => {
                refresh.notices.push(format!(
                    "usage summary {} is damaged ({why}); rebuilt from the session log",
                    session_path(store_dir, id).display()
                ));
                recompute.push(id);
            }
        }
    }
    for (id, rebuilt) in recompute_all(store, store_dir, &recompute) {
        match rebuilt {
            Ok(Some(e)) => {
                refresh.recomputed += 1;
                entries.insert(id.to_string(), e);
            }
            Ok(None) => {} // deleted meanwhile
            Err(e) => return Err(e),
        }
    }
    if changed {
        let mut all: Vec<&Entry> = entries.values().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        // A store that cannot be written still reports; the next one retries.
        let _ = write_all(store_dir, &all);
    }
    refresh.sessions = entries.len();
    Ok(Summaries {
        entries,
        walked: HashMap::new(),
        not_files,
        refresh,
    })
}

/// The logs of `store_dir` with their stamps (`last_seq` unknown: 0), and
/// how many `.jsonl` names a listing counts as unreadable without opening
/// them (not regular files, not UTF-8).
fn live_logs(store_dir: &Path) -> Result<(HashMap<String, Stamp>, usize)> {
    let dir = match fs::read_dir(store_dir) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok((HashMap::new(), 0)),
        Err(e) => return Err(e).ctx("read directory", store_dir),
    };
    let mut live = HashMap::new();
    let mut not_files = 0;
    for entry in dir {
        let entry = entry.ctx("read directory", store_dir)?;
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some(EXT) {
            continue;
        }
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            not_files += 1;
            continue;
        };
        match entry.metadata() {
            Ok(meta) if meta.is_file() => {
                live.insert(stem.to_string(), Stamp::of(&meta, 0));
            }
            Ok(_) => not_files += 1,
            Err(e) if e.kind() == ErrorKind::NotFound => {} // removed meanwhile
            Err(e) => return Err(e).ctx("stat", path),
        }
    }
    Ok((live, not_files))
}

/// Recompute the summaries of `ids` from their logs, on several threads
/// when there are many.
fn recompute_all<'a>(
    store: &dyn LogStore,
    store_dir: &Path,
    ids: &[&'a str],
) -> Vec<(&'a str, Result<Option<Entry>>)> {
    crate::fan_out::map(ids, SHARE, |id| (*id, recompute(store, store_dir, id)))
}

/// Recompute one session's summary from its log, under the log's shared
/// lock (no append in flight), and write its file. `None` when the log is
/// gone.
fn recompute(store: &dyn LogStore, store_dir: &Path, id: &str) -> Result<Option<Entry>> {
    let lock = match crate::id::validate(id) {
        Ok(()) => match lock_shared(store_dir, id) {
            Ok(Some(lock)) => Some(lock),
            Ok(None) => return Ok(None),
            // A special file or one that cannot be opened: as the listing
            // counts it, unreadable.
            Err(_) => None,
        },
        Err(_) => None,
    };
    let fstat = match &lock {
        Some(l) => l.metadata().ok(),
        None => fs::metadata(log_path(store_dir, id)).ok(),
    };
    let Some(fstat) = fstat else {
        return Ok(None);
    };
    let (meta, owned, last_seq) = match store.read(id) {
        Ok(raw) => {
            let meta = raw.header.clone().filter(|m| m.id == id);
            let owned = match &meta {
                Some(meta) => count::owned(store, meta, &raw).ok(),
                None => None,
            };
            (meta, owned, raw.last_seq)
        }
        Err(Error::NotFound(_)) => return Ok(None),
        Err(_) => (store.read_header(id).ok().flatten(), None, 0),
    };
    let entry = Entry {
        id: id.to_string(),
        stamp: Stamp::of(&fstat, last_seq),
        meta,
        owned,
    };
    if lock.is_some() {
        let _ = write_session(store_dir, &entry);
    }
    Ok(Some(entry))
}

/// The summary file of one session: `Ok(None)` when there is none, `Err`
/// (why) when it is damaged.
fn read_session_file(store_dir: &Path, id: &str) -> std::result::Result<Option<Entry>, String> {
    let path = session_path(store_dir, id);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if of_another_version(&bytes) {
        return Ok(None);
    }
    decode_session(&bytes, id).map(Some)
}

/// Keep the summary of session `id` current after `records` were appended
/// to it (as `appended`): folded into its summary when that ends right
/// before them, else recomputed from the log. For file stores only (the
/// store's [`LogStore::index_dir`]); errors never fail the append (the next
/// report recomputes what is missing or stale).
pub fn note_append(
    store: &dyn LogStore,
    id: &str,
    records: &[Record],
    appended: &Appended,
) -> Result<()> {
    let Some(store_dir) = store.index_dir() else {
        return Ok(());
    };
    crate::id::validate(id)?;
    let matter = records.iter().any(matters);
    let Some(lock) = lock_shared(store_dir, id)? else {
        return Ok(());
    };
    let fstat = lock.metadata().ctx("stat", log_path(store_dir, id))?;
    if last_seq_at(&log_path(store_dir, id), fstat.len()) != Some(appended.last_seq) {
        // Another writer came in between: a summary that records could
        // change is recomputed; else it is left stale for a report.
        if !matter {
            return Ok(());
        }
        drop(lock);
        return recompute(store, store_dir, id).map(|_| ());
    }
    let stamp = Stamp::of(&fstat, appended.last_seq);
    if append_delta(store, store_dir, id, records, appended, stamp)? {
        return Ok(());
    }
    match fold(store, store_dir, id, records, appended) {
        Some((meta, owned)) => write_session(
            store_dir,
            &Entry {
                id: id.to_string(),
                stamp,
                meta: Some(meta),
                owned: Some(owned),
            },
        ),
        // Records without usage leave a summary they cannot be folded
        // into stale (a report recomputes it once, not every append).
        None if !matter => Ok(()),
        None => {
            drop(lock);
            recompute(store, store_dir, id).map(|_| ())
        }
    }
}

/// A record that can change what a session owns.
fn matters(r: &Record) -> bool {
    match r {
        Record::Message(m) => m.usage.is_some(),
        Record::Summary(s) => !s.usage.is_zero(),
        Record::Outcome(o) => !o.usage.is_zero(),
        Record::Rewrite { .. } => true,
        _ => false,
    }
}

/// The session's summary with `records` folded in, when its stored summary
/// (or, for a first append, its header) ends right before them.
fn fold(
    store: &dyn LogStore,
    store_dir: &Path,
    id: &str,
    records: &[Record],
    appended: &Appended,
) -> Option<(SessionMeta, Owned)> {
    let (meta, mut owned) = match read_session_file(store_dir, id).ok().flatten() {
        Some(Entry {
            stamp,
            meta: Some(meta),
            owned: Some(owned),
            ..
        }) if stamp.last_seq + 1 == appended.first_seq => (meta, owned),
        _ if appended.first_seq == 1 => (store.read_header(id).ok()??, Owned::default()),
        _ => return None,
    };
    if !owned.apply(records, appended.first_seq) {
        return None;
    }
    owned.inherit_model(store, &meta);
    Some((meta, owned))
}

/// Rebuild every summary of the file store in `store_dir` now (what a
/// report does on demand) and say what it found.
pub fn refresh(store: &dyn LogStore) -> Result<Refresh> {
    match store.index_dir() {
        Some(dir) => Ok(load(store, dir)?.refresh),
        None => Ok(Refresh::default()),
    }
}

impl SessionSource for Summaries {
    fn list(&mut self) -> Result<(Vec<Listed>, usize)> {
        let mut unreadable = self.not_files;
        let mut listed = Vec::with_capacity(self.entries.len());
        for e in self.entries.values() {
            match &e.meta {
                Some(meta) => listed.push(Listed {
                    meta: meta.clone(),
                    location: PathBuf::from(&e.id),
                }),
                None => unreadable += 1,
            }
        }
        Ok((listed, unreadable))
    }

    fn load(&mut self, listed: &Listed, _selected: bool) -> Result<Option<SessionResponses>> {
        Ok(self
            .entries
            .remove(&listed.meta.id)
            .and_then(|e| Some((e.meta?, e.owned)))
            .map(|(meta, owned)| SessionResponses { meta, owned }))
    }

    fn done(&mut self, session: SessionResponses) {
        self.walked.insert(session.meta.id.clone(), session);
    }
}

impl Ancestors for Summaries {
    fn upto(&self, id: &str, seq: u64) -> Option<(&SessionMeta, Vec<&Found>)> {
        let (meta, owned) = match self.walked.get(id) {
            Some(s) => (&s.meta, s.owned.as_ref()?),
            None => {
                let e = self.entries.get(id)?;
                (e.meta.as_ref()?, e.owned.as_ref()?)
            }
        };
        Some((meta, owned.upto(seq)?))
    }
}

/// Write one session's summary file (not synced: a crash leaves it old or
/// missing, and its stamp says so).
fn write_session(store_dir: &Path, entry: &Entry) -> Result<()> {
    let path = session_path(store_dir, entry.id.as_str());
    crate::paths::create_private_dir(path.parent().unwrap_or(store_dir))?;
    crate::paths::replace_file(&path, &encode_session(entry))
}

/// Write the store-wide summary file, synced.
fn write_all(store_dir: &Path, entries: &[&Entry]) -> Result<()> {
    let path = summary_path(store_dir);
    crate::paths::create_private_dir(path.parent().unwrap_or(store_dir))?;
    crate::paths::atomic_write(&path, &encode_file(entries.iter().copied()))
}

// ---- per-session files: a base, then deltas (docs/FORMAT.md, "Usage summaries")

/// Last bytes of every delta.
const DELTA_MAGIC: &[u8; 4] = b"USd3";

/// A delta's trailer: `len`, `mtime_ns`, `ino`, `last_seq` (the log after
/// the append), `first_seq` (the append's first record), the base's length
/// and the payload's (u64le each), 16 bytes of BLAKE3 over the payload and
/// the trailer before them, then [`DELTA_MAGIC`].
const TRAILER: usize = 7 * 8 + 16 + 4;

/// Deltas are folded into a new base once they outweigh it and this many
/// bytes: each response is then rewritten O(1) times on average.
const COMPACT_MIN: u64 = 16 * 1024;

/// One delta as read back.
struct Delta<'b> {
    /// Where it starts in the file.
    start: usize,
    /// `seq` of the append's first record.
    first_seq: u64,
    /// The log after the append.
    stamp: Stamp,
    /// Length of the file's base.
    base_len: u64,
    /// The encoded responses the append added ([`Writer::owned`]).
    payload: &'b [u8],
}

/// The delta of an append that added `add` (its own responses,
/// de-duplicated among themselves) from `first_seq` on, the log then at
/// `stamp`, to a file whose base is `base_len` bytes.
fn encode_delta(first_seq: u64, stamp: Stamp, base_len: u64, add: &Owned) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + TRAILER));
    w.owned(add);
    let payload_len = w.0.len() as u64;
    for v in [
        stamp.len,
        stamp.mtime_ns as u64,
        stamp.ino,
        stamp.last_seq,
        first_seq,
        base_len,
        payload_len,
    ] {
        w.0.extend_from_slice(&v.to_le_bytes());
    }
    let sum = blake3::hash(&w.0);
    w.0.extend_from_slice(&sum.as_bytes()[..16]);
    w.0.extend_from_slice(DELTA_MAGIC);
    w.0
}

/// The delta ending at `end` of `bytes`, checked.
fn delta_at(bytes: &[u8], end: usize) -> Decoded<Delta<'_>> {
    let tail = end.checked_sub(TRAILER).ok_or("truncated")?;
    let t = &bytes[tail..end];
    if &t[TRAILER - 4..] != DELTA_MAGIC {
        return Err("not a delta".into());
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&t[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    };
    let payload_len = usize::try_from(word(6)).map_err(|_| "bad length")?;
    let start = tail.checked_sub(payload_len).ok_or("truncated")?;
    let sum = blake3::hash(&bytes[start..end - 20]);
    if sum.as_bytes()[..16] != t[TRAILER - 20..TRAILER - 4] {
        return Err("checksum mismatch".into());
    }
    Ok(Delta {
        start,
        first_seq: word(4),
        stamp: Stamp {
            len: word(0),
            mtime_ns: word(1) as i64,
            ino: word(2),
            last_seq: word(3),
        },
        base_len: word(5),
        payload: &bytes[start..tail],
    })
}

/// A session file's bytes: `entry` as its base, and a delta of no response
/// carrying its stamp (so the file always ends with a trailer an append
/// can read alone).
fn encode_session(entry: &Entry) -> Vec<u8> {
    let mut bytes = encode_file(std::iter::once(entry));
    let base_len = bytes.len() as u64;
    bytes.extend_from_slice(&encode_delta(
        entry.stamp.last_seq + 1,
        entry.stamp,
        base_len,
        &Owned::default(),
    ));
    bytes
}

/// The summary a session file holds: its base with every delta folded in,
/// in order. A delta that does not follow the state before it, a broken
/// chain or a failed checksum make the file damaged. Deltas after a base
/// without records (an unreadable log) are not folded: the entry keeps the
/// base's stamp, stale, and is recomputed.
fn decode_session(bytes: &[u8], id: &str) -> Decoded<Entry> {
    let last = delta_at(bytes, bytes.len())?;
    let base_len = usize::try_from(last.base_len).map_err(|_| "bad length")?;
    let mut deltas = Vec::new();
    let mut end = bytes.len();
    while end > base_len {
        let d = delta_at(bytes, end)?;
        if d.base_len != last.base_len {
            return Err("deltas name different bases".into());
        }
        end = d.start;
        deltas.push(d);
    }
    if end != base_len {
        return Err("deltas do not end at the base".into());
    }
    let mut entries = decode_file(&bytes[..base_len])?;
    let mut entry = match (entries.pop(), entries.is_empty()) {
        (Some(e), true) if e.id == id => e,
        _ => return Err("it does not hold this session's summary".into()),
    };
    let Some(owned) = entry.owned.as_mut().filter(|_| entry.meta.is_some()) else {
        return Ok(entry);
    };
    let mut by_identity = owned.identities();
    for d in deltas.iter().rev() {
        if d.first_seq != entry.stamp.last_seq + 1 {
            return Err("a delta does not follow the summary before it".into());
        }
        let mut r = Reader(d.payload);
        let add = r.owned()?;
        if !r.0.is_empty() {
            return Err("trailing bytes in a delta".into());
        }
        owned.extend(&mut by_identity, add);
        entry.stamp = d.stamp;
    }
    Ok(entry)
}

/// Append the responses of `records` (appended as `appended`; the log now
/// at `stamp`) to the session's file as a delta, reading only its last
/// delta: O(records), whatever the session's length. `Ok(false)` when that
/// cannot be done (no file, a last delta that does not verify or that the
/// append does not follow, deltas due for folding into the base, a
/// `rewrite`, a fork that may take its parent's model): the caller then
/// folds or recomputes the whole summary.
fn append_delta(
    store: &dyn LogStore,
    store_dir: &Path,
    id: &str,
    records: &[Record],
    appended: &Appended,
    stamp: Stamp,
) -> Result<bool> {
    use std::io::Write as _;
    use std::os::unix::fs::FileExt as _;

    let path = session_path(store_dir, id);
    let mut file = match fs::OpenOptions::new().read(true).append(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).ctx("open", &path),
    };
    // Appenders of one file never interleave.
    file.lock().ctx("lock", &path)?;
    let len = file.metadata().ctx("stat", &path)?.len();
    let Ok(len_us) = usize::try_from(len) else {
        return Ok(false);
    };
    if len_us < TRAILER {
        return Ok(false);
    }
    let mut trailer = [0u8; TRAILER];
    file.read_exact_at(&mut trailer, len - TRAILER as u64)
        .ctx("read", &path)?;
    let mut word = [0u8; 8];
    word.copy_from_slice(&trailer[48..56]);
    let payload_len = u64::from_le_bytes(word);
    let Some(start) = (len - TRAILER as u64).checked_sub(payload_len) else {
        return Ok(false);
    };
    let mut last = vec![0u8; (len - start) as usize];
    file.read_exact_at(&mut last, start).ctx("read", &path)?;
    let Ok(d) = delta_at(&last, last.len()) else {
        return Ok(false);
    };
    if d.stamp == stamp {
        return Ok(true); // covered already (a report recomputed it)
    }
    if d.stamp.last_seq + 1 != appended.first_seq || len - d.base_len >= d.base_len.max(COMPACT_MIN)
    {
        return Ok(false);
    }
    let mut add = Owned::default();
    if !add.apply(records, appended.first_seq) {
        return Ok(false);
    }
    let modelless = add
        .messages
        .iter()
        .chain(&add.summaries)
        .chain(&add.outcomes)
        .any(|f| f.model.is_none());
    if modelless {
        // A fork whose header names no model takes its parent chain's for
        // responses that name none: the whole summary is folded then.
        match store.read_header(id) {
            Ok(Some(meta)) if !(meta.model.is_empty() && meta.parent.is_some()) => {}
            _ => return Ok(false),
        }
    }
    let delta = encode_delta(appended.first_seq, stamp, d.base_len, &add);
    if let Err(e) = file.write_all(&delta) {
        // Never leave a torn delta behind (it would fail the file).
        let _ = file.set_len(len);
        return Err(e).ctx("write", &path);
    }
    Ok(true)
}

// ---- the binary format (docs/FORMAT.md, "Usage summaries")

/// `MAGIC`, version, entry count, entries, then the BLAKE3 hash of every
/// byte before it.
pub(crate) fn encode_file<'e>(entries: impl Iterator<Item = &'e Entry>) -> Vec<u8> {
    let entries: Vec<&Entry> = entries.collect();
    let mut w = Writer(Vec::with_capacity(64 + entries.len() * 256));
    w.0.extend_from_slice(MAGIC);
    w.0.extend_from_slice(&SUMMARY_VERSION.to_le_bytes());
    w.uint(entries.len() as u64);
    for e in entries {
        w.entry(e);
    }
    let sum = blake3::hash(&w.0);
    w.0.extend_from_slice(sum.as_bytes());
    w.0
}

/// The entries of a summary file, or why it cannot be trusted.
/// Whether `bytes` are a summary of another version of this format: not
/// damage, but a file an upgrade left behind, recomputed like a missing
/// one. Decided on the magic and version alone (the checksum scheme may be
/// what changed).
fn of_another_version(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
        && bytes
            .get(MAGIC.len()..MAGIC.len() + 4)
            .and_then(|v| v.try_into().ok())
            .is_some_and(|v| u32::from_le_bytes(v) != SUMMARY_VERSION)
}

pub(crate) fn decode_file(bytes: &[u8]) -> std::result::Result<Vec<Entry>, String> {
    if bytes.len() < MAGIC.len() + 4 + 32 || !bytes.starts_with(MAGIC) {
        return Err("not a usage summary".into());
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if blake3::hash(body).as_bytes() != sum {
        return Err("checksum mismatch".into());
    }
    let mut r = Reader(&body[MAGIC.len()..]);
    let version = u32::from_le_bytes(r.take(4)?.try_into().map_err(|_| "short")?);
    if version != SUMMARY_VERSION {
        return Err(format!(
            "version {version}, this build reads {SUMMARY_VERSION}"
        ));
    }
    let n = r.uint()?;
    let mut out = Vec::with_capacity(n.min(1 << 20) as usize);
    for _ in 0..n {
        out.push(r.entry()?);
    }
    if !r.0.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok(out)
}

struct Writer(Vec<u8>);

impl Writer {
    fn uint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn int(&mut self, v: i64) {
        self.uint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.uint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn entry(&mut self, e: &Entry) {
        self.bytes(e.id.as_bytes());
        self.uint(e.stamp.len);
        self.int(e.stamp.mtime_ns);
        self.uint(e.stamp.ino);
        self.uint(e.stamp.last_seq);
        match &e.meta {
            // A header always serialises; one that would not is dropped (the
            // entry then reads as unreadable and its stamp keeps it so).
            Some(meta) => match serde_json::to_vec(meta) {
                Ok(json) => {
                    self.0.push(1);
                    self.bytes(&json);
                }
                Err(_) => self.0.push(0),
            },
            None => self.0.push(0),
        }
        match &e.owned {
            Some(o) => {
                self.0.push(1);
                self.owned(o);
            }
            None => self.0.push(0),
        }
    }

    fn owned(&mut self, o: &Owned) {
        self.uint(o.merged);
        match &o.fallback_model {
            Some(m) => {
                self.0.push(1);
                self.bytes(m.as_bytes());
            }
            None => self.0.push(0),
        }
        // The session's model names, once each; responses refer to them by index.
        let mut models: Vec<&str> = Vec::new();
        let all = || o.messages.iter().chain(&o.summaries).chain(&o.outcomes);
        for f in all() {
            if let Some(m) = f.model.as_deref() {
                if !models.contains(&m) {
                    models.push(m);
                }
            }
        }
        self.uint(models.len() as u64);
        for m in &models {
            self.bytes(m.as_bytes());
        }
        for list in [&o.messages, &o.summaries, &o.outcomes] {
            self.uint(list.len() as u64);
            for f in list {
                self.found(f, &models);
            }
        }
    }

    fn found(&mut self, f: &Found, models: &[&str]) {
        let flags = u8::from(f.identity.is_some())
            | u8::from(f.message.is_some()) << 1
            | u8::from(f.sidechain) << 2
            | u8::from(f.at.is_some()) << 3;
        self.0.push(flags);
        if let Some(i) = f.identity {
            self.0.extend_from_slice(&i.to_le_bytes());
        }
        if let Some(m) = f.message {
            self.0.extend_from_slice(&m.to_le_bytes());
        }
        let model = f
            .model
            .as_deref()
            .and_then(|m| models.iter().position(|x| *x == m))
            .map_or(0, |i| i as u64 + 1);
        self.uint(model);
        if let Some(at) = f.at {
            self.int(at.timestamp());
            self.uint(u64::from(at.timestamp_subsec_nanos()));
        }
        let u = &f.usage;
        for v in [
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
            u.cache_creation_1h_input_tokens,
            u.reasoning_tokens,
        ] {
            self.uint(v);
        }
        self.0.push(match u.source {
            UsageSource::Provider => 0,
            UsageSource::Transcript => 1,
            UsageSource::Estimate => 2,
        });
        self.uint(f.requests);
        self.uint(f.first_seq);
        self.uint(f.seq.saturating_sub(f.first_seq));
    }
}

struct Reader<'b>(&'b [u8]);

type Decoded<T> = std::result::Result<T, String>;

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Decoded<&'b [u8]> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Decoded<u8> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self) -> Decoded<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("bad integer".into())
    }

    fn int(&mut self) -> Decoded<i64> {
        let v = self.uint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn bytes(&mut self) -> Decoded<&'b [u8]> {
        let n = usize::try_from(self.uint()?).map_err(|_| "bad length")?;
        self.take(n)
    }

    fn string(&mut self) -> Decoded<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "bad text".to_string())
    }

    fn u128(&mut self) -> Decoded<u128> {
        let b: [u8; 16] = self.take(16)?.try_into().map_err(|_| "short")?;
        Ok(u128::from_le_bytes(b))
    }

    fn entry(&mut self) -> Decoded<Entry> {
        let id = self.string()?;
        let stamp = Stamp {
            len: self.uint()?,
            mtime_ns: self.int()?,
            ino: self.uint()?,
            last_seq: self.uint()?,
        };
        let meta = match self.byte()? {
            0 => None,
            1 => Some(serde_json::from_slice(self.bytes()?).map_err(|e| e.to_string())?),
            _ => return Err("bad header flag".into()),
        };
        let owned = match self.byte()? {
            0 => None,
            1 => Some(self.owned()?),
            _ => return Err("bad flag".into()),
        };
        Ok(Entry {
            id,
            stamp,
            meta,
            owned,
        })
    }

    fn owned(&mut self) -> Decoded<Owned> {
        let merged = self.uint()?;
        let fallback_model = match self.byte()? {
            0 => None,
            1 => Some(self.string()?),
            _ => return Err("bad flag".into()),
        };
        let n = self.uint()?;
        let mut models = Vec::with_capacity(n.min(1024) as usize);
        for _ in 0..n {
            models.push(self.string()?);
        }
        let mut lists: [Vec<Found>; 3] = Default::default();
        for list in &mut lists {
            let n = self.uint()?;
            list.reserve(n.min(1 << 16) as usize);
            for _ in 0..n {
                list.push(self.found(&models)?);
            }
        }
        let [messages, summaries, outcomes] = lists;
        Ok(Owned {
            messages,
            summaries,
            outcomes,
            merged,
            fallback_model,
        })
    }

    fn found(&mut self, models: &[String]) -> Decoded<Found> {
        let flags = self.byte()?;
        if flags >> 4 != 0 {
            return Err("bad response flags".into());
        }
        let identity = (flags & 1 != 0).then(|| self.u128()).transpose()?;
        let message = (flags & 2 != 0).then(|| self.u128()).transpose()?;
        let model = match self.uint()? {
            0 => None,
            i => Some(
                models
                    .get(usize::try_from(i - 1).map_err(|_| "bad model")?)
                    .ok_or("bad model index")?
                    .clone(),
            ),
        };
        let at = if flags & 8 != 0 {
            let secs = self.int()?;
            let nanos = u32::try_from(self.uint()?).map_err(|_| "bad time")?;
            Some(DateTime::<Utc>::from_timestamp(secs, nanos).ok_or("bad time")?)
        } else {
            None
        };
        let mut v = [0u64; 6];
        for x in &mut v {
            *x = self.uint()?;
        }
        let source = match self.byte()? {
            0 => UsageSource::Provider,
            1 => UsageSource::Transcript,
            2 => UsageSource::Estimate,
            _ => return Err("bad usage source".into()),
        };
        let requests = self.uint()?;
        let first_seq = self.uint()?;
        let seq = first_seq
            .checked_add(self.uint()?)
            .ok_or("bad record number")?;
        Ok(Found {
            identity,
            message,
            sidechain: flags & 4 != 0,
            model,
            at,
            usage: Usage {
                input_tokens: v[0],
                output_tokens: v[1],
                cache_read_input_tokens: v[2],
                cache_creation_input_tokens: v[3],
                cache_creation_1h_input_tokens: v[4],
                reasoning_tokens: v[5],
                source,
            },
            requests,
            seq,
            first_seq,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &[u8] = include_bytes!("../../tests/golden/usage/session-v3.usage");
    /// The same session as the previous version wrote it.
    const GOLDEN_V2: &[u8] = include_bytes!("../../tests/golden/usage/session-v2.usage");

    fn found(identity: u128, output: u64, second: i64, seq: u64) -> Found {
        Found {
            seq,
            first_seq: seq,
            identity: Some(identity),
            message: Some(identity ^ 0xff),
            sidechain: false,
            model: Some("claude-sonnet-4-5".into()),
            at: DateTime::<Utc>::from_timestamp(1_778_572_800 + second, 0),
            usage: Usage {
                input_tokens: 3,
                output_tokens: output,
                cache_read_input_tokens: 1000,
                cache_creation_input_tokens: 200,
                ..Usage::default()
            },
            requests: 1,
        }
    }

    fn stamp(len: u64, last_seq: u64) -> Stamp {
        Stamp {
            len,
            mtime_ns: 1_778_572_900_000_000_000,
            ino: 4242,
            last_seq,
        }
    }

    /// A base with two responses, then a delta repeating the first (a
    /// later line of it: it replaces it) and adding a third.
    fn golden_parts() -> (Entry, Owned, Stamp) {
        let mut meta = SessionMeta::new("golden");
        meta.created_at = DateTime::<Utc>::from_timestamp(1_778_572_800, 0).unwrap_or_default();
        let base = Entry {
            id: "golden".into(),
            stamp: stamp(900, 3),
            meta: Some(meta),
            owned: Some(Owned {
                messages: vec![found(1, 10, 1, 2), found(2, 20, 2, 3)],
                ..Owned::default()
            }),
        };
        let add = Owned {
            messages: vec![found(1, 15, 3, 4), found(3, 30, 4, 5)],
            ..Owned::default()
        };
        (base, add, stamp(1400, 5))
    }

    fn golden_bytes() -> Vec<u8> {
        let (base, add, after) = golden_parts();
        let mut bytes = encode_session(&base);
        let base_len = encode_file(std::iter::once(&base)).len() as u64;
        bytes.extend(encode_delta(4, after, base_len, &add));
        bytes
    }

    #[test]
    fn a_session_file_is_the_golden_bytes_and_reads_back_with_its_deltas() {
        let bytes = golden_bytes();
        if bytes != GOLDEN {
            let out = std::env::temp_dir().join("session-v3.usage");
            let _ = fs::write(&out, &bytes);
            panic!(
                "the session file layout changed (this build's bytes: {})",
                out.display()
            );
        }
        let (mut want, _, after) = golden_parts();
        want.stamp = after;
        if let Some(o) = want.owned.as_mut() {
            o.messages = vec![
                Found {
                    first_seq: 2,
                    ..found(1, 15, 3, 4)
                },
                found(2, 20, 2, 3),
                found(3, 30, 4, 5),
            ];
            o.merged = 1;
        }
        assert_eq!(decode_session(GOLDEN, "golden"), Ok(want));
        assert!(decode_session(GOLDEN, "other").is_err());
        // The previous version's file is an upgrade's leftover, not damage.
        assert!(of_another_version(GOLDEN_V2));
        assert!(!of_another_version(GOLDEN));
    }

    #[test]
    fn what_a_session_held_at_a_fork_point_is_told_from_its_seqs() {
        let Ok(Entry {
            owned: Some(owned), ..
        }) = decode_session(GOLDEN, "golden")
        else {
            panic!("the golden file reads back");
        };
        let outputs = |seq: u64| {
            owned
                .upto(seq)
                .map(|v| v.iter().map(|f| f.usage.output_tokens).collect::<Vec<_>>())
        };
        assert_eq!(outputs(1), Some(vec![]));
        // Response 1, first read at seq 2, was replaced by its copy of seq
        // 4: what was held at seq 2 or 3 cannot be told without the log.
        assert_eq!(outputs(2), None);
        assert_eq!(outputs(3), None);
        assert_eq!(outputs(4), Some(vec![15, 20]));
        assert_eq!(outputs(5), Some(vec![15, 20, 30]));
    }

    #[test]
    fn a_damaged_or_unchained_delta_fails_the_session_file() {
        let good = golden_bytes();
        // Every single flipped byte and every truncation is refused.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert!(decode_session(&bad, "golden").is_err(), "byte {i} flipped");
        }
        // Cut after a whole delta, the file is its state before that delta
        // (whose stamp says it is stale); cut anywhere else, refused.
        let (base, add, after) = golden_parts();
        let before = encode_session(&base).len();
        for n in 0..good.len() {
            match decode_session(&good[..n], "golden") {
                Ok(e) => assert!(n == before && e == base, "cut at {n}"),
                Err(_) => assert_ne!(n, before),
            }
        }
        // A delta that does not start right after the summary before it.
        let mut gap = encode_session(&base);
        let base_len = encode_file(std::iter::once(&base)).len() as u64;
        gap.extend(encode_delta(5, after, base_len, &add));
        assert!(decode_session(&gap, "golden").is_err());
    }
}
