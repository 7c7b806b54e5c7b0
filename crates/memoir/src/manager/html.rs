//! A session as one self-contained HTML page (`sessions export --format
//! html`): the conversation with `memoir ui`'s look, its stylesheet inline,
//! no script, nothing loaded from elsewhere (a `Content-Security-Policy`
//! meta tag forbids it), thinking and tool calls in `<details>`.
//!
//! Every piece of session text goes through [`escape`]: markup characters
//! become entities, control characters become visible symbols; the only
//! links are the page's own `#m-N` anchors, so no content can become an
//! element, an attribute or a URL.

use std::fmt::Write as _;

use crate::message::{Block, Message};
use crate::transcript::Transcript;

/// The exported page's stylesheet (a subset of `memoir ui`'s).
const CSS: &str = include_str!("export.css");

/// The page's policy: no script, no request, only its own inline style and
/// the session's own pictures.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
     base-uri 'none'; form-action 'none'";

/// `text` safe as HTML text and as a quoted attribute value: `& < > " '`
/// as entities; C0 controls (but tab, newline, carriage return), DEL and C1
/// controls as visible symbols (U+2400 block, or U+FFFD for C1).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}')),
            '\u{7f}' => out.push('\u{2421}'),
            '\u{80}'..='\u{9f}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A `data:` URL for an inline image, when its type is a plain image type
/// and its data plain base64 (anything else is not embedded).
fn image_url(media_type: &str, data: &str) -> Option<String> {
    let known = matches!(
        media_type,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    );
    let base64 = !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    (known && base64).then(|| format!("data:{media_type};base64,{data}"))
}

