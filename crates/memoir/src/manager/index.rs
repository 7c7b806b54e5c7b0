//! The session index: a self-healing cache of one small entry per session, so
//! that listing a store never reads its transcripts while the cache is fresh.
//!
//! Layout (see `docs/FORMAT.md`, "Session index and trash"):
//! `<dir>/index/<id>.json` holds one compact JSON [`IndexEntry`], rewritten
//! in place under a `flock` (no fsync: the transcripts are the truth, and an
//! entry that is lost, torn or stale is rebuilt from them). Each entry
//! records the [`Stamp`] (size, mtime, inode) of the transcript it was
//! computed from and the `seq` of the last record it covers.
//!
//! - An update costs O(1): one entry file, written after each append.
//! - Listing reads one file, the listing snapshot ([`snapshot`]), plus the
//!   tail of the store's change journal ([`crate::store::file::changes`];
//!   "what changed since" is [`crate::store::file::checkpoint`], shared with
//!   the search index): only the sessions changed since are looked at, so a
//!   listing costs
//!   O(sessions) in parsing, never a `stat` per transcript. Without a usable
//!   snapshot (first listing, corrupt, from before a reboot, journal
//!   restarted) it stats every transcript and reads every entry; an entry that
//!   is missing, unparsable, of another version or whose stamp differs from
//!   the `stat` is rebuilt from its transcript (and rewritten); an entry
//!   without a transcript is removed; then a snapshot is written.
//! - Processes never lose each other's entries: each session has its own
//!   file. An entry computed while another process appended to the same
//!   transcript is detected before it is written (the last line at the
//!   stat'ed length must carry the entry's `seq`) and left to be rebuilt.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{IoContext, Result};
use crate::message::{Block, Message, Usage};
use crate::paths;
use crate::record::{source_line_time, ForkPoint, Record};
use crate::store::file::changes::Journal;
use crate::store::file::checkpoint::{self, Changes, Checkpoint};
use crate::store::file::{last_seq_at, EXT};
use crate::store::{Appended, LogStore};
use crate::transcript::{read_in, Transcript};

#[path = "index_snapshot.rs"]
pub mod snapshot;

/// Name of the index directory inside a store directory.
pub use crate::store::file::INDEX_DIR;

/// Version of the entry format written by this build.
pub const ENTRY_VERSION: u32 = 1;

/// Entries rebuilt per thread at least (fewer run on one thread).
const REBUILD_SHARE: usize = 32;

/// What a transcript looked like on disk when its entry was computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// File size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Inode number.
    pub ino: u64,
}

impl Stamp {
    /// The stamp of a file's metadata.
    pub fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            len: meta.len(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
            ino: meta.ino(),
        }
    }

    /// The modification time.
    pub fn modified(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_nanos(self.mtime_ns)
    }
}

/// The state of a session as the index sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A live session whose transcript verifies.
    Active,
    /// A live session whose transcript has integrity issues (see `memoir sessions verify`).
    Damaged,
    /// A session in the trash.
    Deleted,
}

/// One session's entry in the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Entry format version ([`ENTRY_VERSION`]).
    pub v: u32,
    /// Session id.
    pub id: String,
    /// Current title (the last `title` record, else the header's).
    pub title: Option<String>,
    /// Creation time (from the header).
    pub created_at: DateTime<Utc>,
    /// Last activity: the transcript's modification time; for an imported
    /// session (one with a `source`), the time of its source's newest line
    /// (a message or a kept source line), never the time of the import.
    pub last_activity: DateTime<Utc>,
    /// Messages in the conversation, inherited ones included.
    pub messages: usize,
    /// How many leading messages a fork inherited from its parent.
    pub inherited: usize,
    /// Rough size of the conversation in tokens (text characters / 4, rounded up).
    pub estimated_tokens: u64,
    /// Usage of the session's run summaries (never the parent's).
    pub usage: Usage,
    /// Usage reported on the session's own (not inherited) messages.
    pub message_usage: Usage,
    /// Where a fork came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ForkPoint>,
    /// The session the fork was made from, when its `parent` names an
    /// ancestor instead (header field `forked_from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// The workspace (project) the session belongs to.
    #[serde(default)]
    pub workspace: PathBuf,
    /// Model provider from the header.
    #[serde(default)]
    pub provider: String,
    /// Model from the header.
    #[serde(default)]
    pub model: String,
    /// The agent session it was imported from (header `source`), if imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::record::SourceRef>,
    /// Active, damaged or deleted.
    pub status: Status,
    /// Integrity issues found when the entry was built from the transcript.
    #[serde(default)]
    pub issues: usize,
    /// The `seq` of the last record the entry covers.
    pub last_seq: u64,
    /// The transcript on disk when the entry was computed.
    pub stamp: Stamp,
}

