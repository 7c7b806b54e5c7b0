//! Exclusive ownership of a live session by one process.
//!
//! Appends only need the short per-append lock on the transcript itself (see
//! [`super::file`]); a harness that *drives* a session (resume, run, record)
//! also takes an [`OwnerLock`]: an advisory `flock` on `<id>.lock` beside the
//! transcript, whose contents name the holder (pid, host, since). The kernel
//! drops the `flock` when the holder dies, so a lock left by a dead process is
//! recovered by the next taker, who learns whose it was.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};

/// Who holds (or held) a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// When ownership was taken (RFC 3339).
    pub since: String,
}

impl Holder {
    fn me() -> Self {
        Holder {
            pid: std::process::id(),
            host: crate::paths::hostname(),
            since: chrono::Utc::now().to_rfc3339(),
        }
    }
}

/// Held ownership of a session; released on drop (or when the process dies).
#[derive(Debug)]
pub struct OwnerLock {
    file: File,
    path: PathBuf,
    /// A previous holder whose process died without releasing, if any.
    pub recovered_from: Option<Holder>,
}

impl OwnerLock {
    /// Take ownership of the session whose lock file is `path`, or fail with
    /// [`Error::Busy`] naming the live holder.
    pub fn acquire(path: &Path, id: &str) -> Result<OwnerLock> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(path).ctx("open lock", path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = read_holder(&mut file).unwrap_or(Holder {
                    pid: 0,
                    host: "unknown".into(),
                    since: "unknown".into(),
                });
                return Err(Error::Busy {
                    id: id.to_string(),
                    pid: holder.pid,
                    host: holder.host,
                    since: holder.since,
                });
            }
            Err(TryLockError::Error(e)) => return Err(e).ctx("lock", path),
        }
        let recovered_from = read_holder(&mut file);
        let me = Holder::me();
        let bytes = serde_json::to_vec(&me)?;
        file.set_len(0).ctx("truncate lock", path)?;
        file.seek(SeekFrom::Start(0)).ctx("seek lock", path)?;
        file.write_all(&bytes).ctx("write lock", path)?;
        Ok(OwnerLock {
            file,
            path: path.to_path_buf(),
            recovered_from,
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        // Clear the holder so nobody reports us as a dead owner, then unlock.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// Remove a lock file nobody holds (used when a session is deleted).
pub fn remove_if_free(path: &Path) {
    if let Ok(f) = File::open(path) {
        if f.try_lock().is_ok() {
            let _ = fs::remove_file(path);
        }
    }
}
