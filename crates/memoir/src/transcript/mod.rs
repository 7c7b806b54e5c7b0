//! The per-session transcript: an append-only, checksummed, chained log.
//!
//! [`Session`] keeps the seed's API (`create`, `append`, `append_messages`,
//! `record_run`, `record_outcome`, `load`, `taint_timeline`, `run_configs`,
//! `outcomes`, `last_outcome`, `outcomes_attributed`, `episode_stats`,
//! `peek_meta`, `usage_totals`, `list`, `find`) over any [`LogStore`]; the path-based
//! functions use the embedded [`FileStore`]. What it fixes: every append is
//! acknowledged only after the configured sync; concurrent writers interleave
//! whole records under a lock with a gap-free `seq`; a torn tail is cut and
//! kept, never silently dropped; a bad line anywhere is skipped and reported,
//! never the end of history; ids are validated before they touch a path.

pub mod blobs;
pub mod codec;
mod fold;
pub mod grants;
mod replay;
mod taint;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use replay::{AttributedOutcome, Transcript};
pub use taint::TaintTimeline;

use crate::error::{Error, Result};
use crate::message::{Message, Usage};
use crate::paths;
use crate::record::{LateFailure, Record, RunConfig, RunStats, SessionMeta, Summary, Taint};
use crate::store::file::FileStore;
use crate::store::lock::OwnerLock;
use crate::store::{Appended, Durability, LoadReport, LogStore};

/// How deep fork chains may go before a reader refuses (cycle guard).
const MAX_FORK_DEPTH: usize = 256;

/// The state of a conversation after a run: its messages, its taint, and the
/// pre-rewrite snapshots taken during the run (oldest first), so turns that a
/// mid-run compaction dropped still reach the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// The messages now.
    pub messages: Vec<Message>,
    /// The accumulated taint.
    pub taint: Taint,
    /// Full snapshots taken just before each in-run rewrite, oldest first.
    pub rewritten: Vec<Vec<Message>>,
}

impl From<Vec<Message>> for Conversation {
    fn from(messages: Vec<Message>) -> Self {
        Conversation {
            messages,
            ..Default::default()
        }
    }
}

/// What [`Session::load`] returns.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The header.
    pub meta: SessionMeta,
    /// The conversation (messages and taint).
    pub conversation: Conversation,
    /// Every skipped or suspicious line, and why.
    pub report: LoadReport,
}

/// One session: its header, where it lives, and the store it is written through.
#[derive(Debug, Clone)]
pub struct Session {
    /// The header.
    pub meta: SessionMeta,
    /// The transcript's location (a file path for the embedded store).
    pub path: PathBuf,
    store: Arc<dyn LogStore>,
}

impl Session {
    /// Where transcripts live: `$MEMOIR_SESSION_DIR`, else `$MEMOIR_HOME/sessions`
    /// (`~/.memoir/sessions`). A set-but-empty variable is an error.
    pub fn default_dir() -> Result<PathBuf> {
        paths::global_sessions_dir()
    }

    /// A new time-sortable, collision-resistant id (see [`crate::id::new_id`]).
    pub fn new_id() -> String {
        crate::id::new_id()
    }

    /// Create a session in `dir` (durability [`Durability::Fsync`]).
    /// Refuses an existing id with [`Error::SessionExists`].
    pub fn create(dir: &Path, meta: SessionMeta) -> Result<Session> {
        Session::create_in(Arc::new(FileStore::new(dir, Durability::Fsync)), meta)
    }

    /// Create a session in any store.
    /// A fork's header is checked first ([`check_fork_parent`]): its parent
    /// must exist (live or in the trash), belong to the same project, and
    /// reach the cut `seq`; the parent's creation stamp is recorded.
    pub fn create_in(store: Arc<dyn LogStore>, mut meta: SessionMeta) -> Result<Session> {
        crate::id::validate(&meta.id)?;
        check_fork_parent(store.as_ref(), &mut meta)?;
        store.create(&meta)?;
        Ok(Session {
            path: store.location(&meta.id),
            meta,
            store,
        })
    }

