//! Group commit for the file store: appends to one session through one
//! [`FileStore`] from several threads (server clients, agents sharing a
//! handle) share one `write` and one `fdatasync`.
//!
//! Each append serialises its records to payload JSON on its own thread (the
//! costly part) and queues them on the session's [`Group`]. The first thread
//! to find no writer active becomes the writer: it takes everything queued,
//! and under the transcript's `flock` settles the tail, frames each queued
//! append as its own batch (its own `seq` range, its own `batch` marker, so
//! every append stays atomic on its own), issues one `write`, one
//! `fdatasync`, and only then hands every queued append its result. A
//! failing write or sync fails every append of the group (the bytes are
//! truncated away and the session poisoned, as for a single append). Errors
//! before anything is written (open, lock, a deleted session, a tail that
//! cannot be settled) go to the writer; the others retry on their own, so
//! each gets its own error.
//!
//! Processes still serialise on the `flock`; the group only gathers the
//! appends of one process.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use super::{file_trash, open_transcript, FileStore, Tail};
use crate::error::{Error, IoContext, Result};
use crate::frame;
use crate::store::{Appended, Durability};

/// One queued append: its payloads (framed by the writer) and its guard.
#[derive(Debug)]
pub(super) struct Pending {
    ticket: u64,
    payloads: Vec<String>,
    expected_next: Option<u64>,
}

/// What a queued append got from the writer.
#[derive(Debug)]
enum Outcome {
    Done(Result<Appended>),
    /// Nothing was written for it: append on your own.
    Alone,
}

#[derive(Debug, Default)]
struct State {
    queue: Vec<Pending>,
    writing: bool,
    next_ticket: u64,
    results: HashMap<u64, Outcome>,
}

/// The appends of one session waiting for this store's writer.
#[derive(Debug, Default)]
pub(super) struct Group {
    state: Mutex<State>,
    done: Condvar,
}

/// The groups of a store, by session id.
#[derive(Debug, Default)]
pub(super) struct Groups {
    by_id: Mutex<HashMap<String, Arc<Group>>>,
}

impl Groups {
    fn of(&self, id: &str) -> Option<Arc<Group>> {
        let mut map = self.by_id.lock().ok()?;
        if map.len() > 4096 {
            // Only batching depends on a group: a dropped one costs nothing
            // but a missed batch (the flock still serialises writers).
            map.retain(|_, g| Arc::strong_count(g) > 1);
        }
        Some(map.entry(id.to_string()).or_default().clone())
    }
}

impl FileStore {
    /// Append `payloads` (one record each, serialised) through the group of
    /// session `id`. `None` when the append must be done on its own.
    pub(super) fn append_grouped(
        &self,
        id: &str,
        payloads: Vec<String>,
        expected_next: Option<u64>,
    ) -> Option<Result<Appended>> {
        let group = self.groups.of(id)?;
        let mut state = group.state.lock().ok()?;
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push(Pending {
            ticket,
            payloads,
            expected_next,
        });
        loop {
            if let Some(outcome) = state.results.remove(&ticket) {
                return match outcome {
                    Outcome::Done(r) => Some(r),
                    Outcome::Alone => None,
                };
            }
            if !state.writing {
                state.writing = true;
                let batch = std::mem::take(&mut state.queue);
                drop(state);
                let outcomes = self.write_group(id, &batch, ticket);
                state = match group.state.lock() {
                    Ok(s) => s,
                    // Unreachable in practice (nothing panics while holding it).
                    Err(poisoned) => poisoned.into_inner(),
                };
                state.writing = false;
                for (p, o) in batch.iter().zip(outcomes) {
                    state.results.insert(p.ticket, o);
                }
                group.done.notify_all();
                continue;
            }
            state = match group.done.wait(state) {
                Ok(s) => s,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }

    /// Write every append of `batch` under one lock, one write and one sync.
    /// An error before anything is written goes to the append `mine`; the
    /// others are told to append alone.
    fn write_group(&self, id: &str, batch: &[Pending], mine: u64) -> Vec<Outcome> {
        let written = self.path_of(id).and_then(|path| {
            let mut file = open_transcript(&path, id, true)?;
            file.lock().ctx("lock", &path)?;
            let out = file_trash::ensure_still_live(&file, &path, id)
                .and_then(|()| self.note_change(id))
                .and_then(|noted| {
                    let out = self.write_group_locked(id, &mut file, &path, batch);
                    self.note_change_after(id, noted);
                    out
                });
            let _ = file.unlock();
            out
        });
        match written {
            Ok(outcomes) => outcomes,
            Err(e) => {
                let mut e = Some(e);
                batch
                    .iter()
                    .map(|p| match (p.ticket == mine).then(|| e.take()).flatten() {
                        Some(e) => Outcome::Done(Err(e)),
                        None => Outcome::Alone,
                    })
                    .collect()
            }
        }
    }

    fn write_group_locked(
        &self,
        id: &str,
        file: &mut File,
        path: &Path,
        batch: &[Pending],
    ) -> Result<Vec<Outcome>> {
        if self.is_poisoned(id) {
            return Ok(batch
                .iter()
                .map(|_| {
                    Outcome::Done(Err(Error::Poisoned {
                        id: id.to_string(),
                        path: path.to_path_buf(),
                    }))
                })
                .collect());
        }
        let (tail, mut repaired) = self.settle_tail(id, file, path)?;
        self.remember_tail(id, tail);
        let mut buf = Vec::new();
        let (mut seq, mut hash) = (tail.seq, tail.hash);
        let mut results: Vec<Result<Appended>> = Vec::with_capacity(batch.len());
        for p in batch {
            let first_seq = seq + 1;
            if let Some(expected) = p.expected_next {
                if expected != first_seq {
                    results.push(Err(Error::Conflict {
                        id: id.to_string(),
                        expected,
                        actual: first_seq,
                    }));
                    continue;
                }
            }
            let last_seq = first_seq + p.payloads.len() as u64 - 1;
            let marker = (p.payloads.len() > 1).then_some(last_seq);
            for (i, payload) in p.payloads.iter().enumerate() {
                hash = frame::encode(&mut buf, first_seq + i as u64, &hash, marker, payload);
            }
            seq = last_seq;
            results.push(Ok(Appended {
                first_seq,
                last_seq,
                repaired: repaired.take(),
            }));
        }
        if !buf.is_empty() {
            self.forget_tail(id);
            let failed = match self.io.write_all(file, &buf) {
                Err(e) => {
                    // Roll back a partial write (e.g. a full disk).
                    if self.io.set_len(file, tail.len).is_err() {
                        self.poison(id);
                    }
                    Some(("write", e))
                }
                Ok(()) if self.durability == Durability::Fsync => {
                    self.io.sync(file, false).err().map(|e| {
                        // Nothing in the page cache is trusted until re-verified.
                        let _ = self.io.set_len(file, tail.len);
                        self.poison(id);
                        ("fsync", e)
                    })
                }
                Ok(()) => None,
            };
            if let Some((op, e)) = failed {
                for r in &mut results {
                    if r.is_ok() {
                        *r = Err(Error::Io {
                            op,
                            path: path.to_path_buf(),
                            source: same_error(&e),
                        });
                    }
                }
            } else {
                self.remember_tail(
                    id,
                    Tail {
                        ino: tail.ino,
                        len: tail.len + buf.len() as u64,
                        seq,
                        hash,
                    },
                );
            }
        }
        Ok(results.into_iter().map(Outcome::Done).collect())
    }
}

/// A copy of an I/O error for each append of a failed group (same errno).
fn same_error(e: &std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(e.kind(), e.to_string()),
    }
}
