//! Conversion between [`Message`] and the Anthropic messages shape.
//!
//! This module owns the Anthropic mapping of a whole request's conversation,
//! the top-level `system` prompt plus `messages` ([`from_anthropic`],
//! [`to_anthropic`], [`to_anthropic_lossy`]), and of the response `usage`
//! object ([`usage_from_anthropic`], [`usage_to_anthropic`]). The error type,
//! the loss report and the vendor-data layout are shared with
//! [`super::openai`] and re-exported here.
//!
//! # The lossless contract
//!
//! Wire values are compared as [`serde_json::Value`]s (object key order is not
//! significant), neutral messages with `==`.
//!
//! 1. **Wire → neutral → wire is the identity.** For every `(system, messages)`
//!    that [`from_anthropic`] accepts, [`to_anthropic`] of the result is
//!    `Ok(AnthropicRequestMessages { system, messages })`. [`from_anthropic`]
//!    accepts every `system` that is a string, an array or null, and every
//!    list of `user`/`assistant` message objects whose `content` is a string,
//!    an array or null (or absent); anything else is a [`ConversionError`].
//!    Blocks are never dropped: a block the neutral model does not know
//!    (`redacted_thinking`, `document`, server tools, an image from a URL, ...)
//!    is a [`Block::Unknown`] kept verbatim, and fields the neutral model has
//!    no place for (`cache_control`, `citations`, ...) are kept as vendor data.
//! 2. **Neutral → wire → neutral is the identity on what Anthropic can
//!    express.** [`to_anthropic`] is strict: it returns `Ok(r)` only when
//!    `from_anthropic(r.system.as_ref(), &r.messages)` gives back its input
//!    exactly, and otherwise [`ConversionError::Lossy`] listing what cannot be
//!    carried. [`to_anthropic_lossy`] converts anyway and returns the same list
//!    as a report (empty when exact). As in [`super::openai`], each converted
//!    message is also read back and compared, so every message that would not
//!    survive is reported at least once.
//!
//! # Mapping
//!
//! | Anthropic | neutral |
//! |---|---|
//! | top-level `system` (string, text blocks, or null) | a first [`Role::System`] message |
//! | role `assistant` | [`Role::Assistant`] |
//! | role `user`, content a non-empty array of only `tool_result` blocks | [`Role::Tool`] |
//! | role `user`, anything else (text, mixed results and text, ...) | [`Role::User`] |
//! | `content`: string | one [`Block::Text`] |
//! | `text` / `thinking {thinking, signature}` / `tool_use` | [`Block::Text`] / [`Block::Thinking`] / [`Block::ToolUse`] |
//! | `tool_result {tool_use_id, content, is_error}` | [`Block::ToolResult`] (absent `is_error` is `false`) |
//! | `image` with a `base64` source | [`Block::Image`] |
//! | any other block, or a known type with missing or mistyped fields | [`Block::Unknown`], verbatim |
//!
//! A `tool_result` whose `content` is an array (text and images) becomes the
//! texts joined with `"\n"`; the verbatim block, images included, is kept as
//! vendor data. Absent content is the empty string.
//!
//! # Vendor data
//!
//! `extra["anthropic"]` has the layout documented in [`super::openai`]:
//! `content` records a non-canonical content form (canonical: a string for
//! exactly one plain text block, an array otherwise, `[]` when empty),
//! `fields` the message fields other than `role` and `content` (e.g. `id`,
//! `type`, `stop_reason` of a response pasted into the list), `blocks` the
//! verbatim form of each block its canonical rendering does not reproduce
//! (`cache_control`, `citations`, an explicit `"is_error": false`, array
//! tool-result content, a `null` signature, ...). `role` is not used.
//!
//! # What Anthropic cannot carry
//!
//! Each is a [`LossKind`]: an error from [`to_anthropic`], a report entry from
//! [`to_anthropic_lossy`] (which does what the entry says).
//!
//! - a [`Role::System`] message that is not first, or a second one
//!   ([`LossKind::SystemPlacement`]: its blocks are appended to `system`);
//! - a [`Role::User`] message made only of tool results, which reads back as
//!   [`Role::Tool`], and a [`Role::Tool`] message that is empty or holds other
//!   blocks, which reads back as [`Role::User`] ([`LossKind::RoleChanged`]:
//!   sent as a user message);
//! - `usage`, `provider_id` and `model` ([`LossKind::Metadata`]: dropped; a
//!   request message has no such fields, see [`usage_from_anthropic`]);
//! - other keys of [`Message::extra`], including OpenAI vendor data
//!   ([`LossKind::ExtraField`], [`LossKind::ForeignVendorData`]: dropped);
//! - anything else that would not read back identically, e.g. a
//!   [`Block::Unknown`] holding a well-formed `text` block
//!   ([`LossKind::NotReproduced`]).
//!
//! Thinking signatures, block order, mixed user messages and tool-result
//! error flags are all carried.

