//! Codex paginated history: the rollouts a rollout continues, found by
//! reference, never by guessing from content.
//!
//! Two kinds of reference say "the history before this line is elsewhere":
//!
//! - a `rollout_reference{rollout_path, thread_id, segment_id, nth_user_message, ...}`
//!   item at the head of a new segment: when a rollout rotates, Codex copies
//!   it to an immutable path `<CODEX_HOME>/<dir>/<thread_id>/<segment_id|initial>/<file>`
//!   and replaces the live file with a successor that starts with the
//!   reference;
//! - `session_meta.payload.history_base{thread_id, end_ordinal_exclusive, end_byte_offset}`:
//!   the thread continues another rollout's history up to that point.
//!
//! A reference to the SAME thread is a predecessor segment: its lines are
//! read here (recursively, cycles and depth bounded) and come before the
//! rollout's own, so one thread split into segments is one memoir session.
//! A reference to ANOTHER thread is a fork: [`super::codex`] plans it as a
//! fork by reference of that thread's session. The segment is looked up at
//! its recorded path first, then under the Codex home holding the rollout
//! (whatever the rotated-segments directory is called), and validated by the
//! `session_meta` it starts with (thread id and segment id), as Codex does.
//! Everything is opened read-only.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::lines::{self, Line};
use super::{str_of, Skipped};

/// Most predecessor segments followed from one rollout.
pub const MAX_SEGMENTS: usize = 256;

/// A `rollout_reference` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Where the referenced rollout was published.
    pub rollout_path: Option<PathBuf>,
    /// Its thread.
    pub thread_id: Option<String>,
    /// Its segment (`None`: the thread's initial segment).
    pub segment_id: Option<String>,
    /// Only the history before this user message (0-based) is inherited;
    /// `None` (or the maximum) is all of it.
    pub nth_user_message: Option<u64>,
}

impl Reference {
    /// The reference on a line of type `rollout_reference`, if it is one.
    pub fn of(kind: &str, payload: &Map<String, Value>) -> Option<Reference> {
        if kind != "rollout_reference" {
            return None;
        }
        Some(Reference {
            rollout_path: str_of(payload, "rollout_path").map(PathBuf::from),
            thread_id: str_of(payload, "thread_id").map(str::to_string),
            segment_id: str_of(payload, "segment_id").map(str::to_string),
            nth_user_message: payload
                .get("nth_user_message")
                .and_then(Value::as_u64)
                .filter(|n| *n != u64::MAX),
        })
    }

    /// Whether it names a predecessor segment of `thread` (the same thread;
    /// a `nth_user_message` cut keeps only its history before that turn).
    pub fn continues(&self, thread: &str) -> bool {
        self.thread_id.as_deref().is_none_or(|t| t == thread)
    }
}

/// The `session_meta` identity of a rollout: `(thread id, segment id)`.
fn identity(path: &Path) -> Option<(String, Option<String>)> {
    let line = super::lines::first_line(path).ok().flatten()?;
    let v: Map<String, Value> = serde_json::from_slice(&line).ok()?;
    let meta = match v.get("payload") {
        Some(Value::Object(p)) if str_of(&v, "type") == Some("session_meta") => p,
        _ => &v,
    };
    Some((
        str_of(meta, "id")?.to_string(),
        str_of(meta, "segment_id").map(str::to_string),
    ))
}

/// The Codex home holding `path`: its nearest ancestor with a `sessions`
/// or `archived_sessions` directory.
pub fn codex_home(path: &Path) -> Option<PathBuf> {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    abs.ancestors()
        .skip(1)
        .find(|a| a.join("sessions").is_dir() || a.join("archived_sessions").is_dir())
        .map(Path::to_path_buf)
}

/// Whether an id from a source can name one directory (no separator, not
/// `.` or `..`): ids are joined to paths, never allowed to climb out.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\', '\0'])
}

