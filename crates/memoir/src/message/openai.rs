//! Conversion between [`Message`] and the OpenAI chat-completions message shape.
//!
//! This module owns the OpenAI mapping ([`from_openai`], [`to_openai`],
//! [`to_openai_lossy`], [`usage_from_openai`], [`usage_to_openai`]) and
//! documents the layout of the vendor data it and [`super::anthropic`] keep in
//! [`Message::extra`]; the machinery both share (errors, the loss report,
//! vendor data, the emit-then-verify loop) is [`super::convert`].
//!
//! # The lossless contract
//!
//! Wire values are compared as [`serde_json::Value`]s (object key order is not
//! significant), neutral messages with `==`.
//!
//! 1. **Wire → neutral → wire is the identity.** For every list `w` that
//!    [`from_openai`] accepts, `to_openai(&from_openai(&w)?)` is `Ok(w)`.
//!    [`from_openai`] accepts every list of message objects whose roles are
//!    `system`, `developer`, `user`, `assistant` or `tool`, whose `content` is a
//!    string, an array or null (or absent), whose tool calls have an `id` and a
//!    `function` (or `custom`) name, and whose tool messages have a
//!    `tool_call_id`; anything else is a [`ConversionError`], never a silent
//!    drop. Whatever the neutral model has no place for is kept as vendor data
//!    (below).
//! 2. **Neutral → wire → neutral is the identity on what OpenAI can express.**
//!    [`to_openai`] is strict: it returns `Ok(w)` only when `from_openai(&w)`
//!    gives back its input exactly, and otherwise
//!    [`ConversionError::Lossy`] listing what cannot be carried.
//!    [`to_openai_lossy`] converts anyway and returns the same list as a
//!    report; an empty report means the conversion was exact. Every message
//!    that would not survive is reported at least once: besides the specific
//!    checks below, each converted message is read back and compared, and a
//!    difference nothing else explains is reported as
//!    [`LossKind::NotReproduced`].
//!
//! # Mapping
//!
//! | OpenAI | neutral |
//! |---|---|
//! | role `system` / `developer` / `user` / `assistant` | [`Role::System`] (vendor `role: "developer"` for the latter) / [`Role::User`] / [`Role::Assistant`] |
//! | a run of consecutive `role: "tool"` messages | one [`Role::Tool`] message with one [`Block::ToolResult`] per wire message (`is_error: false`) |
//! | `reasoning_content` (a string) | a [`Block::Thinking`] without signature, first |
//! | `content`: string | one [`Block::Text`] |
//! | `content` parts `text` / `image_url` with a base64 `data:` URL / anything else | [`Block::Text`] / [`Block::Image`] / [`Block::Unknown`] (verbatim) |
//! | `tool_calls[]` of type `function` | [`Block::ToolUse`], last; `input` is `arguments` parsed as JSON |
//! | `tool_calls[]` of type `custom` | [`Block::ToolUse`] whose `input` is the free-form input string |
//!
//! Tool calls' `arguments` are a JSON *string*, kept exactly: when it is valid
//! JSON, `input` is the parsed value and, if the string is not the compact
//! serialization of that value (spaces, escapes, number spelling), the verbatim
//! tool call is kept as vendor data. When it is **not valid JSON**, `input` is
//! `Value::String(arguments)` and the verbatim tool call is kept as vendor data;
//! that entry is the flag telling the two cases apart (a valid JSON string
//! argument needs no entry).
//!
//! Tool-message `content` given as an array of parts becomes the parts' texts
//! joined with `"\n"`; the verbatim message is kept as vendor data.
//!
//! # Vendor data
//!
//! What the neutral model cannot hold is kept in `extra["openai"]` (the
//! Anthropic module uses the same layout under `extra["anthropic"]`), an
//! object with these optional keys:
//!
//! - `role`: `"developer"` for a system message sent with that role;
//! - `content`: `"string"`, `"array"`, `"null"` or `"absent"`, the form of
//!   `content` when it differs from the canonical one (null when the message
//!   has no content parts, a string for exactly one plain text part, an array
//!   otherwise);
//! - `fields`: message fields memoir does not model, verbatim (`name`,
//!   `refusal`, `annotations`, `audio`, `function_call`, an empty
//!   `tool_calls`, a non-string `reasoning_content`, ...);
//! - `blocks`: `{"<i>": wire}`, the verbatim wire form of block `i` (a content
//!   part, a tool call, or a whole tool message) when it differs from the
//!   canonical rendering (`{"type":"text","text"}`,
//!   `{"type":"image_url","image_url":{"url":"data:<media>;base64,<data>"}}`,
//!   `{"id","type":"function","function":{"name","arguments":<compact JSON>}}`,
//!   `{"role":"tool","tool_call_id","content":<string>}`). It is used on the way
//!   out only while it still reads back as the block; otherwise it is reported
//!   as [`LossKind::InvalidVendorData`].
//!
//! # What OpenAI cannot carry
//!
//! Each is a [`LossKind`]: an error from [`to_openai`], a report entry from
//! [`to_openai_lossy`] (which does what the entry says).
//!
//! - a thinking **signature** ([`LossKind::ThinkingSignature`]: the text goes
//!   to `reasoning_content`, the signature is dropped); more than one thinking
//!   block ([`LossKind::MultipleThinking`]: joined with `"\n"`);
//! - blocks out of the order the shape imposes, thinking first, then content
//!   parts, then tool calls ([`LossKind::BlockOrder`]: reordered);
//! - `is_error` on a tool result ([`LossKind::ToolResultError`]: dropped);
//! - tool results outside a [`Role::Tool`] message
//!   ([`LossKind::ToolResultPlacement`]: sent as tool messages before it); a
//!   tool message with other blocks or none ([`LossKind::ToolMessageContent`]:
//!   the other blocks go to a following user message);
//! - two adjacent [`Role::Tool`] messages ([`LossKind::AdjacentToolMessages`]:
//!   they read back as one);
//! - `usage`, `provider_id` and `model` ([`LossKind::Metadata`]: dropped). They
//!   describe a response, not a message; see [`usage_from_openai`];
//! - other keys of [`Message::extra`], including Anthropic vendor data
//!   ([`LossKind::ExtraField`], [`LossKind::ForeignVendorData`]: dropped);
//! - anything else that would not read back identically, e.g. a
//!   [`Block::Unknown`] holding a text part, or a tool input whose numbers do
//!   not survive printing and parsing ([`LossKind::NotReproduced`]).

