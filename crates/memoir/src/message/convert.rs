//! The conversion machinery the provider mappings share ([`super::openai`],
//! [`super::anthropic`]): the error type [`ConversionError`], the loss report
//! ([`Loss`], [`LossKind`], [`Lossy`]), the vendor data each mapping keeps in
//! [`Message::extra`] (the layout is documented in [`super::openai`]), and the
//! strict/lossy emit-then-verify loop both use. A new provider mapping plugs in
//! a `ContentCodec` and its vendor key; it does not copy this code.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use super::{Block, Message, Role};

/// The key of OpenAI vendor data in [`Message::extra`].
pub(super) const OPENAI_KEY: &str = "openai";

/// The key of Anthropic vendor data in [`Message::extra`].
pub(super) const ANTHROPIC_KEY: &str = "anthropic";

/// The vendor-data keys of every provider this crate converts to.
const NAMESPACES: [&str; 2] = [OPENAI_KEY, ANTHROPIC_KEY];

/// Why a conversion failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversionError {
    /// A wire message is malformed.
    #[error("message {index}: {reason}")]
    InvalidMessage {
        /// Its index in the wire list.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A wire role the neutral model has no counterpart for (e.g. OpenAI's
    /// legacy `function`, or `system` inside Anthropic's `messages`).
    #[error("message {index}: unsupported role {role:?}")]
    UnsupportedRole {
        /// Its index in the wire list.
        index: usize,
        /// The role as given.
        role: String,
    },
    /// Anthropic's top-level `system` value is malformed.
    #[error("system prompt: {reason}")]
    InvalidSystem {
        /// What is wrong with it.
        reason: String,
    },
    /// A strict conversion would lose something; the lossy variant of the
    /// function returns the same list as its report.
    #[error("the {provider} shape cannot carry these messages exactly: {}", LossList(.losses))]
    Lossy {
        /// The target provider.
        provider: &'static str,
        /// Everything that would be lost.
        losses: Vec<Loss>,
    },
    /// A usage object is malformed.
    #[error("{provider} usage: {reason}")]
    InvalidUsage {
        /// The provider whose usage shape it is.
        provider: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A non-zero usage counter the provider's usage shape has no field for.
    #[error("{provider} usage has no field for {field} ({value})")]
    UsageNotExpressible {
        /// The target provider.
        provider: &'static str,
        /// The [`Usage`](super::Usage) field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
}

/// One thing a conversion to a provider shape could not carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Loss {
    /// Index of the neutral message.
    pub message: usize,
    /// Index of the block within it, when the loss concerns one block.
    pub block: Option<usize>,
    /// What is lost.
    pub kind: LossKind,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "message {}", self.message)?;
        if let Some(block) = self.block {
            write!(f, ", block {block}")?;
        }
        write!(f, ": {}", self.kind)
    }
}

struct LossList<'a>(&'a [Loss]);

impl fmt::Display for LossList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, loss) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{loss}")?;
        }
        Ok(())
    }
}

/// The kinds of [`Loss`]. Which provider can carry what is listed in the
/// module docs of [`self`](crate::message::openai) and
/// [`super::anthropic`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LossKind {
    /// `usage`, `provider_id` or `model` is set: a message list carries no
    /// response metadata. Dropped.
    Metadata {
        /// The [`Message`] field.
        field: &'static str,
    },
    /// A key of [`Message::extra`] that is no provider's vendor data. Dropped.
    ExtraField {
        /// The key.
        key: String,
    },
    /// An entry of another provider's vendor data, e.g. `anthropic.blocks.2`
    /// or `openai.fields.refusal`. Dropped.
    ForeignVendorData {
        /// Dotted path of the entry inside [`Message::extra`].
        path: String,
    },
    /// This provider's vendor data is malformed, or a `blocks` entry no longer
    /// reads back as its block (the block was edited) or is redundant. The
    /// canonical rendering is used instead.
    InvalidVendorData,
    /// A thinking block's signature (OpenAI). Dropped.
    ThinkingSignature,
    /// More than one thinking block (OpenAI). Joined with `"\n"`.
    MultipleThinking,
    /// Blocks out of the order the shape imposes (OpenAI: thinking, content
    /// parts, tool calls). Reordered.
    BlockOrder,
    /// `is_error: true` on a tool result (OpenAI). Dropped.
    ToolResultError,
    /// A tool result outside a [`Role::Tool`] message (OpenAI). Sent as a tool
    /// message before the rest of the message.
    ToolResultPlacement,
    /// A [`Role::Tool`] message with no blocks or with blocks other than tool
    /// results (OpenAI). Those blocks are sent as a following user message.
    ToolMessageContent,
    /// A [`Role::Tool`] message right after another one (OpenAI): they read
    /// back as one message.
    AdjacentToolMessages,
    /// A [`Role::System`] message after the first message, or a second one
    /// (Anthropic has one top-level `system`). Merged into it.
    SystemPlacement,
    /// The message reads back with another role (Anthropic: a user message
    /// made only of tool results is [`Role::Tool`], and a tool message that
    /// is not is [`Role::User`]).
    RoleChanged {
        /// The neutral role.
        from: Role,
        /// The role it reads back with.
        to: Role,
    },
    /// The message does not read back identically for a reason the other
    /// kinds do not name.
    NotReproduced,
}

