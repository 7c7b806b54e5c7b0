//! Running a search: the one pipeline of both engines ([`run`] over a
//! [`Source`]: validation, the query's parse, fusion, ties, snippets) and
//! the SQLite engine's source (the FTS5 query, the filters, the semantic
//! scan).
//!
//! Query text: words are OR'ed and gather candidates by BM25 (FTS5's
//! `bm25()`, k1 1.2, b 0.75, as the view's index); each `"double quoted"`
//! part must match as a phrase (of stems, so `"ran tests"` matches "running
//! the test"), and when a query has both, at least one of its other words
//! must match too. Lexical and hybrid modes read [`HybridParams::depth`]
//! candidates and rank them on the whole query's evidence
//! ([`crate::view::rank`]: coverage, proximity, BM25, and in hybrid mode
//! cosine similarity to the query embedding, from stored vectors for the
//! embedder's model when [`super::SearchIndex::embed_missing`] made them,
//! computed otherwise). Semantic mode scans every message the filters
//! allow, keeping only the best `k` with a positive similarity (memory
//! bounded by `k`, time by the store). Ties are broken by recency.

use std::collections::HashSet;

use chrono::{TimeZone, Utc};
use rusqlite::types::ToSql;
use rusqlite::OptionalExtension;

use super::doc_text;
use super::engine::{decode_vector, embed_text, Db, SqlContext};
use super::snippet::{self, DEFAULT_WIDTH};
use super::terms::Terms;
use super::{Result, SearchError, SearchFilter, SearchHit, SearchMode, SearchQuery};
use crate::embed::EmbeddingProvider;
use crate::message::Role;
use crate::store::{LogStore, Span};
use crate::view::lexical::Tokenizer;
use crate::view::rank::{self, RankWeights};
use crate::view::retrieve::HybridParams;

/// Queries longer than this are refused (they would only be slow).
pub const MAX_QUERY_BYTES: usize = 4096;
/// At most this many hits per search.
pub const MAX_K: usize = 1000;

/// A query split into its phrases and words (the engines' query syntax is
/// built from these), plus the terms to highlight.
pub(super) struct Parsed {
    /// The FTS5 MATCH expression, `None` when the query has no terms.
    fts: Option<String>,
    /// Every term, for snippets.
    pub(super) terms: HashSet<String>,
    /// The distinct words when the query has no phrase (the OR-only case the
    /// rare-term path can answer).
    words: Option<Vec<String>>,
    /// The `"quoted"` parts' terms: each must match as a phrase (the
    /// PostgreSQL engine's `tsquery` is built from these two).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(super) phrases: Vec<Vec<String>>,
    /// The other words, distinct, in query order: at least one must match.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(super) any: Vec<String>,
}

fn quote(tokens: &[String]) -> String {
    // Tokens are letters and digits only: no quote can occur inside.
    format!("\"{}\"", tokens.join(" "))
}

pub(super) fn parse(text: &str, tk: &Tokenizer) -> Parsed {
    let mut phrases = Vec::new();
    let mut phrase_terms = Vec::new();
    let mut words = Vec::new();
    for (i, part) in text.split('"').enumerate() {
        let tokens = tk.tokens(part);
        if i % 2 == 1 {
            if !tokens.is_empty() {
                phrases.push(quote(&tokens));
                phrase_terms.push(tokens);
            }
        } else {
            words.extend(tokens);
        }
    }
    let mut terms: HashSet<String> = words.iter().cloned().collect();
    for part in text.split('"').skip(1).step_by(2) {
        terms.extend(tk.tokens(part));
    }
    let mut distinct = Vec::new();
    for w in words {
        if !distinct.contains(&w) {
            distinct.push(w);
        }
    }
    let any_word = (!distinct.is_empty()).then(|| {
        distinct
            .iter()
            .map(|w| quote(std::slice::from_ref(w)))
            .collect::<Vec<_>>()
            .join(" OR ")
    });
    let fts = match (phrases.is_empty(), any_word) {
        (true, None) => None,
        (true, Some(w)) => Some(w),
        (false, None) => Some(phrases.join(" AND ")),
        (false, Some(w)) => Some(format!("{} AND ({w})", phrases.join(" AND "))),
    };
    let words = (phrases.is_empty() && !distinct.is_empty()).then(|| distinct.clone());
    Parsed {
        fts,
        terms,
        words,
        phrases: phrase_terms,
        any: distinct,
    }
}