use serde_json::{json, Map, Value};

use super::convert::{
    content_from_wire, content_to_wire, counter, prepare, verify, ContentCodec, ContentForm,
    VendorData,
};
pub use super::convert::{ConversionError, Loss, LossKind, Lossy};
use super::{Block, Message, Role, Usage};

/// The key of Anthropic vendor data in [`Message::extra`].
pub const VENDOR_KEY: &str = super::convert::ANTHROPIC_KEY;

const PROVIDER: &str = "Anthropic";

const CODEC: ContentCodec = ContentCodec {
    project: project_block,
    emit: emit_content,
    empty: ContentForm::Array,
};

/// The conversation part of an Anthropic messages request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnthropicRequestMessages {
    /// The top-level `system` value, if any.
    pub system: Option<Value>,
    /// The `messages` array.
    pub messages: Vec<Value>,
}

/// Converts a request's `system` value and `messages` to neutral messages.
///
/// The system prompt, when given, becomes the first message. See the module
/// docs for the mapping and the lossless contract.
pub fn from_anthropic(
    system: Option<&Value>,
    messages: &[Value],
) -> Result<Vec<Message>, ConversionError> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = system {
        out.push(system_from_anthropic(system)?);
    }
    for (index, wire) in messages.iter().enumerate() {
        out.push(message_from_anthropic(index, wire)?);
    }
    Ok(out)
}

fn system_from_anthropic(system: &Value) -> Result<Message, ConversionError> {
    let mut blocks = Vec::new();
    let mut vendor = VendorData::default();
    content_from_wire(Some(system), &mut blocks, &mut vendor, &CODEC).map_err(|reason| {
        ConversionError::InvalidSystem {
            reason: reason.replace("`content`", "`system`"),
        }
    })?;
    let mut msg = Message::new(Role::System, blocks);
    vendor.store(&mut msg.extra, VENDOR_KEY);
    Ok(msg)
}

fn message_from_anthropic(index: usize, wire: &Value) -> Result<Message, ConversionError> {
    let invalid = |reason: &str| ConversionError::InvalidMessage {
        index,
        reason: reason.to_owned(),
    };
    let obj = wire
        .as_object()
        .ok_or_else(|| invalid("not a JSON object"))?;
    let role = match obj.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => {
            return Err(ConversionError::UnsupportedRole {
                index,
                role: other.to_owned(),
            })
        }
        None => return Err(invalid("no string `role`")),
    };
    let mut blocks = Vec::new();
    let mut vendor = VendorData::default();
    content_from_wire(obj.get("content"), &mut blocks, &mut vendor, &CODEC).map_err(invalid)?;
    for (key, value) in obj {
        if key != "role" && key != "content" {
            vendor.fields.insert(key.clone(), value.clone());
        }
    }
    let role = if role == Role::User && only_tool_results(&blocks) {
        Role::Tool
    } else {
        role
    };
    let mut msg = Message::new(role, blocks);
    vendor.store(&mut msg.extra, VENDOR_KEY);
    Ok(msg)
}

fn only_tool_results(blocks: &[Block]) -> bool {
    !blocks.is_empty()
        && blocks
            .iter()
            .all(|block| matches!(block, Block::ToolResult { .. }))
}

/// Converts neutral messages to an Anthropic request's `system` and
/// `messages`, exactly.
///
/// Returns [`ConversionError::Lossy`] when [`from_anthropic`] would not give
/// the input back; [`to_anthropic_lossy`] converts anyway.
pub fn to_anthropic(messages: &[Message]) -> Result<AnthropicRequestMessages, ConversionError> {
    to_anthropic_lossy(messages).exact(PROVIDER)
}

