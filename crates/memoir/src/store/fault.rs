//! The file store's I/O seam: every write, sync and truncate of a transcript
//! or repair side file goes through [`Io`], which a test can arm with a
//! [`FaultPlan`] to fail the Nth call (as a full disk or a failing device would).
//!
//! Without a plan (the default) each call is the plain `std` call.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which calls to fail, counted from 1 across the store's lifetime.
/// `0` disables a rule.
#[derive(Debug, Default)]
pub struct FaultPlan {
    writes: AtomicU64,
    syncs: AtomicU64,
    truncates: AtomicU64,
    fail_write: AtomicU64,
    fail_sync: AtomicU64,
    fail_truncate: AtomicU64,
}

impl FaultPlan {
    /// A plan that fails nothing.
    pub fn new() -> Arc<Self> {
        Arc::new(FaultPlan::default())
    }

    /// Fail the `n`th write from now with `ENOSPC`, after writing half its bytes.
    pub fn fail_write(&self, n: u64) {
        let base = self.writes.load(Ordering::SeqCst);
        self.fail_write.store(base + n, Ordering::SeqCst);
    }

    /// Fail the `n`th `fdatasync`/`fsync` from now with `EIO`.
    pub fn fail_sync(&self, n: u64) {
        let base = self.syncs.load(Ordering::SeqCst);
        self.fail_sync.store(base + n, Ordering::SeqCst);
    }

    /// Fail the `n`th truncate from now with `EIO`.
    pub fn fail_truncate(&self, n: u64) {
        let base = self.truncates.load(Ordering::SeqCst);
        self.fail_truncate.store(base + n, Ordering::SeqCst);
    }

    /// How many `fdatasync`/`fsync` calls the store has made so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    fn hit(counter: &AtomicU64, target: &AtomicU64) -> bool {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        n == target.load(Ordering::SeqCst)
    }
}

/// The I/O calls of the file store, optionally failing per a [`FaultPlan`].
#[derive(Debug, Clone, Default)]
pub struct Io {
    plan: Option<Arc<FaultPlan>>,
}

impl Io {
    /// Plain I/O, or I/O that fails per `plan`.
    pub fn new(plan: Option<Arc<FaultPlan>>) -> Self {
        Io { plan }
    }

    /// `write_all`.
    pub fn write_all(&self, file: &mut File, buf: &[u8]) -> std::io::Result<()> {
        if let Some(p) = &self.plan {
            if FaultPlan::hit(&p.writes, &p.fail_write) {
                file.write_all(&buf[..buf.len() / 2])?;
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        file.write_all(buf)
    }

    /// `fdatasync` (`sync_data`), or `fsync` (`sync_all`) with `all`.
    pub fn sync(&self, file: &File, all: bool) -> std::io::Result<()> {
        if let Some(p) = &self.plan {
            if FaultPlan::hit(&p.syncs, &p.fail_sync) {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
        }
        if all {
            file.sync_all()
        } else {
            file.sync_data()
        }
    }

    /// `ftruncate`.
    pub fn set_len(&self, file: &File, len: u64) -> std::io::Result<()> {
        if let Some(p) = &self.plan {
            if FaultPlan::hit(&p.truncates, &p.fail_truncate) {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
        }
        file.set_len(len)
    }
}
