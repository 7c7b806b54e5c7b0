//! The project session manager: resume, switch, fork, export, checkpoints and
//! a self-healing index over memoir transcripts.
//!
//! [`SessionManager`] keeps the seed's API (`create_session`, `add_message`,
//! `flush`, `switch_session`, `fork_session`, `list_sessions`, ...) over any
//! [`LogStore`]: a directory of transcripts (one append-only `<id>.jsonl` per
//! session, see [`crate::transcript`]; [`SessionManager::open`]), PostgreSQL,
//! a remote `memoir serve` or the in-memory store
//! ([`SessionManager::with_store`]). Every front (CLI, server, importers)
//! drives sessions through it, so fork cuts, trash, export and repair have one
//! implementation and the same semantics on every backend. What it fixes:
//!
//! - writes are batched (every [`ManagerOptions::flush_every`] messages or
//!   [`ManagerOptions::flush_interval`]) and cost O(new messages): messages
//!   are appended as records, a session is never rewritten;
//! - unsaved messages are flushed on drop, switch, create, fork, delete and
//!   before export, so no path drops them;
//! - a fork is a header naming its parent and cut (O(1) bytes); the cut never
//!   separates tool calls from their results ([`fork`]);
//! - resuming closes unanswered tool calls with explicit error results
//!   ([`SessionManager::repair_dangling_tool_calls`]);
//! - listing reads a per-session index that heals itself ([`index`]) where
//!   the store offers one ([`LogStore::index_dir`], the file store), and the
//!   store's own listing elsewhere;
//! - delete moves to a trash that restore undoes ([`trash`]);
//! - the session being driven is held under the store's owner lease
//!   ([`ManagerOptions::lease`]), so two managers cannot drive one session;
//! - a fork records its parent's creation stamp and project, and is never
//!   stitched onto a different session that reuses the parent's id;
//! - ids are validated on every entry point; errors are typed ([`ManagerError`]).

pub mod error;
pub mod export;
pub mod fork;
mod html;
pub mod index;
pub mod ingest;
#[cfg(feature = "redact")]
pub mod redact;
mod redactions;
mod resolve;
mod revisions;
#[cfg(feature = "search")]
mod search_hook;
pub mod trash;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use error::{ManagerError, Result};
pub use export::{Export, ExportFormat, ExportOptions};
pub use index::{IndexEntry, Listing, ListingMemo, Status};
pub use revisions::Revision;
pub use trash::{PurgeReport, Trashed};

use crate::error::{ErrorKind, IoContext};
use crate::message::openai::to_openai_lossy;
use crate::message::{Message, Role};
use crate::record::{ForkPoint, Record, SessionMeta};
use crate::store::file::FileStore;
use crate::store::{header_project, Appended, Durability, Lease, LogStore, PROJECT_KEY};
use crate::transcript::{find_in_where, read_in, Session, Transcript};
use fork::Repair;
use index::Index;
use trash::TrashAware;

/// Where a project keeps its sessions, relative to its root.
pub const PROJECT_SESSIONS_DIR: &str = crate::paths::PROJECT_SESSIONS_DIR;

/// Header field naming the session a fork was made from, when its
/// `parent` reference names an ancestor instead (the cut fell inside the
/// source's own inherited prefix).
pub const FORKED_FROM: &str = "forked_from";

/// Titles derived from text keep this many characters (then `...`).
const TITLE_CHARS: usize = 50;

/// How long [`SessionManager::append_session_messages`] waits for a
/// session's owner lease that another writer holds: long enough for another
/// one-off append to finish, far shorter than a driver's hold.
const APPEND_LEASE_WAIT: Duration = Duration::from_secs(2);

/// Tuning and behaviour of a [`SessionManager`].
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerOptions {
    /// Flush once this many messages are unsaved (default 10).
    pub flush_every: usize,
    /// Flush on the next add once this long has passed since the last flush (default 0.5 s).
    pub flush_interval: Duration,
    /// How far each append goes before it returns (default [`Durability::Fsync`]).
    pub durability: Durability,
    /// Close unanswered tool calls when a session is switched to (default true).
    pub repair_on_switch: bool,
    /// The project recorded in new sessions' headers (`SessionMeta::workspace`).
    pub workspace: Option<PathBuf>,
    /// List only sessions whose header names [`ManagerOptions::workspace`]
    /// (for a store shared by several projects, e.g. `$MEMOIR_HOME/sessions`).
    pub only_workspace: bool,
    /// The tenant on a shared store (`memoir serve`'s token project): new
    /// sessions carry it in their header (field `project`), listings show
    /// only its sessions ([`LogStore::list_project`]), and every other
    /// project's session is "not found" to this manager (reads, writes,
    /// forks and fork parents alike).
    pub project: Option<String>,
    /// Whether the current session is held under the store's owner lease
    /// (default [`LeasePolicy::IfSupported`]).
    pub lease: LeasePolicy,
}

/// How a [`SessionManager`] holds the session it drives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LeasePolicy {
    /// Take no lease (several managers may drive one session; their appends
    /// still never interleave inside a batch).
    Off,
    /// Take the store's lease when it has one ([`LogStore::acquire_lease`]);
    /// a store without leases (e.g. [`crate::client::RemoteStore`]) runs
    /// unleased. A live holder is refused with [`crate::Error::Busy`] naming
    /// it; a holder that died is taken over (see [`SessionManager::lease`]).
    #[default]
    IfSupported,
    /// Like `IfSupported`, but a store without leases is an error
    /// ([`crate::error::StoreError::Unsupported`]).
    Required,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            flush_every: 10,
            flush_interval: Duration::from_millis(500),
            durability: Durability::Fsync,
            repair_on_switch: true,
            workspace: None,
            only_workspace: false,
            project: None,
            lease: LeasePolicy::IfSupported,
        }
    }
}