/// Converts neutral messages to an Anthropic request's `system` and
/// `messages`, reporting what the shape cannot carry instead of failing (see
/// the module docs for what each [`LossKind`] does to the output).
pub fn to_anthropic_lossy(messages: &[Message]) -> Lossy<AnthropicRequestMessages> {
    let mut out = AnthropicRequestMessages::default();
    let mut losses = Vec::new();
    for (message, msg) in messages.iter().enumerate() {
        let before = losses.len();
        let vendor = prepare(message, msg, VENDOR_KEY, &mut losses);
        let blocks: Vec<(usize, &Block)> = msg.content.iter().enumerate().collect();
        let content = content_to_wire(message, &blocks, &vendor, &CODEC, &mut losses);
        if msg.role == Role::System {
            // `system` cannot be absent-but-present: render that as canonical.
            let value = content.unwrap_or_else(|| Value::Array(Vec::new()));
            let read_back = system_from_anthropic(&value).map(|m| vec![m]);
            out.system = match out.system.take() {
                None if out.messages.is_empty() => Some(value),
                previous => {
                    losses.push(Loss {
                        message,
                        block: None,
                        kind: LossKind::SystemPlacement,
                    });
                    Some(merge_system(previous, value))
                }
            };
            verify(&mut losses, before, message, msg, read_back);
            continue;
        }
        let reads_as_tool = only_tool_results(&msg.content);
        let changed_to = match msg.role {
            Role::Tool if !reads_as_tool => Some(Role::User),
            Role::User if reads_as_tool => Some(Role::Tool),
            _ => None,
        };
        if let Some(to) = changed_to {
            losses.push(Loss {
                message,
                block: None,
                kind: LossKind::RoleChanged { from: msg.role, to },
            });
        }
        let mut obj = Map::new();
        let role = match msg.role {
            Role::Assistant => "assistant",
            Role::User | Role::Tool | Role::System => "user",
        };
        obj.insert("role".into(), role.into());
        if let Some(content) = content {
            obj.insert("content".into(), content);
        }
        for (key, value) in &vendor.fields {
            if key != "role" && key != "content" {
                obj.insert(key.clone(), value.clone());
            }
        }
        let wire = Value::Object(obj);
        let read_back = message_from_anthropic(out.messages.len(), &wire).map(|m| vec![m]);
        verify(&mut losses, before, message, msg, read_back);
        out.messages.push(wire);
    }
    Lossy { value: out, losses }
}

/// Appends the blocks of `next` to those of `previous` (both `system` values).
fn merge_system(previous: Option<Value>, next: Value) -> Value {
    let blocks = |value: Value| match value {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks,
        Value::Null => Vec::new(),
        other => vec![other],
    };
    let mut merged = previous.map(blocks).unwrap_or_default();
    merged.extend(blocks(next));
    Value::Array(merged)
}

/// A content block as a neutral block; see the mapping in the module docs.
fn project_block(wire: &Value) -> Block {
    let str_field = |key: &str| wire.get(key).and_then(Value::as_str).map(str::to_owned);
    let projected = match wire.get("type").and_then(Value::as_str) {
        Some("text") => str_field("text").map(|text| Block::Text { text }),
        Some("thinking") => str_field("thinking").map(|text| Block::Thinking {
            text,
            signature: str_field("signature"),
        }),
        Some("tool_use") => match (str_field("id"), str_field("name"), wire.get("input")) {
            (Some(id), Some(name), Some(input)) => Some(Block::ToolUse {
                id,
                name,
                input: input.clone(),
            }),
            _ => None,
        },
        Some("tool_result") => str_field("tool_use_id").map(|tool_use_id| Block::ToolResult {
            tool_use_id,
            content: tool_result_text(wire.get("content")),
            is_error: wire.get("is_error").and_then(Value::as_bool) == Some(true),
        }),
        Some("image") => {
            let source = wire.get("source");
            let source_str = |key: &str| source.and_then(|s| s.get(key)).and_then(Value::as_str);
            match (
                source_str("type"),
                source_str("media_type"),
                source_str("data"),
            ) {
                (Some("base64"), Some(media_type), Some(data)) => Some(Block::Image {
                    media_type: media_type.to_owned(),
                    data: data.to_owned(),
                }),
                _ => None,
            }
        }
        _ => None,
    };
    projected.unwrap_or_else(|| Block::Unknown(wire.clone()))
}

