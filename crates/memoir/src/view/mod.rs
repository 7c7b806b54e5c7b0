//! The semantic session view: a per-session index over the chunks of one
//! conversation, with their lifecycle, for retrieval ("recall") and grafting
//! earlier context back into an agent's prompt.
//!
//! A [`SessionView`] holds only its own session's chunks, so every result is
//! structurally scoped to that session. Each chunk is keyed by the `seq`
//! (`chain_seq`) of the transcript record it came from plus a `part` number,
//! and carries a BLAKE3 content hash, a kind tag, and its text inline or as a
//! blob hash in the [`crate::blob::ArtifactStore`]. The view is disposable:
//! [`SessionView::rebuild_from_messages`] rebuilds it from the transcript,
//! identically every time.
//!
//! Submodules, one job each:
//! - [`index`]: exact SIMD scan below a size threshold, HNSW above;
//! - [`lexical`]: tokenisation and a BM25 index over the same slots;
//! - [`retrieve`]: vector / lexical / hybrid modes and rank fusion;
//! - [`state`]: the [`NodeState`] lifecycle and its nine legal moves;
//! - [`types`]: [`ChunkMeta`], [`ScopedHit`], [`GraftedItem`], [`ViewError`];
//! - [`chunk`]: messages → chunks (kinds, embedding inputs, overlapping splits);
//! - [`rebuild`]: a view from a transcript, through the embedding cache;
//! - [`graft`]: token-budgeted graft blocks, recency pruning, promotion signals;
//! - `eval` (feature `eval`): the LoCoMo retrieval benchmark behind `memoir eval locomo`.
//!
//! Concurrency: every method takes `&self`; the manifest and both indexes sit
//! behind one `RwLock`, so queries run in parallel and an insert is atomic
//! (a query sees a chunk in the index and the manifest, or in neither).
//! Reference counts are atomics bumped under the read lock.

pub mod chunk;
#[cfg(feature = "eval")]
pub mod eval;
pub mod graft;
pub mod history;
pub mod index;
pub mod lexical;
pub mod rank;
pub mod rebuild;
pub mod retrieve;
pub mod state;
pub mod types;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::blob::{ArtifactStore, BlobError};
use crate::embed::EmbeddingProvider;

pub use chunk::{chunk_messages, Chunk, ChunkerConfig};
pub use graft::{GraftBlock, PromotionCandidate, PromotionReason, PromotionSignals};
pub use index::{IndexConfig, VectorIndex};
pub use lexical::{Bm25Params, LexicalIndex, PrfParams, Tokenizer, TokenizerConfig};
pub use rebuild::{RebuildOptions, RebuildReport};
pub use retrieve::{Fusion, HybridParams, RetrievalMode};
pub use state::{NodeState, StateSet};
pub use types::{
    content_hash, ChunkMeta, GraftContent, GraftedItem, RecordKey, RecordRef, ScopedHit,
    TransitionError, ViewError,
};

use index::SlotHit;

/// Default byte size above which `index_chunk` moves a text to the blob store.
pub const DEFAULT_INLINE_MAX: usize = 4096;

/// Everything tunable about a view.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewConfig {
    /// The vector index (HNSW threshold and parameters).
    pub index: IndexConfig,
    /// Mode of text queries ([`SessionView::graft_text`], [`SessionView::query_text`]).
    pub mode: RetrievalMode,
    /// Fusion of the hybrid mode.
    pub hybrid: HybridParams,
    /// Tokenisation of the lexical index.
    pub tokenizer: TokenizerConfig,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// Pseudo-relevance feedback of the lexical index (off by default).
    pub prf: PrfParams,
    /// Neighbour propagation in the lexical list: each chunk's score gains
    /// this share of the scores of the chunks just before and after it in
    /// chain order (0 = off). An answer usually sits next to the turn that
    /// asked for it.
    pub neighbor_weight: f32,
    /// The same for the vector list (cosines are all positive, so this is
    /// best left small or 0).
    pub vector_neighbor_weight: f32,
}

impl Default for ViewConfig {
    fn default() -> Self {
        ViewConfig {
            index: IndexConfig::default(),
            mode: RetrievalMode::default(),
            hybrid: HybridParams::default(),
            tokenizer: TokenizerConfig::default(),
            bm25: Bm25Params::default(),
            prf: PrfParams::default(),
            neighbor_weight: 0.3,
            vector_neighbor_weight: 0.0,
        }
    }
}

/// A query: a vector, a text, or both, with the mode and the states allowed.
#[derive(Debug, Clone, Copy)]
pub struct SearchRequest<'a> {
    /// The query embedding (needed by Vector and Hybrid).
    pub vector: Option<&'a [f32]>,
    /// The query text (needed by Lexical and Hybrid).
    pub text: Option<&'a str>,
    /// How many results.
    pub top_k: usize,
    /// Which index answers. A mode whose input is missing uses what is
    /// there (Hybrid without text is Vector; without a vector, Lexical).
    pub mode: RetrievalMode,
    /// States a result may be in.
    pub states: StateSet,
}

