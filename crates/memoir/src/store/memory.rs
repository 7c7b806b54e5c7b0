//! An in-memory [`LogStore`]: the same framing, verification, trash and lease
//! semantics as the file store, with nothing on disk. For tests (yours and
//! memoir's: the conformance suites in [`super::testing`] run on it) and for
//! throwaway sessions.
//!
//! Records are kept as the framed lines the file store would write and read
//! back through the same [`super::scan::Scanner`], so a `MemStore` verifies
//! exactly as a file does. A deleted session moves to the trash (an id in the
//! trash cannot be created again until it is purged, as on PostgreSQL).
//! Payloads above the file store's threshold go to an in-memory blob store.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::lease::LeaseRegistry;
use super::scan::Scanner;
use super::{
    sort_newest_first, Appended, DeletedListed, Durability, Lease, Listed, LogStore, RawLog,
};
use crate::error::{Error, Result};
use crate::frame::{Hash, ZERO_HASH};
use crate::record::{Record, SessionMeta};
use crate::store::line as codec;

/// One session's log in memory.
#[derive(Debug, Clone)]
struct MemLog {
    meta: SessionMeta,
    /// Framed lines, each with its trailing newline.
    lines: Vec<Vec<u8>>,
    last_seq: u64,
    last_hash: Hash,
    modified: DateTime<Utc>,
}

impl MemLog {
    fn raw(&self) -> RawLog {
        let mut scanner = Scanner::new();
        let mut offset = 0u64;
        for line in &self.lines {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            scanner.push(body, offset, true);
            offset += line.len() as u64;
        }
        scanner.finish()
    }
}

#[derive(Debug, Default)]
struct State {
    live: HashMap<String, MemLog>,
    trash: HashMap<String, (MemLog, DateTime<Utc>)>,
}

/// Session logs held in memory (see the module docs).
#[derive(Debug)]
pub struct MemStore {
    state: Mutex<State>,
    leases: LeaseRegistry,
    /// Large payloads, in memory too (the file store's policy).
    blobs: crate::blob::PayloadStore,
}