/// The text of a `tool_result`'s `content`: a string as is, an array's text
/// blocks joined with `"\n"`, anything else empty.
fn tool_result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The canonical rendering of a block.
fn emit_block(block: &Block) -> Value {
    match block {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::Thinking { text, signature } => {
            let mut wire = json!({"type": "thinking", "thinking": text});
            if let (Some(signature), Value::Object(obj)) = (signature, &mut wire) {
                obj.insert("signature".into(), signature.as_str().into());
            }
            wire
        }
        Block::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut wire =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if let (true, Value::Object(obj)) = (*is_error, &mut wire) {
                obj.insert("is_error".into(), true.into());
            }
            wire
        }
        Block::Image { media_type, data } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
        Block::Unknown(wire) => wire.clone(),
    }
}

fn emit_content(block: &Block) -> Option<Value> {
    Some(emit_block(block))
}

/// Reads a messages-API response `usage` object: the four counters map
/// one-to-one to [`Usage`]'s fields; absent or null counters are zero. The
/// other fields (`cache_creation` by TTL, `server_tool_use`, `service_tier`)
/// are not kept: `usage_to_anthropic(&usage_from_anthropic(&v)?)` gives back
/// `v` exactly when `v` has only the four counters.
pub fn usage_from_anthropic(usage: &Value) -> Result<Usage, ConversionError> {
    let obj = usage
        .as_object()
        .ok_or_else(|| ConversionError::InvalidUsage {
            provider: PROVIDER,
            reason: "not a JSON object".into(),
        })?;
    let cache_creation_input_tokens = counter(obj, "cache_creation_input_tokens", PROVIDER)?;
    // The TTL split of the cache writes, when the API reports it.
    let one_hour = match obj.get("cache_creation").and_then(Value::as_object) {
        Some(split) => counter(split, "ephemeral_1h_input_tokens", PROVIDER)?,
        None => 0,
    };
    Ok(Usage {
        input_tokens: counter(obj, "input_tokens", PROVIDER)?,
        output_tokens: counter(obj, "output_tokens", PROVIDER)?,
        cache_read_input_tokens: counter(obj, "cache_read_input_tokens", PROVIDER)?,
        cache_creation_input_tokens,
        cache_creation_1h_input_tokens: one_hour.min(cache_creation_input_tokens),
        ..Usage::default()
    })
}

