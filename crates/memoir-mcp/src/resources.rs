//! The resources: `memoir://session/<id>` (a session's transcript as
//! Markdown, the library's export) and `memoir://notes/<project>` (the
//! project's live notes as Markdown). Listings name the project's notes and
//! its most recent sessions; both are bounded in size.

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
/// Largest resource text, in bytes (longer transcripts are cut with a note).
pub const MAX_RESOURCE_BYTES: usize = 1 << 20;

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

fn bounded(mut text: String) -> String {
    if text.len() > MAX_RESOURCE_BYTES {
        let mut cut = MAX_RESOURCE_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n\n[truncated: use the get_session tool to page through the rest]\n");
    }
    text
}

/// Read resource `uri`.
pub fn read(
    config: &McpConfig,
    tenant: Option<&str>,
    uri: &str,
) -> Result<ReadResourceResult, ToolError> {
    let mut scope = config.backend.scope(tenant)?;
    let text = if let Some(id) = uri.strip_prefix(SESSION_PREFIX) {
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
    } else if let Some(p) = uri.strip_prefix(NOTES_PREFIX) {
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
        bounded(text),
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