/// What [`SessionManager::fork_session`] created.
#[derive(Debug, Clone, PartialEq)]
pub struct Forked {
    /// The new session's id.
    pub id: String,
    /// The cut the caller asked for (messages to keep; the whole session when `None` was given).
    pub requested: usize,
    /// The cut used: `requested`, moved back so no tool call is separated
    /// from its results (and clamped to the session's length).
    pub effective: usize,
    /// The reference written in the child's header.
    pub parent: ForkPoint,
    /// True when the source's rewrites forced the prefix to be written into
    /// the child (a `rewrite` record) instead of referenced alone.
    pub materialized: bool,
}

/// What a fork's child is called: its id (else a new one), title (else
/// `Fork: <first user text>`) and header `source` (else none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForkTarget {
    /// The child's id.
    pub id: Option<String>,
    /// The child's title.
    pub title: Option<String>,
    /// The child's header `source` (an SDK adapter's own id for it).
    pub source: Option<crate::record::SourceRef>,
}

/// The session being driven: its handle, how many of
/// [`SessionManager::messages`] are on disk, and its index entry.
#[derive(Debug)]
struct Current {
    session: Session,
    persisted: usize,
    entry: Option<IndexEntry>,
    lease: Option<Lease>,
}

/// Per-project session store with a current session.
///
/// The public fields mirror the current session; set them through the
/// methods. Messages pushed to `messages` directly are saved by the next
/// flush; shortening `messages` is recorded as a `rewrite` (history is kept
/// in the transcript).
#[derive(Debug)]
pub struct SessionManager {
    /// The current session's id.
    pub current_session_id: Option<String>,
    /// The current session's messages, saved and unsaved.
    pub messages: Vec<Message>,
    /// The current session's retrieval checkpoint (an opaque model-view
    /// cutoff, persisted as `checkpoint` records; messages are never trimmed).
    pub context_checkpoint: Option<Value>,
    project: PathBuf,
    dir: PathBuf,
    live: Arc<dyn LogStore>,
    reader: Arc<TrashAware>,
    index: Option<Index>,
    options: ManagerOptions,
    current: Option<Current>,
    last_flush: Option<Instant>,
    /// The cross-session search index kept current after each write.
    #[cfg(feature = "search")]
    search: Option<search_hook::SearchHook>,
}

/// An absolute form of `path` (canonical when it exists).
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    })
}

/// `text` cut to `TITLE_CHARS` characters, with `...` when it was longer.
pub fn short_title(text: &str) -> String {
    let text = text.trim();
    let mut title: String = text.chars().take(TITLE_CHARS).collect();
    if text.chars().nth(TITLE_CHARS).is_some() {
        title.push_str("...");
    }
    title
}

/// The first non-empty user text of `messages`, as a title.
fn user_title<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Option<String> {
    messages
        .into_iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.text_content())
        .find(|t| !t.trim().is_empty())
        .map(|t| short_title(&t))
}

impl SessionManager {
    /// The manager of `project_path`, storing sessions in
    /// `<project>/.memoir/sessions`. Nothing is written yet: the directory
    /// is created by the first write (a new session, an append), and a
    /// failure to create it is reported by that write.
    pub fn new(project_path: &Path) -> Result<Self> {
        SessionManager::for_project(project_path, ManagerOptions::default())
    }

    /// Like [`SessionManager::new`] with options (the workspace defaults to the project).
    pub fn for_project(project_path: &Path, mut options: ManagerOptions) -> Result<Self> {
        let project = absolute(project_path);
        options.workspace.get_or_insert_with(|| project.clone());
        SessionManager::open(&project.join(PROJECT_SESSIONS_DIR), options)
    }

    /// The project's sessions in the global store (`$MEMOIR_SESSION_DIR`,
    /// else `$MEMOIR_HOME/sessions`): new sessions name the project as their
    /// workspace and listings show only the project's sessions.
    pub fn global(project_path: &Path, mut options: ManagerOptions) -> Result<Self> {
        options.workspace = Some(absolute(project_path));
        options.only_workspace = true;
        SessionManager::open(&Session::default_dir()?, options)
    }

