//! Bringing sessions into the index: the full pass over the store's listing
//! ([`update_all`], a `stat` per session), the pipeline it and the journal
//! catch-up (`super::catchup`) feed ([`index_sessions`]), and turning records
//! into documents.
//!
//! Three threads in a pass ([`index_sessions`]): a reader makes documents
//! of the logs, the caller's thread writes the index file, and the terms
//! file is written on a thread of its own (`super::terms_writer`).
//!
//! Memory: the listing's cursors (a few dozen bytes per session), a few
//! sessions' logs in the read-ahead pipeline ([`index_sessions`]), the term
//! cache ([`super::terms::MAX_CACHED_WORDS`] words), the terms thread's
//! queue and the open batch (SQLite's page caches, FTS5's pending terms);
//! commits
//! happen every [`BATCH_DOCS`] documents, each with the cursor of the session
//! in progress, so a crash loses at most one batch and never indexes a record
//! twice.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::{params, OptionalExtension};

use super::cursor::{self, record_hash, Cursor, Fingerprint, Plan, RecordHash};
use super::doc_text;
use super::engine::{self, Db, SqlContext};
use super::schema::{BATCH_KEY, CHECKPOINT_KEY};
use super::terms::Terms;
use super::terms_writer::TermsWriter;
use super::text::{self, MessageText};
use super::{Result, UpdateReport, NATIVE_AGENT};
use crate::message::Message;
use crate::record::{Record, SessionMeta};
use crate::store::file::checkpoint;
use crate::store::{LogStore, Span};
use crate::view::lexical::Tokenizer;

/// Documents per committed batch by default ([`super::SearchIndex::with_batch_docs`];
/// each commit flushes FTS5's pending terms
/// and `fsync`s both files: 100,000 indexes a million messages about 1.1×
/// as fast as 20,000, for ~40 MB more peak memory; docs/BENCHMARKS.md).
pub const BATCH_DOCS: usize = 100_000;

/// A stored session row: its key and cursor.
pub(super) struct Known {
    pub(super) sid: i64,
    pub(super) cursor: Cursor,
}

const KNOWN_SQL: &str = "SELECT id, sid, last_seq, last_hash, fp_len, fp_mtime FROM sessions";

fn known_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Known)> {
    let hash: Vec<u8> = r.get(3)?;
    let fp_len: Option<i64> = r.get(4)?;
    let fp_mtime: Option<i64> = r.get(5)?;
    Ok((
        r.get::<_, String>(0)?,
        Known {
            sid: r.get(1)?,
            cursor: Cursor {
                last_seq: r.get::<_, i64>(2)?.max(0) as u64,
                // A malformed hash can only force a re-index.
                last_hash: hash.try_into().unwrap_or([0; 32]),
                fingerprint: fp_len.zip(fp_mtime).map(|(len, mtime_ns)| Fingerprint {
                    len: len.max(0) as u64,
                    mtime_ns,
                }),
            },
        },
    ))
}

fn known_sessions(db: &Db) -> Result<HashMap<String, Known>> {
    let mut st = db.conn.prepare(KNOWN_SQL).at(db.path())?;
    let rows = st.query_map([], known_row).at(db.path())?;
    rows.collect::<rusqlite::Result<_>>().at(db.path())
}

pub(super) fn known_session(db: &Db, id: &str) -> Result<Option<Known>> {
    let found = db
        .conn
        .query_row(&format!("{KNOWN_SQL} WHERE id = ?1"), [id], known_row)
        .optional()
        .at(db.path())?;
    Ok(found.map(|(_, k)| k))
}

/// Sessions among a few picked at random ([`checkpoint::sample`]) whose
/// transcript no longer has the fingerprint of their cursor: a writer that
/// bypassed the change journal is noticed eventually.
pub(super) fn sampled_stale(db: &Db, store: &dyn LogStore) -> Result<Vec<String>> {
    let max_sid: Option<i64> = db
        .conn
        .query_row("SELECT max(sid) FROM sessions", [], |r| r.get(0))
        .at(db.path())?;
    let mut stale = Vec::new();
    for i in checkpoint::sample(max_sid.unwrap_or(0).max(0) as usize) {
        let found = db
            .conn
            .prepare_cached(&format!("{KNOWN_SQL} WHERE sid = ?1"))
            .at(db.path())?
            .query_row([i as i64 + 1], known_row)
            .optional()
            .at(db.path())?;
        if let Some((id, k)) = found {
            if Fingerprint::of(&store.location(&id)) != k.cursor.fingerprint {
                stale.push(id);
            }
        }
    }
    Ok(stale)
}

