//! Document frequencies of the SQLite engine: how many documents hold a
//! term, from FTS5's vocabulary table, remembered while the terms file is
//! unchanged.
//!
//! FTS5 keeps no count per term: `terms_vocab` walks the term's whole
//! posting list, about 9 ms for a term in a quarter of a million documents,
//! and a query's common words cost most of a hybrid search
//! (docs/BENCHMARKS.md, "Search"). Common words recur from query to
//! query, so an index kept open (the server and the MCP server keep theirs)
//! remembers each frequency it walked for, and
//! trusts it only while `PRAGMA data_version` of the terms file says no
//! other connection committed to it since: a frequency is always exact.

use std::collections::HashMap;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension};

use super::engine::SqlContext;
use super::schema::TERMS_SCHEMA;
use super::Result;

/// Frequencies below this are not kept (their walk is short).
const KEEP_FROM: i64 = 1_000;

/// At most this many terms are kept (then the memory starts over).
const MAX_KEPT: usize = 10_000;

/// The remembered frequencies and the terms file's version they hold for.
#[derive(Default)]
pub(super) struct DocFreqs {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    version: Option<i64>,
    by_term: HashMap<String, i64>,
}

impl DocFreqs {
    /// How many documents hold `term`, through `search` (the index file
    /// with the terms file attached).
    pub(super) fn get(
        &self,
        search: &Connection,
        path: &std::path::Path,
        term: &str,
    ) -> Result<i64> {
        let before = data_version(search).at(path)?;
        {
            let mut kept = self.lock();
            if kept.version != Some(before) {
                kept.by_term.clear();
                kept.version = Some(before);
            } else if let Some(&df) = kept.by_term.get(term) {
                return Ok(df);
            }
        }
        let df = walk(search, term).at(path)?;
        // Kept only if nothing was committed while the walk read.
        if df >= KEEP_FROM && data_version(search).at(path)? == before {
            let mut kept = self.lock();
            if kept.version == Some(before) {
                if kept.by_term.len() >= MAX_KEPT {
                    kept.by_term.clear();
                }
                kept.by_term.insert(term.to_string(), df);
            }
        }
        Ok(df)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A panic elsewhere cannot leave a wrong count behind: entries are
        // inserted whole.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The terms file's `data_version` as `search` sees it: it changes when
/// another connection commits to the file.
fn data_version(search: &Connection) -> rusqlite::Result<i64> {
    search
        .prepare_cached(&format!("PRAGMA {TERMS_SCHEMA}.data_version"))?
        .query_row([], |r| r.get(0))
}

/// FTS5's count: the term's posting list walked.
fn walk(search: &Connection, term: &str) -> rusqlite::Result<i64> {
    Ok(search
        .prepare_cached("SELECT doc FROM terms_vocab WHERE term = ?1")?
        .query_row([term], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::super::engine::Db;
    use super::*;

    /// Add `n` documents holding `term` through the terms file's own
    /// connection (as an indexer of this or another process does).
    fn add(db: &Db, from: i64, n: i64, term: &str) {
        let mut terms = db.terms();
        let tx = terms.transaction().unwrap();
        for rowid in from..from + n {
            tx.execute(
                "INSERT INTO terms(rowid, body) VALUES (?1, ?2)",
                rusqlite::params![rowid, format!("{term} other")],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }

    /// A frequency is kept, and never served after the terms file changed:
    /// without the version check the second answer would be the first.
    #[test]
    fn a_kept_frequency_is_dropped_when_the_terms_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut db, _) = Db::open(dir.path()).unwrap();
        let freq = |db: &Db, term: &str| db.doc_freqs.get(&db.search, db.path(), term).unwrap();
        add(&db, 1, KEEP_FROM, "gecko");
        add(&db, KEEP_FROM + 1, 3, "iguana");
        assert_eq!(freq(&db, "gecko"), KEEP_FROM);
        assert_eq!(freq(&db, "iguana"), 3);
        {
            let kept = db.doc_freqs.lock();
            assert_eq!(kept.by_term.get("gecko"), Some(&KEEP_FROM), "common: kept");
            assert_eq!(kept.by_term.get("iguana"), None, "rare: walked each time");
        }
        assert_eq!(freq(&db, "gecko"), KEEP_FROM, "served from memory");
        add(&db, 10_000, 5, "gecko");
        assert_eq!(freq(&db, "gecko"), KEEP_FROM + 5);
        assert_eq!(freq(&db, "absent"), 0);
        // A rebuild opens new connections, whose versions start over: even
        // at the same version number, nothing kept before is served.
        let kept_at = db.doc_freqs.lock().version.unwrap();
        db.rebuild_beside(|_| Ok(())).unwrap();
        add(&db, 1, KEEP_FROM + 1, "gecko");
        let mut next = 100_000;
        while data_version(&db.search).unwrap() < kept_at {
            add(&db, next, 1, "iguana");
            next += 1;
        }
        assert_eq!(data_version(&db.search).unwrap(), kept_at);
        assert_eq!(freq(&db, "gecko"), KEEP_FROM + 1);
    }
}