/// Writes a messages-API `usage` object with the four counters; the inverse
/// of [`usage_from_anthropic`] (every [`Usage`] is expressible).
pub fn usage_to_anthropic(usage: &Usage) -> Value {
    let mut v = json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
    });
    if usage.cache_creation_1h_input_tokens > 0 {
        let one_hour = usage.cache_creation_1h_input_tokens;
        v["cache_creation"] = json!({
            "ephemeral_5m_input_tokens": usage.cache_creation_input_tokens.saturating_sub(one_hour),
            "ephemeral_1h_input_tokens": one_hour,
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::message::openai::tests::{ident, json_value, text};

    /// Asserts wire → neutral → wire is the identity and returns the neutral form.
    fn round_trip(system: Option<Value>, messages: Vec<Value>) -> Vec<Message> {
        let neutral = from_anthropic(system.as_ref(), &messages).expect("from_anthropic");
        assert_eq!(
            to_anthropic(&neutral).expect("to_anthropic"),
            AnthropicRequestMessages { system, messages }
        );
        neutral
    }

    /// `(message, block, kind)` of a loss.
    type Found = (usize, Option<usize>, LossKind);

    fn loss_kinds(messages: &[Message]) -> Vec<Found> {
        to_anthropic_lossy(messages)
            .losses
            .into_iter()
            .map(|loss| (loss.message, loss.block, loss.kind))
            .collect()
    }

    fn vendor(msg: &Message) -> &Value {
        msg.extra.get(VENDOR_KEY).expect("anthropic vendor data")
    }

    #[test]
    fn thinking_tool_use_and_error_results() {
        let messages = vec![
            json!({"role": "user", "content": "What is in /tmp?"}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I should list it.", "signature": "EqQBCgIYAhIM"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/tmp"}},
                {"type": "tool_use", "id": "toolu_2", "name": "du", "input": {"path": "/tmp", "depth": 1.5}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\nb.txt"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "permission denied", "is_error": true},
            ]}),
        ];
        let neutral = round_trip(Some(json!("You are a shell assistant.")), messages);
        assert_eq!(neutral[0], Message::system("You are a shell assistant."));
        assert_eq!(neutral[1], Message::user("What is in /tmp?"));
        assert_eq!(
            neutral[2].content[0],
            Block::Thinking {
                text: "I should list it.".into(),
                signature: Some("EqQBCgIYAhIM".into()),
            }
        );
        assert!(neutral[2].extra.is_empty());
        assert_eq!(
            neutral[3],
            Message::new(
                Role::Tool,
                vec![
                    Block::ToolResult {
                        tool_use_id: "toolu_1".into(),
                        content: "a.txt\nb.txt".into(),
                        is_error: false,
                    },
                    Block::ToolResult {
                        tool_use_id: "toolu_2".into(),
                        content: "permission denied".into(),
                        is_error: true,
                    },
                ],
            )
        );
    }

    #[test]
    fn system_blocks_and_cache_control() {
        let system = json!([
            {"type": "text", "text": "You are helpful."},
            {"type": "text", "text": "Long context.", "cache_control": {"type": "ephemeral"}},
        ]);
        let neutral = round_trip(
            Some(system.clone()),
            vec![json!({"role": "user", "content": "hi"})],
        );
        assert_eq!(neutral[0].role, Role::System);
        assert_eq!(neutral[0].text_content(), "You are helpful.\nLong context.");
        assert_eq!(vendor(&neutral[0]), &json!({"blocks": {"1": system[1]}}));

        let single = json!([{"type": "text", "text": "Only one."}]);
        let neutral = round_trip(Some(single), vec![]);
        assert_eq!(vendor(&neutral[0]), &json!({"content": "array"}));
        round_trip(Some(Value::Null), vec![]);
        round_trip(None, vec![]);
    }

    #[test]
    fn mixed_user_messages_stay_user() {
        let messages = vec![json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"},
            {"type": "text", "text": "Now summarise."},
        ]})];
        let neutral = round_trip(None, messages);
        assert_eq!(neutral[0].role, Role::User);
        assert!(neutral[0].has_tool_results());
    }

    #[test]
    fn images_unknown_blocks_and_rich_tool_results() {
        let messages = vec![
            json!({"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}},
                {"type": "text", "text": "Compare them."},
            ]}),
            json!({"role": "assistant", "content": [
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "cats"}},
                {"type": "tool_use", "id": "toolu_3", "name": "screenshot", "input": {}},
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_3", "content": [
                    {"type": "text", "text": "Captured."},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}},
                ]},
            ]}),
        ];
        let neutral = round_trip(None, messages.clone());
        assert_eq!(
            neutral[0].content[0],
            Block::Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            }
        );
        assert_eq!(
            neutral[0].content[1],
            Block::Unknown(messages[0]["content"][1].clone())
        );
        assert_eq!(
            neutral[0].content[2],
            Block::Unknown(messages[0]["content"][2].clone())
        );
        assert_eq!(
            neutral[1].content[0],
            Block::Unknown(messages[1]["content"][0].clone())
        );
        assert_eq!(
            neutral[1].content[1],
            Block::Unknown(messages[1]["content"][1].clone())
        );
        assert_eq!(neutral[2].role, Role::Tool);
        assert_eq!(
            neutral[2].content,
            vec![Block::ToolResult {
                tool_use_id: "toolu_3".into(),
                content: "Captured.".into(),
                is_error: false,
            }]
        );
        // The image inside the result is kept, verbatim, as vendor data.
        assert_eq!(
            vendor(&neutral[2]),
            &json!({"blocks": {"0": messages[2]["content"][0]}})
        );
    }

    #[test]
    fn string_and_array_content_and_response_fields() {
        let messages = vec![
            json!({"role": "user", "content": "plain"}),
            json!({"role": "user", "content": [{"type": "text", "text": "one block"}]}),
            json!({"role": "user", "content": []}),
            json!({
                "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
                "content": [{"type": "text", "text": "hello"}],
                "stop_reason": "end_turn", "stop_sequence": null,
            }),
        ];
        let neutral = round_trip(None, messages);
        assert_eq!(neutral[0], Message::user("plain"));
        assert_eq!(neutral[1].content, Message::user("one block").content);
        assert_eq!(vendor(&neutral[1]), &json!({"content": "array"}));
        assert_eq!(neutral[2], Message::new(Role::User, vec![]));
        // Response-only fields stay vendor fields: they are not neutral metadata,
        // because request messages cannot carry them.
        assert_eq!(neutral[3].provider_id, None);
        assert_eq!(vendor(&neutral[3])["fields"]["id"], "msg_01");
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert_eq!(
            from_anthropic(None, &[json!({"role": "system", "content": "x"})]),
            Err(ConversionError::UnsupportedRole {
                index: 0,
                role: "system".into(),
            })
        );
        assert!(matches!(
            from_anthropic(None, &[json!({"role": "user", "content": 1})]),
            Err(ConversionError::InvalidMessage { index: 0, .. })
        ));
        assert!(matches!(
            from_anthropic(None, &[json!(["not", "an", "object"])]),
            Err(ConversionError::InvalidMessage { index: 0, .. })
        ));
        assert!(matches!(
            from_anthropic(Some(&json!({"type": "text"})), &[]),
            Err(ConversionError::InvalidSystem { .. })
        ));
    }

    #[test]
    fn what_anthropic_cannot_carry_is_reported() {
        let result = Block::ToolResult {
            tool_use_id: "t".into(),
            content: "ok".into(),
            is_error: false,
        };
        let cases: Vec<(Vec<Message>, Vec<Found>)> = vec![
            (
                vec![Message::user("hi"), Message::system("late")],
                vec![(1, None, LossKind::SystemPlacement)],
            ),
            (
                vec![Message::system("a"), Message::system("b")],
                vec![(1, None, LossKind::SystemPlacement)],
            ),
            (
                vec![Message::new(Role::User, vec![result])],
                vec![(
                    0,
                    None,
                    LossKind::RoleChanged {
                        from: Role::User,
                        to: Role::Tool,
                    },
                )],
            ),
            (
                vec![Message::new(
                    Role::Tool,
                    vec![Block::Text { text: "x".into() }],
                )],
                vec![(
                    0,
                    None,
                    LossKind::RoleChanged {
                        from: Role::Tool,
                        to: Role::User,
                    },
                )],
            ),
            (
                vec![Message {
                    model: Some("gpt-x".into()),
                    provider_id: Some("chatcmpl-1".into()),
                    ..Message::assistant("x")
                }],
                vec![
                    (
                        0,
                        None,
                        LossKind::Metadata {
                            field: "provider_id",
                        },
                    ),
                    (0, None, LossKind::Metadata { field: "model" }),
                ],
            ),
            (
                vec![Message::new(
                    Role::Assistant,
                    vec![Block::Unknown(json!({"type": "thinking", "thinking": "t"}))],
                )],
                vec![(0, None, LossKind::NotReproduced)],
            ),
        ];
        for (messages, expected) in cases {
            assert_eq!(loss_kinds(&messages), expected, "{messages:?}");
            assert!(to_anthropic(&messages).is_err());
        }
    }

    #[test]
    fn lossy_system_placement_merges_into_system() {
        let lossy = to_anthropic_lossy(&[
            Message::system("first"),
            Message::user("hi"),
            Message::system("later"),
        ]);
        assert_eq!(
            lossy.value,
            AnthropicRequestMessages {
                system: Some(json!([
                    {"type": "text", "text": "first"},
                    {"type": "text", "text": "later"},
                ])),
                messages: vec![json!({"role": "user", "content": "hi"})],
            }
        );
    }

    #[test]
    fn openai_vendor_data_is_reported_as_foreign() {
        let neutral = crate::message::openai::from_openai(&[json!({
            "role": "assistant", "content": "hi", "refusal": null})])
        .expect("from_openai");
        assert_eq!(
            loss_kinds(&neutral),
            vec![(
                0,
                None,
                LossKind::ForeignVendorData {
                    path: "openai.fields.refusal".into()
                }
            )]
        );
    }

    #[test]
    fn anthropic_conversation_to_openai_reports_signatures_and_error_flags() {
        let neutral = from_anthropic(
            Some(&json!("sys")),
            &[
                json!({"role": "user", "content": "go"}),
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig"},
                    {"type": "tool_use", "id": "t1", "name": "run", "input": {"x": 1}},
                ]}),
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": true},
                ]}),
            ],
        )
        .expect("from_anthropic");
        let lossy = crate::message::openai::to_openai_lossy(&neutral);
        let kinds: Vec<_> = lossy.losses.iter().map(|l| l.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![LossKind::ThinkingSignature, LossKind::ToolResultError]
        );
        assert_eq!(
            lossy.value[2],
            json!({"role": "assistant", "content": null, "reasoning_content": "plan",
                   "tool_calls": [{"id": "t1", "type": "function",
                                   "function": {"name": "run", "arguments": "{\"x\":1}"}}]})
        );
    }

    #[test]
    fn usage_conversion() {
        let wire = json!({
            "input_tokens": 12,
            "output_tokens": 34,
            "cache_creation_input_tokens": 56,
            "cache_read_input_tokens": 78,
        });
        let usage = usage_from_anthropic(&wire).expect("usage");
        assert_eq!(
            usage,
            Usage {
                input_tokens: 12,
                output_tokens: 34,
                cache_creation_input_tokens: 56,
                cache_read_input_tokens: 78,
                ..Default::default()
            }
        );
        assert_eq!(usage_to_anthropic(&usage), wire);
        assert_eq!(
            usage_from_anthropic(&json!({"input_tokens": 3, "cache_read_input_tokens": null})),
            Ok(Usage {
                input_tokens: 3,
                ..Usage::default()
            })
        );
        assert!(usage_from_anthropic(&json!({"input_tokens": "3"})).is_err());
        assert!(usage_from_anthropic(&json!([])).is_err());
    }

    // ---- property tests --------------------------------------------------

    fn wire_block() -> impl Strategy<Value = Value> {
        let cache = json!({"type": "ephemeral"});
        let result_content = prop_oneof![
            Just(None),
            text().prop_map(|t| Some(json!(t))),
            text().prop_map(|t| Some(json!([{"type": "text", "text": t}]))),
            text().prop_map(|t| Some(json!([
                {"type": "text", "text": t},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
            ]))),
        ];
        let is_error = prop::option::of(any::<bool>());
        prop_oneof![
            text().prop_map(|t| json!({"type": "text", "text": t})),
            text().prop_map(move |t| json!({"type": "text", "text": t, "cache_control": cache})),
            text().prop_map(
                |t| json!({"type": "text", "text": t, "citations": [{"type": "char_location"}]})
            ),
            (text(), text())
                .prop_map(|(t, s)| json!({"type": "thinking", "thinking": t, "signature": s})),
            text().prop_map(|t| json!({"type": "thinking", "thinking": t})),
            text().prop_map(|t| json!({"type": "thinking", "thinking": t, "signature": null})),
            text().prop_map(|d| json!({"type": "redacted_thinking", "data": d})),
            (ident(), ident(), json_value(true)).prop_map(|(i, n, v)| json!(
                {"type": "tool_use", "id": i, "name": n, "input": v})),
            (ident(), result_content, is_error).prop_map(|(id, content, is_error)| {
                let mut wire = json!({"type": "tool_result", "tool_use_id": id});
                if let Value::Object(obj) = &mut wire {
                    if let Some(content) = content {
                        obj.insert("content".into(), content);
                    }
                    if let Some(is_error) = is_error {
                        obj.insert("is_error".into(), is_error.into());
                    }
                }
                wire
            }),
            (text(), text()).prop_map(|(m, d)| json!(
                {"type": "image", "source": {"type": "base64", "media_type": m, "data": d}})),
            Just(
                json!({"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}})
            ),
            Just(json!({"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}})),
            Just(json!({"type": "tool_use", "id": "no name"})),
            Just(json!(7)),
        ]
    }

    fn wire_content() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(Value::Null)),
            3 => text().prop_map(|t| Some(Value::String(t))),
            6 => prop::collection::vec(wire_block(), 0..4).prop_map(|b| Some(Value::Array(b))),
        ]
    }

    fn wire_message() -> impl Strategy<Value = Value> {
        let role = prop::sample::select(vec!["user", "assistant"]);
        (role, wire_content(), any::<bool>()).prop_map(|(role, content, with_id)| {
            let mut obj = Map::new();
            obj.insert("role".into(), role.into());
            if let Some(content) = content {
                obj.insert("content".into(), content);
            }
            if with_id {
                obj.insert("id".into(), "msg_1".into());
            }
            Value::Object(obj)
        })
    }

    fn wire_system() -> impl Strategy<Value = Option<Value>> {
        let block = prop_oneof![
            text().prop_map(|t| json!({"type": "text", "text": t})),
            text().prop_map(
                |t| json!({"type": "text", "text": t, "cache_control": {"type": "ephemeral"}})
            ),
        ];
        prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            text().prop_map(|t| Some(json!(t))),
            prop::collection::vec(block, 0..3).prop_map(|b| Some(Value::Array(b))),
        ]
    }

    fn block() -> impl Strategy<Value = Block> {
        prop_oneof![
            text().prop_map(|text| Block::Text { text }),
            (text(), prop::option::of(text()))
                .prop_map(|(text, signature)| Block::Thinking { text, signature }),
            (ident(), ident(), json_value(true)).prop_map(|(id, name, input)| Block::ToolUse {
                id,
                name,
                input
            }),
            (ident(), text(), any::<bool>()).prop_map(|(tool_use_id, content, is_error)| {
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                }
            }),
            (text(), text()).prop_map(|(media_type, data)| Block::Image { media_type, data }),
            prop::sample::select(vec![
                json!({"type": "redacted_thinking", "data": "opaque"}),
                json!({"type": "document", "source": {"type": "text", "data": "d"}}),
                json!("bare"),
            ])
            .prop_map(Block::Unknown),
        ]
    }

    /// Neutral conversations Anthropic can express by construction.
    fn expressible() -> impl Strategy<Value = Vec<Message>> {
        let system = prop::option::of(
            prop::collection::vec(block(), 0..3).prop_map(|b| Message::new(Role::System, b)),
        );
        let result =
            (ident(), text(), any::<bool>()).prop_map(|(tool_use_id, content, is_error)| {
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                }
            });
        let message = prop_oneof![
            prop::collection::vec(block(), 0..4).prop_map(|b| Message::new(Role::Assistant, b)),
            prop::collection::vec(block(), 0..4).prop_map(|mut b| {
                if only_tool_results(&b) {
                    b.push(Block::Text { text: "and".into() });
                }
                Message::new(Role::User, b)
            }),
            prop::collection::vec(result, 1..3).prop_map(|b| Message::new(Role::Tool, b)),
        ];
        (system, prop::collection::vec(message, 0..5))
            .prop_map(|(system, messages)| system.into_iter().chain(messages).collect())
    }

    fn neutral_message() -> impl Strategy<Value = Message> {
        let role =
            prop::sample::select(vec![Role::System, Role::User, Role::Assistant, Role::Tool]);
        let unknown = prop::sample::select(vec![
            json!({"type": "text", "text": "looks known"}),
            json!({"type": "redacted_thinking", "data": "x"}),
        ])
        .prop_map(Block::Unknown);
        let blocks = prop::collection::vec(prop_oneof![4 => block(), 1 => unknown], 0..4);
        let model = prop_oneof![9 => Just(None), 1 => Just(Some("m".to_owned()))];
        let extra = prop_oneof![
            8 => Just(None),
            1 => Just(Some(("openai", json!({"fields": {"name": "x"}})))),
            1 => Just(Some(("anthropic", json!({"content": "array"})))),
        ];
        (role, blocks, model, extra).prop_map(|(role, content, model, extra)| {
            let mut msg = Message::new(role, content);
            msg.model = model;
            if let Some((key, value)) = extra {
                msg.extra.insert(key.into(), value);
            }
            msg
        })
    }

    proptest! {
        #[test]
        fn wire_to_neutral_to_wire_is_identity(
            system in wire_system(),
            messages in prop::collection::vec(wire_message(), 0..5),
        ) {
            let neutral = from_anthropic(system.as_ref(), &messages).expect("generated wire is accepted");
            prop_assert_eq!(to_anthropic(&neutral), Ok(AnthropicRequestMessages { system, messages }));
        }

        #[test]
        fn expressible_neutral_round_trips(messages in expressible()) {
            let wire = to_anthropic(&messages);
            prop_assert!(wire.is_ok(), "{:?}", wire);
            let wire = wire.unwrap_or_default();
            prop_assert_eq!(from_anthropic(wire.system.as_ref(), &wire.messages), Ok(messages));
        }

        #[test]
        fn report_is_empty_exactly_when_neutral_round_trips(
            messages in prop::collection::vec(neutral_message(), 0..5),
        ) {
            let lossy = to_anthropic_lossy(&messages);
            let back = from_anthropic(lossy.value.system.as_ref(), &lossy.value.messages)
                .expect("own output is accepted");
            prop_assert_eq!(lossy.is_exact(), back == messages, "{:?}", lossy.losses);
            prop_assert_eq!(to_anthropic(&messages).is_ok(), lossy.is_exact());
        }
    }
}
