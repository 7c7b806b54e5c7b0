//! Per-project id namespaces: [`ProjectStore`] is the [`LogStore`] a
//! request of project `P` works through. Session `X` of project `P` is
//! stored as `P~X`; every id that crosses the adapter (a header's `id`, a
//! fork's `parent.session`, `forked_from`) is translated on the way in and
//! out. So a token can only ever name sessions of its own project:
//!
//! - two projects may use the same id without either learning that the
//!   other exists (no existence oracle: 409 only for the caller's own ids);
//! - a fork's parent reference is resolved inside the fork's project, so a
//!   deleted parent re-created by another project is never stitched in;
//! - an append goes to the caller's namespace whatever happened to another
//!   project's session of that id, and the header's `project` field is
//!   checked against the store on every call (no cached ownership).
//!
//! Session logic (fork cut, export, search) stays in the library; this
//! adapter only renames.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use memoir::manager::FORKED_FROM;
use memoir::record::{Record, SessionMeta};
use memoir::store::{Appended, DeletedListed, Durability, Lease, Listed, LogStore, RawLog};
use memoir::{Error, Result};
use serde_json::Value;

use crate::PROJECT_FIELD;

/// Separates the project from the session id in a stored id.
pub const SEPARATOR: char = '~';

/// The prefix of every stored id of project `project` (`project~`).
pub fn id_prefix(project: &str) -> String {
    format!("{project}{SEPARATOR}")
}

/// The hits of a search of the shared store's index that was restricted to
/// the stored ids starting with `prefix` ([`id_prefix`]), with their session
/// ids as the project sees them. A hit outside the prefix (none, when the
/// filter held) is dropped, never shown under its stored id.
#[cfg(feature = "search")]
pub fn visible_hits(
    prefix: &str,
    hits: Vec<memoir::search::SearchHit>,
) -> Vec<memoir::search::SearchHit> {
    hits.into_iter()
        .filter_map(|mut h| {
            h.session = h.session.strip_prefix(prefix)?.to_string();
            Some(h)
        })
        .collect()
}

/// Whether `meta` was created by `member` (`None`: any member will do).
pub fn created_by(meta: &SessionMeta, member: Option<&str>) -> bool {
    member.is_none_or(|m| {
        meta.extra
            .get(memoir::access::MEMBER_FIELD)
            .and_then(|v| v.as_str())
            == Some(m)
    })
}

/// The project a header names (its `project` field).
pub fn project_of(meta: &SessionMeta) -> Option<&str> {
    meta.extra.get(PROJECT_FIELD).and_then(|v| v.as_str())
}

/// The session manager of project `project` on the shared store `inner`
/// (through its [`ProjectStore`], unleased): what every `memoir serve`
/// handler and `memoir mcp --http` call works through.
pub fn project_manager(inner: Arc<dyn LogStore>, project: &str) -> memoir::manager::SessionManager {
    project_manager_as(inner, project, None)
}

/// [`project_manager`] for `member`: the sessions it creates (forks) name
/// the member ([`ProjectStore::with_member`]).
pub fn project_manager_as(
    inner: Arc<dyn LogStore>,
    project: &str,
    member: Option<&str>,
) -> memoir::manager::SessionManager {
    let options = memoir::manager::ManagerOptions {
        repair_on_switch: false,
        project: Some(project.to_string()),
        lease: memoir::manager::LeasePolicy::Off,
        ..memoir::manager::ManagerOptions::default()
    };
    memoir::manager::SessionManager::with_store(
        Arc::new(ProjectStore::new(inner, project).with_member(member)),
        options,
    )
}

/// One project's view of the shared store.
#[derive(Debug, Clone)]
pub struct ProjectStore {
    inner: Arc<dyn LogStore>,
    project: String,
    prefix: String,
    member: Option<String>,
}

impl ProjectStore {
    /// Project `project`'s sessions in `inner`.
    pub fn new(inner: Arc<dyn LogStore>, project: &str) -> ProjectStore {
        ProjectStore {
            inner,
            project: project.to_string(),
            prefix: id_prefix(project),
            member: None,
        }
    }

    /// Sessions this store creates name `member` as their creator (the
    /// header's [`memoir::access::MEMBER_FIELD`]; a client's value is
    /// never kept).
    pub fn with_member(mut self, member: Option<&str>) -> ProjectStore {
        self.member = member.map(str::to_string);
        self
    }

