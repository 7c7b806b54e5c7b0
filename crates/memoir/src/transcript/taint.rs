//! Taint checkpoints positioned against a conversation's messages.
//!
//! A harness appends a `taint` record after the messages of the run it
//! describes, so the checkpoint that covers message `i` is the first one
//! written after it: it may over-taint (a fetch later in the same run counts
//! against earlier messages), never under-taint. After a rewrite the old
//! checkpoints no longer line up with the messages and are dropped, so
//! [`TaintTimeline::covering`] answers `None` — unknown, never clean.

use crate::record::Taint;

/// Checkpoints `(messages before, cumulative taint)`, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaintTimeline {
    checkpoints: Vec<(usize, Taint)>,
}

impl TaintTimeline {
    pub(crate) fn push(&mut self, messages_before: usize, cumulative: Taint) {
        self.checkpoints.push((messages_before, cumulative));
    }

    pub(crate) fn clear(&mut self) {
        self.checkpoints.clear();
    }

    /// The taint of the first checkpoint written after message `i`, or `None`
    /// when no checkpoint covers it (treat `None` as unknown, never as clean).
    pub fn covering(&self, i: usize) -> Option<Taint> {
        self.checkpoints
            .iter()
            .find(|(n, _)| *n > i)
            .map(|(_, t)| *t)
    }

    /// The checkpoints, oldest first.
    pub fn checkpoints(&self) -> &[(usize, Taint)] {
        &self.checkpoints
    }

    /// True when there are no checkpoints.
    pub fn is_empty(&self) -> bool {
        self.checkpoints.is_empty()
    }
}
