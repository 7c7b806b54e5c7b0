//! Every turn a session's log ever held, with its provenance: the input of a
//! view rebuild.
//!
//! A [`crate::transcript::Transcript`] holds the conversation *now*: after a
//! compaction (`rewrite`) the turns it dropped are gone from it, though the
//! log still has them. Recall must still find them (grafting them back after
//! a compaction is the point), so the view is built from the [`History`]:
//! every message of every `message` and `rewrite` record (the seed's
//! `messages_ever`), each once, in first-seen order, marked [`Turn::current`]
//! when the conversation still holds it.
//!
//! Provenance is `(session, seq)`: the session whose log holds the record
//! that first wrote the message, and that record's `seq`. A fork's inherited
//! turns name the ancestor (they keep the parent's seqs), its own turns name
//! the fork, so a fork's own `seq` 1 and its parent's `seq` 1 are two keys.
//! A message a `rewrite` carries over unchanged keeps its first provenance;
//! the messages a rewrite introduces (a summary) carry the rewrite's seq.
//! A message is "the same" when its JSON serialisation is (the seed's rule).
//! The history of a fork is the history of its parent up to the fork point,
//! then its own records.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::message::Message;
use crate::record::{ForkPoint, Record};
use crate::store::{Issue, IssueKind, LoadReport, LogStore};

/// How deep fork chains may go before the reader refuses (cycle guard).
const MAX_FORK_DEPTH: usize = 256;

/// One message the log held at some point.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// The session whose log holds the record that first wrote it.
    pub session: String,
    /// That record's `seq`.
    pub seq: u64,
    /// The message.
    pub message: Message,
    /// Whether the conversation still holds it (false: a rewrite dropped it).
    pub current: bool,
}

/// Every turn of a session, in first-seen order (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The session.
    pub session: String,
    /// Every turn, in first-seen order (a fork's inherited turns first).
    pub turns: Vec<Turn>,
    /// Problems met while reading (the logs' own, and unresolvable blobs).
    pub report: LoadReport,
}

impl History {
    /// Read the history of session `id` of `store` (stitching a fork's
    /// ancestors up to their fork points, resolving payloads externalized
    /// to the store's blob store).
    pub fn read(store: &dyn LogStore, id: &str) -> Result<History> {
        let mut b = Builder::default();
        read_log(store, id, None, 0, &mut b)?;
        let Builder {
            turns,
            current,
            report,
            ..
        } = b;
        let mut turns = turns;
        for t in &mut turns {
            t.current = false;
        }
        for &i in &current {
            turns[i].current = true;
        }
        Ok(History {
            session: id.to_string(),
            turns,
            report,
        })
    }

    /// How many turns the conversation holds now.
    pub fn current_len(&self) -> usize {
        self.turns.iter().filter(|t| t.current).count()
    }

    /// The turns no longer in the conversation (dropped by a rewrite).
    pub fn dropped(&self) -> impl Iterator<Item = &Turn> {
        self.turns.iter().filter(|t| !t.current)
    }
}

#[derive(Default)]
struct Builder {
    turns: Vec<Turn>,
    /// The conversation now, as indices into `turns`.
    current: Vec<usize>,
    /// Serialisation hash of each turn, computed on the first rewrite.
    keys: Vec<Option<blake3::Hash>>,
    report: LoadReport,
}

fn key_of(m: &Message) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    // A Message always serialises; an empty key would only merge nothing.
    if let Ok(bytes) = serde_json::to_vec(m) {
        h.update(&bytes);
    }
    h.finalize()
}

impl Builder {
    fn key(&mut self, i: usize) -> blake3::Hash {
        if self.keys.len() < self.turns.len() {
            self.keys.resize(self.turns.len(), None);
        }
        *self.keys[i].get_or_insert_with(|| key_of(&self.turns[i].message))
    }

    fn push(&mut self, session: &str, seq: u64, message: Message) -> usize {
        self.turns.push(Turn {
            session: session.to_string(),
            seq,
            message,
            current: true,
        });
        self.turns.len() - 1
    }

    fn rewrite(&mut self, session: &str, seq: u64, messages: Vec<Message>) {
        // The messages held now, by serialisation, in order (a rewrite that
        // keeps a message keeps its provenance); then every earlier turn (a
        // message that comes back is the same turn).
        let mut held: HashMap<blake3::Hash, Vec<usize>> = HashMap::new();
        for &i in self.current.clone().iter().rev() {
            let k = self.key(i);
            held.entry(k).or_default().push(i);
        }
        let mut earlier: HashMap<blake3::Hash, usize> = HashMap::new();
        for i in (0..self.turns.len()).rev() {
            let k = self.key(i);
            earlier.insert(k, i);
        }
        let mut next = Vec::with_capacity(messages.len());
        for m in messages {
            let k = key_of(&m);
            let reused = held
                .get_mut(&k)
                .and_then(Vec::pop)
                .or_else(|| earlier.get(&k).copied().filter(|i| !next.contains(i)));
            match reused {
                Some(i) => next.push(i),
                None => {
                    let i = self.push(session, seq, m);
                    self.key(i);
                    self.keys[i] = Some(k);
                    next.push(i);
                }
            }
        }
        self.current = next;
    }
}

/// Fold the log of `id` (up to `cut` when it is an ancestor) into `b`.
fn read_log(
    store: &dyn LogStore,
    id: &str,
    cut: Option<u64>,
    depth: usize,
    b: &mut Builder,
) -> Result<()> {
    if depth >= MAX_FORK_DEPTH {
        return Err(Error::Invalid(format!(
            "fork chain deeper than {MAX_FORK_DEPTH} (cycle?)"
        )));
    }
    crate::id::validate(id)?;
    let raw = store.read(id)?;
    let meta = raw
        .header
        .clone()
        .ok_or_else(|| Error::NoHeader(store.location(id)))?;
    if let Some(ForkPoint { session, seq, .. }) = &meta.parent {
        // As the transcript reader does: an unreadable ancestor is reported,
        // and the fork's own turns are still read.
        if let Err(e) = read_log(store, session, Some(*seq), depth + 1, b) {
            b.report.issues.push(Issue {
                line: 1,
                offset: 0,
                seq: 0,
                kind: IssueKind::SkippedCorrupt(format!("fork parent {session} unreadable: {e}")),
            });
        }
    }
    let within = |seq: u64| cut.is_none_or(|c| seq <= c);
    b.report
        .issues
        .extend(raw.report.issues.into_iter().filter(|i| within(i.seq)));
    let mut payloads = crate::transcript::blobs::Resolver::new(store);
    for rec in raw.records.into_iter().take_while(|r| within(r.seq)) {
        let seq = rec.seq;
        match rec.record {
            Record::Message(mut m) => {
                payloads.resolve_message(&mut m, seq, &mut b.report);
                let i = b.push(id, seq, m);
                b.current.push(i);
            }
            Record::Rewrite { mut messages } => {
                for m in &mut messages {
                    payloads.resolve_message(m, seq, &mut b.report);
                }
                b.rewrite(id, seq, messages);
            }
            _ => {}
        }
    }
    Ok(())
}
