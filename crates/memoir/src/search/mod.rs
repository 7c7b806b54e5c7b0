//! Search every session: one persistent, incremental, bounded index across a
//! whole store.
//!
//! [`SearchIndex`] keeps a derived, rebuildable SQLite database (FTS5) under
//! the store, by default `<sessions dir>/search/index.sqlite`. Deleting it
//! loses nothing: the next [`SearchIndex::update`] rebuilds it from the
//! transcripts. On a PostgreSQL store (features `search` + `postgres`) the
//! same index lives in the store's database instead (`memoir_search_*`
//! tables: `tsvector` + GIN, pgvector when available; see `pg.rs`), behind
//! the same API: [`SearchIndex::for_store`] picks the engine. What it holds:
//!
//! - one document per message a session ever held in its OWN log (a fork's
//!   inherited prefix is indexed once, in its parent), including the turns a
//!   `rewrite` (compaction) dropped, each with the `seq` of the record that
//!   wrote it;
//! - per session, a [`cursor::Cursor`]: the last indexed `seq`, that record's
//!   hash and the file's size and mtime. An unchanged file is skipped without
//!   reading it; a changed one is read and indexed from the cursor on; a cursor
//!   whose record no longer verifies (a rewritten or repaired file) re-indexes
//!   the whole session;
//! - on the file store, a catch-up checkpoint (`catchup`): the change journal
//!   position and store directory time it has seen, so an update looks only
//!   at the sessions noted or created/deleted since, not at every session;
//! - a version stamp ([`schema::SCHEMA_VERSION`] and the tokenizer's name): an
//!   index written by another memoir, or one that does not open, is deleted
//!   and rebuilt, never trusted.
//!
//! Terms come from the semantic view's tokenizer with code-aware terms
//! ([`crate::view::lexical::TokenizerConfig::code`]: lowercase, stop words,
//! Snowball stems, identifiers in parts and whole), stored space-separated
//! in the FTS5 table, so phrase queries work on stems and FTS5's BM25
//! gathers candidates. Candidates are ranked on the whole query
//! ([`crate::view::rank`]: a full lexical match first, then coverage,
//! proximity, BM25 and, in hybrid mode, the configured embedder's
//! similarity); recency breaks ties. `docs/SEARCH.md` explains it. Bounds: indexing holds one session's log plus one
//! batch of documents; a search holds its candidate list (`depth`) only.

mod catchup;
pub mod context;
pub mod cursor;
mod doc_freq;
mod doc_text;
mod engine;
mod error;
pub mod eval;
#[allow(unsafe_code)] // the terms table's FTS5 tokenizer: C callbacks, each argued
pub mod fts5_tokenizer;
mod generation;
mod indexer;
#[cfg(feature = "postgres")]
mod pg;
mod query;
pub mod resume;
pub mod schema;
pub mod snippet;
mod terms;
mod terms_writer;
mod text;
mod time;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use serde::Serialize;

pub use context::around;
pub use error::SearchError;
pub use indexer::BATCH_DOCS;
pub use query::MAX_K;
pub use resume::{resume_command, resume_command_in, ResumeCommand};
pub use snippet::Snippet;
pub use time::parse_time;

use crate::embed::{EmbeddingProvider, HashEmbedder};
use crate::message::Role;
use crate::store::file::FileStore;
use crate::store::{Durability, LogStore};
use crate::view::lexical::{Tokenizer, TokenizerConfig};
use crate::view::rank::RankWeights;
use crate::view::retrieve::HybridParams;

/// Result with [`SearchError`].
pub type Result<T, E = SearchError> = std::result::Result<T, E>;

/// Directory (under the sessions directory) that holds the index.
pub const INDEX_DIR: &str = "search";
/// File name of the index database (sessions, documents, calls, vectors).
pub const INDEX_FILE: &str = "index.sqlite";
/// File name of the index's terms database (FTS5), beside [`INDEX_FILE`].
pub const TERMS_FILE: &str = "terms.sqlite";
/// The `agent` of sessions written natively through memoir (no `source`).
pub const NATIVE_AGENT: &str = "memoir";

/// Which lists answer a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 over the terms only (never touches an embedder).
    Lexical,
    /// Embedding similarity only (scans every message the filters allow).
    Semantic,
    /// Lexical candidates re-scored by embedding similarity, fused (default).
    #[default]
    Hybrid,
}

