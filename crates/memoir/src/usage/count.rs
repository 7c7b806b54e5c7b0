//! Exact counting: which stored messages are provider responses, and which of
//! them count, so that each response is counted once in a store.
//!
//! Rules (see `docs/USAGE.md`):
//! - A *response* is a message with [`Usage`]. Its identity is, first match
//!   wins: `extra.source.response_id` (Codex `token_usage_record`), the
//!   message's `provider_id` together with `extra.source.request_id` (Claude
//!   Code `message.id` + `requestId`: one billed request), the `provider_id`
//!   alone (native sessions, lines without a request id), `extra.source.uuid`
//!   (the source line's uuid). A response with none of these is counted once
//!   where it is stored. Two responses that share a `message.id` under
//!   different request ids are different requests and are both counted.
//! - Within one session the *last* message with an identity wins: Claude Code
//!   splits one API message over several lines that repeat (or complete) its
//!   usage.
//! - Across sessions the first session in [`priority order`](order) keeps it:
//!   main sessions before side sessions (sidechains, subagents, `/btw`), then
//!   parents before forks, then oldest first, then by id (so the result does
//!   not depend on the order sessions were imported in).
//! - A *replay*: a sidechain line (`isSidechain`) or a response stored in a
//!   side session that repeats an already counted `message.id` under a new
//!   request id (Claude Code `/btw` writes the parent's messages again this
//!   way) is the same response, not counted again.
//! - A fork counts only its *own* records; what it starts with is its
//!   parent's and is reported as *inherited*, never added to a total.
//!   Messages a `rewrite` (compaction) carries over are not counted again;
//!   messages it drops stay counted (they were billed).
//! - A session whose own messages carry no usage but whose run summaries do
//!   is counted from its summaries (one entry per summary, `turns` requests);
//!   with neither, from its run outcomes (one entry per `outcome`, `turns`
//!   requests, the outcome's model when it names one). A harness writes the
//!   same run's usage to all three, so only one source counts per session.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::price::{Cost, PriceTable};
use crate::error::{Error, Result};
use crate::message::{Message, Usage, SOURCE_KEY};
use crate::record::{ForkPoint, Record, SessionMeta};
use crate::store::{Listed, LogStore, RawLog};

/// How deep a fork chain is followed before counting refuses (cycle guard).
const MAX_CHAIN: usize = 256;

/// One counted response, as the aggregations see it.
#[derive(Debug, Clone)]
pub struct Counted<'a> {
    /// The session it is counted in.
    pub meta: &'a SessionMeta,
    /// The model that produced it (the message's, else the header's, else `unknown`).
    pub model: &'a str,
    /// When it was written: the message's timestamp, else the session's start.
    pub at: DateTime<Utc>,
    /// False when `at` is the session's start because the message has no timestamp.
    pub dated: bool,
    /// Its tokens.
    pub usage: Usage,
    /// How many provider requests it stands for (1, or a run summary's turns).
    pub requests: u64,
    /// What it cost.
    pub cost: Cost,
}

/// What [`walk`] met besides the responses it reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Sessions selected and read.
    pub sessions: usize,
    /// Sessions (or listing entries) that could not be read: totals are lower bounds.
    pub unreadable: usize,
    /// Copies not counted again: repeated within a session (split lines)
    /// or already counted by another session.
    pub duplicates: u64,
}

/// What a walk reports to its visitor.
pub enum Event<'a> {
    /// A selected session was read (reported before its responses).
    Session(&'a SessionMeta),
    /// A response counted in the last reported session.
    Response(&'a Counted<'a>),
}

/// Which sessions and responses a walk reports. Sessions that are not
/// selected are still read (until `stop_after`), so which session owns a
/// response does not depend on the filter.
pub struct Selection<'f> {
    /// Header filter: which sessions are reported.
    pub session: &'f dyn Fn(&SessionMeta) -> bool,
    /// Response filter: which of a selected session's responses are reported.
    pub response: &'f dyn Fn(&str, DateTime<Utc>) -> bool,
    /// Stop after this session (a single-session query).
    pub stop_after: Option<&'f str>,
}

