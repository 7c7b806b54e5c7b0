//! The tables of the cross-session search index on PostgreSQL
//! (`memoir_search_*`, migration 5): the store side of
//! the PostgreSQL engine of `memoir::search`. This file owns their upkeep (per
//! session cursors, one transaction per indexed session guarded by a
//! compare-and-set on the cursor, removal, clearing, statistics, stored
//! vectors) and two executors for the engine's queries; what the queries
//! say (filters, ranking) lives in `search/pg.rs`.
//!
//! Documents' terms are memoir's own tokenizer output (stems, stop words
//! dropped), stored as a `tsvector` literal built here ([`tsvector_literal`]:
//! each term with its positions, no PostgreSQL parser or dictionary in
//! between), so the lexemes are exactly the SQLite engine's terms; their
//! document frequencies (for BM25's IDF) are kept exact in
//! `memoir_search_terms`, counted up on insert and down on removal.

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

/// What [`PgStore::search_changes`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SearchChanges {
    /// Live sessions in the store.
    pub live: usize,
    /// Live sessions to read: their tail now, their cursor if indexed.
    pub changed: Vec<(SessionTail, Option<SearchCursor>)>,
    /// Row keys of indexed sessions that are no longer live.
    pub gone: Vec<i64>,
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
    /// That record's hash (`memoir::search::cursor::record_hash`).
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
    /// How many terms it has.
    pub len: i32,
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

/// The most positions PostgreSQL keeps per lexeme, and the largest position.
const MAX_POSITIONS: usize = 256;
const MAX_POSITION: usize = 16383;

/// One lexeme quoted for `tsvector`/`tsquery` input.
pub(crate) fn lexeme(term: &str) -> String {
    format!("'{}'", term.replace('\\', "\\\\").replace('\'', "''"))
}

/// `terms` (space separated) as `tsvector` input: every distinct term with
/// its positions (1-based, at most [`MAX_POSITIONS`], capped at
/// [`MAX_POSITION`] as PostgreSQL does).
pub(crate) fn tsvector_literal(terms: &str) -> String {
    let mut order: Vec<&str> = Vec::new();
    let mut positions: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in terms.split(' ').filter(|t| !t.is_empty()).enumerate() {
        let at = positions.entry(t).or_insert_with(|| {
            order.push(t);
            Vec::new()
        });
        if at.len() < MAX_POSITIONS {
            at.push((i + 1).min(MAX_POSITION));
        }
    }
    let mut out = String::with_capacity(terms.len() * 2);
    for t in order {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&lexeme(t));
        out.push(':');
        let mut last = 0;
        for (j, p) in positions[t].iter().enumerate() {
            if *p == last {
                continue; // capped positions collapse into one
            }
            if j > 0 {
                out.push(',');
            }
            out.push_str(&p.to_string());
            last = *p;
        }
    }
    out
}

/// Decrement the document frequencies by what session row `sid`'s
/// documents hold (before they are deleted).
const UNCOUNT_TERMS: &str = "UPDATE memoir_search_terms t SET docs = t.docs - x.n \
     FROM (SELECT u.lexeme, count(*) AS n FROM memoir_search_docs d, unnest(d.terms) u \
           WHERE d.sid = $1 GROUP BY u.lexeme) x WHERE t.term = x.lexeme";

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

