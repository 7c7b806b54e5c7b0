//! Gemini CLI chats (`~/.gemini/tmp/<project>/chats/session-*.json` and,
//! from 0.58, `session-*.jsonl`) into planned memoir sessions.
//!
//! The legacy format is one JSON object (`sessionId`, `projectHash`,
//! `startTime`, `messages[]`) rewritten on every save; the JSONL format is a
//! meta line, one line per message event (`type: user|gemini|info|error|…`,
//! a later line with the same `id` replacing the earlier) and `{"$set":{…}}`
//! lines that update the session's metadata. `gemini` messages carry their
//! `thoughts` (thinking), text, `toolCalls` (tool calls, whose results
//! become a tool message right after) and `tokens` (usage: input excludes
//! cached tokens; thought tokens are part of the output). Gemini does not
//! store the working directory: the project comes from `projects.json`
//! (matched by name or by the SHA-256 `projectHash`). Other events and the
//! `$set` lines are kept verbatim as source records.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::lines::{self, Line};
use super::{make_id, source_record, str_of, time_of, Agent, Parsed, Planned};
use crate::message::{Block, Message, Role, Usage, SOURCE_KEY};
use crate::record::{Record, SessionMeta, SourceRef};

const AGENT: Agent = Agent::GeminiCli;

/// Parse one Gemini CLI chat file (either format).
pub fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let trimmed = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    let legacy = path.extension().is_some_and(|e| e == "json") && bytes.get(trimmed) == Some(&b'{');
    let (meta_obj, events, mut parsed) = if legacy {
        match serde_json::from_slice::<Map<String, Value>>(bytes) {
            Ok(obj) => {
                let events: Vec<Line> = obj
                    .get("messages")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .enumerate()
                            .filter_map(|(i, m)| {
                                m.as_object().map(|o| Line {
                                    number: i as u64 + 1,
                                    value: o.clone(),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let mut meta = obj;
                meta.remove("messages");
                let parsed = Parsed {
                    consumed: bytes.len() as u64,
                    complete_lines: events.len() as u64,
                    ..Parsed::default()
                };
                (meta, events, parsed)
            }
            Err(e) => {
                let parsed = Parsed {
                    skipped: vec![super::Skipped {
                        file: path.to_path_buf(),
                        line: 1,
                        reason: format!("not a Gemini chat: {e}"),
                    }],
                    ..Parsed::default()
                };
                return Parsed {
                    // A half-written rewrite: retried next run.
                    consumed: 0,
                    ..parsed
                };
            }
        }
    } else {
        let file = lines::parse(path, bytes);
        let parsed = Parsed {
            skipped: file.skipped,
            torn: file.torn,
            consumed: file.consumed,
            complete_lines: file.complete_lines,
            ..Parsed::default()
        };
        let mut meta = Map::new();
        let mut events = Vec::new();
        for (i, l) in file.lines.into_iter().enumerate() {
            if i == 0 && l.value.contains_key("sessionId") && !l.value.contains_key("type") {
                meta = l.value;
            } else {
                events.push(l);
            }
        }
        (meta, events, parsed)
    };

    let mut meta_obj = meta_obj;
    // Later lines replace earlier ones with the same id (streamed updates).
    let mut ordered: Vec<Line> = Vec::with_capacity(events.len());
    for e in events {
        if let Some(Value::Object(set)) = e.value.get("$set") {
            for (k, v) in set {
                meta_obj.insert(k.clone(), v.clone());
            }
            ordered.push(e);
            continue;
        }
        let id = str_of(&e.value, "id").map(str::to_string);
        match id.and_then(|id| {
            ordered
                .iter()
                .position(|o| str_of(&o.value, "id") == Some(&id))
        }) {
            Some(k) => ordered[k] = e,
            None => ordered.push(e),
        }
    }

    let mut records = Vec::new();
    for e in &ordered {
        match str_of(&e.value, "type") {
            Some("user") => {
                let mut m = Message::new(Role::User, content_blocks(e.value.get("content")));
                trace(&mut m, e);
                records.push(Record::Message(m));
            }
            Some("gemini") => gemini_message(e, &mut records),
            _ => records.push(source_record(AGENT, e.number, e.value.clone())),
        }
    }
    let sid = str_of(&meta_obj, "sessionId")
        .map(str::to_string)
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let mut meta = SessionMeta::new(make_id(AGENT, &[&sid]));
    meta.created_at = time_of(&meta_obj, "startTime")
        .or_else(|| ordered.first().and_then(|e| time_of(&e.value, "timestamp")))
        .unwrap_or_else(chrono::Utc::now);
    meta.provider = "google".into();
    meta.model = records
        .iter()
        .find_map(|r| match r {
            Record::Message(m) => m.model.clone(),
            _ => None,
        })
        .unwrap_or_default();
    meta.workspace = project_path(path, str_of(&meta_obj, "projectHash")).unwrap_or_default();
    meta.title = str_of(&meta_obj, "summary")
        .map(crate::manager::short_title)
        .or_else(|| super::first_user_title(&records));
    meta.kind = Some("imported".into());
    let mut extra = Map::new();
    for (k, v) in &meta_obj {
        if !matches!(k.as_str(), "sessionId" | "startTime") {
            extra.insert(k.clone(), v.clone());
        }
    }
    meta.source = Some(SourceRef {
        agent: AGENT.as_str().into(),
        agent_version: None,
        session: Some(sid),
        path: Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
        extra,
    });
    parsed.sessions.push(Planned {
        key: "main".into(),
        meta,
        fork: None,
        records,
    });
    parsed
}

fn trace(m: &mut Message, e: &Line) {
    m.timestamp = time_of(&e.value, "timestamp");
    let entry: Map<String, Value> = e
        .value
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "content" | "thoughts" | "toolCalls"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    m.extra.insert(
        SOURCE_KEY.into(),
        json!({"line": e.number, "uuid": str_of(&e.value, "id"), "entry": entry}),
    );
}

fn content_blocks(content: Option<&Value>) -> Vec<Block> {
    match content {
        Some(Value::String(s)) => vec![Block::Text { text: s.clone() }],
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match p.get("text").and_then(Value::as_str) {
                Some(t) => Block::Text { text: t.into() },
                None => match p.get("inlineData") {
                    Some(d) => Block::Image {
                        media_type: d
                            .get("mimeType")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .into(),
                        data: d.get("data").and_then(Value::as_str).unwrap_or("").into(),
                    },
                    None => Block::Unknown(p.clone()),
                },
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn gemini_message(e: &Line, records: &mut Vec<Record>) {
    let v = &e.value;
    let mut blocks = Vec::new();
    if let Some(Value::Array(thoughts)) = v.get("thoughts") {
        for t in thoughts {
            let subject = t.get("subject").and_then(Value::as_str).unwrap_or("");
            let desc = t.get("description").and_then(Value::as_str).unwrap_or("");
            let text = match (subject.is_empty(), desc.is_empty()) {
                (false, false) => format!("{subject}: {desc}"),
                (false, true) => subject.to_string(),
                _ => desc.to_string(),
            };
            blocks.push(Block::Thinking {
                text,
                signature: None,
            });
        }
    }
    blocks.extend(content_blocks(v.get("content")));
    let mut results = Vec::new();
    if let Some(Value::Array(calls)) = v.get("toolCalls") {
        for c in calls {
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            blocks.push(Block::ToolUse {
                id: id.clone(),
                name: c.get("name").and_then(Value::as_str).unwrap_or("").into(),
                input: c.get("args").cloned().unwrap_or(Value::Null),
            });
            if c.get("result").is_some() || c.get("resultDisplay").is_some() {
                results.push(Block::ToolResult {
                    tool_use_id: id,
                    content: tool_output(c),
                    is_error: c.get("status").and_then(Value::as_str) == Some("error"),
                });
            }
        }
    }
    let mut m = Message::new(Role::Assistant, blocks);
    trace(&mut m, e);
    m.model = str_of(v, "model").map(str::to_string);
    if let Some(Value::Object(t)) = v.get("tokens") {
        let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cached = n("cached");
        m.usage = Some(Usage {
            input_tokens: n("input").saturating_sub(cached),
            output_tokens: n("output") + n("thoughts"),
            cache_read_input_tokens: cached,
            reasoning_tokens: n("thoughts"),
            ..Usage::default()
        });
    }
    records.push(Record::Message(m));
    if !results.is_empty() {
        let mut r = Message::new(Role::Tool, results);
        r.timestamp = time_of(v, "timestamp");
        r.extra.insert(
            SOURCE_KEY.into(),
            json!({"line": e.number, "uuid": str_of(v, "id"), "tool_results": true}),
        );
        records.push(Record::Message(r));
    }
}

/// The text of a tool call's result.
fn tool_output(call: &Value) -> String {
    let from_response = call
        .get("result")
        .and_then(Value::as_array)
        .and_then(|parts| {
            parts.iter().find_map(|p| {
                let r = p.get("functionResponse")?.get("response")?;
                r.get("output")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| Some(r.to_string()))
            })
        });
    from_response
        .or_else(|| {
            call.get("resultDisplay")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| call.get("result").map(Value::to_string).unwrap_or_default())
}

/// The project a chat belongs to: `~/.gemini/projects.json` maps project
/// paths to the names used under `tmp/`; older trees use the SHA-256 of the
/// path instead of a name.
fn project_path(chat: &Path, project_hash: Option<&str>) -> Option<PathBuf> {
    let project_dir = chat.parent()?.parent()?;
    let key = project_dir.file_name()?.to_string_lossy().into_owned();
    let home = project_dir.parent()?.parent()?;
    let text = std::fs::read(home.join("projects.json")).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    let map = v.get("projects").unwrap_or(&v).as_object()?;
    let sha = |p: &str| {
        let mut h = Sha256::new();
        h.update(p.as_bytes());
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    map.iter()
        .find(|(path, name)| {
            name.as_str() == Some(key.as_str())
                || sha(path) == key
                || project_hash.is_some_and(|h| sha(path) == h)
        })
        .map(|(path, _)| PathBuf::from(path))
}