use serde_json::{json, Map, Value};

use super::convert::{
    absorb, content_from_wire, content_to_wire, counter, pick, prepare, verify, ContentCodec,
    ContentForm, VendorData,
};
pub use super::convert::{ConversionError, Loss, LossKind, Lossy};
use super::{Block, Message, Role, Usage};

/// The key of OpenAI vendor data in [`Message::extra`].
pub const VENDOR_KEY: &str = super::convert::OPENAI_KEY;

const PROVIDER: &str = "OpenAI";

const PART_CODEC: ContentCodec = ContentCodec {
    project: project_part,
    emit: emit_part,
    empty: ContentForm::Null,
};

fn invalid(index: usize, reason: &str) -> ConversionError {
    ConversionError::InvalidMessage {
        index,
        reason: reason.to_owned(),
    }
}

/// Converts OpenAI chat-completions messages to neutral ones.
///
/// Consecutive `tool` messages become one [`Role::Tool`] message. See the
/// module docs for the mapping and the lossless contract.
pub fn from_openai(messages: &[Value]) -> Result<Vec<Message>, ConversionError> {
    let mut out = Vec::with_capacity(messages.len());
    let mut run: Option<(Vec<Block>, VendorData)> = None;
    for (index, wire) in messages.iter().enumerate() {
        let obj = wire
            .as_object()
            .ok_or_else(|| invalid(index, "not a JSON object"))?;
        let role = obj
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(index, "no string `role`"))?;
        if role == "tool" {
            let block = project_tool_message(wire).map_err(|reason| invalid(index, reason))?;
            let (blocks, vendor) = run.get_or_insert_with(Default::default);
            absorb(vendor, blocks.len(), wire, emit_tool_message(&block));
            blocks.push(block);
        } else {
            if let Some((blocks, vendor)) = run.take() {
                out.push(tool_message(blocks, vendor));
            }
            out.push(message_from_openai(index, obj, role)?);
        }
    }
    if let Some((blocks, vendor)) = run {
        out.push(tool_message(blocks, vendor));
    }
    Ok(out)
}

fn tool_message(blocks: Vec<Block>, vendor: VendorData) -> Message {
    let mut msg = Message::new(Role::Tool, blocks);
    vendor.store(&mut msg.extra, VENDOR_KEY);
    msg
}

fn message_from_openai(
    index: usize,
    obj: &Map<String, Value>,
    role: &str,
) -> Result<Message, ConversionError> {
    let mut vendor = VendorData::default();
    let role = match role {
        "system" => Role::System,
        "developer" => {
            vendor.role = Some("developer".into());
            Role::System
        }
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(ConversionError::UnsupportedRole {
                index,
                role: other.to_owned(),
            })
        }
    };
    let mut blocks = Vec::new();
    let reasoning = obj.get("reasoning_content").and_then(Value::as_str);
    if let Some(text) = reasoning {
        blocks.push(Block::Thinking {
            text: text.to_owned(),
            signature: None,
        });
    }
    content_from_wire(obj.get("content"), &mut blocks, &mut vendor, &PART_CODEC)
        .map_err(|reason| invalid(index, reason))?;
    let calls = match obj.get("tool_calls") {
        Some(Value::Array(calls)) if !calls.is_empty() => Some(calls),
        _ => None,
    };
    for call in calls.into_iter().flatten() {
        let block = project_tool_call(call).map_err(|reason| invalid(index, reason))?;
        absorb(&mut vendor, blocks.len(), call, emit_tool_call(&block));
        blocks.push(block);
    }
    for (key, value) in obj {
        let modeled = match key.as_str() {
            "role" | "content" => true,
            "reasoning_content" => reasoning.is_some(),
            "tool_calls" => calls.is_some(),
            _ => false,
        };
        if !modeled {
            vendor.fields.insert(key.clone(), value.clone());
        }
    }
    let mut msg = Message::new(role, blocks);
    vendor.store(&mut msg.extra, VENDOR_KEY);
    Ok(msg)
}

/// Converts neutral messages to OpenAI chat-completions messages, exactly.
///
/// Returns [`ConversionError::Lossy`] when [`from_openai`] would not give the
/// input back; [`to_openai_lossy`] converts anyway.
pub fn to_openai(messages: &[Message]) -> Result<Vec<Value>, ConversionError> {
    to_openai_lossy(messages).exact(PROVIDER)
}

/// Converts neutral messages to OpenAI chat-completions messages, reporting
/// what the shape cannot carry instead of failing (see the module docs for
/// what each [`LossKind`] does to the output).
pub fn to_openai_lossy(messages: &[Message]) -> Lossy<Vec<Value>> {
    let mut out = Vec::with_capacity(messages.len());
    let mut losses = Vec::new();
    for (message, msg) in messages.iter().enumerate() {
        let before = losses.len();
        let first = out.len();
        let vendor = prepare(message, msg, VENDOR_KEY, &mut losses);
        if msg.role == Role::Tool {
            emit_tool_results(message, msg, &vendor, &mut out, &mut losses);
        } else {
            emit_message(message, msg, &vendor, &mut out, &mut losses);
        }
        verify(
            &mut losses,
            before,
            message,
            msg,
            from_openai(&out[first..]),
        );
    }
    Lossy { value: out, losses }
}