/// Delete everything the index holds for session row `sid`.
fn forget_docs(batch: &Batch<'_>, sid: i64) -> Result<()> {
    let db = batch.db;
    let p = db.path();
    let rowids: Vec<i64> = {
        let mut st = db
            .conn
            .prepare_cached("SELECT rowid FROM docs WHERE sid = ?1")
            .at(p)?;
        let rows = st.query_map([sid], |r| r.get(0)).at(p)?;
        rows.collect::<rusqlite::Result<_>>().at(p)?
    };
    for rowid in rowids {
        batch.terms.delete(rowid)?;
    }
    db.conn
        .execute("DELETE FROM docs WHERE sid = ?1", [sid])
        .at(p)?;
    db.conn
        .execute("DELETE FROM calls WHERE sid = ?1", [sid])
        .at(p)?;
    db.conn
        .execute(
            "UPDATE sessions SET docs = 0, tokens = 0 WHERE sid = ?1",
            [sid],
        )
        .at(p)?;
    Ok(())
}

pub(super) fn forget_session(batch: &Batch<'_>, sid: i64) -> Result<()> {
    forget_docs(batch, sid)?;
    batch
        .db
        .conn
        .execute("DELETE FROM sessions WHERE sid = ?1", [sid])
        .at(batch.db.path())?;
    Ok(())
}

/// An open write transaction on both of the index's files
/// (`super::engine`: the index file locked first, the terms file committed
/// first, each commit with the next batch counter), committed every
/// `Db::batch_docs` documents.
pub(super) struct Batch<'a> {
    pub(super) db: &'a Db,
    /// The terms file's writer.
    pub(super) terms: TermsWriter<'a>,
    pending: usize,
    /// Batches both files had committed when this one began.
    number: u64,
    /// The files' batch counters differed when it began (a crash between
    /// the two commits of a batch): both were emptied, and the update must
    /// index every session again.
    pub(super) reset: bool,
}

impl<'a> Batch<'a> {
    /// Take the index's write locks (waiting for another writer) and start;
    /// an index whose files disagree is emptied first (`reset`).
    pub(super) fn begin(db: &'a Db) -> Result<Batch<'a>> {
        db.conn.execute_batch("BEGIN IMMEDIATE").at(db.path())?;
        let mut batch = Batch {
            db,
            terms: TermsWriter::new(db),
            pending: 0,
            number: 0,
            reset: false,
        };
        batch.terms.begin()?;
        let ours = engine::batch_counter(&db.conn);
        let theirs = batch.terms.counter();
        match ours.zip(theirs) {
            Some((ours, theirs)) if ours == theirs => batch.number = ours,
            _ => {
                // Emptied in this transaction: a crash now leaves the
                // files as they were, still disagreeing.
                db.conn
                    .execute_batch(&format!(
                        "DELETE FROM docs; DELETE FROM calls; DELETE FROM sessions; \
                         DELETE FROM meta WHERE key = '{CHECKPOINT_KEY}';"
                    ))
                    .at(db.path())?;
                batch.terms.delete_all()?;
                batch.number = ours.max(theirs).unwrap_or(0);
                batch.reset = true;
            }
        }
        Ok(batch)
    }

    /// Commit both files: the terms file first, then the index file.
    fn commit_both(&mut self) -> Result<()> {
        let next = self.number + 1;
        self.terms.commit(next)?;
        let p = self.db.path();
        self.db
            .conn
            .execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                rusqlite::params![BATCH_KEY, next.to_string()],
            )
            .at(p)?;
        self.db.conn.execute_batch("COMMIT").at(p)?;
        self.number = next;
        Ok(())
    }

    /// Commit what is left.
    pub(super) fn commit(mut self) -> Result<()> {
        self.commit_both()
    }