    /// The project.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The stored id of the caller's id `id` (validated: a caller's id
    /// never contains the separator).
    pub fn stored(&self, id: &str) -> Result<String> {
        memoir::id::validate(id)?;
        if id.contains(SEPARATOR) {
            return Err(Error::InvalidId {
                id: id.to_string(),
                reason: "contains '~' (reserved by the server)",
            });
        }
        let stored = format!("{}{id}", self.prefix);
        memoir::id::validate(&stored)?;
        Ok(stored)
    }

    /// The caller's id of a stored id, when it is in this namespace.
    fn visible<'a>(&self, stored: &'a str) -> Option<&'a str> {
        stored.strip_prefix(&self.prefix)
    }

    fn visible_or_keep(&self, stored: &str) -> String {
        self.visible(stored).unwrap_or(stored).to_string()
    }

    /// A header as stored: ids translated, the project field set.
    fn to_stored(&self, meta: &SessionMeta) -> Result<SessionMeta> {
        let mut meta = meta.clone();
        meta.id = self.stored(&meta.id)?;
        if let Some(parent) = &mut meta.parent {
            parent.session = self.stored(&parent.session)?;
        }
        if let Some(Value::String(from)) = meta.extra.get(FORKED_FROM) {
            let from = self.stored(from)?;
            meta.extra.insert(FORKED_FROM.into(), Value::String(from));
        }
        meta.extra
            .insert(PROJECT_FIELD.into(), Value::String(self.project.clone()));
        meta.extra.remove(memoir::access::MEMBER_FIELD);
        if let Some(member) = &self.member {
            meta.extra.insert(
                memoir::access::MEMBER_FIELD.into(),
                Value::String(member.clone()),
            );
        }
        Ok(meta)
    }

    /// A stored header as the caller sees it; `None` when it belongs to
    /// another project.
    fn to_visible(&self, mut meta: SessionMeta) -> Option<SessionMeta> {
        if project_of(&meta) != Some(self.project.as_str()) {
            return None;
        }
        meta.id = self.visible(&meta.id)?.to_string();
        if let Some(parent) = &mut meta.parent {
            parent.session = self.visible_or_keep(&parent.session);
        }
        if let Some(Value::String(from)) = meta.extra.get(FORKED_FROM) {
            let from = self.visible_or_keep(from);
            meta.extra.insert(FORKED_FROM.into(), Value::String(from));
        }
        Some(meta)
    }

    /// The caller's header of session `id`: [`Error::NotFound`] unless it
    /// exists in this project (read from the store on every call).
    pub fn header(&self, id: &str) -> Result<SessionMeta> {
        let stored = self.stored(id)?;
        match self.inner.read_header(&stored) {
            Ok(Some(meta)) => self
                .to_visible(meta)
                .ok_or_else(|| Error::NotFound(id.to_string())),
            Ok(None) => Err(Error::NotFound(id.to_string())),
            Err(e) => Err(hide_id(e, &stored, id)),
        }
    }
}

/// Errors name the caller's id, never the stored one.
fn hide_id(e: Error, stored: &str, id: &str) -> Error {
    match e {
        Error::NotFound(s) | Error::Deleted(s) if s == stored => Error::NotFound(id.to_string()),
        Error::SessionExists(s) if s == stored => Error::SessionExists(id.to_string()),
        Error::Conflict {
            id: s,
            expected,
            actual,
        } if s == stored => Error::Conflict {
            id: id.to_string(),
            expected,
            actual,
        },
        other => other,
    }
}

impl ProjectStore {
    /// Read `id`'s log with `read` (live or trashed) under its stored id, and
    /// show its header as this project sees it (another project's session is
    /// not found).
    fn visible_log(
        &self,
        id: &str,
        read: impl FnOnce(&dyn LogStore, &str) -> Result<RawLog>,
    ) -> Result<RawLog> {
        let stored = self.stored(id)?;
        let mut raw = read(self.inner.as_ref(), &stored).map_err(|e| hide_id(e, &stored, id))?;
        raw.header = match raw.header.take() {
            Some(meta) => Some(
                self.to_visible(meta)
                    .ok_or_else(|| Error::NotFound(id.to_string()))?,
            ),
            None => None,
        };
        Ok(raw)
    }
}