    /// Open an existing transcript file for appending.
    pub fn open(path: &Path) -> Result<Session> {
        Session::open_with(path, Durability::Fsync)
    }

    /// Open an existing transcript file with a chosen durability.
    pub fn open_with(path: &Path, durability: Durability) -> Result<Session> {
        let (store, id) = FileStore::for_path(path, durability)?;
        Session::open_in(Arc::new(store), &id)
    }

    /// Open session `id` of any store.
    pub fn open_in(store: Arc<dyn LogStore>, id: &str) -> Result<Session> {
        crate::id::validate(id)?;
        let meta = store
            .read_header(id)?
            .ok_or_else(|| Error::NoHeader(store.location(id)))?;
        Ok(Session {
            path: store.location(id),
            meta,
            store,
        })
    }

    /// The store this session is written through.
    pub fn store(&self) -> &Arc<dyn LogStore> {
        &self.store
    }

    /// Append one record. Acknowledged after the store's durability.
    pub fn append(&self, record: &Record) -> Result<Appended> {
        self.append_records(std::slice::from_ref(record))
    }

    /// Append records as one atomic batch (one write call). Payloads above
    /// the store's threshold go to its blob store first ([`blobs`]).
    pub fn append_records(&self, records: &[Record]) -> Result<Appended> {
        let records = blobs::externalize_records(self.store.as_ref(), records)?;
        self.store
            .append(&self.meta.id, &records, None)
            .map_err(|e| match e {
                Error::NotFound(id) => Error::Deleted(id),
                other => other,
            })
    }

    /// Append records only if the first gets `seq` `expected_next`
    /// (optimistic concurrency; a lost race is [`Error::Conflict`]).
    pub fn append_expecting(&self, records: &[Record], expected_next: u64) -> Result<Appended> {
        let records = blobs::externalize_records(self.store.as_ref(), records)?;
        self.store
            .append(&self.meta.id, &records, Some(expected_next))
    }

    /// Append one `message` record per message, as one atomic batch.
    pub fn append_messages(&self, messages: &[Message]) -> Result<Appended> {
        let records: Vec<Record> = messages.iter().cloned().map(Record::Message).collect();
        self.append_records(&records)
    }

    /// Record what a run did, given the messages the file held before it.
    ///
    /// Walks `before` → each pre-rewrite snapshot → the final messages; an
    /// append-only step writes the new tail, any other step writes a `rewrite`
    /// with the whole list. Everything goes out as one atomic batch. Returns
    /// `None` when there was nothing to write.
    pub fn record_run(&self, before: &[Message], after: &Conversation) -> Result<Option<Appended>> {
        let mut records = Vec::new();
        let mut prev = before;
        for state in after
            .rewritten
            .iter()
            .chain(std::iter::once(&after.messages))
        {
            transition_records(prev, state, &mut records);
            prev = state;
        }
        if records.is_empty() {
            return Ok(None);
        }
        self.append_records(&records).map(Some)
    }

    /// Append a run summary.
    pub fn record_summary(&self, usage: Usage, turns: u32) -> Result<Appended> {
        self.append(&Record::Summary(Summary { usage, turns }))
    }

    /// Record what a run did: one `outcome` record ([`RunStats`]), written
    /// at the end of the run.
    pub fn record_outcome(&self, stats: &RunStats) -> Result<Appended> {
        self.append(&Record::Outcome(Box::new(stats.clone())))
    }

    /// Record a failure found after run number `run`'s outcome was written
    /// (0-based, in this log's order): that outcome reads one more tool error.
    pub fn record_late_failure(&self, run: u32, tool_use_id: &str) -> Result<Appended> {
        self.append(&Record::LateFailure(LateFailure {
            run,
            tool_use_id: tool_use_id.to_string(),
            extra: Default::default(),
        }))
    }

    /// Record a harness note owed to the next run (it stays in
    /// [`Transcript::pending_notes`] until the next outcome is recorded).
    pub fn record_pending_note(&self, note: &str) -> Result<Appended> {
        self.append(&Record::PendingNote {
            note: note.to_string(),
        })
    }

