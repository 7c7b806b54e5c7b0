//! The tables of the cross-session search index on PostgreSQL
//! (`memoir_search_*`, migration 5): the store side of
//! [`crate::search`]'s PostgreSQL engine. This file owns their upkeep (per
//! session cursors, one transaction per indexed session guarded by a
//! compare-and-set on the cursor, removal, clearing, statistics, stored
//! vectors) and two executors for the engine's queries; what the queries
//! say (filters, ranking) lives in `search/pg.rs`.
//!
//! Documents' terms are memoir's own tokenizer output (stems, stop words
//! dropped), stored as `to_tsvector('simple', terms)` so PostgreSQL adds no
//! stemming of its own: the same terms as the SQLite engine.

use std::collections::{HashMap, HashSet};

use super::*;

/// One live session's chain tail in `memoir_sessions` (the cheap "did it
/// change?" check: an unchanged tail means an unchanged log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionTail {
    /// Session id.
    pub id: String,
    /// Its last `seq`.
    pub seq: i64,
    /// Its chain's last hash.
    pub hash: Vec<u8>,
}

/// An indexed session's row: its key, cursor and the tail it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SearchCursor {
    /// Session id.
    pub id: String,
    /// Row key (documents and calls refer to it).
    pub sid: i64,
    /// The `seq` of the last indexed record.
    pub last_seq: i64,
    /// That record's hash ([`crate::search::cursor::record_hash`]).
    pub last_hash: Vec<u8>,
    /// The store's tail when the session was read (`None`: read on).
    pub tail: Option<(i64, Vec<u8>)>,
}

/// One document to insert.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchDocRow {
    /// The `seq` of the record that wrote the message.
    pub seq: i64,
    /// The message's role.
    pub role: &'static str,
    /// When it was written, milliseconds since the epoch.
    pub ts_ms: i64,
    /// Tools it calls or answers, `" a b "` (empty when none).
    pub tools: String,
    /// BLAKE3 of its text.
    pub chash: Vec<u8>,
    /// Its text.
    pub text: String,
    /// Its terms, space separated.
    pub terms: String,
}

/// Everything one indexing step writes for one session, in one transaction.
#[derive(Debug, Clone)]
pub(crate) struct SearchSessionWrite {
    /// Session id.
    pub id: String,
    /// The cursor this step started from (`None`: the session is new to the
    /// index). The write only happens if the stored cursor is still this one.
    pub expected: Option<SearchCursor>,
    /// Drop the session's documents first (re-index).
    pub reset: bool,
    /// Listing fields.
    pub title: Option<String>,
    /// The agent that wrote the session.
    pub agent: String,
    /// Its project (workspace).
    pub project: String,
    /// Its creation time, milliseconds since the epoch.
    pub created_ms: i64,
    /// New `(call id, tool name)` pairs.
    pub calls: Vec<(String, String)>,
    /// New documents.
    pub docs: Vec<SearchDocRow>,
    /// Terms in the new documents.
    pub terms: i64,
    /// The new cursor: last indexed `seq` and its record hash.
    pub cursor: (i64, Vec<u8>),
    /// The store's tail the session was read at.
    pub tail: Option<(i64, Vec<u8>)>,
}

/// Row counts and size of the index tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SearchTableStats {
    /// Indexed sessions.
    pub sessions: i64,
    /// Indexed documents.
    pub docs: i64,
    /// Stored vectors.
    pub vectors: i64,
    /// Bytes of the tables and their indexes.
    pub bytes: i64,
}

/// A query vector as pgvector's text form (`[..]`).
pub(crate) fn vector_text(v: &[f32]) -> String {
    vectors::vector_literal(v, VectorBackend::PgVector)
}

/// Documents inserted per statement.
const INSERT_ROWS: usize = 500;

/// PostgreSQL refuses NUL in `text`: replace it (the index is derived; the
/// transcript keeps the original).
fn pg_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', "\u{fffd}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

fn cursor_row(r: &postgres::Row) -> SearchCursor {
    let tail_seq: Option<i64> = r.get(4);
    let tail_hash: Option<Vec<u8>> = r.get(5);
    SearchCursor {
        id: r.get(0),
        sid: r.get(1),
        last_seq: r.get(2),
        last_hash: r.get(3),
        tail: tail_seq.zip(tail_hash),
    }
}

