//! Making planned records readable before they are written: an importer
//! maps what it understands and keeps the rest verbatim, but a content item
//! that is not a JSON object (`null`, a number, a string, an array) cannot
//! be a block in a transcript line (the reader refuses the line). Such an
//! item is kept as a raw block, `{"type":"raw","value":<the item>}`; a
//! record the reader would still refuse is dropped and reported as skipped
//! (file and line). Applied to every planned session the same way on every
//! run, so cursors' digests stay comparable.

use serde_json::{Map, Value};

use super::{Parsed, Skipped};
use crate::message::{Block, Message, SOURCE_KEY};
use crate::record::Record;

/// The `type` of the block that keeps a content item that was not an object.
pub const RAW_BLOCK: &str = "raw";

/// Make every record of `parsed` readable (see the module doc); records
/// that cannot be are removed and reported in `parsed.skipped`.
pub(crate) fn make_readable(parsed: &mut Parsed, file: &std::path::Path) {
    let mut skipped = Vec::new();
    for planned in &mut parsed.sessions {
        planned.records.retain_mut(|record| {
            wrap_record(record);
            match crate::store::line::check_readable(record) {
                Ok(()) => true,
                Err(why) => {
                    skipped.push(Skipped {
                        file: file.to_path_buf(),
                        line: source_line(record).unwrap_or(0),
                        reason: format!("could not be kept as a readable record: {why}"),
                    });
                    false
                }
            }
        });
    }
    parsed.skipped.extend(skipped);
}

fn wrap_record(record: &mut Record) {
    match record {
        Record::Message(m) => wrap_message(m),
        Record::Rewrite { messages } => messages.iter_mut().for_each(wrap_message),
        _ => {}
    }
}

fn wrap_message(m: &mut Message) {
    for block in m.content.iter_mut() {
        if let Block::Unknown(value) = block {
            if !value.is_object() {
                let mut raw = Map::new();
                raw.insert("type".into(), Value::String(RAW_BLOCK.into()));
                raw.insert("value".into(), value.take());
                *value = Value::Object(raw);
            }
        }
    }
}

/// The source line a record came from, when its trace says.
fn source_line(record: &Record) -> Option<u64> {
    match record {
        Record::Message(m) => m.extra.get(SOURCE_KEY)?.get("line")?.as_u64(),
        Record::Unknown { raw, .. } => raw.get("line")?.as_u64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;
    use serde_json::json;

    #[test]
    fn items_that_are_not_objects_become_raw_blocks_that_read_back() {
        for item in [
            json!(null),
            json!(1),
            json!("x"),
            json!(true),
            json!([1, [2]]),
        ] {
            let mut record = Record::Message(Message::new(
                Role::User,
                vec![
                    Block::Unknown(item.clone()),
                    Block::Text { text: "t".into() },
                ],
            ));
            assert!(
                crate::store::line::check_readable(&record).is_err(),
                "{item}"
            );
            wrap_record(&mut record);
            crate::store::line::check_readable(&record).unwrap();
            let Record::Message(m) = &record else {
                unreachable!()
            };
            assert_eq!(
                m.content[0],
                Block::Unknown(json!({"type": "raw", "value": item}))
            );
        }
    }
}