/// A response found in one session's own records, before cross-session
/// de-duplication (what a usage summary keeps per response).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    /// The hashed identity ([`identity`]).
    pub(crate) identity: Option<u128>,
    /// The hashed `message.id` alone, to recognise replays.
    pub(crate) message: Option<u128>,
    /// A sidechain line: it may replay a counted message under a new request id.
    pub(crate) sidechain: bool,
    /// The model it names.
    pub(crate) model: Option<String>,
    /// Its timestamp.
    pub(crate) at: Option<DateTime<Utc>>,
    /// Its tokens.
    pub(crate) usage: Usage,
    /// The requests it stands for.
    pub(crate) requests: u64,
    /// `seq` of the record the copy held was read from.
    pub(crate) seq: u64,
    /// `seq` of the record its first copy was read from: the response is
    /// present from there on ([`Owned::upto`]).
    pub(crate) first_seq: u64,
}

/// The responses one session owns, de-duplicated within the session (last
/// copy wins), before cross-session de-duplication: everything the walk
/// needs from a session's records, so that a usage summary can stand in for
/// them. Messages, run summaries and run outcomes are kept apart: only the
/// first non-empty of the three counts ([`Owned::found`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Owned {
    /// Responses from messages, in first-seen order.
    pub(crate) messages: Vec<Found>,
    /// Responses from run summaries.
    pub(crate) summaries: Vec<Found>,
    /// Responses from run outcomes.
    pub(crate) outcomes: Vec<Found>,
    /// Copies of message responses merged into an earlier one.
    pub(crate) merged: u64,
    /// For a fork whose header names no model: the model its parent chain
    /// last used ([`inherited_model`]), for responses that name none.
    pub(crate) fallback_model: Option<String>,
}

impl Owned {
    /// The responses that count, and the copies merged among them.
    pub(crate) fn found(&self) -> (&[Found], u64) {
        if !self.messages.is_empty() {
            (&self.messages, self.merged)
        } else if !self.summaries.is_empty() {
            (&self.summaries, 0)
        } else {
            (&self.outcomes, 0)
        }
    }

    /// What a session held up to its record `seq` inclusive (a fork
    /// point): the responses that count then, each as it was then, in
    /// first-seen order. `None` when that cannot be told from these alone:
    /// a response present then was replaced by a later copy (the copy held
    /// then is gone).
    pub(crate) fn upto(&self, seq: u64) -> Option<Vec<&Found>> {
        let mut lists: [Vec<&Found>; 3] = Default::default();
        for (list, all) in lists
            .iter_mut()
            .zip([&self.messages, &self.summaries, &self.outcomes])
        {
            for f in all.iter().filter(|f| f.first_seq <= seq) {
                if f.seq > seq {
                    return None;
                }
                list.push(f);
            }
        }
        let [messages, summaries, outcomes] = lists;
        Some(if !messages.is_empty() {
            messages
        } else if !summaries.is_empty() {
            summaries
        } else {
            outcomes
        })
    }

    /// Add one usage-bearing message read from record `seq`
    /// (`by_identity`: the index of each identity in `messages`, kept by
    /// the caller).
    fn push(
        &mut self,
        by_identity: &mut HashMap<u128, usize>,
        m: &Message,
        usage: Usage,
        seq: u64,
    ) {
        self.push_found(
            by_identity,
            Found {
                identity: identity(m),
                message: message_key(m),
                sidechain: is_sidechain_line(m),
                model: m.model.clone().filter(|s| !s.is_empty()),
                at: m.timestamp,
                usage,
                requests: 1,
                seq,
                first_seq: seq,
            },
        );
    }

