//! What a session changed on disk, reconstructed from its tool calls: the
//! file edits an agent asked its tools to make, as line diffs per file, each
//! tied to the message that made it. Behind `memoir changes` and the web
//! view's *Changes* tab.
//!
//! Recognised calls (tool names compared case-insensitively):
//! - string replacement: Claude Code `Edit`, Gemini CLI `replace`, OpenCode
//!   `edit`, `str_replace` (`file_path`/`filePath`/`path`,
//!   `old_string`/`oldString`, `new_string`/`newString`);
//! - `MultiEdit` (`edits: [{old_string, new_string}]`);
//! - whole-file writes: `Write`, `write_file`, `create` (`content`);
//! - Codex `apply_patch`: the patch as the call's input (a string, or
//!   `input`/`patch` inside an object) or as the second word of a `shell`
//!   call's `command` array (`["apply_patch", "*** Begin Patch..."]`).
//!
//! The diffs carry no context lines the call did not carry itself (the tools
//! never saw the whole file), so they are exact about what was replaced and
//! by what, not about line numbers. A call whose result was an error is kept
//! and marked `failed`: the file may not have changed. Nothing here reads the
//! files themselves.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::message::{Block, Message};

/// What a change did to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Replaced text inside the file.
    Edit,
    /// Wrote the whole file (created or overwrote it).
    Write,
    /// Created the file (a patch's `Add File`).
    Add,
    /// Deleted the file.
    Delete,
    /// Moved the file (and possibly edited it).
    Move,
}

impl ChangeKind {
    /// The lowercase name (as in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Edit => "edit",
            ChangeKind::Write => "write",
            ChangeKind::Add => "add",
            ChangeKind::Delete => "delete",
            ChangeKind::Move => "move",
        }
    }
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffLine {
    /// `' '` context, `'-'` removed, `'+'` added.
    pub op: char,
    /// The line, without its newline.
    pub text: String,
}

/// A contiguous part of a change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Hunk {
    /// The patch's `@@` anchor, when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    /// The lines, in order.
    pub lines: Vec<DiffLine>,
}

/// One tool call's change to one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileChange {
    /// The file, as the call named it.
    pub path: String,
    /// The new path of a move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
    /// What the change did.
    pub kind: ChangeKind,
    /// The tool that made it, as the transcript names it.
    pub tool: String,
    /// The tool call's id.
    pub call_id: String,
    /// Index of the message holding the call in the conversation.
    pub message: usize,
    /// The `seq` of the record that wrote that message, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// True when the call's result was an error (the file may be unchanged).
    pub failed: bool,
    /// The diff.
    pub hunks: Vec<Hunk>,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
}

/// Every change to one file, in conversation order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileChanges {
    /// The file.
    pub path: String,
    /// Lines added over all its changes.
    pub added: usize,
    /// Lines removed over all its changes.
    pub removed: usize,
    /// The changes.
    pub changes: Vec<FileChange>,
}

/// The changes made by the tool calls in `messages`, grouped by file in the
/// order each file was first changed. `seqs[i]`, when present, is the record
/// seq of `messages[i]` ([`crate::transcript::Transcript::message_seqs`]).
pub fn reconstruct(messages: &[Message], seqs: &[u64]) -> Vec<FileChanges> {
    let failed: HashMap<&str, bool> = messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolResult {
                tool_use_id,
                is_error,
                ..
            } => Some((tool_use_id.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    let mut files: Vec<FileChanges> = Vec::new();
    let mut by_path: HashMap<String, usize> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        for block in &message.content {
            let Block::ToolUse { id, name, input } = block else {
                continue;
            };
            for mut change in of_call(name, input) {
                change.call_id = id.clone();
                change.message = index;
                change.seq = seqs.get(index).copied();
                change.failed = failed.get(id.as_str()).copied().unwrap_or(false);
                let slot = *by_path.entry(change.path.clone()).or_insert_with(|| {
                    files.push(FileChanges {
                        path: change.path.clone(),
                        added: 0,
                        removed: 0,
                        changes: Vec::new(),
                    });
                    files.len() - 1
                });
                let file = &mut files[slot];
                file.added += change.added;
                file.removed += change.removed;
                file.changes.push(change);
            }
        }
    }
    files
}

/// The first string field of `input` among `keys`.
fn field<'a>(input: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
}

