//! Catching the index up with a file store from its change journal: per
//! search request, a read of the journal's tail and of the store directory's
//! mtime instead of a `stat` per session (with the store's change
//! journal).
//!
//! The index keeps a [`Checkpoint`] in its `meta` table (key
//! [`CHECKPOINT_KEY`], JSON, `v` = [`CHECKPOINT_VERSION`]). [`update`]:
//!
//! 1. without the write lock, asks the checkpoint what changed
//!    ([`Checkpoint::changes`]) and checks a few sessions picked at random
//!    against a `stat` ([`checkpoint::sample`]); when nothing did, it returns
//!    (a search on a current index never waits for another process's
//!    indexing);
//! 2. otherwise, under the write lock, it asks again, drops the sessions the
//!    directory lost and re-checks the changed ones, each under its
//!    transcript's shared lock (so an append the journal announced has
//!    finished), reading only those whose fingerprint moved; the new
//!    checkpoint is stored in the transaction of the last batch, so a
//!    SIGKILL leaves the old one and the next update replays from it;
//! 3. when the journal cannot answer (no checkpoint yet, another boot, the
//!    journal restarted, compacted or lost), it does the full pass
//!    ([`indexer::update_all`]) with a checkpoint taken before looking.
//!
//! Stores that are not file stores ([`LogStore::index_dir`] is `None`) keep
//! no journal: every update is the full pass.

use std::collections::HashSet;
use std::path::Path;

use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};

use super::engine::{Db, SqlContext};
use super::indexer::{self, Batch, Check, Failed, Todo};
use super::{Result, UpdateReport};
use crate::store::file::changes::Journal;
use crate::store::file::checkpoint::{self, Changes, Checkpoint};
use crate::store::LogStore;
use crate::view::lexical::Tokenizer;

use super::schema::CHECKPOINT_KEY;

/// Version of the stored checkpoint's JSON (another one is ignored: the
/// next update is a full pass, which stores this one).
pub const CHECKPOINT_VERSION: u32 = 1;

/// The checkpoint as stored: `{"v": 1, "boot": ..., "epoch": ..., ...}`.
#[derive(Serialize, Deserialize)]
struct Stored {
    v: u32,
    #[serde(flatten)]
    at: Checkpoint,
}

/// The stored checkpoint, `None` when there is none or it does not parse.
fn load(db: &Db) -> Result<Option<Checkpoint>> {
    let json: Option<String> = db
        .conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [CHECKPOINT_KEY],
            |r| r.get(0),
        )
        .optional()
        .at(db.path())?;
    Ok(json
        .and_then(|j| serde_json::from_str::<Stored>(&j).ok())
        .filter(|s| s.v == CHECKPOINT_VERSION)
        .map(|s| s.at))
}

/// Store `at` (or forget the checkpoint: every update is then a full pass).
fn save(db: &Db, at: Option<Checkpoint>) -> Result<()> {
    let p = db.path();
    match at {
        Some(at) => {
            let json = serde_json::to_string(&Stored {
                v: CHECKPOINT_VERSION,
                at,
            })
            .map_err(crate::Error::from)?;
            db.conn
                .execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                    [CHECKPOINT_KEY, json.as_str()],
                )
                .at(p)?;
        }
        None => {
            db.conn
                .execute("DELETE FROM meta WHERE key = ?1", [CHECKPOINT_KEY])
                .at(p)?;
        }
    }
    Ok(())
}

/// Every indexed session's id.
fn known_ids(db: &Db) -> Result<HashSet<String>> {
    let mut st = db.conn.prepare("SELECT id FROM sessions").at(db.path())?;
    let rows = st.query_map([], |r| r.get(0)).at(db.path())?;
    rows.collect::<rusqlite::Result<_>>().at(db.path())
}

/// Catch the index up with `store` (see the module's documentation).
pub(super) fn update(db: &mut Db, store: &dyn LogStore, tk: &Tokenizer) -> Result<UpdateReport> {
    let Some(dir) = store.index_dir() else {
        let mut batch = Batch::begin(db)?;
        let mut pass = indexer::update_all(&mut batch, store, tk)?;
        pass.report.rebuilt |= batch.reset;
        batch.commit()?;
        return Ok(pass.report);
    };
    let journal = Journal::new(dir);
    let stale = indexer::sampled_stale(db, store)?;
    if stale.is_empty() {
        if let Some(report) = current(db, dir, &journal)? {
            return Ok(report);
        }
    }
    let mut batch = Batch::begin(db)?;
    let changes = match load(batch.db)? {
        Some(at) => at.changes(dir, &journal, || known_ids(batch.db))?,
        None => None,
    };
    let mut report = match changes {
        Some(changes) => apply(&mut batch, store, tk, dir, &journal, changes, stale)?,
        None => full(&mut batch, store, tk, dir, &journal)?,
    };
    report.rebuilt |= batch.reset;
    batch.commit()?;
    Ok(report)
}