fn is_rollout_name(p: &Path) -> bool {
    p.file_name().map(|n| n.to_string_lossy()).is_some_and(|n| {
        n.starts_with("rollout-") && (n.ends_with(".jsonl") || n.ends_with(lines::ZSTD_SUFFIX))
    })
}

/// Whether `path` lies where Codex keeps stored segments,
/// `.../<thread uuid>/<segment uuid|initial>/rollout-*`: such files are
/// read through the references to them, not as rollouts of their own.
pub fn is_stored_segment(path: &Path) -> bool {
    let dir = path.parent();
    let segment = dir.and_then(Path::file_name).map(|n| n.to_string_lossy());
    let thread = dir
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy());
    let is_uuid = |s: &str| uuid::Uuid::parse_str(s).is_ok();
    matches!((segment, thread), (Some(s), Some(t))
        if (s == "initial" || is_uuid(&s)) && is_uuid(&t))
}

/// The file `reference` names, validated, never `head` itself. Only files
/// inside the Codex home holding `head` count (a recorded path elsewhere,
/// or escaping it through `..` or a link, is not followed), regular files
/// whose first line is the `session_meta` of the referenced thread and
/// segment.
pub fn resolve(reference: &Reference, head: &Path) -> Option<PathBuf> {
    let home = codex_home(head)?;
    let home_abs = std::fs::canonicalize(&home).ok()?;
    let head_abs = std::fs::canonicalize(head).unwrap_or_else(|_| head.to_path_buf());
    let valid = |p: &Path| -> bool {
        let Ok(abs) = std::fs::canonicalize(p) else {
            return false;
        };
        if !abs.is_file() || abs == head_abs || !abs.starts_with(&home_abs) {
            return false;
        }
        let Some((thread, segment)) = identity(p) else {
            return false;
        };
        reference.thread_id.as_deref().is_none_or(|t| t == thread)
            && segment == reference.segment_id
    };
    if let Some(p) = &reference.rollout_path {
        if valid(p) {
            return Some(p.clone());
        }
        let mut zst = p.as_os_str().to_os_string();
        zst.push(".zst");
        let zst = PathBuf::from(zst);
        if valid(&zst) {
            return Some(zst);
        }
    }
    let thread = reference.thread_id.clone().or_else(|| {
        reference
            .rollout_path
            .as_deref()
            .and_then(|p| p.parent()?.parent()?.file_name())
            .map(|n| n.to_string_lossy().into_owned())
    })?;
    let segment = reference.segment_id.as_deref().unwrap_or("initial");
    if !is_name(&thread) || !is_name(segment) {
        return None;
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for dir in std::fs::read_dir(&home).ok()?.flatten() {
        if !dir.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let candidates = dir.path().join(&thread).join(segment);
        let Ok(entries) = std::fs::read_dir(&candidates) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if is_rollout_name(&p) && valid(&p) && !found.contains(&p) {
                found.push(p);
            }
        }
    }
    found.sort();
    // Two candidates for one segment: ambiguous, as Codex judges it.
    (found.len() == 1).then(|| found.remove(0))
}

/// The lines a rollout's predecessor segments hold, oldest first, with
/// the files they came from and what did not parse in them.
#[derive(Debug, Default)]
pub struct Chain {
    /// The predecessors' lines, each numbered in its file plus the lines
    /// of the segments before it.
    pub lines: Vec<Line>,
    /// The predecessor files, oldest first.
    pub files: Vec<PathBuf>,
    /// Where each predecessor's lines start (the offset added to its line
    /// numbers), in the order of `files`.
    pub offsets: Vec<u64>,
    /// Complete lines of all the predecessors (the rollout's own lines
    /// are numbered after them).
    pub line_count: u64,
    /// Lines of the predecessors that did not parse (their own file and line).
    pub skipped: Vec<Skipped>,
    /// References that could not be followed.
    pub notes: Vec<Skipped>,
}

