//! The tools memoir offers: names, descriptions written for a model, input
//! and output JSON Schemas, and annotations. Destructive tools (`forget`,
//! `fork_session`) are listed only with `--allow-writes`.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

/// Tools every server offers.
pub const READ_TOOLS: &[&str] = &[
    "search_sessions",
    "recall",
    "list_sessions",
    "get_session",
    "resume_command",
    "list_notes",
    "remember",
    "promote",
    "usage",
    "blame",
];
/// Tools offered only with `--allow-writes`.
pub const WRITE_TOOLS: &[&str] = &["forget", "fork_session"];

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

const PAGE_NOTE: &str = "Results are bounded in size: when `truncated` is true, call again with `cursor` set to `next_cursor` for the rest.";

fn limit(default: u64, max: u64) -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": max, "default": default,
           "description": format!("How many items per page (default {default}, at most {max}).")})
}

fn cursor() -> Value {
    json!({"type": "string", "description": "Opaque cursor from a previous result's `next_cursor`."})
}

fn time(what: &str) -> Value {
    json!({"type": "string", "description": format!("{what}: RFC 3339 (2026-05-01T10:00:00Z), a date (2026-05-01), or a relative time ago (7d, 12h, 30m).")})
}

fn page_output(items: &str, item: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            items: {"type": "array", "items": item},
            "truncated": {"type": "boolean"},
            "next_cursor": {"type": ["string", "null"]},
            "note": {"type": "string"}
        },
        "required": [items, "truncated"]
    })
}

fn tool(name: &'static str, title: &str, description: String, input: Value, output: Value) -> Tool {
    Tool::new(name, description, object(input))
        .with_title(title)
        .with_raw_output_schema(object(output))
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true).open_world(false)
}

