//! Hand-written deserialisers for [`Message`] and [`Block`]: the reader's hot path.
//!
//! Derived serde code for a struct with a `#[serde(flatten)]` map, or for an
//! enum with a fallback variant, buffers every value into an intermediate tree
//! first; on a transcript that doubles the cost of a load. These visitors match
//! keys without allocating, read each field straight into its final type, and
//! only build a `Value` for what must stay opaque (tool inputs, unknown fields,
//! unknown blocks). Semantics are those of the obvious derived code: unknown
//! message fields go to [`Message::extra`]; a block whose `type` is unknown, or
//! whose known fields are missing or of the wrong JSON type, becomes
//! [`Block::Unknown`] with the whole object; unknown fields inside a known
//! block are ignored.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::{Block, Message, Role, Usage};

/// A JSON value read as a `String` when it is one, else kept as a `Value`.
enum Field {
    Str(String),
    Other(Value),
}

impl Field {
    fn into_value(self) -> Value {
        match self {
            Field::Str(s) => Value::String(s),
            Field::Other(v) => v,
        }
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
        Ok(Field::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Field, E> {
        Ok(Field::Str(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Field, E> {
        Ok(Field::Other(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Field, E> {
        Ok(Field::Other(Value::Number(v.into())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Field, E> {
        Ok(Field::Other(Value::Number(v.into())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Field, E> {
        Ok(Field::Other(
            Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Field, E> {
        Ok(Field::Other(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<Field, E> {
        Ok(Field::Other(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Field, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Field::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Field::Other)
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

/// An object key: one of `known` (by index), or any other key, owned.
enum Key {
    Known(usize),
    Other(String),
}

struct KeyVisitor(&'static [&'static str]);

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match self.0.iter().position(|k| *k == v) {
            Some(i) => Key::Known(i),
            None => Key::Other(v.to_owned()),
        })
    }
}

struct KeySeed(&'static [&'static str]);

impl<'de> de::DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_identifier(KeyVisitor(self.0))
    }
}

const BLOCK_KEYS: &[&str] = &[
    "type",
    "text",
    "signature",
    "id",
    "name",
    "input",
    "tool_use_id",
    "content",
    "is_error",
    "media_type",
    "data",
];
const INPUT: usize = 5;

/// Every field of a block object: the known keys by slot, the rest in order.
struct RawBlock {
    known: [Option<Field>; BLOCK_KEYS.len()],
    other: Vec<(String, Value)>,
}

impl RawBlock {
    fn get(&self, key: &str) -> Option<&Field> {
        let i = BLOCK_KEYS.iter().position(|k| *k == key)?;
        self.known[i].as_ref()
    }

    fn is_str(&self, key: &str) -> bool {
        matches!(self.get(key), Some(Field::Str(_)))
    }

    /// Is this a well-formed block of a known kind? Checked by reference
    /// first, so a malformed block is kept whole as `Unknown`.
    fn well_formed(&self) -> bool {
        let kind = match self.get("type") {
            Some(Field::Str(k)) => k.as_str(),
            _ => return false,
        };
        match kind {
            "text" => self.is_str("text"),
            "thinking" => {
                self.is_str("text")
                    && matches!(
                        self.get("signature"),
                        None | Some(Field::Str(_)) | Some(Field::Other(Value::Null))
                    )
            }
            "tool_use" => self.is_str("id") && self.is_str("name") && self.get("input").is_some(),
            "tool_result" => {
                self.is_str("tool_use_id")
                    && self.is_str("content")
                    && matches!(
                        self.get("is_error"),
                        None | Some(Field::Other(Value::Bool(_)))
                    )
            }
            "image" => self.is_str("media_type") && self.is_str("data"),
            _ => false,
        }
    }

    fn take(&mut self, key: &str) -> Option<Field> {
        let i = BLOCK_KEYS.iter().position(|k| *k == key)?;
        self.known[i].take()
    }

    fn take_str(&mut self, key: &str) -> String {
        match self.take(key) {
            Some(Field::Str(s)) => s,
            _ => String::new(),
        }
    }

    /// The typed block; only called after [`RawBlock::well_formed`].
    fn into_typed(mut self) -> Block {
        let kind = self.take_str("type");
        match kind.as_str() {
            "text" => Block::Text {
                text: self.take_str("text"),
            },
            "thinking" => Block::Thinking {
                text: self.take_str("text"),
                signature: match self.take("signature") {
                    Some(Field::Str(s)) => Some(s),
                    _ => None,
                },
            },
            "tool_use" => Block::ToolUse {
                id: self.take_str("id"),
                name: self.take_str("name"),
                input: self.take("input").map_or(Value::Null, Field::into_value),
            },
            "tool_result" => Block::ToolResult {
                tool_use_id: self.take_str("tool_use_id"),
                content: self.take_str("content"),
                is_error: matches!(self.take("is_error"), Some(Field::Other(Value::Bool(true)))),
            },
            _ => Block::Image {
                media_type: self.take_str("media_type"),
                data: self.take_str("data"),
            },
        }
    }

    fn into_value(self) -> Value {
        let mut map = Map::new();
        for (key, field) in BLOCK_KEYS.iter().zip(self.known) {
            if let Some(f) = field {
                map.insert((*key).to_string(), f.into_value());
            }
        }
        map.extend(self.other);
        Value::Object(map)
    }
}

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = Block;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content block object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
        let mut raw = RawBlock {
            known: Default::default(),
            other: Vec::new(),
        };
        while let Some(key) = map.next_key_seed(KeySeed(BLOCK_KEYS))? {
            match key {
                Key::Known(INPUT) => raw.known[INPUT] = Some(Field::Other(map.next_value()?)),
                Key::Known(i) => raw.known[i] = Some(map.next_value()?),
                Key::Other(k) => raw.other.push((k, map.next_value()?)),
            }
        }
        Ok(if raw.well_formed() {
            raw.into_typed()
        } else {
            Block::Unknown(raw.into_value())
        })
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(BlockVisitor)
    }
}

/// A message's content, allocated for its exact number of blocks: serde's
/// `Vec` makes room for four blocks at the first, and most messages have one
/// or two (three wasted blocks are a third of a typical line's size in
/// memory, for every message of a loaded transcript).
struct Blocks(Vec<Block>);

struct BlocksVisitor;

impl<'de> Visitor<'de> for BlocksVisitor {
    type Value = Blocks;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Blocks, A::Error> {
        let Some(first) = seq.next_element::<Block>()? else {
            return Ok(Blocks(Vec::new()));
        };
        let Some(second) = seq.next_element::<Block>()? else {
            return Ok(Blocks(vec![first]));
        };
        let mut blocks = vec![first, second];
        while let Some(block) = seq.next_element()? {
            blocks.push(block);
        }
        blocks.shrink_to_fit();
        Ok(Blocks(blocks))
    }
}

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(BlocksVisitor)
    }
}

const MESSAGE_KEYS: &[&str] = &[
    "role",
    "content",
    "usage",
    "provider_id",
    "model",
    "timestamp",
];

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut role: Option<Role> = None;
        let mut content: Option<Vec<Block>> = None;
        let mut usage: Option<Usage> = None;
        let mut provider_id: Option<String> = None;
        let mut model: Option<String> = None;
        let mut timestamp: Option<DateTime<Utc>> = None;
        let mut extra = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed(MESSAGE_KEYS))? {
            match key {
                Key::Known(0) => role = Some(map.next_value()?),
                Key::Known(1) => content = Some(map.next_value::<Blocks>()?.0),
                Key::Known(2) => usage = map.next_value()?,
                Key::Known(3) => provider_id = map.next_value()?,
                Key::Known(4) => model = map.next_value()?,
                Key::Known(_) => timestamp = map.next_value()?,
                Key::Other(k) => {
                    let v: Value = map.next_value()?;
                    extra.insert(k, v);
                }
            }
        }
        Ok(Message {
            role: role.ok_or_else(|| de::Error::missing_field("role"))?,
            content: content.ok_or_else(|| de::Error::missing_field("content"))?,
            usage,
            provider_id,
            model,
            timestamp,
            extra,
        })
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MessageVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_allocated_for_exactly_its_blocks() {
        for n in [0usize, 1, 2, 3, 5, 9] {
            let blocks: Vec<String> = (0..n)
                .map(|i| format!(r#"{{"type":"text","text":"t{i}"}}"#))
                .collect();
            let line = format!(r#"{{"role":"user","content":[{}]}}"#, blocks.join(","));
            let m: Message = serde_json::from_str(&line).unwrap();
            assert_eq!(m.content.len(), n);
            assert_eq!(m.content.capacity(), n, "{n} blocks");
        }
        // Content that is no list is refused as before.
        let err = serde_json::from_str::<Message>(r#"{"role":"user","content":"x"}"#);
        assert!(err.unwrap_err().to_string().contains("expected a sequence"));
    }
}
