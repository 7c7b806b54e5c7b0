//! Transcript records: what one line of a session log says.
//!
//! A transcript is a sequence of [`Record`]s. The line framing (the `seq`,
//! `batch`, `prev` and `h` integrity fields) lives in [`crate::frame`]; this
//! module only owns the payloads. Every payload type keeps the fields it does
//! not know in an `extra` map, and record kinds this build does not know are
//! kept as [`Record::Unknown`], so files written by newer builds survive a
//! load/rewrite round trip.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{Message, Usage};

pub mod outcome;
pub mod promotion;

pub use outcome::{LateFailure, RunStats, StopCause, ToolCall};
pub use promotion::{PromotedNote, Promotion, PromotionSource};

/// Version of the record format written by this build (see `docs/FORMAT.md`).
pub const FORMAT_VERSION: u32 = 1;

/// Kind of the [`Record::Unknown`] records in which an importer keeps source
/// lines memoir gives no meaning to:
/// `{"record":"import","agent":…,"line":…,"entry":{…}}`.
pub const SOURCE_RECORD_KIND: &str = "import";

/// The time of a kept source line (its `entry.timestamp`), for records of
/// kind [`SOURCE_RECORD_KIND`]; `None` for every other record.
pub fn source_line_time(record: &Record) -> Option<DateTime<Utc>> {
    let Record::Unknown { kind, raw } = record else {
        return None;
    };
    if kind != SOURCE_RECORD_KIND {
        return None;
    }
    let at = raw.get("entry")?.get("timestamp")?.as_str()?;
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Where a forked session came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPoint {
    /// The parent session's id.
    pub session: String,
    /// The last parent `seq` included in the fork (inclusive).
    pub seq: u64,
    /// How many of the parent's messages the fork starts with.
    pub messages: usize,
    /// The parent's creation stamp (its header's `created_at`), so a
    /// different session that later takes the parent's id (deleted and
    /// re-created) is never stitched in its place. Absent in forks written
    /// before format 1.1; those are stitched without the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_created_at: Option<DateTime<Utc>>,
}

impl ForkPoint {
    /// A reference to `messages` messages of `session`, up to its record `seq`
    /// (no creation stamp: [`crate::transcript::check_fork_parent`] fills it).
    pub fn new(session: impl Into<String>, seq: u64, messages: usize) -> ForkPoint {
        ForkPoint {
            session: session.into(),
            seq,
            messages,
            parent_created_at: None,
        }
    }
}

/// The session header: the first record of every transcript (`seq` 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// Session id (validated; see [`crate::id`]).
    pub id: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Model provider (e.g. `anthropic`, `openai`), empty when unknown.
    #[serde(default)]
    pub provider: String,
    /// Model name, empty when unknown.
    #[serde(default)]
    pub model: String,
    /// Working directory or project the session belongs to.
    #[serde(default)]
    pub workspace: PathBuf,
    /// Title at creation; later `title` records rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Free-form kind (e.g. `chat`, `task`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Set when this session is a fork of another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ForkPoint>,
    /// The agent session this one was imported from, when it was imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceRef>,
    /// The record format version that wrote the header.
    #[serde(default = "default_format")]
    pub format: u32,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Where an imported session came from: the agent that wrote it and the
/// source's own ids, so the source can be traced from the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    /// The agent that wrote the source: `claude-code`, `codex`, `gemini-cli`,
    /// `opencode`, or another agent's own name.
    pub agent: String,
    /// The agent's version, as the source states it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The source's session (or thread) id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The source file (or database) the session was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Anything else the importer recorded (branch, subagent, ...), verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn default_format() -> u32 {
    FORMAT_VERSION
}

impl SessionMeta {
    /// A header for `id`, created now, with everything else empty.
    pub fn new(id: impl Into<String>) -> Self {
        SessionMeta {
            id: id.into(),
            created_at: Utc::now(),
            provider: String::new(),
            model: String::new(),
            workspace: PathBuf::new(),
            title: None,
            kind: None,
            parent: None,
            source: None,
            format: FORMAT_VERSION,
            extra: Map::new(),
        }
    }
}