impl std::str::FromStr for SearchMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "lexical" => Ok(SearchMode::Lexical),
            "semantic" | "vector" => Ok(SearchMode::Semantic),
            "hybrid" => Ok(SearchMode::Hybrid),
            other => Err(format!(
                "unknown search mode {other:?} (lexical, semantic or hybrid)"
            )),
        }
    }
}

/// What a search may return (every set field must match).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchFilter {
    /// The session's project (workspace) is this path or lies under it.
    pub project: Option<String>,
    /// The agent that wrote the session (`claude-code`, `codex`, ...,
    /// [`NATIVE_AGENT`] for native sessions).
    pub agent: Option<String>,
    /// Session id or id prefix.
    pub session: Option<String>,
    /// Messages written at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Messages written before this time.
    pub until: Option<DateTime<Utc>>,
    /// The message's role.
    pub role: Option<Role>,
    /// The message calls this tool, or answers a call of it.
    pub tool: Option<String>,
}

/// One search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// Words to look for; `"double quoted"` parts must match as phrases.
    /// Empty: every message the filters allow, newest first.
    pub text: String,
    /// How many hits.
    pub k: usize,
    /// Which lists answer it.
    pub mode: SearchMode,
    /// Restrictions.
    pub filter: SearchFilter,
}

impl SearchQuery {
    /// A hybrid query for `text`, ten hits, no filter.
    pub fn new(text: impl Into<String>) -> Self {
        SearchQuery {
            text: text.into(),
            k: 10,
            mode: SearchMode::Hybrid,
            filter: SearchFilter::default(),
        }
    }
}

/// One message that matched: where it is, and the part that matched. The one
/// hit shape of the library, the CLI (`memoir search --json`) and HTTP.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    /// The session's id.
    pub session: String,
    /// The session's current title.
    pub title: Option<String>,
    /// The agent that wrote the session ([`NATIVE_AGENT`] for native ones).
    pub agent: String,
    /// The session's project (workspace), empty when unknown.
    pub project: String,
    /// When the message was written (the session's creation time when the
    /// message has no timestamp).
    pub time: DateTime<Utc>,
    /// The `seq` of the record that wrote the message (a `rewrite`'s for a
    /// message that first appeared in one).
    pub seq: u64,
    /// The message's role.
    pub role: Role,
    /// Tools the message calls or answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Relevance (higher is better; comparable within one search only).
    pub score: f32,
    /// The text around the match, with the matched words marked.
    pub snippet: Snippet,
}

/// What an update did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateReport {
    /// Sessions in the store's listing.
    pub sessions: usize,
    /// Sessions skipped without reading (unchanged since the last update).
    pub unchanged: usize,
    /// Sessions indexed from their cursor on.
    pub extended: usize,
    /// Sessions indexed from scratch (new, restored, or rewritten).
    pub reindexed: usize,
    /// Sessions dropped from the index (deleted from the store).
    pub removed: usize,
    /// Messages added to the index.
    pub messages: u64,
    /// Sessions that could not be read (left as they were; retried next time).
    pub unreadable: usize,
    /// Whether the index was (re)created from nothing (missing, stale version,
    /// or unreadable).
    pub rebuilt: bool,
    /// Whether every session was listed and `stat`ed (SQLite engine: no
    /// usable change journal checkpoint, or not a file store).
    pub full_scan: bool,
}

/// Size of the index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IndexStats {
    /// Sessions indexed.
    pub sessions: u64,
    /// Messages indexed.
    pub messages: u64,
    /// Stored vectors (from [`SearchIndex::embed_missing`]).
    pub vectors: u64,
    /// Bytes on disk (database plus write-ahead log).
    pub bytes: u64,
}

/// Where an index lives: one engine per kind of store.
enum Engine {
    /// SQLite FTS5 in two files next to the store (boxed: three
    /// connections; in a mutex so that a search, which takes `&self`, can
    /// follow a swap or rebuild a damaged index).
    Sqlite(Box<Mutex<engine::Db>>),
    /// Tables in the PostgreSQL store's own database.
    #[cfg(feature = "postgres")]
    Postgres(pg::PgIndex),
}