/// One candidate message, from either engine.
pub(super) struct Candidate {
    /// Relevance in the list it came from (higher is better).
    pub(super) score: f32,
    pub(super) seq: u64,
    pub(super) role: String,
    pub(super) ts_ms: i64,
    /// Tools, `" a b "`.
    pub(super) tools: String,
    /// The text (empty while `span` says where to read it).
    pub(super) text: String,
    /// Where the text lies in the session's log until it is read
    /// (`super::doc_text`); `None` once `text` holds it.
    pub(super) span: Option<Span>,
    /// BLAKE3 of `text` (the key of stored vectors).
    pub(super) chash: Vec<u8>,
    /// The text's terms, space separated, once [`score_bm25`] has cut them
    /// (ranking reads them instead of cutting the text again).
    pub(super) terms: Option<String>,
    pub(super) session: String,
    pub(super) title: Option<String>,
    pub(super) agent: String,
    pub(super) project: String,
}

/// Where candidates come from: one implementation per engine (SQLite FTS5
/// here, PostgreSQL in `pg.rs`); validation, the query's parse, fusion,
/// ranking ties and snippets are [`run`]'s, once for both.
pub(super) trait Source: Postings {
    /// The newest `limit` messages the filters allow (a query without terms).
    fn newest(&self, f: &SearchFilter, limit: usize) -> Result<Vec<Candidate>>;
    /// Every message the filters allow scored by similarity to `qv`; the
    /// best `k`, best first.
    fn semantic(
        &self,
        embedder: &dyn EmbeddingProvider,
        qv: &[f32],
        f: &SearchFilter,
        k: usize,
    ) -> Result<Vec<Candidate>>;
    /// The embedding of each of `cands` (stored for the embedder's model
    /// when available, computed otherwise), in order.
    fn vectors(
        &self,
        embedder: &dyn EmbeddingProvider,
        cands: &[Candidate],
    ) -> Result<Vec<Vec<f32>>>;
}

/// What the shared lexical algorithms ([`lexical`], [`bounded_candidates`])
/// need from an engine's inverted index. Documents are in insertion order
/// ("newest" is the last inserted), matches use the query's terms exactly.
///
/// BM25's statistics are those of a scope ([`scope_of`]): the sessions
/// whose id starts with the query's `session` filter, or every session
/// without one. So a search restricted to a prefix (a server's project:
/// ids `P~...`) is scored by the data under that prefix alone; nothing
/// written elsewhere moves its scores.
pub(super) trait Postings {
    /// `(documents, average length in terms)` of the sessions in `scope`
    /// (all without one); `None` when there are none.
    fn collection(&self, scope: Option<&str>) -> Result<Option<(i64, f64)>>;
    /// How many documents of the sessions in `scope` hold `term`.
    fn doc_frequency(&self, term: &str, scope: Option<&str>) -> Result<i64>;
    /// Documents holding at least one of `any` (and matching the whole of
    /// `also` when given) that the filters allow, newest first, at most
    /// `cap`; unscored.
    fn holding(
        &self,
        any: &[String],
        also: Option<&Parsed>,
        f: &SearchFilter,
        cap: i64,
    ) -> Result<Vec<Candidate>>;
    /// The newest `cap` documents matching the whole query; unscored.
    fn newest_matching(&self, q: &Parsed, f: &SearchFilter, cap: i64) -> Result<Vec<Candidate>>;
    /// The engine's own exact BM25 over every match (statistics of the
    /// filter's scope): the best `limit`, then recency (the fallback of
    /// [`lexical`] when the rare-term path cannot prove its answer).
    fn ranked(&self, q: &Parsed, f: &SearchFilter, limit: usize) -> Result<Vec<Candidate>>;
}

/// Add `c` to a best-`k` list, keeping memory at most `2k + 1` candidates.
pub(super) fn keep_best(best: &mut Vec<Candidate>, c: Candidate, k: usize) {
    best.push(c);
    if best.len() > 2 * k {
        rank(best);
        best.truncate(k);
    }
}

const COLUMNS: &str = "d.seq, d.role, d.ts_ms, d.tools, d.text, d.chash, s.id, s.title, s.agent, \
     s.project, d.span_at, d.span_len";

fn candidate(r: &rusqlite::Row<'_>, score: f32) -> rusqlite::Result<Candidate> {
    Ok(Candidate {
        score,
        seq: r.get::<_, i64>(0)?.max(0) as u64,
        role: r.get(1)?,
        ts_ms: r.get(2)?,
        tools: r.get(3)?,
        text: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
        span: doc_text::span_of(r.get(10)?, r.get(11)?),
        chash: r.get(5)?,
        terms: None,
        session: r.get(6)?,
        title: r.get(7)?,
        agent: r.get(8)?,
        project: r.get(9)?,
    })
}

