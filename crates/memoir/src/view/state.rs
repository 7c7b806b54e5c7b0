//! The lifecycle of a chunk in the working window ([`NodeState`]) and sets of
//! states used as query filters ([`StateSet`]).
//!
//! The nine legal moves (self-moves are not moves):
//!
//! | from \ to   | Speculative | Frontier | Committed | Stale | Pruned |
//! |-------------|-------------|----------|-----------|-------|--------|
//! | Speculative | –           | yes      | no        | yes   | yes    |
//! | Frontier    | no          | –        | yes       | yes   | yes    |
//! | Committed   | no          | no       | –         | yes   | no     |
//! | Stale       | no          | yes      | no        | –     | yes    |
//! | Pruned      | no          | no       | no        | no    | –      |
//!
//! Pruned is terminal.

use std::fmt;
use std::str::FromStr;

/// Where a chunk stands in the working window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// A candidate that has not been grafted yet (per-turn entry state).
    Speculative,
    /// Grafted and live in the working window (where indexed chunks enter).
    Frontier,
    /// Collapsed onto the durable trunk.
    Committed,
    /// Aged out of the live window; still indexed and re-graftable.
    Stale,
    /// Contradicted or revised; terminal, skipped by graft by default.
    Pruned,
}

impl NodeState {
    /// Every state, in lifecycle order.
    pub const ALL: [NodeState; 5] = [
        NodeState::Speculative,
        NodeState::Frontier,
        NodeState::Committed,
        NodeState::Stale,
        NodeState::Pruned,
    ];

    /// The stable lowercase tag ("speculative", "frontier", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Speculative => "speculative",
            NodeState::Frontier => "frontier",
            NodeState::Committed => "committed",
            NodeState::Stale => "stale",
            NodeState::Pruned => "pruned",
        }
    }

    /// Whether `self → next` is one of the nine legal moves.
    pub fn can_transition_to(self, next: NodeState) -> bool {
        use NodeState::*;
        matches!(
            (self, next),
            (Speculative, Frontier)
                | (Speculative, Stale)
                | (Speculative, Pruned)
                | (Frontier, Committed)
                | (Frontier, Stale)
                | (Frontier, Pruned)
                | (Committed, Stale)
                | (Stale, Frontier)
                | (Stale, Pruned)
        )
    }

    /// Whether no move leaves this state.
    pub fn is_terminal(self) -> bool {
        NodeState::ALL.iter().all(|&n| !self.can_transition_to(n))
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tag that is not a [`NodeState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown node state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for NodeState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NodeState::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// A set of [`NodeState`]s (which chunks a query may return).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateSet(u8);

impl StateSet {
    /// Every state.
    pub const ALL: StateSet = StateSet(0b1_1111);
    /// Every state but Pruned: the default of `graft`.
    pub const NOT_PRUNED: StateSet = StateSet(0b0_1111);
    /// No state.
    pub const NONE: StateSet = StateSet(0);

    /// This set plus `s`.
    pub const fn with(self, s: NodeState) -> StateSet {
        StateSet(self.0 | (1 << s as u8))
    }

    /// This set minus `s`.
    pub const fn without(self, s: NodeState) -> StateSet {
        StateSet(self.0 & !(1 << s as u8))
    }

    /// Whether `s` is in the set.
    #[inline]
    pub fn contains(self, s: NodeState) -> bool {
        self.0 & s.bit() != 0
    }

    /// Whether the set holds every state.
    pub fn is_all(self) -> bool {
        self == StateSet::ALL
    }
}

impl Default for StateSet {
    fn default() -> Self {
        StateSet::NOT_PRUNED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_nine_legal_moves_and_pruned_is_terminal() {
        let legal: usize = NodeState::ALL
            .iter()
            .map(|a| {
                NodeState::ALL
                    .iter()
                    .filter(|b| a.can_transition_to(**b))
                    .count()
            })
            .sum();
        assert_eq!(legal, 9);
        assert!(NodeState::Pruned.is_terminal());
        assert!(NodeState::ALL.iter().all(|s| !s.can_transition_to(*s)));
        for s in NodeState::ALL {
            assert_eq!(s.as_str().parse::<NodeState>().unwrap(), s);
        }
        assert!("bogus".parse::<NodeState>().is_err());
    }

    #[test]
    fn state_sets() {
        assert!(!StateSet::NOT_PRUNED.contains(NodeState::Pruned));
        assert!(StateSet::NOT_PRUNED.contains(NodeState::Stale));
        assert!(StateSet::ALL.is_all());
        let s = StateSet::NONE.with(NodeState::Frontier);
        assert!(s.contains(NodeState::Frontier) && !s.contains(NodeState::Stale));
        assert_eq!(
            StateSet::ALL.without(NodeState::Pruned),
            StateSet::NOT_PRUNED
        );
    }
}