    /// Add one message response, de-duplicated against those held.
    fn push_found(&mut self, by_identity: &mut HashMap<u128, usize>, f: Found) {
        // A sidechain line repeating a message this session already holds
        // under another request id is a replay: the first copy stays.
        let replay = f.sidechain
            && f.message.is_some_and(|key| {
                self.messages
                    .iter()
                    .any(|g| g.message == Some(key) && g.identity != f.identity)
            });
        if replay {
            self.merged += 1;
            return;
        }
        match f.identity.and_then(|i| by_identity.get(&i).copied()) {
            Some(at) => {
                let first_seq = self.messages[at].first_seq;
                self.messages[at] = Found { first_seq, ..f };
                self.merged += 1;
            }
            None => {
                if let Some(i) = f.identity {
                    by_identity.insert(i, self.messages.len());
                }
                self.messages.push(f);
            }
        }
    }

    /// The index in `messages` of each identity (what [`Owned::extend`]
    /// keeps across several calls).
    pub(crate) fn identities(&self) -> HashMap<u128, usize> {
        self.messages
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.identity.map(|id| (id, i)))
            .collect()
    }

    /// Fold in `later`: what [`Owned::apply`] found in records appended
    /// after these, starting from nothing (so de-duplicated among
    /// themselves only). The result is what applying those records here
    /// gives: each later response is de-duplicated against these in order.
    /// `by_identity` is [`Owned::identities`], kept current.
    pub(crate) fn extend(&mut self, by_identity: &mut HashMap<u128, usize>, later: Owned) {
        for f in later.messages {
            self.push_found(by_identity, f);
        }
        self.summaries.extend(later.summaries);
        self.outcomes.extend(later.outcomes);
        self.merged += later.merged;
        if self.fallback_model.is_none() {
            self.fallback_model = later.fallback_model;
        }
    }

    /// For a fork whose header names no model, with responses that name
    /// none: the model its parent chain last used ([`inherited_model`]),
    /// read once (kept in `fallback_model`).
    pub(crate) fn inherit_model(&mut self, store: &dyn LogStore, meta: &SessionMeta) {
        let (found, _) = self.found();
        if self.fallback_model.is_none()
            && meta.model.is_empty()
            && meta.parent.is_some()
            && found.iter().any(|f| f.model.is_none())
        {
            self.fallback_model = inherited_model(store, meta);
        }
    }

    /// Fold records appended after the ones this was computed from, the
    /// first of them numbered `first_seq` (then one `seq` each). False
    /// (`self` then partly updated: discard it) when that cannot be done
    /// without the earlier records: a `rewrite` needs what was present.
    pub(crate) fn apply(&mut self, records: &[Record], first_seq: u64) -> bool {
        if records.iter().any(|r| matches!(r, Record::Rewrite { .. })) {
            return false;
        }
        let mut by_identity = self.identities();
        for (seq, r) in (first_seq..).zip(records) {
            self.record(&mut by_identity, r, seq);
        }
        true
    }

    /// Fold one record that is not a `rewrite`, numbered `seq`.
    fn record(&mut self, by_identity: &mut HashMap<u128, usize>, record: &Record, seq: u64) {
        match record {
            Record::Message(m) => {
                if let Some(u) = m.usage {
                    self.push(by_identity, m, u, seq);
                }
            }
            Record::Summary(s) if !s.usage.is_zero() => self.summaries.push(Found {
                identity: None,
                message: None,
                sidechain: false,
                model: None,
                at: None,
                usage: s.usage,
                requests: u64::from(s.turns.max(1)),
                seq,
                first_seq: seq,
            }),
            Record::Outcome(o) if !o.usage.is_zero() => self.outcomes.push(Found {
                identity: None,
                message: None,
                sidechain: false,
                model: o.model.clone().filter(|m| !m.is_empty()),
                at: None,
                usage: o.usage,
                requests: u64::from(o.turns.max(1)),
                seq,
                first_seq: seq,
            }),
            _ => {}
        }
    }
}

/// What one session of a walk brings: its header and the responses it owns
/// (`None` when its records could not be read: unreadable if selected).
pub(crate) struct SessionResponses {
    /// The verified header.
    pub(crate) meta: SessionMeta,
    /// Its responses.
    pub(crate) owned: Option<Owned>,
}