const PATH_KEYS: &[&str] = &["file_path", "filePath", "path", "absolute_path"];
const OLD_KEYS: &[&str] = &["old_string", "oldString", "old_str"];
const NEW_KEYS: &[&str] = &["new_string", "newString", "new_str"];

/// The changes one call makes (none for a tool that edits nothing, or a
/// call whose input lacks what the tool needs).
fn of_call(name: &str, input: &Value) -> Vec<FileChange> {
    let tool = name.to_ascii_lowercase();
    let change = |path: &str, kind, hunks: Vec<Hunk>| change_of(name, path, kind, hunks);
    match tool.as_str() {
        "edit" | "replace" | "str_replace" | "str_replace_editor" => {
            let (Some(path), Some(old), Some(new)) = (
                field(input, PATH_KEYS),
                field(input, OLD_KEYS),
                field(input, NEW_KEYS),
            ) else {
                return Vec::new();
            };
            vec![change(path, ChangeKind::Edit, vec![replacement(old, new)])]
        }
        "multiedit" | "multi_edit" => {
            let Some(path) = field(input, PATH_KEYS) else {
                return Vec::new();
            };
            let hunks: Vec<Hunk> = input
                .get("edits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|e| Some(replacement(field(e, OLD_KEYS)?, field(e, NEW_KEYS)?)))
                .collect();
            if hunks.is_empty() {
                return Vec::new();
            }
            vec![change(path, ChangeKind::Edit, hunks)]
        }
        "write" | "write_file" | "create" => {
            let (Some(path), Some(content)) = (
                field(input, PATH_KEYS),
                field(input, &["content", "file_text", "text"]),
            ) else {
                return Vec::new();
            };
            vec![change(
                path,
                ChangeKind::Write,
                vec![replacement("", content)],
            )]
        }
        "apply_patch" => patch_text(input)
            .map(|p| parse_patch(name, p))
            .unwrap_or_default(),
        "shell" | "exec_command" | "container.exec" | "local_shell" => input
            .get("command")
            .and_then(Value::as_array)
            .filter(|c| c.first().and_then(Value::as_str) == Some("apply_patch"))
            .and_then(|c| c.get(1))
            .and_then(Value::as_str)
            .map(|p| parse_patch(name, p))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The patch text of an `apply_patch` call's input.
fn patch_text(input: &Value) -> Option<&str> {
    match input {
        Value::String(s) => Some(s),
        Value::Object(_) => field(input, &["input", "patch"]),
        _ => None,
    }
}

fn change_of(tool: &str, path: &str, kind: ChangeKind, hunks: Vec<Hunk>) -> FileChange {
    let count = |op| {
        hunks
            .iter()
            .flat_map(|h| &h.lines)
            .filter(|l| l.op == op)
            .count()
    };
    FileChange {
        path: path.to_string(),
        moved_to: None,
        kind,
        tool: tool.to_string(),
        call_id: String::new(),
        message: 0,
        seq: None,
        failed: false,
        added: count('+'),
        removed: count('-'),
        hunks,
    }
}

/// `old` replaced by `new`: the lines both share at the start and end are
/// context, the rest removed and added.
fn replacement(old: &str, new: &str) -> Hunk {
    let old: Vec<&str> = split_lines(old);
    let new: Vec<&str> = split_lines(new);
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let line = |op, text: &&str| DiffLine {
        op,
        text: text.to_string(),
    };
    let mut lines: Vec<DiffLine> = old[..head].iter().map(|t| line(' ', t)).collect();
    lines.extend(old[head..old.len() - tail].iter().map(|t| line('-', t)));
    lines.extend(new[head..new.len() - tail].iter().map(|t| line('+', t)));
    lines.extend(old[old.len() - tail..].iter().map(|t| line(' ', t)));
    Hunk {
        anchor: None,
        lines,
    }
}

/// The lines of `text` (no trailing empty line for a final newline; none
/// at all for empty text).
fn split_lines(text: &str) -> Vec<&str> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// The file changes of a Codex patch (`*** Begin Patch` ... `*** End
/// Patch`): `Add File` (every line `+`), `Delete File`, `Update File`
/// (optionally `Move to`) with `@@` hunks of ` `/`-`/`+` lines. Lines
/// outside a file section are ignored.
fn parse_patch(tool: &str, patch: &str) -> Vec<FileChange> {
    let mut out: Vec<FileChange> = Vec::new();
    let mut current: Option<(String, ChangeKind, Option<String>, Vec<Hunk>)> = None;
    let flush = |current: &mut Option<(String, ChangeKind, Option<String>, Vec<Hunk>)>,
                 out: &mut Vec<FileChange>| {
        if let Some((path, kind, moved_to, hunks)) = current.take() {
            let hunks: Vec<Hunk> = hunks
                .into_iter()
                .filter(|h| !h.lines.is_empty() || h.anchor.is_some())
                .collect();
            let mut c = change_of(tool, &path, kind, hunks);
            c.moved_to = moved_to;
            out.push(c);
        }
    };
    for raw in patch.lines() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Some(rest) = line.strip_prefix("*** ") {
            let rest = rest.trim_end();
            let section = [
                ("Add File: ", ChangeKind::Add),
                ("Delete File: ", ChangeKind::Delete),
                ("Update File: ", ChangeKind::Edit),
            ]
            .into_iter()
            .find_map(|(prefix, kind)| rest.strip_prefix(prefix).map(|p| (p.trim(), kind)));
            if let Some((path, kind)) = section {
                flush(&mut current, &mut out);
                current = Some((path.to_string(), kind, None, vec![Hunk::default()]));
            } else if let Some(to) = rest.strip_prefix("Move to: ") {
                if let Some(c) = current.as_mut() {
                    c.1 = ChangeKind::Move;
                    c.2 = Some(to.trim().to_string());
                }
            } else if rest == "End Patch" {
                flush(&mut current, &mut out);
            }
            // `*** End of File` and `*** Begin Patch` carry no lines.
            continue;
        }
        let Some((_, kind, _, hunks)) = current.as_mut() else {
            continue;
        };
        if let Some(anchor) = line.strip_prefix("@@") {
            let anchor = anchor.trim();
            hunks.push(Hunk {
                anchor: (!anchor.is_empty()).then(|| anchor.to_string()),
                lines: Vec::new(),
            });
            continue;
        }
        let (op, text) = match line.chars().next() {
            Some(op @ ('+' | '-' | ' ')) => (op, &line[1..]),
            // An added file's lines are all `+`; elsewhere a bare line is
            // context whose leading space was lost.
            _ if *kind == ChangeKind::Add => ('+', line),
            _ if line.is_empty() => (' ', line),
            _ => (' ', line),
        };
        if let Some(h) = hunks.last_mut() {
            h.lines.push(DiffLine {
                op,
                text: text.to_string(),
            });
        }
    }
    flush(&mut current, &mut out);
    out
}

/// The changes as a unified-style diff (what `memoir changes` prints): per
/// file `--- path` / `+++ path`, and per change an `@@` line naming the
/// message, seq and tool.
pub fn render_diff(files: &[FileChanges]) -> String {
    let mut out = String::new();
    for file in files {
        out.push_str(&format!("--- {}\n+++ {}\n", file.path, file.path));
        for c in &file.changes {
            let seq = c.seq.map(|s| format!(", seq {s}")).unwrap_or_default();
            let failed = if c.failed { ", failed" } else { "" };
            let moved = c
                .moved_to
                .as_ref()
                .map(|to| format!(", moved to {to}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "@@ message {}{seq}: {} {}{moved}{failed} @@\n",
                c.message,
                c.tool,
                c.kind.as_str()
            ));
            for h in &c.hunks {
                if let Some(a) = &h.anchor {
                    out.push_str(&format!("@@ {a}\n"));
                }
                for l in &h.lines {
                    out.push(l.op);
                    out.push_str(&l.text);
                    out.push('\n');
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;
    use serde_json::json;

    fn call(id: &str, name: &str, input: Value) -> Message {
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: id.into(),
                name: name.into(),
                input,
            }],
        )
    }

    fn result(id: &str, is_error: bool) -> Message {
        Message::new(
            Role::User,
            vec![Block::ToolResult {
                tool_use_id: id.into(),
                content: "ok".into(),
                is_error,
            }],
        )
    }

    fn ops(c: &FileChange) -> String {
        c.hunks
            .iter()
            .flat_map(|h| &h.lines)
            .map(|l| format!("{}{}", l.op, l.text))
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn claude_edit_multiedit_and_write_become_diffs_grouped_by_file() {
        let messages = vec![
            Message::user("fix it"),
            call(
                "t1",
                "Edit",
                json!({"file_path": "/p/a.rs", "old_string": "fn a() {\n    1\n}", "new_string": "fn a() {\n    2\n}"}),
            ),
            result("t1", false),
            call(
                "t2",
                "Write",
                json!({"file_path": "/p/b.txt", "content": "one\ntwo\n"}),
            ),
            result("t2", false),
            call(
                "t3",
                "MultiEdit",
                json!({"file_path": "/p/a.rs", "edits": [
                    {"old_string": "x", "new_string": "y"},
                    {"old_string": "p\nq", "new_string": "p"}
                ]}),
            ),
            result("t3", true),
        ];
        let seqs: Vec<u64> = (1..=messages.len() as u64).collect();
        let files = reconstruct(&messages, &seqs);
        assert_eq!(
            files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            ["/p/a.rs", "/p/b.txt"]
        );
        let a = &files[0];
        assert_eq!(a.changes.len(), 2);
        assert_eq!(ops(&a.changes[0]), " fn a() {|-    1|+    2| }");
        assert_eq!((a.changes[0].message, a.changes[0].seq), (1, Some(2)));
        assert_eq!(a.changes[0].call_id, "t1");
        assert!(!a.changes[0].failed);
        assert_eq!(a.changes[1].hunks.len(), 2);
        assert_eq!(ops(&a.changes[1]), "-x|+y| p|-q");
        assert!(
            a.changes[1].failed,
            "an error result marks the change failed"
        );
        assert_eq!((a.added, a.removed), (2, 3));
        let b = &files[1];
        assert_eq!(b.changes[0].kind, ChangeKind::Write);
        assert_eq!(ops(&b.changes[0]), "+one|+two");
    }

    #[test]
    fn codex_patches_in_every_call_shape() {
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+hello\n+world\n*** Update File: src/lib.rs\n*** Move to: src/core.rs\n@@ fn main\n fn main() {\n-    old();\n+    new();\n }\n*** Delete File: gone.txt\n*** End Patch";
        let shapes = [
            call("c1", "apply_patch", json!(patch)),
            call("c1", "apply_patch", json!({"input": patch})),
            call("c1", "shell", json!({"command": ["apply_patch", patch]})),
        ];
        for shape in shapes {
            let files = reconstruct(std::slice::from_ref(&shape), &[]);
            let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(paths, ["new.txt", "src/lib.rs", "gone.txt"], "{shape:?}");
            assert_eq!(files[0].changes[0].kind, ChangeKind::Add);
            assert_eq!(ops(&files[0].changes[0]), "+hello|+world");
            let moved = &files[1].changes[0];
            assert_eq!(moved.kind, ChangeKind::Move);
            assert_eq!(moved.moved_to.as_deref(), Some("src/core.rs"));
            assert_eq!(moved.hunks[0].anchor.as_deref(), Some("fn main"));
            assert_eq!(ops(moved), " fn main() {|-    old();|+    new();| }");
            assert_eq!((moved.added, moved.removed), (1, 1));
            assert_eq!(files[2].changes[0].kind, ChangeKind::Delete);
            assert!(files[2].changes[0].hunks.is_empty());
        }
    }

    #[test]
    fn other_agents_field_spellings_and_calls_that_edit_nothing() {
        let messages = vec![
            call(
                "o1",
                "edit",
                json!({"filePath": "x.ts", "oldString": "a", "newString": "b"}),
            ),
            call(
                "g1",
                "write_file",
                json!({"path": "y.md", "content": "# y"}),
            ),
            call("n1", "Read", json!({"file_path": "x.ts"})),
            call("n2", "Edit", json!({"file_path": "x.ts"})),
            call("n3", "shell", json!({"command": ["ls", "-l"]})),
            call("n4", "apply_patch", json!(42)),
        ];
        let files = reconstruct(&messages, &[]);
        assert_eq!(files.len(), 2);
        assert_eq!(ops(&files[0].changes[0]), "-a|+b");
        assert_eq!(files[0].changes[0].seq, None);
        assert_eq!(ops(&files[1].changes[0]), "+# y");
    }

    #[test]
    fn the_rendered_diff_names_message_seq_and_tool() {
        let messages = vec![call(
            "t1",
            "Edit",
            json!({"file_path": "a", "old_string": "1", "new_string": "2"}),
        )];
        let text = render_diff(&reconstruct(&messages, &[7]));
        assert_eq!(
            text,
            "--- a\n+++ a\n@@ message 0, seq 7: Edit edit @@\n-1\n+2\n"
        );
    }
}