/// The definition of tool `name` (`None` for an unknown name).
pub fn definition(name: &str) -> Option<Tool> {
    let session_item = json!({"type": "object", "properties": {
        "id": {"type": "string"}, "title": {"type": ["string", "null"]},
        "agent": {"type": "string"}, "project": {"type": "string"},
        "created_at": {"type": "string"}, "last_activity": {"type": "string"},
        "messages": {"type": "integer"}}, "required": ["id", "agent", "messages"]});
    let t = match name {
        "search_sessions" => tool(
            "search_sessions",
            "Search past sessions",
            format!("Search the agent sessions memoir holds (Claude Code, Codex, Gemini CLI, OpenCode imports, native sessions and remembered notes) for messages matching a query: ranked on the whole query (messages holding every query term first, then how much of the query a message holds, how close its words stand, BM25 and embedding similarity; tool output weighs less than prose; newest first on ties). Each snippet marks matches as [[word]] and escapes the message's own \\, [ and ] with a backslash. Scoped to this server's project unless `all_projects` is true. Each hit names its session and `seq`; open it with get_session(id, around_seq). {PAGE_NOTE}"),
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "description": "Words to look for; \"double quoted\" parts must match as phrases."},
                "project": {"type": "string", "description": "Only sessions of this project directory (must be inside the server's project unless all_projects)."},
                "agent": {"type": "string", "description": "Only sessions written by this agent: claude-code, codex, gemini-cli, opencode or memoir."},
                "since": time("Only messages written at or after this time"),
                "until": time("Only messages written before this time"),
                "role": {"type": "string", "enum": ["user", "assistant", "tool", "system"], "description": "Only messages of this role (tool: tool outputs)."},
                "tool": {"type": "string", "minLength": 1, "description": "Only calls of this tool and their results (e.g. Bash)."},
                "all_projects": {"type": "boolean", "default": false, "description": "Search every project of the store, not only this one."},
                "limit": limit(10, 50),
                "cursor": cursor()
            }, "required": ["query"], "additionalProperties": false}),
            page_output("hits", json!({"type": "object", "properties": {
                "session": {"type": "string"}, "seq": {"type": "integer"}, "role": {"type": "string"},
                "time": {"type": "string"}, "agent": {"type": "string"}, "project": {"type": "string"},
                "title": {"type": ["string", "null"]}, "score": {"type": "number"}, "snippet": {"type": "string"}},
                "required": ["session", "seq", "role", "snippet"]})),
        )
        .annotate(read_only()),
        "recall" => tool(
            "recall",
            "Recall relevant context",
            "Build a context block of the earlier turns of one session most relevant to a query, within a token budget, ready to put back into a prompt. Every line names its provenance as `[chain_seq N]` or `[chain_seq N of <session>]` (the record's seq). Default session: the project's most recently active one.".into(),
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What the context should be about."},
                "session": {"type": "string", "description": "Session id or unique prefix (default: the project's latest session)."},
                "k": {"type": "integer", "minimum": 1, "maximum": 64, "default": 16, "description": "Most chunks to consider."},
                "token_budget": {"type": "integer", "minimum": 50, "maximum": 8000, "default": 1500, "description": "Most tokens (estimated) in the block."}
            }, "required": ["query"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "session": {"type": "string"}, "text": {"type": "string"}, "tokens": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "object", "properties": {
                    "session": {"type": "string"}, "seq": {"type": "integer"}, "score": {"type": "number"}},
                    "required": ["session", "seq"]}},
                "truncated_items": {"type": "integer"}}, "required": ["session", "text", "tokens", "items"]}),
        )
        .annotate(read_only()),
        "list_sessions" => tool(
            "list_sessions",
            "List sessions",
            format!("List this project's sessions, most recently active first, with their agent, title and size. {PAGE_NOTE}"),
            json!({"type": "object", "properties": {
                "project": {"type": "string", "description": "Only sessions of this project directory (inside the server's project)."},
                "agent": {"type": "string", "description": "Only sessions written by this agent."},
                "limit": limit(20, 100),
                "cursor": cursor()
            }, "additionalProperties": false}),
            page_output("sessions", session_item),
        )
        .annotate(read_only()),
        "get_session" => tool(
            "get_session",
            "Read part of a session",
            "Read a bounded window of one session's messages: around `around_seq` (a seq from search_sessions), `before` messages before and `after` after it; without `around_seq`, the latest messages. Long messages are shortened (`truncated: true`).".into(),
            json!({"type": "object", "properties": {
                "id": {"type": "string", "minLength": 1, "description": "Session id or unique prefix."},
                "around_seq": {"type": "integer", "minimum": 0, "description": "Centre the window on the message written at this seq."},
                "before": {"type": "integer", "minimum": 0, "maximum": 50, "default": 5},
                "after": {"type": "integer", "minimum": 0, "maximum": 50, "default": 5}
            }, "required": ["id"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "session": {"type": "string"}, "title": {"type": ["string", "null"]}, "total_messages": {"type": "integer"},
                "messages": {"type": "array", "items": {"type": "object", "properties": {
                    "seq": {"type": "integer"}, "role": {"type": "string"}, "text": {"type": "string"},
                    "truncated": {"type": "boolean"}}, "required": ["seq", "role", "text"]}},
                "has_more_before": {"type": "boolean"}, "has_more_after": {"type": "boolean"}},
                "required": ["session", "messages", "total_messages"]}),
        )
        .annotate(read_only()),
        "resume_command" => tool(
            "resume_command",
            "How to resume a session",
            "The shell command that reopens a session in the agent that wrote it (claude --resume, codex resume, ...), or memoir's own for native sessions.".into(),
            json!({"type": "object", "properties": {
                "id": {"type": "string", "minLength": 1, "description": "Session id or unique prefix."}
            }, "required": ["id"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "session": {"type": "string"}, "shell": {"type": "string"}, "program": {"type": "string"},
                "args": {"type": "array", "items": {"type": "string"}}, "cwd": {"type": ["string", "null"]},
                "agent": {"type": "string"}}, "required": ["session", "shell", "program", "args"]}),
        )
        .annotate(read_only()),
        "list_notes" => tool(
            "list_notes",
            "List remembered notes",
            format!("List the notes remembered for this project (newest first). {PAGE_NOTE}"),
            json!({"type": "object", "properties": {"limit": limit(50, 200), "cursor": cursor()}, "additionalProperties": false}),
            page_output("notes", json!({"type": "object", "properties": {
                "id": {"type": "string"}, "text": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                "session": {"type": "string"}, "created_at": {"type": ["string", "null"]}, "seq": {"type": "integer"}},
                "required": ["id", "text"]})),
        )
        .annotate(read_only()),
        "remember" => tool(
            "remember",
            "Remember a note",
            "Store a note for this project (a fact, decision or preference worth keeping across sessions). Notes are durable, found by search_sessions like any message, and safe when several agents write at once. Returns the note's id.".into(),
            json!({"type": "object", "properties": {
                "text": {"type": "string", "minLength": 1, "maxLength": 16384, "description": "What to remember, self-contained."},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64}, "maxItems": 16, "description": "Labels."},
                "session": {"type": "string", "description": "The session the note is about (its id)."}
            }, "required": ["text"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "id": {"type": "string"}, "notes_session": {"type": "string"}, "seq": {"type": "integer"}},
                "required": ["id", "notes_session"]}),
        )
        .annotate(ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false)),
        "promote" => tool(
            "promote",
            "Promote to project memory",
            "At the end of a session, keep what mattered: promote records of a session (the `seq`s of the messages that hold it, from get_session or recall) as one durable fact of this project. The fact becomes a note (found by search_sessions, recalled in later sessions with the session and seqs it came from), and the session records the promotion's lineage. Pruned records are never promoted.".into(),
            json!({"type": "object", "properties": {
                "fact": {"type": "string", "minLength": 1, "maxLength": 16384, "description": "The fact to keep, self-contained."},
                "seqs": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1, "maxItems": 64, "description": "The session's records the fact comes from (marked important)."},
                "session": {"type": "string", "description": "Session id or unique prefix (default: the project's latest session)."},
                "task_score": {"type": "number", "minimum": 0, "maximum": 1, "description": "How well the session's task went; at 0.7 or above, records recalled once are promoted too."},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64}, "maxItems": 16, "description": "Labels of the note."}
            }, "required": ["fact", "seqs"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "session": {"type": "string"}, "note_id": {"type": "string"}, "notes_session": {"type": "string"},
                "seq": {"type": "integer"},
                "sources": {"type": "array", "items": {"type": "object", "properties": {
                    "session": {"type": "string"}, "seq": {"type": "integer"},
                    "reasons": {"type": "array", "items": {"type": "string"}}}, "required": ["session", "seq"]}}},
                "required": ["session", "note_id", "notes_session", "sources"]}),
        )
        .annotate(ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false)),
        "usage" => tool(
            "usage",
            "Token usage and cost",
            "Token usage and offline cost of this project's sessions, totals and grouped rows. Counts from imported transcripts are lower bounds (provenance `transcript`).".into(),
            json!({"type": "object", "properties": {
                "period": {"type": "string", "description": "Only usage since this long ago (7d, 12h, 30m), or `today`, `week`, `month`, `all` (default all)."},
                "by": {"type": "string", "enum": ["day", "week", "month", "session", "project", "model", "agent"], "description": "Group rows by this key."},
                "project": {"type": "string", "description": "Only this project directory (inside the server's project)."}
            }, "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "totals": {"type": "object"}, "rows": {"type": "array"}, "truncated": {"type": "boolean"}},
                "required": ["totals", "rows"]}),
        )
        .annotate(read_only()),
        "blame" => tool(
            "blame",
            "Who edited a file",
            "Which sessions and messages edited a file through their tool calls (Edit, MultiEdit, Write, apply_patch), newest first; with `line`, the one that last wrote that line of the file as it is now (local servers only). Paths: absolute, or relative to the project.".into(),
            json!({"type": "object", "properties": {
                "path": {"type": "string", "minLength": 1, "description": "The file: absolute, or relative to the project directory."},
                "line": {"type": "integer", "minimum": 1, "description": "A line of the file as it is now (1-based)."}
            }, "required": ["path"], "additionalProperties": false}),
            json!({"type": "object", "properties": {
                "path": {"type": "string"}, "edits": {"type": "array"}, "edit": {"type": ["object", "null"]},
                "line": {"type": "integer"}, "text": {"type": "string"}, "truncated": {"type": "boolean"}},
                "required": ["path"]}),
        )
        .annotate(read_only()),
        "forget" => tool(
            "forget",
            "Forget a note",
            "Forget a remembered note: writes a tombstone (the note stops appearing in list_notes and search_sessions; the log keeps the record). Needs the note's id from remember or list_notes.".into(),
            json!({"type": "object", "properties": {
                "id": {"type": "string", "pattern": "^note_[0-9a-f]{32}$", "description": "The note's id."}
            }, "required": ["id"], "additionalProperties": false}),
            json!({"type": "object", "properties": {"id": {"type": "string"}, "forgotten": {"type": "boolean"}}, "required": ["id", "forgotten"]}),
        )
        .annotate(ToolAnnotations::new().read_only(false).destructive(true).idempotent(true).open_world(false)),
        "fork_session" => tool(
            "fork_session",
            "Fork a session",
            "Create a new session that starts as a copy (by reference) of another up to and including its record `at_seq` (the `seq` that get_session and search_sessions show), to branch from that point. The cut never separates a tool call from its result: it may land earlier, at the returned `at_seq`.".into(),
            json!({"type": "object", "properties": {
                "id": {"type": "string", "minLength": 1, "description": "Session id or unique prefix."},
                "at_seq": {"type": "integer", "minimum": 0, "description": "The last record seq to keep (default: the whole session)."}
            }, "required": ["id"], "additionalProperties": false}),
            json!({"type": "object", "properties": {"id": {"type": "string"}, "parent": {"type": "string"},
                "at_seq": {"type": "integer", "description": "The parent's last record seq the fork includes."},
                "messages": {"type": "integer", "description": "Messages the fork starts with."},
                "requested": {"type": "integer"}}, "required": ["id", "parent", "at_seq", "messages"]}),
        )
        .annotate(ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false)),
        _ => return None,
    };
    Some(t)
}

/// The tools a server offers.
pub fn tools(allow_writes: bool) -> Vec<Tool> {
    let names = READ_TOOLS
        .iter()
        .chain(if allow_writes { WRITE_TOOLS } else { &[] });
    names.filter_map(|n| definition(n)).collect()
}