    /// Commit and start the next transaction when the batch is full.
    fn maybe_rotate(&mut self) -> Result<bool> {
        if self.pending < self.db.batch_docs {
            return Ok(false);
        }
        self.commit_both()?;
        self.db
            .conn
            .execute_batch("BEGIN IMMEDIATE")
            .at(self.db.path())?;
        self.terms.begin()?;
        self.pending = 0;
        Ok(true)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        // Only reached with a transaction still open on an error path.
        self.terms.rollback();
        if !self.db.conn.is_autocommit() {
            let _ = self.db.conn.execute_batch("ROLLBACK");
        }
    }
}

pub(super) fn agent_of(meta: &SessionMeta) -> String {
    meta.source
        .as_ref()
        .map_or_else(|| NATIVE_AGENT.to_string(), |s| s.agent.clone())
}

pub(super) fn ms(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_millis()
}

/// Sessions read ahead of the writer (the pipeline's channel depth).
const READ_AHEAD: usize = 8;

/// What the full pass found besides its report.
pub(super) struct FullPass {
    /// What it did.
    pub(super) report: UpdateReport,
    /// The ids the store listed (readable headers).
    pub(super) listed: HashSet<String>,
    /// Listed sessions whose log could not be read.
    pub(super) failed: Failed,
}

/// Index the whole store: every listed session from its cursor, deleted
/// sessions dropped (one `stat` per unchanged session).
pub(super) fn update_all(
    batch: &mut Batch<'_>,
    store: &dyn LogStore,
    tk: &Tokenizer,
) -> Result<FullPass> {
    let (listed, unreadable) = store.list()?;
    let mut known = known_sessions(batch.db)?;
    let mut report = UpdateReport {
        sessions: listed.len(),
        unreadable,
        full_scan: true,
        ..UpdateReport::default()
    };
    let listed_ids: HashSet<String> = listed.iter().map(|l| l.meta.id.clone()).collect();
    let gone: Vec<String> = known
        .keys()
        .filter(|id| !listed_ids.contains(id.as_str()))
        .cloned()
        .collect();
    for id in gone {
        if let Some(k) = known.remove(&id) {
            forget_session(batch, k.sid)?;
            report.removed += 1;
        }
    }
    let mut todo = Vec::new();
    for l in &listed {
        let fp = Fingerprint::of(&l.location);
        let k = known.remove(&l.meta.id);
        if let (Some(k), Some(fp)) = (&k, fp) {
            if k.cursor.fingerprint == Some(fp) {
                report.unchanged += 1;
                continue;
            }
        }
        todo.push(Todo {
            id: l.meta.id.clone(),
            known: k,
            check: Check::Stat(fp),
        });
    }
    drop(listed);
    let mut failed = Failed::default();
    index_sessions(batch, store, tk, todo, &mut report, &mut failed)?;
    Ok(FullPass {
        report,
        listed: listed_ids,
        failed,
    })
}

/// Sessions [`index_sessions`] could not read.
#[derive(Debug, Default)]
pub(super) struct Failed {
    /// Ids whose log is unreadable as it stands (no valid header, a special
    /// file...): retried when they change.
    pub(super) unreadable: Vec<String>,
    /// Whether a read failed for a reason that says nothing about the
    /// session (I/O, busy): the caller must not consume the change.
    pub(super) transient: bool,
}

/// How a session to index is checked before it is read.
pub(super) enum Check<'a> {
    /// Already `stat`ed by the full pass (its fingerprint then).
    Stat(Option<Fingerprint>),
    /// Named by the change journal, in this store directory: its transcript
    /// is locked shared (so a change the journal announced has finished),
    /// then `fstat`ed, and read only when its fingerprint moved.
    Locked(&'a Path),
}

/// One session to bring up to date.
pub(super) struct Todo<'a> {
    /// Its id.
    pub(super) id: String,
    /// What the index holds for it.
    pub(super) known: Option<Known>,
    /// How to check it.
    pub(super) check: Check<'a>,
}