/// The persistent cross-session index of one store.
pub struct SearchIndex {
    db: Engine,
    store: Arc<dyn LogStore>,
    tokenizer: Tokenizer,
    embedder: Arc<dyn EmbeddingProvider>,
    hybrid: HybridParams,
    weights: RankWeights,
    rebuilt_on_open: AtomicBool,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("path", &self.path())
            .field("store", &self.store)
            .finish()
    }
}

/// The tokenizer every index uses (its name is part of the version stamp).
fn index_tokenizer() -> Tokenizer {
    Tokenizer::new(TokenizerConfig::code())
}

impl SearchIndex {
    /// The index of the file store in `sessions_dir`, kept in
    /// `<sessions_dir>/search/`. Creates it (empty) when missing and
    /// rebuilds it when stale; call [`SearchIndex::update`] to catch up.
    pub fn open(sessions_dir: &Path) -> Result<SearchIndex> {
        let store = Arc::new(FileStore::new(sessions_dir, Durability::Fsync));
        SearchIndex::open_store(store, &sessions_dir.join(INDEX_DIR))
    }

    /// The index of any store, kept in `index_dir`.
    pub fn open_store(store: Arc<dyn LogStore>, index_dir: &Path) -> Result<SearchIndex> {
        crate::paths::create_private_dir(index_dir)?;
        let (db, rebuilt) = engine::Db::open(index_dir)?;
        Ok(SearchIndex::with_engine(
            Engine::Sqlite(Box::new(Mutex::new(db))),
            store,
            rebuilt,
        ))
    }

    /// The index of a PostgreSQL store, kept in its own database (tables
    /// `memoir_search_*`). Fails with [`SearchError::Unsupported`] when
    /// `store` is not one ([`LogStore::postgres`] is `None`).
    #[cfg(feature = "postgres")]
    pub fn open_postgres(store: Arc<dyn LogStore>) -> Result<SearchIndex> {
        if store.postgres().is_none() {
            return Err(SearchError::Unsupported(format!("{store:?}")));
        }
        let (ix, rebuilt) = pg::PgIndex::open(store.clone())?;
        Ok(SearchIndex::with_engine(
            Engine::Postgres(ix),
            store,
            rebuilt,
        ))
    }

    /// The index of `store` where it belongs: in a PostgreSQL store's
    /// database, or under a file store's directory
    /// ([`default_index_dir`]). Other stores (memory, remote) have none:
    /// [`SearchError::Unsupported`].
    pub fn for_store(store: Arc<dyn LogStore>) -> Result<SearchIndex> {
        #[cfg(feature = "postgres")]
        if store.postgres().is_some() {
            return SearchIndex::open_postgres(store);
        }
        match default_index_dir(store.as_ref()) {
            Some(dir) => SearchIndex::open_store(store, &dir),
            None => Err(SearchError::Unsupported(format!("{store:?}"))),
        }
    }

    fn with_engine(db: Engine, store: Arc<dyn LogStore>, rebuilt: bool) -> SearchIndex {
        SearchIndex {
            db,
            store,
            tokenizer: index_tokenizer(),
            embedder: Arc::new(HashEmbedder::new(crate::embed::hash::DEFAULT_DIMS)),
            hybrid: HybridParams::default(),
            weights: RankWeights::default(),
            rebuilt_on_open: AtomicBool::new(rebuilt),
        }
    }

    /// Use `embedder` for the semantic side (default: the hash embedder).
    /// Vectors stored by [`SearchIndex::embed_missing`] for its model are
    /// used; the others are computed at query time.
    pub fn with_embedder(mut self, embedder: Arc<dyn EmbeddingProvider>) -> SearchIndex {
        self.embedder = embedder;
        self
    }

    /// Commit every `docs` documents while indexing (default
    /// [`BATCH_DOCS`], at least 1): fewer commits index faster; smaller
    /// batches hold less memory (FTS5's pending terms, SQLite's pages) and
    /// lose less work to a crash. PostgreSQL commits per session and
    /// ignores it.
    pub fn with_batch_docs(mut self, docs: usize) -> SearchIndex {
        match &mut self.db {
            Engine::Sqlite(db) => lock(db).batch_docs = docs.max(1),
            #[cfg(feature = "postgres")]
            Engine::Postgres(_) => {}
        }
        self
    }

