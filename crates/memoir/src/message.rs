//! The provider-neutral message model.
//!
//! A [`Message`] is a role plus a list of content [`Block`]s, with optional token
//! [`Usage`] and provider ids. It is the shape stored in transcripts and the pivot
//! for lossless conversion to and from provider wire shapes (see
//! [`crate::message::openai`] and [`crate::message::anthropic`]).
//!
//! Forward compatibility: fields this build does not know are kept in
//! [`Message::extra`], and block kinds it does not know become [`Block::Unknown`]
//! holding the raw JSON, so a newer writer's data survives a load and rewrite.

pub mod anthropic;
pub mod convert;
mod de;
pub mod openai;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who produced a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The human (or the harness speaking for them).
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, when the provider gives them their own role.
    Tool,
}

impl Role {
    /// The lowercase wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning, with the provider's signature when it gave one.
    Thinking {
        /// The reasoning text.
        text: String,
        /// Opaque signature that lets the provider verify the thinking on replay.
        signature: Option<String>,
    },
    /// A tool call made by the assistant.
    ToolUse {
        /// Call id, unique within the session; results refer to it.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments as JSON.
        input: Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the [`Block::ToolUse`] this answers.
        tool_use_id: String,
        /// Result text.
        content: String,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// An image, base64-encoded without a `data:` prefix.
    Image {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// Base64 payload.
        data: String,
    },
    /// A block kind this build does not know, kept verbatim.
    Unknown(Value),
}

/// The serde shape of the known block kinds; [`Block`] adds the `Unknown` fallback.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum KnownBlock {
    Text {
        text: String,
    },
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
    Image {
        media_type: String,
        data: String,
    },
}

impl Serialize for Block {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let known = match self.clone() {
            Block::Text { text } => KnownBlock::Text { text },
            Block::Thinking { text, signature } => KnownBlock::Thinking { text, signature },
            Block::ToolUse { id, name, input } => KnownBlock::ToolUse { id, name, input },
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => KnownBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            },
            Block::Image { media_type, data } => KnownBlock::Image { media_type, data },
            Block::Unknown(v) => return v.serialize(s),
        };
        known.serialize(s)
    }
}

/// Token counts reported for one model response. Every field defaults to zero,
/// so a record missing one still loads (the seed dropped such records).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Prompt tokens billed at the normal rate.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read_input_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_creation_input_tokens: u64,
    /// Of `cache_creation_input_tokens`, those written with a 1-hour lifetime
    /// (Anthropic `cache_creation.ephemeral_1h_input_tokens`, priced higher);
    /// the rest are 5-minute writes. A subset, never added on top.
    #[serde(skip_serializing_if = "crate::is_default")]
    pub cache_creation_1h_input_tokens: u64,
    /// Reasoning tokens, a subset of `output_tokens` (OpenAI `reasoning_tokens`,
    /// Codex `reasoning_output_tokens`); never added on top of it.
    #[serde(skip_serializing_if = "crate::is_default")]
    pub reasoning_tokens: u64,
    /// Where these counts come from (omitted when reported by the provider).
    #[serde(skip_serializing_if = "UsageSource::is_provider")]
    pub source: UsageSource,
}

/// Provenance of a [`Usage`]: how far its counts can be trusted.
///
/// All counts follow one convention whatever the provider: `input_tokens`
/// excludes cache reads and cache writes (Anthropic's convention; OpenAI's
/// `input_tokens`, which includes cached tokens, is normalised on import).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// Reported by the provider's API for this response (the default).
    #[default]
    Provider,
    /// As written by the agent's transcript, known to be partial (e.g. a
    /// Claude Code streaming placeholder line whose final counts never came).
    Transcript,
    /// Estimated by memoir (e.g. from text length), not reported by anyone.
    Estimate,
}

impl UsageSource {
    /// True for [`UsageSource::Provider`].
    pub fn is_provider(&self) -> bool {
        *self == UsageSource::Provider
    }
}

impl Usage {
    /// Field-wise saturating sum.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
        self.cache_creation_1h_input_tokens = self
            .cache_creation_1h_input_tokens
            .saturating_add(other.cache_creation_1h_input_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
        // A sum is only as trustworthy as its weakest part.
        self.source = self.source.max(other.source);
    }

    /// All tokens, of every kind (reasoning tokens are inside `output_tokens`).
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_input_tokens)
            .saturating_add(self.cache_creation_input_tokens)
    }

    /// True when every count is zero.
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }
}