fn emit_tool_results(
    message: usize,
    msg: &Message,
    vendor: &VendorData,
    out: &mut Vec<Value>,
    losses: &mut Vec<Loss>,
) {
    let lose = |losses: &mut Vec<Loss>, block, kind| {
        losses.push(Loss {
            message,
            block,
            kind,
        })
    };
    if msg.content.is_empty() {
        lose(losses, None, LossKind::ToolMessageContent);
    }
    let follows_tool = out.last().and_then(|wire| wire.get("role")) == Some(&json!("tool"));
    if follows_tool && msg.has_tool_results() {
        lose(losses, None, LossKind::AdjacentToolMessages);
    }
    let mut others = Vec::new();
    for (index, block) in msg.content.iter().enumerate() {
        let Some(canonical) = emit_tool_message(block) else {
            lose(losses, Some(index), LossKind::ToolMessageContent);
            others.push((index, block));
            continue;
        };
        if matches!(block, Block::ToolResult { is_error: true, .. }) {
            lose(losses, Some(index), LossKind::ToolResultError);
        }
        let project = |wire: &Value| project_tool_message(wire).ok();
        out.push(pick(message, index, block, canonical, vendor, project, losses).0);
    }
    if !others.is_empty() {
        let none = VendorData::default();
        out.push(render(message, Role::User, &others, &none, losses));
    }
}

fn emit_message(
    message: usize,
    msg: &Message,
    vendor: &VendorData,
    out: &mut Vec<Value>,
    losses: &mut Vec<Loss>,
) {
    let mut rest = Vec::with_capacity(msg.content.len());
    for (index, block) in msg.content.iter().enumerate() {
        match emit_tool_message(block) {
            Some(wire) => {
                losses.push(Loss {
                    message,
                    block: Some(index),
                    kind: LossKind::ToolResultPlacement,
                });
                if matches!(block, Block::ToolResult { is_error: true, .. }) {
                    losses.push(Loss {
                        message,
                        block: Some(index),
                        kind: LossKind::ToolResultError,
                    });
                }
                out.push(wire);
            }
            None => rest.push((index, block)),
        }
    }
    out.push(render(message, msg.role, &rest, vendor, losses));
}

/// Renders a non-tool message from its blocks (none of them tool results).
fn render(
    message: usize,
    role: Role,
    blocks: &[(usize, &Block)],
    vendor: &VendorData,
    losses: &mut Vec<Loss>,
) -> Value {
    let lose = |losses: &mut Vec<Loss>, block, kind| {
        losses.push(Loss {
            message,
            block,
            kind,
        })
    };
    let mut thinking = Vec::new();
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    let mut rank = 0;
    let mut ordered = true;
    for &(index, block) in blocks {
        let this = match block {
            Block::Thinking { text, signature } => {
                if signature.is_some() {
                    lose(losses, Some(index), LossKind::ThinkingSignature);
                }
                thinking.push(text.as_str());
                0
            }
            Block::ToolUse { .. } => {
                calls.push((index, block));
                2
            }
            _ => {
                parts.push((index, block));
                1
            }
        };
        ordered &= this >= rank;
        rank = rank.max(this);
    }
    if thinking.len() > 1 {
        lose(losses, None, LossKind::MultipleThinking);
    }
    if !ordered {
        lose(losses, None, LossKind::BlockOrder);
    }

    let mut obj = Map::new();
    let role = match role {
        Role::System if vendor.role.as_deref() == Some("developer") => "developer",
        Role::System => "system",
        Role::Assistant => "assistant",
        Role::User | Role::Tool => "user",
    };
    obj.insert("role".into(), role.into());
    if let Some(content) = content_to_wire(message, &parts, vendor, &PART_CODEC, losses) {
        obj.insert("content".into(), content);
    }
    for (key, value) in &vendor.fields {
        if key != "role" && key != "content" {
            obj.insert(key.clone(), value.clone());
        }
    }
    if !thinking.is_empty() {
        obj.insert("reasoning_content".into(), thinking.join("\n").into());
    }
    if !calls.is_empty() {
        let calls = calls
            .into_iter()
            .filter_map(|(index, block)| {
                let canonical = emit_tool_call(block)?;
                let project = |wire: &Value| project_tool_call(wire).ok();
                Some(pick(message, index, block, canonical, vendor, project, losses).0)
            })
            .collect();
        obj.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(obj)
}

/// A content part as a block: text, base64 image, or [`Block::Unknown`].
fn project_part(part: &Value) -> Block {
    let text = part.get("text").and_then(Value::as_str);
    let url = part
        .get("image_url")
        .and_then(|image| image.get("url"))
        .and_then(Value::as_str);
    match (part.get("type").and_then(Value::as_str), text, url) {
        (Some("text"), Some(text), _) => Block::Text {
            text: text.to_owned(),
        },
        (Some("image_url"), _, Some(url)) => match parse_data_url(url) {
            Some((media_type, data)) => Block::Image {
                media_type: media_type.to_owned(),
                data: data.to_owned(),
            },
            None => Block::Unknown(part.clone()),
        },
        _ => Block::Unknown(part.clone()),
    }
}

fn emit_part(block: &Block) -> Option<Value> {
    match block {
        Block::Text { text } => Some(json!({"type": "text", "text": text})),
        Block::Image { media_type, data } => Some(json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{media_type};base64,{data}")},
        })),
        Block::Unknown(wire) => Some(wire.clone()),
        Block::Thinking { .. } | Block::ToolUse { .. } | Block::ToolResult { .. } => None,
    }
}

/// Splits `data:<media type>;base64,<data>`.
fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let (header, data) = url.strip_prefix("data:")?.split_once(',')?;
    Some((header.strip_suffix(";base64")?, data))
}

