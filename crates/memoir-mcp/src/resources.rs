//! The resources: `memoir://session/<id>` (a session's transcript as
//! Markdown, the library's export) and `memoir://notes/<project>` (the
//! project's live notes as Markdown). Listings name the project's notes and
//! its most recent sessions; both are bounded in size. A resource longer
//! than one result is read in pages: `?cursor=o<byte offset>` (named at the
//! end of each page) continues it.

use memoir::manager::{ExportFormat, ExportOptions};
use memoir::notes::Notes;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};

use crate::error::ToolError;
use crate::scope::McpConfig;

/// Scheme and prefix of session resources.
pub const SESSION_PREFIX: &str = "memoir://session/";
/// Scheme and prefix of notes resources.
pub const NOTES_PREFIX: &str = "memoir://notes/";
/// Sessions a resource listing names.
pub const LISTED_SESSIONS: usize = 50;
/// Largest resource text, in bytes: a longer transcript is read in pages,
/// each ending with the URI of the next (`memoir://session/<id>?cursor=o<byte offset>`),
/// the same bound as every tool result ([`crate::page::MAX_RESULT_BYTES`]).
pub const MAX_RESOURCE_BYTES: usize = crate::page::MAX_RESULT_BYTES;

/// `s` with every byte outside `[A-Za-z0-9-._~]` percent-encoded.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`encode`] (`None` for a malformed escape or non-UTF-8).
pub fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The URI of the notes of `project`.
pub fn notes_uri(project: &str) -> String {
    format!("{NOTES_PREFIX}{}", encode(project))
}

/// The resource templates.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{SESSION_PREFIX}{{id}}"), "session")
            .with_title("A session's transcript")
            .with_description("One session of this project as Markdown (id from list_sessions or search_sessions).")
            .with_mime_type("text/markdown"),
        ResourceTemplate::new(format!("{NOTES_PREFIX}{{project}}"), "notes")
            .with_title("A project's notes")
            .with_description("The notes remembered for a project (its key, percent-encoded), as Markdown.")
            .with_mime_type("text/markdown"),
    ]
}

/// The resources of the caller's project.
pub fn list(config: &McpConfig, tenant: Option<&str>) -> Result<Vec<Resource>, ToolError> {
    let scope = config.backend.scope(tenant)?;
    let mut out = vec![Resource::new(notes_uri(&scope.project), "notes")
        .with_title(format!("Notes of {}", scope.project))
        .with_mime_type("text/markdown")];
    let mut sessions: Vec<_> = scope
        .manager
        .list_sessions()?
        .into_iter()
        .filter(|e| !memoir::notes::is_notes_session(&e.id) && scope.owns_workspace(&e.workspace))
        .collect();
    sessions.sort_by_key(|e| std::cmp::Reverse(e.last_activity));
    for e in sessions.into_iter().take(LISTED_SESSIONS) {
        out.push(
            Resource::new(format!("{SESSION_PREFIX}{}", e.id), e.id.clone())
                .with_title(e.title.unwrap_or_else(|| "(untitled)".into()))
                .with_mime_type("text/markdown"),
        );
    }
    Ok(out)
}

/// The page of `text` starting at byte `offset`: at most
/// [`MAX_RESOURCE_BYTES`], cut after a line where one ends in its second
/// half (else at a character boundary), and, when more follows, a note
/// naming the URI of the next page (`base?cursor=o<offset>`).
fn page_of(text: &str, offset: usize, base: &str) -> Result<String, ToolError> {
    if offset > text.len() || !text.is_char_boundary(offset) {
        return Err(ToolError::invalid(format!(
            "cursor o{offset} is not a cursor from a previous read of {base}"
        )));
    }
    let rest = &text[offset..];
    const NOTE_ROOM: usize = 256;
    if rest.len() <= MAX_RESOURCE_BYTES {
        return Ok(rest.to_string());
    }
    let mut cut = MAX_RESOURCE_BYTES - NOTE_ROOM;
    while !rest.is_char_boundary(cut) {
        cut -= 1;
    }
    if let Some(nl) = rest[..cut].rfind('\n').filter(|&nl| nl >= cut / 2) {
        cut = nl + 1;
    }
    let next = crate::page::cursor_at(offset + cut);
    let mut out = rest[..cut].to_string();
    out.push_str(&format!(
        "\n\n[truncated: bytes {offset}..{} of {}; read {base}?cursor={next} for the rest]\n",
        offset + cut,
        text.len()
    ));
    Ok(out)
}

/// A resource URI's path and its `cursor` query parameter (byte offset).
fn split_cursor(uri: &str) -> Result<(&str, usize), ToolError> {
    let Some((path, query)) = uri.split_once('?') else {
        return Ok((uri, 0));
    };
    let cursor = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("cursor="))
        .ok_or_else(|| ToolError::invalid(format!("unknown query in {uri:?} (only cursor=)")))?;
    Ok((path, crate::page::offset_of(cursor)?))
}

/// Read resource `uri`.
pub fn read(
    config: &McpConfig,
    tenant: Option<&str>,
    uri: &str,
) -> Result<ReadResourceResult, ToolError> {
    let mut scope = config.backend.scope(tenant)?;
    let (path, offset) = split_cursor(uri)?;
    let text = if let Some(id) = path.strip_prefix(SESSION_PREFIX) {
        memoir::id::validate(id)?;
        let meta = scope
            .store
            .read_header(id)?
            .ok_or_else(|| ToolError::not_found(format!("no session {id}")))?;
        if !scope.owns_workspace(&meta.workspace) {
            return Err(ToolError::not_found(format!(
                "no session {id} in this project"
            )));
        }
        let export = scope.manager.export(
            id,
            ExportOptions {
                format: ExportFormat::Markdown,
                redact: false,
            },
        )?;
        export.text
    } else if let Some(p) = path.strip_prefix(NOTES_PREFIX) {
        let project =
            decode(p).ok_or_else(|| ToolError::invalid(format!("malformed uri {uri:?}")))?;
        if project != scope.project {
            return Err(ToolError::not_found(format!(
                "no notes for {project:?} here (this server's project is {:?})",
                scope.project
            )));
        }
        let list = Notes::new(&mut scope.manager, &project).list()?;
        let mut md = format!("# Notes of {project}\n\n");
        if list.notes.is_empty() {
            md.push_str("(none yet: the remember tool adds one)\n");
        }
        for n in list.notes.iter().rev() {
            let tags = if n.tags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", n.tags.join(", "))
            };
            let when = n.created_at.map(|t| t.to_rfc3339()).unwrap_or_default();
            md.push_str(&format!(
                "- `{}` {when}{tags}: {}\n",
                n.id,
                n.text.replace('\n', "\n  ")
            ));
        }
        md
    } else {
        return Err(ToolError::not_found(format!(
            "unknown resource {uri:?} (memoir://session/<id> or memoir://notes/<project>)"
        )));
    };
    Ok(ReadResourceResult::new(vec![ResourceContents::text(
        page_of(&text, offset, path)?,
        uri,
    )
    .with_mime_type("text/markdown")]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_keys_round_trip_through_uris() {
        for p in ["/home/a b/proj", "tenant-1", "ünï/cödé", "%41"] {
            assert_eq!(decode(&encode(p)).as_deref(), Some(p));
        }
        assert_eq!(encode("/a b"), "%2Fa%20b");
        assert!(decode("%4").is_none());
        assert!(decode("%zz").is_none());
    }
}