/// Bring `todo`'s sessions up to date in `batch`; the ids that could not
/// be read go to `failed`.
///
/// Three stages: a reader thread reads each session and turns its new
/// records into documents (parse, text, terms, hashes); this thread writes
/// them to the index file, and hands their terms to the terms thread. At
/// most [`READ_AHEAD`] prepared sessions wait between the first two, so
/// memory stays bounded by a few sessions' logs.
pub(super) fn index_sessions(
    batch: &mut Batch<'_>,
    store: &dyn LogStore,
    tk: &Tokenizer,
    todo: Vec<Todo<'_>>,
    report: &mut UpdateReport,
    failed: &mut Failed,
) -> Result<()> {
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Prepared>(READ_AHEAD);
        let reader = scope.spawn(move || {
            let mut terms = Terms::new(tk);
            for t in todo {
                let p = read_one(store, &mut terms, t);
                if tx.send(p).is_err() {
                    break; // the writer failed: stop reading
                }
            }
        });
        let terms = batch.terms.start_thread(scope);
        let mut written = Ok(());
        for p in rx.iter() {
            match p.read {
                Read::Unreadable { transient: true } => failed.transient = true,
                Read::Unreadable { transient: false } => failed.unreadable.push(p.id.clone()),
                _ => {}
            }
            written = write_session(batch, store, p, report);
            if written.is_err() {
                break;
            }
        }
        drop(rx);
        if let Err(panic) = reader.join() {
            std::panic::resume_unwind(panic);
        }
        // The terms thread's own error explains a write that failed for
        // want of it.
        batch.terms.stop_thread(terms).and(written)
    })
}

/// Check one session as `todo` says and, when it changed, read it.
fn read_one(store: &dyn LogStore, terms: &mut Terms<'_>, todo: Todo<'_>) -> Prepared {
    let Todo { id, known, check } = todo;
    let dir = match check {
        Check::Stat(fp) => return prepare(store, terms, id, known, fp),
        Check::Locked(dir) => dir,
    };
    let read = match checkpoint::lock_shared(dir, &id) {
        Ok(Some(lock)) => {
            let fp = lock
                .metadata()
                .ok()
                .and_then(|m| Fingerprint::of_metadata(&m));
            if fp.is_some() && known.as_ref().and_then(|k| k.cursor.fingerprint) == fp {
                Read::Unchanged
            } else {
                // Read while the lock is held: no writer moves the file past
                // the fingerprint meanwhile.
                let prepared = prepare(store, terms, id, known, fp);
                drop(lock);
                return prepared;
            }
        }
        Ok(None) => Read::Gone,
        Err(e) => Read::Unreadable {
            transient: checkpoint::is_transient(&e),
        },
    };
    Prepared {
        id,
        known,
        fp: None,
        read,
    }
}

/// Index one session (after an append); drop it when the store lost it.
pub(super) fn update_one(
    db: &mut Db,
    store: &dyn LogStore,
    tk: &Tokenizer,
    id: &str,
) -> Result<UpdateReport> {
    crate::id::validate(id)?;
    let mut report = UpdateReport::default();
    // The cursor is read under the write lock: read before it, another
    // index on the same file could write the session in between (and this
    // one would then insert it a second time).
    let mut batch = Batch::begin(db)?;
    let known = known_session(batch.db, id)?;
    match store.read_header(id) {
        Ok(Some(_)) => {
            report.sessions = 1;
            let fp = Fingerprint::of(&store.location(id));
            let p = prepare(store, &mut Terms::new(tk), id.to_string(), known, fp);
            write_session(&mut batch, store, p, &mut report)?;
        }
        Ok(None) | Err(crate::Error::NotFound(_)) => {
            if let Some(k) = known {
                forget_session(&batch, k.sid)?;
                report.removed = 1;
            }
        }
        Err(e) => return Err(e.into()),
    }
    // After a reset only this session is back; the checkpoint is gone, so
    // the next update is a full pass that brings back the others.
    report.rebuilt = batch.reset;
    batch.commit()?;
    Ok(report)
}

/// One message made ready for the index.
pub(super) struct Doc {
    /// Index in the session's `records` of the record that holds it.
    pub(super) record: usize,
    /// Whether it came from a `rewrite` (checked against what is indexed).
    pub(super) rewritten: bool,
    pub(super) role: &'static str,
    pub(super) ts_ms: i64,
    pub(super) text: MessageText,
    pub(super) terms: String,
    pub(super) term_count: u64,
    pub(super) hash: RecordHash,
    /// Where its record lies in the log, when the text is kept there
    /// (`super::doc_text`); `None`: the text is stored inline.
    pub(super) span: Option<Span>,
}