    /// Rank with these weights (default [`RankWeights::default`]; see
    /// [`crate::view::rank`]).
    pub fn with_rank_weights(mut self, weights: RankWeights) -> SearchIndex {
        self.weights = weights;
        self
    }

    /// The embedder of the semantic side.
    pub fn embedder(&self) -> &Arc<dyn EmbeddingProvider> {
        &self.embedder
    }

    /// Where the database lives: the live generation's index file (for
    /// PostgreSQL, the store's locator followed by `/memoir_search`; never
    /// credentials).
    pub fn path(&self) -> PathBuf {
        match &self.db {
            Engine::Sqlite(db) => lock(db).path().to_path_buf(),
            #[cfg(feature = "postgres")]
            Engine::Postgres(ix) => ix.path().to_path_buf(),
        }
    }

    /// Whether opening found no usable index (missing, stale, unreadable)
    /// and started a new one.
    pub fn rebuilt_on_open(&self) -> bool {
        self.rebuilt_on_open.load(Ordering::Relaxed)
    }

    /// Run `op` on the live SQLite index: first follow a swap another
    /// process made (a rebuild); when `op` fails right after one, run it
    /// again on the new generation; when it fails because a file is
    /// damaged, rebuild the index beside it and run it once more (the
    /// error, if the rebuild fails too, names the damaged file).
    fn on_live<T>(
        &self,
        db: &mut engine::Db,
        mut op: impl FnMut(&mut engine::Db) -> Result<T>,
    ) -> Result<T> {
        self.follow(db)?;
        let e = match op(db) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if db.moved() {
            self.follow(db)?;
            return op(db);
        }
        if !is_damage(&e) {
            return Err(e);
        }
        let named = db.diagnose(e);
        match self.rebuild_sqlite(db) {
            Ok(_) => {
                self.rebuilt_on_open.store(true, Ordering::Relaxed);
                op(db)
            }
            Err(_) => Err(named),
        }
    }

    /// Reopen the live generation when it is no longer the open one; when
    /// what was found there could not be trusted (it was replaced by an
    /// empty one), fill it before anything reads it.
    fn follow(&self, db: &mut engine::Db) -> Result<()> {
        if db.follow()? == Some(true) {
            self.rebuilt_on_open.store(true, Ordering::Relaxed);
            catchup::update(db, self.store.as_ref(), &self.tokenizer)?;
            db.finish_build()?;
        }
        Ok(())
    }

    /// Index the whole store into a new generation beside the live one,
    /// then swap it in.
    fn rebuild_sqlite(&self, db: &mut engine::Db) -> Result<UpdateReport> {
        let store = self.store.as_ref();
        let tk = &self.tokenizer;
        db.rebuild_beside(|fresh| catchup::update(fresh, store, tk))
    }

    /// Catch up with the store: index new and changed sessions, drop deleted
    /// ones. On a file store, from the change journal: only the sessions
    /// noted since the last update (and those the store directory gained or
    /// lost) are looked at, so a current index costs a read of the journal's
    /// tail, not a `stat` per session; without a usable journal (the first
    /// update, after a reboot, once the journal was compacted) and on other
    /// SQLite-indexed stores, every session is listed and `stat`ed
    /// (`full_scan` in the report); on PostgreSQL, one query for the store.
    pub fn update(&mut self) -> Result<UpdateReport> {
        let mut report = match &self.db {
            Engine::Sqlite(db) => {
                let (store, tk) = (self.store.as_ref(), &self.tokenizer);
                self.on_live(&mut lock(db), |db| {
                    let report = catchup::update(db, store, tk)?;
                    db.finish_build()?;
                    Ok(report)
                })?
            }
            #[cfg(feature = "postgres")]
            Engine::Postgres(ix) => ix.update_all(&self.tokenizer)?,
        };
        report.rebuilt |= self.rebuilt_on_open.swap(false, Ordering::Relaxed);
        Ok(report)
    }

    /// Catch up with one session after an append (the manager's hook): reads
    /// only that session, from its cursor on. A session the store no longer
    /// has is dropped from the index.
    pub fn note_append(&mut self, session: &str) -> Result<UpdateReport> {
        match &self.db {
            Engine::Sqlite(db) => {
                let (store, tk) = (self.store.as_ref(), &self.tokenizer);
                self.on_live(&mut lock(db), |db| {
                    indexer::update_one(db, store, tk, session)
                })
            }
            #[cfg(feature = "postgres")]
            Engine::Postgres(ix) => ix.update_one(&self.tokenizer, session),
        }
    }

