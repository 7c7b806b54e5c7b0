//! Explicit notes: what an agent asked memoir to remember (the MCP tools
//! `remember` and `forget`), kept as ordinary memoir records.
//!
//! Each project has one notes session, id [`notes_session_id`] (a hash of
//! the project's key, so every process of the project names the same one),
//! written through [`SessionManager`] like any other session: the file
//! store's per-append lock makes every note one record on its own line,
//! checksummed and hash-chained, so concurrent writer processes never lose
//! or interleave each other's notes, and the search index finds them like
//! any message. The records (`docs/FORMAT.md`, "Notes session"):
//!
//! - a note is a `message` record with role `user`, the note's text as its
//!   only text block, and `note: {v, id, tags?, session?}` ([`NOTE_KEY`]);
//! - forgetting is a tombstone, never a deletion: a `message` record with
//!   role `system`, text `forgot note <id>`, and `note_forget: {v, id}`
//!   ([`FORGET_KEY`]). Readers ([`Notes::list`]) drop forgotten notes; the
//!   original record stays in the log (and in exports);
//! - a fact promoted from a session ([`crate::promote`]) is a note whose
//!   `note` object also holds `promoted: {session, sources}` ([`NotePromotion`]).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::manager::{ManagerError, Result, SessionManager};
use crate::message::{Message, Role};
use crate::record::PromotionSource;

/// Key in [`Message::extra`] of a note's metadata.
pub const NOTE_KEY: &str = "note";
/// Key in [`Message::extra`] of a tombstone.
pub const FORGET_KEY: &str = "note_forget";
/// Version of the note and tombstone objects.
pub const NOTES_FORMAT: u32 = 1;
/// Prefix of every notes session id.
pub const NOTES_PREFIX: &str = "notes-";
/// Largest note text, in bytes.
pub const MAX_NOTE_BYTES: usize = 16 * 1024;
/// Most tags on one note.
pub const MAX_TAGS: usize = 16;
/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 64;

/// The notes session of the project whose key is `project` (a workspace path
/// or a server project name): `notes-` and 16 hex digits of its BLAKE3 hash.
pub fn notes_session_id(project: &str) -> String {
    let hash = blake3::hash(project.as_bytes()).to_hex();
    format!("{NOTES_PREFIX}{}", &hash[..16])
}

/// Whether `id` names a notes session.
pub fn is_notes_session(id: &str) -> bool {
    id.strip_prefix(NOTES_PREFIX)
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// One live note.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    /// Its id (`note_` and 32 hex digits).
    pub id: String,
    /// What to remember.
    pub text: String,
    /// Free-form labels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The session the note is about, when the caller named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Where the note came from, when it is a promoted fact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promoted: Option<NotePromotion>,
    /// When it was written.
    pub created_at: Option<DateTime<Utc>>,
    /// The `seq` of its record in the notes session.
    pub seq: u64,
}

/// The lineage a promoted fact's note carries (`note.promoted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct NotePromotion {
    /// The session the fact was promoted from (its `promotion` record is there).
    pub session: String,
    /// The records it was promoted from.
    pub sources: Vec<PromotionSource>,
}

/// The notes of a project as they are now.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NoteList {
    /// Live notes, oldest first.
    pub notes: Vec<Note>,
    /// Ids of forgotten notes.
    pub forgotten: Vec<String>,
    /// Record seqs of forgotten notes and of tombstones: search hits in the
    /// notes session at these seqs are not to be shown.
    #[serde(skip)]
    pub hidden_seqs: HashSet<u64>,
}

/// Why a note was refused.
fn invalid(msg: impl Into<String>) -> ManagerError {
    ManagerError::Store(crate::Error::Invalid(msg.into()))
}

/// Check a note's text and tags (also used by fronts before they write).
pub fn validate(text: &str, tags: &[String]) -> Result<()> {
    if text.trim().is_empty() {
        return Err(invalid("a note needs some text"));
    }
    if text.len() > MAX_NOTE_BYTES {
        return Err(invalid(format!(
            "a note holds at most {MAX_NOTE_BYTES} bytes (got {})",
            text.len()
        )));
    }
    if tags.len() > MAX_TAGS {
        return Err(invalid(format!(
            "at most {MAX_TAGS} tags (got {})",
            tags.len()
        )));
    }
    for t in tags {
        if t.trim().is_empty()
            || t.chars().count() > MAX_TAG_CHARS
            || t.chars().any(char::is_control)
        {
            return Err(invalid(format!(
                "tag {t:?}: tags are 1 to {MAX_TAG_CHARS} characters without control characters"
            )));
        }
    }
    Ok(())
}

