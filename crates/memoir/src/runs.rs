//! How runs ended, across the sessions of a store: the `outcome` records
//! harnesses write, or, for an imported session without any, the outcomes
//! its source states ([`crate::import::outcomes`]: Claude Code stop reasons
//! and interruptions, Codex task events), counted per model, agent or
//! session. `memoir stats` prints it.
//!
//! Every run falls in exactly one ending, first match wins:
//! `interrupted` ([`StopCause::Interrupted`]), `failed` (it ended on an
//! error: [`StopCause::Error`], or its last tool call failed), `completed`,
//! `limit` (max turns, an output-token or cost budget), `other` (loop, no
//! output, a cause this build does not know) and `unknown` (no cause
//! recorded).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::manager::{Result, SessionManager};
use crate::record::{RunStats, StopCause};
use crate::transcript::{AttributedOutcome, Transcript};

/// A session's runs: its `outcome` records, else (an imported session) the
/// outcomes its source states.
pub fn outcomes_of(t: &Transcript) -> Vec<AttributedOutcome> {
    if !t.outcomes.is_empty() {
        return t.outcomes.clone();
    }
    #[cfg(feature = "import")]
    {
        crate::import::outcomes::derived_outcomes(t)
    }
    #[cfg(not(feature = "import"))]
    {
        Vec::new()
    }
}

/// The episode of a session's runs ([`outcomes_of`] folded).
pub fn episode_of(t: &Transcript) -> Option<RunStats> {
    RunStats::fold(outcomes_of(t).iter().map(|o| &o.stats))
}

/// What the rows of a [`report`] are keyed by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunGroup {
    /// The model the run is attributed to (`unknown` when none is named).
    #[default]
    Model,
    /// The agent that wrote the session (`memoir` for native sessions).
    Agent,
    /// The session.
    Session,
}

impl std::str::FromStr for RunGroup {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "model" => Ok(RunGroup::Model),
            "agent" => Ok(RunGroup::Agent),
            "session" => Ok(RunGroup::Session),
            other => Err(format!(
                "unknown grouping {other:?} (model, agent or session)"
            )),
        }
    }
}

/// How a row's runs ended, and what they did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunCounts {
    /// Runs.
    pub runs: u64,
    /// Runs the model finished.
    pub completed: u64,
    /// Runs the user (or a signal) interrupted.
    pub interrupted: u64,
    /// Runs that ended on an error or a failed tool call.
    pub failed: u64,
    /// Runs stopped by a limit (turns, output tokens, cost).
    pub limit: u64,
    /// Runs that ended another way (loop, no output, a newer cause).
    pub other: u64,
    /// Runs whose ending was not recorded.
    pub unknown: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// Tool calls that failed.
    pub tool_errors: u64,
}

impl RunCounts {
    /// Count one run.
    pub fn add(&mut self, run: &RunStats) {
        self.runs += 1;
        self.tool_calls += u64::from(run.tool_calls);
        self.tool_errors += u64::from(run.tool_errors);
        let bucket = match &run.stop_cause {
            _ if run.interrupted() => &mut self.interrupted,
            _ if run.ended_in_error() => &mut self.failed,
            Some(StopCause::Completed) => &mut self.completed,
            Some(StopCause::MaxTurns | StopCause::OutputTokenBudget | StopCause::CostBudget) => {
                &mut self.limit
            }
            Some(_) => &mut self.other,
            None => &mut self.unknown,
        };
        *bucket += 1;
    }
}

/// One row of a [`RunReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRow {
    /// The model, agent or session.
    pub key: String,
    /// Sessions with at least one run in this row.
    pub sessions: u64,
    /// The counts.
    #[serde(flatten)]
    pub counts: RunCounts,
}

/// How the runs of a store ended ([`report`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// Rows, most runs first (then by key).
    pub rows: Vec<RunRow>,
    /// Every run.
    pub total: RunCounts,
    /// Sessions read.
    pub sessions: u64,
    /// Sessions that recorded at least one run.
    pub sessions_with_runs: u64,
}

/// Which sessions a [`report`] reads.
#[derive(Debug, Clone, Default)]
pub struct RunQuery {
    /// Rows by.
    pub group: RunGroup,
    /// Only sessions written by this agent.
    pub agent: Option<String>,
}

/// The agent that wrote a session (`memoir` for native sessions).
fn agent_of(source: Option<&crate::record::SourceRef>) -> &str {
    source.map_or("memoir", |s| s.agent.as_str())
}

/// Count the runs of every session `manager` lists (its project's, when it
/// is scoped to one). A session that cannot be read is skipped.
pub fn report(manager: &SessionManager, query: &RunQuery) -> Result<RunReport> {
    let mut rows: BTreeMap<String, (RunCounts, std::collections::BTreeSet<String>)> =
        BTreeMap::new();
    let mut out = RunReport::default();
    for entry in manager.list_sessions()? {
        let agent = agent_of(entry.source.as_ref());
        if query.agent.as_deref().is_some_and(|a| a != agent) {
            continue;
        }
        out.sessions += 1;
        let Ok(t) = manager.read_session(&entry.id) else {
            continue;
        };
        let outcomes = outcomes_of(&t);
        if !outcomes.is_empty() {
            out.sessions_with_runs += 1;
        }
        for o in &outcomes {
            out.total.add(&o.stats);
            let key = match query.group {
                RunGroup::Model if o.model.is_empty() => "unknown".to_string(),
                RunGroup::Model => o.model.clone(),
                RunGroup::Agent => agent.to_string(),
                RunGroup::Session => entry.id.clone(),
            };
            let row = rows.entry(key).or_default();
            row.0.add(&o.stats);
            row.1.insert(entry.id.clone());
        }
    }
    out.rows = rows
        .into_iter()
        .map(|(key, (counts, sessions))| RunRow {
            key,
            sessions: sessions.len() as u64,
            counts,
        })
        .collect();
    out.rows
        .sort_by(|a, b| b.counts.runs.cmp(&a.counts.runs).then(a.key.cmp(&b.key)));
    Ok(out)
}
