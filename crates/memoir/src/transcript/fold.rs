//! Reading a session into a [`Transcript`] while its store verifies it.
//!
//! The records are folded in as the store hands them over
//! ([`LogStore::read_each`]), so a load never holds the whole record list
//! and the messages at once; a fork's parent prefix is stitched in first,
//! as soon as the header names the parent. Peak memory is then the
//! messages plus the few chunks the reader has in flight.

use super::blobs::Resolver;
use super::{verify_parent, Transcript, MAX_FORK_DEPTH};
use crate::error::{Error, Result, StoreError};
use crate::record::{ForkPoint, Record, SessionMeta};
use crate::store::{header_project, Issue, IssueKind, LogStore, RecordSink, SeqRecord};

/// Whose records are read.
enum Role<'f> {
    /// The session asked for: every record; a parent that does not stitch
    /// is reported in the transcript, not fatal.
    Own,
    /// An ancestor of a fork: its records up to the cut, without its run
    /// summaries (a fork never duplicates usage); a parent that is not the
    /// one the fork was cut from is an error.
    Ancestor {
        fork: &'f ForkPoint,
        child_project: Option<&'f str>,
        child: &'f str,
    },
}

/// The [`RecordSink`] that replays one log into a transcript.
struct Fold<'s, 'f> {
    store: &'s dyn LogStore,
    role: Role<'f>,
    depth: usize,
    /// Started by the header.
    transcript: Option<Transcript>,
    /// Why an ancestor's header was refused.
    refused: Option<Error>,
    payloads: Resolver,
}

impl Fold<'_, '_> {
    /// The transcript the records after `meta` apply to: the parent's
    /// prefix when `meta` names one.
    fn start(&self, meta: &SessionMeta) -> Result<Transcript> {
        let mut t = Transcript::new(meta.clone());
        let project = header_project(meta);
        match (&self.role, &meta.parent) {
            (Role::Own, Some(fork)) => {
                match stitch_parent(self.store, fork, project, &meta.id, self.depth) {
                    Ok(prefix) => {
                        t.messages = prefix.messages;
                        t.message_seqs = prefix.message_seqs;
                        t.inherited = t.messages.len();
                        t.taint = prefix.taint;
                        t.taint_timeline = prefix.taint_timeline;
                        t.configs = prefix.configs;
                        t.config_positions = prefix.config_positions;
                        t.report.issues.extend(prefix.report.issues);
                        t.report.blobs.extend(prefix.report.blobs);
                    }
                    Err(e) => t.report.issues.push(Issue {
                        line: 1,
                        offset: 0,
                        seq: 0,
                        kind: IssueKind::SkippedCorrupt(format!(
                            "fork parent {} unreadable: {e}",
                            fork.session
                        )),
                    }),
                }
            }
            (Role::Own, None) => {}
            (
                Role::Ancestor {
                    fork,
                    child_project,
                    child,
                },
                grand,
            ) => {
                verify_parent(meta, *child_project, fork).map_err(|reason| {
                    Error::from(StoreError::ForeignParent {
                        session: child.to_string(),
                        parent: fork.session.clone(),
                        reason,
                    })
                })?;
                if let Some(grand) = grand {
                    let prefix =
                        stitch_parent(self.store, grand, project, &fork.session, self.depth + 1)?;
                    t = Transcript {
                        meta: meta.clone(),
                        inherited: prefix.messages.len(),
                        ..prefix
                    };
                }
            }
        }
        Ok(t)
    }
}

impl RecordSink for Fold<'_, '_> {
    fn header(&mut self, meta: &SessionMeta) {
        match self.start(meta) {
            Ok(t) => self.transcript = Some(t),
            Err(e) => self.refused = Some(e),
        }
    }

    fn expect(&mut self, records: usize) {
        let Some(t) = self.transcript.as_mut() else {
            return;
        };
        // Most records are messages; an ancestor stops at the cut.
        let more = match &self.role {
            Role::Own => records,
            Role::Ancestor { fork, .. } => fork.messages.saturating_sub(t.messages.len()),
        };
        t.messages.reserve_exact(more);
        t.message_seqs.reserve_exact(more);
    }

    fn record(&mut self, rec: SeqRecord) {
        // No transcript: no header yet (the read fails), or a refused one.
        let Some(t) = self.transcript.as_mut() else {
            return;
        };
        if let Role::Ancestor { fork, .. } = &self.role {
            if rec.seq > fork.seq || is_run_record(&rec.record) {
                return;
            }
        }
        let rec = self.payloads.resolve_record(rec, &mut t.report);
        t.apply(rec);
    }
}

/// Records about the runs of the log that holds them (usage totals, run
/// outcomes and what refers to them): a fork does not inherit its parent's.
fn is_run_record(record: &Record) -> bool {
    matches!(
        record,
        Record::Summary(_)
            | Record::Outcome(_)
            | Record::LateFailure(_)
            | Record::PendingNote { .. }
            | Record::Promotion(_)
    )
}

/// Read session `id` of `store` into a transcript, stitching the parent
/// prefix of a fork (`depth` ancestors deep so far).
pub(super) fn read_depth(store: &dyn LogStore, id: &str, depth: usize) -> Result<Transcript> {
    let mut fold = Fold {
        store,
        role: Role::Own,
        depth,
        transcript: None,
        refused: None,
        payloads: Resolver::new(store),
    };
    let raw = store.read_each(id, &mut fold)?;
    let (Some(_), Some(mut t)) = (raw.header, fold.transcript) else {
        return Err(Error::NoHeader(store.location(id)));
    };
    t.last_seq = raw.last_seq;
    t.report.issues.extend(raw.report.issues);
    t.messages.shrink_to_fit();
    t.message_seqs.shrink_to_fit();
    Ok(t)
}

/// The parent's state at the fork point: its records up to the cut `seq`,
/// without its run summaries (a fork never duplicates usage).
pub(super) fn stitch_parent(
    store: &dyn LogStore,
    fork: &ForkPoint,
    child_project: Option<&str>,
    child: &str,
    depth: usize,
) -> Result<Transcript> {
    if depth >= MAX_FORK_DEPTH {
        return Err(Error::Invalid(format!(
            "fork chain deeper than {MAX_FORK_DEPTH} (cycle?)"
        )));
    }
    crate::id::validate(&fork.session)?;
    let mut fold = Fold {
        store,
        role: Role::Ancestor {
            fork,
            child_project,
            child,
        },
        depth,
        transcript: None,
        refused: None,
        payloads: Resolver::new(store),
    };
    let raw = store.read_each(&fork.session, &mut fold)?;
    if raw.header.is_none() {
        return Err(Error::NoHeader(store.location(&fork.session)));
    }
    if let Some(e) = fold.refused {
        return Err(e);
    }
    let Some(mut t) = fold.transcript else {
        return Err(Error::NoHeader(store.location(&fork.session)));
    };
    t.report
        .issues
        .extend(raw.report.issues.into_iter().filter(|i| i.seq <= fork.seq));
    Ok(t)
}
