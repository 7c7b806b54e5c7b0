//! The PostgreSQL engine of [`super::SearchIndex`] (features `search` +
//! `postgres`): the same documents, cursors and query pipeline as the SQLite
//! engine, kept in the store's own database (`memoir_search_*`, migration 5
//! of [`crate::store::postgres`]).
//!
//! - Indexing reuses the SQLite engine's reader ([`indexer::prepare`]: the
//!   session's own records, cursor plan, text, memoir's terms); what is
//!   written per session goes in one transaction that only commits if the
//!   cursor it started from is still stored (two processes never index a
//!   record twice). The "unchanged?" check is the store's chain tail
//!   (`memoir_sessions.last_seq, last_hash`, one query for the whole store)
//!   instead of a file's size and mtime.
//! - Terms are memoir's own (stems, stop words dropped), stored as a
//!   `tsvector` of exactly those lexemes with their positions, GIN-indexed;
//!   a query's words become the `tsquery` `'a' | 'b'`, its `"quoted"` parts
//!   `'a' <-> 'b'` phrases. Ranking is the SQLite engine's BM25 (the shared
//!   rare-term path and hybrid pool of `query.rs`, document frequencies
//!   kept exact in `memoir_search_terms`), with an SQL BM25 over every match
//!   as the exact fallback (SQLite's is FTS5's `bm25()`).
//! - Vectors from [`super::SearchIndex::embed_missing`] go to
//!   `memoir_search_vectors` (pgvector's `vector` when the server has it,
//!   `real[]` otherwise); on pgvector, `embed_missing` builds an HNSW index
//!   per width and semantic mode takes the nearest stored vectors from it
//!   (falling back to an exact `<=>` ranking in SQL when selective filters
//!   leave too few); messages without a stored vector, and every message on
//!   `real[]`, are scored in the client.
//!
//! Fusion, ties and snippets are [`query::run`]'s, shared with SQLite.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use postgres::types::ToSql;

use super::cursor::{record_hash, Cursor};
use super::engine::embed_text;
use super::indexer::{self, agent_of, ms, Known, Prepared, Read};
use super::query::{self, dot, idf, keep_best, rank, Candidate, Parsed, Postings, Source, B, K1};
use super::schema::TOKENIZER;
use super::terms::Terms;
use super::{IndexStats, Result, SearchError, SearchFilter, UpdateReport};
use crate::embed::EmbeddingProvider;
use crate::store::postgres::search::{
    lexeme, vector_text, SearchCursor, SearchDocRow, SearchSessionWrite, SessionTail,
};
use crate::store::postgres::PgStore;
use crate::store::LogStore;
use crate::view::lexical::Tokenizer;

/// The key of the tokenizer stamp in `memoir_search_meta`.
const STAMP_KEY: &str = "tokenizer";

/// Semantic mode on pgvector with an HNSW index reads at least this many
/// nearest stored vectors (ten per hit asked for, at most ten times this).
const ANN_POOL: usize = 100;

/// Rows fetched per round trip by the semantic scan.
const SCAN_BATCH: i32 = 1000;

/// The index of one PostgreSQL store.
pub(super) struct PgIndex {
    store: Arc<dyn LogStore>,
    path: PathBuf,
}

/// A parameter list for dynamic SQL.
type Params = Vec<Box<dyn ToSql + Sync>>;

fn refs(params: &Params) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|b| b.as_ref()).collect()
}

fn not_postgres() -> SearchError {
    SearchError::Invalid("this store is not a PostgreSQL store".into())
}

impl PgIndex {
    /// The index of `store` (whose [`LogStore::postgres`] is `Some`); an
    /// index written with another tokenizer is cleared (the flag says so,
    /// as does a fresh one).
    pub(super) fn open(store: Arc<dyn LogStore>) -> Result<(PgIndex, bool)> {
        let pg = store.postgres().ok_or_else(not_postgres)?;
        let path = PathBuf::from(format!("{}/memoir_search", pg.locator()));
        let rebuilt = match pg.search_meta(STAMP_KEY)? {
            Some(t) if t == TOKENIZER => false,
            _ => {
                pg.search_clear()?;
                pg.set_search_meta(STAMP_KEY, TOKENIZER)?;
                true
            }
        };
        Ok((PgIndex { store, path }, rebuilt))
    }