impl fmt::Display for LossKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LossKind::Metadata { field } => write!(f, "`{field}` is response metadata"),
            LossKind::ExtraField { key } => write!(f, "extra field {key:?}"),
            LossKind::ForeignVendorData { path } => write!(f, "other provider's data {path}"),
            LossKind::InvalidVendorData => f.write_str("vendor data is malformed or stale"),
            LossKind::ThinkingSignature => f.write_str("thinking signature"),
            LossKind::MultipleThinking => f.write_str("more than one thinking block"),
            LossKind::BlockOrder => f.write_str("block order"),
            LossKind::ToolResultError => f.write_str("tool result error flag"),
            LossKind::ToolResultPlacement => f.write_str("tool result outside a tool message"),
            LossKind::ToolMessageContent => {
                f.write_str("tool message without tool results or with other blocks")
            }
            LossKind::AdjacentToolMessages => f.write_str("adjacent tool messages would merge"),
            LossKind::SystemPlacement => f.write_str("system message not first or not single"),
            LossKind::RoleChanged { from, to } => {
                write!(f, "role {} reads back as {}", from.as_str(), to.as_str())
            }
            LossKind::NotReproduced => f.write_str("does not read back identically"),
        }
    }
}

impl LossKind {
    /// A stable short name of the kind, without its details
    /// (`metadata`, `extra_field`, `foreign_vendor_data`, ...).
    pub fn label(&self) -> &'static str {
        match self {
            LossKind::Metadata { .. } => "metadata",
            LossKind::ExtraField { .. } => "extra_field",
            LossKind::ForeignVendorData { .. } => "foreign_vendor_data",
            LossKind::InvalidVendorData => "invalid_vendor_data",
            LossKind::ThinkingSignature => "thinking_signature",
            LossKind::MultipleThinking => "multiple_thinking",
            LossKind::BlockOrder => "block_order",
            LossKind::ToolResultError => "tool_result_error",
            LossKind::ToolResultPlacement => "tool_result_placement",
            LossKind::ToolMessageContent => "tool_message_content",
            LossKind::AdjacentToolMessages => "adjacent_tool_messages",
            LossKind::SystemPlacement => "system_placement",
            LossKind::RoleChanged { .. } => "role_changed",
            LossKind::NotReproduced => "not_reproduced",
        }
    }

    /// The detail that varies within one kind (a field, a key, a vendor
    /// data path with its indices as `N`, a role change), if any.
    fn detail(&self) -> Option<String> {
        match self {
            LossKind::Metadata { field } => Some((*field).to_string()),
            LossKind::ExtraField { key } => Some(key.clone()),
            LossKind::ForeignVendorData { path } => Some(
                path.split('.')
                    .map(|p| {
                        if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
                            "N"
                        } else {
                            p
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("."),
            ),
            LossKind::RoleChanged { from, to } => {
                Some(format!("{} as {}", from.as_str(), to.as_str()))
            }
            _ => None,
        }
    }
}

/// The losses of one kind in a conversion, counted once (a long session
/// loses the same things in many messages).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LossSummary {
    /// [`LossKind::label`].
    pub kind: &'static str,
    /// Losses of this kind.
    pub count: usize,
    /// Distinct messages they concern.
    pub messages: usize,
    /// Index of the first message concerned.
    pub first_message: usize,
    /// What varies within the kind (fields, keys, paths), distinct, sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// A description of the kind (the first loss's, without its message).
    pub description: String,
}

