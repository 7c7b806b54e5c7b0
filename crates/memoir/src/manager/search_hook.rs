//! The manager's hook into the cross-session search index (feature
//! `search`): after a write, index that session from its cursor on
//! ([`SearchIndex::note_append`]). A failure never reaches the writer: the
//! hook marks the index stale, and the next write runs a full catch-up
//! ([`SearchIndex::update`]) instead, clearing the mark when it succeeds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::search::SearchIndex;

/// A shared search index and whether it missed a write.
#[derive(Debug)]
pub(super) struct SearchHook {
    index: Arc<Mutex<SearchIndex>>,
    stale: AtomicBool,
}

impl SearchHook {
    pub(super) fn new(index: Arc<Mutex<SearchIndex>>) -> SearchHook {
        SearchHook {
            index,
            stale: AtomicBool::new(false),
        }
    }

    pub(super) fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    /// Index session `id` after a write (or the whole store, when stale).
    pub(super) fn note(&self, id: &str) {
        let mut index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        let result = if self.is_stale() {
            index.update().map(|_| ())
        } else {
            index.note_append(id).map(|_| ())
        };
        self.stale.store(result.is_err(), Ordering::Relaxed);
    }
}
