//! Exporting a session: portable JSONL (the seed's `session-export` format),
//! OpenAI chat JSON, Markdown and a self-contained HTML page (`html`),
//! optionally with secrets redacted.
//!
//! JSONL: a header line `{"type":"header","format":"memoir.session-export",
//! "formatVersion":1,"session_id":…,"created_at":…}`, one line per message
//! (`{"type":"message","index":i,…the message…}`, `index` from 0), and a
//! footer `{"type":"footer","messages":N}`; every line ends with `\n`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::str::FromStr;

use serde_json::{json, Map, Value};

use crate::message::convert::{summarize_losses, LossSummary};
use crate::message::openai::to_openai_lossy;
use crate::message::{Block, Message};
use crate::transcript::Transcript;

pub use super::redactions::Redactions;

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
    /// One self-contained HTML page (inline style, no script, no request).
    Html,
}

impl FromStr for ExportFormat {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "jsonl" => Ok(ExportFormat::Jsonl),
            "openai" => Ok(ExportFormat::OpenAi),
            "markdown" | "md" => Ok(ExportFormat::Markdown),
            "html" => Ok(ExportFormat::Html),
            other => Err(crate::Error::Invalid(format!(
                "unknown export format {other:?} (expected jsonl, openai, markdown or html)"
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
            ExportFormat::Html => "html",
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
        ExportFormat::Html => super::html::render(t, messages),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    /// Text that would be markup, a URL or a broken page if it reached the
    /// HTML unescaped, in every place session text lands (title, meta,
    /// text, thinking, tool name, input and result, model, unknown blocks).
    const HOSTILE: [&str; 8] = [
        "<script>alert(1)</script>",
        "</style><script>alert(2)</script>",
        "<a href=\"javascript:alert(3)\">x</a>",
        "\" onmouseover=\"alert(4)",
        "' autofocus onfocus='alert(5)",
        "&lt;script&gt;alert(6)&lt;/script&gt;",
        "</textarea></pre></details><img src=x onerror=alert(7)>",
        "nul\u{0} esc\u{1b}[31m del\u{7f} c1\u{85}\u{9b} bell\u{7}",
    ];

    fn hostile_transcript() -> Transcript {
        let all = HOSTILE.join(" | ");
        let mut meta = crate::SessionMeta::new("hostile");
        meta.model = all.clone();
        let mut t = Transcript::new(meta);
        t.title = Some(all.clone());
        let mut assistant = Message::assistant(all.clone());
        assistant.model = Some(all.clone());
        assistant.content.push(Block::Thinking {
            text: all.clone(),
            signature: None,
        });
        assistant.content.push(Block::ToolUse {
            id: "call-1".into(),
            name: all.clone(),
            input: json!({ "cmd": all.clone() }),
        });
        assistant
            .content
            .push(Block::Unknown(json!({ "x": all.clone() })));
        assistant.content.push(Block::Image {
            media_type: all.clone(),
            data: all.clone(),
        });
        let mut result = Message::user(String::new());
        result.role = Role::User;
        result.content = vec![Block::ToolResult {
            tool_use_id: "call-1".into(),
            content: all.clone(),
            is_error: true,
        }];
        t.messages = vec![Message::user(all.clone()), assistant, result];
        t
    }

    #[test]
    fn html_export_escapes_every_hostile_text() {
        let t = hostile_transcript();
        let page = render(
            &t,
            ExportOptions {
                format: ExportFormat::Html,
                redact: false,
            },
        )
        .unwrap()
        .text;
        let lower = page.to_lowercase();
        // No element, attribute or URL came from the content.
        assert!(!lower.contains("<script"), "a script element");
        assert!(!lower.contains("<img src=x"), "an injected image");
        assert!(!lower.contains("javascript:alert(3)\">"), "a live link");
        assert_eq!(lower.matches("<style>").count(), 1);
        assert_eq!(lower.matches("</style>").count(), 1);
        // Every tag and attribute is one the exporter writes: content that
        // looks like an attribute stayed inside text or a quoted value.
        let tags = [
            "!doctype", "html", "head", "meta", "title", "style", "body", "main", "header", "h1",
            "dl", "dt", "dd", "p", "section", "article", "div", "span", "time", "a", "details",
            "summary", "pre", "img",
        ];
        let attributes = [
            "lang",
            "charset",
            "http-equiv",
            "content",
            "name",
            "class",
            "id",
            "href",
            "datetime",
            "aria-label",
            "alt",
            "src",
            "html",
        ];
        for tag in page.split('<').skip(1) {
            let inner = tag.split('>').next().unwrap().trim_start_matches('/');
            // Quoted values removed (content cannot hold a `"`).
            let bare: String = inner.split('"').step_by(2).collect();
            // The only links are the page's own anchors.
            if inner.contains("href=") {
                assert!(inner.contains("href=\"#m-"), "link <{inner}>");
            }
            let mut words = bare.split_whitespace();
            let name = words.next().unwrap_or("").to_lowercase();
            assert!(tags.contains(&name.as_str()), "tag <{inner}>");
            for w in words {
                let attr = w.trim_end_matches('=').to_lowercase();
                assert!(
                    attributes.contains(&attr.as_str()),
                    "attribute {w} in <{inner}>"
                );
            }
        }
        // Entities in the content stay text, visibly.
        assert!(page.contains("&amp;lt;script&amp;gt;alert(6)"));
        // Controls are shown as symbols, never passed through.
        for c in page.chars() {
            assert!(!c.is_control() || c == '\n', "control {c:?} in the page");
        }
        assert!(
            page.contains('\u{2400}') && page.contains('\u{241b}') && page.contains('\u{2421}')
        );
        // Every hostile text is there, as text.
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("&lt;/style&gt;&lt;script&gt;alert(2)"));
        assert!(page.contains("Content-Security-Policy"));
    }
}