impl Chain {
    /// The file and line (in that file) of chain line `number` of the
    /// rollout at `head`.
    pub fn locate(&self, head: &Path, number: u64) -> (PathBuf, u64) {
        if number > self.line_count || self.files.is_empty() {
            return (head.to_path_buf(), number.saturating_sub(self.line_count));
        }
        let k = self
            .offsets
            .partition_point(|o| *o < number)
            .saturating_sub(1);
        (self.files[k].clone(), number - self.offsets[k])
    }
}

/// One line's `(type, payload)` as far as references go.
fn kind_of(v: &Map<String, Value>) -> (&str, Option<&Map<String, Value>>) {
    (
        str_of(v, "type").unwrap_or(""),
        v.get("payload").and_then(Value::as_object),
    )
}

/// The same-thread predecessor a rollout's head names: a
/// `rollout_reference` among its first lines, or a `history_base` of the
/// same thread (the base's prefix up to `end_byte_offset`).
fn predecessor(
    path: &Path,
    lines: &[Line],
    thread: &str,
    notes: &mut Vec<Skipped>,
) -> Option<(PathBuf, Option<u64>, Option<u64>)> {
    let note = |line: u64, reason: String| Skipped {
        file: path.to_path_buf(),
        line,
        reason,
    };
    for l in lines.iter().take(8) {
        let (kind, payload) = kind_of(&l.value);
        if let Some(hb) = payload
            .filter(|_| kind == "session_meta")
            .and_then(|p| p.get("history_base"))
            .and_then(Value::as_object)
        {
            if str_of(hb, "thread_id") == Some(thread) {
                let end = hb.get("end_byte_offset").and_then(Value::as_u64);
                let reference = Reference {
                    rollout_path: None,
                    thread_id: Some(thread.to_string()),
                    segment_id: None,
                    nth_user_message: None,
                };
                return match history_base_file(path, &reference, end) {
                    Some(p) => Some((p, end, None)),
                    None => {
                        notes.push(note(
                            l.number,
                            format!("history_base of {thread} not found: imported from here"),
                        ));
                        None
                    }
                };
            }
        }
        let Some(reference) = payload.and_then(|p| Reference::of(kind, p)) else {
            continue;
        };
        if !reference.continues(thread) {
            return None;
        }
        return match resolve(&reference, path) {
            Some(p) => Some((p, None, reference.nth_user_message)),
            None => {
                notes.push(note(
                    l.number,
                    format!(
                        "rollout_reference to segment {} of {thread} not found: imported from here",
                        reference.segment_id.as_deref().unwrap_or("initial")
                    ),
                ));
                None
            }
        };
    }
    None
}

/// The index of the first line of the turn of the 0-based user message
/// `n` of `lines` (its `user_message` event, or, in rollouts without
/// those, its user `message` item, moved back over the turn's opening
/// `task_started`/`turn_started`/`turn_context` lines); `lines.len()` when
/// there are fewer user messages. Codex's `nth_user_message` cut.
fn turn_start(lines: &[Line], n: u64) -> usize {
    let user_at = |event: bool| {
        lines
            .iter()
            .enumerate()
            .filter(|(_, l)| {
                let (kind, payload) = kind_of(&l.value);
                let p = payload.map(|p| (str_of(p, "type"), str_of(p, "role")));
                if event {
                    kind == "event_msg" && p.is_some_and(|(t, _)| t == Some("user_message"))
                } else {
                    kind == "response_item"
                        && p == Some((Some("message"), Some("user")))
                        && !payload
                            .and_then(|p| p.get("content"))
                            .and_then(|c| c.get(0))
                            .and_then(|c| c.get("text"))
                            .and_then(Value::as_str)
                            .is_some_and(|t| t.trim_start().starts_with('<'))
                }
            })
            .map(|(i, _)| i)
            .nth(n as usize)
    };
    let has_events = lines.iter().any(|l| {
        let (kind, payload) = kind_of(&l.value);
        kind == "event_msg" && payload.and_then(|p| str_of(p, "type")) == Some("user_message")
    });
    let Some(mut at) = user_at(has_events) else {
        return lines.len();
    };
    while at > 0 {
        let (kind, payload) = kind_of(&lines[at - 1].value);
        let opening = kind == "turn_context"
            || (kind == "event_msg"
                && matches!(
                    payload.and_then(|p| str_of(p, "type")),
                    Some("task_started" | "turn_started")
                ));
        if !opening {
            break;
        }
        at -= 1;
    }
    at
}

