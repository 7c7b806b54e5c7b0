//! Importing coding agents' own session files (Claude Code, Codex, Gemini
//! CLI, OpenCode) into memoir sessions, losslessly and incrementally.
//!
//! An importer is a front: it parses a source into [`Planned`] sessions (a
//! main line, forks by reference for rewind branches and rolled-back turns,
//! child sessions for subagents), and [`import`] writes them through the
//! [`SessionManager`] onto whatever store it uses. Sources are only ever
//! opened read-only. A durable per-source cursor ([`cursor`]) makes a re-run
//! a no-op and a grown source cost only its new records; a source rewritten
//! or truncated is re-imported as a fork of what was imported before, never
//! merged silently.
//!
//! - [`claude`], [`codex`], [`gemini`] (and `opencode`, behind the
//!   `import-opencode` feature): one parser per agent format.
//! - [`detect`]: where each agent keeps its sessions, and which format a
//!   file is.
//! - [`segments`]: Codex paginated history, the segments and bases a
//!   rollout references.
//! - [`cursor`]: the per-source cursors (`<sessions dir>/import/cursors.json`).
//! - `resumed`: Claude Code resumed sessions (a file repeating another's
//!   lines), found and cut so the repeated lines are stored once.
//! - `sync`: applying planned sessions to the store.
//! - [`watch`]: keeping the store current while agents run.
//!
//! Record kinds written (see `docs/FORMAT.md`, "Imported sessions"):
//! messages carry their source trace under [`crate::message::SOURCE_KEY`];
//! source records memoir has no meaning for are kept verbatim as
//! [`Record::Unknown`] of kind [`SOURCE_RECORD`].

pub mod claude;
pub mod codex;
#[cfg(feature = "import-opencode")]
mod codex_history;
pub mod cursor;
pub mod detect;
mod documents;
pub mod gemini;
mod lines;
#[cfg(feature = "import-opencode")]
pub mod opencode;
pub mod outcomes;
mod readable;
mod resumed;
pub mod segments;
mod sync;
pub mod watch;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::manager::{ManagerError, SessionManager};
use crate::record::{Record, SessionMeta};

pub use detect::{default_home, detect_file, find_sources};
pub use lines::MAX_LINE;
pub use readable::RAW_BLOCK;

/// Kind of the [`Record::Unknown`] records that keep source lines memoir
/// gives no meaning to: `{"record":"import","agent":…,"line":…,"entry":{…}}`.
pub const SOURCE_RECORD: &str = crate::record::SOURCE_RECORD_KIND;

/// The agents whose sessions can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Agent {
    /// Anthropic's Claude Code (`~/.claude/projects/**.jsonl`).
    ClaudeCode,
    /// OpenAI's Codex CLI (`~/.codex/sessions/**/rollout-*.jsonl`).
    Codex,
    /// Google's Gemini CLI (`~/.gemini/tmp/*/chats/session-*`).
    GeminiCli,
    /// OpenCode (`~/.local/share/opencode/opencode.db`).
    OpenCode,
}

impl Agent {
    /// Every agent, in import order.
    pub const ALL: [Agent; 4] = [
        Agent::ClaudeCode,
        Agent::Codex,
        Agent::GeminiCli,
        Agent::OpenCode,
    ];

    /// The name used in `SourceRef::agent`: `claude-code`, `codex`,
    /// `gemini-cli`, `opencode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::GeminiCli => "gemini-cli",
            Agent::OpenCode => "opencode",
        }
    }

    /// The prefix of the memoir ids of this agent's sessions.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "cc",
            Agent::Codex => "cx",
            Agent::GeminiCli => "gm",
            Agent::OpenCode => "oc",
        }
    }
}

impl std::str::FromStr for Agent {
    type Err = ImportError;
    fn from_str(s: &str) -> Result<Self, ImportError> {
        match s {
            "claude" | "claude-code" => Ok(Agent::ClaudeCode),
            "codex" => Ok(Agent::Codex),
            "gemini" | "gemini-cli" => Ok(Agent::GeminiCli),
            "opencode" => Ok(Agent::OpenCode),
            other => Err(ImportError::Unsupported {
                path: PathBuf::from(other),
                reason: "unknown agent (expected claude, codex, gemini or opencode)".into(),
            }),
        }
    }
}