/// Security taint of a conversation. Only grows: [`Taint::merge`] is a bitwise OR.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Taint {
    /// Private data entered the context.
    pub private: bool,
    /// Untrusted (e.g. fetched) content entered the context.
    pub untrusted: bool,
}

impl Taint {
    /// OR the other taint into this one.
    pub fn merge(&mut self, other: Taint) {
        self.private |= other.private;
        self.untrusted |= other.untrusted;
    }

    /// Private data and untrusted content together: the "lethal trifecta" is armed.
    pub fn trifecta_armed(&self) -> bool {
        self.private && self.untrusted
    }
}

/// The configuration a run was attached with (one per process attach).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    /// Version of the harness that wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub harness_version: Option<String>,
    /// Model provider.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// Working directory.
    pub workspace: PathBuf,
    /// The full system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Tool names, in registry order.
    pub tools: Vec<String>,
    /// Hash of the tool schemas, when the harness computes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_hash: Option<String>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Sampling seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Reasoning effort (`low`, `medium`, `high`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// Extended thinking enabled.
    pub thinking: bool,
    /// Max tokens per response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Turn limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Output token budget for the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Cost budget in USD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Compaction threshold in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_at_tokens: Option<u64>,
    /// Messages kept verbatim by compaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compact_keep_recent: Option<u32>,
    /// Tool permission policy (e.g. `ask`, `allow`, `read-only`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// Sandbox (e.g. `none`, `bwrap`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One run's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// Tokens used by the run.
    pub usage: Usage,
    /// Model turns taken.
    pub turns: u32,
}

/// The payload of one transcript line.
#[derive(Debug, Clone, PartialEq)]
// A header is written once per log and records are short-lived on the
// write path: boxing `Meta` would cost every reader a pointer chase.
#[allow(clippy::large_enum_variant)]
pub enum Record {
    /// Session header (always `seq` 0).
    Meta(SessionMeta),
    /// One message appended to the conversation.
    Message(Message),
    /// The whole current message list, replacing everything before (compaction).
    Rewrite {
        /// The complete list after the rewrite.
        messages: Vec<Message>,
    },
    /// The configuration of one attach.
    Config(Box<RunConfig>),
    /// Totals of one run.
    Summary(Summary),
    /// A taint checkpoint covering every message before it.
    Taint(Taint),
    /// A rename. The last one wins.
    Title {
        /// The new title.
        title: String,
    },
    /// An opaque, caller-defined checkpoint (e.g. a model-view cutoff); the last one wins.
    Checkpoint {
        /// The checkpoint value; `null` clears it.
        value: Value,
    },
    /// What one run did ([`RunStats`]), written at the end of the run.
    Outcome(Box<RunStats>),
    /// A failure found after a run's outcome was written: `tool_errors + 1`
    /// on outcome number `run`.
    LateFailure(LateFailure),
    /// A harness note owed to the next run (cleared by the next outcome).
    PendingNote {
        /// The note.
        note: String,
    },
    /// The lineage of a fact promoted from this session to durable memory.
    Promotion(Box<Promotion>),
    /// A record kind this build does not know: its kind and full JSON object, kept verbatim.
    Unknown {
        /// The `"record"` tag.
        kind: String,
        /// The whole object, framing fields excluded.
        raw: Map<String, Value>,
    },
}

/// The serde shape of the known kinds.
#[derive(Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
// A header is written once per log and records are short-lived on the
// write path: boxing `Meta` would cost every reader a pointer chase.
#[allow(clippy::large_enum_variant)]
enum KnownRecord {
    Meta(SessionMeta),
    Message(Message),
    Rewrite { messages: Vec<Message> },
    Config(Box<RunConfig>),
    Summary(Summary),
    Taint(Taint),
    Title { title: String },
    Checkpoint { value: Value },
    Outcome(Box<RunStats>),
    LateFailure(LateFailure),
    PendingNote { note: String },
    Promotion(Box<Promotion>),
}