/// Rough token count of one message: the characters of its text, thinking,
/// tool calls (id, name and input) and tool results (call id and content),
/// divided by 4 and rounded up (so a short message never counts as zero).
/// Images are not counted. The ids count because the model reads them.
pub fn estimate_tokens(m: &Message) -> u64 {
    let chars: usize = m
        .content
        .iter()
        .map(|b| match b {
            Block::Text { text } | Block::Thinking { text, .. } => text.chars().count(),
            Block::ToolUse { id, name, input } => {
                id.chars().count() + name.len() + input.to_string().chars().count()
            }
            Block::ToolResult {
                tool_use_id,
                content,
                ..
            } => tool_use_id.chars().count() + content.chars().count(),
            Block::Image { .. } => 0,
            Block::Unknown(v) => v.to_string().chars().count(),
        })
        .sum();
    (chars as u64).div_ceil(4)
}

impl IndexEntry {
    /// This entry stamped with its transcript's state when it was read
    /// (`last_activity` is the transcript's modification time).
    fn stamped(mut self, stamp: Stamp) -> IndexEntry {
        self.stamp = stamp;
        self.modified_at(stamp.modified());
        self
    }

    /// Whether a stored entry can be trusted by this build: its version,
    /// and for an imported session an activity time from its messages (an
    /// entry stamped with the transcript's modification time was written by
    /// a build that timed imports by the import; it is rebuilt).
    pub fn is_current(&self) -> bool {
        self.v == ENTRY_VERSION
            && (self.source.is_none() || self.last_activity != self.stamp.modified())
    }

    /// Whether the session stands on its own: not a fork, and not an
    /// imported branch or subagent (`source.kind`).
    pub fn is_top_level(&self) -> bool {
        let kind = self
            .source
            .as_ref()
            .and_then(|s| s.extra.get("kind"))
            .and_then(|k| k.as_str());
        self.parent.is_none()
            && self.forked_from.is_none()
            && !matches!(kind, Some("subagent" | "branch" | "rolled_back"))
    }

    /// The store last changed the session's transcript at `modified`: its
    /// last activity, unless the session is imported (then its activity is
    /// its messages' own times, see [`IndexEntry::last_activity`]).
    pub fn modified_at(&mut self, modified: DateTime<Utc>) {
        if self.source.is_none() {
            self.last_activity = modified;
        }
    }

    /// The entry of a transcript read in full (stamp left default; see [`Index::commit`]).
    pub fn from_transcript(t: &Transcript) -> IndexEntry {
        let own = &t.messages[t.inherited.min(t.messages.len())..];
        let mut message_usage = Usage::default();
        for u in own.iter().filter_map(|m| m.usage.as_ref()) {
            message_usage.add(u);
        }
        IndexEntry {
            v: ENTRY_VERSION,
            id: t.meta.id.clone(),
            title: t.title.clone(),
            created_at: t.meta.created_at,
            last_activity: t
                .messages
                .iter()
                .filter_map(Message::latest_source_time)
                .chain(t.unknown.iter().filter_map(|r| source_line_time(&r.record)))
                .fold(t.meta.created_at, DateTime::max),
            messages: t.messages.len(),
            inherited: t.inherited,
            estimated_tokens: t.messages.iter().map(estimate_tokens).sum(),
            usage: t.usage,
            message_usage,
            parent: t.meta.parent.clone(),
            forked_from: t
                .meta
                .extra
                .get(super::FORKED_FROM)
                .and_then(|v| v.as_str())
                .map(str::to_string),
            workspace: t.meta.workspace.clone(),
            provider: t.meta.provider.clone(),
            model: t.meta.model.clone(),
            source: t.meta.source.clone(),
            status: if t.report.is_clean() {
                Status::Active
            } else {
                Status::Damaged
            },
            issues: t.report.issues.len(),
            last_seq: t.last_seq,
            stamp: Stamp::default(),
        }
    }

