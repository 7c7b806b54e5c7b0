//! Claude Code resumed sessions: a new file that first repeats an earlier
//! session's lines (uuids included, its own `sessionId`), then continues.
//!
//! The repeated lines are stored once, by the session that wrote them
//! first: the resumed file becomes a fork by reference of that session,
//! cut after the entry its own lines continue from, holding only its own
//! lines. This module finds the predecessor (an imported file of the same
//! project folder with the same first uuid whose imported lines the new
//! file starts with), orders a run so a predecessor is imported before the
//! files that repeat it, and resolves the fork point in the store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::cursor::{Cursors, FileCursor};
use super::{lines, Agent, ImportError, Source};
use crate::manager::SessionManager;
use crate::message::SOURCE_KEY;

/// At most this many leading lines are read to find a file's first uuid.
const HEAD_LINES: usize = 64;

/// Whether `source` can repeat or be repeated: a plain (not compressed)
/// top-level Claude Code file.
pub(super) fn applies(source: &Source, child: bool) -> bool {
    source.agent == Agent::ClaudeCode && !child && !lines::is_compressed(&source.path)
}

/// The uuid of the file's first entry that has one (among its first lines).
pub(super) fn first_uuid(path: &Path) -> Option<String> {
    let file = lines::open_file(path).ok()?;
    for line in BufReader::new(file).lines().take(HEAD_LINES) {
        let line = line.ok()?;
        let Ok(v) = serde_json::from_str::<Map<String, Value>>(&line) else {
            continue;
        };
        if let Some(u) = v.get("uuid").and_then(Value::as_str) {
            return Some(u.to_string());
        }
    }
    None
}

/// Put the new files of each (project folder, first uuid) group in the
/// order of their newest line's time (then size, then path), at the places
/// the group held in `order`: a file that repeats another and continues it
/// was written on after the lines it repeats, so it comes after it (a copy
/// made while its original was still growing, or one not grown yet, ends no
/// later than the original).
pub(super) fn order_new(order: &mut [&Source], new: &HashMap<PathBuf, String>) {
    let mut groups: BTreeMap<(PathBuf, &str), Vec<usize>> = BTreeMap::new();
    for (i, s) in order.iter().enumerate() {
        if let Some(u) = new.get(&s.path) {
            let dir = s.path.parent().map(Path::to_path_buf).unwrap_or_default();
            groups.entry((dir, u.as_str())).or_default().push(i);
        }
    }
    for slots in groups.values().filter(|g| g.len() > 1) {
        let mut members: Vec<&Source> = slots.iter().map(|&i| order[i]).collect();
        members.sort_by_key(|s| {
            let size = std::fs::metadata(&s.path).map_or(0, |m| m.len());
            (last_time(&s.path), size, s.path.clone())
        });
        for (&slot, s) in slots.iter().zip(members) {
            order[slot] = s;
        }
    }
}

/// At most this many trailing bytes are read to find a file's newest time.
const TAIL_BYTES: u64 = 256 * 1024;

/// The newest `timestamp` among the file's last lines (its tail), if any.
fn last_time(path: &Path) -> Option<chrono::DateTime<chrono::Utc>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = lines::open_file(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))
        .ok()?;
    let mut tail = Vec::new();
    file.take(TAIL_BYTES).read_to_end(&mut tail).ok()?;
    tail.split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Map<String, Value>>(line).ok())
        .filter_map(|v| {
            let at = v.get("timestamp")?.as_str()?;
            chrono::DateTime::parse_from_rfc3339(at).ok()
        })
        .map(|t| t.with_timezone(&chrono::Utc))
        .max()
}

/// Files that may repeat one another, by (project folder, first uuid):
/// the new files of a run (`new`: path → first uuid) and the imported
/// files of their folders (their first uuid kept in their cursors).
pub(super) type Families = HashMap<(PathBuf, String), Vec<PathBuf>>;

/// The [`Families`] of the new files `new`.
pub(super) fn families(new: &HashMap<PathBuf, String>, cursors: &mut Cursors) -> Families {
    let folder = |p: &Path| p.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut out: Families = HashMap::new();
    for (p, u) in new {
        out.entry((folder(p), u.clone()))
            .or_default()
            .push(p.clone());
    }
    let folders: HashSet<PathBuf> = new.keys().map(|p| folder(p)).collect();
    if folders.is_empty() {
        return out;
    }
    for (p, fc) in cursors.files.iter_mut() {
        if new.contains_key(p)
            || fc.agent != Agent::ClaudeCode.as_str()
            || !folders.contains(&folder(p))
            || lines::is_compressed(p)
            || super::claude::is_child_path(p)
        {
            continue;
        }
        if fc.first_uuid.is_none() {
            fc.first_uuid = first_uuid(p);
        }
        if let Some(u) = &fc.first_uuid {
            out.entry((folder(p), u.clone()))
                .or_default()
                .push(p.clone());
        }
    }
    out
}

