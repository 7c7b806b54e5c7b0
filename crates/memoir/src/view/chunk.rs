//! Turning transcript messages into indexable chunks.
//!
//! Each message yields chunks in block order, all under the message's
//! `chain_seq`, numbered by `part`:
//!
//! | kind             | from                                   | text                      | embedding input                      |
//! |------------------|----------------------------------------|---------------------------|--------------------------------------|
//! | `user.text`      | user text blocks (joined)              | the text                  | `user: <text>`                       |
//! | `assistant.text` | assistant text blocks (joined)         | the text                  | `assistant: <text>`                  |
//! | `system.text`    | system text (only if enabled)          | the text                  | `system: <text>`                     |
//! | `assistant.thinking` | thinking blocks (only if enabled)  | the reasoning             | `assistant thinking: <text>`         |
//! | `tool.call`      | a `ToolUse` block                      | `<name> <arguments JSON>` | `tool call <name>: <arguments JSON>` |
//! | `tool.result`    | a `ToolResult` block                   | the result content        | `tool result <name>: <content>` (`tool error …` when failed) |
//!
//! The tool name of a result comes from the matching earlier call. A result
//! whose content was externalized to the blob store is loaded from the store
//! (and skipped when no store is given). Texts longer than
//! [`ChunkerConfig::max_chars`] are split into overlapping windows, cut at
//! whitespace where possible. Images and unknown blocks yield nothing;
//! whitespace-only texts are skipped. Several messages can share a
//! `chain_seq` (a `rewrite` record, or a fork whose inherited messages carry
//! the parent's seqs): their parts simply continue, so no chunk overwrites
//! another. The lexical index sees each chunk's embedding input between the
//! texts of its neighbouring chunks ([`ChunkerConfig::lexical_context`]).

use std::collections::HashMap;

use crate::blob::{parse_blob_ref, ArtifactStore};
use crate::message::{Block, Message, Role};

use super::types::ViewError;

/// How messages are cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkerConfig {
    /// Longest chunk, in characters.
    pub max_chars: usize,
    /// Characters shared by consecutive windows of a split text.
    pub overlap: usize,
    /// Index system messages too.
    pub include_system: bool,
    /// Index assistant reasoning (thinking blocks) too.
    pub include_thinking: bool,
    /// Chunks of context on each side added to a chunk's lexical input
    /// (the text of the chunks before and after it; default 1). The answer
    /// to a question usually sits next to it.
    pub lexical_context: usize,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        ChunkerConfig {
            max_chars: 1500,
            overlap: 200,
            include_system: false,
            include_thinking: false,
            lexical_context: 1,
        }
    }
}

/// One chunk ready to embed and index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The source record's `seq`.
    pub chain_seq: u64,
    /// The piece number within the record.
    pub part: u32,
    /// The kind tag (see the module table).
    pub kind: String,
    /// The text stored, hashed and grafted.
    pub text: String,
    /// The text embedded (and lexically indexed, unless `lexical_input` is set).
    pub embed_input: String,
    /// A different text for the lexical index (e.g. with surrounding context).
    pub lexical_input: Option<String>,
}

impl Chunk {
    /// The text the lexical index sees.
    pub fn lexical_text(&self) -> &str {
        self.lexical_input.as_deref().unwrap_or(&self.embed_input)
    }
}

/// Split `text` into windows of at most `max_chars` characters overlapping
/// by about `overlap`, preferring to end a window at whitespace.
pub fn split_text(text: &str, max_chars: usize, overlap: usize) -> Vec<String> {
    let max_chars = max_chars.max(16);
    let overlap = overlap.min(max_chars / 2);
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    let n = bounds.len() - 1; // characters
    if n <= max_chars {
        return vec![text.to_string()];
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let mut end = (start + max_chars).min(n);
        if end < n {
            // Back off to whitespace within the last fifth of the window.
            let floor = end - max_chars / 5;
            if let Some(ws) = (floor..end).rev().find(|&i| chars[i].is_whitespace()) {
                end = ws + 1;
            }
        }
        out.push(text[bounds[start]..bounds[end]].to_string());
        if end >= n {
            break;
        }
        let mut next = end.saturating_sub(overlap).max(start + 1);
        // Start the next window at a word boundary when one is near.
        if let Some(ws) = (next..end).find(|&i| chars[i].is_whitespace()) {
            if ws + 1 < end {
                next = ws + 1;
            }
        }
        start = next;
    }
    out
}