    /// Fold records just appended (as `appended`) into the entry. Returns
    /// false, leaving the entry unchanged, when it cannot be done
    /// incrementally: the entry does not end right before the append (another
    /// writer came in between) or a record rewrites the conversation.
    pub fn apply(&mut self, records: &[Record], appended: &Appended) -> bool {
        if appended.first_seq != self.last_seq + 1
            || records.iter().any(|r| matches!(r, Record::Rewrite { .. }))
        {
            return false;
        }
        for r in records {
            match r {
                Record::Message(m) => {
                    self.messages += 1;
                    if let Some(at) = m.latest_source_time().filter(|_| self.source.is_some()) {
                        self.last_activity = self.last_activity.max(at);
                    }
                    self.estimated_tokens += estimate_tokens(m);
                    if let Some(u) = &m.usage {
                        self.message_usage.add(u);
                    }
                }
                Record::Title { title } => self.title = Some(title.clone()),
                Record::Summary(s) => self.usage.add(&s.usage),
                other => {
                    if let Some(at) = source_line_time(other).filter(|_| self.source.is_some()) {
                        self.last_activity = self.last_activity.max(at);
                    }
                }
            }
        }
        self.last_seq = appended.last_seq;
        true
    }
}

/// What a listing found.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Every readable session, newest activity first.
    pub entries: Vec<IndexEntry>,
    /// Entries rebuilt from their transcript (missing, corrupt or stale).
    pub rebuilt: usize,
    /// Entries removed because their transcript is gone.
    pub removed: usize,
    /// Transcripts that could not be read (no valid header or bad name).
    pub unreadable: usize,
    /// True when the listing snapshot could not be used (missing, corrupt,
    /// from before a reboot, or the change journal restarted) and every
    /// transcript was `stat`ed against its entry.
    pub full_scan: bool,
}

/// The index of one store directory.
#[derive(Debug, Clone)]
pub struct Index {
    store_dir: PathBuf,
    dir: PathBuf,
}

/// A listing kept in memory between calls of [`Index::list_memo`], with
/// the checkpoint (change journal position, store directory time, boot) its
/// entries are current at. Empty by default: the first call lists.
#[derive(Debug, Default, Clone)]
pub struct ListingMemo {
    at: Option<Checkpoint>,
    entries: std::sync::Arc<Vec<IndexEntry>>,
}