/// The report of an index that is current with its checkpoint, read
/// without the write lock; `None` when something changed (or the
/// checkpoint cannot say).
fn current(db: &Db, dir: &Path, journal: &Journal) -> Result<Option<UpdateReport>> {
    let Some(at) = load(db)? else {
        return Ok(None);
    };
    match at.changes(dir, journal, || known_ids(db))? {
        Some(changes) if changes.is_empty() => {
            report_of(db, &changes.next, UpdateReport::default()).map(Some)
        }
        _ => Ok(None),
    }
}

/// The counts of an update that ends at checkpoint `at`.
fn report_of(db: &Db, at: &Checkpoint, mut report: UpdateReport) -> Result<UpdateReport> {
    let sessions: i64 = db
        .conn
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
        .at(db.path())?;
    report.sessions = sessions.max(0) as usize;
    report.unchanged = report
        .sessions
        .saturating_sub(report.extended + report.reindexed);
    report.unreadable = at.unreadable.len() + at.bad_names;
    Ok(report)
}

/// Apply what changed since the checkpoint (plus the `stale` sessions the
/// sample found), and store the next checkpoint.
fn apply(
    batch: &mut Batch<'_>,
    store: &dyn LogStore,
    tk: &Tokenizer,
    dir: &Path,
    journal: &Journal,
    changes: Changes,
    stale: Vec<String>,
) -> Result<UpdateReport> {
    let Changes {
        mut changed,
        gone,
        from,
        next: mut at,
        ..
    } = changes;
    changed.extend(stale);
    let mut report = UpdateReport::default();
    for id in &gone {
        if let Some(sid) = indexer::known_session(batch.db, id)?.map(|k| k.sid) {
            indexer::forget_session(batch, sid)?;
            report.removed += 1;
        }
    }
    let mut todo = Vec::with_capacity(changed.len());
    for id in changed {
        let known = indexer::known_session(batch.db, &id)?;
        todo.push(Todo {
            id,
            known,
            check: Check::Locked(dir),
        });
    }
    let mut failed = Failed::default();
    indexer::index_sessions(batch, store, tk, todo, &mut report, &mut failed)?;
    at.unreadable.extend(failed.unreadable);
    at.unreadable.sort();
    at.unreadable.dedup();
    // A transient failure leaves the journal position where it was: the
    // next update looks at the same sessions again.
    at.finish(journal, &from, !failed.transient);
    let report = report_of(batch.db, &at, report)?;
    save(batch.db, Some(at))?;
    Ok(report)
}

/// The full pass, with a checkpoint taken before it looks (what changes
/// while it looks is replayed by the next update).
fn full(
    batch: &mut Batch<'_>,
    store: &dyn LogStore,
    tk: &Tokenizer,
    dir: &Path,
    journal: &Journal,
) -> Result<UpdateReport> {
    let at = Checkpoint::before_full_scan(dir, journal);
    // Names read before the listing: a session created after them is new
    // to the next update's read of the (changed) directory, never mistaken
    // for an unreadable one.
    let names = match at {
        Some(_) => Some(checkpoint::transcript_ids(dir)?),
        None => None,
    };
    let pass = indexer::update_all(batch, store, tk)?;
    // After a transient failure no checkpoint is kept: the next update is a
    // full pass again, and retries the session.
    let at = at.filter(|_| !pass.failed.transient);
    let at = at.zip(names).map(|(mut at, (names, bad_names))| {
        let mut unreadable: Vec<String> = names
            .into_iter()
            .filter(|id| !pass.listed.contains(id))
            .chain(pass.failed.unreadable)
            .collect();
        unreadable.sort();
        unreadable.dedup();
        at.unreadable = unreadable;
        at.bad_names = bad_names;
        at
    });
    save(batch.db, at)?;
    Ok(pass.report)
}