    /// Take exclusive ownership of this session (one driving process at a
    /// time). Fails with [`Error::Busy`] naming the live holder; a lock left by
    /// a dead process is taken over and reported in [`OwnerLock::recovered_from`].
    pub fn acquire(&self) -> Result<OwnerLock> {
        let path = self.path.with_extension("lock");
        OwnerLock::acquire(&path, &self.meta.id)
    }

    /// Read this session back (stitching a fork's parent prefix).
    pub fn transcript(&self) -> Result<Transcript> {
        read_in(self.store.as_ref(), &self.meta.id)
    }

    /// Read a transcript back: the conversation and taint, plus a report of
    /// every skipped line and why. Only a missing header is an error.
    pub fn load(path: &Path) -> Result<Loaded> {
        let t = Session::read(path)?;
        Ok(Loaded {
            meta: t.meta,
            conversation: Conversation {
                messages: t.messages,
                taint: t.taint,
                rewritten: Vec::new(),
            },
            report: t.report,
        })
    }

    /// Read everything a transcript says, in one pass.
    pub fn read(path: &Path) -> Result<Transcript> {
        let (store, id) = FileStore::for_path(path, Durability::Fsync)?;
        read_in(&store, &id)
    }

    /// Verify a transcript's whole chain; a clean report means every record verified.
    pub fn verify(path: &Path) -> Result<LoadReport> {
        Ok(Session::read(path)?.report)
    }

    /// The taint checkpoints of a transcript, positioned against its messages.
    pub fn taint_timeline(path: &Path) -> Result<TaintTimeline> {
        Ok(Session::read(path)?.taint_timeline)
    }

    /// Every run configuration, in the order the runs happened (`[]` for none).
    pub fn run_configs(path: &Path) -> Result<Vec<RunConfig>> {
        Ok(Session::read(path)?.configs)
    }

    /// The header alone, reading only the first line. `None` when the first
    /// line is not a verified header.
    pub fn peek_meta(path: &Path) -> Option<SessionMeta> {
        let (store, id) = FileStore::for_path(path, Durability::Fsync).ok()?;
        store.read_header(&id).ok().flatten()
    }

    /// The run summaries summed: total usage and turns (zero when none).
    pub fn usage_totals(path: &Path) -> Result<(Usage, u32)> {
        let t = Session::read(path)?;
        Ok((t.usage, t.turns))
    }

    /// Every run outcome of a transcript, in order (late failures applied;
    /// `[]` when there are none, not an error).
    pub fn outcomes(path: &Path) -> Result<Vec<RunStats>> {
        Ok(Session::read(path)?
            .outcomes
            .into_iter()
            .map(|o| o.stats)
            .collect())
    }

    /// The last run outcome of a transcript (`None` when there is none).
    pub fn last_outcome(path: &Path) -> Result<Option<RunStats>> {
        Ok(Session::read(path)?.outcomes.pop().map(|o| o.stats))
    }

    /// Every run outcome with the `(provider, model)` in force when it was
    /// written (the row's own, else the last config's, else the header's).
    pub fn outcomes_attributed(path: &Path) -> Result<Vec<(String, String, RunStats)>> {
        Ok(Session::read(path)?
            .outcomes
            .into_iter()
            .map(|o| (o.provider, o.model, o.stats))
            .collect())
    }

    /// The episode: every outcome folded ([`RunStats::fold`]); `None` when
    /// the transcript records no outcome.
    pub fn episode_stats(path: &Path) -> Result<Option<RunStats>> {
        Ok(Session::read(path)?.episode())
    }

    /// Sessions in `dir`, newest first, reading only headers.
    pub fn list(dir: &Path) -> Result<Vec<(SessionMeta, PathBuf)>> {
        Ok(Session::list_counting(dir)?.0)
    }

    /// Like [`Session::list`], also counting unreadable files.
    pub fn list_counting(dir: &Path) -> Result<(Vec<(SessionMeta, PathBuf)>, usize)> {
        let (listed, unreadable) = FileStore::new(dir, Durability::Fsync).list()?;
        Ok((
            listed.into_iter().map(|l| (l.meta, l.location)).collect(),
            unreadable,
        ))
    }

