//! The trash: a deleted session stays recoverable until it is purged, and
//! its forks stay readable.
//!
//! - Delete moves `<dir>/<id>.jsonl` to `<dir>/.deleted/<id>.jsonl` (the
//!   file store's [`LogStore::delete`], taken under the append lock) and
//!   drops the index entry. A new session cannot take a trashed id.
//! - Restore moves it back (refusing when the id was taken meanwhile) and
//!   rebuilds the index entry.
//! - Purge erases trashed transcripts for good, except those a surviving
//!   session (live, or trashed and not purged) still forks from, directly or
//!   through other forks: they stay in the trash so every fork keeps its
//!   prefix, and the report names them with the forks that need them.
//! - Forks of a trashed session stay readable: the manager reads through
//!   [`TrashAware`], which finds a fork's parent in the trash.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::index::{read_dir_files, IndexEntry, Status};
use crate::error::{Error, IoContext, Result};
use crate::record::{Record, SessionMeta};
use crate::store::file::{FileStore, EXT, TRASH_DIR};
use crate::store::{Appended, Durability, Listed, LogStore, RawLog};
use crate::transcript::read_in;

/// A store that reads from the live directory and, for ids that are not
/// there, from its trash, so a fork whose parent was deleted still stitches
/// its prefix. Writes and listings go to the live directory only.
#[derive(Debug)]
pub struct TrashAware {
    live: Arc<FileStore>,
    trash: FileStore,
}

impl TrashAware {
    /// Reads over `live` and its trash directory.
    pub fn new(live: Arc<FileStore>) -> TrashAware {
        let trash = FileStore::new(live.dir().join(TRASH_DIR), live.durability());
        TrashAware { live, trash }
    }

    /// The trash directory.
    pub fn trash_dir(&self) -> &Path {
        self.trash.dir()
    }

    /// The trashed transcripts as a store of their own.
    pub fn trash(&self) -> &FileStore {
        &self.trash
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
            Err(Error::NotFound(missing)) => {
                self.trash.read(id).map_err(|_| Error::NotFound(missing))
            }
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
}

/// True when `id` is in the trash.
pub fn contains(store: &TrashAware, id: &str) -> Result<bool> {
    Ok(store.trash.path_of(id)?.exists())
}

/// Every session in the trash, most recently deleted first (reads the trashed
/// transcripts: the trash is not indexed).
pub fn list(store: &TrashAware) -> Result<Vec<Trashed>> {
    let mut out = Vec::new();
    for (name, meta) in read_dir_files(store.trash_dir())? {
        let Some(id) = name.strip_suffix(&format!(".{EXT}")) else {
            continue;
        };
        if crate::id::validate(id).is_err() {
            continue;
        }
        let Ok(t) = read_in(&store.trash, id) else {
            continue;
        };
        let mut entry = IndexEntry::from_transcript(&t);
        entry.status = Status::Deleted;
        entry.stamp = super::index::Stamp::of(&meta);
        entry.last_activity = entry.stamp.modified();
        let deleted_at = DateTime::from_timestamp_nanos(
            meta.ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.ctime_nsec()),
        );
        out.push(Trashed { entry, deleted_at });
    }
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
    store: &TrashAware,
    live: &[IndexEntry],
    only: Option<&[String]>,
) -> Result<PurgeReport> {
    let trashed = list(store)?;
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
        erase(store, id)?;
        report.purged.push(id.to_string());
    }
    Ok(report)
}

/// Remove a trashed transcript and what the live directory still holds for
/// it (its free ownership lock, torn-tail side files).
fn erase(store: &TrashAware, id: &str) -> Result<()> {
    let path = store.trash.path_of(id)?;
    fs::remove_file(&path).ctx("remove", &path)?;
    let live_dir = store.live.dir();
    crate::store::lock::remove_if_free(&store.live.lock_path_of(id)?);
    let torn = format!("{id}.{EXT}.torn-");
    for (name, _) in read_dir_files(live_dir)? {
        if name.starts_with(&torn) {
            let _ = fs::remove_file(live_dir.join(name));
        }
    }
    Ok(())
}