impl Index {
    /// The index of the store in `store_dir` (`<store_dir>/index/`).
    pub fn new(store_dir: &Path) -> Index {
        Index {
            store_dir: store_dir.to_path_buf(),
            dir: store_dir.join(INDEX_DIR),
        }
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry_path(&self, id: &str) -> Result<PathBuf> {
        crate::id::validate(id)?;
        Ok(self.dir.join(format!("{id}.json")))
    }

    fn transcript_path(&self, id: &str) -> PathBuf {
        self.store_dir.join(format!("{id}.{EXT}"))
    }

    /// The stored entry of `id`, if present and parsable (fresh or not).
    pub fn load(&self, id: &str) -> Option<IndexEntry> {
        let bytes = fs::read(self.entry_path(id).ok()?).ok()?;
        serde_json::from_slice::<IndexEntry>(&bytes)
            .ok()
            .filter(|e| e.is_current() && e.id == id)
    }

    /// The stored entry of `id` if it matches its transcript on disk.
    pub fn load_fresh(&self, id: &str) -> Option<IndexEntry> {
        let stamp = Stamp::of(&fs::metadata(self.transcript_path(id)).ok()?);
        self.load(id).filter(|e| e.stamp == stamp)
    }

    /// Stamp `entry` with its transcript's current state and write it, if
    /// the transcript still ends with the entry's last record. Returns the
    /// written entry, or `None` when the transcript is gone or moved on (the
    /// entry is then left for the next listing to rebuild).
    pub fn commit(&self, entry: IndexEntry) -> Result<Option<IndexEntry>> {
        let path = self.transcript_path(&entry.id);
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).ctx("stat", path),
        };
        let stamp = Stamp::of(&meta);
        if last_seq_at(&path, stamp.len) != Some(entry.last_seq) {
            return Ok(None);
        }
        let entry = entry.stamped(stamp);
        self.write(&entry)?;
        Ok(Some(entry))
    }

    /// Write an entry in place, under an exclusive `flock` of its file (so
    /// writers of one entry never interleave). No temp file and no rename:
    /// replacing a file per update costs a new inode and the old one's
    /// release on every flush. A reader racing the write, or a crash during
    /// it, sees an unparsable entry or one whose stamp (the last field) is
    /// not the transcript's: either way it is rebuilt, never trusted.
    pub fn write(&self, entry: &IndexEntry) -> Result<()> {
        paths::create_private_dir(&self.dir)?;
        let path = self.entry_path(&entry.id)?;
        let bytes = serde_json::to_vec(entry)?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .ctx("open", &path)?;
        file.lock().ctx("lock", &path)?;
        let written = file
            .write_all_at(&bytes, 0)
            .and_then(|()| file.set_len(bytes.len() as u64));
        let _ = file.unlock();
        written.ctx("write", &path)
    }

    /// Remove the entry of `id` (a missing one is fine).
    pub fn remove(&self, id: &str) -> Result<()> {
        let path = self.entry_path(id)?;
        match fs::remove_file(&path) {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(e).ctx("remove", path),
            _ => Ok(()),
        }
    }

    /// Rebuild the entry of `id` from its transcript (read through `reader`)
    /// and write it when the transcript did not move on meanwhile. Returns the
    /// entry and whether it was written.
    pub fn rebuild(&self, reader: &dyn LogStore, id: &str) -> Result<(IndexEntry, bool)> {
        let t = read_in(reader, id)?;
        self.refresh(&t)
    }

    /// The entry of a transcript just read, written when still current.
    /// Returns the entry and whether it was written (a store whose index
    /// cannot be written, e.g. a read-only one, still gets its entries).
    pub fn refresh(&self, t: &Transcript) -> Result<(IndexEntry, bool)> {
        let entry = IndexEntry::from_transcript(t);
        if let Ok(Some(written)) = self.commit(entry.clone()) {
            return Ok((written, true));
        }
        let mut entry = entry;
        if let Ok(meta) = fs::metadata(self.transcript_path(&t.meta.id)) {
            entry.modified_at(Stamp::of(&meta).modified());
        }
        Ok((entry, false))
    }

    fn snapshot_path(&self) -> PathBuf {
        self.dir.join(snapshot::SNAPSHOT_FILE)
    }

    /// Every session of the store, newest activity first.
    ///
    /// From the listing snapshot when it can be trusted (this boot, same
    /// change journal epoch): only the sessions the journal names since the
    /// snapshot, the ones a changed store directory gained or lost, and a few
    /// sampled at random (writers that bypass the journal) are looked at
    /// ([`Checkpoint::changes`]). Otherwise every transcript is `stat`ed
    /// against its entry, stale entries are rebuilt, and a new snapshot is
    /// written.
    pub fn list(&self, reader: &dyn LogStore) -> Result<Listing> {
        Ok(self.list_at(reader)?.0)
    }

    /// [`Index::list`] and the checkpoint its entries are current at
    /// (`None` where none is known: no boot id, an unwritable journal).
    fn list_at(&self, reader: &dyn LogStore) -> Result<(Listing, Option<Checkpoint>)> {
        let journal = Journal::new(&self.store_dir);
        if let Some(snap) = snapshot::load(&self.snapshot_path()) {
            if let Some(found) = self.list_from_snapshot(reader, &journal, snap)? {
                return Ok(found);
            }
        }
        self.list_full(reader, &journal)
    }

    /// [`Index::list`]'s entries for a long-running reader (the web view):
    /// `memo` keeps the last listing in memory with the checkpoint it is
    /// current at. While the change journal and the store directory say
    /// nothing changed since (and the sampled entries still match their
    /// transcripts), the kept entries are returned as they are, without
    /// reading the snapshot; otherwise the store is listed as
    /// [`Index::list`] does and `memo` replaced.
    pub fn list_memo(
        &self,
        reader: &dyn LogStore,
        memo: &mut ListingMemo,
    ) -> Result<std::sync::Arc<Vec<IndexEntry>>> {
        if let Some(at) = &memo.at {
            let journal = Journal::new(&self.store_dir);
            let entries = &memo.entries;
            let changes = at.changes(&self.store_dir, &journal, || {
                Ok::<_, crate::Error>(
                    entries
                        .iter()
                        .map(|e| e.id.as_str())
                        .collect::<HashSet<_>>(),
                )
            })?;
            let fresh = changes.is_some_and(|c| c.is_empty())
                && checkpoint::sample(entries.len()).all(|i| {
                    let e = &entries[i];
                    fs::metadata(self.transcript_path(&e.id))
                        .is_ok_and(|m| Stamp::of(&m) == e.stamp)
                });
            if fresh {
                return Ok(memo.entries.clone());
            }
        }
        let (listing, at) = self.list_at(reader)?;
        memo.entries = std::sync::Arc::new(listing.entries);
        memo.at = at;
        Ok(memo.entries.clone())
    }

    /// The listing from a snapshot, or `None` when it cannot be trusted (the
    /// change journal cannot say what changed since it, another boot).
    fn list_from_snapshot(
        &self,
        reader: &dyn LogStore,
        journal: &Journal,
        snap: snapshot::Snapshot,
    ) -> Result<Option<(Listing, Option<Checkpoint>)>> {
        let mut entries = snap.entries;
        let Some(changes) = snap.header.at.changes(&self.store_dir, journal, || {
            Ok::<_, crate::Error>(
                entries
                    .iter()
                    .map(|e| e.id.as_str())
                    .collect::<HashSet<_>>(),
            )
        })?
        else {
            return Ok(None);
        };
        let Changes {
            mut changed,
            mut gone,
            live,
            moved,
            from,
            next,
        } = changes;
        let mut header = snapshot::Header {
            v: snapshot::SNAPSHOT_VERSION,
            at: next,
            entries: 0,
        };
        if let Some(live) = &live {
            // Entry files left without a transcript (removed behind the
            // index's back) go too.
            gone.extend(
                read_dir_files(&self.dir)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(name, _)| name.strip_suffix(".json").map(str::to_string))
                    .filter(|id| !live.contains(id)),
            );
        }
        // Lazy verification: a few entries per listing are checked against
        // their transcript, so a writer that bypassed the journal (an older
        // build, a hand edit) is noticed eventually.
        for e in checkpoint::sample(entries.len()).map(|i| &entries[i]) {
            let fresh =
                fs::metadata(self.transcript_path(&e.id)).is_ok_and(|m| Stamp::of(&m) == e.stamp);
            if !fresh {
                changed.insert(e.id.clone());
            }
        }
        let mut listing = Listing::default();
        if changed.is_empty() && gone.is_empty() && !moved && live.is_none() {
            listing.entries = entries;
            listing.unreadable = header.at.unreadable.len() + header.at.bad_names;
            return Ok(Some((listing, Some(header.at))));
        }
        let mut refreshed: HashMap<String, IndexEntry> = HashMap::new();
        let mut unreadable: BTreeSet<String> = header.at.unreadable.iter().cloned().collect();
        // A session whose refresh is not known to be current (a transient
        // error, or an entry that could not be stored) keeps the journal
        // position where it was, so the next listing looks at it again: a
        // change the journal announced is never consumed without being seen.
        let mut unsettled = false;
        for id in &changed {
            match self.refresh_locked(reader, id) {
                Ok(Refreshed::Current(e)) => {
                    refreshed.insert(id.clone(), e);
                }
                Ok(Refreshed::Rebuilt { entry, stored }) => {
                    listing.rebuilt += 1;
                    unsettled |= !stored;
                    refreshed.insert(id.clone(), entry);
                }
                Ok(Refreshed::Gone) => {
                    gone.insert(id.clone());
                }
                Err(e) if checkpoint::is_transient(&e) => {
                    unsettled = true;
                    if let Some(old) = entries.iter().find(|old| &old.id == id) {
                        refreshed.insert(id.clone(), old.clone());
                    }
                }
                Err(_) => {
                    unreadable.insert(id.clone());
                }
            }
        }
        for id in &gone {
            unreadable.remove(id);
            if self.remove(id).is_ok() {
                listing.removed += 1;
            }
        }
        entries.retain(|e| {
            !gone.contains(&e.id) && !changed.contains(&e.id) && !unreadable.contains(&e.id)
        });
        entries.extend(refreshed.into_values());
        sort_newest_first(&mut entries);
        header.at.unreadable = unreadable.into_iter().collect();
        header.at.finish(journal, &from, !unsettled);
        let _ = snapshot::write(&self.snapshot_path(), &header, &entries);
        listing.unreadable = header.at.unreadable.len() + header.at.bad_names;
        listing.entries = entries;
        Ok(Some((listing, Some(header.at))))
    }

    /// Refresh one session's entry while holding its transcript's lock
    /// shared (so an append the journal announced has finished): the stored
    /// entry when it matches the transcript, else rebuilt from it.
    fn refresh_locked(&self, reader: &dyn LogStore, id: &str) -> Result<Refreshed> {
        let Some(lock) = checkpoint::lock_shared(&self.store_dir, id)? else {
            return Ok(Refreshed::Gone);
        };
        // No writer that notes its changes can move the transcript on while
        // the lock is held, so the entry read now is stamped with the state
        // seen under the lock (even a torn tail waiting for its repair).
        match self.load_fresh(id) {
            Some(e) => Ok(Refreshed::Current(e)),
            None => match (read_in(reader, id), lock.metadata()) {
                (Ok(t), Ok(meta)) => {
                    let entry = IndexEntry::from_transcript(&t).stamped(Stamp::of(&meta));
                    let stored = self.write(&entry).is_ok();
                    Ok(Refreshed::Rebuilt { entry, stored })
                }
                (Err(crate::Error::NotFound(_)), _) => Ok(Refreshed::Gone),
                (Err(e), _) => Err(e),
                (_, Err(e)) => Err(e).ctx("stat", self.transcript_path(id)),
            },
        }
    }

    /// The listing without a usable snapshot: every transcript is `stat`ed
    /// against its entry, stale and missing entries are rebuilt (on several
    /// threads), entries without a transcript are removed, and a snapshot is
    /// written for the next listing.
    fn list_full(
        &self,
        reader: &dyn LogStore,
        journal: &Journal,
    ) -> Result<(Listing, Option<Checkpoint>)> {
        // A missing store lists empty, and a read never creates it.
        if !self.store_dir.is_dir() {
            let empty = Listing {
                full_scan: true,
                ..Listing::default()
            };
            return Ok((empty, None));
        }
        // Taken before looking: what changes while we look is replayed next time.
        let checkpoint = Checkpoint::before_full_scan(&self.store_dir, journal);
        let mut listing = Listing {
            full_scan: true,
            ..Listing::default()
        };
        let mut live: HashMap<String, Stamp> = HashMap::new();
        let mut bad_names = 0;
        for (name, meta) in read_dir_files(&self.store_dir)? {
            let Some(id) = name.strip_suffix(&format!(".{EXT}")) else {
                continue;
            };
            if crate::id::validate(id).is_err() {
                bad_names += 1;
                continue;
            }
            live.insert(id.to_string(), Stamp::of(&meta));
        }
        // An unreadable index directory means every entry is rebuilt.
        let indexed: HashSet<String> = read_dir_files(&self.dir)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, _)| name.strip_suffix(".json").map(str::to_string))
            .collect();
        let mut stale = Vec::new();
        for (id, stamp) in &live {
            let fresh = indexed
                .contains(id)
                .then(|| self.load(id))
                .flatten()
                .filter(|e| e.stamp == *stamp);
            match fresh {
                Some(e) => listing.entries.push(e),
                None => stale.push(id.as_str()),
            }
        }
        let mut unreadable = Vec::new();
        for (id, rebuilt) in self.rebuild_all(reader, &stale) {
            match rebuilt {
                Some(e) => {
                    listing.rebuilt += 1;
                    listing.entries.push(e);
                }
                None => unreadable.push(id.to_string()),
            }
        }
        for id in indexed.iter().filter(|id| !live.contains_key(*id)) {
            if self.remove(id).is_ok() {
                listing.removed += 1;
            }
        }
        sort_newest_first(&mut listing.entries);
        listing.unreadable = unreadable.len() + bad_names;
        let mut current = None;
        if let Some(mut at) = checkpoint {
            unreadable.sort();
            at.unreadable = unreadable;
            at.bad_names = bad_names;
            let header = snapshot::Header {
                v: snapshot::SNAPSHOT_VERSION,
                at,
                entries: listing.entries.len(),
            };
            let _ = snapshot::write(&self.snapshot_path(), &header, &listing.entries);
            current = Some(header.at);
        }
        Ok((listing, current))
    }

    /// Rebuild the entries of `ids` from their transcripts, on several
    /// threads when there are many; `None` for an unreadable one.
    fn rebuild_all<'a>(
        &self,
        reader: &dyn LogStore,
        ids: &[&'a str],
    ) -> Vec<(&'a str, Option<IndexEntry>)> {
        crate::fan_out::map(ids, REBUILD_SHARE, |id| {
            (*id, self.rebuild(reader, id).ok().map(|(e, _)| e))
        })
    }

    /// Forget the listing snapshot (the next listing stats every transcript).
    pub fn invalidate(&self) -> Result<()> {
        snapshot::remove(&self.snapshot_path())
    }
}