    fn pg(&self) -> Result<&PgStore> {
        self.store.postgres().ok_or_else(not_postgres)
    }

    /// Where the index lives (the store's locator, no credentials).
    pub(super) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Forget everything.
    pub(super) fn clear(&self) -> Result<()> {
        Ok(self.pg()?.search_clear()?)
    }

    /// Catch up with the whole store.
    pub(super) fn update_all(&self, tk: &Tokenizer) -> Result<UpdateReport> {
        let pg = self.pg()?;
        let changes = pg.search_changes()?;
        let mut report = UpdateReport {
            sessions: changes.live,
            unchanged: changes.live.saturating_sub(changes.changed.len()),
            ..UpdateReport::default()
        };
        for sid in changes.gone {
            pg.search_forget(sid)?;
            report.removed += 1;
        }
        let todo = changes.changed;
        // Read (and tokenize) the next session while this one is written.
        let store = self.store.as_ref();
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::sync_channel(2);
            let reader = scope.spawn(move || {
                let mut terms = Terms::new(tk);
                for (tail, cursor) in todo {
                    let p = read_session(store, &mut terms, &tail.id, cursor.as_ref());
                    if tx.send((p, tail, cursor)).is_err() {
                        break;
                    }
                }
            });
            let mut written = Ok(());
            for (p, tail, cursor) in rx.iter() {
                written = write_session(pg, store, p, cursor, Some(tail), &mut report);
                if written.is_err() {
                    break;
                }
            }
            drop(rx);
            if let Err(panic) = reader.join() {
                std::panic::resume_unwind(panic);
            }
            written
        })?;
        Ok(report)
    }

    /// Catch up with one session; drop it when the store lost it.
    pub(super) fn update_one(&self, tk: &Tokenizer, id: &str) -> Result<UpdateReport> {
        crate::id::validate(id)?;
        let pg = self.pg()?;
        let mut report = UpdateReport::default();
        let cursor = pg.search_cursor(id)?;
        match pg.search_tail(id)? {
            Some(tail) => {
                report.sessions = 1;
                if cursor
                    .as_ref()
                    .is_some_and(|c| c.tail.as_ref() == Some(&(tail.seq, tail.hash.clone())))
                {
                    report.unchanged = 1;
                    return Ok(report);
                }
                let p = read_session(
                    self.store.as_ref(),
                    &mut Terms::new(tk),
                    id,
                    cursor.as_ref(),
                );
                write_session(pg, self.store.as_ref(), p, cursor, Some(tail), &mut report)?;
            }
            None => {
                if let Some(c) = cursor {
                    pg.search_forget(c.sid)?;
                    report.removed = 1;
                }
            }
        }
        Ok(report)
    }

    /// Store the embedder's vectors for content hashes that have none.
    pub(super) fn embed_missing(
        &self,
        embedder: &dyn EmbeddingProvider,
        batch: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64> {
        let pg = self.pg()?;
        let model = embedder.model_id();
        let batch = batch.max(1) as i64;
        const MISSING: &str = "FROM memoir_search_docs d WHERE NOT EXISTS \
             (SELECT 1 FROM memoir_search_vectors v WHERE v.model = $1 AND v.chash = d.chash)";
        let total: i64 = pg
            .search_query(
                &format!("SELECT count(DISTINCT d.chash) {MISSING}"),
                &[&model],
            )?
            .first()
            .map_or(0, |r| r.get(0));
        let total = total.max(0) as u64;
        let mut done = 0u64;
        loop {
            let rows = pg.search_query(
                &format!("SELECT d.chash, min(d.text) {MISSING} GROUP BY d.chash LIMIT $2"),
                &[&model, &batch],
            )?;
            if rows.is_empty() {
                break;
            }
            let texts: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
            let cut: Vec<&str> = texts.iter().map(|t| embed_text(t)).collect();
            let vectors = embedder.embed_batch(&cut)?;
            let items: Vec<(Vec<u8>, Vec<f32>)> = rows
                .iter()
                .map(|r| r.get::<_, Vec<u8>>(0))
                .zip(vectors)
                .collect();
            pg.search_put_vectors(&model, &items)?;
            done += items.len() as u64;
            progress(done, total.max(done));
        }
        if pg.search_pgvector() && done > 0 {
            // Semantic mode's approximate path (built once per width).
            pg.search_ensure_hnsw(embedder.dimensions() as i32)?;
        }
        Ok(done)
    }

    /// Size of the index.
    pub(super) fn stats(&self) -> Result<IndexStats> {
        let s = self.pg()?.search_stats()?;
        Ok(IndexStats {
            sessions: s.sessions.max(0) as u64,
            messages: s.docs.max(0) as u64,
            vectors: s.vectors.max(0) as u64,
            bytes: s.bytes.max(0) as u64,
        })
    }

    /// The query side over this index.
    pub(super) fn source(&self) -> Result<PgSource<'_>> {
        Ok(PgSource { pg: self.pg()? })
    }
}