impl LogStore for ProjectStore {
    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        let stored = self.to_stored(meta)?;
        self.inner
            .create(&stored)
            .map_err(|e| hide_id(e, &stored.id, &meta.id))
    }

    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        // Ownership is checked against the store on every write.
        self.header(id)?;
        let stored = self.stored(id)?;
        self.inner
            .append(&stored, records, expected_next)
            .map_err(|e| hide_id(e, &stored, id))
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        self.visible_log(id, |inner, stored| inner.read(stored))
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        match self.header(id) {
            Ok(meta) => Ok(Some(meta)),
            Err(Error::NotFound(_)) => Err(Error::NotFound(id.to_string())),
            Err(e) => Err(e),
        }
    }

    fn blobs(&self) -> Option<memoir::blob::PayloadStore> {
        self.inner.blobs()
    }

    fn blob_scope(&self) -> Option<Arc<dyn LogStore>> {
        // Blobs are shared by every project: a purge keeps what any
        // project's session still references.
        Some(
            self.inner
                .blob_scope()
                .unwrap_or_else(|| self.inner.clone()),
        )
    }

    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        let (listed, unreadable) = self.inner.list()?;
        Ok((self.visible_listing(listed), unreadable))
    }

    fn location(&self, id: &str) -> PathBuf {
        match self.stored(id) {
            Ok(stored) => self.inner.location(&stored),
            Err(_) => self.inner.location(id),
        }
    }

    fn durability(&self) -> Durability {
        self.inner.durability()
    }

    fn delete(&self, id: &str) -> Result<()> {
        self.header(id)?;
        let stored = self.stored(id)?;
        self.inner
            .delete(&stored)
            .map_err(|e| hide_id(e, &stored, id))
    }

    fn list_project(&self, project: &str) -> Result<(Vec<Listed>, usize)> {
        if project != self.project {
            return Ok((Vec::new(), 0));
        }
        let (listed, unreadable) = self.inner.list_project(project)?;
        Ok((self.visible_listing(listed), unreadable))
    }

    fn list_deleted(&self) -> Result<Vec<DeletedListed>> {
        Ok(self
            .inner
            .list_deleted()?
            .into_iter()
            .filter_map(|d| {
                Some(DeletedListed {
                    meta: self.to_visible(d.meta)?,
                    location: d.location,
                    deleted_at: d.deleted_at,
                })
            })
            .collect())
    }

    fn read_deleted(&self, id: &str) -> Result<RawLog> {
        self.visible_log(id, |inner, stored| inner.read_deleted(stored))
    }

    fn purge(&self, id: &str) -> Result<()> {
        // Only a trashed session of this project.
        self.read_deleted(id)?;
        let stored = self.stored(id)?;
        self.inner
            .purge(&stored)
            .map_err(|e| hide_id(e, &stored, id))
    }

    fn acquire_lease(&self, id: &str) -> Result<Lease> {
        self.header(id)?;
        let stored = self.stored(id)?;
        self.inner
            .acquire_lease(&stored)
            .map_err(|e| hide_id(e, &stored, id))
    }

    fn touch(&self, id: &str) -> Result<()> {
        self.header(id)?;
        let stored = self.stored(id)?;
        self.inner
            .touch(&stored)
            .map_err(|e| hide_id(e, &stored, id))
    }

    fn last_activity(&self, id: &str) -> Result<Option<DateTime<Utc>>> {
        let stored = self.stored(id)?;
        self.inner
            .last_activity(&stored)
            .map_err(|e| hide_id(e, &stored, id))
    }

    fn restore(&self, id: &str) -> Result<()> {
        let stored = self.stored(id)?;
        self.inner
            .restore(&stored)
            .map_err(|e| hide_id(e, &stored, id))?;
        // A trashed session of this namespace is this project's, unless
        // someone wrote another project's header under our prefix.
        self.header(id).map(|_| ())
    }
}

impl ProjectStore {
    /// Keep the listed sessions of this project, with the caller's ids.
    pub fn visible_listing(&self, listed: Vec<Listed>) -> Vec<Listed> {
        listed
            .into_iter()
            .filter_map(|l| {
                Some(Listed {
                    meta: self.to_visible(l.meta)?,
                    location: l.location,
                })
            })
            .collect()
    }
}
