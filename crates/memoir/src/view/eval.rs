//! Retrieval evaluation on LoCoMo-format conversations (`memoir eval locomo`).
//!
//! Protocol (see `testdata/README.md`): one view per conversation, one
//! chunk per dialog turn whose stored text is `"<speaker>: <text>"` plus
//! `" [image: <caption>]"` when the turn has a caption; every question of
//! categories 1–4 that has evidence is asked; recall@k is the mean over
//! questions of the fraction of evidence turns (`dia_id`s) among the top k.
//!
//! What is searched can differ from what is stored: [`ChunkStyle`] adds the
//! session date and neighbouring turns to a chunk's embedding/lexical input
//! (the grafted text stays the bare turn), which is how the default reaches
//! its recall. Latency is measured per question: the query embedding plus
//! the search, and the search alone.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::embed::EmbeddingProvider;
use crate::error::IoContext;

use super::chunk::Chunk;
use super::types::ViewError;
use super::{RetrievalMode, SearchRequest, SessionView, StateSet, ViewConfig};

/// One dialog turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The turn id, e.g. `D3:14` (session 3, turn 14).
    pub dia_id: String,
    /// Who spoke.
    pub speaker: String,
    /// What they said.
    pub text: String,
    /// The caption of a shared image, when there is one.
    pub caption: Option<String>,
    /// The session number.
    pub session: u32,
    /// The session's date and time as written in the data.
    pub date: String,
}

impl Turn {
    /// The protocol's chunk text: `Speaker: text [image: caption]`.
    pub fn chunk_text(&self) -> String {
        match &self.caption {
            Some(c) => format!("{}: {} [image: {c}]", self.speaker, self.text),
            None => format!("{}: {}", self.speaker, self.text),
        }
    }
}

/// One question with its evidence turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The question text.
    pub question: String,
    /// Evidence `dia_id`s.
    pub evidence: Vec<String>,
    /// LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).
    pub category: u32,
}

/// One conversation: its turns in order and its questions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// The sample id (e.g. `conv-26`).
    pub sample_id: String,
    /// Every turn, sessions in order.
    pub turns: Vec<Turn>,
    /// The questions kept by the protocol (categories 1–4 with evidence).
    pub questions: Vec<Question>,
}

fn bad(msg: impl Into<String>) -> ViewError {
    ViewError::Invalid(msg.into())
}

