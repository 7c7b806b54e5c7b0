//! Which session wrote a file, or one line of it: the edits recorded tool
//! calls made to a path ([`crate::changes`] reconstructs them per session),
//! gathered across the store, newest first ([`file_history`]), and the line
//! of a file as it is now traced back through them ([`blame_line`]). Behind
//! `memoir blame`, the MCP tool `blame` and the web view's link from a
//! session's changes.
//!
//! **Finding the sessions.** Reading every session of a large store for one
//! query would be slow, so the caller may pass candidate session ids: with
//! the feature `search`, [`candidates`] asks the store's cross-session index
//! (already incremental and checked against the logs) for the messages whose
//! text holds the file's name as a phrase. The candidates are only a filter:
//! each is read and its edits reconstructed from its log, so a stale or
//! over-wide candidate list cannot produce a wrong answer, only a slower
//! one. When the index cannot answer precisely (a name with no searchable
//! word, or as many hits as one search returns) [`candidates`] says so and
//! every session is read instead.
//!
//! **Matching paths.** The query path and each call's path are compared
//! lexically (`.` and `..` folded, no symbolic link resolved): a call's
//! absolute path as is, a relative one joined to its session's workspace
//! (the agent's working directory). A relative path in a session without a
//! workspace matches any query path ending with its components. A file's
//! history before a move into it (`*** Move to:`) is not followed.
//!
//! **A line.** The file as it is now is walked back through its edits,
//! newest first, undoing each: a line an edit's text added is that edit's,
//! unless a later edit already claimed it; context lines keep their
//! identity; a whole-file write claims every line still unclaimed that it
//! wrote, and ends the walk. An edit whose new text is no longer in the file
//! (changed since by something no session recorded) is skipped. A line no
//! recorded edit wrote has no author. Failed calls are listed but never
//! blamed. Edits made by a fork's inherited prefix belong to the session
//! whose own log holds them (its parent).

use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::changes::{self, ChangeKind, Hunk};
use crate::manager::SessionManager;
use crate::transcript::Transcript;
use crate::Error;

/// Why a blame failed.
#[derive(Debug, thiserror::Error)]
pub enum BlameError {
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] Error),
    /// Reading a session failed.
    #[error(transparent)]
    Manager(#[from] crate::manager::ManagerError),
    /// No recorded tool call edited the file.
    #[error("no recorded tool call edited {}", .0.display())]
    UnknownFile(PathBuf),
    /// The line is not in the file.
    #[error("{} has {lines} line(s); there is no line {line}", path.display())]
    NoSuchLine {
        /// The file.
        path: PathBuf,
        /// The line asked for (1-based).
        line: usize,
        /// The file's line count.
        lines: usize,
    },
    /// The cross-session index failed.
    #[cfg(feature = "search")]
    #[error(transparent)]
    Search(#[from] crate::search::SearchError),
}

impl BlameError {
    /// What the caller can do about it.
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            BlameError::Store(e) => e.kind(),
            BlameError::Manager(e) => e.kind(),
            BlameError::UnknownFile(_) => ErrorKind::NotFound,
            BlameError::NoSuchLine { .. } => ErrorKind::Invalid,
            #[cfg(feature = "search")]
            BlameError::Search(e) => e.kind(),
        }
    }
}

/// One recorded edit of the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edit {
    /// The session whose log holds the call.
    pub session: String,
    /// Its title, when it has one.
    pub title: Option<String>,
    /// The session's workspace (the agent's working directory).
    pub workspace: PathBuf,
    /// When the message was written (the session's creation time when the
    /// message carries none).
    pub time: DateTime<Utc>,
    /// Index of the message in the session's conversation.
    pub message: usize,
    /// The `seq` of the record that wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The tool, as the transcript names it.
    pub tool: String,
    /// The tool call's id.
    pub call_id: String,
    /// What it did.
    pub kind: ChangeKind,
    /// The path as the call named it.
    pub path: String,
    /// True when the call's result was an error (never blamed).
    pub failed: bool,
    /// Lines added.
    pub added: usize,
    /// Lines removed.
    pub removed: usize,
    #[serde(skip)]
    hunks: Vec<Hunk>,
}

