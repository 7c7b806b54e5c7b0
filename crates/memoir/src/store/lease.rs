//! The per-session owner lease, as every [`super::LogStore`] hands it out.
//!
//! A [`Lease`] says "this process (or manager) drives session `id`"; it is
//! released when dropped, and by the backend when its holder dies (the file
//! store's `flock` on `<id>.lock`, PostgreSQL's session advisory lock, the
//! in-memory store's registry entry dropped with the guard). A second taker of
//! a live lease gets [`crate::Error::Busy`] naming the holder; a taker of a
//! lease whose holder died without releasing it gets the lease and learns, in
//! [`Lease::recovered_from`], whose it was.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use super::lock::Holder;
use crate::error::{Error, Result};

/// Held ownership of one session; released on drop.
pub struct Lease {
    id: String,
    /// Who holds it (this process).
    pub holder: Holder,
    /// A previous holder that died without releasing the lease, if any.
    pub recovered_from: Option<Holder>,
    _guard: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("holder", &self.holder)
            .field("recovered_from", &self.recovered_from)
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// A lease on `id` held as long as `guard` lives (a backend's lock handle).
    pub fn new(
        id: &str,
        holder: Holder,
        recovered_from: Option<Holder>,
        guard: Box<dyn Send + Sync>,
    ) -> Lease {
        Lease {
            id: id.to_string(),
            holder,
            recovered_from,
            _guard: guard,
        }
    }

    /// The session it covers.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The holder this process would write: its pid, host and the time now.
pub fn current_holder() -> Holder {
    Holder {
        pid: std::process::id(),
        host: crate::paths::hostname(),
        since: chrono::Utc::now().to_rfc3339(),
    }
}

/// The [`Error::Busy`] naming `holder` as the live owner of `id`.
pub fn busy(id: &str, holder: Holder) -> Error {
    Error::Busy {
        id: id.to_string(),
        pid: holder.pid,
        host: holder.host,
        since: holder.since,
    }
}

/// Leases of an in-process store: one registry entry per held session,
/// removed when the lease is dropped. (A process that dies takes the whole
/// registry with it, so there is never a stale entry to take over.)
#[derive(Debug, Clone, Default)]
pub struct LeaseRegistry {
    held: Arc<Mutex<HashMap<String, (u64, Holder)>>>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

struct RegistryGuard {
    held: Arc<Mutex<HashMap<String, (u64, Holder)>>>,
    id: String,
    token: u64,
}

impl Drop for RegistryGuard {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.get(&self.id).is_some_and(|(t, _)| *t == self.token) {
            held.remove(&self.id);
        }
    }
}

impl LeaseRegistry {
    /// Take the lease of `id`, or [`Error::Busy`] naming its holder.
    pub fn acquire(&self, id: &str) -> Result<Lease> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, holder)) = held.get(id) {
            return Err(busy(id, holder.clone()));
        }
        let token = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let holder = current_holder();
        held.insert(id.to_string(), (token, holder.clone()));
        let guard = RegistryGuard {
            held: self.held.clone(),
            id: id.to_string(),
            token,
        };
        Ok(Lease::new(id, holder, None, Box::new(guard)))
    }
}