impl<'a> SearchRequest<'a> {
    /// A vector query over every state.
    pub fn vector(v: &'a [f32], top_k: usize) -> Self {
        SearchRequest {
            vector: Some(v),
            text: None,
            top_k,
            mode: RetrievalMode::Vector,
            states: StateSet::ALL,
        }
    }

    /// A lexical query over every state.
    pub fn lexical(text: &'a str, top_k: usize) -> Self {
        SearchRequest {
            vector: None,
            text: Some(text),
            top_k,
            mode: RetrievalMode::Lexical,
            states: StateSet::ALL,
        }
    }

    /// Builder: restrict the states.
    pub fn states(mut self, states: StateSet) -> Self {
        self.states = states;
        self
    }
}

/// Counters describing a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ViewStats {
    /// Indexed chunks.
    pub chunks: usize,
    /// Distinct `chain_seq`s.
    pub records: usize,
    /// Vector slots handed out (live + tombstoned).
    pub slots: usize,
    /// Whether queries use the HNSW graph.
    pub uses_graph: bool,
    /// Distinct lexical terms.
    pub vocabulary: usize,
}

#[derive(Debug)]
struct ChunkEntry {
    meta: ChunkMeta,
    slot: u32,
}

#[derive(Debug)]
struct Event {
    state: NodeState,
    /// Set on the first lifecycle move; `set_speculative` only works before it.
    moved: bool,
    important: bool,
    refs: AtomicU32,
}

/// A record inside the view: (session ordinal, seq). Sessions are numbered in
/// the order their first chunk arrived, so a rebuild (ancestors first) keeps
/// chain order: a fork's inherited records sort before its own.
type Rec = (u32, u64);

/// A chunk inside the view: (session ordinal, seq, part).
type Key = (u32, u64, u32);

fn rec_range(rec: Rec) -> std::ops::RangeInclusive<Key> {
    (rec.0, rec.1, 0)..=(rec.0, rec.1, u32::MAX)
}

#[derive(Debug)]
struct Inner {
    /// Session ids by ordinal, and back.
    sessions: Vec<String>,
    ordinals: HashMap<String, u32>,
    chunks: BTreeMap<Key, ChunkEntry>,
    events: BTreeMap<Rec, Event>,
    slot_keys: Vec<Option<Key>>,
    /// Mirror of each slot's record state, for cheap filtering during search.
    slot_state: Vec<NodeState>,
    vectors: VectorIndex,
    lexical: LexicalIndex,
}

impl Inner {
    fn meta(&self, key: Key) -> Option<ChunkMeta> {
        let e = self.chunks.get(&key)?;
        let mut m = e.meta.clone();
        if let Some(ev) = self.events.get(&(key.0, key.1)) {
            m.state = ev.state;
        }
        Some(m)
    }

    /// The ordinal of a session, if any chunk of it was indexed.
    fn ordinal(&self, session: &str) -> Option<u32> {
        self.ordinals.get(session).copied()
    }

    fn ordinal_or_insert(&mut self, session: &str) -> u32 {
        if let Some(o) = self.ordinal(session) {
            return o;
        }
        let o = self.sessions.len() as u32;
        self.sessions.push(session.to_string());
        self.ordinals.insert(session.to_string(), o);
        o
    }

    fn record_key(&self, rec: Rec) -> RecordKey {
        RecordKey {
            session: self.sessions[rec.0 as usize].clone(),
            seq: rec.1,
        }
    }

    fn set_state(&mut self, rec: Rec, state: NodeState) {
        if let Some(ev) = self.events.get_mut(&rec) {
            ev.state = state;
        }
        for (_, e) in self.chunks.range(rec_range(rec)) {
            self.slot_state[e.slot as usize] = state;
        }
    }

    /// Insert or replace a chunk; returns the replaced chunk's metadata.
    /// The caller has checked the width and filled in `meta.session`.
    ///
    /// A record's lifecycle state belongs to the record, not to the insert:
    /// `meta.state` is the state of a record the view did not hold yet; a
    /// record it holds keeps its state (a Pruned record stays Pruned, a
    /// Committed one is not rewound to Frontier by a re-index).
    fn insert(&mut self, vector: &[f32], meta: ChunkMeta, tokens: &[String]) -> Option<ChunkMeta> {
        let ordinal = self.ordinal_or_insert(&meta.session);
        let key = (ordinal, meta.chain_seq, meta.part);
        let rec = (ordinal, meta.chain_seq);
        let replaced = self.chunks.remove(&key).map(|old| {
            self.vectors.remove(old.slot);
            self.lexical.remove(old.slot);
            self.slot_keys[old.slot as usize] = None;
            old.meta
        });
        let Some(slot) = self.vectors.insert(vector) else {
            return replaced;
        };
        let lex_slot = self.lexical.insert(tokens);
        debug_assert_eq!(slot, lex_slot);
        let changed = replaced
            .as_ref()
            .is_some_and(|old| old.content_hash != meta.content_hash);
        let entry_state = meta.state;
        let ev = self.events.entry(rec).or_insert_with(|| Event {
            state: entry_state,
            moved: false,
            important: false,
            refs: AtomicU32::new(0),
        });
        if changed {
            // New content under an old key: earlier recall signals were about
            // something else. The lifecycle state stays.
            ev.important = false;
            ev.refs.store(0, Ordering::Relaxed);
        }
        let state = ev.state;
        self.slot_keys.push(Some(key));
        self.slot_state.push(state);
        self.chunks.insert(key, ChunkEntry { meta, slot });
        if self.vectors.needs_compaction() {
            self.compact();
        }
        replaced
    }