/// Errors of an import.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// Reading a source (or writing a cursor) failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A source that is not in a format this build reads.
    #[error("{}: {reason}", path.display())]
    Unsupported {
        /// The source.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Writing to the memoir store failed.
    #[error(transparent)]
    Manager(#[from] ManagerError),
    /// The memoir store refused (I/O, lock, ...).
    #[error(transparent)]
    Store(#[from] crate::Error),
}

impl ImportError {
    /// What the caller can do about this error (see [`crate::error::ErrorKind`]).
    pub fn kind(&self) -> crate::error::ErrorKind {
        match self {
            ImportError::Io { source, .. } => crate::error::io_kind(source.kind()),
            ImportError::Unsupported { .. } => crate::error::ErrorKind::Unsupported,
            ImportError::Manager(e) => e.kind(),
            ImportError::Store(e) => e.kind(),
        }
    }

    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        ImportError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A source line (or row) that was not imported, or a problem worth reporting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The source file.
    pub file: PathBuf,
    /// 1-based line (or row) number.
    pub line: u64,
    /// What was wrong.
    pub reason: String,
}

/// Where a planned fork's parent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParentRef {
    /// Another planned session of the same source, by key.
    Key(String),
    /// A session of another source, by its planned (deterministic) id.
    Session(String),
}

/// Where a planned fork cuts its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkAt {
    /// After this many of the parent's messages (inherited ones included).
    Messages(usize),
    /// After the parent's messages read from source lines up to this one.
    SourceLine(u64),
    /// After the parent's messages whose source `ordinal` is below this
    /// (Codex paginated history: `history_base.end_ordinal_exclusive`).
    Ordinal(u64),
    /// Before the parent's user message of this 0-based index (all of
    /// the parent when it has fewer; Codex `rollout_reference.nth_user_message`).
    BeforeUserMessage(u64),
}

/// A planned fork by reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkFrom {
    /// The parent.
    pub parent: ParentRef,
    /// The cut.
    pub at: ForkAt,
}

/// One memoir session a source holds, as a parser planned it.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Stable key within the source (`main`, `branch:<uuid>`, `agent:<id>`, ...).
    pub key: String,
    /// The header (its id is the deterministic id; `parent` is filled in from `fork`).
    pub meta: SessionMeta,
    /// When the session is a fork by reference of another.
    pub fork: Option<ForkFrom>,
    /// The session's own records, in order.
    pub records: Vec<Record>,
}

/// What a parser made of one source.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The sessions, parents before the forks and children that name them.
    pub sessions: Vec<Planned>,
    /// Lines that were not imported.
    pub skipped: Vec<Skipped>,
    /// A torn last line, retried on the next run.
    pub torn: Option<Skipped>,
    /// Structural oddities tolerated (dangling parents, ...).
    pub notes: Vec<Skipped>,
    /// Bytes of the source consumed (up to the last complete line).
    pub consumed: u64,
    /// Complete lines consumed.
    pub complete_lines: u64,
    /// Claude Code: subagent id → the `Task`/`Agent` tool call that spawned it.
    pub spawns: HashMap<String, String>,
    /// The parser's state at `consumed`, for the next run to resume from
    /// (`None`: the next growth is parsed in full).
    pub tail: Option<cursor::TailState>,
    /// Lines that must start a new message from now on (import boundaries
    /// a resumed parse did not merge across).
    pub cuts: Vec<u64>,
    /// The sessions hold only the records after the previous import
    /// (`parse_tail`): `main` continues the source's main session.
    pub resumed: bool,
    /// Claude Code, with [`ParseContext::repeated_lines`]: the uuid of the
    /// repeated entry the main session continues from (its fork point).
    pub continues_from: Option<String>,
}

/// What a parser may need beyond the source itself.
#[derive(Debug, Default)]
pub struct ParseContext {
    /// Line numbers that must start a new message even when they continue
    /// the previous one (split assistant lines cut by an earlier import).
    pub cuts: BTreeSet<u64>,
    /// Claude Code: subagent id → spawning tool call, from sessions read earlier.
    pub spawns: HashMap<String, String>,
    /// Codex: the rollout this one was forked from (its path), when known.
    pub codex_parent: Option<PathBuf>,
    /// Claude Code: the file's first this many lines repeat another
    /// session's (a resumed session): they are not imported again.
    pub repeated_lines: u64,
}

/// One source to import.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Source {
    /// Its format.
    pub agent: Agent,
    /// The file (or database).
    pub path: PathBuf,
}

/// Progress of a running import (for a progress bar).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Sources done.
    pub files_done: usize,
    /// Sources in this run.
    pub files_total: usize,
    /// Bytes of the sources done.
    pub bytes_done: u64,
    /// Bytes of all sources.
    pub bytes_total: u64,
    /// Sessions created or updated so far.
    pub sessions: usize,
}