/// One session read and turned into documents, ready for the writer.
pub(super) struct Prepared {
    pub(super) id: String,
    pub(super) known: Option<Known>,
    pub(super) fp: Option<Fingerprint>,
    pub(super) read: Read,
}

pub(super) enum Read {
    /// Its fingerprint is the cursor's: nothing to read.
    Unchanged,
    /// The store no longer has the session.
    Gone,
    /// It could not be read (left as it was; retried next time).
    Unreadable {
        /// The error says nothing about the session (I/O, busy): retry it.
        transient: bool,
    },
    /// Read: its header, plan and new documents.
    Log(Box<SessionLog>),
}

pub(super) struct SessionLog {
    pub(super) meta: SessionMeta,
    pub(super) header_hash: RecordHash,
    /// `Some(from)`: extend from record `from`; `None`: re-index it all.
    pub(super) extend_from: Option<usize>,
    pub(super) title: Option<String>,
    pub(super) records: Vec<crate::store::SeqRecord>,
    /// Documents of `records[from..]`, in record order.
    pub(super) docs: Vec<Doc>,
}

/// Keep the documents' spans only when the store reads one of them back
/// (checked on the first): a store that lists spans but cannot read them
/// (a wrapper that forwards `read` but not `read_span`) gets its texts
/// stored inline, never unreadable ones.
fn keep_spans_if_readable(
    store: &dyn LogStore,
    id: &str,
    records: &[crate::store::SeqRecord],
    docs: &mut [Doc],
) {
    let Some(d) = docs.iter().find(|d| d.span.is_some()) else {
        return;
    };
    let (Some(span), Some(rec)) = (d.span, records.get(d.record)) else {
        return;
    };
    if doc_text::read_back(store, id, rec.seq, span, &d.hash).is_none() {
        for d in docs.iter_mut() {
            d.span = None;
        }
    }
}

/// Which kind of record a document came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A `message` record: the text can be kept by the record's span.
    Message,
    /// One of a `rewrite`'s messages: the text is kept inline.
    Rewrite,
}

/// Read session `id` and make documents of what its cursor has not seen
/// (no database access: this runs on the reader thread).
pub(super) fn prepare(
    store: &dyn LogStore,
    terms: &mut Terms<'_>,
    id: String,
    known: Option<Known>,
    fp: Option<Fingerprint>,
) -> Prepared {
    // The fingerprint is taken before reading: if the file grows meanwhile,
    // the next update sees a new fingerprint and reads on from the cursor.
    let raw = match store.read(&id) {
        Ok(raw) => raw,
        Err(crate::Error::NotFound(_)) => {
            return Prepared {
                id,
                known,
                fp,
                read: Read::Gone,
            }
        }
        Err(e) => {
            return Prepared {
                id,
                known,
                fp,
                read: Read::Unreadable {
                    transient: checkpoint::is_transient(&e),
                },
            }
        }
    };
    let Some(meta) = raw.header else {
        return Prepared {
            id,
            known,
            fp,
            read: Read::Unreadable { transient: false },
        };
    };
    let header_hash = record_hash(&Record::Meta(meta.clone()));
    let records = raw.records;
    // A store that keeps spans has one per record.
    let spans = (raw.spans.len() == records.len()).then_some(raw.spans);
    let extend_from = match cursor::plan(known.as_ref().map(|k| &k.cursor), &header_hash, &records)
    {
        Plan::Extend { from } if known.is_some() => Some(from),
        _ => None,
    };
    let title = records
        .iter()
        .rev()
        .find_map(|r| match &r.record {
            Record::Title { title } => Some(title.clone()),
            _ => None,
        })
        .or_else(|| meta.title.clone());
    let default_ms = ms(meta.created_at);
    let mut docs = Vec::new();
    let from = extend_from.unwrap_or(0).min(records.len());
    let span_at = |record: usize| spans.as_ref().map(|s| s[record]);
    let mut make = |record: usize, origin: Origin, m: &Message, docs: &mut Vec<Doc>| {
        let text = text::of_message(m);
        if text.text.is_empty() {
            return;
        }
        let mut joined = String::new();
        let term_count = terms.joined(&text.text, &mut joined);
        docs.push(Doc {
            record,
            rewritten: origin == Origin::Rewrite,
            role: m.role.as_str(),
            ts_ms: m.timestamp.map_or(default_ms, ms),
            hash: text::content_hash(&text.text),
            text,
            terms: joined,
            term_count,
            span: match origin {
                Origin::Message => span_at(record),
                Origin::Rewrite => None,
            },
        });
    };
    for (i, rec) in records.iter().enumerate().skip(from) {
        match &rec.record {
            Record::Message(m) => make(i, Origin::Message, m, &mut docs),
            Record::Rewrite { messages } => {
                for m in messages {
                    make(i, Origin::Rewrite, m, &mut docs);
                }
            }
            _ => {}
        }
    }
    keep_spans_if_readable(store, &id, &records, &mut docs);
    Prepared {
        id,
        known,
        fp,
        read: Read::Log(Box::new(SessionLog {
            meta,
            header_hash,
            extend_from,
            title,
            records,
            docs,
        })),
    }
}