impl Default for MemStore {
    fn default() -> Self {
        MemStore {
            state: Mutex::default(),
            leases: LeaseRegistry::default(),
            blobs: crate::blob::PayloadStore {
                store: std::sync::Arc::new(crate::blob::ArtifactStore::in_memory()),
                policy: crate::blob::ExternalizePolicy::TRANSCRIPT,
            },
        }
    }
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The framed lines of a live session, as a file would hold them (for
    /// tests that compare bytes or craft damage with [`MemStore::replace_lines`]).
    pub fn lines(&self, id: &str) -> Result<Vec<Vec<u8>>> {
        let state = self.state();
        let log = state
            .live
            .get(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        Ok(log.lines.clone())
    }

    /// Replace a live session's lines verbatim (a test seam for damaged logs).
    /// The tail the next append continues from is re-derived from the lines,
    /// as the file store re-derives it from the file.
    pub fn replace_lines(&self, id: &str, lines: Vec<Vec<u8>>) -> Result<()> {
        let mut state = self.state();
        let log = state
            .live
            .get_mut(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        log.lines = lines;
        let mut scanner = Scanner::new();
        for line in &log.lines {
            scanner.push(line.strip_suffix(b"\n").unwrap_or(line), 0, true);
        }
        let (seq, hash) = scanner.last().unwrap_or((0, ZERO_HASH));
        log.last_seq = seq;
        log.last_hash = hash;
        Ok(())
    }
}

fn location(id: &str) -> PathBuf {
    PathBuf::from(format!("mem:/{id}"))
}

impl LogStore for MemStore {
    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        crate::id::validate(&meta.id)?;
        let mut line = Vec::new();
        let hash = codec::encode_into(&mut line, 0, &ZERO_HASH, &Record::Meta(meta.clone()))?;
        let mut state = self.state();
        if state.live.contains_key(&meta.id) || state.trash.contains_key(&meta.id) {
            return Err(Error::SessionExists(meta.id.clone()));
        }
        state.live.insert(
            meta.id.clone(),
            MemLog {
                meta: meta.clone(),
                lines: vec![line],
                last_seq: 0,
                last_hash: hash,
                modified: Utc::now(),
            },
        );
        Ok(Appended {
            first_seq: 0,
            last_seq: 0,
            repaired: None,
        })
    }

    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        crate::id::validate(id)?;
        let mut state = self.state();
        let log = state
            .live
            .get_mut(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        let first_seq = log.last_seq + 1;
        if let Some(expected) = expected_next {
            if expected != first_seq {
                return Err(Error::Conflict {
                    id: id.to_string(),
                    expected,
                    actual: first_seq,
                });
            }
        }
        if records.is_empty() {
            return Ok(Appended {
                first_seq,
                last_seq: log.last_seq,
                repaired: None,
            });
        }
        if records.iter().any(|r| matches!(r, Record::Meta(_))) {
            return Err(Error::Invalid(
                "a header record can only be written by create".into(),
            ));
        }
        let mut lines = Vec::with_capacity(records.len());
        let (mut seq, mut hash) = (log.last_seq, log.last_hash);
        // The same framing as the file store: a multi-record batch names its last seq.
        let batch = (records.len() > 1).then_some(seq + records.len() as u64);
        for record in records {
            seq += 1;
            let mut line = Vec::new();
            hash = crate::store::line::encode_in_batch(&mut line, seq, &hash, batch, record)?;
            lines.push(line);
        }
        log.lines.extend(lines);
        log.last_seq = seq;
        log.last_hash = hash;
        log.modified = Utc::now();
        Ok(Appended {
            first_seq,
            last_seq: seq,
            repaired: None,
        })
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        crate::id::validate(id)?;
        let state = self.state();
        let log = state
            .live
            .get(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        Ok(log.raw())
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        crate::id::validate(id)?;
        let state = self.state();
        let log = state
            .live
            .get(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        Ok(Some(log.meta.clone()))
    }

    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        let state = self.state();
        let mut out: Vec<Listed> = state
            .live
            .values()
            .map(|log| Listed {
                meta: log.meta.clone(),
                location: location(&log.meta.id),
            })
            .collect();
        sort_newest_first(&mut out);
        Ok((out, 0))
    }

    fn location(&self, id: &str) -> PathBuf {
        location(id)
    }

    fn durability(&self) -> Durability {
        Durability::None
    }

    fn delete(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let mut state = self.state();
        if !state.live.contains_key(id) {
            return Err(Error::NotFound(id.to_string()));
        }
        if state.trash.contains_key(id) {
            return Err(Error::SessionExists(id.to_string()));
        }
        let log = state
            .live
            .remove(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        state.trash.insert(id.to_string(), (log, Utc::now()));
        Ok(())
    }

    fn restore(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let mut state = self.state();
        if !state.trash.contains_key(id) {
            return Err(Error::NotFound(id.to_string()));
        }
        if state.live.contains_key(id) {
            return Err(Error::SessionExists(id.to_string()));
        }
        if let Some((log, _)) = state.trash.remove(id) {
            state.live.insert(id.to_string(), log);
        }
        Ok(())
    }

    fn list_deleted(&self) -> Result<Vec<DeletedListed>> {
        let state = self.state();
        let mut out: Vec<DeletedListed> = state
            .trash
            .iter()
            .map(|(id, (log, at))| DeletedListed {
                meta: log.meta.clone(),
                location: location(id),
                deleted_at: Some(*at),
            })
            .collect();
        out.sort_by(|a, b| {
            b.deleted_at
                .cmp(&a.deleted_at)
                .then_with(|| a.meta.id.cmp(&b.meta.id))
        });
        Ok(out)
    }

    fn read_deleted(&self, id: &str) -> Result<RawLog> {
        crate::id::validate(id)?;
        let state = self.state();
        let (log, _) = state
            .trash
            .get(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        Ok(log.raw())
    }

    fn purge(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        self.state()
            .trash
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    fn blobs(&self) -> Option<crate::blob::PayloadStore> {
        Some(self.blobs.clone())
    }

    fn acquire_lease(&self, id: &str) -> Result<Lease> {
        crate::id::validate(id)?;
        if !self.state().live.contains_key(id) {
            return Err(Error::NotFound(id.to_string()));
        }
        self.leases.acquire(id)
    }

    fn touch(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let mut state = self.state();
        let log = state
            .live
            .get_mut(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        log.modified = Utc::now();
        Ok(())
    }

    fn last_activity(&self, id: &str) -> Result<Option<DateTime<Utc>>> {
        crate::id::validate(id)?;
        let state = self.state();
        Ok(state.live.get(id).map(|log| log.modified))
    }
}