/// How the sessions were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lookup {
    /// The candidates the caller gave (the search index's).
    Index,
    /// Every session of the store.
    Scan,
}

/// Every recorded edit of one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileHistory {
    /// The file, as asked (normalized).
    pub path: PathBuf,
    /// How the sessions were found.
    pub lookup: Lookup,
    /// Sessions read.
    pub sessions_read: usize,
    /// The edits, newest first.
    pub edits: Vec<Edit>,
}

/// The author of one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineBlame {
    /// The file.
    pub path: PathBuf,
    /// The line (1-based).
    pub line: usize,
    /// Its text now.
    pub text: String,
    /// The edit that last wrote it; `None` when no recorded edit did.
    pub edit: Option<Edit>,
}

/// `path` with `.` and `..` folded (lexically; `..` above the root stays).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            other => out.push(other),
        }
    }
    out.iter().collect()
}

/// Whether a call's `named` path, in a session whose workspace is
/// `workspace`, is the file `query` (normalized).
pub fn same_file(query: &Path, named: &str, workspace: &Path) -> bool {
    let named = Path::new(named);
    let resolved = if named.is_absolute() || workspace.as_os_str().is_empty() {
        normalize(named)
    } else {
        normalize(&workspace.join(named))
    };
    if resolved.is_absolute() == query.is_absolute() {
        return resolved == query;
    }
    // One side relative: the absolute one must end with it.
    let (long, short) = if resolved.is_absolute() {
        (resolved.as_path(), query)
    } else {
        (query, resolved.as_path())
    };
    short.components().next().is_some() && long.ends_with(short)
}

/// The edits of `t` (its own messages, not a fork's inherited ones) to
/// `path`.
fn edits_in(t: &Transcript, path: &Path) -> Vec<Edit> {
    let title = t.title.clone().or_else(|| t.meta.title.clone());
    let mut out = Vec::new();
    for file in changes::reconstruct(&t.messages, &t.message_seqs) {
        for c in file.changes {
            if c.message < t.inherited {
                continue;
            }
            let moved_here = c
                .moved_to
                .as_deref()
                .is_some_and(|to| same_file(path, to, &t.meta.workspace));
            if !moved_here && !same_file(path, &c.path, &t.meta.workspace) {
                continue;
            }
            let time = t
                .messages
                .get(c.message)
                .and_then(|m| m.timestamp)
                .unwrap_or(t.meta.created_at);
            out.push(Edit {
                session: t.meta.id.clone(),
                title: title.clone(),
                workspace: t.meta.workspace.clone(),
                time,
                message: c.message,
                seq: c.seq,
                tool: c.tool,
                call_id: c.call_id,
                // A move away from this path ends its history like a delete.
                kind: if c.kind == ChangeKind::Move && !moved_here {
                    ChangeKind::Delete
                } else {
                    c.kind
                },
                path: if moved_here {
                    c.moved_to.unwrap_or(c.path)
                } else {
                    c.path
                },
                failed: c.failed,
                added: c.added,
                removed: c.removed,
                hunks: c.hunks,
            });
        }
    }
    out
}