const CURSOR_SQL: &str =
    "SELECT id, sid, last_seq, last_hash, tail_seq, tail_hash FROM memoir_search_sessions";

impl PgStore {
    /// Every live session's tail.
    pub(crate) fn search_tails(&self) -> Result<Vec<SessionTail>> {
        self.run("postgres search", true, |c| {
            let s = c.stmt(
                "SELECT id, last_seq, last_hash FROM memoir_sessions WHERE deleted_at IS NULL",
            )?;
            Ok(c.client
                .query(&s, &[])?
                .iter()
                .map(|r| SessionTail {
                    id: r.get(0),
                    seq: r.get(1),
                    hash: r.get(2),
                })
                .collect())
        })
    }

    /// One live session's tail (`None`: missing or trashed).
    pub(crate) fn search_tail(&self, id: &str) -> Result<Option<SessionTail>> {
        self.run("postgres search", true, |c| {
            let s = c.stmt(
                "SELECT id, last_seq, last_hash FROM memoir_sessions \
                 WHERE id = $1 AND deleted_at IS NULL",
            )?;
            Ok(c.client.query_opt(&s, &[&id])?.map(|r| SessionTail {
                id: r.get(0),
                seq: r.get(1),
                hash: r.get(2),
            }))
        })
    }

    /// Every indexed session's cursor.
    pub(crate) fn search_cursors(&self) -> Result<Vec<SearchCursor>> {
        self.run("postgres search", true, |c| {
            let s = c.stmt(CURSOR_SQL)?;
            Ok(c.client.query(&s, &[])?.iter().map(cursor_row).collect())
        })
    }

    /// One indexed session's cursor.
    pub(crate) fn search_cursor(&self, id: &str) -> Result<Option<SearchCursor>> {
        self.run("postgres search", true, |c| {
            let s = c.stmt(
                "SELECT id, sid, last_seq, last_hash, tail_seq, tail_hash \
                 FROM memoir_search_sessions WHERE id = $1",
            )?;
            Ok(c.client.query_opt(&s, &[&id])?.as_ref().map(cursor_row))
        })
    }

    /// Drop an indexed session and everything it holds (documents, calls).
    pub(crate) fn search_forget(&self, sid: i64) -> Result<()> {
        self.run("postgres search", true, |c| {
            let s = c.stmt("DELETE FROM memoir_search_sessions WHERE sid = $1")?;
            c.client.execute(&s, &[&sid]).map(|_| ())
        })
    }

    /// The tool calls indexed for session row `sid`: call id → tool name.
    pub(crate) fn search_calls(&self, sid: i64) -> Result<HashMap<String, String>> {
        self.run("postgres search", true, |c| {
            let s = c.stmt("SELECT call_id, name FROM memoir_search_calls WHERE sid = $1")?;
            Ok(c.client
                .query(&s, &[&sid])?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect())
        })
    }