/// The filters as SQL conditions, with their parameters (numbered from `first`).
fn filter_sql(f: &SearchFilter, first: usize) -> (String, Vec<Box<dyn ToSql>>) {
    let mut sql = String::new();
    let mut args: Vec<Box<dyn ToSql>> = Vec::new();
    let mut add = |cond: &str, arg: Box<dyn ToSql>, args: &mut Vec<Box<dyn ToSql>>| {
        let n = first + args.len();
        sql.push_str(" AND ");
        sql.push_str(&cond.replace("?N", &format!("?{n}")));
        args.push(arg);
    };
    if let Some(p) = &f.project {
        let p = p.trim_end_matches('/').to_string();
        add(
            "(s.project = ?N OR substr(s.project, 1, length(?N) + 1) = ?N || '/')",
            Box::new(p),
            &mut args,
        );
    }
    if let Some(a) = &f.agent {
        add("s.agent = ?N", Box::new(a.clone()), &mut args);
    }
    if let Some(id) = &f.session {
        add(
            "substr(s.id, 1, length(?N)) = ?N",
            Box::new(id.clone()),
            &mut args,
        );
    }
    if let Some(t) = f.since {
        add("d.ts_ms >= ?N", Box::new(t.timestamp_millis()), &mut args);
    }
    if let Some(t) = f.until {
        add("d.ts_ms < ?N", Box::new(t.timestamp_millis()), &mut args);
    }
    if let Some(r) = f.role {
        add("d.role = ?N", Box::new(r.as_str()), &mut args);
    }
    if let Some(t) = &f.tool {
        add(
            "instr(d.tools, ' ' || ?N || ' ') > 0",
            Box::new(t.clone()),
            &mut args,
        );
    }
    (sql, args)
}