/// A provider-neutral message. (`Deserialize` is hand-written in `de.rs`.)
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// Who produced it.
    pub role: Role,
    /// Its content, in order.
    pub content: Vec<Block>,
    /// Token usage of the response that produced it (assistant messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The provider's id for this message or response (e.g. `msg_…`, `chatcmpl-…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// The model that produced it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When the message was written (by the agent that produced it, or by
    /// the source an importer read it from), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<DateTime<Utc>>,
    /// Fields this build does not know, kept verbatim. An imported message
    /// keeps its trace to the source under [`SOURCE_KEY`].
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Key in [`Message::extra`] under which an imported message keeps the
/// source's own ids, as a JSON object: `uuid` (the source line's id),
/// `parent_uuid`, `request_id`, `response_id`, `line` (1-based line in the
/// source file), and whatever else the importer found (`docs/FORMAT.md`).
pub const SOURCE_KEY: &str = "source";

impl Message {
    /// The newest time the source gave this message: its own `timestamp`,
    /// or a later one of the source lines merged into it (the parts of a
    /// split response, `source.merged[].timestamp`).
    pub fn latest_source_time(&self) -> Option<DateTime<Utc>> {
        let merged = self
            .extra
            .get(SOURCE_KEY)
            .and_then(|t| t.get("merged"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|part| part.get("timestamp")?.as_str())
            .filter_map(|at| DateTime::parse_from_rfc3339(at).ok())
            .map(|at| at.with_timezone(&Utc));
        self.timestamp.into_iter().chain(merged).max()
    }

    /// A message with the given role and blocks and nothing else.
    pub fn new(role: Role, content: Vec<Block>) -> Self {
        Message {
            role,
            content,
            usage: None,
            provider_id: None,
            model: None,
            timestamp: None,
            extra: Map::new(),
        }
    }

    /// A single-text-block message.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message::new(role, vec![Block::Text { text: text.into() }])
    }

    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message::text(Role::User, text)
    }

    /// An assistant message with one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::text(Role::Assistant, text)
    }

    /// A system message with one text block.
    pub fn system(text: impl Into<String>) -> Self {
        Message::text(Role::System, text)
    }

    /// A tool-role message carrying one result.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Message::new(
            Role::Tool,
            vec![Block::ToolResult {
                tool_use_id: tool_use_id.into(),
                content: content.into(),
                is_error,
            }],
        )
    }

    /// Builder: attach usage.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// The concatenated text blocks (no thinking, no tool payloads).
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let Block::Text { text } = block {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// What a reader is shown of the message as text: its text blocks and
    /// the content of its tool results, in order (no thinking, no tool call
    /// inputs). A tool message's text is its results'.
    pub fn readable_text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            let part = match block {
                Block::Text { text } => text,
                Block::ToolResult { content, .. } => content,
                _ => continue,
            };
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(part);
        }
        out
    }

    /// Ids of the tool calls this message makes, in order.
    pub fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    /// Ids of the tool calls this message answers, in order.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
    }

    /// True when the message carries at least one tool result.
    pub fn has_tool_results(&self) -> bool {
        self.tool_result_ids().next().is_some()
    }

    /// True when the message makes at least one tool call.
    pub fn has_tool_uses(&self) -> bool {
        self.tool_use_ids().next().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_reasoning_and_source_round_trip_and_stay_optional() {
        let mut m = Message::assistant("done").with_usage(Usage {
            input_tokens: 10,
            output_tokens: 7,
            reasoning_tokens: 3,
            source: UsageSource::Transcript,
            ..Usage::default()
        });
        m.timestamp = Some("2026-05-01T10:00:00.123Z".parse().unwrap());
        let line = serde_json::to_string(&m).unwrap();
        assert!(
            line.contains(r#""timestamp":"2026-05-01T10:00:00.123Z""#),
            "{line}"
        );
        assert!(line.contains(r#""reasoning_tokens":3"#), "{line}");
        assert!(line.contains(r#""source":"transcript""#), "{line}");
        let back: Message = serde_json::from_str(&line).unwrap();
        assert_eq!(back, m);
        assert!(back.extra.is_empty());

        // A message written before these fields existed reads with defaults,
        // and a default usage writes exactly the four counters it always did.
        let old = r#"{"role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}"#;
        let parsed: Message = serde_json::from_str(old).unwrap();
        assert_eq!(parsed.timestamp, None);
        let usage = parsed.usage.unwrap();
        assert_eq!(
            (usage.reasoning_tokens, usage.source),
            (0, UsageSource::Provider)
        );
        assert_eq!(serde_json::to_string(&parsed).unwrap(), old);
    }

    #[test]
    fn a_sum_is_as_trustworthy_as_its_weakest_part() {
        let mut total = Usage {
            output_tokens: 5,
            reasoning_tokens: 2,
            ..Usage::default()
        };
        total.add(&Usage {
            output_tokens: 1,
            reasoning_tokens: 1,
            source: UsageSource::Estimate,
            ..Usage::default()
        });
        assert_eq!(total.reasoning_tokens, 3);
        assert_eq!(total.source, UsageSource::Estimate);
        assert_eq!(total.total(), 6);
    }
}