/// Everything a store-wide walk reads: the sessions in listing order (each
/// loaded on demand) and how many listing entries were unreadable.
pub(crate) trait SessionSource {
    /// Every session's header (as a listing sees it) and the count of
    /// unreadable listing entries.
    fn list(&mut self) -> Result<(Vec<Listed>, usize)>;
    /// The responses of a listed session; `Ok(None)` to skip it (deleted
    /// since the listing, or unreadable and not selected).
    fn load(&mut self, listed: &Listed, selected: bool) -> Result<Option<SessionResponses>>;
    /// A loaded session the walk is done with, handed back (kept by a
    /// source that answers [`Ancestors`] after the walk).
    fn done(&mut self, _session: SessionResponses) {}
}

/// Reads every session's records from the store (no summary).
pub(crate) struct Scan<'s> {
    /// The store.
    pub(crate) store: &'s dyn LogStore,
}

impl SessionSource for Scan<'_> {
    fn list(&mut self) -> Result<(Vec<Listed>, usize)> {
        self.store.list()
    }

    fn load(&mut self, listed: &Listed, selected: bool) -> Result<Option<SessionResponses>> {
        let raw = match self.store.read(&listed.meta.id) {
            Ok(raw) => raw,
            Err(Error::NotFound(_)) => return Ok(None), // deleted since the listing
            Err(_) if !selected => return Ok(None),
            Err(_) => {
                return Ok(Some(SessionResponses {
                    meta: listed.meta.clone(),
                    owned: None,
                }))
            }
        };
        let Some(meta) = raw.header.clone() else {
            return Ok(selected.then(|| SessionResponses {
                meta: listed.meta.clone(),
                owned: None,
            }));
        };
        let owned = owned(self.store, &meta, &raw)?;
        Ok(Some(SessionResponses {
            meta,
            owned: Some(owned),
        }))
    }
}