/// The candidates `sql` selects ([`COLUMNS`] first), with their texts
/// read back where they live in the logs (`super::doc_text`).
fn run_query(
    src: &Sqlite<'_>,
    sql: &str,
    args: &[Box<dyn ToSql>],
    score: &dyn Fn(&rusqlite::Row<'_>) -> rusqlite::Result<f32>,
) -> Result<Vec<Candidate>> {
    let db = src.db;
    let mut st = db.search.prepare_cached(sql).at(db.path())?;
    let params: Vec<&dyn ToSql> = args.iter().map(|b| b.as_ref()).collect();
    let rows = st
        .query_map(params.as_slice(), |r| candidate(r, score(r)?))
        .at(db.path())?;
    let mut found = rows.collect::<rusqlite::Result<Vec<_>>>().at(db.path())?;
    doc_text::resolve(src.store, &mut found);
    Ok(found)
}

/// BM25 parameters of the rare-term path (the view's and FTS5's defaults).
pub(super) const K1: f64 = 1.2;
pub(super) const B: f64 = 0.75;
/// BM25's inverse document frequency of a term in `df` of `n` documents
/// (the view's non-negative form).
pub(super) fn idf(n: i64, df: i64) -> f64 {
    (1.0 + (n - df) as f64 / (df as f64 + 0.5)).ln().max(0.0)
}

/// The statistics scope of a filter: its session id prefix.
pub(super) fn scope_of(f: &SearchFilter) -> Option<&str> {
    f.session.as_deref()
}

/// The rare-term path reads at most this many candidate documents.
const RARE_CANDIDATES: i64 = 2000;

/// The best `limit` lexical candidates, BM25 then recency.
///
/// FTS5 scores every document that matches any word, and its `bm25()` walks
/// every word's whole posting list, so a query with one common word costs
/// time in proportion to the store. When some words are rare (together in at
/// most [`RARE_CANDIDATES`] documents), only the documents holding one of
/// them are scored, in Rust, with BM25 over all the words (the view's
/// non-negative IDF; document frequencies from `terms_vocab`, lengths and
/// counts from `sessions`; on PostgreSQL from `memoir_search_terms` and
/// `memoir_search_sessions`). The answer is kept when its `limit`-th score
/// beats the most any other document could reach (the sum of the common
/// words' `idf × (k1 + 1)`: the MaxScore bound), so it is the exact top
/// `limit` under that BM25; otherwise the engine's full ranking runs
/// ([`Postings::ranked`]).
pub(super) fn lexical(
    db: &dyn Postings,
    tk: &Tokenizer,
    parsed: &Parsed,
    f: &SearchFilter,
    limit: usize,
) -> Result<Vec<Candidate>> {
    if let Some(words) = &parsed.words {
        if let Some(found) = rare_first(db, tk, words, f, limit)? {
            return Ok(found);
        }
    }
    db.ranked(parsed, f, limit)
}

fn rare_first(
    db: &dyn Postings,
    tk: &Tokenizer,
    words: &[String],
    f: &SearchFilter,
    limit: usize,
) -> Result<Option<Vec<Candidate>>> {
    let scope = scope_of(f);
    let Some((n, avgdl)) = db.collection(scope)? else {
        return Ok(None);
    };
    let split = split_terms(db, n, words, scope)?;
    if split.rare.is_empty() {
        return Ok(None);
    }
    let mut found = db.holding(&split.rare, None, f, RARE_CANDIDATES)?;
    score_bm25(&mut found, tk, &split.weights, avgdl);
    rank(&mut found);
    found.truncate(limit);
    // Without common words every matching document was a candidate.
    let exact = !split.common
        || (found.len() >= limit && found[limit - 1].score as f64 > split.common_bound);
    Ok(exact.then_some(found))
}

/// A query's terms weighed against the index.
struct TermSplit {
    /// Every term the index holds, with its IDF.
    weights: Vec<(String, f64)>,
    /// The rarest terms, in order, together in at most [`RARE_CANDIDATES`]
    /// documents: every document holding one can be scored.
    rare: Vec<String>,
    /// Whether some terms are not rare (common ones).
    common: bool,
    /// The most the common terms can add to a score (BM25's per-term
    /// ceiling, IDF × (k1 + 1)).
    common_bound: f64,
}

fn split_terms<'a>(
    db: &dyn Postings,
    n: i64,
    terms: impl IntoIterator<Item = &'a String>,
    scope: Option<&str>,
) -> Result<TermSplit> {
    let mut split = TermSplit {
        weights: Vec::new(),
        rare: Vec::new(),
        common: false,
        common_bound: 0.0,
    };
    let mut rare_docs = 0i64;
    for t in terms {
        let df = db.doc_frequency(t, scope)?;
        if df == 0 {
            continue;
        }
        let weight = idf(n, df);
        split.weights.push((t.clone(), weight));
        if rare_docs + df <= RARE_CANDIDATES {
            split.rare.push(t.clone());
            rare_docs += df;
        } else {
            split.common = true;
            split.common_bound += weight * (K1 + 1.0);
        }
    }
    Ok(split)
}

/// Collection statistics for BM25 computed in Rust: (documents, average
/// length) of the sessions in `scope`, `None` when they hold none.
fn sqlite_collection(db: &Db, scope: Option<&str>) -> Result<Option<(i64, f64)>> {
    let (n, total): (i64, i64) = db
        .search
        .prepare_cached(
            "SELECT coalesce(sum(docs), 0), coalesce(sum(tokens), 0) FROM sessions \
             WHERE ?1 IS NULL OR substr(id, 1, length(?1)) = ?1",
        )
        .at(db.path())?
        .query_row([scope], |r| Ok((r.get(0)?, r.get(1)?)))
        .at(db.path())?;
    Ok((n > 0).then(|| (n, (total as f64 / n as f64).max(1.0))))
}

/// Score `cands` with BM25 over `weights` (term, IDF) in Rust, keeping
/// each candidate's terms for the ranking. The candidates' words go through
/// one word cache per call (they repeat across candidates; stemming was
/// most of a query's CPU).
pub(super) fn score_bm25(
    cands: &mut [Candidate],
    tk: &Tokenizer,
    weights: &[(String, f64)],
    avgdl: f64,
) {
    let mut terms = Terms::new(tk);
    let mut tf = vec![0u32; weights.len()];
    for c in cands {
        let mut joined = String::new();
        let count = terms.joined(&c.text, &mut joined);
        tf.iter_mut().for_each(|n| *n = 0);
        for t in joined.split(' ') {
            if let Some(i) = weights.iter().position(|(w, _)| w == t) {
                tf[i] += 1;
            }
        }
        let norm = K1 * (1.0 - B + B * count as f64 / avgdl);
        let mut score = 0.0;
        for ((_, weight), &n) in weights.iter().zip(&tf) {
            if n > 0 {
                let n = f64::from(n);
                score += weight * n * (K1 + 1.0) / (n + norm);
            }
        }
        c.score = score as f32;
        c.terms = Some(joined);
    }
}