/// Session counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SessionCounts {
    /// Sessions created.
    pub new: usize,
    /// Sessions that got new records.
    pub updated: usize,
    /// Sessions already up to date.
    pub unchanged: usize,
    /// Sessions whose source was rewritten or truncated: re-imported as a fork.
    pub forked: usize,
}

/// A source that could not be imported at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileError {
    /// The source.
    pub file: PathBuf,
    /// Why.
    pub error: String,
}

/// The summary of a run (`memoir import --json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// Sources considered.
    pub files: usize,
    /// Sources read because they were new or changed.
    pub files_read: usize,
    /// Bytes read from sources.
    pub bytes_read: u64,
    /// Sessions new/updated/unchanged/forked.
    pub sessions: SessionCounts,
    /// Messages appended.
    pub messages: usize,
    /// Records appended (messages included).
    pub records: usize,
    /// Lines skipped, with file and line.
    pub skipped: Vec<Skipped>,
    /// Torn last lines left for the next run.
    pub torn: Vec<Skipped>,
    /// Tolerated oddities (dangling parents, unlinked children, ...).
    pub notes: Vec<Skipped>,
    /// Sources that failed as a whole.
    pub errors: Vec<FileError>,
    /// Ids of the sessions created in this run.
    pub created: Vec<String>,
}

/// Import `sources` into the manager's store: each new or changed source is
/// parsed and its sessions created or extended; unchanged sources are not
/// read. `progress` is called after each source. Each session's listing
/// entry and usage summary are kept current as records are appended, and
/// the listing snapshot is refreshed at the end, so the first listing or
/// usage report after an import costs what later ones do.
pub fn import(
    manager: &SessionManager,
    sources: &[Source],
    progress: &mut dyn FnMut(&Progress),
) -> Result<ImportReport, ImportError> {
    let report = sync::run(manager, sources, progress)?;
    // Leave the listing snapshot current (the entries are, after each
    // append): the first `sessions list` after an import then reads one
    // file, as every later one does. Derived data: a failure here is
    // healed by that listing.
    if report.files_read > 0 || !report.created.is_empty() {
        let _ = manager.list_sessions_report();
        // Likewise the store-wide usage summary (each session's own file
        // was kept current by its appends).
        #[cfg(feature = "usage")]
        let _ = crate::usage::refresh(manager.store().as_ref());
    }
    Ok(report)
}

/// Sources of `agent` under `dir` (its home by default; see [`detect`]).
pub fn sources_of(agent: Agent, dir: Option<&Path>) -> Result<Vec<Source>, ImportError> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => match default_home(agent)? {
            Some(d) => d,
            None => return Ok(Vec::new()),
        },
    };
    Ok(find_sources(agent, &dir)?
        .into_iter()
        .map(|path| Source { agent, path })
        .collect())
}

/// Parse one source (no store involved).
pub fn parse_source(source: &Source, ctx: &ParseContext) -> Result<Parsed, ImportError> {
    if source.agent == Agent::OpenCode {
        return parse_bytes(source, &[], ctx);
    }
    if let Some(parsed) = parse_compressed(source, ctx)? {
        return Ok(parsed.0);
    }
    let bytes = lines::read_all(&source.path)?;
    parse_bytes(source, &bytes, ctx)
}

/// A compressed Claude Code or Codex source, parsed as it is decompressed
/// line by line (memory bounded by [`lines::MAX_LINE`] plus what it
/// holds), with the check hash of its decompressed prefix. `None` for
/// other sources (read whole).
pub(crate) fn parse_compressed(
    source: &Source,
    ctx: &ParseContext,
) -> Result<Option<(Parsed, String)>, ImportError> {
    if !lines::is_compressed(&source.path) {
        return Ok(None);
    }
    let parse = match source.agent {
        Agent::ClaudeCode => claude::parse_lines,
        Agent::Codex => codex::parse_lines,
        Agent::GeminiCli | Agent::OpenCode => return Ok(None),
    };
    let streamed = lines::read_compressed(&source.path)?;
    let mut parsed = parse(&source.path, streamed.file, ctx);
    readable::make_readable(&mut parsed, &source.path);
    Ok(Some((parsed, streamed.prefix_hash)))
}

