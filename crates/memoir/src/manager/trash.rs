//! The trash: a deleted session stays recoverable until it is purged, and
//! its forks stay readable. Works on any [`LogStore`] through its trash
//! methods (`delete`, `restore`, `list_deleted`, `read_deleted`, `purge`):
//! the file store moves transcripts to `<dir>/.deleted/`, PostgreSQL sets a
//! `deleted_at` column, the in-memory store keeps a second map.
//!
//! - Delete moves the session to the trash and drops its index entry. A new
//!   session cannot take a trashed id.
//! - Restore brings it back (refusing when the id was taken meanwhile) and
//!   rebuilds the index entry.
//! - Purge erases trashed sessions for good (with the payload blobs no other
//!   session, live or trashed, references), except those a surviving
//!   session (live, or trashed and not purged) still forks from, directly or
//!   through other forks: they stay in the trash so every fork keeps its
//!   prefix, and the report names them with the forks that need them.
//! - Forks of a trashed session stay readable: the manager reads through
//!   [`TrashAware`], which finds a fork's parent in the trash.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::index::{IndexEntry, Status};
use crate::error::{Error, ErrorKind, Result};
use crate::record::{Record, SessionMeta};
use crate::store::{Appended, DeletedListed, Durability, Listed, LogStore, RawLog, RecordSink};
use crate::transcript::{read_in, Transcript};

/// A store that reads from the live sessions and, for ids that are not
/// there, from the trash ([`LogStore::read_deleted`]), so a fork whose parent
/// was deleted still stitches its prefix. Writes and listings go to the live
/// sessions only.
#[derive(Debug)]
pub struct TrashAware {
    live: Arc<dyn LogStore>,
}

impl TrashAware {
    /// Reads over `live` and its trash.
    pub fn new(live: Arc<dyn LogStore>) -> TrashAware {
        TrashAware { live }
    }

    /// The live store.
    pub fn live(&self) -> &Arc<dyn LogStore> {
        &self.live
    }
}

impl LogStore for TrashAware {
    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        self.live.create(meta)
    }

    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        self.live.append(id, records, expected_next)
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        match self.live.read(id) {
            Err(Error::NotFound(missing)) => self
                .live
                .read_deleted(id)
                .map_err(|_| Error::NotFound(missing)),
            other => other,
        }
    }

    fn read_each(&self, id: &str, sink: &mut dyn RecordSink) -> Result<RawLog> {
        match self.live.read_each(id, sink) {
            // Not found before any record was handed over: from the trash.
            Err(Error::NotFound(missing)) => self
                .live
                .read_deleted(id)
                .map(|raw| crate::store::hand_over(raw, sink))
                .map_err(|_| Error::NotFound(missing)),
            other => other,
        }
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        self.live.read_header(id)
    }

    fn blobs(&self) -> Option<crate::blob::PayloadStore> {
        // Trashed sessions' payloads live beside the live ones.
        self.live.blobs()
    }

    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        self.live.list()
    }

    fn location(&self, id: &str) -> PathBuf {
        self.live.location(id)
    }

    fn durability(&self) -> Durability {
        self.live.durability()
    }

    fn list_project(&self, project: &str) -> Result<(Vec<Listed>, usize)> {
        self.live.list_project(project)
    }
}

/// A session in the trash.
#[derive(Debug, Clone, PartialEq)]
pub struct Trashed {
    /// Its entry, computed from the trashed transcript (status `deleted`).
    pub entry: IndexEntry,
    /// When it was deleted (the trashed file's change time).
    pub deleted_at: DateTime<Utc>,
}

/// What a purge did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PurgeReport {
    /// Sessions erased for good.
    pub purged: Vec<String>,
    /// Sessions kept in the trash because surviving forks need their prefix:
    /// each with the surviving sessions that descend from it.
    pub kept: Vec<(String, Vec<String>)>,
    /// The payload blobs removed with the purged sessions (those no other
    /// session, live or trashed, references) and the ones kept.
    pub blobs: crate::blob::GcReport,
}

/// True when `id` is in the trash (false on a store without one).
pub fn contains(store: &dyn LogStore, id: &str) -> Result<bool> {
    match store.read_deleted(id) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Unsupported) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The entry of a trashed session (status `deleted`).
fn trashed_entry(store: &dyn LogStore, d: &DeletedListed) -> Option<Trashed> {
    let raw_reader = TrashOnly(store);
    let t: Transcript = read_in(&raw_reader, &d.meta.id).ok()?;
    let mut entry = IndexEntry::from_transcript(&t);
    entry.status = Status::Deleted;
    let deleted_at = d.deleted_at.unwrap_or(entry.created_at);
    entry.modified_at(
        store
            .last_activity(&d.meta.id)
            .ok()
            .flatten()
            .unwrap_or(deleted_at),
    );
    Some(Trashed { entry, deleted_at })
}

/// Reads a session from the trash first and stitches its parents from live
/// sessions or the trash.
#[derive(Debug)]
struct TrashOnly<'a>(&'a dyn LogStore);