fn project_tool_call(call: &Value) -> Result<Block, &'static str> {
    const BAD: &str = "a tool call needs a string `id` and a `function` with string `name` and \
                       `arguments` (or a `custom` with string `name` and `input`)";
    let id = call.get("id").and_then(Value::as_str).ok_or(BAD)?;
    let kind = match call.get("type") {
        None => "function",
        Some(kind) => kind.as_str().ok_or(BAD)?,
    };
    if kind != "function" && kind != "custom" {
        return Err("unsupported tool call type (expected `function` or `custom`)");
    }
    let body = call.get(kind).ok_or(BAD)?;
    let name = body.get("name").and_then(Value::as_str).ok_or(BAD)?;
    let input = match kind {
        "function" => {
            let arguments = body.get("arguments").and_then(Value::as_str).ok_or(BAD)?;
            serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.into()))
        }
        _ => {
            let input = body.get("input").and_then(Value::as_str).ok_or(BAD)?;
            Value::String(input.into())
        }
    };
    Ok(Block::ToolUse {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
    })
}

fn emit_tool_call(block: &Block) -> Option<Value> {
    match block {
        Block::ToolUse { id, name, input } => Some(json!({
            "id": id,
            "type": "function",
            "function": {"name": name, "arguments": input.to_string()},
        })),
        _ => None,
    }
}

fn project_tool_message(wire: &Value) -> Result<Block, &'static str> {
    if wire.get("role").and_then(Value::as_str) != Some("tool") {
        return Err("not a tool message");
    }
    let tool_use_id = wire
        .get("tool_call_id")
        .and_then(Value::as_str)
        .ok_or("a tool message needs a string `tool_call_id`")?;
    let content = match wire.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(_) => return Err("`content` is neither a string, an array nor null"),
    };
    Ok(Block::ToolResult {
        tool_use_id: tool_use_id.to_owned(),
        content,
        is_error: false,
    })
}

fn emit_tool_message(block: &Block) -> Option<Value> {
    match block {
        Block::ToolResult {
            tool_use_id,
            content,
            ..
        } => Some(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content})),
        _ => None,
    }
}

/// Reads a chat-completions response `usage` object.
///
/// `prompt_tokens` includes cached tokens, so `input_tokens` is
/// `prompt_tokens - prompt_tokens_details.cached_tokens` and
/// `cache_read_input_tokens` is `cached_tokens`; `output_tokens` is
/// `completion_tokens`. OpenAI reports no cache writes (zero). Absent or null
/// counters are zero. `total_tokens` and the other breakdowns
/// (`completion_tokens_details`, `audio_tokens`, ...) are parts of these
/// totals and are not kept: `usage_to_openai(&usage_from_openai(&v)?)` gives
/// back `v` exactly when `v` has the four fields [`usage_to_openai`] writes.
pub fn usage_from_openai(usage: &Value) -> Result<Usage, ConversionError> {
    let obj = usage
        .as_object()
        .ok_or_else(|| ConversionError::InvalidUsage {
            provider: PROVIDER,
            reason: "not a JSON object".into(),
        })?;
    let prompt = counter(obj, "prompt_tokens", PROVIDER)?;
    let cached = match obj.get("prompt_tokens_details") {
        None | Some(Value::Null) => 0,
        Some(Value::Object(details)) => counter(details, "cached_tokens", PROVIDER)?,
        Some(_) => {
            return Err(ConversionError::InvalidUsage {
                provider: PROVIDER,
                reason: "`prompt_tokens_details` is not an object".into(),
            })
        }
    };
    let input_tokens = prompt
        .checked_sub(cached)
        .ok_or_else(|| ConversionError::InvalidUsage {
            provider: PROVIDER,
            reason: format!("cached_tokens ({cached}) exceeds prompt_tokens ({prompt})"),
        })?;
    Ok(Usage {
        input_tokens,
        output_tokens: counter(obj, "completion_tokens", PROVIDER)?,
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: 0,
        ..Usage::default()
    })
}

/// Writes a chat-completions `usage` object: `{prompt_tokens, completion_tokens,
/// total_tokens, prompt_tokens_details: {cached_tokens}}`, the inverse of
/// [`usage_from_openai`].
///
/// OpenAI has no cache-write counter: a non-zero
/// `cache_creation_input_tokens` is [`ConversionError::UsageNotExpressible`]
/// (to count such tokens as plain prompt tokens, add them to `input_tokens`
/// first).
pub fn usage_to_openai(usage: &Usage) -> Result<Value, ConversionError> {
    if usage.cache_creation_input_tokens != 0 {
        return Err(ConversionError::UsageNotExpressible {
            provider: PROVIDER,
            field: "cache_creation_input_tokens",
            value: usage.cache_creation_input_tokens,
        });
    }
    let overflow = || ConversionError::InvalidUsage {
        provider: PROVIDER,
        reason: "token count overflows u64".into(),
    };
    let prompt = usage
        .input_tokens
        .checked_add(usage.cache_read_input_tokens)
        .ok_or_else(overflow)?;
    let total = prompt
        .checked_add(usage.output_tokens)
        .ok_or_else(overflow)?;
    Ok(json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": total,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
    }))
}