/// The SQLite engine's reader, on a PostgreSQL cursor.
fn read_session(
    store: &dyn LogStore,
    terms: &mut Terms<'_>,
    id: &str,
    cursor: Option<&SearchCursor>,
) -> Prepared {
    let known = cursor.map(|c| Known {
        sid: c.sid,
        cursor: Cursor {
            last_seq: c.last_seq.max(0) as u64,
            // A malformed hash can only force a re-index.
            last_hash: c.last_hash.clone().try_into().unwrap_or([0; 32]),
            fingerprint: None,
        },
    });
    indexer::prepare(store, terms, id.to_string(), known, None)
}

/// Write one read session: its documents and cursor, in one transaction.
fn write_session(
    pg: &PgStore,
    store: &dyn LogStore,
    prepared: Prepared,
    cursor: Option<SearchCursor>,
    tail: Option<SessionTail>,
    report: &mut UpdateReport,
) -> Result<()> {
    let log = match prepared.read {
        Read::Gone => {
            if let Some(c) = cursor {
                pg.search_forget(c.sid)?;
                report.removed += 1;
            }
            return Ok(());
        }
        Read::Unchanged => {
            report.unchanged += 1;
            return Ok(());
        }
        Read::Unreadable { .. } => {
            report.unreadable += 1;
            return Ok(());
        }
        Read::Log(log) => *log,
    };
    let extending = cursor.is_some() && log.extend_from.is_some();
    let (mut calls, mut seen) = match (&cursor, extending) {
        (Some(c), true) => {
            let rewritten: Vec<Vec<u8>> = log
                .docs
                .iter()
                .filter(|d| d.rewritten)
                .map(|d| d.hash.to_vec())
                .collect();
            (
                pg.search_calls(c.sid)?,
                pg.search_known_hashes(c.sid, &rewritten)?,
            )
        }
        _ => (HashMap::new(), HashSet::new()),
    };
    let mut inherited = None;
    let mut new_calls = Vec::new();
    let mut docs = Vec::with_capacity(log.docs.len());
    let mut terms = 0i64;
    for d in &log.docs {
        let hash = d.hash.to_vec();
        if d.rewritten
            && (seen.contains(&hash)
                || indexer::inherited_contains(&mut inherited, store, &log.meta, &d.hash))
        {
            continue;
        }
        for (call, name) in &d.text.calls {
            calls.insert(call.clone(), name.clone());
            new_calls.push((call.clone(), name.clone()));
        }
        let mut tools: Vec<String> = d.text.calls.iter().map(|(_, n)| n.clone()).collect();
        tools.extend(d.text.answers.iter().filter_map(|a| calls.get(a).cloned()));
        tools.sort();
        tools.dedup();
        let tools = if tools.is_empty() {
            String::new()
        } else {
            format!(" {} ", tools.join(" "))
        };
        docs.push(SearchDocRow {
            seq: log.records.get(d.record).map_or(0, |r| r.seq) as i64,
            role: d.role,
            ts_ms: d.ts_ms,
            tools,
            chash: hash.clone(),
            len: i32::try_from(d.term_count).unwrap_or(i32::MAX),
            text: d.text.text.clone(),
            terms: d.terms.clone(),
        });
        terms += d.term_count as i64;
        seen.insert(hash);
    }
    let last = match log.records.last() {
        Some(r) => (r.seq as i64, record_hash(&r.record).to_vec()),
        None => (0, log.header_hash.to_vec()),
    };
    let added = docs.len() as u64;
    let write = SearchSessionWrite {
        id: prepared.id,
        reset: cursor.is_some() && !extending,
        expected: cursor,
        title: log.title,
        agent: agent_of(&log.meta),
        project: log.meta.workspace.to_string_lossy().into_owned(),
        created_ms: ms(log.meta.created_at),
        calls: new_calls,
        docs,
        terms,
        cursor: last,
        tail: tail.map(|t| (t.seq, t.hash)),
    };
    if !pg.search_write(&write)? {
        // Another process indexed it meanwhile.
        report.unchanged += 1;
        return Ok(());
    }
    if extending {
        report.extended += 1;
    } else {
        report.reindexed += 1;
    }
    report.messages += added;
    Ok(())
}