    fn remove_record(&mut self, rec: Rec) -> Vec<ChunkMeta> {
        let keys: Vec<Key> = self.chunks.range(rec_range(rec)).map(|(k, _)| *k).collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(e) = self.chunks.remove(&k) {
                self.vectors.remove(e.slot);
                self.lexical.remove(e.slot);
                self.slot_keys[e.slot as usize] = None;
                out.push(e.meta);
            }
        }
        self.events.remove(&rec);
        if self.vectors.needs_compaction() {
            self.compact();
        }
        out
    }

    fn compact(&mut self) {
        let map = self.vectors.compact();
        self.lexical.compact(&map);
        let mut keys = vec![None; self.vectors.slots()];
        let mut states = vec![NodeState::Frontier; self.vectors.slots()];
        for (old, new) in map.iter().enumerate() {
            if let Some(new) = new {
                keys[*new as usize] = self.slot_keys[old];
                states[*new as usize] = self.slot_state[old];
            }
        }
        for e in self.chunks.values_mut() {
            if let Some(new) = map[e.slot as usize] {
                e.slot = new;
            }
        }
        self.slot_keys = keys;
        self.slot_state = states;
    }

    /// The slots of the chunks just before and after `slot` in chain order.
    fn neighbours(&self, slot: u32) -> [Option<u32>; 2] {
        use std::ops::Bound::{Excluded, Unbounded};
        let Some(Some(key)) = self.slot_keys.get(slot as usize) else {
            return [None, None];
        };
        let prev = self.chunks.range(..*key).next_back().map(|(_, e)| e.slot);
        let next = self
            .chunks
            .range((Excluded(*key), Unbounded))
            .next()
            .map(|(_, e)| e.slot);
        [prev, next]
    }

    /// Neighbour propagation over a ranked list (see
    /// [`ViewConfig::neighbor_weight`]); slots outside the list count as 0.
    fn propagate(
        &self,
        hits: Vec<SlotHit>,
        weight: f32,
        k: usize,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<SlotHit> {
        if weight == 0.0 || hits.is_empty() {
            return hits;
        }
        let scores: std::collections::HashMap<u32, f32> = hits.iter().copied().collect();
        let mut candidates: Vec<u32> = hits.iter().map(|h| h.0).collect();
        for (slot, _) in &hits {
            candidates.extend(self.neighbours(*slot).into_iter().flatten());
        }
        candidates.sort_unstable();
        candidates.dedup();
        let boosted = candidates.into_iter().filter(|&s| accept(s)).map(|s| {
            let own = scores.get(&s).copied().unwrap_or(0.0);
            let around: f32 = self
                .neighbours(s)
                .into_iter()
                .flatten()
                .map(|n| scores.get(&n).copied().unwrap_or(0.0))
                .sum();
            (s, own + weight * around)
        });
        index::top_k(boosted, k)
    }

    fn search_slots(
        &self,
        req: &SearchRequest,
        tokenizer: &Tokenizer,
        k: usize,
        config: &ViewConfig,
    ) -> Vec<SlotHit> {
        let hybrid = &config.hybrid;
        let (nw, vnw) = (config.neighbor_weight, config.vector_neighbor_weight);
        let states = req.states;
        let slot_state = &self.slot_state;
        let all = |_: u32| true;
        let filtered = |s: u32| states.contains(slot_state[s as usize]);
        let accept: &dyn Fn(u32) -> bool = if states.is_all() { &all } else { &filtered };
        let vector = req.vector.filter(|v| v.len() == self.vectors.dims());
        let mode = match (req.mode, vector.is_some(), req.text.is_some()) {
            (RetrievalMode::Hybrid, true, false) => RetrievalMode::Vector,
            (RetrievalMode::Hybrid, false, true) => RetrievalMode::Lexical,
            (RetrievalMode::Vector, false, _) | (RetrievalMode::Lexical, _, false) => {
                return Vec::new()
            }
            (RetrievalMode::Hybrid, false, false) => return Vec::new(),
            (m, _, _) => m,
        };
        let vector_hits = |k: usize| match vector {
            Some(v) => {
                let hits = self.vectors.search(v, k, accept);
                if hits.len() < k && self.vectors.uses_graph() && self.vectors.len() > hits.len() {
                    // A heavily filtered graph walk can come back short: the
                    // whole session is searched exactly instead.
                    self.vectors.search_exact(v, k, accept)
                } else {
                    hits
                }
            }
            None => Vec::new(),
        };
        let lexical_hits = |k: usize| match req.text {
            Some(t) => self
                .lexical
                .search_prf(&tokenizer.tokens(t), k, accept, &config.prf),
            None => Vec::new(),
        };
        // With propagation, read deeper so that neighbours' scores are known.
        let deep = |k: usize, w: f32| if w == 0.0 { k } else { k.max(hybrid.depth) };
        match mode {
            RetrievalMode::Vector => self.propagate(vector_hits(deep(k, vnw)), vnw, k, accept),
            RetrievalMode::Lexical => self.propagate(lexical_hits(deep(k, nw)), nw, k, accept),
            RetrievalMode::Hybrid => {
                let depth = hybrid.depth.max(k);
                let v = self.propagate(vector_hits(depth), vnw, depth, accept);
                let l = self.propagate(lexical_hits(depth), nw, depth, accept);
                let mut fused = retrieve::fuse(&v, &l, hybrid);
                fused.truncate(k);
                fused
            }
        }
    }

    fn hits(&self, slots: Vec<SlotHit>) -> Vec<ScopedHit> {
        slots
            .into_iter()
            .filter_map(|(slot, score)| {
                let key = (*self.slot_keys.get(slot as usize)?)?;
                Some(ScopedHit {
                    session: self.sessions[key.0 as usize].clone(),
                    chain_seq: key.1,
                    score,
                    meta: self.meta(key)?,
                })
            })
            .collect()
    }
}