/// Parse only the part of a source after the imported prefix (`bytes`,
/// following its first `lines_before` lines), from the state the previous
/// import left. `None` when the format or the new records need a full parse.
pub(crate) fn parse_tail(
    source: &Source,
    bytes: &[u8],
    lines_before: u64,
    state: &cursor::TailState,
    ctx: &ParseContext,
) -> Option<Parsed> {
    let mut parsed = match source.agent {
        Agent::ClaudeCode => claude::parse_tail(&source.path, bytes, lines_before, state, ctx),
        Agent::Codex => codex::parse_tail(&source.path, bytes, lines_before, state, ctx),
        Agent::GeminiCli | Agent::OpenCode => None,
    }?;
    readable::make_readable(&mut parsed, &source.path);
    Some(parsed)
}

/// Parse a source whose content was read as `bytes` (OpenCode databases
/// are opened by path instead); every record is made readable
/// ([`readable`]).
pub(crate) fn parse_bytes(
    source: &Source,
    bytes: &[u8],
    ctx: &ParseContext,
) -> Result<Parsed, ImportError> {
    let mut parsed = parse_bytes_as_is(source, bytes, ctx)?;
    readable::make_readable(&mut parsed, &source.path);
    Ok(parsed)
}

fn parse_bytes_as_is(
    source: &Source,
    bytes: &[u8],
    ctx: &ParseContext,
) -> Result<Parsed, ImportError> {
    match source.agent {
        Agent::ClaudeCode => Ok(claude::parse(&source.path, bytes, ctx)),
        Agent::Codex => Ok(codex::parse(&source.path, bytes, ctx)),
        Agent::GeminiCli => Ok(gemini::parse(&source.path, bytes)),
        Agent::OpenCode => {
            #[cfg(feature = "import-opencode")]
            {
                opencode::parse(&source.path)
            }
            #[cfg(not(feature = "import-opencode"))]
            {
                Err(ImportError::Unsupported {
                    path: source.path.clone(),
                    reason: "OpenCode import needs the `import-opencode` feature".into(),
                })
            }
        }
    }
}

// ----- helpers shared by the parsers ---------------------------------------

/// A record keeping one source line verbatim.
pub(crate) fn source_record(agent: Agent, line: u64, entry: Map<String, Value>) -> Record {
    let mut raw = Map::new();
    raw.insert("agent".into(), Value::String(agent.as_str().into()));
    raw.insert("line".into(), Value::from(line));
    raw.insert("entry".into(), Value::Object(entry));
    Record::Unknown {
        kind: SOURCE_RECORD.into(),
        raw,
    }
}

/// A memoir id made of `parts` joined with `-`, or (when that is not a valid
/// id) the prefix and a hash of the parts.
pub(crate) fn make_id(agent: Agent, parts: &[&str]) -> String {
    let mut id = agent.id_prefix().to_string();
    for p in parts {
        id.push('-');
        id.push_str(p);
    }
    if crate::id::validate(&id).is_ok() {
        return id;
    }
    let hash = blake3::hash(parts.join("\u{0}").as_bytes());
    format!("{}-{}", agent.id_prefix(), &hash.to_hex()[..32])
}

/// The string at `key`, if it is one.
pub(crate) fn str_of<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

/// An RFC 3339 timestamp at `key`.
pub(crate) fn time_of(
    obj: &Map<String, Value>,
    key: &str,
) -> Option<chrono::DateTime<chrono::Utc>> {
    str_of(obj, key)
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// The first user text of `records`, as a title.
pub(crate) fn first_user_title(records: &[Record]) -> Option<String> {
    first_user_title_of(records.iter())
}

/// The first user text among `records` that a person typed, as a title.
pub(crate) fn first_user_title_of<'a>(
    records: impl IntoIterator<Item = &'a Record>,
) -> Option<String> {
    records.into_iter().find_map(|r| match r {
        Record::Message(m) if m.role == crate::message::Role::User => {
            let t = m.text_content();
            let t = t.trim();
            (!is_synthetic_prompt(t)).then(|| crate::manager::short_title(t))
        }
        _ => None,
    })
}

/// Texts an agent writes as a user turn itself: markup-wrapped harness
/// context (Claude Code `<command-name>`/`<command-message>` wrappers,
/// `<local-command-stdout>`, `<system-reminder>`; Codex
/// `<environment_context>`, `<user_instructions>`, ...), interruption
/// markers (`[Request interrupted by user]`, `... for tool use]`), the
/// local-command caveat, and a compaction's continuation summary. None of
/// them is a title.
pub fn is_synthetic_prompt(text: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "<",
        "[Request interrupted",
        "Caveat: The messages below were generated by the user while running local commands",
        "This session is being continued from a previous conversation",
    ];
    let t = text.trim_start();
    t.is_empty() || PREFIXES.iter().any(|p| t.starts_with(p))
}