/// The hybrid side's lexical candidates, with work bounded whatever the
/// store's size: every document holding one of the query's rare terms
/// (together in at most [`RARE_CANDIDATES`] documents), plus the newest
/// `limit` documents matching the whole query (FTS5 walks its postings in
/// rowid order and stops), all scored by BM25 in Rust, best `limit` kept.
/// Unlike [`lexical`], a document holding only common words may be missed
/// when it is old and better scored than the newest ones: the semantic side
/// re-ranks this pool anyway, and recency is memoir's tie-breaker.
pub(super) fn bounded_candidates(
    db: &dyn Postings,
    tk: &Tokenizer,
    parsed: &Parsed,
    f: &SearchFilter,
    limit: usize,
) -> Result<Vec<Candidate>> {
    let scope = scope_of(f);
    let Some((n, avgdl)) = db.collection(scope)? else {
        return Ok(Vec::new());
    };
    let mut terms: Vec<&String> = parsed.terms.iter().collect();
    terms.sort();
    let TermSplit { weights, rare, .. } = split_terms(db, n, terms, scope)?;
    let mut found = db.newest_matching(parsed, f, limit as i64)?;
    if !rare.is_empty() {
        let seen: HashSet<(String, u64)> =
            found.iter().map(|c| (c.session.clone(), c.seq)).collect();
        let more = db.holding(&rare, Some(parsed), f, RARE_CANDIDATES)?;
        found.extend(
            more.into_iter()
                .filter(|c| !seen.contains(&(c.session.clone(), c.seq))),
        );
    }
    score_bm25(&mut found, tk, &weights, avgdl);
    rank(&mut found);
    found.truncate(limit);
    Ok(found)
}

fn lexical_where(
    src: &Sqlite<'_>,
    fts: &str,
    f: &SearchFilter,
    limit: usize,
) -> Result<Vec<Candidate>> {
    let (cond, mut args) = filter_sql(f, 3);
    // Rank on (rowid, score, time) only, then read the texts of the winners:
    // sorting every match with its text is what makes a naive join slow.
    // Without filters, rank on the FTS table alone (no per-match lookups).
    let inner = if cond.is_empty() {
        "SELECT rowid AS id, bm25(terms) AS b FROM terms WHERE terms MATCH ?1 \
         ORDER BY b LIMIT ?2"
            .to_string()
    } else {
        format!(
            "SELECT terms.rowid AS id, bm25(terms) AS b FROM terms \
             JOIN docs d ON d.rowid = terms.rowid JOIN sessions s ON s.sid = d.sid \
             WHERE terms MATCH ?1{cond} ORDER BY b, d.ts_ms DESC LIMIT ?2"
        )
    };
    let sql = format!(
        "WITH top AS ({inner}) SELECT {COLUMNS}, -top.b FROM top \
         JOIN docs d ON d.rowid = top.id JOIN sessions s ON s.sid = d.sid \
         ORDER BY top.b, d.ts_ms DESC"
    );
    let mut all: Vec<Box<dyn ToSql>> = vec![Box::new(fts.to_string()), Box::new(limit as i64)];
    all.append(&mut args);
    run_query(src, &sql, &all, &|r| r.get::<_, f64>(12).map(|s| s as f32))
}

/// The newest `limit` messages the filters allow (a query without terms).
fn newest(src: &Sqlite<'_>, f: &SearchFilter, limit: usize) -> Result<Vec<Candidate>> {
    let (cond, mut args) = filter_sql(f, 2);
    let sql = format!(
        "SELECT {COLUMNS} FROM docs d JOIN sessions s ON s.sid = d.sid WHERE 1{cond} \
         ORDER BY d.ts_ms DESC, d.rowid DESC LIMIT ?1"
    );
    let mut all: Vec<Box<dyn ToSql>> = vec![Box::new(limit as i64)];
    all.append(&mut args);
    run_query(src, &sql, &all, &|_| Ok(0.0))
}

/// The vector stored for this model and content hash, if any (of the
/// embedder's width).
fn stored_vector(
    db: &Db,
    embedder: &dyn EmbeddingProvider,
    model: &str,
    chash: &[u8],
) -> Result<Option<Vec<f32>>> {
    let stored: Option<Vec<u8>> = db
        .search
        .prepare_cached("SELECT vec FROM vectors WHERE model = ?1 AND chash = ?2")
        .at(db.path())?
        .query_row(rusqlite::params![model, chash], |r| r.get(0))
        .optional()
        .at(db.path())?;
    Ok(stored.and_then(|b| decode_vector(&b, embedder.dimensions())))
}

pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Sort best first: score, then recency.
pub(super) fn rank(list: &mut [Candidate]) {
    list.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.ts_ms.cmp(&a.ts_ms)));
}

/// Every filtered message scored by similarity; the best `k` kept.
fn semantic(
    src: &Sqlite<'_>,
    embedder: &dyn EmbeddingProvider,
    query_vec: &[f32],
    f: &SearchFilter,
    k: usize,
) -> Result<Vec<Candidate>> {
    let (cond, args) = filter_sql(f, 1);
    let sql =
        format!("SELECT {COLUMNS} FROM docs d JOIN sessions s ON s.sid = d.sid WHERE 1{cond}");
    let model = embedder.model_id();
    let db = src.db;
    let mut st = db.search.prepare(&sql).at(db.path())?;
    let params: Vec<&dyn ToSql> = args.iter().map(|b| b.as_ref()).collect();
    let mut rows = st.query(params.as_slice()).at(db.path())?;
    let mut best: Vec<Candidate> = Vec::with_capacity(2 * k + 1);
    while let Some(r) = rows.next().at(db.path())? {
        let mut c = candidate(r, 0.0).at(db.path())?;
        let v = match stored_vector(db, embedder, &model, &c.chash)? {
            Some(v) => v,
            // The text is read only when no vector is stored for it.
            None if doc_text::load(src.store, &mut c) => embedder.embed(embed_text(&c.text))?,
            None => continue,
        };
        c.score = dot(query_vec, &v);
        keep_best(&mut best, c, k);
    }
    rank(&mut best);
    best.truncate(k);
    doc_text::resolve(src.store, &mut best);
    Ok(best)
}

pub(super) fn role_of(s: &str) -> Role {
    match s {
        "system" => Role::System,
        "user" => Role::User,
        "tool" => Role::Tool,
        _ => Role::Assistant,
    }
}

fn hit(c: Candidate, terms: &HashSet<String>, tk: &Tokenizer) -> SearchHit {
    SearchHit {
        snippet: snippet::cut(&c.text, terms, tk, DEFAULT_WIDTH),
        session: c.session,
        title: c.title,
        agent: c.agent,
        project: c.project,
        time: Utc
            .timestamp_millis_opt(c.ts_ms)
            .single()
            .unwrap_or_default(),
        seq: c.seq,
        role: role_of(&c.role),
        tools: c.tools.split_whitespace().map(str::to_string).collect(),
        score: c.score,
    }
}

/// The SQLite engine's candidates.
pub(super) struct Sqlite<'a> {
    pub(super) db: &'a Db,
    /// The index's tokenizer (a scoped ranking scores in Rust).
    pub(super) tk: &'a Tokenizer,
    /// The indexed store (texts kept by location are read from its logs).
    pub(super) store: &'a dyn LogStore,
}