impl LogStore for TrashOnly<'_> {
    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        self.0.create(meta)
    }
    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        self.0.append(id, records, expected_next)
    }
    fn read(&self, id: &str) -> Result<RawLog> {
        match self.0.read_deleted(id) {
            Err(e) if e.kind() == ErrorKind::NotFound => self.0.read(id),
            other => other,
        }
    }
    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        self.0.read_header(id)
    }
    fn blobs(&self) -> Option<crate::blob::PayloadStore> {
        self.0.blobs()
    }
    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        self.0.list()
    }
    fn location(&self, id: &str) -> PathBuf {
        self.0.location(id)
    }
    fn durability(&self) -> Durability {
        self.0.durability()
    }
}

/// Every session in the trash, most recently deleted first (reads the trashed
/// transcripts: the trash is not indexed). `project`: only that project's.
pub fn list(store: &dyn LogStore, project: Option<&str>) -> Result<Vec<Trashed>> {
    let deleted = match store.list_deleted() {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::Unsupported => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut out: Vec<Trashed> = deleted
        .iter()
        .filter(|d| project.is_none_or(|p| crate::store::header_project(&d.meta) == Some(p)))
        .filter_map(|d| trashed_entry(store, d))
        .collect();
    out.sort_by(|a, b| {
        b.deleted_at
            .cmp(&a.deleted_at)
            .then_with(|| a.entry.id.cmp(&b.entry.id))
    });
    Ok(out)
}

/// Erase trashed sessions: `only` those ids, or all of them. A session that a
/// surviving session forks from (directly or transitively) is kept.
pub fn purge(
    store: &dyn LogStore,
    live: &[IndexEntry],
    only: Option<&[String]>,
    project: Option<&str>,
) -> Result<PurgeReport> {
    let trashed = list(store, project)?;
    let trashed_ids: HashSet<&str> = trashed.iter().map(|t| t.entry.id.as_str()).collect();
    if let Some(ids) = only {
        for id in ids {
            crate::id::validate(id)?;
            if !trashed_ids.contains(id.as_str()) {
                return Err(Error::NotFound(id.clone()));
            }
        }
    }
    let wanted = |id: &str| only.is_none_or(|ids| ids.iter().any(|x| x == id));
    let parent_of: HashMap<&str, &str> = live
        .iter()
        .chain(trashed.iter().map(|t| &t.entry))
        .filter_map(|e| Some((e.id.as_str(), e.parent.as_ref()?.session.as_str())))
        .collect();
    // Every survivor pins its whole ancestor chain.
    let survivors = live.iter().map(|e| e.id.as_str()).chain(
        trashed
            .iter()
            .map(|t| t.entry.id.as_str())
            .filter(|id| !wanted(id)),
    );
    let mut needed_by: HashMap<&str, Vec<String>> = HashMap::new();
    for survivor in survivors {
        let mut seen = HashSet::new();
        let mut cur = survivor;
        while let Some(&parent) = parent_of.get(cur) {
            if !seen.insert(parent) {
                break;
            }
            needed_by
                .entry(parent)
                .or_default()
                .push(survivor.to_string());
            cur = parent;
        }
    }
    let mut report = PurgeReport::default();
    let blobs = store.blobs().filter(|b| !b.store.collected_elsewhere());
    let mut candidates = HashSet::new();
    let mut doomed = Vec::new();
    for t in &trashed {
        let id = t.entry.id.as_str();
        if !wanted(id) {
            continue;
        }
        if let Some(children) = needed_by.get(id) {
            let mut children = children.clone();
            children.sort();
            report.kept.push((id.to_string(), children));
            continue;
        }
        doomed.push(id);
    }
    // Forks before their parents: at no point does a surviving session
    // (even for a moment, even on a store that checks on its side, as
    // `memoir serve` does) lack its prefix.
    let depth = |id: &str| {
        let (mut n, mut cur, mut seen) = (0usize, id, HashSet::new());
        while let Some(&parent) = parent_of.get(cur) {
            if !seen.insert(parent) {
                break;
            }
            n += 1;
            cur = parent;
        }
        n
    };
    doomed.sort_by_key(|id| std::cmp::Reverse(depth(id)));
    for id in doomed {
        if blobs.is_some() {
            if let Ok(raw) = store.read_deleted(id) {
                crate::transcript::blobs::raw_refs(&raw, &mut candidates);
            }
        }
        store.purge(id)?;
        report.purged.push(id.to_string());
    }
    // The payloads only the purged sessions referenced go with them; a blob
    // any other session (live or trashed, of any project) references stays.
    if let Some(blobs) = blobs {
        let scope = store.blob_scope();
        let whole: &dyn LogStore = scope.as_deref().unwrap_or(store);
        report.blobs =
            crate::transcript::blobs::drop_unreferenced(&[whole], &blobs.store, &candidates)?;
    }
    Ok(report)
}