    /// Find a session by full id or unique prefix.
    pub fn find(dir: &Path, id_prefix: &str) -> Result<PathBuf> {
        let store = FileStore::new(dir, Durability::Fsync);
        let id = find_in(&store, id_prefix)?;
        store.path_of(&id)
    }
}

/// Resolve a full id or unique prefix to an id in any store.
///
/// An empty or whitespace prefix is refused ([`Error::InvalidId`]), never
/// taken to match every session. A transcript stored under `id_prefix` whose
/// header names another session is refused ([`Error::Corrupt`]): it is
/// never acted on as that other session. When no id starts with `id_prefix`,
/// an imported session is found by its source's own id (a Claude Code
/// session uuid, a Codex thread id, or a prefix of one), see `by_source_id`.
pub fn find_in(store: &dyn LogStore, id_prefix: &str) -> Result<String> {
    find_in_where(store, id_prefix, |_| true)
}

/// [`find_in`] among the sessions whose header `keep` accepts (one
/// project's sessions of a shared store): a session `keep` refuses is never
/// matched and never named, not even in an [`Error::Ambiguous`] list.
pub fn find_in_where(
    store: &dyn LogStore,
    id_prefix: &str,
    keep: impl Fn(&SessionMeta) -> bool,
) -> Result<String> {
    crate::id::validate(id_prefix)?;
    if let Ok(Some(meta)) = store.read_header(id_prefix).map(|m| m.filter(|m| keep(m))) {
        if meta.id != id_prefix {
            return Err(Error::Corrupt {
                path: store.location(id_prefix),
                detail: format!(
                    "its header names session {:?}, not {id_prefix:?} (a renamed copy?); \
                     not acting on it",
                    meta.id
                ),
            });
        }
        return Ok(meta.id);
    }
    let (listed, _) = store.list()?;
    let listed: Vec<_> = listed.into_iter().filter(|l| keep(&l.meta)).collect();
    let mut candidates: Vec<String> = listed
        .iter()
        .map(|l| l.meta.id.clone())
        .filter(|id| id.starts_with(id_prefix))
        .collect();
    if candidates.is_empty() {
        candidates = by_source_id(&listed, id_prefix);
    }
    match candidates.len() {
        0 => Err(Error::NotFound(id_prefix.to_string())),
        1 => Ok(candidates.remove(0)),
        _ => {
            candidates.sort();
            Err(Error::Ambiguous {
                prefix: id_prefix.to_string(),
                candidates,
            })
        }
    }
}

/// The imported sessions `id` names by their source's own id (a Claude Code
/// session uuid, a Codex thread/rollout id, ...): the top-level session
/// whose `source.session` is `id` (its branches and subagents share that id);
/// else the imported session whose id is an agent prefix and `id`, else
/// those whose id, without the prefix, starts with `id` (`cc-<uuid
/// prefix>`): what [`find_in`] tries when no id starts with `id`.
fn by_source_id(listed: &[crate::store::Listed], id: &str) -> Vec<String> {
    let top_level = |m: &SessionMeta| {
        m.parent.is_none()
            && m.source
                .as_ref()
                .is_some_and(|s| !s.extra.contains_key("kind"))
    };
    let exact: Vec<String> = listed
        .iter()
        .filter(|l| {
            top_level(&l.meta)
                && l.meta.source.as_ref().and_then(|s| s.session.as_deref()) == Some(id)
        })
        .map(|l| l.meta.id.clone())
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    // An imported session's id is `<agent prefix>-<source id>[-...]`.
    let unprefixed = |m: &SessionMeta| -> Option<String> {
        m.source.as_ref()?;
        m.id.split_once('-').map(|(_, rest)| rest.to_string())
    };
    if let Some(hit) = listed
        .iter()
        .find(|l| unprefixed(&l.meta).as_deref() == Some(id))
    {
        return vec![hit.meta.id.clone()];
    }
    let found: Vec<&SessionMeta> = listed
        .iter()
        .map(|l| &l.meta)
        .filter(|m| unprefixed(m).is_some_and(|r| r.starts_with(id)))
        .collect();
    // One session and its own branches and subagents (ids it prefixes): the session.
    let tops: Vec<&&SessionMeta> = found.iter().filter(|m| top_level(m)).collect();
    if let [top] = tops.as_slice() {
        if found.iter().all(|m| m.id.starts_with(&top.id)) {
            return vec![top.id.clone()];
        }
    }
    found.into_iter().map(|m| m.id.clone()).collect()
}

