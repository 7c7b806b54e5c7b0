//! What of a message is searchable: its text, reasoning, tool calls (name and
//! arguments) and tool results, as one string, capped in size.

use serde_json::Value;

use crate::message::{Block, Message};

/// At most this many bytes of one message are indexed (a huge tool output is
/// cut, so one record never makes a document of unbounded size).
pub const MAX_DOC_BYTES: usize = 64 * 1024;

/// The searchable side of one message.
#[derive(Debug, Default, PartialEq)]
pub struct MessageText {
    /// Text, reasoning, tool calls and results, one block per line.
    pub text: String,
    /// `(call id, tool name)` of each tool call the message makes.
    pub calls: Vec<(String, String)>,
    /// The ids of the calls the message answers.
    pub answers: Vec<String>,
}

/// The content hash of a document's text (BLAKE3): `docs.chash`, the key
/// of stored vectors, and what a text read back from a log is checked
/// against.
pub fn content_hash(text: &str) -> super::cursor::RecordHash {
    *blake3::hash(text.as_bytes()).as_bytes()
}

/// Extract the searchable text of `m`.
pub fn of_message(m: &Message) -> MessageText {
    let mut out = MessageText::default();
    for block in &m.content {
        match block {
            Block::Text { text } | Block::Thinking { text, .. } => push_line(&mut out.text, text),
            Block::ToolUse { id, name, input } => {
                let mut line = name.clone();
                flatten_json(input, &mut line);
                push_line(&mut out.text, &line);
                out.calls.push((id.clone(), name.clone()));
            }
            Block::ToolResult {
                tool_use_id,
                content,
                ..
            } => {
                push_line(&mut out.text, content);
                out.answers.push(tool_use_id.clone());
            }
            Block::Image { .. } | Block::Unknown(_) => {}
        }
    }
    truncate_at_char(&mut out.text, MAX_DOC_BYTES);
    out
}

fn push_line(out: &mut String, text: &str) {
    if out.len() >= MAX_DOC_BYTES {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

/// The string values (and keys) of a JSON value, space separated, so
/// `{"command": "cargo test"}` is searchable as words.
fn flatten_json(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push(' ');
            out.push_str(s);
        }
        Value::Number(n) => {
            out.push(' ');
            out.push_str(&n.to_string());
        }
        Value::Bool(_) | Value::Null => {}
        Value::Array(a) => a.iter().for_each(|x| flatten_json(x, out)),
        Value::Object(o) => {
            for (k, x) in o {
                out.push(' ');
                out.push_str(k);
                flatten_json(x, out);
            }
        }
    }
}

fn truncate_at_char(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn tool_calls_and_results_are_searchable_and_size_is_capped() {
        let m = Message::new(
            Role::Assistant,
            vec![
                Block::Text {
                    text: "running the tests".into(),
                },
                Block::ToolUse {
                    id: "c1".into(),
                    name: "Bash".into(),
                    input: serde_json::json!({"command": "cargo test", "timeout": 60}),
                },
            ],
        );
        let t = of_message(&m);
        assert_eq!(
            t.text,
            "running the tests\nBash command cargo test timeout 60"
        );
        assert_eq!(t.calls, vec![("c1".to_string(), "Bash".to_string())]);
        let r = of_message(&Message::tool_result("c1", "é".repeat(MAX_DOC_BYTES), true));
        assert_eq!(r.answers, vec!["c1".to_string()]);
        assert!(r.text.len() <= MAX_DOC_BYTES && r.text.len() > MAX_DOC_BYTES - 2);
    }
}