/// What refreshing one session's entry found.
enum Refreshed {
    /// The stored entry matches the transcript.
    Current(IndexEntry),
    /// Rebuilt from the transcript; `stored`: written back as current (false
    /// when the transcript moved on meanwhile or the index is read-only).
    Rebuilt { entry: IndexEntry, stored: bool },
    /// The transcript is gone.
    Gone,
}

/// Entries checked against their transcript per snapshot listing (shared
/// with the search index's catch-up; tests of the change journal set it to 0).
#[doc(hidden)]
pub use crate::store::file::checkpoint::VERIFY_SAMPLE;

/// Sort entries by last activity, newest first (ties: top-level sessions
/// before forks, branches and subagents, then id, descending), so the first
/// entry is the "most recent session" a front picks by default.
pub fn sort_newest_first(entries: &mut [IndexEntry]) {
    entries.sort_by(|a, b| {
        b.last_activity
            .cmp(&a.last_activity)
            .then_with(|| b.is_top_level().cmp(&a.is_top_level()))
            .then_with(|| b.id.cmp(&a.id))
    });
}

/// The regular files of a directory with their metadata (none when it is missing).
pub(crate) fn read_dir_files(dir: &Path) -> Result<Vec<(String, fs::Metadata)>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx("read directory", dir),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.ctx("read directory", dir)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        // A file removed since the directory was read is simply skipped.
        match entry.metadata() {
            Ok(meta) if meta.is_file() => out.push((name, meta)),
            _ => {}
        }
    }
    Ok(out)
}