/// Read a session live or, failing that, from the store's trash.
fn read_live_or_deleted(store: &dyn LogStore, id: &str) -> Result<crate::store::RawLog> {
    match store.read(id) {
        Err(Error::NotFound(missing)) => {
            store.read_deleted(id).map_err(|_| Error::NotFound(missing))
        }
        other => other,
    }
}

/// Check a fork's header before it is created, and stamp it: the parent
/// named in `meta.parent` must exist (live or in the trash), be in the same
/// project as the child (header field `project`, when either names one), and
/// reach the cut (`seq` not beyond the parent's last record); its creation
/// stamp is recorded in [`crate::record::ForkPoint::parent_created_at`] (a
/// stamp already given must match). A header without a parent passes.
pub fn check_fork_parent(store: &dyn LogStore, meta: &mut SessionMeta) -> Result<()> {
    let child = meta.id.clone();
    let child_project = crate::store::header_project(meta).map(str::to_string);
    let Some(fork) = meta.parent.as_mut() else {
        return Ok(());
    };
    crate::id::validate(&fork.session)?;
    let parent = fork.session.clone();
    let refuse = |reason: String| -> Error {
        crate::error::StoreError::ForeignParent {
            session: child.clone(),
            parent: parent.clone(),
            reason,
        }
        .into()
    };
    let raw = read_live_or_deleted(store, &fork.session)?;
    let header = raw
        .header
        .as_ref()
        .ok_or_else(|| Error::NoHeader(store.location(&fork.session)))?;
    verify_parent(header, child_project.as_deref(), fork).map_err(&refuse)?;
    if fork.seq > raw.last_seq {
        return Err(refuse(format!(
            "the cut seq {} is beyond the parent's last record (seq {})",
            fork.seq, raw.last_seq
        )));
    }
    fork.parent_created_at = Some(header.created_at);
    Ok(())
}

/// Is `parent` the session the fork `fork` was cut from, in the child's
/// project? `Err(reason)` when not.
fn verify_parent(
    parent: &SessionMeta,
    child_project: Option<&str>,
    fork: &crate::record::ForkPoint,
) -> std::result::Result<(), String> {
    if let Some(stamp) = fork.parent_created_at {
        if parent.created_at != stamp {
            return Err(format!(
                "a different session holds this id (created {}, the fork's parent was created {})",
                parent.created_at.to_rfc3339(),
                stamp.to_rfc3339()
            ));
        }
    }
    let parent_project = crate::store::header_project(parent);
    if (child_project.is_some() || parent_project.is_some()) && child_project != parent_project {
        return Err("the parent belongs to another project".into());
    }
    Ok(())
}

/// Read session `id` of any store into a [`Transcript`], stitching the parent
/// prefix of a fork. A parent that is not the session the fork was cut from
/// (another session that reuses its id, or another project's) is not
/// stitched: the report says why ([`crate::error::StoreError::ForeignParent`]).
pub fn read_in(store: &dyn LogStore, id: &str) -> Result<Transcript> {
    fold::read_depth(store, id, 0)
}

/// The state a fork at `fork` starts with: the records of `fork.session` up
/// to `fork.seq`, stitched with its own ancestors, without run summaries.
pub fn read_at(store: &dyn LogStore, fork: &crate::record::ForkPoint) -> Result<Transcript> {
    let parent = store.read_header(&fork.session).ok().flatten();
    let project = parent.as_ref().and_then(crate::store::header_project);
    fold::stitch_parent(store, fork, project, "(new fork)", 0)
}

/// The records that take a file holding `before` to `after`.
fn transition_records(before: &[Message], after: &[Message], out: &mut Vec<Record>) {
    if after.len() >= before.len() && after[..before.len()] == *before {
        out.extend(after[before.len()..].iter().cloned().map(Record::Message));
    } else {
        out.push(Record::Rewrite {
            messages: after.to_vec(),
        });
    }
}
