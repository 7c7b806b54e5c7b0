//! Replaying verified records into a conversation: the meaning of each record.
//!
//! Backend-independent: takes the records a [`crate::store::LogStore`] verified
//! and folds them into a [`Transcript`]. Rules (kept from the seed, see
//! `docs/FORMAT.md`): a `message` is pushed; a `rewrite` replaces the whole
//! list and drops taint checkpoints; `taint` merges (only grows) and adds a
//! checkpoint; `config` is positioned at the current message count; `summary`
//! adds to the usage totals; the last `title` and `checkpoint` win; unknown
//! kinds are kept verbatim.

use serde_json::Value;

use super::taint::TaintTimeline;
use crate::message::{Message, Usage};
use crate::record::{Record, RunConfig, SessionMeta, Taint};
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
    /// Records of kinds this build does not know, kept verbatim.
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

    /// The config in force when message `i` was written: the last one
    /// positioned at or before `i`.
    pub fn config_covering(&self, i: usize) -> Option<&RunConfig> {
        self.config_positions
            .iter()
            .rposition(|&p| p <= i)
            .map(|k| &self.configs[k])
    }
}