    /// Which of `hashes` session row `sid` already has a document for.
    pub(crate) fn search_known_hashes(
        &self,
        sid: i64,
        hashes: &[Vec<u8>],
    ) -> Result<HashSet<Vec<u8>>> {
        if hashes.is_empty() {
            return Ok(HashSet::new());
        }
        self.run("postgres search", true, |c| {
            let s = c.stmt(
                "SELECT DISTINCT chash FROM memoir_search_docs WHERE sid = $1 AND chash = ANY($2)",
            )?;
            Ok(c.client
                .query(&s, &[&sid, &hashes])?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
    }

    /// Write one session's step in one transaction. Returns `false` without
    /// writing when the stored cursor is no longer `w.expected` (another
    /// process indexed the session meanwhile: nothing is indexed twice).
    pub(crate) fn search_write(&self, w: &SearchSessionWrite) -> Result<bool> {
        self.run("postgres search write", true, |c| {
            let mut tx = c.client.transaction()?;
            let sid: i64 = match &w.expected {
                Some(e) => {
                    let now = tx.query_opt(
                        "SELECT sid, last_seq, last_hash FROM memoir_search_sessions \
                         WHERE id = $1 FOR UPDATE",
                        &[&w.id],
                    )?;
                    let still = now.is_some_and(|r| {
                        r.get::<_, i64>(0) == e.sid
                            && r.get::<_, i64>(1) == e.last_seq
                            && r.get::<_, Vec<u8>>(2) == e.last_hash
                    });
                    if !still {
                        return Ok(false);
                    }
                    if w.reset {
                        tx.execute("DELETE FROM memoir_search_docs WHERE sid = $1", &[&e.sid])?;
                        tx.execute("DELETE FROM memoir_search_calls WHERE sid = $1", &[&e.sid])?;
                        tx.execute(
                            "UPDATE memoir_search_sessions SET docs = 0, tokens = 0 WHERE sid = $1",
                            &[&e.sid],
                        )?;
                    }
                    e.sid
                }
                None => {
                    let row = tx.query_opt(
                        "INSERT INTO memoir_search_sessions \
                         (id, agent, project, created_ms, last_seq, last_hash) \
                         VALUES ($1, '', '', 0, -1, '') ON CONFLICT (id) DO NOTHING RETURNING sid",
                        &[&w.id],
                    )?;
                    match row {
                        Some(r) => r.get(0),
                        None => return Ok(false),
                    }
                }
            };
            let title = w.title.as_deref().map(pg_text);
            tx.execute(
                "UPDATE memoir_search_sessions SET title = $2, agent = $3, project = $4, \
                 created_ms = $5, last_seq = $6, last_hash = $7, tail_seq = $8, tail_hash = $9, \
                 docs = docs + $10, tokens = tokens + $11 WHERE sid = $1",
                &[
                    &sid,
                    &title.as_deref(),
                    &pg_text(&w.agent).as_ref(),
                    &pg_text(&w.project).as_ref(),
                    &w.created_ms,
                    &w.cursor.0,
                    &w.cursor.1,
                    &w.tail.as_ref().map(|t| t.0),
                    &w.tail.as_ref().map(|t| t.1.clone()),
                    &(w.docs.len() as i64),
                    &w.terms,
                ],
            )?;
            if !w.calls.is_empty() {
                let ids: Vec<String> = w.calls.iter().map(|(i, _)| pg_text(i).into()).collect();
                let names: Vec<String> = w.calls.iter().map(|(_, n)| pg_text(n).into()).collect();
                tx.execute(
                    "INSERT INTO memoir_search_calls (sid, call_id, name) \
                     SELECT $1, t.i, t.n FROM unnest($2::text[], $3::text[]) AS t (i, n) \
                     ON CONFLICT (sid, call_id) DO UPDATE SET name = EXCLUDED.name",
                    &[&sid, &ids, &names],
                )?;
            }
            for chunk in w.docs.chunks(INSERT_ROWS) {
                let seqs: Vec<i64> = chunk.iter().map(|d| d.seq).collect();
                let roles: Vec<&str> = chunk.iter().map(|d| d.role).collect();
                let times: Vec<i64> = chunk.iter().map(|d| d.ts_ms).collect();
                let tools: Vec<String> = chunk.iter().map(|d| pg_text(&d.tools).into()).collect();
                let hashes: Vec<&[u8]> = chunk.iter().map(|d| d.chash.as_slice()).collect();
                let texts: Vec<String> = chunk.iter().map(|d| pg_text(&d.text).into()).collect();
                let terms: Vec<String> = chunk.iter().map(|d| pg_text(&d.terms).into()).collect();
                tx.execute(
                    "INSERT INTO memoir_search_docs \
                     (sid, seq, role, ts_ms, tools, chash, text, terms) \
                     SELECT $1, t.seq, t.role, t.ts, t.tools, t.chash, t.text, \
                            to_tsvector('simple', t.terms) \
                     FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], \
                                 $6::bytea[], $7::text[], $8::text[]) \
                          AS t (seq, role, ts, tools, chash, text, terms)",
                    &[
                        &sid, &seqs, &roles, &times, &tools, &hashes, &texts, &terms,
                    ],
                )?;
            }
            tx.commit()?;
            Ok(true)
        })
    }

    /// Forget every indexed session and stored vector.
    pub(crate) fn search_clear(&self) -> Result<()> {
        self.run("postgres search", true, |c| {
            c.client.batch_execute(
                "TRUNCATE memoir_search_docs, memoir_search_calls, memoir_search_sessions, \
                 memoir_search_vectors",
            )
        })
    }

    /// A value of `memoir_search_meta`.
    pub(crate) fn search_meta(&self, key: &str) -> Result<Option<String>> {
        self.run("postgres search", true, |c| {
            let s = c.stmt("SELECT value FROM memoir_search_meta WHERE key = $1")?;
            Ok(c.client.query_opt(&s, &[&key])?.map(|r| r.get(0)))
        })
    }

    /// Set a value of `memoir_search_meta`.
    pub(crate) fn set_search_meta(&self, key: &str, value: &str) -> Result<()> {
        self.run("postgres search", true, |c| {
            let s = c.stmt(
                "INSERT INTO memoir_search_meta (key, value) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            )?;
            c.client.execute(&s, &[&key, &value]).map(|_| ())
        })
    }

    /// Row counts and on-disk size of the index tables.
    pub(crate) fn search_stats(&self) -> Result<SearchTableStats> {
        self.run("postgres search", true, |c| {
            let r = c.client.query_one(
                "SELECT (SELECT count(*) FROM memoir_search_sessions), \
                        (SELECT count(*) FROM memoir_search_docs), \
                        (SELECT count(*) FROM memoir_search_vectors), \
                        (SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0)::bigint \
                         FROM unnest(ARRAY['memoir_search_meta', 'memoir_search_sessions', \
                             'memoir_search_docs', 'memoir_search_calls', \
                             'memoir_search_vectors']) AS t)",
                &[],
            )?;
            Ok(SearchTableStats {
                sessions: r.get(0),
                docs: r.get(1),
                vectors: r.get(2),
                bytes: r.get(3),
            })
        })
    }

    /// Store vectors for `(content hash, vector)` pairs of `model` (one
    /// transaction; existing ones are replaced).
    pub(crate) fn search_put_vectors(&self, model: &str, items: &[(Vec<u8>, Vec<f32>)]) -> Result<()> {
        let Some(dims) = items.first().map(|(_, v)| v.len()) else {
            return Ok(());
        };
        if dims == 0 || items.iter().any(|(_, v)| v.len() != dims || v.iter().any(|x| !x.is_finite())) {
            return Err(Error::Invalid(
                "search vectors must share one non-zero width and be finite".into(),
            ));
        }
        let hashes: Vec<&[u8]> = items.iter().map(|(h, _)| h.as_slice()).collect();
        let texts: Vec<String> = items
            .iter()
            .map(|(_, v)| vectors::vector_literal(v, self.vectors))
            .collect();
        let dims = dims as i32;
        let sql: &'static str = match self.vectors {
            VectorBackend::PgVector => {
                "INSERT INTO memoir_search_vectors (model, chash, dims, embedding) \
                 SELECT $1, t.h, $2, t.e::vector FROM unnest($3::bytea[], $4::text[]) AS t (h, e) \
                 ON CONFLICT (model, chash) DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding"
            }
            VectorBackend::Plain => {
                "INSERT INTO memoir_search_vectors (model, chash, dims, embedding) \
                 SELECT $1, t.h, $2, t.e::real[] FROM unnest($3::bytea[], $4::text[]) AS t (h, e) \
                 ON CONFLICT (model, chash) DO UPDATE SET dims = EXCLUDED.dims, embedding = EXCLUDED.embedding"
            }
        };
        self.run("postgres search vectors", true, |c| {
            let s = c.stmt(sql)?;
            c.client
                .execute(&s, &[&model, &dims, &hashes, &texts])
                .map(|_| ())
        })
    }

    /// Run one of the search engine's read queries.
    pub(crate) fn search_query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>> {
        self.run("postgres search query", true, |c| c.client.query(sql, params))
    }

    /// Run a read query and hand its rows to `each` `batch` at a time
    /// (memory bounded by one batch, not by the result). `each` returning
    /// an error stops the scan with that error.
    pub(crate) fn search_scan<E>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        batch: i32,
        each: &mut dyn FnMut(&[postgres::Row]) -> std::result::Result<(), E>,
    ) -> Result<std::result::Result<(), E>> {
        self.run("postgres search scan", false, |c| {
            let mut tx = c.client.transaction()?;
            let portal = tx.bind(sql, params)?;
            loop {
                let rows = tx.query_portal(&portal, batch.max(1))?;
                if rows.is_empty() {
                    break;
                }
                if let Err(e) = each(&rows) {
                    return Ok(Err(e));
                }
            }
            tx.commit()?;
            Ok(Ok(()))
        })
    }

    /// Whether the search index's vectors are pgvector's `vector`.
    pub(crate) fn search_pgvector(&self) -> bool {
        self.vectors == VectorBackend::PgVector
    }
}