    /// Forget everything and index the whole store again. On SQLite the
    /// new index is built beside the live one and swapped in at the end:
    /// searches meanwhile (here or in other processes) use the old one.
    pub fn rebuild(&mut self) -> Result<UpdateReport> {
        let mut report = match &self.db {
            Engine::Sqlite(db) => {
                let mut db = lock(db);
                db.follow()?;
                self.rebuild_sqlite(&mut db)?
            }
            #[cfg(feature = "postgres")]
            Engine::Postgres(ix) => {
                ix.clear()?;
                ix.update_all(&self.tokenizer)?
            }
        };
        self.rebuilt_on_open.store(false, Ordering::Relaxed);
        report.rebuilt = true;
        Ok(report)
    }

    /// Run a search. Lexical mode never touches the embedder.
    pub fn search(&self, query: &SearchQuery) -> Result<Vec<SearchHit>> {
        let tk = &self.tokenizer;
        let embedder = self.embedder.as_ref();
        match &self.db {
            Engine::Sqlite(db) => self.on_live(&mut lock(db), |db| {
                let source = query::Sqlite {
                    db,
                    tk,
                    store: self.store.as_ref(),
                };
                query::run(&source, tk, embedder, &self.hybrid, &self.weights, query)
            }),
            #[cfg(feature = "postgres")]
            Engine::Postgres(ix) => {
                pg::search(ix, tk, embedder, &self.hybrid, &self.weights, query)
            }
        }
    }

    /// Compute and store the embedder's vectors for messages that have none
    /// yet (cached by content hash: a text seen twice is embedded once),
    /// `batch` texts at a time; `progress(done, total)` after each batch.
    /// Returns how many vectors were stored.
    pub fn embed_missing(
        &mut self,
        batch: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64> {
        match &self.db {
            Engine::Sqlite(db) => {
                let (store, embedder) = (self.store.as_ref(), self.embedder.as_ref());
                self.on_live(&mut lock(db), |db| {
                    engine::embed_missing(db, store, embedder, batch, progress)
                })
            }
            #[cfg(feature = "postgres")]
            Engine::Postgres(ix) => ix.embed_missing(self.embedder.as_ref(), batch, progress),
        }
    }

    /// Size of the index.
    pub fn stats(&self) -> Result<IndexStats> {
        match &self.db {
            Engine::Sqlite(db) => self.on_live(&mut lock(db), |db| db.stats()),
            #[cfg(feature = "postgres")]
            Engine::Postgres(ix) => ix.stats(),
        }
    }
}

/// Where the index of `store` lives by default: `<sessions dir>/search` when
/// the store keeps its sessions as files in a directory (the file store),
/// `None` for stores whose locations are not files (PostgreSQL, memory,
/// remote).
pub fn default_index_dir(store: &dyn LogStore) -> Option<PathBuf> {
    let probe = store.location("index-probe");
    let dir = probe.parent()?;
    (probe.extension().is_some_and(|x| x == "jsonl") && dir.is_dir()).then(|| dir.join(INDEX_DIR))
}

/// The live index file of a sessions directory's index, `None` when it has
/// none (`<sessions dir>/search/gen-<id>/index.sqlite`, the generation the
/// pointer `search/current` names).
pub fn index_path(sessions_dir: &Path) -> Option<PathBuf> {
    generation::live_index_file(&sessions_dir.join(INDEX_DIR))
}

/// The SQLite engine's index, locked (a thread that panicked holding it
/// left the connections usable: SQLite rolls back what was open).
fn lock(db: &Mutex<engine::Db>) -> MutexGuard<'_, engine::Db> {
    db.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a failure says a file of the index is damaged (SQLite's
/// "malformed" or "not a database", or a damage memoir found).
fn is_damage(e: &SearchError) -> bool {
    match e {
        SearchError::Damaged { .. } => true,
        SearchError::Database {
            source: rusqlite::Error::SqliteFailure(f, _),
            ..
        } => matches!(
            f.code,
            rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase
        ),
        _ => false,
    }
}