impl PgStore {
    /// What changed since the index last looked, computed in the database
    /// (only changed rows cross the wire): how many sessions are live, the
    /// live ones whose tail is not the one their cursor was read at (with
    /// that cursor, `None` for sessions new to the index), and the indexed
    /// sessions that are no longer live (trashed or purged).
    pub(crate) fn search_changes(&self) -> Result<SearchChanges> {
        self.run("postgres search", true, |c| {
            let live = c.stmt("SELECT count(*) FROM memoir_sessions WHERE deleted_at IS NULL")?;
            let changed = c.stmt(
                "SELECT t.id, t.last_seq, t.last_hash, s.id, s.sid, s.last_seq, s.last_hash, \
                        s.tail_seq, s.tail_hash \
                 FROM memoir_sessions t LEFT JOIN memoir_search_sessions s ON s.id = t.id \
                 WHERE t.deleted_at IS NULL AND (s.sid IS NULL \
                     OR s.tail_seq IS DISTINCT FROM t.last_seq \
                     OR s.tail_hash IS DISTINCT FROM t.last_hash) \
                 ORDER BY t.id",
            )?;
            let gone = c.stmt(
                "SELECT s.sid FROM memoir_search_sessions s WHERE NOT EXISTS \
                 (SELECT 1 FROM memoir_sessions t WHERE t.id = s.id AND t.deleted_at IS NULL)",
            )?;
            let live: i64 = c.client.query_one(&live, &[])?.get(0);
            let changed = c
                .client
                .query(&changed, &[])?
                .iter()
                .map(|r| {
                    let tail = SessionTail {
                        id: r.get(0),
                        seq: r.get(1),
                        hash: r.get(2),
                    };
                    let sid: Option<i64> = r.get(4);
                    let cursor = sid.map(|sid| {
                        let tail_seq: Option<i64> = r.get(7);
                        let tail_hash: Option<Vec<u8>> = r.get(8);
                        SearchCursor {
                            id: r.get(3),
                            sid,
                            last_seq: r.get(5),
                            last_hash: r.get(6),
                            tail: tail_seq.zip(tail_hash),
                        }
                    });
                    (tail, cursor)
                })
                .collect();
            let gone = c
                .client
                .query(&gone, &[])?
                .iter()
                .map(|r| r.get(0))
                .collect();
            Ok(SearchChanges {
                live: live.max(0) as usize,
                changed,
                gone,
            })
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
            let mut tx = c.client.transaction()?;
            let gone = tx.query_opt(
                "SELECT sid FROM memoir_search_sessions WHERE sid = $1 FOR UPDATE",
                &[&sid],
            )?;
            if gone.is_some() {
                tx.execute(UNCOUNT_TERMS, &[&sid])?;
                tx.execute("DELETE FROM memoir_search_sessions WHERE sid = $1", &[&sid])?;
            }
            tx.commit()
        })
    }

    /// How many documents hold `term`.
    pub(crate) fn search_doc_frequency(&self, term: &str) -> Result<i64> {
        self.run("postgres search", true, |c| {
            let s = c.stmt("SELECT docs FROM memoir_search_terms WHERE term = $1")?;
            Ok(c.client.query_opt(&s, &[&term])?.map_or(0, |r| r.get(0)))
        })
    }