/// The new file `path` repeats the start of: among the imported files of
/// its family (`members`), the one whose imported lines it repeats most
/// (leading entries equal but for `sessionId`). Returns its path and how
/// many leading lines of `path` repeat it.
pub(super) fn predecessor(
    manager: &SessionManager,
    cursors: &Cursors,
    path: &Path,
    members: &[PathBuf],
) -> Result<Option<(PathBuf, u64)>, ImportError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    for p in members.iter().filter(|p| p.as_path() != path) {
        let Some(fc) = cursors.files.get(p) else {
            continue;
        };
        let Some(main) = fc.sessions.get("main") else {
            continue;
        };
        if fc.lines > 0 && exists(manager, &main.id)? {
            candidates.push(p.clone());
        }
    }
    if candidates.is_empty() {
        return Ok(None);
    }
    let own = lines::parse(path, &lines::read_all(path)?).lines;
    let mut best: Option<(usize, PathBuf, u64)> = None;
    for c in candidates {
        let imported = cursors.files.get(&c).map_or(0, |fc| fc.lines);
        let Ok(bytes) = lines::read_all(&c) else {
            continue;
        };
        let known: HashSet<(String, blake3::Hash)> = lines::parse(&c, &bytes)
            .lines
            .iter()
            .take_while(|l| l.number <= imported)
            .filter_map(entry_key)
            .collect();
        let (mut score, mut through) = (0usize, 0u64);
        for l in &own {
            match entry_key(l) {
                Some(k) if known.contains(&k) => {
                    score += 1;
                    through = l.number;
                }
                Some(_) => break,
                None => {}
            }
        }
        if score > 0 && best.as_ref().is_none_or(|b| score > b.0) {
            best = Some((score, c, through));
        }
    }
    Ok(best.map(|(_, p, through)| (p, through)))
}

/// An entry with a uuid, as a copy repeats it: its uuid and a hash of
/// all its fields but `sessionId` (a copy carries its own).
fn entry_key(line: &lines::Line) -> Option<(String, blake3::Hash)> {
    let uuid = line.value.get("uuid").and_then(Value::as_str)?;
    let mut hasher = blake3::Hasher::new();
    for (k, v) in line.value.iter().filter(|(k, _)| k.as_str() != "sessionId") {
        hasher.update(k.as_bytes());
        hasher.update(&[0]);
        hasher.update(v.to_string().as_bytes());
        hasher.update(&[0]);
    }
    Some((uuid.to_string(), hasher.finalize()))
}

/// Where a resumed session's fork cuts the predecessor's sessions: the
/// session (main first, then its branches) holding a message read from
/// the entry `uuid` (a split response's further lines included), and the
/// messages through it. An entry that is no message cuts the main session
/// after all its messages.
pub(super) fn fork_point(
    manager: &SessionManager,
    predecessor: &FileCursor,
    uuid: &str,
) -> Result<Option<(String, usize)>, ImportError> {
    let mut ids: Vec<&str> = Vec::new();
    if let Some(main) = predecessor.sessions.get("main") {
        ids.push(&main.id);
    }
    ids.extend(
        predecessor
            .sessions
            .iter()
            .filter(|(k, _)| k.starts_with("branch:"))
            .map(|(_, s)| s.id.as_str()),
    );
    let mut main_len = None;
    for id in &ids {
        if !exists(manager, id)? {
            continue;
        }
        let t = manager.read_stored(id)?;
        main_len.get_or_insert((id.to_string(), t.messages.len()));
        let at = t.messages.iter().position(|m| {
            let Some(trace) = m.extra.get(SOURCE_KEY) else {
                return false;
            };
            let of = |t: &Value| t.get("uuid").and_then(Value::as_str) == Some(uuid);
            of(trace)
                || trace
                    .get("merged")
                    .and_then(Value::as_array)
                    .is_some_and(|parts| parts.iter().any(of))
        });
        if let Some(i) = at {
            return Ok(Some((id.to_string(), i + 1)));
        }
    }
    Ok(main_len)
}

/// Whether the store has a live session `id`.
pub(super) fn exists(manager: &SessionManager, id: &str) -> Result<bool, ImportError> {
    match manager.store().read_header(id) {
        Ok(h) => Ok(h.is_some()),
        Err(crate::Error::NotFound(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