fn tool_input(input: &serde_json::Value) -> String {
    match input {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

fn block(out: &mut String, b: &Block, results: &std::collections::HashMap<&str, (&str, bool)>) {
    match b {
        Block::Text { text } => {
            let _ = writeln!(out, "<div class=\"text\">{}</div>", escape(text));
        }
        Block::Thinking { text, .. } => {
            let _ = writeln!(
                out,
                "<details class=\"thinking\"><summary>Thinking</summary><div class=\"text\">{}</div></details>",
                escape(text)
            );
        }
        Block::ToolUse { id, name, input } => {
            let result = results.get(id.as_str());
            let failed = result.is_some_and(|r| r.1);
            let _ = write!(
                out,
                "<details class=\"tool{}\"><summary><span class=\"tool-name\">{}</span>{}</summary>\
                 <div class=\"tool-panes\"><div class=\"call\"><div class=\"pane-title\">Call</div>\
                 <pre class=\"code\">{}</pre></div>",
                if failed { " failed" } else { "" },
                escape(name),
                if failed {
                    " <span class=\"badge warn\">error</span>"
                } else {
                    ""
                },
                escape(&tool_input(input)),
            );
            match result {
                Some((content, is_error)) => {
                    let _ = write!(
                        out,
                        "<div class=\"result{}\"><div class=\"pane-title\">{}</div><pre class=\"code\">{}</pre></div>",
                        if *is_error { " is-error" } else { "" },
                        if *is_error { "Result (error)" } else { "Result" },
                        escape(content)
                    );
                }
                None => out.push_str(
                    "<div class=\"result pending\"><div class=\"pane-title\">No result recorded</div></div>",
                ),
            }
            out.push_str("</div></details>\n");
        }
        Block::ToolResult {
            content, is_error, ..
        } => {
            let _ = writeln!(
                out,
                "<details class=\"tool orphan\"><summary>Tool result{}</summary><pre class=\"code\">{}</pre></details>",
                if *is_error { " (error)" } else { "" },
                escape(content)
            );
        }
        Block::Image { media_type, data } => match image_url(media_type, data) {
            Some(url) => {
                let _ = writeln!(
                    out,
                    "<img class=\"image\" alt=\"image ({})\" src=\"{}\">",
                    escape(media_type),
                    escape(&url)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "<p class=\"muted\">image ({}), not embedded</p>",
                    escape(media_type)
                );
            }
        },
        Block::Unknown(v) => {
            let _ = writeln!(
                out,
                "<details class=\"tool\"><summary>Unknown block</summary><pre class=\"code\">{}</pre></details>",
                escape(&v.to_string())
            );
        }
    }
}

/// The page of `t`'s `messages`.
pub(super) fn render(t: &Transcript, messages: &[Message]) -> String {
    // Tool results are shown beside their calls.
    let mut results = std::collections::HashMap::new();
    let mut calls = std::collections::HashSet::new();
    for m in messages {
        for b in &m.content {
            match b {
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    results.insert(tool_use_id.as_str(), (content.as_str(), *is_error));
                }
                Block::ToolUse { id, .. } => {
                    calls.insert(id.as_str());
                }
                _ => {}
            }
        }
    }
    let title = t.title.as_deref().unwrap_or(&t.meta.id);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"memoir\">\n\
         <title>{} · memoir</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<main>\n\
         <header class=\"session-head\">\n<h1>{}</h1>\n<dl class=\"meta\">\n",
        escape(title),
        escape(title),
    );
    let mut meta = |name: &str, value: &str| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{}</dd>", escape(value));
    };
    if let Some(agent) = t.meta.source.as_ref().map(|s| s.agent.as_str()) {
        meta("Agent", agent);
    }
    meta("Project", &t.meta.workspace.display().to_string());
    if !t.meta.model.is_empty() {
        meta("Model", &t.meta.model);
    }
    meta("Started", &t.meta.created_at.to_rfc3339());
    meta("Messages", &messages.len().to_string());
    meta("Id", &t.meta.id);
    out.push_str("</dl>\n");
    if let Some(p) = &t.meta.parent {
        let _ = writeln!(
            out,
            "<p class=\"lineage\">forked from {} through seq {} ({} messages)</p>",
            escape(&p.session),
            p.seq,
            p.messages
        );
    }
    out.push_str("</header>\n<section class=\"conversation\" aria-label=\"Conversation\">\n");
    for (i, m) in messages.iter().enumerate() {
        if t.inherited > 0 && i == t.inherited {
            out.push_str("<div class=\"divider own\">This session starts here</div>\n");
        }
        let only_results = !m.content.is_empty()
            && m.content.iter().all(|b| {
                matches!(b, Block::ToolResult { tool_use_id, .. } if calls.contains(tool_use_id.as_str()))
            });
        if only_results {
            continue;
        }
        let role = m.role.as_str();
        let own = i >= t.inherited;
        let _ = write!(
            out,
            "<article class=\"msg role-{role}{}\" id=\"m-{i}\">\n<div class=\"msg-head\"><span class=\"role\">{role}</span>",
            if own { "" } else { " inherited" }
        );
        if let Some(model) = &m.model {
            let _ = write!(out, "<span class=\"model\">{}</span>", escape(model));
        }
        if let Some(ts) = &m.timestamp {
            let at = ts.to_rfc3339();
            let _ = write!(
                out,
                "<time datetime=\"{at}\">{}</time>",
                ts.format("%Y-%m-%d %H:%M")
            );
        }
        if let Some(u) = &m.usage {
            let _ = write!(out, "<span class=\"usage\">{} tok</span>", u.total());
        }
        let seq = t.message_seqs.get(i).copied();
        let label = match seq {
            Some(seq) if own => format!("seq {seq}"),
            _ => format!("#{i}"),
        };
        let _ = write!(
            out,
            "<a class=\"anchor\" href=\"#m-{i}\">{label}</a></div>\n<div class=\"msg-body\">\n"
        );
        for b in &m.content {
            block(&mut out, b, &results);
        }
        out.push_str("</div>\n</article>\n");
    }
    out.push_str("</section>\n</main>\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup_and_no_control_characters() {
        // Every character that could open a tag, an attribute, an entity or
        // a quoted value, and every control character.
        let mut hostile: String = (0u32..0x100).filter_map(char::from_u32).collect();
        hostile.push_str(
            "<script>alert(1)</script></style><img src=x onerror=alert(1)>&amp;&#x3c;\"'`",
        );
        let e = escape(&hostile);
        for bad in ['<', '>', '"', '\''] {
            assert!(!e.contains(bad), "{bad:?} left in {e:?}");
        }
        // `&` only as the start of the entities escape writes.
        for (at, _) in e.match_indices('&') {
            let rest = &e[at..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                    .iter()
                    .any(|ent| rest.starts_with(ent)),
                "bare & at {rest:?}"
            );
        }
        for c in e.chars() {
            assert!(
                !c.is_control() || matches!(c, '\t' | '\n' | '\r'),
                "control {c:?} left"
            );
        }
        assert!(e.contains("&lt;script&gt;") && e.contains("&amp;amp;"));
    }

    #[test]
    fn only_plain_images_are_embedded() {
        assert!(image_url("image/png", "iVBORw0KGgo=").is_some());
        assert!(image_url("image/svg+xml", "PHN2Zz4=").is_none());
        assert!(image_url("image/png", "abc\" onerror=\"x").is_none());
        assert!(image_url("text/html", "PGI+").is_none());
    }
}