    /// `(documents, terms)` over the whole index.
    pub(crate) fn search_collection(&self) -> Result<(i64, i64)> {
        self.run("postgres search", true, |c| {
            let s = c.stmt(
                "SELECT coalesce(sum(docs), 0)::bigint, coalesce(sum(tokens), 0)::bigint \
                 FROM memoir_search_sessions",
            )?;
            let r = c.client.query_one(&s, &[])?;
            Ok((r.get(0), r.get(1)))
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
                        tx.execute(UNCOUNT_TERMS, &[&e.sid])?;
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
            let mut df: HashMap<&str, i64> = HashMap::new();
            for d in &w.docs {
                let distinct: HashSet<&str> =
                    d.terms.split(' ').filter(|t| !t.is_empty()).collect();
                for t in distinct {
                    *df.entry(t).or_insert(0) += 1;
                }
            }
            for chunk in w.docs.chunks(INSERT_ROWS) {
                let seqs: Vec<i64> = chunk.iter().map(|d| d.seq).collect();
                let roles: Vec<&str> = chunk.iter().map(|d| d.role).collect();
                let times: Vec<i64> = chunk.iter().map(|d| d.ts_ms).collect();
                let tools: Vec<String> = chunk.iter().map(|d| pg_text(&d.tools).into()).collect();
                let hashes: Vec<&[u8]> = chunk.iter().map(|d| d.chash.as_slice()).collect();
                let texts: Vec<String> = chunk.iter().map(|d| pg_text(&d.text).into()).collect();
                let lens: Vec<i32> = chunk.iter().map(|d| d.len).collect();
                let terms: Vec<String> = chunk
                    .iter()
                    .map(|d| tsvector_literal(&pg_text(&d.terms)))
                    .collect();
                tx.execute(
                    "INSERT INTO memoir_search_docs \
                     (sid, seq, role, ts_ms, tools, chash, len, text, terms) \
                     SELECT $1, t.seq, t.role, t.ts, t.tools, t.chash, t.len, t.text, \
                            t.terms::tsvector \
                     FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], \
                                 $6::bytea[], $7::integer[], $8::text[], $9::text[]) \
                          AS t (seq, role, ts, tools, chash, len, text, terms)",
                    &[
                        &sid, &seqs, &roles, &times, &tools, &hashes, &lens, &texts, &terms,
                    ],
                )?;
            }
            if !df.is_empty() {
                // In term order, so concurrent writers lock rows in one order.
                let mut counts: Vec<(&str, i64)> = df.into_iter().collect();
                counts.sort_unstable();
                let (words, ns): (Vec<String>, Vec<i64>) = counts
                    .into_iter()
                    .map(|(t, n)| (pg_text(t).into_owned(), n))
                    .unzip();
                tx.execute(
                    "INSERT INTO memoir_search_terms (term, docs) \
                     SELECT t.w, t.n FROM unnest($1::text[], $2::bigint[]) AS t (w, n) ORDER BY t.w \
                     ON CONFLICT (term) DO UPDATE SET docs = memoir_search_terms.docs + EXCLUDED.docs",
                    &[&words, &ns],
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
                 memoir_search_terms, memoir_search_vectors",
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
                             'memoir_search_docs', 'memoir_search_calls', 'memoir_search_terms', \
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
    pub(crate) fn search_put_vectors(
        &self,
        model: &str,
        items: &[(Vec<u8>, Vec<f32>)],
    ) -> Result<()> {
        let Some(dims) = items.first().map(|(_, v)| v.len()) else {
            return Ok(());
        };
        if dims == 0
            || items
                .iter()
                .any(|(_, v)| v.len() != dims || v.iter().any(|x| !x.is_finite()))
        {
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
        self.run("postgres search query", true, |c| {
            c.client.query(sql, params)
        })
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

    /// Build the HNSW index of the search vectors of width `dims` (pgvector
    /// only; a no-op when it exists).
    pub(crate) fn search_ensure_hnsw(&self, dims: i32) -> Result<()> {
        let sql = format!(
            "CREATE INDEX IF NOT EXISTS memoir_search_vectors_hnsw_{dims} ON memoir_search_vectors \
             USING hnsw ((embedding::vector({dims})) vector_cosine_ops) WHERE dims = {dims}"
        );
        self.run("postgres search index", true, |c| {
            c.client.batch_execute(&sql)
        })
    }

    /// Whether the HNSW index of width `dims` exists.
    pub(crate) fn search_has_hnsw(&self, dims: i32) -> Result<bool> {
        if self.vectors != VectorBackend::PgVector {
            return Ok(false);
        }
        let name = format!("memoir_search_vectors_hnsw_{dims}");
        self.run("postgres search", true, |c| {
            let s = c.stmt("SELECT to_regclass($1) IS NOT NULL")?;
            Ok(c.client.query_one(&s, &[&name])?.get(0))
        })
    }

    /// The `pool` stored vectors of `model` nearest to `query` (pgvector's
    /// text form, width `dims`) through the HNSW index: content hash and
    /// cosine similarity, best first.
    pub(crate) fn search_nearest(
        &self,
        model: &str,
        dims: i32,
        query: &str,
        pool: usize,
    ) -> Result<Vec<(Vec<u8>, f32)>> {
        let sql = format!(
            "SELECT chash, (1 - (embedding::vector({dims}) <=> $2::text::vector({dims})))::real \
             FROM memoir_search_vectors WHERE dims = {dims} AND model = $1 \
             ORDER BY embedding::vector({dims}) <=> $2::text::vector({dims}) LIMIT $3"
        );
        let limit = pool as i64;
        let ef = limit.clamp(40, 1000);
        self.run("postgres search vectors", true, |c| {
            let mut tx = c.client.transaction()?;
            tx.batch_execute(&format!(
                "SET LOCAL hnsw.ef_search = {ef}; SET LOCAL hnsw.iterative_scan = relaxed_order;"
            ))?;
            let rows = tx.query(&sql, &[&model, &query, &limit])?;
            tx.commit()?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    /// Whether the search index's vectors are pgvector's `vector`.
    pub(crate) fn search_pgvector(&self) -> bool {
        self.vectors == VectorBackend::PgVector
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsvector_literals_keep_every_term_with_its_positions_and_quote_safely() {
        assert_eq!(tsvector_literal("run test run"), "'run':1,3 'test':2");
        assert_eq!(tsvector_literal(""), "");
        assert_eq!(tsvector_literal("o'k a\\b"), "'o''k':1 'a\\\\b':2");
        let many = vec!["w"; 300].join(" ");
        let lit = tsvector_literal(&many);
        assert_eq!(lit.matches(',').count(), MAX_POSITIONS - 1, "{lit}");
    }
}