/// Borrowing twin of [`KnownRecord`] for serialisation without clones.
#[derive(Serialize)]
#[serde(tag = "record", rename_all = "snake_case")]
enum KnownRecordRef<'a> {
    Meta(&'a SessionMeta),
    Message(&'a Message),
    Rewrite { messages: &'a [Message] },
    Config(&'a RunConfig),
    Summary(&'a Summary),
    Taint(&'a Taint),
    Title { title: &'a str },
    Checkpoint { value: &'a Value },
    Outcome(&'a RunStats),
    LateFailure(&'a LateFailure),
    PendingNote { note: &'a str },
    Promotion(&'a Promotion),
}

/// The record kinds this build understands.
pub const KNOWN_KINDS: &[&str] = &[
    "meta",
    "message",
    "rewrite",
    "config",
    "summary",
    "taint",
    "title",
    "checkpoint",
    "outcome",
    "late_failure",
    "pending_note",
    "promotion",
];

impl Record {
    /// The `"record"` tag of this record.
    pub fn kind(&self) -> &str {
        match self {
            Record::Meta(_) => "meta",
            Record::Message(_) => "message",
            Record::Rewrite { .. } => "rewrite",
            Record::Config(_) => "config",
            Record::Summary(_) => "summary",
            Record::Taint(_) => "taint",
            Record::Title { .. } => "title",
            Record::Checkpoint { .. } => "checkpoint",
            Record::Outcome(_) => "outcome",
            Record::LateFailure(_) => "late_failure",
            Record::PendingNote { .. } => "pending_note",
            Record::Promotion(_) => "promotion",
            Record::Unknown { kind, .. } => kind,
        }
    }

    /// The framing-reserved keys ([`crate::frame::RESERVED_KEYS`]) among
    /// the record's own top-level fields: its `extra` map, or an unknown
    /// record's raw fields. A line the writer produced has none.
    pub(crate) fn reserved_fields(&self) -> impl Iterator<Item = &'static str> + '_ {
        let extra = match self {
            Record::Meta(m) => Some(&m.extra),
            Record::Message(m) => Some(&m.extra),
            Record::Config(c) => Some(&c.extra),
            Record::Outcome(o) => Some(&o.extra),
            Record::LateFailure(l) => Some(&l.extra),
            Record::Promotion(p) => Some(&p.extra),
            Record::Unknown { raw, .. } => Some(raw),
            _ => None,
        }
        .filter(|extra| !extra.is_empty());
        crate::frame::RESERVED_KEYS
            .iter()
            .copied()
            .filter(move |k| extra.is_some_and(|e| e.contains_key(*k)))
    }

    /// Serialise to compact JSON text: an object whose first key is the
    /// `"record"` tag (the line codec relies on that order).
    /// Fails when a payload uses a key the line framing reserves
    /// (`seq`, `record`, `batch`, `prev`, `h`), which would make the line ambiguous.
    pub fn to_json_string(&self) -> Result<String, serde_json::Error> {
        // An unknown record's own `"record"` field is the tag itself (dropped
        // below); every other reserved key is refused.
        let unknown = matches!(self, Record::Unknown { .. });
        if let Some(key) = self
            .reserved_fields()
            .find(|k| !(unknown && *k == "record"))
        {
            return Err(serde::ser::Error::custom(format!(
                "field {key:?} is reserved by the transcript framing"
            )));
        }
        let known = match self {
            Record::Meta(m) => KnownRecordRef::Meta(m),
            Record::Message(m) => KnownRecordRef::Message(m),
            Record::Rewrite { messages } => KnownRecordRef::Rewrite { messages },
            Record::Config(c) => KnownRecordRef::Config(c),
            Record::Summary(s) => KnownRecordRef::Summary(s),
            Record::Taint(t) => KnownRecordRef::Taint(t),
            Record::Title { title } => KnownRecordRef::Title { title },
            Record::Checkpoint { value } => KnownRecordRef::Checkpoint { value },
            Record::Outcome(o) => KnownRecordRef::Outcome(o),
            Record::LateFailure(l) => KnownRecordRef::LateFailure(l),
            Record::PendingNote { note } => KnownRecordRef::PendingNote { note },
            Record::Promotion(p) => KnownRecordRef::Promotion(p),
            Record::Unknown { kind, raw } => {
                let mut obj = Map::with_capacity(raw.len() + 1);
                obj.insert("record".into(), Value::String(kind.clone()));
                for (k, v) in raw {
                    if k != "record" {
                        obj.insert(k.clone(), v.clone());
                    }
                }
                return serde_json::to_string(&obj);
            }
        };
        serde_json::to_string(&known)
    }

    /// Serialise to a JSON object (with the `"record"` tag, without framing).
    pub fn to_object(&self) -> Result<Map<String, Value>, serde_json::Error> {
        serde_json::from_str(&self.to_json_string()?)
    }

    /// Parse a record's payload (its fields, without the `"record"` tag and
    /// the line framing) given its kind: the reader's fast path.
    pub fn from_json_str(kind: &str, text: &str) -> Result<Record, serde_json::Error> {
        // Dispatch on the kind the framing already told us, straight into the
        // payload type (no internally-tagged buffering on the hot path).
        #[derive(Deserialize)]
        struct RewriteBody {
            messages: Vec<Message>,
        }
        #[derive(Deserialize)]
        struct TitleBody {
            title: String,
        }
        #[derive(Deserialize)]
        struct PendingNoteBody {
            #[serde(default)]
            note: String,
        }
        #[derive(Deserialize)]
        struct CheckpointBody {
            #[serde(default)]
            value: Value,
        }
        Ok(match kind {
            "message" => Record::Message(serde_json::from_str(text)?),
            "rewrite" => Record::Rewrite {
                messages: serde_json::from_str::<RewriteBody>(text)?.messages,
            },
            "meta" => Record::Meta(serde_json::from_str(text)?),
            "config" => Record::Config(Box::new(serde_json::from_str(text)?)),
            "summary" => Record::Summary(serde_json::from_str(text)?),
            "taint" => Record::Taint(serde_json::from_str(text)?),
            "title" => Record::Title {
                title: serde_json::from_str::<TitleBody>(text)?.title,
            },
            "checkpoint" => Record::Checkpoint {
                value: serde_json::from_str::<CheckpointBody>(text)?.value,
            },
            "outcome" => Record::Outcome(Box::new(serde_json::from_str(text)?)),
            "late_failure" => Record::LateFailure(serde_json::from_str(text)?),
            "pending_note" => Record::PendingNote {
                note: serde_json::from_str::<PendingNoteBody>(text)?.note,
            },
            "promotion" => Record::Promotion(Box::new(serde_json::from_str(text)?)),
            _ => Record::Unknown {
                kind: kind.to_string(),
                raw: serde_json::from_str(text)?,
            },
        })
    }

    fn from_known(known: KnownRecord) -> Record {
        match known {
            KnownRecord::Meta(m) => Record::Meta(m),
            KnownRecord::Message(m) => Record::Message(m),
            KnownRecord::Rewrite { messages } => Record::Rewrite { messages },
            KnownRecord::Config(c) => Record::Config(c),
            KnownRecord::Summary(s) => Record::Summary(s),
            KnownRecord::Taint(t) => Record::Taint(t),
            KnownRecord::Title { title } => Record::Title { title },
            KnownRecord::Checkpoint { value } => Record::Checkpoint { value },
            KnownRecord::Outcome(o) => Record::Outcome(o),
            KnownRecord::LateFailure(l) => Record::LateFailure(l),
            KnownRecord::PendingNote { note } => Record::PendingNote { note },
            KnownRecord::Promotion(p) => Record::Promotion(p),
        }
    }

    /// Parse from a JSON object that carries a `"record"` tag. Unknown kinds
    /// become [`Record::Unknown`]; a known kind with a bad shape is an error.
    pub fn from_object(mut obj: Map<String, Value>) -> Result<Record, serde_json::Error> {
        let kind = match obj.get("record") {
            Some(Value::String(k)) => k.clone(),
            _ => {
                return Err(serde::de::Error::custom(
                    "missing or non-string \"record\" tag",
                ))
            }
        };
        if !KNOWN_KINDS.contains(&kind.as_str()) {
            obj.remove("record");
            return Ok(Record::Unknown { kind, raw: obj });
        }
        Ok(Record::from_known(serde_json::from_value(Value::Object(
            obj,
        ))?))
    }
}