/// A same-thread `history_base`: a stored segment of the thread (other
/// than `head`) at least `end` bytes long whose prefix ends a line there.
fn history_base_file(head: &Path, reference: &Reference, end: Option<u64>) -> Option<PathBuf> {
    let home = codex_home(head)?;
    let thread = reference.thread_id.as_deref().filter(|t| is_name(t))?;
    let head_abs = std::fs::canonicalize(head).ok()?;
    let mut found = Vec::new();
    for dir in std::fs::read_dir(&home).ok()?.flatten() {
        let Ok(segments) = std::fs::read_dir(dir.path().join(thread)) else {
            continue;
        };
        for seg in segments.flatten() {
            let Ok(files) = std::fs::read_dir(seg.path()) else {
                continue;
            };
            for f in files.flatten() {
                let p = f.path();
                if !is_rollout_name(&p) || std::fs::canonicalize(&p).ok() == Some(head_abs.clone())
                {
                    continue;
                }
                if identity(&p).is_some_and(|(t, _)| t == thread) {
                    found.push(p);
                }
            }
        }
    }
    found.sort();
    found
        .into_iter()
        .find(|p| end.is_none_or(|end| ends_a_line_at(p, end)))
}

/// Whether byte `end` of the (decompressed) file at `p` follows a newline.
fn ends_a_line_at(p: &Path, end: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    if end == 0 {
        return false;
    }
    if lines::is_compressed(p) {
        return lines::read_all(p)
            .is_ok_and(|b| b.len() as u64 >= end && b[end as usize - 1] == b'\n');
    }
    let mut byte = [0u8; 1];
    std::fs::File::open(p)
        .and_then(|mut f| {
            f.seek(SeekFrom::Start(end - 1))?;
            f.read_exact(&mut byte)
        })
        .is_ok_and(|()| byte[0] == b'\n')
}