/// Everything needed while writing one session's documents.
struct SessionWriter {
    sid: i64,
    /// Content hashes of the messages a fork inherited (loaded on the first
    /// rewrite of a fork: a rewrite repeats them, and they belong to the parent).
    inherited: Option<HashSet<RecordHash>>,
}

impl SessionWriter {
    /// Add one document (its terms go to the terms file's writer).
    fn add(&self, batch: &Batch<'_>, seq: u64, d: Doc) -> Result<()> {
        let db = batch.db;
        let p = db.path();
        for (call, name) in &d.text.calls {
            db.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO calls(sid, call_id, name) VALUES (?1, ?2, ?3)",
                )
                .at(p)?
                .execute(params![self.sid, call, name])
                .at(p)?;
        }
        let mut tools: Vec<String> = d.text.calls.iter().map(|(_, n)| n.clone()).collect();
        for answer in &d.text.answers {
            let name: Option<String> = db
                .conn
                .prepare_cached("SELECT name FROM calls WHERE sid = ?1 AND call_id = ?2")
                .at(p)?
                .query_row(params![self.sid, answer], |r| r.get(0))
                .optional()
                .at(p)?;
            tools.extend(name);
        }
        tools.sort();
        tools.dedup();
        let tools = if tools.is_empty() {
            String::new()
        } else {
            format!(" {} ", tools.join(" "))
        };
        // Kept by location, the text is not stored (`super::doc_text`).
        let inline = d.span.is_none().then_some(d.text.text.as_str());
        db.conn
            .prepare_cached(
                "INSERT INTO docs(sid, seq, role, ts_ms, tools, chash, text, span_at, span_len) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .at(p)?
            .execute(params![
                self.sid,
                seq as i64,
                d.role,
                d.ts_ms,
                tools,
                &d.hash[..],
                inline,
                d.span.map(|s| s.offset as i64),
                d.span.map(|s| s.len as i64)
            ])
            .at(p)?;
        batch.terms.insert(db.conn.last_insert_rowid(), d.terms)
    }

    fn already_indexed(&self, db: &Db, hash: &RecordHash) -> Result<bool> {
        db.conn
            .prepare_cached("SELECT 1 FROM docs WHERE sid = ?1 AND chash = ?2 LIMIT 1")
            .at(db.path())?
            .query_row(params![self.sid, &hash[..]], |_| Ok(()))
            .optional()
            .at(db.path())
            .map(|r| r.is_some())
    }
}