fn push_split(
    out: &mut Vec<Chunk>,
    part: &mut u32,
    seq: u64,
    kind: &str,
    prefix: &str,
    text: &str,
    cfg: &ChunkerConfig,
) {
    if text.trim().is_empty() {
        return;
    }
    for piece in split_text(text, cfg.max_chars, cfg.overlap) {
        out.push(Chunk {
            chain_seq: seq,
            part: *part,
            kind: kind.to_string(),
            embed_input: format!("{prefix}: {piece}"),
            lexical_input: None,
            text: piece,
        });
        *part += 1;
    }
}

/// Chunk `messages`; `seqs[i]` is the `chain_seq` of `messages[i]` (all in
/// the view's own session).
pub fn chunk_messages(
    messages: &[Message],
    seqs: &[u64],
    cfg: &ChunkerConfig,
    store: Option<&ArtifactStore>,
) -> Result<Vec<Chunk>, ViewError> {
    if messages.len() != seqs.len() {
        return Err(ViewError::Invalid(format!(
            "{} messages but {} sequence numbers",
            messages.len(),
            seqs.len()
        )));
    }
    let turns = messages.iter().zip(seqs).map(|(m, &seq)| ("", seq, m));
    Ok(chunk_sources(turns, cfg, store)?
        .into_iter()
        .map(|(_, c)| c)
        .collect())
}

/// Chunk every turn of a session's history ([`super::history::History`]),
/// in order. Each chunk comes with the index of the turn it came from;
/// parts are numbered per `(session, seq)`.
pub fn chunk_turns(
    turns: &[&super::history::Turn],
    cfg: &ChunkerConfig,
    store: Option<&ArtifactStore>,
) -> Result<Vec<(usize, Chunk)>, ViewError> {
    chunk_sources(
        turns
            .iter()
            .map(|t| (t.session.as_str(), t.seq, &t.message)),
        cfg,
        store,
    )
}

/// The chunker proper over `(session, seq, message)`; returns each chunk
/// with the position of its message in the input.
fn chunk_sources<'a>(
    messages: impl Iterator<Item = (&'a str, u64, &'a Message)>,
    cfg: &ChunkerConfig,
    store: Option<&ArtifactStore>,
) -> Result<Vec<(usize, Chunk)>, ViewError> {
    let mut tool_names: HashMap<&str, &str> = HashMap::new();
    // Messages can share a record (a rewrite record puts several messages):
    // parts continue, so no chunk overwrites another.
    let mut next_part: HashMap<(&str, u64), u32> = HashMap::new();
    let mut out = Vec::new();
    let mut owners = Vec::new();
    for (pos, (session, seq, msg)) in messages.enumerate() {
        let start = out.len();
        let mut part = next_part.get(&(session, seq)).copied().unwrap_or(0);
        let role = msg.role;
        let text = msg.text_content();
        match role {
            Role::System if !cfg.include_system => {}
            Role::User | Role::Assistant | Role::System | Role::Tool => {
                let kind = format!("{}.text", role.as_str());
                push_split(&mut out, &mut part, seq, &kind, role.as_str(), &text, cfg);
            }
        }
        for block in &msg.content {
            match block {
                Block::Thinking { text, .. } if cfg.include_thinking => {
                    push_split(
                        &mut out,
                        &mut part,
                        seq,
                        "assistant.thinking",
                        "assistant thinking",
                        text,
                        cfg,
                    );
                }
                Block::ToolUse { id, name, input } => {
                    tool_names.insert(id, name);
                    let args = serde_json::to_string(input).unwrap_or_default();
                    let text = format!("{name} {args}");
                    let prefix = format!("tool call {name}");
                    if text.trim().is_empty() {
                        continue;
                    }
                    for piece in split_text(&text, cfg.max_chars, cfg.overlap) {
                        out.push(Chunk {
                            chain_seq: seq,
                            part,
                            kind: "tool.call".into(),
                            embed_input: format!("{prefix}: {}", piece),
                            lexical_input: None,
                            text: piece,
                        });
                        part += 1;
                    }
                }
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let name = tool_names
                        .get(tool_use_id.as_str())
                        .copied()
                        .unwrap_or("tool");
                    let body = match (parse_blob_ref(content), store) {
                        (Some(hash), Some(store)) => store.load_string(hash)?,
                        (Some(_), None) => continue,
                        (None, _) => content.clone(),
                    };
                    let prefix = if *is_error {
                        format!("tool error {name}")
                    } else {
                        format!("tool result {name}")
                    };
                    push_split(&mut out, &mut part, seq, "tool.result", &prefix, &body, cfg);
                }
                _ => {}
            }
        }
        next_part.insert((session, seq), part);
        owners.extend(std::iter::repeat_n(pos, out.len() - start));
    }
    add_lexical_context(&mut out, cfg.lexical_context);
    Ok(owners.into_iter().zip(out).collect())
}

