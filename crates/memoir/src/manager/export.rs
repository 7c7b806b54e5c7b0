//! Exporting a session: portable JSONL (the seed's `session-export` format),
//! OpenAI chat JSON and Markdown, optionally with secrets redacted.
//!
//! JSONL: a header line `{"type":"header","format":"memoir.session-export",
//! "formatVersion":1,"session_id":…,"created_at":…}`, one line per message
//! (`{"type":"message","index":i,…the message…}`, `index` from 0), and a
//! footer `{"type":"footer","messages":N}`; every line ends with `\n`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;

use serde_json::{json, Map, Value};

use crate::message::convert::{summarize_losses, LossSummary};
use crate::message::openai::to_openai_lossy;
use crate::message::{Block, Message};
use crate::transcript::Transcript;

/// The `format` named in a JSONL export's header.
pub const EXPORT_FORMAT: &str = "memoir.session-export";

/// The `formatVersion` of a JSONL export.
pub const EXPORT_VERSION: u32 = 1;

/// What an export looks like.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// Header, one line per message, footer.
    #[default]
    Jsonl,
    /// A JSON array of OpenAI chat-completions messages.
    OpenAi,
    /// A readable Markdown document.
    Markdown,
}

impl FromStr for ExportFormat {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "jsonl" => Ok(ExportFormat::Jsonl),
            "openai" => Ok(ExportFormat::OpenAi),
            "markdown" | "md" => Ok(ExportFormat::Markdown),
            other => Err(crate::Error::Invalid(format!(
                "unknown export format {other:?} (expected jsonl, openai or markdown)"
            ))),
        }
    }
}

impl ExportFormat {
    /// The format's name as accepted by [`FromStr`].
    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::OpenAi => "openai",
            ExportFormat::Markdown => "markdown",
        }
    }
}

/// How to export.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// The output format.
    pub format: ExportFormat,
    /// Replace high-confidence secrets with `[REDACTED:<kind>]`.
    pub redact: bool,
}

/// An export and what went into it.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The exported text.
    pub text: String,
    /// Messages exported.
    pub messages: usize,
    /// Secrets replaced (empty without `redact`).
    pub redactions: Redactions,
    /// What the OpenAI shape could not carry, one description each (empty
    /// for the other formats).
    pub losses: Vec<String>,
    /// The same losses counted once per kind: what a front reports.
    pub loss_summary: Vec<LossSummary>,
}

/// How many secrets an export replaced, per redaction rule id
/// (`aws-access-token`, `password-assignment`...; see `manager::redact`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactions {
    /// Count per rule id.
    pub counts: BTreeMap<String, usize>,
}

impl Redactions {
    /// Total replacements.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    /// Count `n` more replacements by `rule`.
    pub fn add(&mut self, rule: &str, n: usize) {
        if n > 0 {
            *self.counts.entry(rule.to_string()).or_default() += n;
        }
    }
}

/// `t` with its secrets replaced when `redact` is set.
fn redacted(t: &Transcript, redact: bool) -> crate::Result<(Cow<'_, Transcript>, Redactions)> {
    if !redact {
        return Ok((Cow::Borrowed(t), Redactions::default()));
    }
    #[cfg(feature = "redact")]
    {
        let (t, r) = super::redact::redact_transcript(t)?;
        Ok((Cow::Owned(t), r))
    }
    #[cfg(not(feature = "redact"))]
    Err(crate::Error::Invalid(
        "this build of memoir cannot redact (cargo feature `redact`)".into(),
    ))
}

/// Export a transcript.
pub fn render(t: &Transcript, options: ExportOptions) -> crate::Result<Export> {
    let (t, redactions) = redacted(t, options.redact)?;
    let t = t.as_ref();
    let messages = &t.messages;
    let mut losses = Vec::new();
    let mut loss_summary = Vec::new();
    let text = match options.format {
        ExportFormat::Jsonl => jsonl(t, messages)?,
        ExportFormat::OpenAi => {
            let lossy = to_openai_lossy(messages);
            losses = lossy.losses.iter().map(|l| l.to_string()).collect();
            loss_summary = summarize_losses(&lossy.losses);
            let mut text = serde_json::to_string_pretty(&lossy.value)?;
            text.push('\n');
            text
        }
        ExportFormat::Markdown => markdown(t, messages),
    };
    Ok(Export {
        text,
        messages: messages.len(),
        redactions,
        losses,
        loss_summary,
    })
}