/// Whether `id` has the shape of a note id.
pub fn is_note_id(id: &str) -> bool {
    id.strip_prefix("note_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// One project's notes over a manager.
#[derive(Debug)]
pub struct Notes<'m> {
    manager: &'m mut SessionManager,
    project: String,
    session: String,
}

impl<'m> Notes<'m> {
    /// The notes of project `project` (its key: a workspace path or a server
    /// project name) in `manager`'s store. New notes sessions take the
    /// manager's workspace.
    pub fn new(manager: &'m mut SessionManager, project: &str) -> Notes<'m> {
        Notes {
            manager,
            project: project.to_string(),
            session: notes_session_id(project),
        }
    }

    /// The notes session's id.
    pub fn session_id(&self) -> &str {
        &self.session
    }

    /// Store a note (one appended record; creates the notes session when
    /// missing). `session`, when given, is recorded as what the note is about.
    pub fn remember(&mut self, text: &str, tags: &[String], session: Option<&str>) -> Result<Note> {
        self.write_note(text, tags, session, None)
    }

    /// Store a fact promoted from a session, with its lineage (the note is
    /// about `promoted.session`).
    pub fn remember_promoted(
        &mut self,
        text: &str,
        tags: &[String],
        promoted: &NotePromotion,
    ) -> Result<Note> {
        self.write_note(text, tags, Some(&promoted.session), Some(promoted))
    }

    fn write_note(
        &mut self,
        text: &str,
        tags: &[String],
        session: Option<&str>,
        promoted: Option<&NotePromotion>,
    ) -> Result<Note> {
        validate(text, tags)?;
        if let Some(s) = session {
            crate::id::validate(s)?;
        }
        self.ensure()?;
        let id = format!("note_{}", uuid::Uuid::now_v7().simple());
        let mut meta = Map::new();
        meta.insert("v".into(), json!(NOTES_FORMAT));
        meta.insert("id".into(), json!(id));
        if !tags.is_empty() {
            meta.insert("tags".into(), json!(tags));
        }
        if let Some(s) = session {
            meta.insert("session".into(), json!(s));
        }
        if let Some(p) = promoted {
            meta.insert("promoted".into(), json!(p));
        }
        let now = Utc::now();
        let mut msg = Message::user(text);
        msg.timestamp = Some(now);
        msg.extra.insert(NOTE_KEY.into(), Value::Object(meta));
        self.manager
            .append_session_messages(&self.session, vec![msg])?;
        let seq = self
            .list()?
            .notes
            .iter()
            .rev()
            .find(|n| n.id == id)
            .map_or(0, |n| n.seq);
        Ok(Note {
            id,
            text: text.to_string(),
            tags: tags.to_vec(),
            session: session.map(str::to_string),
            promoted: promoted.cloned(),
            created_at: Some(now),
            seq,
        })
    }

    /// Forget a note: append a tombstone. `Ok(false)` when no live note has
    /// this id (unknown, or already forgotten); an id of the wrong shape is
    /// invalid input.
    pub fn forget(&mut self, id: &str) -> Result<bool> {
        if !is_note_id(id) {
            return Err(invalid(format!(
                "{id:?} is not a note id (note_ and 32 hex digits)"
            )));
        }
        if !self.list()?.notes.iter().any(|n| n.id == id) {
            return Ok(false);
        }
        let mut msg = Message::text(Role::System, format!("forgot note {id}"));
        msg.timestamp = Some(Utc::now());
        msg.extra
            .insert(FORGET_KEY.into(), json!({ "v": NOTES_FORMAT, "id": id }));
        self.manager
            .append_session_messages(&self.session, vec![msg])?;
        Ok(true)
    }

    /// The live notes, oldest first (empty when none was ever written).
    pub fn list(&self) -> Result<NoteList> {
        list_notes(self.manager, &self.project)
    }

    fn ensure(&mut self) -> Result<()> {
        match self.manager.read_session(&self.session) {
            Ok(_) => Ok(()),
            Err(ManagerError::Store(crate::Error::NotFound(_))) => {
                let title = format!("notes: {}", self.project);
                self.manager.ensure_session(&self.session, &title)?;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// The live notes of project `project` in `manager`'s store, oldest first
/// (empty when none was ever written); [`Notes::list`] without a writer.
pub fn list_notes(manager: &SessionManager, project: &str) -> Result<NoteList> {
    match manager.read_session(&notes_session_id(project)) {
        Ok(t) => Ok(collect(
            &t.messages[t.inherited..],
            &t.message_seqs[t.inherited..],
        )),
        Err(ManagerError::Store(crate::Error::NotFound(_))) => Ok(NoteList::default()),
        Err(e) => Err(e),
    }
}

/// The notes of a notes session's messages (with their record seqs).
pub fn collect(messages: &[Message], seqs: &[u64]) -> NoteList {
    let mut notes = Vec::new();
    let mut forgotten: Vec<(String, u64)> = Vec::new();
    for (m, &seq) in messages.iter().zip(seqs) {
        if let Some(f) = m.extra.get(FORGET_KEY) {
            if let Some(id) = f.get("id").and_then(Value::as_str) {
                forgotten.push((id.to_string(), seq));
            }
            continue;
        }
        let Some(meta) = m.extra.get(NOTE_KEY) else {
            continue;
        };
        let Some(id) = meta.get("id").and_then(Value::as_str) else {
            continue;
        };
        let tags = meta
            .get("tags")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        notes.push(Note {
            id: id.to_string(),
            text: m.text_content(),
            tags,
            session: meta
                .get("session")
                .and_then(Value::as_str)
                .map(str::to_string),
            promoted: meta
                .get("promoted")
                .and_then(|p| serde_json::from_value(p.clone()).ok()),
            created_at: m.timestamp,
            seq,
        });
    }
    let gone: HashSet<&str> = forgotten.iter().map(|(id, _)| id.as_str()).collect();
    let mut hidden_seqs: HashSet<u64> = forgotten.iter().map(|(_, s)| *s).collect();
    let mut ids = Vec::new();
    notes.retain(|n| {
        if gone.contains(n.id.as_str()) {
            hidden_seqs.insert(n.seq);
            ids.push(n.id.clone());
            false
        } else {
            true
        }
    });
    ids.dedup();
    NoteList {
        notes,
        forgotten: ids,
        hidden_seqs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::{LeasePolicy, ManagerOptions};

    fn manager(dir: &std::path::Path) -> SessionManager {
        let options = ManagerOptions {
            lease: LeasePolicy::Off,
            workspace: Some(dir.to_path_buf()),
            ..ManagerOptions::default()
        };
        SessionManager::open(&dir.join("sessions"), options).unwrap()
    }

    #[test]
    fn remember_list_forget_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = manager(dir.path());
        let mut notes = Notes::new(&mut m, "/p");
        assert!(notes.list().unwrap().notes.is_empty());
        let a = notes
            .remember("deploy key is in ops/deploy", &["ops".into()], None)
            .unwrap();
        let b = notes.remember("lunch at noon", &[], Some("s1")).unwrap();
        assert!(a.seq > 0 && b.seq > a.seq);
        let list = notes.list().unwrap();
        assert_eq!(
            list.notes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
            [a.id.as_str(), b.id.as_str()]
        );
        assert_eq!(list.notes[0].tags, ["ops"]);
        assert_eq!(list.notes[1].session.as_deref(), Some("s1"));
        assert!(notes.forget(&a.id).unwrap());
        assert!(!notes.forget(&a.id).unwrap(), "already forgotten");
        let list = notes.list().unwrap();
        assert_eq!(list.notes.len(), 1);
        assert_eq!(list.forgotten, std::slice::from_ref(&a.id));
        assert!(list.hidden_seqs.contains(&a.seq));
        // A tombstone, not a deletion: the note's record is still in the log.
        let session = notes.session_id().to_string();
        drop(notes);
        let t = m.read_session(&session).unwrap();
        assert!(t
            .messages
            .iter()
            .any(|msg| msg.text_content().contains("ops/deploy")));
    }

    #[test]
    fn bad_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = manager(dir.path());
        let mut notes = Notes::new(&mut m, "/p");
        assert!(notes.remember("  ", &[], None).is_err());
        assert!(notes
            .remember(&"x".repeat(MAX_NOTE_BYTES + 1), &[], None)
            .is_err());
        assert!(notes.remember("ok", &["bad\ntag".into()], None).is_err());
        assert!(notes.remember("ok", &[], Some("../etc")).is_err());
        assert!(notes.forget("../x").is_err());
        assert!(!notes.forget(&format!("note_{}", "0".repeat(32))).unwrap());
        assert!(notes.list().unwrap().notes.is_empty());
    }

    #[test]
    fn session_ids_are_per_project() {
        assert_ne!(notes_session_id("/a"), notes_session_id("/b"));
        assert!(is_notes_session(&notes_session_id("/a")));
        assert!(!is_notes_session("notes-xyz"));
        assert!(crate::id::validate(&notes_session_id("/a")).is_ok());
    }
}