/// A session-scoped semantic view (see the module docs). `Send + Sync`;
/// share it as `Arc<SessionView>`.
#[derive(Debug)]
pub struct SessionView {
    session_id: String,
    dims: usize,
    config: ViewConfig,
    tokenizer: Tokenizer,
    inner: RwLock<Inner>,
}

impl SessionView {
    /// An empty view sized to `embedder`'s output width, so the index and
    /// the embedder cannot disagree. The preferred constructor.
    pub fn for_embedder(session_id: impl Into<String>, embedder: &dyn EmbeddingProvider) -> Self {
        Self::new(session_id, embedder.dimensions())
    }

    /// An empty view for `dims`-wide vectors, default configuration.
    pub fn new(session_id: impl Into<String>, dims: usize) -> Self {
        Self::with_config(session_id, dims, ViewConfig::default())
    }

    /// An empty view with an explicit configuration.
    pub fn with_config(session_id: impl Into<String>, dims: usize, config: ViewConfig) -> Self {
        SessionView {
            session_id: session_id.into(),
            dims,
            config,
            tokenizer: Tokenizer::new(config.tokenizer),
            inner: RwLock::new(Inner {
                sessions: Vec::new(),
                ordinals: HashMap::new(),
                chunks: BTreeMap::new(),
                events: BTreeMap::new(),
                slot_keys: Vec::new(),
                slot_state: Vec::new(),
                vectors: VectorIndex::new(dims, config.index),
                lexical: LexicalIndex::new(config.bm25),
            }),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        // Every mutation of `Inner` completes before its guard drops, so a
        // panic elsewhere cannot leave it half-updated: poisoning is ignored.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The session this view is scoped to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The vector width.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The configuration.
    pub fn config(&self) -> &ViewConfig {
        &self.config
    }

    /// The tokenizer of the lexical index.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Number of indexed chunks.
    pub fn len(&self) -> usize {
        self.read().chunks.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.read().chunks.is_empty()
    }

    /// The internal key of a record named by a caller.
    fn rec_of(inner: &Inner, own: &str, r: RecordRef<'_>) -> Option<Rec> {
        let session = r.session.unwrap_or(own);
        Some((inner.ordinal(session)?, r.seq))
    }

    fn unknown(&self, r: RecordRef<'_>) -> TransitionError {
        TransitionError::Unknown {
            session: r.session.unwrap_or(&self.session_id).to_string(),
            seq: r.seq,
        }
    }

    /// The `seq`s of the view's own session's records, ascending (the rebuild
    /// manifest of its own log; see [`SessionView::records`] for every record).
    pub fn chain_seqs(&self) -> Vec<u64> {
        let inner = self.read();
        match inner.ordinal(&self.session_id) {
            Some(o) => inner
                .events
                .range((o, 0)..=(o, u64::MAX))
                .map(|(r, _)| r.1)
                .collect(),
            None => Vec::new(),
        }
    }

    /// Every indexed record, in chain order (a fork's inherited records first).
    pub fn records(&self) -> Vec<RecordKey> {
        let inner = self.read();
        inner.events.keys().map(|r| inner.record_key(*r)).collect()
    }

    /// Every indexed chunk's metadata, in chain order.
    pub fn manifest(&self) -> Vec<ChunkMeta> {
        let inner = self.read();
        inner.chunks.keys().filter_map(|k| inner.meta(*k)).collect()
    }

    /// The first chunk (part 0, else the lowest part) of a record.
    pub fn chunk<'a>(&self, record: impl Into<RecordRef<'a>>) -> Option<ChunkMeta> {
        let inner = self.read();
        let rec = Self::rec_of(&inner, &self.session_id, record.into())?;
        let key = *inner.chunks.range(rec_range(rec)).next()?.0;
        inner.meta(key)
    }

    /// Every chunk of a record, by part.
    pub fn chunks_of<'a>(&self, record: impl Into<RecordRef<'a>>) -> Vec<ChunkMeta> {
        let inner = self.read();
        let Some(rec) = Self::rec_of(&inner, &self.session_id, record.into()) else {
            return Vec::new();
        };
        inner
            .chunks
            .range(rec_range(rec))
            .filter_map(|(k, _)| inner.meta(*k))
            .collect()
    }