impl fmt::Display for LossSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} × {} in {} message(s)",
            self.count, self.kind, self.messages
        )?;
        if !self.details.is_empty() {
            const SHOWN: usize = 6;
            let mut list = self.details[..self.details.len().min(SHOWN)].join(", ");
            if self.details.len() > SHOWN {
                list.push_str(&format!(", … {} more", self.details.len() - SHOWN));
            }
            write!(f, " ({list})")?;
        } else {
            write!(f, " ({})", self.description)?;
        }
        Ok(())
    }
}

/// `losses` counted per kind, in the order each kind first occurs.
pub fn summarize_losses(losses: &[Loss]) -> Vec<LossSummary> {
    let mut out: Vec<LossSummary> = Vec::new();
    let mut seen_messages: Vec<std::collections::BTreeSet<usize>> = Vec::new();
    for loss in losses {
        let label = loss.kind.label();
        let k = match out.iter().position(|s| s.kind == label) {
            Some(k) => k,
            None => {
                out.push(LossSummary {
                    kind: label,
                    count: 0,
                    messages: 0,
                    first_message: loss.message,
                    details: Vec::new(),
                    description: loss.kind.to_string(),
                });
                seen_messages.push(Default::default());
                out.len() - 1
            }
        };
        let s = &mut out[k];
        s.count += 1;
        s.first_message = s.first_message.min(loss.message);
        if let Some(d) = loss.kind.detail() {
            if let Err(at) = s.details.binary_search(&d) {
                s.details.insert(at, d);
            }
        }
        seen_messages[k].insert(loss.message);
        s.messages = seen_messages[k].len();
    }
    out
}

/// The result of a lossy conversion: the converted value and what it lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Lossy<T> {
    /// The converted value.
    pub value: T,
    /// What could not be carried; empty when the conversion is exact.
    pub losses: Vec<Loss>,
}

impl<T> Lossy<T> {
    /// True when nothing was lost.
    pub fn is_exact(&self) -> bool {
        self.losses.is_empty()
    }

    /// The value when exact, else [`ConversionError::Lossy`].
    pub(super) fn exact(self, provider: &'static str) -> Result<T, ConversionError> {
        if self.losses.is_empty() {
            Ok(self.value)
        } else {
            Err(ConversionError::Lossy {
                provider,
                losses: self.losses,
            })
        }
    }
}

/// The form of a wire `content` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ContentForm {
    String,
    Array,
    Null,
    Absent,
}

impl ContentForm {
    fn name(self) -> &'static str {
        match self {
            ContentForm::String => "string",
            ContentForm::Array => "array",
            ContentForm::Null => "null",
            ContentForm::Absent => "absent",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [
            ContentForm::String,
            ContentForm::Array,
            ContentForm::Null,
            ContentForm::Absent,
        ]
        .into_iter()
        .find(|form| form.name() == name)
    }
}

/// Vendor data of one message, as laid out in the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct VendorData {
    pub(super) role: Option<String>,
    pub(super) content: Option<ContentForm>,
    pub(super) fields: Map<String, Value>,
    pub(super) blocks: BTreeMap<usize, Value>,
}

impl VendorData {
    fn is_empty(&self) -> bool {
        self.role.is_none()
            && self.content.is_none()
            && self.fields.is_empty()
            && self.blocks.is_empty()
    }

    /// Parses the documented layout; `None` for anything else (unknown keys,
    /// wrong types, non-canonical block indices).
    fn parse(value: &Value) -> Option<Self> {
        let mut data = VendorData::default();
        for (key, value) in value.as_object()? {
            match (key.as_str(), value) {
                ("role", Value::String(role)) => data.role = Some(role.clone()),
                ("content", Value::String(form)) => data.content = Some(ContentForm::parse(form)?),
                ("fields", Value::Object(fields)) => data.fields = fields.clone(),
                ("blocks", Value::Object(blocks)) => {
                    for (index, wire) in blocks {
                        let parsed: usize = index.parse().ok()?;
                        if parsed.to_string() != *index {
                            return None;
                        }
                        data.blocks.insert(parsed, wire.clone());
                    }
                }
                _ => return None,
            }
        }
        Some(data)
    }

