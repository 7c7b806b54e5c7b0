//! Replaying verified records into a conversation: the meaning of each record.
//!
//! Backend-independent: takes the records a [`crate::store::LogStore`] verified
//! and folds them into a [`Transcript`]. Rules (kept from the seed, see
//! `docs/FORMAT.md`): a `message` is pushed; a `rewrite` replaces the whole
//! list and drops taint checkpoints; `taint` merges (only grows) and adds a
//! checkpoint; `config` is positioned at the current message count; `summary`
//! adds to the usage totals; the last `title` and `checkpoint` win; an
//! `outcome` is collected with the (provider, model) in force (the header's,
//! then each `config`'s; the row's own when it names them); a `late_failure`
//! adds a tool error to the outcome it names (ignored, and kept in
//! [`Transcript::unknown`], when that outcome is not in the log before it);
//! `pending_note`s are owed until the next `outcome`; `promotion`s are
//! collected; unknown kinds are kept verbatim.

use serde_json::Value;

use super::taint::TaintTimeline;
use crate::message::{Message, Usage};
use crate::record::{Promotion, Record, RunConfig, RunStats, SessionMeta, Taint};

/// One run's outcome as a transcript read it: where it is and the
/// (provider, model) it is attributed to.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributedOutcome {
    /// The `seq` of its record.
    pub seq: u64,
    /// The provider in force: the row's own, else the last `config`'s, else
    /// the header's (empty when none says).
    pub provider: String,
    /// The model in force, likewise.
    pub model: String,
    /// The row, with every `late_failure` against it applied.
    pub stats: RunStats,
}
use crate::store::{LoadReport, SeqRecord};

/// Everything a transcript says, read in one pass.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The header.
    pub meta: SessionMeta,
    /// The current conversation.
    pub messages: Vec<Message>,
    /// For each message, the `seq` of the record that put it there (in the
    /// parent's log for messages a fork inherited; see [`Transcript::inherited`]).
    pub message_seqs: Vec<u64>,
    /// How many leading messages came from the parent of a fork (0 otherwise).
    pub inherited: usize,
    /// The accumulated taint.
    pub taint: Taint,
    /// Taint checkpoints positioned against the messages.
    pub taint_timeline: TaintTimeline,
    /// Every run configuration, in order.
    pub configs: Vec<RunConfig>,
    /// For each config, the number of messages before it.
    pub config_positions: Vec<usize>,
    /// Summed run summaries: usage and turns.
    pub usage: Usage,
    /// Summed turns of every run summary.
    pub turns: u32,
    /// The current title: the last `title` record, else the header's.
    pub title: Option<String>,
    /// The last checkpoint value (`None` when never set or cleared with `null`).
    pub checkpoint: Option<Value>,
    /// Every run outcome of this session's own log, in order (a fork's
    /// parent's are not inherited, as its summaries are not).
    pub outcomes: Vec<AttributedOutcome>,
    /// Harness notes written since the last outcome, still owed to a run.
    pub pending_notes: Vec<String>,
    /// Facts promoted from this session, with their lineage, in order.
    pub promotions: Vec<Promotion>,
    /// Records of kinds this build does not know, kept verbatim (and
    /// `late_failure`s naming no earlier outcome).
    pub unknown: Vec<SeqRecord>,
    /// Every problem met while reading.
    pub report: LoadReport,
    /// The `seq` of the last verified record of this session's own log.
    pub last_seq: u64,
}

impl Transcript {
    /// An empty transcript for `meta`.
    pub fn new(meta: SessionMeta) -> Self {
        Transcript {
            title: meta.title.clone(),
            meta,
            messages: Vec::new(),
            message_seqs: Vec::new(),
            inherited: 0,
            taint: Taint::default(),
            taint_timeline: TaintTimeline::default(),
            configs: Vec::new(),
            config_positions: Vec::new(),
            usage: Usage::default(),
            turns: 0,
            checkpoint: None,
            outcomes: Vec::new(),
            pending_notes: Vec::new(),
            promotions: Vec::new(),
            unknown: Vec::new(),
            report: LoadReport::default(),
            last_seq: 0,
        }
    }

    /// Apply one record.
    pub fn apply(&mut self, rec: SeqRecord) {
        let seq = rec.seq;
        match rec.record {
            Record::Meta(_) => {}
            Record::Message(m) => {
                self.messages.push(m);
                self.message_seqs.push(seq);
            }
            Record::Rewrite { messages } => self.rewrite(seq, messages),
            Record::Config(c) => {
                self.configs.push(*c);
                self.config_positions.push(self.messages.len());
            }
            Record::Summary(s) => {
                self.usage.add(&s.usage);
                self.turns = self.turns.saturating_add(s.turns);
            }
            Record::Taint(t) => {
                self.taint.merge(t);
                self.taint_timeline.push(self.messages.len(), self.taint);
            }
            Record::Title { title } => self.title = Some(title),
            Record::Checkpoint { value } => {
                self.checkpoint = (!value.is_null()).then_some(value);
            }
            Record::Outcome(stats) => {
                let config = self.configs.last();
                let in_force = |own: &Option<String>, config: Option<&String>, meta: &String| {
                    own.clone()
                        .or_else(|| config.filter(|c| !c.is_empty()).cloned())
                        .unwrap_or_else(|| meta.clone())
                };
                let provider = in_force(
                    &stats.provider,
                    config.map(|c| &c.provider),
                    &self.meta.provider,
                );
                let model = in_force(&stats.model, config.map(|c| &c.model), &self.meta.model);
                self.pending_notes.clear();
                self.outcomes.push(AttributedOutcome {
                    seq,
                    provider,
                    model,
                    stats: *stats,
                });
            }
            Record::LateFailure(late) => match self.outcomes.get_mut(late.run as usize) {
                Some(o) => o.stats.tool_errors = o.stats.tool_errors.saturating_add(1),
                None => self.unknown.push(SeqRecord {
                    seq,
                    record: Record::LateFailure(late),
                }),
            },
            Record::PendingNote { note } => self.pending_notes.push(note),
            Record::Promotion(p) => self.promotions.push(*p),
            record @ Record::Unknown { .. } => self.unknown.push(SeqRecord { seq, record }),
        }
    }

    fn rewrite(&mut self, seq: u64, messages: Vec<Message>) {
        let in_place =
            messages.len() >= self.messages.len() || self.messages[..messages.len()] == *messages;
        for pos in &mut self.config_positions {
            *pos = if in_place {
                (*pos).min(messages.len())
            } else {
                0
            };
        }
        // Messages the rewrite left unchanged keep their original seq.
        let seqs = messages
            .iter()
            .enumerate()
            .map(|(i, m)| match self.messages.get(i) {
                Some(old) if old == m => self.message_seqs[i],
                _ => seq,
            })
            .collect();
        let unchanged = messages
            .iter()
            .zip(&self.messages)
            .take(self.inherited)
            .take_while(|(a, b)| a == b)
            .count();
        self.inherited = unchanged;
        self.message_seqs = seqs;
        self.messages = messages;
        self.taint_timeline.clear();
    }

    /// The episode: every outcome folded ([`RunStats::fold`]); `None` when
    /// the session recorded no outcome.
    pub fn episode(&self) -> Option<RunStats> {
        RunStats::fold(self.outcomes.iter().map(|o| &o.stats))
    }

    /// The config in force when message `i` was written: the last one
    /// positioned at or before `i`.
    pub fn config_covering(&self, i: usize) -> Option<&RunConfig> {
        self.config_positions
            .iter()
            .rposition(|&p| p <= i)
            .map(|k| &self.configs[k])
    }
}