    /// Counters.
    pub fn stats(&self) -> ViewStats {
        let inner = self.read();
        ViewStats {
            chunks: inner.chunks.len(),
            records: inner.events.len(),
            slots: inner.vectors.slots(),
            uses_graph: inner.vectors.uses_graph(),
            vocabulary: inner.lexical.vocabulary_size(),
        }
    }

    /// Insert a pre-embedded chunk keyed by `(meta.chain_seq, meta.part)`,
    /// replacing any chunk with that key (idempotent rebuild). The lexical
    /// index gets `meta.inline` (empty for blob or reference chunks; use
    /// [`SessionView::insert_chunk`] to give it the text).
    ///
    /// Returns false, and changes nothing, when `vector` is not
    /// [`SessionView::dims`] wide. Re-inserting the same content keeps the
    /// record's reference count and importance; different content resets them.
    pub fn insert_vector(&self, vector: Vec<f32>, meta: ChunkMeta) -> bool {
        let text = meta.inline.clone().unwrap_or_default();
        self.insert_chunk(&vector, meta, &text)
    }

    /// Like [`SessionView::insert_vector`], with the text the lexical index
    /// should see (usually the embedding input).
    pub fn insert_chunk(&self, vector: &[f32], meta: ChunkMeta, search_text: &str) -> bool {
        self.insert_chunk_replacing(vector, meta, search_text)
            .is_some()
    }

    /// Insert; `Some(replaced)` on success, `None` on a width mismatch.
    fn insert_chunk_replacing(
        &self,
        vector: &[f32],
        meta: ChunkMeta,
        search_text: &str,
    ) -> Option<Option<ChunkMeta>> {
        if vector.len() != self.dims || self.dims == 0 {
            return None;
        }
        let mut meta = meta;
        if meta.session.is_empty() {
            meta.session = self.session_id.clone();
        }
        let tokens = self.tokenizer.tokens(search_text);
        Some(self.write().insert(vector, meta, &tokens))
    }