/// Write one prepared session: its row, its new documents, its cursor.
fn write_session(
    batch: &mut Batch<'_>,
    store: &dyn LogStore,
    prepared: Prepared,
    report: &mut UpdateReport,
) -> Result<()> {
    let Prepared {
        id,
        known,
        fp,
        read,
    } = prepared;
    let log = match read {
        Read::Unchanged => {
            report.unchanged += 1;
            return Ok(());
        }
        Read::Gone => {
            if let Some(k) = known {
                forget_session(batch, k.sid)?;
                report.removed += 1;
            }
            return Ok(());
        }
        Read::Unreadable { .. } => {
            report.unreadable += 1;
            return Ok(());
        }
        Read::Log(log) => log,
    };
    let SessionLog {
        meta,
        header_hash,
        extend_from,
        title,
        records,
        docs,
    } = *log;
    let db = batch.db;
    let p = db.path();
    let sid = match (known, extend_from) {
        (Some(k), Some(_)) => {
            report.extended += 1;
            k.sid
        }
        (Some(k), None) => {
            forget_docs(batch, k.sid)?;
            report.reindexed += 1;
            k.sid
        }
        (None, _) => {
            db.conn
                .execute(
                    "INSERT INTO sessions(id, agent, project, created_ms, last_seq, last_hash) \
                     VALUES (?1, '', '', 0, 0, ?2)",
                    params![id, &header_hash[..]],
                )
                .at(p)?;
            report.reindexed += 1;
            db.conn.last_insert_rowid()
        }
    };
    db.conn
        .execute(
            "UPDATE sessions SET title = ?2, agent = ?3, project = ?4, created_ms = ?5 WHERE sid = ?1",
            params![
                sid,
                title,
                agent_of(&meta),
                meta.workspace.to_string_lossy(),
                ms(meta.created_at)
            ],
        )
        .at(p)?;
    let mut writer = SessionWriter {
        sid,
        inherited: None,
    };
    let save_cursor = |seq: u64, hash: &RecordHash, fp: Option<Fingerprint>| -> Result<()> {
        db.conn
            .execute(
                "UPDATE sessions SET last_seq = ?2, last_hash = ?3, fp_len = ?4, fp_mtime = ?5 \
                 WHERE sid = ?1",
                params![
                    sid,
                    seq as i64,
                    &hash[..],
                    fp.map(|f| f.len as i64),
                    fp.map(|f| f.mtime_ns)
                ],
            )
            .at(p)?;
        Ok(())
    };
    // (documents, terms) added since the counters were last saved.
    let mut counts = (0u64, 0u64);
    let save_counts = |(docs, tokens): (u64, u64)| -> Result<()> {
        db.conn
            .execute(
                "UPDATE sessions SET docs = docs + ?2, tokens = tokens + ?3 WHERE sid = ?1",
                params![sid, docs as i64, tokens as i64],
            )
            .at(p)?;
        Ok(())
    };
    let mut docs = docs.into_iter().peekable();
    let from = extend_from.unwrap_or(0).min(records.len());
    for (i, rec) in records.iter().enumerate().skip(from) {
        while let Some(d) = docs.next_if(|d| d.record == i) {
            if d.rewritten
                && (writer.already_indexed(db, &d.hash)?
                    || inherited_contains(&mut writer.inherited, store, &meta, &d.hash))
            {
                continue;
            }
            counts.0 += 1;
            counts.1 += d.term_count;
            writer.add(batch, rec.seq, d)?;
            report.messages += 1;
            batch.pending += 1;
        }
        if batch.pending >= batch.db.batch_docs {
            // Commit with the cursor at this record, file fingerprint unknown
            // (so the next update reads on from here).
            save_cursor(rec.seq, &record_hash(&rec.record), None)?;
            save_counts(std::mem::take(&mut counts))?;
            batch.maybe_rotate()?;
        }
    }
    save_counts(counts)?;
    match records.last() {
        Some(last) => save_cursor(last.seq, &record_hash(&last.record), fp)?,
        None => save_cursor(0, &header_hash, fp)?,
    }
    Ok(())
}

/// Whether a fork inherited a message with this content hash from its parent.
pub(super) fn inherited_contains(
    inherited: &mut Option<HashSet<RecordHash>>,
    store: &dyn LogStore,
    meta: &SessionMeta,
    hash: &RecordHash,
) -> bool {
    let Some(fork) = &meta.parent else {
        return false;
    };
    let set = inherited.get_or_insert_with(|| {
        crate::transcript::read_at(store, fork)
            .map(|t| {
                t.messages
                    .iter()
                    .map(|m| text::content_hash(&text::of_message(m).text))
                    .collect()
            })
            .unwrap_or_default()
    });
    set.contains(hash)
}