/// Parse a LoCoMo JSON array.
pub fn parse_locomo(text: &str) -> Result<Vec<Conversation>, ViewError> {
    let root: Value = serde_json::from_str(text).map_err(|e| bad(format!("LoCoMo JSON: {e}")))?;
    let samples = root
        .as_array()
        .ok_or_else(|| bad("LoCoMo file: not a JSON array"))?;
    let mut out = Vec::new();
    for (i, sample) in samples.iter().enumerate() {
        let sample_id = sample
            .get("sample_id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("sample-{i}"), str::to_string);
        let conv = sample
            .get("conversation")
            .and_then(Value::as_object)
            .ok_or_else(|| bad(format!("{sample_id}: no conversation object")))?;
        let mut sessions: Vec<u32> = conv
            .keys()
            .filter_map(|k| k.strip_prefix("session_")?.parse().ok())
            .collect();
        sessions.sort_unstable();
        let mut turns = Vec::new();
        for s in sessions {
            let Some(list) = conv.get(&format!("session_{s}")).and_then(Value::as_array) else {
                continue;
            };
            let date = conv
                .get(&format!("session_{s}_date_time"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            for t in list {
                let field = |k: &str| t.get(k).and_then(Value::as_str).map(str::to_string);
                turns.push(Turn {
                    dia_id: field("dia_id").unwrap_or_default(),
                    speaker: field("speaker").unwrap_or_default(),
                    text: field("text").unwrap_or_default(),
                    caption: field("blip_caption").filter(|c| !c.trim().is_empty()),
                    session: s,
                    date: date.clone(),
                });
            }
        }
        let mut questions = Vec::new();
        for q in sample
            .get("qa")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let category = q.get("category").and_then(Value::as_u64).unwrap_or(0) as u32;
            let evidence: Vec<String> = q
                .get("evidence")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .flat_map(|e| e.split(';'))
                .map(|e| e.trim().to_string())
                .filter(|e| !e.is_empty())
                .collect();
            let question = q
                .get("question")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if (1..=4).contains(&category) && !evidence.is_empty() && !question.is_empty() {
                questions.push(Question {
                    question: question.to_string(),
                    evidence,
                    category,
                });
            }
        }
        out.push(Conversation {
            sample_id,
            turns,
            questions,
        });
    }
    Ok(out)
}

/// Read and parse a LoCoMo file.
pub fn load_locomo(path: &Path) -> Result<Vec<Conversation>, ViewError> {
    let text = std::fs::read_to_string(path).ctx("read", path)?;
    parse_locomo(&text)
}

/// What goes into a turn's embedding and lexical inputs besides its text.
/// The default is the tuned one: date and one turn of context on each side
/// in the lexical input, speaker names left out of it; the bare turn text
/// (with speaker) embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkStyle {
    /// Prefix the session date to the lexical input.
    pub date: bool,
    /// Turns of same-session context on each side in the lexical input.
    pub neighbors: usize,
    /// Turns of same-session context on each side in the embedding input.
    pub vector_neighbors: usize,
    /// Keep the `Speaker:` prefixes in the lexical input.
    pub speaker: bool,
}

impl Default for ChunkStyle {
    fn default() -> Self {
        ChunkStyle {
            date: true,
            neighbors: 1,
            vector_neighbors: 0,
            speaker: false,
        }
    }
}

/// A turn's input: optional date, then the turns `[i - n, i + n]` of its session.
fn context_input(turns: &[Turn], i: usize, n: usize, date: bool, speaker: bool) -> String {
    let t = &turns[i];
    let mut parts = Vec::new();
    if date && !t.date.is_empty() {
        parts.push(format!("[{}]", t.date));
    }
    let lo = i.saturating_sub(n);
    let hi = (i + n).min(turns.len() - 1);
    for other in &turns[lo..=hi] {
        if other.session == t.session {
            if speaker {
                parts.push(other.chunk_text());
            } else {
                let mut text = other.text.clone();
                if let Some(c) = &other.caption {
                    text.push_str(&format!(" [image: {c}]"));
                }
                parts.push(text);
            }
        }
    }
    parts.join(" ")
}

/// Build the chunks of a conversation: `chain_seq` = turn index.
pub fn turn_chunks(turns: &[Turn], style: &ChunkStyle) -> Vec<Chunk> {
    (0..turns.len())
        .map(|i| {
            let embed_input = context_input(turns, i, style.vector_neighbors, false, true);
            let lexical = context_input(turns, i, style.neighbors, style.date, style.speaker);
            Chunk {
                chain_seq: i as u64,
                part: 0,
                kind: "dialog.turn".into(),
                text: turns[i].chunk_text(),
                lexical_input: (lexical != embed_input).then_some(lexical),
                embed_input,
            }
        })
        .collect()
}

/// Evaluation settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvalOptions {
    /// Which index answers.
    pub mode: RetrievalMode,
    /// The views' configuration.
    pub view: ViewConfig,
    /// Chunk inputs.
    pub style: ChunkStyle,
    /// Texts per embedding batch.
    pub batch: usize,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            mode: RetrievalMode::default(),
            view: ViewConfig::default(),
            style: ChunkStyle::default(),
            batch: 64,
        }
    }
}

/// The cut-offs recall is reported at.
pub const RECALL_KS: [usize; 4] = [1, 5, 10, 20];

/// Recall of one question category: (category, questions, `[(k, recall)]`
/// for each of [`RECALL_KS`]).
pub type CategoryRecall = (u32, usize, Vec<(usize, f64)>);

/// Results of an evaluation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EvalReport {
    /// Conversations indexed.
    pub conversations: usize,
    /// Turns indexed.
    pub turns: usize,
    /// Questions asked.
    pub questions: usize,
    /// Mean recall at each of [`RECALL_KS`].
    pub recall: Vec<(usize, f64)>,
    /// Recall@10 per category (category, questions, recall).
    pub recall10_by_category: Vec<(u32, usize, f64)>,
    /// Recall at each of [`RECALL_KS`] per category: (category, questions,
    /// `[(k, recall)]`).
    pub recall_by_category: Vec<CategoryRecall>,
    /// Query latency (embedding + search), median, milliseconds.
    pub query_p50_ms: f64,
    /// Query latency (embedding + search), 99th percentile, milliseconds.
    pub query_p99_ms: f64,
    /// Search alone, median, milliseconds.
    pub search_p50_ms: f64,
    /// Search alone, 99th percentile, milliseconds.
    pub search_p99_ms: f64,
    /// Time spent building the views (embedding included), seconds.
    pub index_secs: f64,
}