fn jsonl(t: &Transcript, messages: &[Message]) -> crate::Result<String> {
    let mut out = String::new();
    let header = json!({
        "type": "header",
        "format": EXPORT_FORMAT,
        "formatVersion": EXPORT_VERSION,
        "session_id": t.meta.id,
        "created_at": t.meta.created_at,
    });
    out.push_str(&serde_json::to_string(&header)?);
    out.push('\n');
    for (index, m) in messages.iter().enumerate() {
        let mut line = Map::new();
        line.insert("type".into(), Value::String("message".into()));
        line.insert("index".into(), json!(index));
        // The record seq `sessions show` prints (a fork's inherited
        // messages carry their parent's seq and `inherited: true`).
        if let Some(seq) = t.message_seqs.get(index) {
            line.insert("seq".into(), json!(seq));
        }
        if index < t.inherited {
            line.insert("inherited".into(), json!(true));
        }
        if let Value::Object(fields) = serde_json::to_value(m)? {
            for (k, v) in fields {
                line.entry(k).or_insert(v);
            }
        }
        out.push_str(&serde_json::to_string(&line)?);
        out.push('\n');
    }
    let footer = json!({"type": "footer", "messages": messages.len()});
    out.push_str(&serde_json::to_string(&footer)?);
    out.push('\n');
    Ok(out)
}

/// A code fence longer than any backtick run in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat(longest.max(2) + 1)
}

fn code_block(out: &mut String, lang: &str, text: &str) {
    let f = fence(text);
    let _ = writeln!(out, "{f}{lang}\n{text}\n{f}\n");
}

fn markdown(t: &Transcript, messages: &[Message]) -> String {
    let mut out = String::new();
    let title = t.title.as_deref().unwrap_or(&t.meta.id);
    let _ = writeln!(out, "# {title}\n");
    let _ = writeln!(out, "- session: `{}`", t.meta.id);
    let _ = writeln!(out, "- created: {}", t.meta.created_at.to_rfc3339());
    if !t.meta.provider.is_empty() || !t.meta.model.is_empty() {
        let _ = writeln!(out, "- model: {} {}", t.meta.provider, t.meta.model);
    }
    if let Some(p) = &t.meta.parent {
        let _ = writeln!(
            out,
            "- forked from `{}` through seq {} ({} messages)",
            p.session, p.seq, p.messages
        );
    }
    let _ = writeln!(out, "- messages: {}", messages.len());
    for (i, m) in messages.iter().enumerate() {
        // Numbered by record seq, as `sessions show` prints it.
        let seq = t.message_seqs.get(i).copied().unwrap_or_default();
        let from = match &t.meta.parent {
            Some(p) if i < t.inherited => format!(" (from `{}`)", p.session),
            _ => String::new(),
        };
        let _ = writeln!(out, "\n## seq {seq}{from} · {}\n", m.role.as_str());
        for block in &m.content {
            match block {
                Block::Text { text } => {
                    let _ = writeln!(out, "{text}\n");
                }
                Block::Thinking { text, .. } => {
                    for line in text.lines() {
                        let _ = writeln!(out, "> {line}");
                    }
                    out.push('\n');
                }
                Block::ToolUse { id, name, input } => {
                    let _ = writeln!(out, "**tool call** `{name}` (`{id}`)\n");
                    let args = serde_json::to_string_pretty(input).unwrap_or_default();
                    code_block(&mut out, "json", &args);
                }
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let what = if *is_error {
                        "tool error"
                    } else {
                        "tool result"
                    };
                    let _ = writeln!(out, "**{what}** (`{tool_use_id}`)\n");
                    code_block(&mut out, "", content);
                }
                Block::Image { media_type, data } => {
                    let _ = writeln!(out, "*image {media_type}, {} bytes base64*\n", data.len());
                }
                Block::Unknown(v) => code_block(&mut out, "json", &v.to_string()),
            }
        }
    }
    out
}