impl Postings for Sqlite<'_> {
    fn collection(&self, scope: Option<&str>) -> Result<Option<(i64, f64)>> {
        sqlite_collection(self.db, scope)
    }

    fn doc_frequency(&self, term: &str, scope: Option<&str>) -> Result<i64> {
        let db = self.db;
        match scope {
            None => db.doc_freqs.get(&db.search, db.path(), term),
            // FTS5 counts over the whole table: the scope's documents are
            // counted by walking the term's matches.
            Some(prefix) => db
                .search
                .prepare_cached(
                    "SELECT count(*) FROM terms JOIN docs d ON d.rowid = terms.rowid \
                     JOIN sessions s ON s.sid = d.sid \
                     WHERE terms MATCH ?1 AND substr(s.id, 1, length(?2)) = ?2",
                )
                .at(db.path())?
                .query_row(
                    rusqlite::params![quote(std::slice::from_ref(&term.to_string())), prefix],
                    |r| r.get(0),
                )
                .at(db.path()),
        }
    }

    fn holding(
        &self,
        any: &[String],
        also: Option<&Parsed>,
        f: &SearchFilter,
        cap: i64,
    ) -> Result<Vec<Candidate>> {
        let any = any
            .iter()
            .map(|w| quote(std::slice::from_ref(w)))
            .collect::<Vec<_>>()
            .join(" OR ");
        let expr = match also.and_then(|q| q.fts.as_deref()) {
            Some(fts) => format!("({any}) AND ({fts})"),
            None => any,
        };
        self.matching(expr, f, cap)
    }

    fn newest_matching(&self, q: &Parsed, f: &SearchFilter, cap: i64) -> Result<Vec<Candidate>> {
        match q.fts.as_deref() {
            Some(fts) => self.matching(fts.to_string(), f, cap),
            None => Ok(Vec::new()),
        }
    }

    fn ranked(&self, q: &Parsed, f: &SearchFilter, limit: usize) -> Result<Vec<Candidate>> {
        match (q.fts.as_deref(), scope_of(f)) {
            (None, _) => Ok(Vec::new()),
            (Some(fts), None) => lexical_where(self, fts, f, limit),
            // FTS5's `bm25()` weighs terms by the whole table: a scoped
            // ranking scores every match of the scope in Rust instead.
            (Some(_), Some(scope)) => {
                let Some((n, avgdl)) = self.collection(Some(scope))? else {
                    return Ok(Vec::new());
                };
                let mut terms: Vec<&String> = q.terms.iter().collect();
                terms.sort();
                let split = split_terms(self, n, terms, Some(scope))?;
                let words: Vec<String> = split.weights.iter().map(|(t, _)| t.clone()).collect();
                if words.is_empty() {
                    return Ok(Vec::new());
                }
                let mut found = self.holding(&words, Some(q), f, i64::MAX)?;
                score_bm25(&mut found, self.tk, &split.weights, avgdl);
                rank(&mut found);
                found.truncate(limit);
                Ok(found)
            }
        }
    }
}

impl Sqlite<'_> {
    /// The newest `cap` documents matching the FTS5 expression `expr`.
    fn matching(&self, expr: String, f: &SearchFilter, cap: i64) -> Result<Vec<Candidate>> {
        let (cond, args) = filter_sql(f, 3);
        let sql = format!(
            "SELECT {COLUMNS} FROM terms JOIN docs d ON d.rowid = terms.rowid \
             JOIN sessions s ON s.sid = d.sid WHERE terms MATCH ?1{cond} \
             ORDER BY terms.rowid DESC LIMIT ?2"
        );
        let mut all: Vec<Box<dyn ToSql>> = vec![Box::new(expr), Box::new(cap)];
        all.extend(args);
        run_query(self, &sql, &all, &|_| Ok(0.0))
    }
}

impl Source for Sqlite<'_> {
    fn newest(&self, f: &SearchFilter, limit: usize) -> Result<Vec<Candidate>> {
        newest(self, f, limit)
    }

    fn semantic(
        &self,
        embedder: &dyn EmbeddingProvider,
        qv: &[f32],
        f: &SearchFilter,
        k: usize,
    ) -> Result<Vec<Candidate>> {
        semantic(self, embedder, qv, f, k)
    }

    fn vectors(
        &self,
        embedder: &dyn EmbeddingProvider,
        cands: &[Candidate],
    ) -> Result<Vec<Vec<f32>>> {
        let model = embedder.model_id();
        cands
            .iter()
            .map(
                |c| match stored_vector(self.db, embedder, &model, &c.chash)? {
                    Some(v) => Ok(v),
                    None => Ok(embedder.embed(embed_text(&c.text))?),
                },
            )
            .collect()
    }
}