    /// Stores the data under `key` in `extra`, unless it is empty.
    pub(super) fn store(self, extra: &mut Map<String, Value>, key: &str) {
        if self.is_empty() {
            return;
        }
        let mut map = Map::new();
        if let Some(role) = self.role {
            map.insert("role".into(), Value::String(role));
        }
        if let Some(form) = self.content {
            map.insert("content".into(), form.name().into());
        }
        if !self.fields.is_empty() {
            map.insert("fields".into(), Value::Object(self.fields));
        }
        if !self.blocks.is_empty() {
            let blocks = self
                .blocks
                .into_iter()
                .map(|(index, wire)| (index.to_string(), wire))
                .collect();
            map.insert("blocks".into(), Value::Object(blocks));
        }
        extra.insert(key.into(), Value::Object(map));
    }

    /// Reports every entry as lost foreign data under `namespace`.
    fn report_foreign(&self, namespace: &str, message: usize, losses: &mut Vec<Loss>) {
        let mut lose = |block, path: String| {
            losses.push(Loss {
                message,
                block,
                kind: LossKind::ForeignVendorData { path },
            })
        };
        if self.is_empty() {
            lose(None, namespace.to_owned());
        }
        if self.role.is_some() {
            lose(None, format!("{namespace}.role"));
        }
        if self.content.is_some() {
            lose(None, format!("{namespace}.content"));
        }
        for key in self.fields.keys() {
            lose(None, format!("{namespace}.fields.{key}"));
        }
        for &index in self.blocks.keys() {
            lose(Some(index), format!("{namespace}.blocks.{index}"));
        }
    }
}

/// How one provider reads and renders the items of a `content` array.
pub(super) struct ContentCodec {
    /// Wire item → block; total (unrecognised items become [`Block::Unknown`]).
    pub(super) project: fn(&Value) -> Block,
    /// Block → canonical wire item; `None` for blocks that are not content items.
    pub(super) emit: fn(&Block) -> Option<Value>,
    /// The canonical form of empty content.
    pub(super) empty: ContentForm,
}

/// Keeps `wire` as vendor data for block `index` unless the canonical
/// rendering reproduces it.
pub(super) fn absorb(
    vendor: &mut VendorData,
    index: usize,
    wire: &Value,
    canonical: Option<Value>,
) {
    if canonical.as_ref() != Some(wire) {
        vendor.blocks.insert(index, wire.clone());
    }
}

/// The wire form for block `index`: its vendor entry when that still reads
/// back as `block` and differs from `canonical`, else `canonical`. The flag
/// tells whether the vendor entry was used.
pub(super) fn pick(
    message: usize,
    index: usize,
    block: &Block,
    canonical: Value,
    vendor: &VendorData,
    project: impl Fn(&Value) -> Option<Block>,
    losses: &mut Vec<Loss>,
) -> (Value, bool) {
    match vendor.blocks.get(&index) {
        Some(wire) if *wire != canonical && project(wire).as_ref() == Some(block) => {
            (wire.clone(), true)
        }
        Some(_) => {
            losses.push(Loss {
                message,
                block: Some(index),
                kind: LossKind::InvalidVendorData,
            });
            (canonical, false)
        }
        None => (canonical, false),
    }
}

fn canonical_form(content: &[&Block], plain_single: bool, empty: ContentForm) -> ContentForm {
    match content {
        [] => empty,
        [Block::Text { .. }] if plain_single => ContentForm::String,
        _ => ContentForm::Array,
    }
}