/// The query side of the PostgreSQL engine.
pub(super) struct PgSource<'a> {
    pg: &'a PgStore,
}

const COLUMNS: &str =
    "d.seq, d.role, d.ts_ms, d.tools, d.text, d.chash, s.id, s.title, s.agent, s.project";
const FROM: &str = "memoir_search_docs d JOIN memoir_search_sessions s ON s.sid = d.sid";

fn candidate(r: &postgres::Row, score: f32) -> Candidate {
    Candidate {
        score,
        seq: r.get::<_, i64>(0).max(0) as u64,
        role: r.get(1),
        ts_ms: r.get(2),
        tools: r.get(3),
        text: r.get(4),
        span: None,
        chash: r.get(5),
        terms: None,
        session: r.get(6),
        title: r.get(7),
        agent: r.get(8),
        project: r.get(9),
    }
}

/// The filters as SQL conditions (` AND ...`), parameters numbered from
/// `$first` and appended to `params`.
fn filter_sql(f: &SearchFilter, params: &mut Params) -> String {
    let mut sql = String::new();
    let mut add = |cond: &str, arg: Box<dyn ToSql + Sync>, params: &mut Params| {
        params.push(arg);
        sql.push_str(" AND ");
        sql.push_str(&cond.replace("$N", &format!("${}", params.len())));
    };
    if let Some(p) = &f.project {
        let p = p.trim_end_matches('/').to_string();
        add(
            "(s.project = $N OR left(s.project, length($N) + 1) = $N || '/')",
            Box::new(p),
            params,
        );
    }
    if let Some(a) = &f.agent {
        add("s.agent = $N", Box::new(a.clone()), params);
    }
    if let Some(id) = &f.session {
        add("left(s.id, length($N)) = $N", Box::new(id.clone()), params);
    }
    if let Some(t) = f.since {
        add("d.ts_ms >= $N", Box::new(t.timestamp_millis()), params);
    }
    if let Some(t) = f.until {
        add("d.ts_ms < $N", Box::new(t.timestamp_millis()), params);
    }
    if let Some(r) = f.role {
        add("d.role = $N", Box::new(r.as_str().to_string()), params);
    }
    if let Some(t) = &f.tool {
        add(
            "strpos(d.tools, ' ' || $N || ' ') > 0",
            Box::new(t.clone()),
            params,
        );
    }
    sql
}

