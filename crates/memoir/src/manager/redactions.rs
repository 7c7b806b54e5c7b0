//! The count of secrets a redaction replaced, per rule: what an export
//! reports and what `manager::redact` fills (a type of its own so that both
//! use it without either importing the other).

use std::collections::BTreeMap;

/// How many secrets an export replaced, per redaction rule id
/// (`aws-access-token`, `password-assignment`...; see `manager::redact`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactions {
    /// Count per rule id.
    pub counts: BTreeMap<String, usize>,
}

impl Redactions {
    /// Total replacements.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    /// Count `n` more replacements by `rule`.
    pub fn add(&mut self, rule: &str, n: usize) {
        if n > 0 {
            *self.counts.entry(rule.to_string()).or_default() += n;
        }
    }
}