    /// Drop every chunk of a record from the view (the transcript keeps it).
    /// Returns whether there was any.
    pub fn remove<'a>(&self, record: impl Into<RecordRef<'a>>) -> bool {
        let mut inner = self.write();
        match Self::rec_of(&inner, &self.session_id, record.into()) {
            Some(rec) => !inner.remove_record(rec).is_empty(),
            None => false,
        }
    }

    /// The general query: see [`SearchRequest`]. Results best first; a record
    /// can appear once per part.
    pub fn search(&self, req: &SearchRequest) -> Vec<ScopedHit> {
        if req.top_k == 0 {
            return Vec::new();
        }
        let inner = self.read();
        let slots = inner.search_slots(req, &self.tokenizer, req.top_k, &self.config);
        inner.hits(slots)
    }

    /// The `top_k` chunks nearest to `query` by cosine similarity, best
    /// first, over every state. A wrong-width query returns nothing.
    pub fn query(&self, query: &[f32], top_k: usize) -> Vec<ScopedHit> {
        self.search(&SearchRequest::vector(query, top_k))
    }

    /// Embed `text` (query lane when the mode needs a vector) and search in
    /// the view's configured mode, over every state but Pruned.
    pub fn query_text(
        &self,
        embedder: &dyn EmbeddingProvider,
        text: &str,
        top_k: usize,
    ) -> Result<Vec<ScopedHit>, ViewError> {
        self.query_text_mode(embedder, text, top_k, self.config.mode)
    }

    /// [`SessionView::query_text`] in an explicit mode.
    pub fn query_text_mode(
        &self,
        embedder: &dyn EmbeddingProvider,
        text: &str,
        top_k: usize,
        mode: RetrievalMode,
    ) -> Result<Vec<ScopedHit>, ViewError> {
        let vector = self.embed_query_for(embedder, text, mode)?;
        Ok(self.search(&SearchRequest {
            vector: vector.as_deref(),
            text: Some(text),
            top_k,
            mode,
            states: StateSet::NOT_PRUNED,
        }))
    }

    fn embed_query_for(
        &self,
        embedder: &dyn EmbeddingProvider,
        text: &str,
        mode: RetrievalMode,
    ) -> Result<Option<Vec<f32>>, ViewError> {
        if !mode.needs_vector() {
            return Ok(None);
        }
        let v = embedder.embed_query(text)?;
        if v.len() != self.dims {
            return Err(ViewError::DimensionMismatch {
                expected: self.dims,
                got: v.len(),
            });
        }
        Ok(Some(v))
    }

    /// Search and deduplicate by content hash (best score wins), reading
    /// deeper until `top_k` distinct items are found or the session is
    /// exhausted. No side effects.
    pub fn search_distinct(&self, req: &SearchRequest) -> Vec<ScopedHit> {
        let top_k = req.top_k;
        if top_k == 0 {
            return Vec::new();
        }
        let inner = self.read();
        let total = inner.chunks.len();
        let mut fetch = top_k.saturating_mul(2);
        loop {
            let slots = inner.search_slots(req, &self.tokenizer, fetch, &self.config);
            let exhausted = slots.len() < fetch || fetch >= total;
            let mut seen = HashSet::new();
            let mut out = Vec::with_capacity(top_k);
            for hit in inner.hits(slots) {
                if seen.insert(hit.meta.content_hash.clone()) {
                    out.push(hit);
                    if out.len() == top_k {
                        break;
                    }
                }
            }
            if out.len() >= top_k || exhausted {
                return out;
            }
            fetch = fetch.saturating_mul(2);
        }
    }

    /// Count one recall for each distinct record among `items`.
    fn bump_refs<'a>(&self, items: impl Iterator<Item = &'a GraftedItem>) {
        let inner = self.read();
        let mut seen = HashSet::new();
        for item in items {
            let Some(o) = inner.ordinal(&item.session) else {
                continue;
            };
            if seen.insert((o, item.chain_seq)) {
                if let Some(ev) = inner.events.get(&(o, item.chain_seq)) {
                    ev.refs.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Graft the `top_k` most relevant chunks into the working set: a vector
    /// query over every state but Pruned, deduplicated by content hash (the
    /// best-scoring copy wins), each grafted record's reference count + 1.
    /// The origin is only referenced, never moved.
    pub fn graft(&self, query: &[f32], top_k: usize) -> Vec<GraftedItem> {
        self.graft_with(&SearchRequest::vector(query, top_k).states(StateSet::NOT_PRUNED))
    }

    /// [`SessionView::graft`] for any request (mode, states).
    pub fn graft_with(&self, req: &SearchRequest) -> Vec<GraftedItem> {
        let items: Vec<GraftedItem> = self
            .search_distinct(req)
            .iter()
            .map(GraftedItem::from_hit)
            .collect();
        self.bump_refs(items.iter());
        items
    }

    /// Embed `query_text` on the query lane (`embed_query`) and graft the
    /// `top_k` best chunks in the view's configured mode.
    pub fn graft_text(
        &self,
        embedder: &dyn EmbeddingProvider,
        query_text: &str,
        top_k: usize,
    ) -> Result<Vec<GraftedItem>, ViewError> {
        let mode = self.config.mode;
        let vector = self.embed_query_for(embedder, query_text, mode)?;
        Ok(self.graft_with(&SearchRequest {
            vector: vector.as_deref(),
            text: Some(query_text),
            top_k,
            mode,
            states: StateSet::NOT_PRUNED,
        }))
    }

    /// Embed `text` and index it as `chain_seq` (part 0), entering Frontier.
    /// Texts longer than `inline_max` bytes go to `store` when one is given.
    /// `Ok(false)` when the embedder's width differs from the view's (nothing
    /// is written anywhere then).
    pub fn index_chunk(
        &self,
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
        chain_seq: u64,
        kind: impl Into<String>,
        text: &str,
        inline_max: usize,
    ) -> Result<bool, ViewError> {
        self.index_chunk_with_embed(embedder, store, chain_seq, kind, text, text, inline_max)
    }

    /// Like [`SessionView::index_chunk`] but embeds (and lexically indexes)
    /// `embed_input` while storing and hashing `text`, so dedup stays stable
    /// when the embedding input's format changes.
    #[allow(clippy::too_many_arguments)]
    pub fn index_chunk_with_embed(
        &self,
        embedder: &dyn EmbeddingProvider,
        store: Option<&ArtifactStore>,
        chain_seq: u64,
        kind: impl Into<String>,
        text: &str,
        embed_input: &str,
        inline_max: usize,
    ) -> Result<bool, ViewError> {
        let vector = embedder.embed(embed_input)?;
        let input = chunk::Chunk {
            chain_seq,
            part: 0,
            kind: kind.into(),
            text: text.to_string(),
            embed_input: embed_input.to_string(),
            lexical_input: None,
        };
        self.insert_embedded(&vector, &input, store, inline_max)
    }

    /// Index a chunk whose embedding is already computed: check the width,
    /// externalize a long text to `store`, insert (entering Frontier, in the
    /// view's own session). `Ok(false)` on a width mismatch; see
    /// [`SessionView::insert_embedded_as`] for chunks of another session or
    /// state, which reports it as [`ViewError::DimensionMismatch`].
    pub fn insert_embedded(
        &self,
        vector: &[f32],
        chunk: &Chunk,
        store: Option<&ArtifactStore>,
        inline_max: usize,
    ) -> Result<bool, ViewError> {
        let own = self.session_id.clone();
        match self.insert_embedded_as(vector, chunk, &own, NodeState::Frontier, store, inline_max) {
            Ok(()) => Ok(true),
            Err(ViewError::DimensionMismatch { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Index a chunk of record `(session, chunk.chain_seq)` whose embedding
    /// is already computed. A record the view does not hold yet enters in
    /// `state`; one it holds keeps its state. Texts longer than `inline_max`
    /// bytes go to `store` when one is given; the view holds one blob
    /// reference per externalized chunk: re-indexing the same text takes
    /// none, replacing it drops the old one. A vector that is not
    /// [`SessionView::dims`] wide is refused before anything is written.
    pub fn insert_embedded_as(
        &self,
        vector: &[f32],
        chunk: &Chunk,
        session: &str,
        state: NodeState,
        store: Option<&ArtifactStore>,
        inline_max: usize,
    ) -> Result<(), ViewError> {
        if vector.len() != self.dims || self.dims == 0 {
            return Err(ViewError::DimensionMismatch {
                expected: self.dims,
                got: vector.len(),
            });
        }
        let session = if session.is_empty() {
            self.session_id.as_str()
        } else {
            session
        };
        let hash = content_hash(&chunk.text);
        let (inline, blob_hash, took_ref) = match store {
            Some(store) if chunk.text.len() > inline_max => {
                let existing = {
                    let inner = self.read();
                    inner.ordinal(session).and_then(|o| {
                        inner
                            .chunks
                            .get(&(o, chunk.chain_seq, chunk.part))
                            .and_then(|e| e.meta.blob_hash.clone())
                    })
                };
                if existing.as_deref() == Some(hash.as_str()) && store.contains(&hash) {
                    (None, Some(hash.clone()), false)
                } else {
                    (None, Some(store.put_str(&chunk.text)?), true)
                }
            }
            _ => (Some(chunk.text.clone()), None, false),
        };
        let meta = ChunkMeta {
            session: session.to_string(),
            chain_seq: chunk.chain_seq,
            part: chunk.part,
            content_hash: hash,
            state,
            kind: chunk.kind.clone(),
            blob_hash: blob_hash.clone(),
            inline,
        };
        let Some(replaced) = self.insert_chunk_replacing(vector, meta, chunk.lexical_text()) else {
            return Err(ViewError::DimensionMismatch {
                expected: self.dims,
                got: vector.len(),
            });
        };
        if let (Some(store), Some(old)) = (store, replaced.and_then(|m| m.blob_hash)) {
            // The replaced chunk's reference goes; when it was the same blob
            // and a new reference was taken, that drops the duplicate.
            if took_ref || blob_hash.as_deref() != Some(old.as_str()) {
                store.release(&old)?;
            }
        }
        Ok(())
    }

    /// Release the blob reference of every externalized chunk (call when the
    /// view is dropped for good). Returns how many were released.
    pub fn release_blobs(&self, store: &ArtifactStore) -> Result<usize, BlobError> {
        let hashes: Vec<String> = self
            .read()
            .chunks
            .values()
            .filter_map(|e| e.meta.blob_hash.clone())
            .collect();
        for h in &hashes {
            store.release(h)?;
        }
        Ok(hashes.len())
    }

    // ---- lifecycle -------------------------------------------------------
    //
    // A record is named by a bare `seq` (the view's own session) or by
    // `(session, seq)` (see [`RecordRef`]).

    /// Set a record's state unconditionally (an escape hatch for repair;
    /// prefer [`SessionView::transition`]).
    pub fn set_state<'a>(
        &self,
        record: impl Into<RecordRef<'a>>,
        state: NodeState,
    ) -> Result<(), TransitionError> {
        let r = record.into();
        let mut inner = self.write();
        let rec = Self::rec_of(&inner, &self.session_id, r).ok_or_else(|| self.unknown(r))?;
        let ev = inner.events.get_mut(&rec).ok_or_else(|| self.unknown(r))?;
        ev.moved = true;
        inner.set_state(rec, state);
        Ok(())
    }

    /// The state of a record, if known.
    pub fn state<'a>(&self, record: impl Into<RecordRef<'a>>) -> Option<NodeState> {
        let inner = self.read();
        let rec = Self::rec_of(&inner, &self.session_id, record.into())?;
        inner.events.get(&rec).map(|e| e.state)
    }

    /// Mark a record Speculative: its entry state, ahead of the Frontier.
    /// Works only on a record that has not moved through the lifecycle since
    /// it was indexed (Ok if it already is Speculative); it cannot rewind a
    /// Committed, Stale or Pruned record.
    pub fn set_speculative<'a>(
        &self,
        record: impl Into<RecordRef<'a>>,
    ) -> Result<(), TransitionError> {
        let r = record.into();
        let mut inner = self.write();
        let rec = Self::rec_of(&inner, &self.session_id, r).ok_or_else(|| self.unknown(r))?;
        let ev = inner.events.get(&rec).ok_or_else(|| self.unknown(r))?;
        match (ev.state, ev.moved) {
            (NodeState::Speculative, _) => Ok(()),
            (NodeState::Frontier, false) => {
                inner.set_state(rec, NodeState::Speculative);
                Ok(())
            }
            (from, _) => Err(TransitionError::Illegal {
                from,
                to: NodeState::Speculative,
            }),
        }
    }

    /// Move a record along a legal lifecycle edge
    /// ([`NodeState::can_transition_to`]); on error the state is unchanged.
    pub fn transition<'a>(
        &self,
        record: impl Into<RecordRef<'a>>,
        next: NodeState,
    ) -> Result<(), TransitionError> {
        let r = record.into();
        let mut inner = self.write();
        let rec = Self::rec_of(&inner, &self.session_id, r).ok_or_else(|| self.unknown(r))?;
        let ev = inner.events.get_mut(&rec).ok_or_else(|| self.unknown(r))?;
        if !ev.state.can_transition_to(next) {
            return Err(TransitionError::Illegal {
                from: ev.state,
                to: next,
            });
        }
        ev.moved = true;
        inner.set_state(rec, next);
        Ok(())
    }

    /// Commit a Frontier record to the durable trunk (validated).
    pub fn commit<'a>(&self, record: impl Into<RecordRef<'a>>) -> Result<(), TransitionError> {
        self.transition(record, NodeState::Committed)
    }

    /// Prune a record from the live window: → Stale, still indexed and
    /// re-graftable. Validated: works from Speculative, Frontier and
    /// Committed; refused for already Stale or Pruned records.
    pub fn prune<'a>(&self, record: impl Into<RecordRef<'a>>) -> Result<(), TransitionError> {
        self.transition(record, NodeState::Stale)
    }

    /// Re-graft a record into the live window: → Frontier. Validated: works
    /// from Speculative and Stale; a Pruned record stays pruned.
    pub fn regraft<'a>(&self, record: impl Into<RecordRef<'a>>) -> Result<(), TransitionError> {
        self.transition(record, NodeState::Frontier)
    }

    /// The view's own session's records live in the window (Frontier),
    /// ascending by seq (see [`SessionView::live_records`] for every record).
    pub fn live_seqs(&self) -> Vec<u64> {
        self.live_records()
            .into_iter()
            .filter(|r| r.session == self.session_id)
            .map(|r| r.seq)
            .collect()
    }

    /// Every record live in the window (Frontier), in chain order.
    pub fn live_records(&self) -> Vec<RecordKey> {
        let inner = self.read();
        inner
            .events
            .iter()
            .filter(|(_, e)| e.state == NodeState::Frontier)
            .map(|(r, _)| inner.record_key(*r))
            .collect()
    }

    /// Mark a record important (an explicit promotion signal). False if unknown.
    pub fn mark_important<'a>(&self, record: impl Into<RecordRef<'a>>) -> bool {
        let mut inner = self.write();
        let Some(rec) = Self::rec_of(&inner, &self.session_id, record.into()) else {
            return false;
        };
        match inner.events.get_mut(&rec) {
            Some(ev) => {
                ev.important = true;
                true
            }
            None => false,
        }
    }

    /// Whether a record was marked important (false if unknown).
    pub fn is_important<'a>(&self, record: impl Into<RecordRef<'a>>) -> bool {
        let inner = self.read();
        Self::rec_of(&inner, &self.session_id, record.into())
            .and_then(|rec| inner.events.get(&rec))
            .is_some_and(|e| e.important)
    }

    /// How many grafts have returned this record (0 if unknown).
    pub fn ref_count<'a>(&self, record: impl Into<RecordRef<'a>>) -> u32 {
        let inner = self.read();
        Self::rec_of(&inner, &self.session_id, record.into())
            .and_then(|rec| inner.events.get(&rec))
            .map_or(0, |e| e.refs.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests;
