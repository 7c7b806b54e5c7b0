//! The file store's trash, lease and activity: delete, restore, purge and
//! list the trash (`<dir>/.deleted/<id>.jsonl`), crash-safe at every step.
//!
//! - **delete** takes the transcript's append lock, then renames it into the
//!   trash. An append that opened the file before the rename re-checks,
//!   under the same lock, that the path still names its inode
//!   ([`ensure_still_live`]), so no record lands in a trashed file after
//!   delete returned.
//! - **restore** hard-links the trash entry back, then unlinks it. Killed in
//!   between, both names hold one inode: that double state is *live* (the
//!   listing shows it, the trash listing does not), a second restore finishes
//!   it, and delete finishes the opposite way (unlinks the live name) instead
//!   of a `rename` between two links of one inode, which POSIX makes a no-op.
//! - **purge** removes the trash entry (never one that is also live), then the
//!   session's free owner lock and torn-tail side files.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use super::{header_of, open_transcript, FileStore, EXT, TRASH_DIR};
use crate::error::{Error, IoContext, Result};
use crate::paths;
use crate::store::lease::{current_holder, Lease};
use crate::store::lock::OwnerLock;
use crate::store::{DeletedListed, RawLog};

/// Refuse to write through `file` unless `path` still names it: the session
/// was deleted (or deleted and re-created) since `file` was opened.
/// Called by appends with the append lock held.
pub(super) fn ensure_still_live(file: &File, path: &Path, id: &str) -> Result<()> {
    let open = file.metadata().ctx("stat", path)?;
    match fs::symlink_metadata(path) {
        Ok(now) if now.ino() == open.ino() && now.dev() == open.dev() => Ok(()),
        Ok(_) => Err(Error::NotFound(id.to_string())),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::NotFound(id.to_string())),
        Err(e) => Err(e).ctx("stat", path),
    }
}

/// Inode identity of a path (`None` when it does not exist).
fn identity(path: &Path) -> Result<Option<(u64, u64)>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some((m.dev(), m.ino()))),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).ctx("stat", path),
    }
}

impl FileStore {
    /// The trash directory (`<dir>/.deleted`).
    pub fn trash_dir(&self) -> PathBuf {
        self.dir().join(TRASH_DIR)
    }

    fn trash_path_of(&self, id: &str) -> Result<PathBuf> {
        crate::id::validate(id)?;
        Ok(self.trash_dir().join(format!("{id}.{EXT}")))
    }

    /// True when the trash entry of `id` is the live transcript itself (a
    /// restore stopped between its link and its unlink).
    fn half_restored(&self, id: &str) -> Result<bool> {
        let live = identity(&self.path_of(id)?)?;
        Ok(live.is_some() && live == identity(&self.trash_path_of(id)?)?)
    }

    pub(super) fn delete_to_trash(&self, id: &str) -> Result<()> {
        let path = self.path_of(id)?;
        let to = self.trash_path_of(id)?;
        paths::create_private_dir(&self.trash_dir())?;
        // The append lock: no append is half-way through, and appends that
        // wait for it will find the path gone (`ensure_still_live`).
        let file = open_transcript(&path, id, false)?;
        file.lock().ctx("lock", &path)?;
        let result = (|| {
            ensure_still_live(&file, &path, id)?;
            let open = file.metadata().ctx("stat", &path)?;
            match identity(&to)? {
                // A half-done restore: the trash already holds this inode.
                Some(trashed) if trashed == (open.dev(), open.ino()) => {
                    fs::remove_file(&path).ctx("remove", &path)
                }
                Some(_) => Err(Error::SessionExists(format!(
                    "{id} (the trash already holds another session with this id; purge it first)"
                ))),
                None => fs::rename(&path, &to).ctx("rename", &path),
            }
        })();
        let _ = file.unlock();
        result?;
        if let Ok(mut tails) = self.tails.lock() {
            tails.remove(id);
        }
        if self.sync() {
            paths::sync_dir(&self.trash_dir())?;
            paths::sync_dir(self.dir())?;
        }
        Ok(())
    }