/// Every recorded edit of `path` (made absolute by the caller when it can
/// be), newest first, reading the sessions in `candidates` (missing ones
/// skipped), or every session of the store when `None`.
pub fn file_history(
    m: &SessionManager,
    path: &Path,
    candidates: Option<&[String]>,
) -> Result<FileHistory, BlameError> {
    let path = normalize(path);
    let (ids, lookup): (Vec<String>, Lookup) = match candidates {
        Some(c) => (c.to_vec(), Lookup::Index),
        None => (
            m.list_sessions()?.into_iter().map(|e| e.id).collect(),
            Lookup::Scan,
        ),
    };
    let mut edits = Vec::new();
    let mut sessions_read = 0;
    for id in &ids {
        let t = match m.read_session(id) {
            Ok(t) => t,
            // Deleted since the index saw it, or trashed: not a live author.
            Err(e) if e.kind() == crate::error::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        sessions_read += 1;
        edits.extend(edits_in(&t, &path));
    }
    if edits.is_empty() {
        return Err(BlameError::UnknownFile(path));
    }
    sort_newest_first(&mut edits);
    Ok(FileHistory {
        path,
        lookup,
        sessions_read,
        edits,
    })
}

fn sort_newest_first(edits: &mut [Edit]) {
    edits.sort_by(|a, b| {
        (b.time, &b.session, b.seq, b.message).cmp(&(a.time, &a.session, a.seq, a.message))
    });
}

/// One line of the file while walking back: its text and, when it is a
/// line of the file as it is now, that line's index.
#[derive(Debug, Clone)]
struct Slot {
    text: String,
    now: Option<usize>,
}

/// The lines of `text` as [`changes`] splits them.
fn lines_of(text: &str) -> Vec<&str> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// Undo one hunk on `state`, claiming the lines it added for `edit`.
/// Returns false when its new text is not in `state`.
fn undo_hunk(
    state: &mut Vec<Slot>,
    hunk: &Hunk,
    edit: usize,
    owners: &mut [Option<usize>],
) -> bool {
    let new: Vec<(char, &str)> = hunk
        .lines
        .iter()
        .filter(|l| l.op != '-')
        .map(|l| (l.op, l.text.as_str()))
        .collect();
    if new.is_empty() {
        // A pure deletion: nothing to claim, nowhere to anchor it.
        return true;
    }
    let Some((start, first_cut, last_cut)) = find(state, &new) else {
        return false;
    };
    let end = start + new.len();
    for (i, (op, _)) in new.iter().enumerate() {
        if *op == '+' {
            if let Some(now) = state[start + i].now {
                owners[now].get_or_insert(edit);
            }
        }
    }
    // Rebuild the old lines: context keeps its identity, removed lines
    // were never lines of the file as it is now.
    let mut old: Vec<Slot> = Vec::new();
    let mut j = start;
    for l in &hunk.lines {
        match l.op {
            '-' => old.push(Slot {
                text: l.text.clone(),
                now: None,
            }),
            _ => {
                if l.op == ' ' {
                    old.push(Slot {
                        text: l.text.clone(),
                        now: state[j].now,
                    });
                }
                j += 1;
            }
        }
    }
    // A match that began or ended inside a line keeps the rest of it.
    if let Some(first) = old.first_mut() {
        first.text = format!("{}{}", first_cut, first.text);
    } else {
        old.push(Slot {
            text: first_cut,
            now: None,
        });
    }
    if let Some(last) = old.last_mut() {
        last.text.push_str(&last_cut);
    }
    state.splice(start..end, old);
    true
}

/// Where the lines `new` sit in `state`: the first line index, and what the
/// first line has before the match and the last after it (a replacement may
/// begin and end inside a line).
fn find(state: &[Slot], new: &[(char, &str)]) -> Option<(usize, String, String)> {
    let n = new.len();
    if n > state.len() {
        return None;
    }
    // Whole lines first, then a match cut inside its first and last line.
    for start in 0..=state.len() - n {
        if new
            .iter()
            .enumerate()
            .all(|(i, (_, t))| state[start + i].text == *t)
        {
            return Some((start, String::new(), String::new()));
        }
    }
    for start in 0..=state.len() - n {
        let first = &state[start].text;
        let last = &state[start + n - 1].text;
        let ok_middle = (1..n.saturating_sub(1)).all(|i| state[start + i].text == new[i].1);
        if !ok_middle {
            continue;
        }
        if n == 1 {
            if let Some(at) = first.find(new[0].1) {
                return Some((
                    start,
                    first[..at].to_string(),
                    first[at + new[0].1.len()..].to_string(),
                ));
            }
            continue;
        }
        if first.ends_with(new[0].1) && last.starts_with(new[n - 1].1) {
            let cut = first.len() - new[0].1.len();
            return Some((
                start,
                first[..cut].to_string(),
                last[new[n - 1].1.len()..].to_string(),
            ));
        }
    }
    None
}

/// For each line of `content` (the file as it is now), the index in
/// `history.edits` of the edit that last wrote it, if any.
pub fn blame_lines(history: &FileHistory, content: &str) -> Vec<Option<usize>> {
    let now = lines_of(content);
    let mut owners: Vec<Option<usize>> = vec![None; now.len()];
    let mut state: Vec<Slot> = now
        .iter()
        .enumerate()
        .map(|(i, t)| Slot {
            text: t.to_string(),
            now: Some(i),
        })
        .collect();
    for (index, edit) in history.edits.iter().enumerate() {
        if owners.iter().all(Option::is_some) {
            break;
        }
        if edit.failed {
            continue;
        }
        match edit.kind {
            ChangeKind::Write | ChangeKind::Add => {
                let wrote: std::collections::HashSet<&str> = edit
                    .hunks
                    .iter()
                    .flat_map(|h| &h.lines)
                    .filter(|l| l.op == '+')
                    .map(|l| l.text.as_str())
                    .collect();
                for slot in &state {
                    if let Some(n) = slot.now {
                        if wrote.contains(slot.text.as_str()) {
                            owners[n].get_or_insert(index);
                        }
                    }
                }
                break;
            }
            ChangeKind::Delete => break,
            ChangeKind::Edit | ChangeKind::Move => {
                // Hunks applied in order: undone in reverse.
                let mut trial = state.clone();
                let mut claimed = owners.clone();
                let undone = edit
                    .hunks
                    .iter()
                    .rev()
                    .all(|h| undo_hunk(&mut trial, h, index, &mut claimed));
                if undone {
                    state = trial;
                    owners = claimed;
                }
            }
        }
    }
    owners
}

/// Who last wrote line `line` (1-based) of `content`, the file `history`
/// describes as it is now.
pub fn blame_line(
    history: &FileHistory,
    content: &str,
    line: usize,
) -> Result<LineBlame, BlameError> {
    let lines = lines_of(content);
    if line == 0 || line > lines.len() {
        return Err(BlameError::NoSuchLine {
            path: history.path.clone(),
            line,
            lines: lines.len(),
        });
    }
    let owners = blame_lines(history, content);
    Ok(LineBlame {
        path: history.path.clone(),
        line,
        text: lines[line - 1].to_string(),
        edit: owners[line - 1].map(|i| history.edits[i].clone()),
    })
}

/// The sessions whose messages name `path`'s file name, from the store's
/// search index (caught up first); `None` when the index cannot answer
/// precisely (read every session then).
#[cfg(feature = "search")]
pub fn candidates(
    index: &mut crate::search::SearchIndex,
    path: &Path,
) -> Result<Option<Vec<String>>, BlameError> {
    use crate::search::{SearchMode, SearchQuery};
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    let name: String = name.chars().filter(|c| *c != '"').collect();
    if !name.chars().any(char::is_alphanumeric) {
        return Ok(None);
    }
    index.update()?;
    let k = crate::search::MAX_K;
    let hits = index.search(&SearchQuery {
        text: format!("\"{name}\""),
        k,
        mode: SearchMode::Lexical,
        filter: Default::default(),
    })?;
    if hits.len() >= k {
        return Ok(None);
    }
    let mut ids: Vec<String> = hits.into_iter().map(|h| h.session).collect();
    ids.sort();
    ids.dedup();
    Ok(Some(ids))
}

/// [`file_history`] over the sessions [`candidates`] finds in `index`
/// (every session when the index cannot answer precisely). `visible` maps
/// an indexed session id to the id `m` knows it by (`None`: not one of
/// `m`'s sessions); identity for a manager over the indexed store itself.
#[cfg(feature = "search")]
pub fn file_history_indexed(
    m: &SessionManager,
    index: &mut crate::search::SearchIndex,
    path: &Path,
    visible: impl Fn(&str) -> Option<String>,
) -> Result<FileHistory, BlameError> {
    match candidates(index, path)? {
        Some(ids) => {
            let ids: Vec<String> = ids.iter().filter_map(|id| visible(id)).collect();
            file_history(m, path, Some(&ids))
        }
        None => file_history(m, path, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Block, Message, Role};
    use serde_json::{json, Value};

    fn at(minute: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_790_000_000 + minute * 60, 0).unwrap_or_default()
    }

    fn session(id: &str, workspace: &str, calls: &[(i64, &str, Value)]) -> Transcript {
        let mut meta = crate::SessionMeta::new(id);
        meta.workspace = PathBuf::from(workspace);
        meta.created_at = at(0);
        let mut t = Transcript::new(meta);
        for (i, (minute, name, input)) in calls.iter().enumerate() {
            let mut m = Message::new(
                Role::Assistant,
                vec![Block::ToolUse {
                    id: format!("{id}-{i}"),
                    name: name.to_string(),
                    input: input.clone(),
                }],
            );
            m.timestamp = Some(at(*minute));
            t.messages.push(m);
            t.message_seqs.push(i as u64 + 2);
        }
        t
    }

    fn history(sessions: &[Transcript], path: &str) -> FileHistory {
        let path = PathBuf::from(path);
        let mut edits: Vec<Edit> = sessions.iter().flat_map(|t| edits_in(t, &path)).collect();
        sort_newest_first(&mut edits);
        FileHistory {
            path,
            lookup: Lookup::Scan,
            sessions_read: sessions.len(),
            edits,
        }
    }

    const FILE: &str = "fn total() {\n    let a = 1;\n    let b = 2;\n    a + b\n}\n";

    #[test]
    fn the_later_of_two_sessions_editing_a_line_wins() {
        let a = session(
            "a",
            "/p",
            &[
                (
                    1,
                    "Write",
                    json!({"file_path": "/p/src/lib.rs", "content": FILE}),
                ),
                (
                    5,
                    "Edit",
                    json!({"file_path": "src/lib.rs", "old_string": "let a = 1;", "new_string": "let a = 10;"}),
                ),
            ],
        );
        let b = session(
            "b",
            "/p/src",
            &[(
                9,
                "Edit",
                json!({"file_path": "lib.rs", "old_string": "    let a = 10;", "new_string": "    let a = 100;"}),
            )],
        );
        let now = FILE.replace("let a = 1;", "let a = 100;");
        // Whatever order the sessions are read in.
        for order in [vec![a.clone(), b.clone()], vec![b.clone(), a.clone()]] {
            let h = history(&order, "/p/src/lib.rs");
            assert_eq!(h.edits.len(), 3);
            assert_eq!(h.edits[0].session, "b", "newest first");
            let got = blame_line(&h, &now, 2).unwrap();
            assert_eq!(got.text, "    let a = 100;");
            let e = got.edit.unwrap();
            assert_eq!((e.session.as_str(), e.message, e.seq), ("b", 0, Some(2)));
        }
        // Before b's edit, the line was a's second call's.
        let h = history(&[a], "/p/src/lib.rs");
        let then = FILE.replace("let a = 1;", "let a = 10;");
        let e = blame_line(&h, &then, 2).unwrap().edit.unwrap();
        assert_eq!((e.session.as_str(), e.message), ("a", 1));
    }

    #[test]
    fn an_untouched_line_belongs_to_the_session_that_wrote_the_file() {
        let a = session(
            "writer",
            "/p",
            &[(
                1,
                "Write",
                json!({"file_path": "/p/src/lib.rs", "content": FILE}),
            )],
        );
        let b = session(
            "editor",
            "/p",
            &[(
                3,
                "Edit",
                json!({"file_path": "/p/src/lib.rs", "old_string": "a + b", "new_string": "a * b"}),
            )],
        );
        let now = FILE.replace("a + b", "a * b");
        let h = history(&[a, b], "/p/src/lib.rs");
        let owners: Vec<Option<&str>> = blame_lines(&h, &now)
            .into_iter()
            .map(|o| o.map(|i| h.edits[i].session.as_str()))
            .collect();
        assert_eq!(
            owners,
            [
                Some("writer"),
                Some("writer"),
                Some("writer"),
                Some("editor"),
                Some("writer")
            ]
        );
    }

    #[test]
    fn lines_no_edit_wrote_have_no_author_and_failed_calls_are_never_blamed() {
        let a = session(
            "a",
            "/p",
            &[
                (
                    1,
                    "Edit",
                    json!({"file_path": "/p/x.py", "old_string": "x = 1\n", "new_string": "x = 1\ny = 2\n"}),
                ),
                (
                    2,
                    "Edit",
                    json!({"file_path": "/p/x.py", "old_string": "y = 2", "new_string": "y = 3"}),
                ),
            ],
        );
        let mut h = history(&[a], "/p/x.py");
        h.edits[0].failed = true; // the second call failed: the file still says y = 2
        let now = "import os\nx = 1\ny = 2\n";
        let owners = blame_lines(&h, now);
        assert_eq!(owners[0], None, "a line older than every recorded edit");
        assert_eq!(owners[1], None, "context is not claimed");
        assert_eq!(owners[2].map(|i| h.edits[i].message), Some(0));
    }

    #[test]
    fn codex_patches_and_edits_inside_a_line_are_undone() {
        let patch = "*** Begin Patch\n*** Update File: app/main.py\n@@ def main\n def main():\n-    run(1)\n+    run(2)\n+    log()\n*** End Patch";
        let a = session(
            "codex",
            "/w",
            &[
                (
                    1,
                    "apply_patch",
                    json!({"input": "*** Begin Patch\n*** Add File: app/main.py\n+def main():\n+    run(1)\n*** End Patch"}),
                ),
                (2, "apply_patch", json!(patch)),
            ],
        );
        let b = session(
            "claude",
            "/elsewhere",
            &[(
                3,
                "Edit",
                json!({"file_path": "/w/app/main.py", "old_string": "run(2)", "new_string": "run(3)"}),
            )],
        );
        let now = "def main():\n    run(3)\n    log()\n";
        let h = history(&[a, b], "/w/app/main.py");
        let owners: Vec<Option<(&str, usize)>> = blame_lines(&h, now)
            .into_iter()
            .map(|o| o.map(|i| (h.edits[i].session.as_str(), h.edits[i].message)))
            .collect();
        assert_eq!(
            owners,
            [Some(("codex", 0)), Some(("claude", 0)), Some(("codex", 1))]
        );
    }

    #[test]
    fn paths_match_absolute_relative_and_without_a_workspace() {
        let q = Path::new("/p/src/lib.rs");
        assert!(same_file(q, "/p/src/lib.rs", Path::new("/other")));
        assert!(same_file(q, "src/lib.rs", Path::new("/p")));
        assert!(same_file(q, "../src/./lib.rs", Path::new("/p/docs")));
        assert!(same_file(q, "src/lib.rs", Path::new("")));
        assert!(!same_file(q, "lib.rs", Path::new("/p")));
        assert!(!same_file(q, "/q/src/lib.rs", Path::new("/p")));
        assert!(
            !same_file(q, "rc/lib.rs", Path::new("")),
            "whole components only"
        );
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }

    #[test]
    fn an_unknown_file_and_a_missing_line_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(crate::store::file::FileStore::new(
            dir.path(),
            crate::store::Durability::None,
        ));
        let m = SessionManager::with_store(store, crate::manager::ManagerOptions::default());
        let err = file_history(&m, Path::new("/nowhere/x.rs"), None).unwrap_err();
        assert!(matches!(err, BlameError::UnknownFile(ref p) if p == Path::new("/nowhere/x.rs")));
        assert_eq!(err.kind(), crate::error::ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            "no recorded tool call edited /nowhere/x.rs"
        );
        let a = session(
            "a",
            "/p",
            &[(1, "Write", json!({"file_path": "/p/a", "content": "one\n"}))],
        );
        let h = history(&[a], "/p/a");
        let err = blame_line(&h, "one\n", 2).unwrap_err();
        assert!(matches!(
            err,
            BlameError::NoSuchLine {
                line: 2,
                lines: 1,
                ..
            }
        ));
    }
}
