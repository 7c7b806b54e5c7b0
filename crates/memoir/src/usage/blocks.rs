//! 5-hour billing blocks, as subscription plans meter them (ccusage's
//! `blocks` view): a block starts at the top of the hour (in the report's
//! [`Zone`]) of its first response and lasts [`BLOCK_HOURS`]; a response
//! more than that after the block's start starts a new block.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::{Totals, Zone};

/// How long a billing block lasts.
pub const BLOCK_HOURS: i64 = 5;

/// One billing block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BillingBlock {
    /// Its start (the top of the hour of its first response).
    pub start: DateTime<Utc>,
    /// `start` + [`BLOCK_HOURS`].
    pub end: DateTime<Utc>,
    /// Its first response.
    pub first_activity: DateTime<Utc>,
    /// Its last response.
    pub last_activity: DateTime<Utc>,
    /// True while `now` is before `end`.
    pub active: bool,
    /// The models used in it.
    pub models: BTreeSet<String>,
    /// What its responses add up to.
    #[serde(flatten)]
    pub totals: Totals,
}

/// Split `(time, model, totals)` entries into blocks, oldest first.
pub fn billing_blocks(
    mut entries: Vec<(DateTime<Utc>, String, Totals)>,
    now: DateTime<Utc>,
    zone: Zone,
) -> Vec<BillingBlock> {
    entries.sort_by_key(|e| e.0);
    let span = Duration::hours(BLOCK_HOURS);
    let mut blocks: Vec<BillingBlock> = Vec::new();
    for (at, model, totals) in entries {
        let continues = blocks.last().is_some_and(|b| at < b.end);
        if !continues {
            let start = zone.hour_start(at);
            blocks.push(BillingBlock {
                start,
                end: start + span,
                first_activity: at,
                last_activity: at,
                active: false,
                models: BTreeSet::new(),
                totals: Totals::default(),
            });
        }
        if let Some(b) = blocks.last_mut() {
            b.last_activity = at;
            b.models.insert(model);
            b.totals.merge(&totals);
        }
    }
    for b in &mut blocks {
        b.active = now < b.end;
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn tokens(n: u64) -> Totals {
        Totals {
            input_tokens: n,
            total_tokens: n,
            requests: 1,
            ..Totals::default()
        }
    }

    #[test]
    fn blocks_start_on_the_hour_and_last_five_hours() {
        let entries = vec![
            (at("2026-05-12T12:30:00Z"), "b".to_string(), tokens(3)),
            (at("2026-05-12T08:10:00Z"), "a".to_string(), tokens(1)),
            (at("2026-05-12T12:59:59Z"), "a".to_string(), tokens(2)),
            // 13:00 is the end of the 08:00 block: a new one starts at 13:00.
            (at("2026-05-12T13:00:00Z"), "a".to_string(), tokens(4)),
        ];
        let blocks = billing_blocks(entries.clone(), at("2026-05-12T14:00:00Z"), Zone::Utc);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].start, at("2026-05-12T08:00:00Z"));
        assert_eq!(blocks[0].end, at("2026-05-12T13:00:00Z"));
        assert_eq!(blocks[0].totals.input_tokens, 6);
        assert_eq!(blocks[0].totals.requests, 3);
        assert_eq!(blocks[0].models.len(), 2);
        assert!(!blocks[0].active);
        assert_eq!(blocks[1].start, at("2026-05-12T13:00:00Z"));
        assert_eq!(blocks[1].totals.input_tokens, 4);
        assert!(blocks[1].active);
        // In a half-hour zone the first block starts at 07:30 UTC, so the
        // 12:30 response opens the second one.
        let kolkata: Zone = "Asia/Kolkata".parse().unwrap();
        let blocks = billing_blocks(entries, at("2026-05-12T14:00:00Z"), kolkata);
        assert_eq!(blocks[0].start, at("2026-05-12T07:30:00Z"));
        assert_eq!(blocks[0].totals.input_tokens, 1);
        assert_eq!(blocks[1].start, at("2026-05-12T12:30:00Z"));
    }
}