/// Set each chunk's lexical input to its embedding input surrounded by the
/// texts of the `n` chunks on each side.
pub fn add_lexical_context(chunks: &mut [Chunk], n: usize) {
    if n == 0 {
        return;
    }
    let inputs: Vec<String> = (0..chunks.len())
        .map(|i| {
            let lo = i.saturating_sub(n);
            let hi = (i + n).min(chunks.len() - 1);
            (lo..=hi)
                .map(|j| {
                    if j == i {
                        chunks[j].embed_input.as_str()
                    } else {
                        chunks[j].text.as_str()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    for (c, input) in chunks.iter_mut().zip(inputs) {
        c.lexical_input = Some(input);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_covers_the_text_with_overlap() {
        let text: String = (0..400).map(|i| format!("w{i} ")).collect();
        let parts = split_text(&text, 100, 20);
        assert!(parts.len() > 5);
        assert!(parts.iter().all(|p| p.chars().count() <= 100));
        for w in ["w0 ", "w199 ", "w399 "] {
            assert!(parts.iter().any(|p| p.contains(w)), "{w} lost");
        }
        // Consecutive windows share text.
        let tail: String = parts[0]
            .chars()
            .rev()
            .take(10)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        assert!(parts[1].contains(tail.trim()));
        assert_eq!(split_text("short", 100, 20), vec!["short"]);
        // Multi-byte text never splits inside a character.
        let wide = "é".repeat(500);
        assert!(split_text(&wide, 100, 10)
            .iter()
            .all(|p| p.chars().all(|c| c == 'é')));
    }

    #[test]
    fn kinds_and_embedding_inputs() {
        let msgs = vec![
            Message::system("be nice"),
            Message::user("find the bug"),
            Message::new(
                Role::Assistant,
                vec![
                    Block::Text {
                        text: "looking".into(),
                    },
                    Block::ToolUse {
                        id: "c1".into(),
                        name: "grep".into(),
                        input: json!({"pattern": "panic"}),
                    },
                ],
            ),
            Message::tool_result("c1", "src/a.rs:3: panic!()", false),
        ];
        let chunks = chunk_messages(&msgs, &[1, 2, 3, 4], &ChunkerConfig::default(), None).unwrap();
        let kinds: Vec<(&str, u64, u32)> = chunks
            .iter()
            .map(|c| (c.kind.as_str(), c.chain_seq, c.part))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("user.text", 2, 0),
                ("assistant.text", 3, 0),
                ("tool.call", 3, 1),
                ("tool.result", 4, 0)
            ]
        );
        assert_eq!(chunks[2].text, r#"grep {"pattern":"panic"}"#);
        assert_eq!(
            chunks[3].embed_input,
            "tool result grep: src/a.rs:3: panic!()"
        );
        assert_eq!(
            chunks[3].lexical_text(),
            "grep {\"pattern\":\"panic\"}\ntool result grep: src/a.rs:3: panic!()"
        );
        assert!(chunk_messages(&msgs, &[1], &ChunkerConfig::default(), None).is_err());
        // Two messages under one seq (a rewrite) get distinct parts.
        let two = [Message::user("a"), Message::assistant("b")];
        let c = chunk_messages(&two, &[5, 5], &ChunkerConfig::default(), None).unwrap();
        assert_eq!(c.iter().map(|c| c.part).collect::<Vec<_>>(), vec![0, 1]);
    }
}
