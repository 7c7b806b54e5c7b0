//! Revisions: the states a session had just before each of its own
//! `rewrite` records (a pop, a clear, a compaction, a prune), and forks of a
//! session as it was at any record. A rewrite never destroys anything (the
//! replaced messages stay in the log); these make the old states reachable:
//! an undo is a fork of the state before the rewrite, by reference.

use serde::Serialize;

use super::{ForkTarget, Forked, ManagerError, Result, SessionManager};
use crate::record::{ForkPoint, Record};
use crate::store::LogStore;
use crate::transcript::read_at;

/// A state of a session that one of its own rewrites replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revision {
    /// The `seq` of the rewrite record that replaced the state.
    pub rewrite_seq: u64,
    /// The state's last record (`rewrite_seq - 1`): fork at it to get the state back.
    pub seq: u64,
    /// How many messages the state had (a fork's inherited ones included).
    pub messages: usize,
    /// How many messages the rewrite left.
    pub after: usize,
}

impl SessionManager {
    /// The states that session `id`'s own rewrites replaced, oldest first.
    pub fn revisions(&mut self, id: &str) -> Result<Vec<Revision>> {
        crate::id::validate(id)?;
        self.flush_if_current(id)?;
        self.require_live(id)?;
        let raw = self.reader.read(id)?;
        let mut out = Vec::new();
        for rec in &raw.records {
            if let Record::Rewrite { messages } = &rec.record {
                let seq = rec.seq.saturating_sub(1);
                let before = read_at(self.reader.as_ref(), &ForkPoint::new(id, seq, 0))?;
                out.push(Revision {
                    rewrite_seq: rec.seq,
                    seq,
                    messages: before.messages.len(),
                    after: messages.len(),
                });
            }
        }
        Ok(out)
    }

    /// Fork session `source_id` as it was at its record `at_seq` (its
    /// current end when `None`): every record up to it, later ones (rewrites
    /// included) ignored. The child references that point; nothing is
    /// copied. Unlike [`SessionManager::fork_session_as`], whose cut is a
    /// number of the *current* messages, this reaches states a rewrite
    /// replaced ([`SessionManager::revisions`]). A state without messages
    /// cannot be forked ([`ManagerError::EmptyFork`]).
    pub fn fork_session_at_seq(
        &mut self,
        source_id: &str,
        at_seq: Option<u64>,
        target: ForkTarget,
    ) -> Result<Forked> {
        crate::id::validate(source_id)?;
        if let Some(id) = &target.id {
            crate::id::validate(id)?;
        }
        self.flush_if_current(source_id)?;
        let now = self.read_session(source_id)?;
        let seq = at_seq.unwrap_or(now.last_seq);
        if seq > now.last_seq {
            return Err(crate::Error::Invalid(format!(
                "seq {seq} is past the end of session {source_id} (its last seq is {})",
                now.last_seq
            ))
            .into());
        }
        let mut point = ForkPoint::new(source_id, seq, 0);
        let state = read_at(self.reader.as_ref(), &point)?;
        let messages = state.messages.len();
        if messages == 0 {
            return Err(ManagerError::EmptyFork {
                session: source_id.to_string(),
                requested: 0,
            });
        }
        point.messages = messages;
        let plan = super::fork::ForkPlan {
            point,
            rewrite: None,
        };
        let (child, plan) = self.create_fork(source_id, &now, &state.messages, plan, target)?;
        Ok(Forked {
            id: child.meta.id,
            requested: messages,
            effective: messages,
            parent: plan.point,
            materialized: false,
        })
    }
}