/// Follow the predecessors of the rollout at `path` (whose lines are
/// `lines`, thread `thread`), oldest first.
pub fn chain(path: &Path, lines: &[Line], thread: &str) -> Chain {
    let mut out = Chain::default();
    let mut seen: HashSet<PathBuf> = HashSet::new();
    seen.insert(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
    let mut parts: Vec<(PathBuf, Vec<Line>, u64)> = Vec::new();
    let mut next = predecessor(path, lines, thread, &mut out.notes);
    while let Some((p, end, nth)) = next.take() {
        let key = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if !seen.insert(key) || parts.len() >= MAX_SEGMENTS {
            out.notes.push(Skipped {
                file: p.clone(),
                line: 0,
                reason: "rollout reference cycle or chain too deep: not followed further".into(),
            });
            break;
        }
        let Ok(mut bytes) = lines::read_all(&p) else {
            out.notes.push(Skipped {
                file: p.clone(),
                line: 0,
                reason: "referenced segment could not be read".into(),
            });
            break;
        };
        if let Some(end) = end {
            bytes.truncate(end as usize);
        }
        let mut file = lines::parse(&p, &bytes);
        out.skipped.extend(file.skipped);
        next = predecessor(&p, &file.lines, thread, &mut out.notes);
        if let Some(n) = nth {
            file.lines.truncate(turn_start(&file.lines, n));
        }
        parts.push((p, file.lines, file.complete_lines));
    }
    // Each segment's lines keep their numbers, shifted past the segments
    // before it: the numbers a segment had while it was the live rollout.
    let mut offset = 0;
    for (p, part, complete) in parts.into_iter().rev() {
        for mut l in part {
            l.number += offset;
            out.lines.push(l);
        }
        out.files.push(p);
        out.offsets.push(offset);
        offset += complete;
    }
    out.line_count = offset;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "0199aaaa-0000-7000-8000-00000000000a";

    fn write_segment(path: &Path, thread: &str, segment: Option<&str>) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let meta = serde_json::json!({"type": "session_meta", "ordinal": 0,
            "payload": {"id": thread, "segment_id": segment}});
        std::fs::write(path, format!("{meta}\n")).unwrap();
    }

    fn reference(path: &Path, thread: &str) -> Reference {
        Reference {
            rollout_path: Some(path.to_path_buf()),
            thread_id: Some(thread.into()),
            segment_id: None,
            nth_user_message: None,
        }
    }

    #[test]
    fn references_resolve_only_inside_the_codex_home_and_by_identity() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let head = home.join(format!("sessions/2026/07/13/rollout-x-{T}.jsonl"));
        write_segment(&head, T, Some("0199aaaa-5e90-7000-8000-000000000001"));
        let stored = home.join(format!("segs/{T}/initial/rollout-x-{T}.jsonl"));
        write_segment(&stored, T, None);
        // Found at its recorded path, and (stale path) by thread and segment.
        assert_eq!(resolve(&reference(&stored, T), &head), Some(stored.clone()));
        let stale = tmp.path().join("gone.jsonl");
        assert_eq!(resolve(&reference(&stale, T), &head), Some(stored.clone()));
        // A valid-looking file outside the home is not followed.
        let outside = tmp
            .path()
            .join(format!("elsewhere/{T}/initial/rollout-x-{T}.jsonl"));
        write_segment(&outside, T, None);
        std::fs::remove_file(&stored).unwrap();
        assert_eq!(resolve(&reference(&outside, T), &head), None);
        // Nor a wrong identity, nor the head itself, nor a climbing id.
        write_segment(&stored, "0199ffff-0000-7000-8000-00000000000f", None);
        assert_eq!(resolve(&reference(&stored, T), &head), None);
        assert_eq!(resolve(&reference(&head, T), &head), None);
        assert_eq!(resolve(&reference(&stale, "../.."), &head), None);
    }

    #[test]
    fn a_user_message_cut_drops_that_turn_with_its_opening_lines() {
        let line = |number: u64, v: Value| Line {
            number,
            value: v.as_object().unwrap().clone(),
        };
        let ev = |t: &str| serde_json::json!({"type": "event_msg", "payload": {"type": t}});
        let lines = vec![
            line(
                1,
                serde_json::json!({"type": "session_meta", "payload": {"id": T}}),
            ),
            line(
                2,
                serde_json::json!({"type": "turn_context", "payload": {}}),
            ),
            line(3, ev("user_message")),
            line(4, ev("agent_message")),
            line(5, ev("task_started")),
            line(
                6,
                serde_json::json!({"type": "turn_context", "payload": {}}),
            ),
            line(7, ev("user_message")),
            line(8, ev("agent_message")),
        ];
        assert_eq!(turn_start(&lines, 0), 1);
        assert_eq!(turn_start(&lines, 1), 4);
        assert_eq!(turn_start(&lines, 2), lines.len());
    }

    #[test]
    fn stored_segment_paths_and_chain_line_locations() {
        assert!(is_stored_segment(Path::new(&format!(
            "/h/x/{T}/initial/rollout-a.jsonl"
        ))));
        assert!(!is_stored_segment(Path::new(
            "/h/sessions/2026/07/13/rollout-a.jsonl"
        )));
        let chain = Chain {
            files: vec!["/a".into(), "/b".into()],
            offsets: vec![0, 7],
            line_count: 10,
            ..Chain::default()
        };
        let head = Path::new("/head");
        assert_eq!(chain.locate(head, 7), (PathBuf::from("/a"), 7));
        assert_eq!(chain.locate(head, 8), (PathBuf::from("/b"), 1));
        assert_eq!(chain.locate(head, 12), (PathBuf::from("/head"), 2));
    }
}