    /// A manager over any session directory (a [`FileStore`] at
    /// [`ManagerOptions::durability`], with the self-healing index).
    pub fn open(dir: &Path, options: ManagerOptions) -> Result<Self> {
        // No directory is created here: a read (list, show) must not create
        // a store; the first write (create, fork, index update) does. A path
        // that cannot become a directory is still refused at once.
        match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(
                    crate::Error::Invalid(format!("{} is not a directory", dir.display())).into(),
                )
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => Err::<(), _>(e).ctx("open directory", dir)?,
        }
        let dir = absolute(dir);
        let live = Arc::new(FileStore::new(&dir, options.durability));
        Ok(SessionManager::with_store(live, options))
    }

    /// A manager over any store: files, PostgreSQL, a remote server or
    /// memory. The store's own durability applies
    /// ([`ManagerOptions::durability`] only configures the store
    /// [`SessionManager::open`] creates). Listings use the store's index
    /// directory when it has one ([`LogStore::index_dir`]).
    pub fn with_store(store: Arc<dyn LogStore>, options: ManagerOptions) -> Self {
        let dir = store
            .index_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| store.location(""));
        let index = store.index_dir().map(Index::new);
        let project = options.workspace.clone().unwrap_or_else(|| dir.clone());
        SessionManager {
            current_session_id: None,
            messages: Vec::new(),
            context_checkpoint: None,
            project,
            dir,
            reader: Arc::new(TrashAware::new(store.clone())),
            live: store,
            index,
            options,
            current: None,
            last_flush: None,
            #[cfg(feature = "search")]
            search: None,
        }
    }

    /// The project root this store belongs to (the store directory itself
    /// for a manager opened on a bare directory without a workspace).
    pub fn project_path(&self) -> PathBuf {
        self.project.clone()
    }

    /// The directory holding the transcripts (for a store without one, its
    /// locator, e.g. `postgres://host/db#schema`).
    pub fn sessions_dir(&self) -> &Path {
        &self.dir
    }

    /// The options in force.
    pub fn options(&self) -> &ManagerOptions {
        &self.options
    }

    /// The store transcripts are written to.
    pub fn store(&self) -> Arc<dyn LogStore> {
        self.live.clone()
    }

    /// The owner lease held on the current session, if any (see
    /// [`ManagerOptions::lease`]); [`Lease::recovered_from`] names a holder
    /// that died without releasing it.
    pub fn lease(&self) -> Option<&Lease> {
        self.current.as_ref().and_then(|c| c.lease.as_ref())
    }

    /// Take the owner lease of `id` per [`ManagerOptions::lease`].
    fn take_lease(&self, id: &str) -> Result<Option<Lease>> {
        if self.options.lease == LeasePolicy::Off {
            return Ok(None);
        }
        match self.live.acquire_lease(id) {
            Ok(lease) => Ok(Some(lease)),
            Err(e)
                if e.kind() == ErrorKind::Unsupported
                    && self.options.lease == LeasePolicy::IfSupported =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The owner lease of `id` for one write to a session this manager does
    /// not drive: taken per [`ManagerOptions::lease`] like a driver's, but a
    /// holder is waited for up to [`APPEND_LEASE_WAIT`] (another one-off
    /// append holds it for milliseconds) before [`crate::Error::Busy`].
    fn take_lease_for_append(&self, id: &str) -> Result<Option<Lease>> {
        let deadline = Instant::now() + APPEND_LEASE_WAIT;
        loop {
            match self.take_lease(id) {
                Err(e) if e.kind() == ErrorKind::Busy && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                taken => return taken,
            }
        }
    }

    /// Keep `index` (the cross-session search index of this manager's
    /// store) current: after every write through this manager (append,
    /// rename, fork, delete, restore, purge) it indexes that session from its
    /// cursor on, so a search finds what was just written without
    /// `memoir index`. An index failure never fails the write: the index is
    /// marked stale and the next write catches the whole store up
    /// ([`SessionManager::search_index_stale`]).
    #[cfg(feature = "search")]
    pub fn with_search_index(
        mut self,
        index: Arc<std::sync::Mutex<crate::search::SearchIndex>>,
    ) -> Self {
        self.search = Some(search_hook::SearchHook::new(index));
        self
    }

    /// True when the attached search index missed a write and has not caught
    /// up yet (false without an index).
    #[cfg(feature = "search")]
    pub fn search_index_stale(&self) -> bool {
        self.search.as_ref().is_some_and(|h| h.is_stale())
    }

    /// Tell the attached search index (feature `search`) that `id` was
    /// written; nothing without the feature or an index.
    #[inline]
    fn note_written(&self, id: &str) {
        #[cfg(feature = "search")]
        if let Some(hook) = &self.search {
            hook.note(id);
        }
        let _ = id;
    }

    /// Keep the usage summary of `id` current after `records` were appended
    /// (feature `usage`, file stores); a failure never fails the append (a
    /// report recomputes a missing or stale summary).
    #[inline]
    fn note_appended(&self, id: &str, records: &[Record], appended: &Appended) {
        #[cfg(feature = "usage")]
        let _ = crate::usage::note_append(self.live.as_ref(), id, records, appended);
        let _ = (id, records, appended);
    }

    /// Forget the current session (its lease is released).
    fn clear_current(&mut self) {
        self.current = None;
        self.current_session_id = None;
        self.messages.clear();
        self.context_checkpoint = None;
        self.last_flush = None;
    }

    /// Messages of the current session not yet on disk.
    pub fn unsaved(&self) -> usize {
        self.current
            .as_ref()
            .map_or(0, |c| self.messages.len().saturating_sub(c.persisted))
    }

    // ----- creating and writing ------------------------------------------

    /// Create a session and make it current (after flushing the previous
    /// one). The title is `title`, else the task cut to 50 characters; a
    /// non-empty task becomes the first (user) message, written at once.
    pub fn create_session(&mut self, task: &str, title: Option<&str>) -> Result<String> {
        self.flush()?;
        let title = title
            .filter(|t| !t.trim().is_empty())
            .map(str::to_string)
            .or_else(|| (!task.trim().is_empty()).then(|| short_title(task)));
        let session = self.create_live(&crate::id::new_id(), title, None)?;
        let id = session.meta.id.clone();
        let entry = self.new_entry(&session);
        self.current = None;
        let lease = self.take_lease(&id)?;
        self.current = Some(Current {
            session,
            persisted: 0,
            entry,
            lease,
        });
        self.current_session_id = Some(id.clone());
        self.messages.clear();
        self.context_checkpoint = None;
        if !task.trim().is_empty() {
            self.messages.push(Message::user(task));
            self.flush()?;
        }
        self.last_flush = Some(Instant::now());
        Ok(id)
    }

    /// Append a message to the current session; it is written when the
    /// batch is full or the interval has passed (or on flush, switch, drop...).
    pub fn add_message(&mut self, msg: Message) -> Result<()> {
        self.add_messages(std::iter::once(msg))
    }

    /// Append several messages, then consider flushing once.
    pub fn add_messages(&mut self, msgs: impl IntoIterator<Item = Message>) -> Result<()> {
        if self.current.is_none() {
            return Err(ManagerError::NoCurrentSession);
        }
        self.messages.extend(msgs);
        self.maybe_flush()
    }

    fn maybe_flush(&mut self) -> Result<()> {
        let due = match self.last_flush {
            None => true,
            Some(t) => t.elapsed() >= self.options.flush_interval,
        };
        if due || self.unsaved() >= self.options.flush_every.max(1) {
            self.flush()?;
        }
        Ok(())
    }

    /// Write the current session's unsaved messages (one append; a no-op
    /// when there are none) and update its index entry.
    pub fn flush(&mut self) -> Result<()> {
        let Some(cur) = &self.current else {
            return Ok(());
        };
        let records: Vec<Record> = if self.messages.len() < cur.persisted {
            vec![Record::Rewrite {
                messages: self.messages.clone(),
            }]
        } else {
            self.messages[cur.persisted..]
                .iter()
                .cloned()
                .map(Record::Message)
                .collect()
        };
        if records.is_empty() {
            return Ok(());
        }
        self.write_current(records)?;
        self.last_flush = Some(Instant::now());
        Ok(())
    }

    /// Append records to the current session and mark every message saved
    /// (an append is all or nothing, so a failure saves none).
    fn write_current(&mut self, records: Vec<Record>) -> Result<Appended> {
        let Some(cur) = self.current.as_ref() else {
            return Err(ManagerError::NoCurrentSession);
        };
        let (appended, entry) = self.append_indexed(&cur.session, cur.entry.clone(), records)?;
        let saved = self.messages.len();
        if let Some(cur) = self.current.as_mut() {
            cur.persisted = saved;
            cur.entry = entry;
        }
        Ok(appended)
    }

    // ----- switching and checkpoints ---------------------------------------

    /// Make an existing session current (after flushing the previous one).
    /// `Ok(false)` when there is no such live session. Unanswered tool calls
    /// are closed when [`ManagerOptions::repair_on_switch`] is set.
    pub fn switch_session(&mut self, id: &str) -> Result<bool> {
        crate::id::validate(id)?;
        self.flush()?;
        let session = match self.open_live(id) {
            Ok(s) => s,
            Err(crate::Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        // Release the previous session's lease before taking this one (a
        // switch to the current session re-takes its own lease).
        let was_current = self.current_session_id.as_deref() == Some(id);
        if was_current {
            self.current = None;
        }
        let lease = match self.take_lease(id) {
            Ok(l) => l,
            Err(e) => {
                if was_current {
                    self.clear_current();
                }
                return Err(e);
            }
        };
        let t = read_in(self.reader.as_ref(), id)?;
        let entry = self
            .index
            .as_ref()
            .and_then(|index| match index.load_fresh(id) {
                Some(e) if e.last_seq == t.last_seq => Some(e),
                _ => index
                    .refresh(&t)
                    .ok()
                    .and_then(|(e, written)| written.then_some(e)),
            });
        self.current = Some(Current {
            session,
            persisted: t.messages.len(),
            entry,
            lease,
        });
        self.current_session_id = Some(id.to_string());
        self.messages = t.messages;
        self.context_checkpoint = t.checkpoint;
        self.last_flush = None;
        if self.options.repair_on_switch {
            self.repair_dangling_tool_calls()?;
        }
        Ok(true)
    }

    /// The current session's checkpoint.
    pub fn context_checkpoint(&self) -> Option<Value> {
        self.context_checkpoint.clone()
    }

    /// Persist a checkpoint (`None` clears it) for the current session, after
    /// its unsaved messages. Messages are never modified.
    pub fn set_context_checkpoint(&mut self, checkpoint: Option<Value>) -> Result<()> {
        if self.current.is_none() {
            return Err(ManagerError::NoCurrentSession);
        }
        self.flush()?;
        let value = checkpoint.clone().unwrap_or(Value::Null);
        self.write_current(vec![Record::Checkpoint { value }])?;
        self.context_checkpoint = checkpoint;
        Ok(())
    }

    /// Record what a run of the current session did (an `outcome` record,
    /// after its unsaved messages).
    pub fn record_outcome(&mut self, stats: crate::record::RunStats) -> Result<()> {
        if self.current.is_none() {
            return Err(ManagerError::NoCurrentSession);
        }
        self.flush()?;
        self.write_current(vec![Record::Outcome(Box::new(stats))])?;
        Ok(())
    }

    /// Append records other than messages (outcomes, lineage) to a live
    /// session: after the unsaved messages of the current session, as one
    /// atomic batch.
    pub fn append_session_records(&mut self, sid: &str, records: Vec<Record>) -> Result<()> {
        crate::id::validate(sid)?;
        if records.is_empty() {
            return Ok(());
        }
        if self.current_session_id.as_deref() == Some(sid) && self.current.is_some() {
            self.flush()?;
            self.write_current(records)?;
            return Ok(());
        }
        let session = self.open_live(sid)?;
        self.append_indexed(&session, None, records)?;
        Ok(())
    }

    // ----- tool-pair integrity ----------------------------------------------

    /// True when the current session stops mid-tool: its last message is a
    /// tool result, or an assistant's tool call has no result.
    pub fn ended_mid_tool(&self) -> bool {
        fork::ended_mid_tool(&self.messages)
    }

    /// Close the current session's unanswered tool calls with explicit error
    /// results, durably: appended after the last group, or (for a group in
    /// the middle) written as a `rewrite` that inserts them right after the
    /// group. Returns how many calls were closed.
    pub fn repair_dangling_tool_calls(&mut self) -> Result<usize> {
        if self.current.is_none() {
            return Err(ManagerError::NoCurrentSession);
        }
        self.flush()?;
        let open = fork::open_calls(&self.messages).len();
        match fork::repair(&self.messages) {
            Repair::None => return Ok(0),
            Repair::Append(msg) => {
                self.messages.push(msg);
                self.flush()?;
            }
            Repair::Rewrite(list) => {
                self.messages = list.clone();
                self.write_current(vec![Record::Rewrite { messages: list }])?;
            }
        }
        Ok(open)
    }

    /// The current session as OpenAI chat-completions messages, system
    /// messages included (what the shape cannot carry, such as thinking
    /// signatures, is dropped; see [`crate::message::openai`]).
    pub fn history_chat(&self) -> Vec<Value> {
        to_openai_lossy(&self.messages).value
    }

    // ----- reading, export and fork -----------------------------------------

    /// Resolve a full id or unique prefix among the live sessions.
    pub fn resolve(&self, id_prefix: &str) -> Result<String> {
        self.resolve_where(id_prefix, |_| true)
    }

    /// [`SessionManager::resolve`] among the live sessions of this
    /// manager's project that `keep` also accepts (e.g. a workspace and its
    /// subdirectories on a shared store): any other session is neither
    /// matched nor named in an error.
    pub fn resolve_where(
        &self,
        id_prefix: &str,
        keep: impl Fn(&SessionMeta) -> bool,
    ) -> Result<String> {
        if id_prefix.trim().is_empty() {
            return Err(crate::Error::InvalidId {
                id: id_prefix.to_string(),
                reason: "an empty prefix matches every session",
            }
            .into());
        }
        let id = find_in_where(self.live.as_ref(), id_prefix, |m| self.owns(m) && keep(m))?;
        if self.options.project.is_some() {
            self.open_live(&id)?;
        }
        Ok(id)
    }

    /// True when a header belongs to this manager's project (always, without one).
    fn owns(&self, meta: &SessionMeta) -> bool {
        self.options
            .project
            .as_deref()
            .is_none_or(|p| header_project(meta) == Some(p))
    }

    /// Open a live session of this manager's project (another project's is
    /// "not found"), checked against the store on every call.
    fn open_live(&self, id: &str) -> crate::Result<Session> {
        let session = Session::open_in(self.live.clone(), id)?;
        if !self.owns(&session.meta) {
            return Err(crate::Error::NotFound(id.to_string()));
        }
        Ok(session)
    }

    fn require_live(&self, id: &str) -> Result<()> {
        self.open_live(id)?;
        Ok(())
    }

    /// Read a live session in full (a fork's prefix stitched, even from a
    /// trashed parent). For the current session, flush first to include
    /// unsaved messages.
    pub fn read_session(&self, id: &str) -> Result<Transcript> {
        crate::id::validate(id)?;
        self.require_live(id)?;
        Ok(read_in(self.reader.as_ref(), id)?)
    }

    /// Every turn a live session's log ever held, compacted-away ones
    /// included, each with its `(session, seq)` (a fork's inherited turns
    /// name the ancestor, even a trashed one): the input of the view
    /// ([`crate::view::SessionView::rebuild_history`]).
    #[cfg(feature = "view")]
    pub fn read_history(&self, id: &str) -> Result<crate::view::history::History> {
        crate::id::validate(id)?;
        self.require_live(id)?;
        Ok(crate::view::history::History::read(
            self.reader.as_ref(),
            id,
        )?)
    }

    /// The verified records of a live session (its own, not a fork's
    /// parent's), for fronts that serve the raw log.
    pub fn read_raw(&self, id: &str) -> Result<crate::store::RawLog> {
        crate::id::validate(id)?;
        self.require_live(id)?;
        Ok(self.live.read(id)?)
    }

    /// The messages of a session without switching to it (the in-memory
    /// list, unsaved messages included, for the current session).
    pub fn read_session_messages(&self, id: &str) -> Result<Vec<Message>> {
        crate::id::validate(id)?;
        if self.current_session_id.as_deref() == Some(id) {
            return Ok(self.messages.clone());
        }
        Ok(self.read_session(id)?.messages)
    }

    fn flush_if_current(&mut self, id: &str) -> Result<()> {
        if self.current_session_id.as_deref() == Some(id) {
            self.flush()?;
        }
        Ok(())
    }

    /// Export a session as the seed's JSONL (header, messages with their
    /// `index`, footer), unsaved messages of the current session included.
    pub fn export_jsonl(&mut self, id: &str) -> Result<String> {
        Ok(self.export(id, ExportOptions::default())?.text)
    }

    /// Export a session in any format, optionally redacted.
    pub fn export(&mut self, id: &str, options: ExportOptions) -> Result<Export> {
        crate::id::validate(id)?;
        self.flush_if_current(id)?;
        let t = self.read_session(id)?;
        Ok(export::render(&t, options)?)
    }

    /// Fork a session at a message cut (`upto` messages kept; all when
    /// `None`) into a new session that is not made current. The cut moves
    /// back until no tool call is separated from its results; the result says
    /// where it landed. The child's header references the parent and cut (no
    /// message is copied); its checkpoint starts empty.
    pub fn fork_session(&mut self, source_id: &str, upto: Option<usize>) -> Result<Forked> {
        self.fork_session_as(source_id, upto, None, None)
    }

    /// Like [`SessionManager::fork_session`], naming the child (`id`, else a
    /// new one) and its title (else `Fork: <first user text>`); for fronts
    /// whose callers choose ids (`memoir serve`).
    pub fn fork_session_as(
        &mut self,
        source_id: &str,
        upto: Option<usize>,
        id: Option<String>,
        title: Option<String>,
    ) -> Result<Forked> {
        crate::id::validate(source_id)?;
        if let Some(id) = &id {
            crate::id::validate(id)?;
        }
        self.flush_if_current(source_id)?;
        let t = self.read_session(source_id)?;
        let len = t.messages.len();
        let requested = upto.unwrap_or(len);
        let effective = fork::safe_cut(&t.messages, requested);
        if effective == 0 {
            return Err(ManagerError::EmptyFork {
                session: source_id.to_string(),
                requested,
            });
        }
        let plan = fork::fork_point(self.reader.as_ref(), source_id, &t, effective)?;
        let target = ForkTarget {
            id,
            title,
            source: None,
        };
        let (child, plan) =
            self.create_fork(source_id, &t, &t.messages[..effective], plan, target)?;
        Ok(Forked {
            id: child.meta.id,
            requested,
            effective,
            parent: plan.point,
            materialized: plan.rewrite.is_some(),
        })
    }

    /// Create the child of a fork of `source_id` (read as `t`) whose header
    /// references `plan.point` and whose state is `prefix` (for its default
    /// title): the one way every fork is written.
    fn create_fork(
        &self,
        source_id: &str,
        t: &Transcript,
        prefix: &[Message],
        plan: fork::ForkPlan,
        target: ForkTarget,
    ) -> Result<(Session, fork::ForkPlan)> {
        let ForkTarget { id, title, source } = target;
        let mut plan = plan;
        // The parent's creation stamp: a later session that reuses its id is
        // never stitched in its place (see `transcript::read_in`).
        if plan.point.parent_created_at.is_none() {
            plan.point.parent_created_at = self
                .reader
                .read(&plan.point.session)
                .ok()
                .and_then(|raw| raw.header)
                .map(|h| h.created_at);
        }
        let title = title.unwrap_or_else(|| match user_title(prefix) {
            Some(text) => format!("Fork: {text}"),
            None => format!("Fork of {source_id}"),
        });
        let mut meta = SessionMeta::new(id.unwrap_or_else(crate::id::new_id));
        meta.provider = t.meta.provider.clone();
        meta.model = t.meta.model.clone();
        meta.workspace = t.meta.workspace.clone();
        meta.kind = t.meta.kind.clone();
        if let Some(project) = header_project(&t.meta) {
            meta.extra
                .insert(PROJECT_KEY.into(), Value::String(project.to_string()));
        }
        meta.title = Some(title);
        meta.source = source;
        meta.parent = Some(plan.point.clone());
        if plan.point.session != source_id {
            // The data comes from an ancestor; keep the lineage the caller asked for.
            meta.extra
                .insert(FORKED_FROM.into(), Value::String(source_id.to_string()));
        }
        let child = Session::create_in(self.live.clone(), meta)?;
        if let Some(prefix) = &plan.rewrite {
            child.append(&Record::Rewrite {
                messages: prefix.clone(),
            })?;
        }
        if let Some(index) = &self.index {
            let _ = index.rebuild(self.reader.as_ref(), &child.meta.id);
        }
        self.note_written(&child.meta.id);
        Ok((child, plan))
    }

    // ----- listing, trash ---------------------------------------------------

    /// Every session (of the workspace, with [`ManagerOptions::only_workspace`]),
    /// newest activity first. Unsaved messages of the current session are not
    /// counted until flushed.
    pub fn list_sessions(&self) -> Result<Vec<IndexEntry>> {
        Ok(self.list_sessions_report()?.entries)
    }

    /// [`SessionManager::list_sessions`] for a long-running reader (the web
    /// view): `memo` keeps the last listing, and a store that did not change
    /// since costs a look at its change journal instead of a parse of the
    /// listing snapshot ([`index::Index::list_memo`]). Without an index, or
    /// with a project or workspace filter, it is a plain listing.
    pub fn list_sessions_memo(&self, memo: &mut ListingMemo) -> Result<Arc<Vec<IndexEntry>>> {
        match &self.index {
            Some(index) if self.options.project.is_none() && !self.options.only_workspace => {
                Ok(index.list_memo(self.reader.as_ref(), memo)?)
            }
            _ => Ok(Arc::new(self.list_sessions()?)),
        }
    }

    /// Like [`SessionManager::list_sessions`], with what the index had to heal.
    pub fn list_sessions_report(&self) -> Result<Listing> {
        let mut listing = match &self.index {
            Some(index) => index.list(self.reader.as_ref())?,
            None => self.list_native()?,
        };
        if self.options.project.is_some() {
            listing.entries.retain(|e| {
                self.live
                    .read_header(&e.id)
                    .ok()
                    .flatten()
                    .is_some_and(|m| self.owns(&m))
            });
        }
        if self.options.only_workspace {
            if let Some(ws) = &self.options.workspace {
                listing.entries.retain(|e| &e.workspace == ws);
            }
        }
        Ok(listing)
    }

    /// Every live session's entry computed from the store itself (stores
    /// without an index directory: PostgreSQL, remote, memory).
    fn list_native(&self) -> Result<Listing> {
        let (listed, unreadable) = match &self.options.project {
            Some(p) => self.live.list_project(p)?,
            None => self.live.list()?,
        };
        let mut listing = Listing {
            unreadable,
            ..Listing::default()
        };
        for l in listed {
            match self.entry_of(&l.meta.id) {
                Ok(e) => listing.entries.push(e),
                Err(_) => listing.unreadable += 1,
            }
        }
        index::sort_newest_first(&mut listing.entries);
        Ok(listing)
    }

    /// The entry of one live session, from the index when there is one.
    fn entry_of(&self, id: &str) -> Result<IndexEntry> {
        if let Some(index) = &self.index {
            return Ok(index.rebuild(self.reader.as_ref(), id)?.0);
        }
        let t = read_in(self.reader.as_ref(), id)?;
        let mut e = IndexEntry::from_transcript(&t);
        if let Some(at) = self.live.last_activity(id)? {
            e.modified_at(at.max(e.created_at));
        }
        Ok(e)
    }

    /// Move a session to the trash (flushing it first when current, and
    /// leaving no current session then). `Ok(false)` when there is no such
    /// live session. Its forks stay readable.
    pub fn delete_session(&mut self, id: &str) -> Result<bool> {
        crate::id::validate(id)?;
        if self.current_session_id.as_deref() == Some(id) {
            self.flush()?;
            self.clear_current();
        }
        match self.open_live(id) {
            Ok(_) => {}
            Err(crate::Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        let deleted = match self.live.delete(id) {
            Ok(()) => true,
            Err(crate::Error::NotFound(_)) => false,
            Err(e) => return Err(e.into()),
        };
        if let Some(index) = &self.index {
            index.remove(id)?;
        }
        self.note_written(id);
        Ok(deleted)
    }

    /// The sessions in the trash, most recently deleted first.
    pub fn list_trash(&self) -> Result<Vec<Trashed>> {
        Ok(trash::list(
            self.live.as_ref(),
            self.options.project.as_deref(),
        )?)
    }

    /// Bring a session back from the trash; returns its index entry.
    pub fn restore_session(&mut self, id: &str) -> Result<IndexEntry> {
        crate::id::validate(id)?;
        if self.options.project.is_some() && !self.list_trash()?.iter().any(|t| t.entry.id == id) {
            return Err(ManagerError::NotInTrash(id.to_string()));
        }
        match self.live.restore(id) {
            Ok(()) => {}
            Err(crate::Error::NotFound(_)) => return Err(ManagerError::NotInTrash(id.to_string())),
            Err(e) => return Err(e.into()),
        }
        self.note_written(id);
        self.entry_of(id)
    }

    /// Erase trashed sessions for good (`only` these ids, or all), keeping
    /// those that surviving forks still need (see [`trash`]).
    pub fn purge_trash(&mut self, only: Option<&[String]>) -> Result<PurgeReport> {
        let live = match &self.index {
            Some(index) => index.list(self.reader.as_ref())?.entries,
            None => self.list_native_all()?,
        };
        let report = trash::purge(
            self.live.as_ref(),
            &live,
            only,
            self.options.project.as_deref(),
        )?;
        for id in &report.purged {
            self.note_written(id);
        }
        Ok(report)
    }

    /// Delete the payload blobs no session of the store (live or trashed,
    /// of any project) references and that were stored more than `grace`
    /// ago (a writer between storing a payload and appending its record
    /// keeps it); see [`crate::transcript::blobs::collect_garbage`]. A store
    /// without a blob store: nothing to do.
    pub fn collect_blob_garbage(&self, grace: Duration) -> Result<crate::blob::GcReport> {
        let Some(blobs) = self.live.blobs().filter(|b| !b.store.collected_elsewhere()) else {
            return Ok(crate::blob::GcReport::default());
        };
        let scope = self.live.blob_scope();
        let whole: &dyn LogStore = scope.as_deref().unwrap_or(self.live.as_ref());
        Ok(crate::transcript::blobs::collect_garbage(
            &[whole],
            &blobs.store,
            grace,
        )?)
    }

    /// Every live session of the store, whatever its project (what a purge
    /// must keep parents for).
    fn list_native_all(&self) -> Result<Vec<IndexEntry>> {
        let (listed, _) = self.live.list()?;
        Ok(listed
            .iter()
            .filter_map(|l| self.entry_of(&l.meta.id).ok())
            .collect())
    }

    // ----- per-id operations ------------------------------------------------

    fn create_live(
        &self,
        id: &str,
        title: Option<String>,
        parent: Option<ForkPoint>,
    ) -> Result<Session> {
        if trash::contains(self.live.as_ref(), id)? {
            return Err(ManagerError::InTrash(id.to_string()));
        }
        let mut meta = SessionMeta::new(id);
        meta.workspace = self.options.workspace.clone().unwrap_or_default();
        if let Some(project) = &self.options.project {
            meta.extra
                .insert(PROJECT_KEY.into(), Value::String(project.clone()));
        }
        meta.title = title;
        meta.parent = parent;
        Ok(Session::create_in(self.live.clone(), meta)?)
    }

    /// The index entry of a session just created (header only), written.
    fn new_entry(&self, session: &Session) -> Option<IndexEntry> {
        let entry = IndexEntry::from_transcript(&Transcript::new(session.meta.clone()));
        match &self.index {
            Some(index) => index.commit(entry).ok().flatten(),
            None => Some(entry),
        }
    }

    /// Append `records` to `session` and keep its index entry up to date:
    /// incrementally from `cached` (or the stored entry) when it ends right
    /// before the append, else rebuilt from the transcript. A missing title
    /// is filled from the first user message appended. Index failures never
    /// fail the append (the next listing heals the entry).
    fn append_indexed(
        &self,
        session: &Session,
        cached: Option<IndexEntry>,
        mut records: Vec<Record>,
    ) -> Result<(Appended, Option<IndexEntry>)> {
        let id = &session.meta.id;
        // Ownership is checked against the store on every write: the session
        // may have been deleted (and its id taken by another session, of
        // this project or another) since it was opened.
        match self.live.read_header(id) {
            Ok(Some(now)) if now.created_at == session.meta.created_at && self.owns(&now) => {}
            Ok(_) | Err(crate::Error::NotFound(_)) => {
                return Err(crate::Error::NotFound(id.to_string()).into())
            }
            Err(e) => return Err(e.into()),
        }
        let entry = cached
            .or_else(|| self.index.as_ref().and_then(|i| i.load_fresh(id)))
            .or_else(|| self.entry_of(id).ok());
        if entry.as_ref().is_some_and(|e| e.title.is_none()) {
            let title = user_title(records.iter().filter_map(|r| match r {
                Record::Message(m) => Some(m),
                _ => None,
            }));
            if let Some(title) = title {
                records.push(Record::Title { title });
            }
        }
        let appended = session.append_records(&records)?;
        self.note_written(id);
        self.note_appended(id, &records, &appended);
        let incremental = entry.and_then(|mut e| e.apply(&records, &appended).then_some(e));
        let entry = match (&self.index, incremental) {
            (Some(index), Some(e)) => index.commit(e).ok().flatten(),
            (Some(index), None) => index
                .rebuild(self.reader.as_ref(), id)
                .ok()
                .and_then(|(e, written)| written.then_some(e)),
            (None, incremental) => incremental,
        };
        Ok((appended, entry))
    }

    /// Create-or-touch: an existing session gets its last activity bumped
    /// (and a non-empty `title` set); a missing one is created empty. Never
    /// overwrites anything. Returns true when it created the session.
    pub fn ensure_session(&mut self, sid: &str, title: &str) -> Result<bool> {
        crate::id::validate(sid)?;
        if self.open_live(sid).is_ok() {
            self.touch_session(sid)?;
            if !title.trim().is_empty() {
                self.rename_session(sid, title)?;
            }
            return Ok(false);
        }
        let title = (!title.trim().is_empty()).then(|| title.to_string());
        match self.create_live(sid, title.clone(), None) {
            Ok(session) => {
                self.new_entry(&session);
                Ok(true)
            }
            // Created by someone else meanwhile: that is an existing session.
            Err(ManagerError::Store(crate::Error::SessionExists(_))) => {
                self.ensure_session(sid, title.as_deref().unwrap_or(""))?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Set a session's title (a `title` record). `Ok(false)` when there is
    /// no such live session.
    pub fn rename_session(&mut self, sid: &str, title: &str) -> Result<bool> {
        crate::id::validate(sid)?;
        let record = Record::Title {
            title: title.to_string(),
        };
        if self.current_session_id.as_deref() == Some(sid) && self.current.is_some() {
            self.flush()?;
            self.write_current(vec![record])?;
            return Ok(true);
        }
        let session = match self.open_live(sid) {
            Ok(s) => s,
            Err(crate::Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        self.append_indexed(&session, None, vec![record])?;
        Ok(true)
    }

    /// Bump a session's last activity (its transcript's modification time).
    /// `Ok(false)` when there is no such live session.
    pub fn touch_session(&mut self, sid: &str) -> Result<bool> {
        crate::id::validate(sid)?;
        self.flush_if_current(sid)?;
        match self.open_live(sid) {
            Ok(_) => {}
            Err(crate::Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        let before = self.index.as_ref().and_then(|i| i.load_fresh(sid));
        match self.live.touch(sid) {
            Ok(()) => {}
            Err(crate::Error::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        let entry = match (&self.index, before) {
            (Some(index), Some(e)) => index.commit(e).ok().flatten(),
            (Some(index), None) => index
                .rebuild(self.reader.as_ref(), sid)
                .ok()
                .and_then(|(e, w)| w.then_some(e)),
            (None, _) => self.entry_of(sid).ok(),
        };
        if let Some(cur) = self.current.as_mut().filter(|c| c.session.meta.id == sid) {
            cur.entry = entry;
        }
        Ok(true)
    }

    /// Append messages to any session, creating it when missing (titled from
    /// its first user message). The current session's in-memory list is kept
    /// in sync; a stored checkpoint is kept. A session another manager drives
    /// is not written: the append holds the session's owner lease
    /// ([`ManagerOptions::lease`]) while it writes, and a live holder is
    /// refused with [`crate::Error::Busy`] naming it (after a short wait, so
    /// that one-off appends from several writers take turns).
    pub fn append_session_messages(&mut self, sid: &str, msgs: Vec<Message>) -> Result<()> {
        crate::id::validate(sid)?;
        if self.current_session_id.as_deref() == Some(sid) && self.current.is_some() {
            self.messages.extend(msgs);
            return self.flush();
        }
        let session = match self.open_live(sid) {
            Ok(s) => s,
            Err(crate::Error::NotFound(_)) => {
                match self.create_live(sid, user_title(&msgs), None) {
                    Ok(s) => {
                        self.new_entry(&s);
                        s
                    }
                    Err(ManagerError::Store(crate::Error::SessionExists(_))) => {
                        self.open_live(sid)?
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e.into()),
        };
        if msgs.is_empty() {
            return Ok(());
        }
        let _lease = self.take_lease_for_append(sid)?;
        let records = msgs.into_iter().map(Record::Message).collect();
        self.append_indexed(&session, None, records)?;
        Ok(())
    }
}

impl Drop for SessionManager {
    /// Unsaved messages are written on drop (errors cannot be reported here;
    /// call [`SessionManager::flush`] to see them).
    fn drop(&mut self) {
        let _ = self.flush();
    }
}