/// Reads a wire `content` value, appending its blocks to `blocks` and
/// recording in `vendor` what the canonical rendering would not reproduce.
pub(super) fn content_from_wire(
    content: Option<&Value>,
    blocks: &mut Vec<Block>,
    vendor: &mut VendorData,
    codec: &ContentCodec,
) -> Result<(), &'static str> {
    let start = blocks.len();
    let form = match content {
        None => ContentForm::Absent,
        Some(Value::Null) => ContentForm::Null,
        Some(Value::String(text)) => {
            blocks.push(Block::Text { text: text.clone() });
            ContentForm::String
        }
        Some(Value::Array(items)) => {
            for item in items {
                let block = (codec.project)(item);
                absorb(vendor, blocks.len(), item, (codec.emit)(&block));
                blocks.push(block);
            }
            ContentForm::Array
        }
        Some(_) => return Err("`content` is neither a string, an array nor null"),
    };
    let content: Vec<&Block> = blocks[start..].iter().collect();
    let plain_single = !vendor.blocks.contains_key(&start);
    if form != canonical_form(&content, plain_single, codec.empty) {
        vendor.content = Some(form);
    }
    Ok(())
}

/// Renders content blocks, given with their indices, as a wire `content`
/// value; `None` means the key is absent.
pub(super) fn content_to_wire(
    message: usize,
    content: &[(usize, &Block)],
    vendor: &VendorData,
    codec: &ContentCodec,
    losses: &mut Vec<Loss>,
) -> Option<Value> {
    let mut items = Vec::with_capacity(content.len());
    let mut any_vendor = false;
    for &(index, block) in content {
        if let Some(canonical) = (codec.emit)(block) {
            let project = |wire: &Value| Some((codec.project)(wire));
            let (wire, used) = pick(message, index, block, canonical, vendor, project, losses);
            any_vendor |= used;
            items.push(wire);
        }
    }
    let blocks: Vec<&Block> = content.iter().map(|&(_, block)| block).collect();
    let canonical = canonical_form(&blocks, !any_vendor, codec.empty);
    let form = match vendor.content {
        Some(ContentForm::Array) => ContentForm::Array,
        Some(form @ (ContentForm::Null | ContentForm::Absent)) if items.is_empty() => form,
        _ => canonical,
    };
    match (form, blocks.as_slice()) {
        (ContentForm::String, [Block::Text { text }]) => Some(Value::String(text.clone())),
        (ContentForm::Null, _) => Some(Value::Null),
        (ContentForm::Absent, _) => None,
        _ => Some(Value::Array(items)),
    }
}

/// Reports the message's metadata and foreign extra keys as losses and
/// returns its own vendor data (`own` is the provider's [`VENDOR_KEY`]).
pub(super) fn prepare(
    message: usize,
    msg: &Message,
    own: &str,
    losses: &mut Vec<Loss>,
) -> VendorData {
    let metadata = [
        ("usage", msg.usage.is_some()),
        ("provider_id", msg.provider_id.is_some()),
        ("model", msg.model.is_some()),
    ];
    for (field, set) in metadata {
        if set {
            losses.push(Loss {
                message,
                block: None,
                kind: LossKind::Metadata { field },
            });
        }
    }
    let mut vendor = VendorData::default();
    for (key, value) in &msg.extra {
        let parsed = VendorData::parse(value);
        match parsed {
            Some(data) if key == own => vendor = data,
            Some(data) if NAMESPACES.contains(&key.as_str()) => {
                data.report_foreign(key, message, losses)
            }
            None if key == own => losses.push(Loss {
                message,
                block: None,
                kind: LossKind::InvalidVendorData,
            }),
            _ => losses.push(Loss {
                message,
                block: None,
                kind: LossKind::ExtraField { key: key.clone() },
            }),
        }
    }
    vendor
}

/// Reports [`LossKind::NotReproduced`] for `msg` when no loss was reported for
/// it since `before` and reading its wire form back does not give it.
pub(super) fn verify(
    losses: &mut Vec<Loss>,
    before: usize,
    message: usize,
    msg: &Message,
    read_back: Result<Vec<Message>, ConversionError>,
) {
    if losses.len() == before && read_back.ok().as_deref() != Some(std::slice::from_ref(msg)) {
        losses.push(Loss {
            message,
            block: None,
            kind: LossKind::NotReproduced,
        });
    }
}

/// Reads a token counter: absent or null is zero.
pub(super) fn counter(
    usage: &Map<String, Value>,
    key: &str,
    provider: &'static str,
) -> Result<u64, ConversionError> {
    match usage.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(value) => value.as_u64().ok_or_else(|| ConversionError::InvalidUsage {
            provider,
            reason: format!("`{key}` is not a non-negative integer"),
        }),
    }
}
