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
mod de;
pub mod openai;

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
    }

    /// All tokens, of every kind.
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
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    /// A message with the given role and blocks and nothing else.
    pub fn new(role: Role, content: Vec<Block>) -> Self {
        Message {
            role,
            content,
            usage: None,
            provider_id: None,
            model: None,
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
