//! Writing the terms file (`terms.sqlite`, the FTS5 table): on the
//! caller's thread, or, during a pass over many sessions, on a thread of
//! its own, fed in order over a bounded channel, so that FTS5's insert
//! (most of an index write) runs beside the index file's writes and the
//! reading of the logs (docs/BENCHMARKS.md, "a second writer").
//!
//! The transaction protocol is `super::indexer::Batch`'s: the terms file is
//! locked after the index file and committed before it, each commit with
//! the batch counter ([`super::schema::BATCH_KEY`]).

use std::cell::RefCell;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

use rusqlite::Connection;

use super::engine::{batch_counter, Db, SqlContext};
use super::schema::BATCH_KEY;
use super::{Result, SearchError};

/// Operations handed to the terms thread at a time: one send (and at most
/// one wake-up) per chunk, not per document.
const CHUNK: usize = 256;

/// Chunks queued for the terms thread at most (an operation holds one
/// document's terms, a few KiB: the queue is a few MiB at most).
const QUEUE: usize = 16;

/// One write to the terms file.
enum Op {
    /// Start the next transaction (after the index file's).
    Begin,
    /// Index `body` (space-separated terms) as document `rowid`.
    Insert(i64, String),
    /// Drop document `rowid`.
    Delete(i64),
    /// Set the batch counter, commit, and say how it went.
    Commit(u64, SyncSender<Result<()>>),
}

/// Apply one operation to the terms file's connection.
fn apply(conn: &Connection, path: &Path, op: Op) -> Result<()> {
    match op {
        Op::Begin => conn.execute_batch("BEGIN IMMEDIATE").at(path),
        Op::Insert(rowid, body) => conn
            .prepare_cached("INSERT INTO terms(rowid, body) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(rusqlite::params![rowid, body]))
            .map(drop)
            .at(path),
        Op::Delete(rowid) => conn
            .prepare_cached("DELETE FROM terms WHERE rowid = ?1")
            .and_then(|mut st| st.execute([rowid]))
            .map(drop)
            .at(path),
        Op::Commit(batch, ack) => {
            let done = commit(conn, path, batch);
            // Nobody waiting: the batch was abandoned (and is rolled back).
            let _ = ack.send(done);
            Ok(())
        }
    }
}

fn commit(conn: &Connection, path: &Path, batch: u64) -> Result<()> {
    conn.execute(
        "UPDATE meta SET value = ?2 WHERE key = ?1",
        rusqlite::params![BATCH_KEY, batch.to_string()],
    )
    .at(path)?;
    conn.execute_batch("COMMIT").at(path)
}

/// The terms file's writer of one batch (see the module doc).
pub(super) struct TermsWriter<'a> {
    db: &'a Db,
    /// The terms thread's queue, while one runs.
    thread: Option<SyncSender<Vec<Op>>>,
    /// Operations not yet handed to the terms thread.
    chunk: RefCell<Vec<Op>>,
}

impl<'a> TermsWriter<'a> {
    /// A writer on the caller's thread.
    pub(super) fn new(db: &'a Db) -> Self {
        TermsWriter {
            db,
            thread: None,
            chunk: RefCell::new(Vec::new()),
        }
    }

    fn send(&self, op: Op) -> Result<()> {
        let Some(queue) = &self.thread else {
            return apply(&self.db.terms(), self.db.terms_path(), op);
        };
        let full = {
            let mut chunk = self.chunk.borrow_mut();
            chunk.push(op);
            chunk.len() >= CHUNK
        };
        if full {
            self.flush(queue)?;
        }
        Ok(())
    }

    /// Hand the operations not yet handed over to the terms thread.
    fn flush(&self, queue: &SyncSender<Vec<Op>>) -> Result<()> {
        let chunk = std::mem::take(&mut *self.chunk.borrow_mut());
        if chunk.is_empty() {
            return Ok(());
        }
        queue
            .send(chunk)
            .map_err(|_| SearchError::TermsWriterStopped)
    }

    /// Start a transaction (the index file's must be open already).
    pub(super) fn begin(&self) -> Result<()> {
        self.send(Op::Begin)
    }

    /// Index `body` as document `rowid`.
    pub(super) fn insert(&self, rowid: i64, body: String) -> Result<()> {
        self.send(Op::Insert(rowid, body))
    }

    /// Drop document `rowid`.
    pub(super) fn delete(&self, rowid: i64) -> Result<()> {
        self.send(Op::Delete(rowid))
    }

    /// Commit with batch counter `batch`, once everything queued is written.
    pub(super) fn commit(&self, batch: u64) -> Result<()> {
        let (ack, done) = sync_channel(1);
        self.send(Op::Commit(batch, ack))?;
        if let Some(queue) = &self.thread {
            self.flush(queue)?;
        }
        done.recv().map_err(|_| SearchError::TermsWriterStopped)?
    }

    /// The terms file's batch counter (read on the caller's thread: only
    /// with no terms thread running).
    pub(super) fn counter(&self) -> Option<u64> {
        batch_counter(&self.db.terms())
    }

    /// Empty the terms file (in the open transaction).
    pub(super) fn delete_all(&self) -> Result<()> {
        self.db
            .terms()
            .execute("INSERT INTO terms(terms) VALUES ('delete-all')", [])
            .map(drop)
            .at(self.db.terms_path())
    }

    /// Roll back an open transaction (on the caller's thread).
    pub(super) fn rollback(&self) {
        let conn = self.db.terms();
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }

    /// From now on, write on a thread of its own (inside `scope`), in the
    /// order the operations are queued, until [`TermsWriter::stop_thread`].
    pub(super) fn start_thread<'scope, 'env>(
        &mut self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
    ) -> std::thread::ScopedJoinHandle<'scope, Result<()>>
    where
        'a: 'scope,
    {
        let (queue, ops) = sync_channel(QUEUE);
        let conn: &'a Mutex<Connection> = self.db.terms_mutex();
        let path: &'a Path = self.db.terms_path();
        self.thread = Some(queue);
        scope.spawn(move || run(conn, path, ops))
    }

    /// Wait for the terms thread to write what is queued and stop; its
    /// error, if it failed. Writing is then back on the caller's thread
    /// (the transaction stays open).
    pub(super) fn stop_thread(
        &mut self,
        thread: std::thread::ScopedJoinHandle<'_, Result<()>>,
    ) -> Result<()> {
        let flushed = match self.thread.take() {
            Some(queue) => self.flush(&queue),
            None => Ok(()),
        };
        // A chunk the thread never took (it failed) is dropped unwritten.
        self.chunk.borrow_mut().clear();
        let ran = match thread.join() {
            Ok(ran) => ran,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        // The thread's own error explains a hand-over that failed.
        ran.and(flushed)
    }
}

/// The terms thread: apply operations until the queue closes; stop at the
/// first error (the sender then sees the queue closed).
fn run(conn: &Mutex<Connection>, path: &Path, chunks: Receiver<Vec<Op>>) -> Result<()> {
    let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
    for chunk in chunks {
        for op in chunk {
            apply(&conn, path, op)?;
        }
    }
    Ok(())
}