    pub(super) fn restore_from_trash(&self, id: &str) -> Result<()> {
        let path = self.path_of(id)?;
        let from = self.trash_path_of(id)?;
        // Link, then unlink: the link fails if a live session took the id.
        match fs::hard_link(&from, &path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::NotFound(id.to_string()))
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if !self.half_restored(id)? {
                    return Err(Error::SessionExists(id.to_string()));
                }
                // The previous restore linked and stopped: finish it.
            }
            Err(e) => return Err(e).ctx("link", &path),
        }
        if self.sync() {
            paths::sync_dir(self.dir())?;
        }
        fs::remove_file(&from).ctx("remove", &from)?;
        if self.sync() {
            paths::sync_dir(&self.trash_dir())?;
        }
        Ok(())
    }

    pub(super) fn list_trash(&self) -> Result<Vec<DeletedListed>> {
        let dir = self.trash_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).ctx("read directory", &dir),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.ctx("read directory", &dir)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(id) = name.strip_suffix(&format!(".{EXT}")) else {
                continue;
            };
            if crate::id::validate(id).is_err() || self.half_restored(id)? {
                continue;
            }
            let location = entry.path();
            let Ok(meta) = fs::symlink_metadata(&location) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let Some(header) = File::open(&location).ok().and_then(header_of) else {
                continue;
            };
            if header.id != id {
                continue;
            }
            let deleted_at = DateTime::from_timestamp_nanos(
                meta.ctime()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(meta.ctime_nsec()),
            );
            out.push(DeletedListed {
                meta: header,
                location,
                deleted_at: Some(deleted_at),
            });
        }
        out.sort_by(|a, b| {
            b.deleted_at
                .cmp(&a.deleted_at)
                .then_with(|| a.meta.id.cmp(&b.meta.id))
        });
        Ok(out)
    }

    pub(super) fn read_trashed(&self, id: &str) -> Result<RawLog> {
        let path = self.trash_path_of(id)?;
        if !path.exists() {
            return Err(Error::NotFound(id.to_string()));
        }
        let trash = FileStore::new(self.trash_dir(), self.durability);
        crate::store::LogStore::read(&trash, id)
    }

    pub(super) fn purge_trashed(&self, id: &str) -> Result<()> {
        let path = self.trash_path_of(id)?;
        if identity(&path)?.is_none() || self.half_restored(id)? {
            return Err(Error::NotFound(id.to_string()));
        }
        fs::remove_file(&path).ctx("remove", &path)?;
        crate::store::lock::remove_if_free(&self.lock_path_of(id)?);
        let torn = format!("{id}.{EXT}.torn-");
        if let Ok(entries) = fs::read_dir(self.dir()) {
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&torn))
                {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        if self.sync() {
            paths::sync_dir(&self.trash_dir())?;
        }
        Ok(())
    }

    pub(super) fn lease(&self, id: &str) -> Result<Lease> {
        let path = self.path_of(id)?;
        if identity(&path)?.is_none() {
            return Err(Error::NotFound(id.to_string()));
        }
        let lock = OwnerLock::acquire(&self.lock_path_of(id)?, id)?;
        let recovered = lock.recovered_from.clone();
        Ok(Lease::new(id, current_holder(), recovered, Box::new(lock)))
    }

    pub(super) fn touch_file(&self, id: &str) -> Result<()> {
        let path = self.path_of(id)?;
        let file = match OpenOptions::new().append(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::NotFound(id.to_string()))
            }
            Err(e) => return Err(e).ctx("open", &path),
        };
        // Under the append lock and noted first, like an append (see `changes`).
        file.lock().ctx("lock", &path)?;
        let touched = self.note_change(id).and_then(|noted| {
            let touched = file
                .set_modified(SystemTime::now())
                .ctx("set modification time of", &path);
            self.note_change_after(id, noted);
            touched
        });
        let _ = file.unlock();
        touched
    }

    pub(super) fn modified(&self, id: &str) -> Result<Option<DateTime<Utc>>> {
        let path = self.path_of(id)?;
        match fs::metadata(&path) {
            Ok(m) => Ok(Some(DateTime::from_timestamp_nanos(
                m.mtime()
                    .saturating_mul(1_000_000_000)
                    .saturating_add(m.mtime_nsec()),
            ))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).ctx("stat", path),
        }
    }
}