/// The `q`-quantile (0..=1) of `values` (nearest rank; 0 for none).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let idx = ((v.len() - 1) as f64 * q).ceil() as usize;
    v[idx.min(v.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Index every conversation and ask every question.
pub fn evaluate(
    conversations: &[Conversation],
    embedder: &dyn EmbeddingProvider,
    opts: &EvalOptions,
) -> Result<EvalReport, ViewError> {
    let max_k = RECALL_KS[RECALL_KS.len() - 1];
    let mut sums = [0.0f64; RECALL_KS.len()];
    let mut by_cat: std::collections::BTreeMap<u32, (usize, [f64; RECALL_KS.len()])> =
        Default::default();
    let (mut query_lat, mut search_lat) = (Vec::new(), Vec::new());
    let mut questions = 0usize;
    let mut turns = 0usize;
    let mut index_time = Duration::ZERO;
    for conv in conversations {
        let started = Instant::now();
        let view =
            SessionView::with_config(conv.sample_id.clone(), embedder.dimensions(), opts.view);
        let chunks = turn_chunks(&conv.turns, &opts.style);
        if opts.mode.needs_vector() {
            for batch in chunks.chunks(opts.batch.max(1)) {
                let inputs: Vec<&str> = batch.iter().map(|c| c.embed_input.as_str()).collect();
                let vectors = embedder.embed_batch(&inputs)?;
                for (c, v) in batch.iter().zip(&vectors) {
                    if !view.insert_embedded(v, c, None, usize::MAX)? {
                        return Err(ViewError::DimensionMismatch {
                            expected: view.dims(),
                            got: v.len(),
                        });
                    }
                }
            }
        } else {
            // Lexical only: any vector of the right width will do.
            let zero = vec![0.0f32; view.dims()];
            for c in &chunks {
                view.insert_embedded(&zero, c, None, usize::MAX)?;
            }
        }
        index_time += started.elapsed();
        turns += chunks.len();
        for q in &conv.questions {
            let t0 = Instant::now();
            let vector = if opts.mode.needs_vector() {
                Some(embedder.embed_query(&q.question)?)
            } else {
                None
            };
            let t1 = Instant::now();
            let hits = view.search(&SearchRequest {
                vector: vector.as_deref(),
                text: Some(&q.question),
                top_k: max_k,
                mode: opts.mode,
                states: StateSet::ALL,
            });
            let t2 = Instant::now();
            query_lat.push(ms(t2 - t0));
            search_lat.push(ms(t2 - t1));
            let ranked: Vec<&str> = hits
                .iter()
                .filter_map(|h| conv.turns.get(h.chain_seq as usize))
                .map(|t| t.dia_id.as_str())
                .collect();
            for (i, &k) in RECALL_KS.iter().enumerate() {
                let top: HashSet<&str> = ranked.iter().take(k).copied().collect();
                let found = q
                    .evidence
                    .iter()
                    .filter(|e| top.contains(e.as_str()))
                    .count();
                let r = found as f64 / q.evidence.len() as f64;
                sums[i] += r;
                by_cat
                    .entry(q.category)
                    .or_insert((0, [0.0; RECALL_KS.len()]))
                    .1[i] += r;
            }
            if let Some(e) = by_cat.get_mut(&q.category) {
                e.0 += 1;
            }
            questions += 1;
        }
    }
    let n = questions.max(1) as f64;
    Ok(EvalReport {
        conversations: conversations.len(),
        turns,
        questions,
        recall: RECALL_KS
            .iter()
            .zip(sums)
            .map(|(&k, s)| (k, s / n))
            .collect(),
        recall10_by_category: by_cat
            .iter()
            .map(|(&c, &(q, s))| {
                let at10 = RECALL_KS
                    .iter()
                    .position(|&k| k == 10)
                    .map_or(0.0, |i| s[i]);
                (c, q, at10 / q.max(1) as f64)
            })
            .collect(),
        recall_by_category: by_cat
            .iter()
            .map(|(&c, &(q, s))| {
                let per_k = RECALL_KS
                    .iter()
                    .zip(s)
                    .map(|(&k, v)| (k, v / q.max(1) as f64))
                    .collect();
                (c, q, per_k)
            })
            .collect(),
        query_p50_ms: quantile(&query_lat, 0.5),
        query_p99_ms: quantile(&query_lat, 0.99),
        search_p50_ms: quantile(&search_lat, 0.5),
        search_p99_ms: quantile(&search_lat, 0.99),
        index_secs: index_time.as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"[{"sample_id":"c1","conversation":{"speaker_a":"A","speaker_b":"B",
      "session_2_date_time":"2 Jan","session_2":[{"speaker":"A","dia_id":"D2:1","text":"later"}],
      "session_1_date_time":"1 Jan","session_1":[
        {"speaker":"A","dia_id":"D1:1","text":"hello"},
        {"speaker":"B","dia_id":"D1:2","text":"look","blip_caption":"a red kite"}]},
      "qa":[{"question":"q1","evidence":["D1:2; D2:1"],"category":1},
            {"question":"q5","evidence":["D1:1"],"category":5},
            {"question":"q0","evidence":[],"category":2}]}]"#;

    #[test]
    fn parses_sessions_in_order_and_keeps_protocol_questions() {
        let c = parse_locomo(SAMPLE).unwrap();
        assert_eq!(c.len(), 1);
        let ids: Vec<&str> = c[0].turns.iter().map(|t| t.dia_id.as_str()).collect();
        assert_eq!(ids, vec!["D1:1", "D1:2", "D2:1"]);
        assert_eq!(c[0].turns[1].chunk_text(), "B: look [image: a red kite]");
        assert_eq!(c[0].questions.len(), 1);
        assert_eq!(c[0].questions[0].evidence, vec!["D1:2", "D2:1"]);
        assert!(parse_locomo("{}").is_err());
    }

    #[test]
    fn chunk_styles() {
        let c = parse_locomo(SAMPLE).unwrap();
        let plain = turn_chunks(
            &c[0].turns,
            &ChunkStyle {
                date: false,
                neighbors: 0,
                vector_neighbors: 0,
                speaker: true,
            },
        );
        assert_eq!(plain[0].embed_input, "A: hello");
        assert_eq!(plain[0].lexical_text(), "A: hello");
        let ctx = turn_chunks(
            &c[0].turns,
            &ChunkStyle {
                date: true,
                neighbors: 1,
                vector_neighbors: 0,
                speaker: true,
            },
        );
        assert_eq!(
            ctx[0].lexical_text(),
            "[1 Jan] A: hello B: look [image: a red kite]"
        );
        assert_eq!(
            ctx[1].lexical_text(),
            "[1 Jan] A: hello B: look [image: a red kite]"
        );
        assert_eq!(ctx[1].embed_input, "B: look [image: a red kite]");
        assert_eq!(
            ctx[2].lexical_text(),
            "[2 Jan] A: later",
            "neighbours stay in their session"
        );
        assert_eq!(ctx[2].embed_input, "A: later");
        assert_eq!(ctx[1].text, "B: look [image: a red kite]");
    }

    #[test]
    fn per_category_recall_adds_up_to_the_overall_figures() {
        let convs =
            parse_locomo(include_str!("../../../../testdata/locomo-synthetic.json")).unwrap();
        let embedder = crate::embed::HashEmbedder::new(64);
        for mode in [RetrievalMode::Lexical, RetrievalMode::Hybrid] {
            let opts = EvalOptions {
                mode,
                ..EvalOptions::default()
            };
            let r = evaluate(&convs, &embedder, &opts).unwrap();
            assert!(r.questions > 0);
            assert!(r.recall_by_category.len() > 1, "several categories");
            let counted: usize = r.recall_by_category.iter().map(|c| c.1).sum();
            assert_eq!(counted, r.questions);
            for (i, &(k, overall)) in r.recall.iter().enumerate() {
                let weighted: f64 = r
                    .recall_by_category
                    .iter()
                    .map(|(_, n, per_k)| {
                        assert_eq!(per_k[i].0, k);
                        per_k[i].1 * *n as f64
                    })
                    .sum::<f64>()
                    / r.questions as f64;
                assert!(
                    (weighted - overall).abs() < 1e-9,
                    "k={k}: {weighted} vs {overall}"
                );
            }
            for ((c, n, per_k), (c10, n10, r10)) in
                r.recall_by_category.iter().zip(&r.recall10_by_category)
            {
                assert_eq!((c, n), (c10, n10));
                assert_eq!(per_k.iter().find(|p| p.0 == 10).map(|p| p.1), Some(*r10));
                assert!(
                    per_k.windows(2).all(|w| w[0].1 <= w[1].1),
                    "recall grows with k"
                );
            }
        }
    }
}