/// The query as `tsquery` text: every phrase (`'a' <-> 'b'`) and, when
/// there are other words, at least one of them (`'c' | 'd'`). `None` when
/// the query has no terms.
fn tsquery(q: &Parsed) -> Option<String> {
    let mut parts: Vec<String> = q
        .phrases
        .iter()
        .map(|p| {
            format!(
                "({})",
                p.iter()
                    .map(|t| lexeme(t))
                    .collect::<Vec<_>>()
                    .join(" <-> ")
            )
        })
        .collect();
    if !q.any.is_empty() {
        parts.push(format!(
            "({})",
            q.any
                .iter()
                .map(|t| lexeme(t))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" & "))
}

impl PgSource<'_> {
    /// The newest `cap` documents matching the `tsquery` text `query`.
    fn matching(&self, query: String, f: &SearchFilter, cap: i64) -> Result<Vec<Candidate>> {
        let mut params: Params = vec![Box::new(query), Box::new(cap)];
        let cond = filter_sql(f, &mut params);
        let sql = format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE d.terms @@ $1::text::tsquery{cond} \
             ORDER BY d.id DESC LIMIT $2"
        );
        let rows = self.pg.search_query(&sql, &refs(&params))?;
        Ok(rows.iter().map(|r| candidate(r, 0.0)).collect())
    }

    /// The best `k` messages with a stored vector through the HNSW index
    /// (approximate): the nearest [`ANN_POOL`] vectors of the model, then
    /// the messages holding them that the filters allow. `None` when that
    /// cannot be trusted to be complete (the filters left fewer than `k` of
    /// a full pool: they are selective, so the exact path is cheap).
    fn nearest_stored(
        &self,
        model: &str,
        dims: i32,
        qv: &[f32],
        f: &SearchFilter,
        k: usize,
    ) -> Result<Option<Vec<Candidate>>> {
        let pool = (k * 10).clamp(ANN_POOL, 10 * ANN_POOL);
        let near = self
            .pg
            .search_nearest(model, dims, &vector_text(qv), pool)?;
        let score: HashMap<Vec<u8>, f32> = near.iter().cloned().collect();
        let hashes: Vec<Vec<u8>> = near.into_iter().map(|(h, _)| h).collect();
        let mut params: Params = vec![Box::new(hashes.clone())];
        let cond = filter_sql(f, &mut params);
        let sql = format!("SELECT {COLUMNS} FROM {FROM} WHERE d.chash = ANY($1){cond}");
        let mut best: Vec<Candidate> = Vec::new();
        for r in self.pg.search_query(&sql, &refs(&params))? {
            let mut c = candidate(&r, 0.0);
            c.score = score.get(&c.chash).copied().unwrap_or(0.0);
            keep_best(&mut best, c, k);
        }
        if best.len() < k && hashes.len() >= pool {
            return Ok(None);
        }
        Ok(Some(best))
    }

    /// Stored vectors of `model` for `hashes`.
    fn stored(
        &self,
        model: &str,
        dims: i32,
        hashes: &[Vec<u8>],
    ) -> Result<HashMap<Vec<u8>, Vec<f32>>> {
        if hashes.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = self.pg.search_query(
            "SELECT chash, embedding::real[] FROM memoir_search_vectors \
             WHERE model = $1 AND dims = $2 AND chash = ANY($3)",
            &[&model, &dims, &hashes],
        )?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

impl Postings for PgSource<'_> {
    fn collection(&self, scope: Option<&str>) -> Result<Option<(i64, f64)>> {
        let (n, terms) = match scope {
            None => self.pg.search_collection()?,
            Some(prefix) => {
                let rows = self.pg.search_query(
                    "SELECT coalesce(sum(docs), 0)::bigint, coalesce(sum(tokens), 0)::bigint \
                     FROM memoir_search_sessions WHERE left(id, length($1)) = $1",
                    &[&prefix],
                )?;
                rows.first().map_or((0, 0), |r| (r.get(0), r.get(1)))
            }
        };
        Ok((n > 0).then(|| (n, (terms as f64 / n as f64).max(1.0))))
    }

    fn doc_frequency(&self, term: &str, scope: Option<&str>) -> Result<i64> {
        match scope {
            None => Ok(self.pg.search_doc_frequency(term)?),
            // The kept frequencies are the whole store's: the scope's
            // documents are counted.
            Some(prefix) => {
                let sql = format!(
                    "SELECT count(*) FROM {FROM} \
                     WHERE d.terms @@ $1::text::tsquery AND left(s.id, length($2)) = $2"
                );
                let rows = self.pg.search_query(&sql, &[&lexeme(term), &prefix])?;
                Ok(rows.first().map_or(0, |r| r.get(0)))
            }
        }
    }

    fn holding(
        &self,
        any: &[String],
        also: Option<&Parsed>,
        f: &SearchFilter,
        cap: i64,
    ) -> Result<Vec<Candidate>> {
        if any.is_empty() {
            return Ok(Vec::new());
        }
        let any = format!(
            "({})",
            any.iter()
                .map(|t| lexeme(t))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let query = match also.and_then(tsquery) {
            Some(all) => format!("{any} & {all}"),
            None => any,
        };
        self.matching(query, f, cap)
    }

    fn newest_matching(&self, q: &Parsed, f: &SearchFilter, cap: i64) -> Result<Vec<Candidate>> {
        match tsquery(q) {
            Some(query) => self.matching(query, f, cap),
            None => Ok(Vec::new()),
        }
    }

    fn ranked(&self, q: &Parsed, f: &SearchFilter, limit: usize) -> Result<Vec<Candidate>> {
        let scope = query::scope_of(f);
        let (Some(query), Some((n, avgdl))) = (tsquery(q), self.collection(scope)?) else {
            return Ok(Vec::new());
        };
        let mut terms: Vec<&String> = q.terms.iter().collect();
        terms.sort();
        let (mut words, mut idfs) = (Vec::new(), Vec::new());
        for t in terms {
            let df = self.doc_frequency(t, scope)?;
            if df > 0 {
                words.push(t.clone());
                idfs.push(idf(n, df));
            }
        }
        let mut params: Params = vec![
            Box::new(query),
            Box::new(limit as i64),
            Box::new(words),
            Box::new(idfs),
            Box::new(avgdl),
            Box::new(K1),
            Box::new(B),
        ];
        let cond = filter_sql(f, &mut params);
        // BM25 as `score_bm25` computes it: term frequency from the
        // lexeme's positions, length from `len`. Only the query's lexemes
        // are unnested (marked with weight A and filtered in C: unnesting
        // every lexeme of every match was most of the time).
        let sql = format!(
            "WITH w AS (SELECT * FROM unnest($3::text[], $4::float8[]) AS w (term, idf)), \
             top AS (SELECT d.id, d.ts_ms, sum(w.idf * array_length(u.positions, 1) * ($6::float8 + 1) \
                       / (array_length(u.positions, 1) + $6::float8 \
                          * (1 - $7::float8 + $7::float8 * d.len / $5::float8)))::real AS score \
                     FROM {FROM} CROSS JOIN LATERAL \
                       unnest(ts_filter(setweight(d.terms, 'A', $3::text[]), '{{a}}')) u \
                       JOIN w ON w.term = u.lexeme \
                     WHERE d.terms @@ $1::text::tsquery{cond} \
                     GROUP BY d.id, d.ts_ms ORDER BY score DESC, d.ts_ms DESC, d.id DESC LIMIT $2) \
             SELECT {COLUMNS}, top.score FROM top JOIN {FROM} ON d.id = top.id \
             ORDER BY top.score DESC, top.ts_ms DESC, top.id DESC"
        );
        let rows = self.pg.search_query(&sql, &refs(&params))?;
        Ok(rows.iter().map(|r| candidate(r, r.get(10))).collect())
    }
}

impl Source for PgSource<'_> {
    fn newest(&self, f: &SearchFilter, limit: usize) -> Result<Vec<Candidate>> {
        let mut params: Params = vec![Box::new(limit as i64)];
        let cond = filter_sql(f, &mut params);
        let sql = format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE true{cond} \
             ORDER BY d.ts_ms DESC, d.id DESC LIMIT $1"
        );
        let rows = self.pg.search_query(&sql, &refs(&params))?;
        Ok(rows.iter().map(|r| candidate(r, 0.0)).collect())
    }

    fn semantic(
        &self,
        embedder: &dyn EmbeddingProvider,
        qv: &[f32],
        f: &SearchFilter,
        k: usize,
    ) -> Result<Vec<Candidate>> {
        let model = embedder.model_id();
        let dims = embedder.dimensions() as i32;
        let mut best: Vec<Candidate> = Vec::with_capacity(2 * k + 1);
        let pgvector = self.pg.search_pgvector();
        let ann = if pgvector && self.pg.search_has_hnsw(dims)? {
            self.nearest_stored(&model, dims, qv, f, k)?
        } else {
            None
        };
        if let Some(found) = ann {
            best = found;
        } else if pgvector {
            // Stored vectors ranked by the server, exactly.
            let q = vector_text(qv);
            let mut params: Params = vec![
                Box::new(model.clone()),
                Box::new(dims),
                Box::new(q),
                Box::new(k as i64),
            ];
            let cond = filter_sql(f, &mut params);
            let sql = format!(
                "SELECT {COLUMNS}, (1 - (v.embedding <=> $3::text::vector))::real FROM {FROM} \
                 JOIN memoir_search_vectors v ON v.model = $1 AND v.chash = d.chash AND v.dims = $2 \
                 WHERE true{cond} ORDER BY v.embedding <=> $3::text::vector, d.ts_ms DESC LIMIT $4"
            );
            for r in self.pg.search_query(&sql, &refs(&params))? {
                let score = r.get(10);
                best.push(candidate(&r, score));
            }
        }
        // The rest scored here: every message without a stored vector (on
        // pgvector), or every message with its stored vector if any (real[]).
        let mut params: Params = vec![Box::new(model), Box::new(dims)];
        let cond = filter_sql(f, &mut params);
        let only_missing = if pgvector { " AND v.chash IS NULL" } else { "" };
        let sql = format!(
            "SELECT {COLUMNS}, v.embedding::real[] FROM {FROM} \
             LEFT JOIN memoir_search_vectors v ON v.model = $1 AND v.chash = d.chash AND v.dims = $2 \
             WHERE true{only_missing}{cond}"
        );
        let scanned = self
            .pg
            .search_scan(&sql, &refs(&params), SCAN_BATCH, &mut |rows| {
                for r in rows {
                    let mut c = candidate(r, 0.0);
                    let stored: Option<Vec<f32>> = r.get(10);
                    let v = match stored {
                        Some(v) => v,
                        None => embedder.embed(embed_text(&c.text))?,
                    };
                    c.score = dot(qv, &v);
                    keep_best(&mut best, c, k);
                }
                Ok::<(), SearchError>(())
            })?;
        scanned?;
        rank(&mut best);
        best.truncate(k);
        Ok(best)
    }

    fn vectors(
        &self,
        embedder: &dyn EmbeddingProvider,
        cands: &[Candidate],
    ) -> Result<Vec<Vec<f32>>> {
        let model = embedder.model_id();
        let hashes: Vec<Vec<u8>> = cands.iter().map(|c| c.chash.clone()).collect();
        let stored = self.stored(&model, embedder.dimensions() as i32, &hashes)?;
        cands
            .iter()
            .map(|c| match stored.get(&c.chash) {
                Some(v) => Ok(v.clone()),
                None => Ok(embedder.embed(embed_text(&c.text))?),
            })
            .collect()
    }
}

/// Run `q` against the PostgreSQL index.
pub(super) fn search(
    ix: &PgIndex,
    tk: &Tokenizer,
    embedder: &dyn EmbeddingProvider,
    hybrid: &crate::view::retrieve::HybridParams,
    weights: &crate::view::rank::RankWeights,
    q: &super::SearchQuery,
) -> Result<Vec<super::SearchHit>> {
    query::run(&ix.source()?, tk, embedder, hybrid, weights, q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::lexical::TokenizerConfig;

    #[test]
    fn queries_become_tsquery_phrases_and_alternatives() {
        let tk = Tokenizer::new(TokenizerConfig::default());
        let q = |s: &str| tsquery(&query::parse(s, &tk));
        assert_eq!(q("Running the tests").as_deref(), Some("('run' | 'test')"));
        assert_eq!(
            q("\"cargo tests\" failed").as_deref(),
            Some("('cargo' <-> 'test') & ('fail')")
        );
        assert_eq!(q("the of"), None);
        assert_eq!(lexeme("o'k\\"), "'o''k\\\\'");
    }
}