/// Run `q` against `source`: the one query pipeline of both engines.
pub(super) fn run(
    source: &dyn Source,
    tk: &Tokenizer,
    embedder: &dyn EmbeddingProvider,
    hybrid: &HybridParams,
    rank_weights: &RankWeights,
    q: &SearchQuery,
) -> Result<Vec<SearchHit>> {
    if q.text.len() > MAX_QUERY_BYTES {
        return Err(SearchError::Invalid(format!(
            "query of {} bytes; at most {MAX_QUERY_BYTES}",
            q.text.len()
        )));
    }
    let k = q.k.min(MAX_K);
    if k == 0 {
        return Ok(Vec::new());
    }
    let parsed = parse(&q.text, tk);
    if parsed.fts.is_none() {
        if !q.text.trim().is_empty() {
            // Only stop words or punctuation: nothing can match.
            return Ok(Vec::new());
        }
        let list = source.newest(&q.filter, k)?;
        return Ok(list
            .into_iter()
            .map(|c| hit(c, &parsed.terms, tk))
            .collect());
    }
    let pool = hybrid.depth.max(k);
    let list = match q.mode {
        SearchMode::Lexical => {
            let cands = lexical(source, tk, &parsed, &q.filter, pool)?;
            let weights = query_weights(source, tk, &q.text, &q.filter)?;
            evidence_ranked(cands, tk, &weights, None, rank_weights, k)
        }
        SearchMode::Semantic => {
            let qv = embedder.embed_query(&q.text)?;
            let mut list = source.semantic(embedder, &qv, &q.filter, k)?;
            // No similarity is no evidence: not a hit.
            list.retain(|c| c.score > 0.0);
            list
        }
        SearchMode::Hybrid => {
            let cands = bounded_candidates(source, tk, &parsed, &q.filter, pool)?;
            if cands.is_empty() {
                return Ok(Vec::new());
            }
            let qv = embedder.embed_query(&q.text)?;
            let vectors = source.vectors(embedder, &cands)?;
            let sims: Vec<f32> = vectors.iter().map(|v| dot(&qv, v)).collect();
            let weights = query_weights(source, tk, &q.text, &q.filter)?;
            evidence_ranked(cands, tk, &weights, Some(&sims), rank_weights, k)
        }
    };
    Ok(list
        .into_iter()
        .map(|c| hit(c, &parsed.terms, tk))
        .collect())
}

/// The query's distinct terms in query order (phrases' and words' alike),
/// each with its IDF in the filter's scope; terms the scope never holds
/// are left out (no message could hold them).
fn query_weights(
    db: &dyn Postings,
    tk: &Tokenizer,
    text: &str,
    f: &SearchFilter,
) -> Result<Vec<(String, f32)>> {
    let scope = scope_of(f);
    let Some((n, _)) = db.collection(scope)? else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(String, f32)> = Vec::new();
    for t in tk.tokens(&text.replace('"', " ")) {
        if out.iter().any(|(o, _)| *o == t) {
            continue;
        }
        let df = db.doc_frequency(&t, scope)?;
        if df > 0 {
            let w = idf(n, df) as f32;
            out.push((t, w));
        }
    }
    Ok(out)
}

/// Rank lexical candidates (their `score` is BM25) by the whole query's
/// evidence ([`crate::view::rank`]): coverage, proximity, BM25 and, with
/// `sims` (one per candidate), embedding similarity. Candidates with no
/// evidence are dropped; the best `k` are kept, recency breaking ties.
fn evidence_ranked(
    mut cands: Vec<Candidate>,
    tk: &Tokenizer,
    query: &[(String, f32)],
    sims: Option<&[f32]>,
    w: &RankWeights,
    k: usize,
) -> Vec<Candidate> {
    let max_bm25 = cands.iter().map(|c| c.score).fold(0.0f32, f32::max);
    let max_sim = sims.map_or(0.0, |s| s.iter().copied().fold(0.0f32, f32::max));
    let mut terms = Terms::new(tk);
    let mut joined = String::new();
    let mut keep = Vec::with_capacity(cands.len());
    for (i, mut c) in cands.drain(..).enumerate() {
        let cut = match c.terms.take() {
            Some(cut) => cut,
            None => {
                terms.joined(&c.text, &mut joined);
                std::mem::take(&mut joined)
            }
        };
        let e = rank::evidence(query, cut.split(' ').filter(|t| !t.is_empty()));
        let sem = sims.map(|s| rank::normalised(s.get(i).copied().unwrap_or(0.0), max_sim));
        let bm25 = rank::normalised(c.score, max_bm25);
        if let Some(score) = rank::score_of(&e, bm25, sem, c.role == "tool", w) {
            c.score = score;
            keep.push(c);
        }
    }
    rank(&mut keep);
    keep.truncate(k);
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::lexical::TokenizerConfig;

    #[test]
    fn words_are_ored_and_quoted_parts_are_phrases_of_stems() {
        let tk = Tokenizer::new(TokenizerConfig::default());
        assert_eq!(
            parse("Running the tests", &tk).fts.as_deref(),
            Some("\"run\" OR \"test\"")
        );
        assert_eq!(
            parse("\"cargo tests\" failed", &tk).fts.as_deref(),
            Some("\"cargo test\" AND (\"fail\")")
        );
        assert_eq!(parse("\"the\"", &tk).fts, None);
        assert_eq!(parse("the of", &tk).fts, None);
        // FTS5 syntax in the input is only words to us.
        assert_eq!(
            parse("cargo* NEAR(build)", &tk).fts.as_deref(),
            Some("\"cargo\" OR \"near\" OR \"build\"")
        );
    }
}