/// Walk every session of `store` in priority order, reporting selected
/// sessions and the responses they own. Bounded memory: one session at a
/// time, plus one 16-byte identity per counted response.
pub fn walk(
    store: &dyn LogStore,
    selection: &Selection<'_>,
    prices: &PriceTable,
    visit: &mut dyn FnMut(Event<'_>),
) -> Result<WalkStats> {
    walk_source(&mut Scan { store }, selection, prices, visit)
}

/// [`walk`] over the sessions `source` gives (a store's records, or their
/// usage summaries): one implementation of the cross-session rules.
pub(crate) fn walk_source(
    source: &mut dyn SessionSource,
    selection: &Selection<'_>,
    prices: &PriceTable,
    visit: &mut dyn FnMut(Event<'_>),
) -> Result<WalkStats> {
    let (listed, unreadable) = source.list()?;
    let mut stats = WalkStats {
        unreadable,
        ..WalkStats::default()
    };
    let mut seen: HashSet<u128> = HashSet::new();
    let mut seen_messages: HashSet<u128> = HashSet::new();
    for listed in order(listed) {
        let selected = (selection.session)(&listed.meta);
        let Some(SessionResponses { meta, owned }) = source.load(&listed, selected)? else {
            continue;
        };
        let Some(owned) = owned else {
            stats.unreadable += usize::from(selected);
            continue;
        };
        let (found, merged) = owned.found();
        let side = is_side_session(&meta);
        let last = selection.stop_after.is_some_and(|s| s == meta.id);
        if selected {
            stats.sessions += 1;
            stats.duplicates += merged;
            visit(Event::Session(&meta));
        }
        for f in found {
            let replay =
                (side || f.sidechain) && f.message.is_some_and(|m| seen_messages.contains(&m));
            if replay || f.identity.is_some_and(|identity| !seen.insert(identity)) {
                stats.duplicates += u64::from(selected);
                continue;
            }
            if let Some(m) = f.message {
                seen_messages.insert(m);
            }
            if !selected {
                continue;
            }
            let model = f
                .model
                .as_deref()
                .or(owned.fallback_model.as_deref())
                .unwrap_or_else(|| header_model(&meta));
            let at = f.at.unwrap_or(meta.created_at);
            if !(selection.response)(model, at) {
                continue;
            }
            let counted = Counted {
                meta: &meta,
                model,
                at,
                dated: f.at.is_some(),
                usage: f.usage,
                requests: f.requests,
                cost: prices.cost(model, &f.usage),
            };
            visit(Event::Response(&counted));
        }
        source.done(SessionResponses {
            meta,
            owned: Some(owned),
        });
        if last {
            break;
        }
    }
    Ok(stats)
}

/// What a fork starts with, by reference: the responses its ancestors own up
/// to each fork point, each counted once along the chain. Empty for a
/// session that is not a fork. An unreadable ancestor is an error (the
/// inherited figure would be wrong, not merely partial).
pub fn inherited(
    store: &dyn LogStore,
    meta: &SessionMeta,
    prices: &PriceTable,
    visit: &mut dyn FnMut(&Counted<'_>),
) -> Result<()> {
    inherited_from(store, &NoAncestors, meta, prices, visit)
}

/// Where a fork's ancestors' responses come from before their logs: the
/// usage summaries a report has read.
pub(crate) trait Ancestors {
    /// Session `id`'s header and what it held up to its record `seq`
    /// ([`Owned::upto`]); `None` when that cannot be told exactly without
    /// its log (no summary of it, an unreadable one, or a response replaced
    /// after `seq`).
    fn upto(&self, id: &str, seq: u64) -> Option<(&SessionMeta, Vec<&Found>)>;
}

/// No summaries: every ancestor is read from its log.
pub(crate) struct NoAncestors;

impl Ancestors for NoAncestors {
    fn upto(&self, _id: &str, _seq: u64) -> Option<(&SessionMeta, Vec<&Found>)> {
        None
    }
}

/// [`inherited`], taking each ancestor from `ancestors` when it can tell
/// exactly, else from its log.
pub(crate) fn inherited_from(
    store: &dyn LogStore,
    ancestors: &dyn Ancestors,
    meta: &SessionMeta,
    prices: &PriceTable,
    visit: &mut dyn FnMut(&Counted<'_>),
) -> Result<()> {
    let mut seen: HashSet<u128> = HashSet::new();
    let mut seen_messages: HashSet<u128> = HashSet::new();
    let mut next = meta.parent.clone();
    let mut depth = 0;
    while let Some(fork) = next {
        depth += 1;
        if depth > MAX_CHAIN {
            return Err(Error::Invalid(format!(
                "fork chain of {} deeper than {MAX_CHAIN} (cycle?)",
                meta.id
            )));
        }
        crate::id::validate(&fork.session)?;
        let read;
        let (parent, found) = match ancestors.upto(&fork.session, fork.seq) {
            Some((parent, found)) => (parent, found),
            None => {
                let raw = store.read(&fork.session)?;
                let parent = raw
                    .header
                    .clone()
                    .ok_or_else(|| Error::NoHeader(store.location(&fork.session)))?;
                let found = own_responses(store, &parent, &raw, Some(fork.seq))?.0;
                read = (parent, found);
                (&read.0, read.1.iter().collect())
            }
        };
        let side = is_side_session(parent);
        for f in found {
            let replay =
                (side || f.sidechain) && f.message.is_some_and(|m| seen_messages.contains(&m));
            if replay || f.identity.is_some_and(|identity| !seen.insert(identity)) {
                continue;
            }
            if let Some(m) = f.message {
                seen_messages.insert(m);
            }
            let model = f.model.as_deref().unwrap_or_else(|| header_model(parent));
            visit(&Counted {
                meta: parent,
                model,
                at: f.at.unwrap_or(parent.created_at),
                dated: f.at.is_some(),
                usage: f.usage,
                requests: f.requests,
                cost: prices.cost(model, &f.usage),
            });
        }
        next = parent.parent.clone();
    }
    Ok(())
}

/// The model a fork's parent chain last used (its last response naming one,
/// else a header naming one), for a fork's responses that name none: an
/// agent states its model once, and a fork inherits it by reference.
fn inherited_model(store: &dyn LogStore, meta: &SessionMeta) -> Option<String> {
    let mut next = meta.parent.clone();
    for _ in 0..MAX_CHAIN {
        let fork = next?;
        let raw = store.read(&fork.session).ok()?;
        let parent = raw.header.clone()?;
        let last = raw
            .records
            .iter()
            .take_while(|r| r.seq <= fork.seq)
            .filter_map(|r| match &r.record {
                Record::Message(m) => m.model.clone(),
                Record::Rewrite { messages } => messages.iter().rev().find_map(|m| m.model.clone()),
                _ => None,
            })
            .filter(|m| !m.is_empty())
            .last();
        if let Some(model) = last {
            return Some(model);
        }
        if !parent.model.is_empty() {
            return Some(parent.model);
        }
        next = parent.parent;
    }
    None
}

/// The model named by a session's header, or `unknown`.
fn header_model(meta: &SessionMeta) -> &str {
    if meta.model.is_empty() {
        "unknown"
    } else {
        &meta.model
    }
}

/// True for a side session: a sidechain, subagent or `/btw` copy, whose
/// responses a main session keeps when both hold them. Recognised from the
/// header: `kind` (or the importer's `source.kind`) `subagent` or
/// `sidechain`, or a `source` with `sidechain`/`is_sidechain: true` or a
/// non-null `subagent`/`parent_session`.
pub fn is_side_session(meta: &SessionMeta) -> bool {
    let side_kind = |k: Option<&str>| matches!(k, Some("subagent" | "sidechain"));
    if side_kind(meta.kind.as_deref()) {
        return true;
    }
    let Some(source) = &meta.source else {
        return false;
    };
    let flag = |k: &str| source.extra.get(k).and_then(Value::as_bool) == Some(true);
    let present = |k: &str| source.extra.get(k).is_some_and(|v| !v.is_null());
    side_kind(source.extra.get("kind").and_then(Value::as_str))
        || flag("sidechain")
        || flag("is_sidechain")
        || present("subagent")
        || present("parent_session")
}

/// The priority order: main sessions before side sessions, shallower forks
/// first, then oldest first, then by id. Computed from headers only.
pub fn order(mut listed: Vec<Listed>) -> Vec<Listed> {
    let parents: HashMap<String, Option<String>> = listed
        .iter()
        .map(|l| {
            (
                l.meta.id.clone(),
                l.meta.parent.as_ref().map(|p| p.session.clone()),
            )
        })
        .collect();
    let depth = |id: &str| {
        let mut d = 0usize;
        let mut cur = parents.get(id).cloned().flatten();
        while let Some(p) = cur {
            d += 1;
            if d > MAX_CHAIN {
                break;
            }
            cur = parents.get(&p).cloned().flatten();
        }
        d
    };
    let mut keyed: Vec<(bool, usize, Listed)> = listed
        .drain(..)
        .map(|l| (is_side_session(&l.meta), depth(&l.meta.id), l))
        .collect();
    keyed.sort_by(|a, b| {
        (a.0, a.1, a.2.meta.created_at, &a.2.meta.id).cmp(&(
            b.0,
            b.1,
            b.2.meta.created_at,
            &b.2.meta.id,
        ))
    });
    keyed.into_iter().map(|(_, _, l)| l).collect()
}

/// The identity of a response (see the module docs), hashed to 128 bits.
pub fn identity(m: &Message) -> Option<u128> {
    let text = |k: &str| source_text(m, k);
    let key = if let Some(r) = text("response_id") {
        format!("response\0{r}")
    } else if let Some(p) = m.provider_id.as_deref().filter(|p| !p.is_empty()) {
        match text("request_id") {
            Some(req) => format!("request\0{p}\0{req}"),
            None => format!("message\0{p}"),
        }
    } else if let Some(u) = text("uuid") {
        format!("line\0{u}")
    } else {
        return None;
    };
    Some(hash128(key.as_bytes()))
}

/// The hashed `provider_id` (Claude Code `message.id`) alone: what a replay
/// under a new request id shares with the response it repeats.
fn message_key(m: &Message) -> Option<u128> {
    let p = m.provider_id.as_deref().filter(|p| !p.is_empty())?;
    Some(hash128(format!("message\0{p}").as_bytes()))
}

/// True for a Claude Code sidechain line (`isSidechain: true`, kept in the
/// import trace's `entry`, or `is_sidechain` on the trace itself).
fn is_sidechain_line(m: &Message) -> bool {
    let Some(source) = m.extra.get(SOURCE_KEY).and_then(Value::as_object) else {
        return false;
    };
    let flag = |v: Option<&Value>| v.and_then(Value::as_bool) == Some(true);
    flag(source.get("is_sidechain")) || flag(source.get("entry").and_then(|e| e.get("isSidechain")))
}

/// A non-empty string field of the message's import trace.
fn source_text<'m>(m: &'m Message, key: &str) -> Option<&'m str> {
    m.extra
        .get(SOURCE_KEY)
        .and_then(Value::as_object)
        .and_then(|s| s.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn hash128(bytes: &[u8]) -> u128 {
    let h = blake3::hash(bytes);
    let mut first = [0u8; 16];
    first.copy_from_slice(&h.as_bytes()[..16]);
    u128::from_le_bytes(first)
}

/// A message's content hash, to recognise the copies a `rewrite` carries over.
fn content_hash(m: &Message) -> Result<u128> {
    Ok(hash128(&serde_json::to_vec(m)?))
}

/// The responses a session owns (its whole log `raw`), with the model its
/// responses that name none fall back on (a fork's parent chain).
pub(crate) fn owned(store: &dyn LogStore, meta: &SessionMeta, raw: &RawLog) -> Result<Owned> {
    let mut owned = owned_upto(store, meta, raw, None)?;
    owned.inherit_model(store, meta);
    Ok(owned)
}

/// The responses a session's own records hold (up to `upto` inclusive),
/// de-duplicated within the session (last copy wins), and how many copies
/// were merged.
fn own_responses(
    store: &dyn LogStore,
    meta: &SessionMeta,
    raw: &RawLog,
    upto: Option<u64>,
) -> Result<(Vec<Found>, u64)> {
    let owned = owned_upto(store, meta, raw, upto)?;
    let (found, merged) = owned.found();
    Ok((found.to_vec(), merged))
}

/// [`Owned`] of a session's records up to `upto` inclusive.
fn owned_upto(
    store: &dyn LogStore,
    meta: &SessionMeta,
    raw: &RawLog,
    upto: Option<u64>,
) -> Result<Owned> {
    let mut owned = Owned::default();
    let mut by_identity: HashMap<u128, usize> = HashMap::new();
    // Content hashes of the usage-bearing messages present so far; built on
    // the first rewrite (rare), then kept up to date.
    let mut present: Option<HashSet<u128>> = None;
    let records = raw
        .records
        .iter()
        .take_while(|r| upto.is_none_or(|u| r.seq <= u));
    for (index, rec) in records.enumerate() {
        match &rec.record {
            Record::Rewrite { messages } => {
                if present.is_none() {
                    present = Some(present_before(store, meta, raw, index)?);
                }
                let mut now = HashSet::new();
                for m in messages {
                    let Some(u) = m.usage else { continue };
                    let h = content_hash(m)?;
                    let carried = present.as_ref().is_some_and(|set| set.contains(&h));
                    if !carried {
                        owned.push(&mut by_identity, m, u, rec.seq);
                    }
                    now.insert(h);
                }
                // Dropped messages stay counted; what the rewrite keeps is present.
                if let Some(set) = present.as_mut() {
                    set.extend(now);
                }
            }
            other => {
                if let (Record::Message(m), Some(set)) = (other, present.as_mut()) {
                    if m.usage.is_some() {
                        set.insert(content_hash(m)?);
                    }
                }
                owned.record(&mut by_identity, other, rec.seq);
            }
        }
    }
    Ok(owned)
}

/// Content hashes of the usage-bearing messages a session held before its
/// record number `index`: the inherited prefix of a fork, and its own.
fn present_before(
    store: &dyn LogStore,
    meta: &SessionMeta,
    raw: &RawLog,
    index: usize,
) -> Result<HashSet<u128>> {
    let mut set = HashSet::new();
    if let Some(fork) = &meta.parent {
        let prefix = inherited_messages(store, fork);
        for m in prefix.iter().filter(|m| m.usage.is_some()) {
            set.insert(content_hash(m)?);
        }
    }
    for rec in &raw.records[..index] {
        let messages: &[Message] = match &rec.record {
            Record::Message(m) => std::slice::from_ref(m),
            Record::Rewrite { messages } => messages,
            _ => &[],
        };
        for m in messages.iter().filter(|m| m.usage.is_some()) {
            set.insert(content_hash(m)?);
        }
    }
    Ok(set)
}

/// The messages a fork starts with (empty when the parent is unreadable:
/// then a rewrite's copies of them count as own, an over- not an undercount
/// of a session whose parent is gone).
fn inherited_messages(store: &dyn LogStore, fork: &ForkPoint) -> Vec<Message> {
    crate::transcript::read_at(store, fork)
        .map(|t| t.messages)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SourceRef;

    fn with_source(source: Value) -> Message {
        let mut m = Message::assistant("x");
        m.extra.insert(SOURCE_KEY.into(), source);
        m
    }

    #[test]
    fn identity_prefers_the_response_id_then_message_and_request_ids() {
        let mut a = with_source(serde_json::json!({"response_id": "resp_1", "uuid": "u1"}));
        a.provider_id = Some("msg_1".into());
        let b = with_source(serde_json::json!({"response_id": "resp_1", "uuid": "u2"}));
        assert_eq!(identity(&a), identity(&b));
        // Same message id under two request ids: two billed requests
        // (a replay is recognised separately, by `message_key`).
        let mut c = with_source(serde_json::json!({"request_id": "req_1", "uuid": "u4"}));
        c.provider_id = Some("msg_9".into());
        let mut d = with_source(serde_json::json!({"request_id": "req_2", "uuid": "u4"}));
        d.provider_id = Some("msg_9".into());
        assert_ne!(identity(&c), identity(&d));
        assert_eq!(message_key(&c), message_key(&d));
        // Streamed lines of one response: same message and request ids.
        let mut c2 = with_source(serde_json::json!({"request_id": "req_1", "uuid": "u5"}));
        c2.provider_id = Some("msg_9".into());
        assert_eq!(identity(&c), identity(&c2));
        // A message id and a response id with the same text are different keys.
        let mut e = Message::assistant("x");
        e.provider_id = Some("resp_1".into());
        assert_ne!(identity(&e), identity(&b));
        assert_eq!(identity(&Message::assistant("x")), None);
        assert!(identity(&with_source(serde_json::json!({"uuid": "u3"}))).is_some());
    }

    #[test]
    fn side_sessions_are_recognised_from_the_header() {
        let mut meta = SessionMeta::new("s");
        assert!(!is_side_session(&meta));
        meta.source = Some(SourceRef {
            agent: "claude-code".into(),
            agent_version: None,
            session: None,
            path: None,
            extra: serde_json::Map::new(),
        });
        assert!(!is_side_session(&meta));
        for extra in [
            serde_json::json!({"kind": "subagent"}),
            serde_json::json!({"sidechain": true}),
            serde_json::json!({"parent_session": "cc-main"}),
        ] {
            let mut m = meta.clone();
            if let (Some(src), Value::Object(o)) = (m.source.as_mut(), extra) {
                src.extra = o;
            }
            assert!(is_side_session(&m));
        }
        let mut branch = meta.clone();
        if let Some(src) = branch.source.as_mut() {
            src.extra.insert("kind".into(), "branch".into());
        }
        assert!(
            !is_side_session(&branch),
            "a rewind branch is a fork, not a side session"
        );
    }
}