#[cfg(test)]
pub(in crate::message) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Asserts wire → neutral → wire is the identity and returns the neutral form.
    fn round_trip(wire: &[Value]) -> Vec<Message> {
        let neutral = from_openai(wire).expect("from_openai");
        assert_eq!(to_openai(&neutral).expect("to_openai"), wire);
        neutral
    }

    /// `(message, block, kind)` of a loss.
    type Found = (usize, Option<usize>, LossKind);

    fn loss_kinds(messages: &[Message]) -> Vec<Found> {
        to_openai_lossy(messages)
            .losses
            .into_iter()
            .map(|loss| (loss.message, loss.block, loss.kind))
            .collect()
    }

    fn vendor(msg: &Message) -> &Value {
        msg.extra.get(VENDOR_KEY).expect("openai vendor data")
    }

    #[test]
    fn parallel_tool_calls_and_their_results() {
        let wire = vec![
            json!({"role": "system", "content": "You are a weather bot."}),
            json!({"role": "user", "content": "Weather in Paris and Tokyo?"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\"}"}},
            ]}),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "18C"}),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "25C"}),
            json!({"role": "assistant", "content": "Paris 18C, Tokyo 25C."}),
        ];
        let neutral = round_trip(&wire);
        assert_eq!(
            neutral.len(),
            5,
            "the two tool messages are one neutral message"
        );
        assert_eq!(neutral[0], Message::system("You are a weather bot."));
        assert_eq!(neutral[1], Message::user("Weather in Paris and Tokyo?"));
        assert_eq!(
            neutral[2].content,
            vec![
                Block::ToolUse {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Paris"}),
                },
                Block::ToolUse {
                    id: "call_2".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Tokyo"}),
                },
            ]
        );
        // Only the non-compact arguments string needed keeping verbatim.
        assert_eq!(
            vendor(&neutral[2]),
            &json!({"blocks": {"1": wire[2]["tool_calls"][1]}})
        );
        assert_eq!(
            neutral[3],
            Message::new(
                Role::Tool,
                vec![
                    Block::ToolResult {
                        tool_use_id: "call_1".into(),
                        content: "18C".into(),
                        is_error: false,
                    },
                    Block::ToolResult {
                        tool_use_id: "call_2".into(),
                        content: "25C".into(),
                        is_error: false,
                    },
                ],
            )
        );
        assert_eq!(neutral[4], Message::assistant("Paris 18C, Tokyo 25C."));
    }

    #[test]
    fn response_fields_and_reasoning_are_kept() {
        let wire = vec![json!({
            "role": "assistant",
            "content": "42",
            "reasoning_content": "6 times 7",
            "refusal": null,
            "annotations": [],
        })];
        let neutral = round_trip(&wire);
        assert_eq!(
            neutral[0].content,
            vec![
                Block::Thinking {
                    text: "6 times 7".into(),
                    signature: None,
                },
                Block::Text { text: "42".into() },
            ]
        );
        assert_eq!(
            vendor(&neutral[0]),
            &json!({"fields": {"refusal": null, "annotations": []}})
        );
    }

    #[test]
    fn images_and_unknown_parts() {
        let wire = vec![json!({"role": "user", "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
        ]})];
        let neutral = round_trip(&wire);
        let content = &neutral[0].content;
        assert_eq!(
            content[1],
            Block::Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            }
        );
        assert_eq!(
            content[2],
            Block::Image {
                media_type: "image/jpeg".into(),
                data: "/9j/4AAQ".into(),
            }
        );
        assert_eq!(content[3], Block::Unknown(wire[0]["content"][3].clone()));
        assert_eq!(content[4], Block::Unknown(wire[0]["content"][4].clone()));
        // The `detail` is what the image block cannot hold.
        assert_eq!(
            vendor(&neutral[0]),
            &json!({"blocks": {"2": wire[0]["content"][2]}})
        );
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_verbatim() {
        let broken = json!({"id": "c1", "type": "function",
                            "function": {"name": "f", "arguments": "{\"a\": 1"}});
        let string = json!({"id": "c2", "type": "function",
                            "function": {"name": "f", "arguments": "\"{\\\"a\\\": 1\""}});
        let wire = vec![json!({"role": "assistant", "tool_calls": [broken, string]})];
        let neutral = round_trip(&wire);
        let input = |i: usize| match &neutral[0].content[i] {
            Block::ToolUse { input, .. } => input.clone(),
            other => panic!("not a tool use: {other:?}"),
        };
        // Same neutral input; only the vendor entry tells the invalid one apart.
        assert_eq!(input(0), json!("{\"a\": 1"));
        assert_eq!(input(1), json!("{\"a\": 1"));
        assert_eq!(
            vendor(&neutral[0]),
            &json!({"content": "absent", "blocks": {"0": broken}})
        );
    }

    #[test]
    fn content_forms_and_roles_are_kept() {
        let wire = vec![
            json!({"role": "developer", "content": [{"type": "text", "text": "Be terse."}]}),
            json!({"role": "user", "content": "", "name": "ann"}),
            json!({"role": "assistant", "content": [], "tool_calls": []}),
            json!({"role": "assistant", "content": null, "reasoning_content": null}),
            json!({"role": "tool", "tool_call_id": "c", "content": [
                {"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]}),
            json!({"role": "assistant", "tool_calls": [
                {"id": "c9", "type": "custom", "custom": {"name": "sh", "input": "ls -l"}}]}),
        ];
        let neutral = round_trip(&wire);
        assert_eq!(neutral[0].role, Role::System);
        assert_eq!(
            vendor(&neutral[0]),
            &json!({"role": "developer", "content": "array"})
        );
        assert_eq!(neutral[1].content, vec![Block::Text { text: "".into() }]);
        assert_eq!(neutral[2].content, vec![]);
        assert_eq!(neutral[3].content, vec![]);
        assert_eq!(neutral[4].text_content(), "");
        assert_eq!(
            neutral[4].content,
            vec![Block::ToolResult {
                tool_use_id: "c".into(),
                content: "line 1\nline 2".into(),
                is_error: false,
            }]
        );
        assert_eq!(
            neutral[5].content,
            vec![Block::ToolUse {
                id: "c9".into(),
                name: "sh".into(),
                input: json!("ls -l"),
            }]
        );
    }

    #[test]
    fn malformed_input_is_an_error() {
        let err = |wire: Value| from_openai(&[json!({"role": "user", "content": "hi"}), wire]);
        assert_eq!(
            err(json!({"role": "function", "name": "f", "content": "x"})),
            Err(ConversionError::UnsupportedRole {
                index: 1,
                role: "function".into(),
            })
        );
        for wire in [
            json!("hello"),
            json!({"content": "no role"}),
            json!({"role": "user", "content": 3}),
            json!({"role": "tool", "content": "no id"}),
            json!({"role": "assistant", "tool_calls": [{"type": "function"}]}),
            json!({"role": "assistant", "tool_calls": [{"id": "x", "type": "web"}]}),
        ] {
            assert!(
                matches!(
                    err(wire.clone()),
                    Err(ConversionError::InvalidMessage { index: 1, .. })
                ),
                "{wire}"
            );
        }
    }

    #[test]
    fn thinking_signature_is_reported_not_dropped_silently() {
        let msg = Message::new(
            Role::Assistant,
            vec![
                Block::Thinking {
                    text: "hmm".into(),
                    signature: Some("sig".into()),
                },
                Block::Text { text: "yes".into() },
            ],
        );
        let err = to_openai(std::slice::from_ref(&msg)).unwrap_err();
        let ConversionError::Lossy { provider, losses } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(*provider, "OpenAI");
        assert_eq!(
            losses,
            &vec![Loss {
                message: 0,
                block: Some(0),
                kind: LossKind::ThinkingSignature,
            }]
        );
        assert!(err
            .to_string()
            .contains("message 0, block 0: thinking signature"));
        let lossy = to_openai_lossy(&[msg]);
        assert_eq!(
            lossy.value,
            vec![json!({"role": "assistant", "content": "yes", "reasoning_content": "hmm"})]
        );
    }

    #[test]
    fn what_openai_cannot_carry_is_reported() {
        let result = |id: &str, is_error| Block::ToolResult {
            tool_use_id: id.into(),
            content: "out".into(),
            is_error,
        };
        let call = Block::ToolUse {
            id: "c".into(),
            name: "f".into(),
            input: json!({}),
        };
        let text = Block::Text { text: "t".into() };
        let cases: Vec<(Vec<Message>, Vec<Found>)> = vec![
            (
                vec![Message::tool_result("c", "boom", true)],
                vec![(0, Some(0), LossKind::ToolResultError)],
            ),
            (
                vec![Message::new(
                    Role::User,
                    vec![result("c", false), text.clone()],
                )],
                vec![(0, Some(0), LossKind::ToolResultPlacement)],
            ),
            (
                vec![
                    Message::tool_result("a", "1", false),
                    Message::tool_result("b", "2", false),
                ],
                vec![(1, None, LossKind::AdjacentToolMessages)],
            ),
            (
                vec![Message::new(Role::Tool, vec![])],
                vec![(0, None, LossKind::ToolMessageContent)],
            ),
            (
                vec![Message::new(Role::Assistant, vec![call, text.clone()])],
                vec![(0, None, LossKind::BlockOrder)],
            ),
            (
                vec![Message::assistant("x").with_usage(Usage::default())],
                vec![(0, None, LossKind::Metadata { field: "usage" })],
            ),
            (
                vec![Message::new(
                    Role::User,
                    vec![Block::Unknown(json!({"type": "text", "text": "t"}))],
                )],
                vec![(0, None, LossKind::NotReproduced)],
            ),
        ];
        for (messages, expected) in cases {
            assert_eq!(loss_kinds(&messages), expected, "{messages:?}");
            assert!(to_openai(&messages).is_err());
        }

        let mut with_extra = Message::user("x");
        with_extra.extra.insert("colour".into(), json!("red"));
        assert_eq!(
            loss_kinds(&[with_extra]),
            vec![(
                0,
                None,
                LossKind::ExtraField {
                    key: "colour".into()
                }
            )]
        );
    }

    #[test]
    fn lossy_fallbacks_keep_the_content() {
        let messages = vec![Message::new(
            Role::User,
            vec![
                Block::ToolResult {
                    tool_use_id: "c".into(),
                    content: "out".into(),
                    is_error: false,
                },
                Block::Text {
                    text: "and?".into(),
                },
            ],
        )];
        assert_eq!(
            to_openai_lossy(&messages).value,
            vec![
                json!({"role": "tool", "tool_call_id": "c", "content": "out"}),
                json!({"role": "user", "content": "and?"}),
            ]
        );
    }

    #[test]
    fn edited_blocks_do_not_resurrect_stale_wire_forms() {
        let wire = vec![json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]})];
        let mut neutral = round_trip(&wire);
        neutral[0].content[0] = Block::ToolUse {
            id: "c".into(),
            name: "f".into(),
            input: json!({"a": 2}),
        };
        let lossy = to_openai_lossy(&neutral);
        assert_eq!(
            lossy.losses,
            vec![Loss {
                message: 0,
                block: Some(0),
                kind: LossKind::InvalidVendorData,
            }]
        );
        assert_eq!(
            lossy.value[0]["tool_calls"][0]["function"]["arguments"],
            json!("{\"a\":2}")
        );
    }

    #[test]
    fn anthropic_vendor_data_is_reported_as_foreign() {
        let neutral = crate::message::anthropic::from_anthropic(
            None,
            &[json!({"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]})],
        )
        .expect("from_anthropic");
        assert_eq!(
            loss_kinds(&neutral),
            vec![(
                0,
                Some(0),
                LossKind::ForeignVendorData {
                    path: "anthropic.blocks.0".into()
                }
            )]
        );
        assert_eq!(
            to_openai_lossy(&neutral).value,
            vec![json!({"role": "user", "content": "hi"})]
        );
    }

    #[test]
    fn openai_conversation_survives_a_trip_through_anthropic() {
        let wire = vec![
            json!({"role": "system", "content": "Be brief."}),
            json!({"role": "user", "content": "Weather in Paris and Tokyo?"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Tokyo\"}"}},
            ]}),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "18C"}),
            json!({"role": "tool", "tool_call_id": "call_2", "content": "25C"}),
            json!({"role": "assistant", "content": "18C and 25C."}),
        ];
        let neutral = from_openai(&wire).expect("from_openai");
        let anthropic = crate::message::anthropic::to_anthropic(&neutral).expect("to_anthropic");
        assert_eq!(anthropic.system, Some(json!("Be brief.")));
        assert_eq!(anthropic.messages[2]["content"][1]["tool_use_id"], "call_2");
        let back = crate::message::anthropic::from_anthropic(
            anthropic.system.as_ref(),
            &anthropic.messages,
        )
        .expect("from_anthropic");
        assert_eq!(back, neutral);
        assert_eq!(to_openai(&back).expect("to_openai"), wire);
    }

    #[test]
    fn usage_conversion() {
        let wire = json!({
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 60},
        });
        let usage = usage_from_openai(&wire).expect("usage");
        assert_eq!(
            usage,
            Usage {
                input_tokens: 40,
                output_tokens: 20,
                cache_read_input_tokens: 60,
                cache_creation_input_tokens: 0,
                ..Default::default()
            }
        );
        assert_eq!(usage_to_openai(&usage), Ok(wire));
        assert_eq!(
            usage_from_openai(&json!({"prompt_tokens": 5, "completion_tokens": 1})),
            Ok(Usage {
                input_tokens: 5,
                output_tokens: 1,
                ..Usage::default()
            })
        );
        assert!(usage_from_openai(&json!({
            "prompt_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 6},
        }))
        .is_err());
        assert!(usage_from_openai(&json!({"prompt_tokens": -1})).is_err());
        assert_eq!(
            usage_to_openai(&Usage {
                cache_creation_input_tokens: 7,
                ..Usage::default()
            }),
            Err(ConversionError::UsageNotExpressible {
                provider: "OpenAI",
                field: "cache_creation_input_tokens",
                value: 7,
            })
        );
    }

    // ---- property tests --------------------------------------------------

    /// Short strings with the characters that stress JSON and text handling.
    pub(in crate::message) fn text() -> impl Strategy<Value = String> {
        "[ab ,;:{}\"\\\\é\n]{0,6}"
    }

    /// Ids and names.
    pub(in crate::message) fn ident() -> impl Strategy<Value = String> {
        "[a-z0-9_]{1,6}"
    }

    /// Nested JSON; with `floats`, also finite and non-finite (null) floats,
    /// whose print-parse round trip is not always exact.
    pub(in crate::message) fn json_value(floats: bool) -> impl Strategy<Value = Value> {
        let number = if floats {
            any::<f64>().prop_map(|f| json!(f)).boxed()
        } else {
            any::<i64>().prop_map(Value::from).boxed()
        };
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            number,
            text().prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::vec((ident(), inner), 0..3)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    fn media_type() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["image/png", "image/jpeg", "", "image/x;q=1"])
            .prop_map(String::from)
    }

    fn base64() -> impl Strategy<Value = String> {
        "[A-Za-z0-9+/=,]{0,8}"
    }

    fn wire_part() -> impl Strategy<Value = Value> {
        prop_oneof![
            text().prop_map(|t| json!({"type": "text", "text": t})),
            text().prop_map(|t| json!({"type": "text", "text": t, "cache_control": {"type": "ephemeral"}})),
            (media_type(), base64()).prop_map(|(m, d)| json!(
                {"type": "image_url", "image_url": {"url": format!("data:{m};base64,{d}")}})),
            (media_type(), base64()).prop_map(|(m, d)| json!(
                {"type": "image_url", "image_url": {"url": format!("data:{m};base64,{d}"), "detail": "low"}})),
            Just(json!({"type": "image_url", "image_url": {"url": "https://x.test/a.png"}})),
            Just(json!({"type": "image_url", "image_url": {"url": "data:image/png,raw"}})),
            base64().prop_map(|d| json!({"type": "input_audio", "input_audio": {"data": d, "format": "wav"}})),
            text().prop_map(|t| json!({"type": "refusal", "refusal": t})),
            Just(json!({"type": "text"})),
            Just(json!("bare string part")),
        ]
    }

    fn wire_content() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            text().prop_map(|t| Some(Value::String(t))),
            prop::collection::vec(wire_part(), 0..4).prop_map(|p| Some(Value::Array(p))),
        ]
    }

    fn wire_tool_call() -> impl Strategy<Value = Value> {
        let function = |id: String, name: String, arguments: String| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}});
        prop_oneof![
            (ident(), ident(), json_value(true)).prop_map(move |(i, n, v)| function(
                i,
                n,
                v.to_string()
            )),
            (ident(), ident(), json_value(true)).prop_map(move |(i, n, v)| {
                let pretty = serde_json::to_string_pretty(&v).expect("serialize");
                function(i, n, pretty)
            }),
            (ident(), ident(), text()).prop_map(move |(i, n, t)| function(
                i,
                n,
                format!("{{\"a\": {t}")
            )),
            (ident(), ident(), text()).prop_map(move |(i, n, t)| function(i, n, t)),
            (ident(), ident(), text()).prop_map(|(i, n, t)| json!(
                {"id": i, "type": "custom", "custom": {"name": n, "input": t}})),
            (ident(), ident()).prop_map(|(i, n)| json!(
                {"id": i, "function": {"name": n, "arguments": "{}"}})),
        ]
    }

    fn wire_message() -> impl Strategy<Value = Value> {
        let role = prop::sample::select(vec!["system", "developer", "user", "assistant"]);
        let reasoning = prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            text().prop_map(|t| Some(t.into()))
        ];
        let calls = prop_oneof![
            Just(None),
            Just(Some(json!([]))),
            Just(Some(Value::Null)),
            prop::collection::vec(wire_tool_call(), 1..3).prop_map(|c| Some(Value::Array(c))),
        ];
        let extras = prop::collection::vec(
            prop::sample::select(vec![
                ("name", json!("bob")),
                ("refusal", Value::Null),
                ("annotations", json!([])),
                ("tool_call_id", json!("stray")),
            ]),
            0..3,
        );
        let message = (role, wire_content(), reasoning, calls, extras).prop_map(
            |(role, content, reasoning, calls, extras)| {
                let mut obj = Map::new();
                obj.insert("role".into(), role.into());
                let optional = [
                    ("content", content),
                    ("reasoning_content", reasoning),
                    ("tool_calls", calls),
                ];
                for (key, value) in optional {
                    if let Some(value) = value {
                        obj.insert(key.into(), value);
                    }
                }
                for (key, value) in extras {
                    obj.insert(key.into(), value);
                }
                Value::Object(obj)
            },
        );
        let tool_content = prop_oneof![
            text().prop_map(Value::from),
            Just(Value::Null),
            prop::collection::vec(
                text().prop_map(|t| json!({"type": "text", "text": t})),
                0..3
            )
            .prop_map(Value::Array),
        ];
        let tool = (ident(), tool_content, any::<bool>()).prop_map(|(id, content, named)| {
            let mut wire = json!({"role": "tool", "tool_call_id": id, "content": content});
            if let (true, Value::Object(obj)) = (named, &mut wire) {
                obj.insert("name".into(), "f".into());
            }
            wire
        });
        prop_oneof![3 => message, 2 => tool]
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
            (media_type(), base64())
                .prop_map(|(media_type, data)| Block::Image { media_type, data }),
            prop::sample::select(vec![
                json!({"type": "input_audio", "input_audio": {"data": "x", "format": "mp3"}}),
                json!({"type": "redacted_thinking", "data": "opaque"}),
                json!({"type": "text", "text": "looks known"}),
                json!("bare"),
            ])
            .prop_map(Block::Unknown),
        ]
    }

    fn neutral_message() -> impl Strategy<Value = Message> {
        let role =
            prop::sample::select(vec![Role::System, Role::User, Role::Assistant, Role::Tool]);
        let usage = prop_oneof![9 => Just(None), 1 => Just(Some(Usage::default()))];
        let extra = prop_oneof![
            8 => Just(None),
            1 => Just(Some(("note", json!(1)))),
            1 => Just(Some(("openai", json!({"content": "array"})))),
        ];
        (role, prop::collection::vec(block(), 0..4), usage, extra).prop_map(
            |(role, content, usage, extra)| {
                let mut msg = Message::new(role, content);
                msg.usage = usage;
                if let Some((key, value)) = extra {
                    msg.extra.insert(key.into(), value);
                }
                msg
            },
        )
    }

    /// Neutral messages OpenAI can express by construction.
    fn expressible() -> impl Strategy<Value = Vec<Message>> {
        let part = prop_oneof![
            text().prop_map(|text| Block::Text { text }),
            (media_type(), base64())
                .prop_map(|(media_type, data)| Block::Image { media_type, data }),
            Just(Block::Unknown(
                json!({"type": "input_audio", "input_audio": {"data": "x", "format": "mp3"}})
            )),
        ];
        let call = (ident(), ident(), json_value(false))
            .prop_map(|(id, name, input)| Block::ToolUse { id, name, input });
        let role = prop::sample::select(vec![Role::System, Role::User, Role::Assistant]);
        let plain = (
            role,
            prop::option::of(text()),
            prop::collection::vec(part, 0..3),
            prop::collection::vec(call, 0..3),
        )
            .prop_map(|(role, thinking, parts, calls)| {
                let thinking = thinking.map(|text| Block::Thinking {
                    text,
                    signature: None,
                });
                Message::new(
                    role,
                    thinking.into_iter().chain(parts).chain(calls).collect(),
                )
            });
        let result = (ident(), text()).prop_map(|(tool_use_id, content)| Block::ToolResult {
            tool_use_id,
            content,
            is_error: false,
        });
        let tool =
            prop::collection::vec(result, 1..3).prop_map(|blocks| Message::new(Role::Tool, blocks));
        prop::collection::vec(prop_oneof![plain, tool], 0..6).prop_map(|messages| {
            let mut out: Vec<Message> = Vec::new();
            for msg in messages {
                let adjacent =
                    msg.role == Role::Tool && out.last().map(|m| m.role) == Some(Role::Tool);
                if !adjacent {
                    out.push(msg);
                }
            }
            out
        })
    }

    proptest! {
        #[test]
        fn wire_to_neutral_to_wire_is_identity(wire in prop::collection::vec(wire_message(), 0..6)) {
            let neutral = from_openai(&wire).expect("generated wire is accepted");
            prop_assert_eq!(to_openai(&neutral), Ok(wire));
        }

        #[test]
        fn expressible_neutral_round_trips(messages in expressible()) {
            let wire = to_openai(&messages);
            prop_assert!(wire.is_ok(), "{:?}", wire);
            prop_assert_eq!(from_openai(&wire.unwrap_or_default()), Ok(messages));
        }

        #[test]
        fn report_is_empty_exactly_when_neutral_round_trips(
            messages in prop::collection::vec(neutral_message(), 0..5),
        ) {
            let lossy = to_openai_lossy(&messages);
            let back = from_openai(&lossy.value).expect("own output is accepted");
            prop_assert_eq!(lossy.is_exact(), back == messages, "{:?}", lossy.losses);
            prop_assert_eq!(to_openai(&messages).is_ok(), lossy.is_exact());
        }
    }
}
