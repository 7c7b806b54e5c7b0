//! Run outcomes: what one run of an agent did, as the harness saw it at the
//! end of the run (the `outcome` record), and how runs fold into an episode.
//!
//! A [`RunStats`] row is written once per run ([`crate::transcript::Session::record_outcome`]).
//! Every field defaults, unknown fields are kept ([`RunStats::extra`]), and
//! an unknown [`StopCause`] is kept as [`StopCause::Other`], so rows written
//! by newer builds survive a read/write round trip. The fold
//! ([`RunStats::fold`], the episode of a session) is:
//!
//! - counters, `usage`, `cost_usd`, `duration_secs` and the optional sensor
//!   counters are summed; an absent (`None`) value is unknown, not zero, and
//!   is skipped (unknown + 1 = 1; unknown + unknown = unknown);
//! - `usage_complete` is ANDed: one run with incomplete usage makes the
//!   episode's usage a lower bound for good;
//! - `stop_cause`, `exhausted`, `ended_on_failed_call` (and `model`,
//!   `provider`, `reason`) are the **last** run's;
//! - `taint` is ORed (it only grows);
//! - `homeostat` and the unknown fields keep the first run's.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::Taint;
use crate::message::Usage;

/// Version of the `outcome` payload written by this build.
pub const OUTCOME_FORMAT: u32 = 1;

fn outcome_format() -> u32 {
    OUTCOME_FORMAT
}

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StopCause {
    /// The model finished on its own.
    Completed,
    /// The turn limit was reached.
    MaxTurns,
    /// The output-token budget (of the run, or of one response) ran out.
    OutputTokenBudget,
    /// The cost budget ran out.
    CostBudget,
    /// The user (or a signal) interrupted the run.
    Interrupted,
    /// The harness detected a loop and stopped it.
    Loop,
    /// The model produced nothing.
    NoOutput,
    /// The run ended on an error (a provider or harness failure), not on a
    /// decision of the model's. memoir's addition to the seed's set.
    Error,
    /// A cause this build does not know, kept verbatim.
    Other(String),
}

impl StopCause {
    /// The snake_case name written to the log.
    pub fn as_str(&self) -> &str {
        match self {
            StopCause::Completed => "completed",
            StopCause::MaxTurns => "max_turns",
            StopCause::OutputTokenBudget => "output_token_budget",
            StopCause::CostBudget => "cost_budget",
            StopCause::Interrupted => "interrupted",
            StopCause::Loop => "loop",
            StopCause::NoOutput => "no_output",
            StopCause::Error => "error",
            StopCause::Other(s) => s,
        }
    }

    /// The cause named `s` (an unknown name is [`StopCause::Other`]).
    pub fn parse(s: &str) -> StopCause {
        match s {
            "completed" => StopCause::Completed,
            "max_turns" => StopCause::MaxTurns,
            "output_token_budget" => StopCause::OutputTokenBudget,
            "cost_budget" => StopCause::CostBudget,
            "interrupted" => StopCause::Interrupted,
            "loop" => StopCause::Loop,
            "no_output" => StopCause::NoOutput,
            "error" => StopCause::Error,
            other => StopCause::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for StopCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StopCause {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopCause {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(StopCause::parse(&String::deserialize(d)?))
    }
}

/// One tool call of a run, as the harness saw it: the input of
/// [`RunStats::with_calls`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// The tool answered with an error.
    pub is_error: bool,
    /// The permission policy refused the call.
    pub denied: bool,
    /// The call was staged for later approval instead of run.
    pub staged: bool,
    /// The model called a tool that does not exist.
    pub unknown: bool,
}

/// What one run did (the `outcome` record). See the module docs for the fold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunStats {
    /// Version of this payload ([`OUTCOME_FORMAT`]).
    pub v: u32,
    /// Model turns taken.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tool calls that failed: an error result that was not a denial, or a
    /// call of an unknown tool (plus every `late_failure` against the run).
    pub tool_errors: u32,
    /// Tool calls the permission policy refused.
    pub tool_denied: u32,
    /// Tool calls staged for approval.
    pub tool_staged: u32,
    /// Tool calls whose arguments did not parse.
    pub malformed_tool_args: u32,
    /// Sends the policy blocked (e.g. the armed trifecta).
    pub blocked_sends: u32,
    /// Compactions during the run.
    pub compactions: u32,
    /// Tokens used by the run.
    pub usage: Usage,
    /// Cost in USD, when the harness priced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Whether `usage` counts every request of the run (false: a lower bound).
    pub usage_complete: bool,
    /// Why the run stopped (`None`: unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_cause: Option<StopCause>,
    /// A budget or limit was used up.
    pub exhausted: bool,
    /// The run's last tool call failed.
    pub ended_on_failed_call: bool,
    /// Context overflows (`None`: not measured, never zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_overflows: Option<u32>,
    /// Boredom notices (`None`: not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boredom_notices: Option<u32>,
    /// Step escalations attempted (`None`: not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_escalations_attempted: Option<u32>,
    /// Step escalations revised (`None`: not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_escalations_revised: Option<u32>,
    /// The conditions the run ran under, as the harness describes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homeostat: Option<Value>,
    /// The taint the run ended with.
    pub taint: Taint,
    /// Wall-clock duration of the run, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    /// The provider the run used, when it differs from (or is missing in)
    /// the session's header and configs (imported runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model the run used, likewise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The source's own words for how the run ended (an imported run's
    /// `stop_reason`, an abort reason), verbatim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for RunStats {
    fn default() -> Self {
        RunStats {
            v: outcome_format(),
            turns: 0,
            tool_calls: 0,
            tool_errors: 0,
            tool_denied: 0,
            tool_staged: 0,
            malformed_tool_args: 0,
            blocked_sends: 0,
            compactions: 0,
            usage: Usage::default(),
            cost_usd: None,
            usage_complete: false,
            stop_cause: None,
            exhausted: false,
            ended_on_failed_call: false,
            context_overflows: None,
            boredom_notices: None,
            step_escalations_attempted: None,
            step_escalations_revised: None,
            homeostat: None,
            taint: Taint::default(),
            duration_secs: None,
            provider: None,
            model: None,
            reason: None,
            extra: Map::new(),
        }
    }
}

/// Sum two optional quantities, `None` meaning unknown (skipped).
fn add_known<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, None) => a,
        (None, b) => b,
    }
}

fn add_count(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl RunStats {
    /// Count a run's tool calls: `tool_calls`, `tool_errors` (an error that
    /// was not a denial, or an unknown tool), `tool_denied`, `tool_staged`,
    /// and `ended_on_failed_call` (the last call counted as an error).
    pub fn with_calls(mut self, calls: &[ToolCall]) -> RunStats {
        let failed = |c: &ToolCall| c.unknown || (c.is_error && !c.denied);
        let n = |f: &dyn Fn(&ToolCall) -> bool| calls.iter().filter(|c| f(c)).count() as u32;
        self.tool_calls = calls.len() as u32;
        self.tool_errors = n(&failed);
        self.tool_denied = n(&|c| c.denied);
        self.tool_staged = n(&|c| c.staged);
        self.ended_on_failed_call = calls.last().is_some_and(failed);
        self
    }

    /// Fold a later run into this one (the episode rules in the module docs).
    pub fn merge(&mut self, later: &RunStats) {
        for (a, b) in [
            (&mut self.turns, later.turns),
            (&mut self.tool_calls, later.tool_calls),
            (&mut self.tool_errors, later.tool_errors),
            (&mut self.tool_denied, later.tool_denied),
            (&mut self.tool_staged, later.tool_staged),
            (&mut self.malformed_tool_args, later.malformed_tool_args),
            (&mut self.blocked_sends, later.blocked_sends),
            (&mut self.compactions, later.compactions),
        ] {
            *a = a.saturating_add(b);
        }
        self.usage.add(&later.usage);
        self.cost_usd = add_known(self.cost_usd, later.cost_usd);
        self.duration_secs = add_known(self.duration_secs, later.duration_secs);
        self.context_overflows = add_count(self.context_overflows, later.context_overflows);
        self.boredom_notices = add_count(self.boredom_notices, later.boredom_notices);
        self.step_escalations_attempted = add_count(
            self.step_escalations_attempted,
            later.step_escalations_attempted,
        );
        self.step_escalations_revised = add_count(
            self.step_escalations_revised,
            later.step_escalations_revised,
        );
        self.usage_complete &= later.usage_complete;
        self.stop_cause = later.stop_cause.clone();
        self.exhausted = later.exhausted;
        self.ended_on_failed_call = later.ended_on_failed_call;
        self.taint.merge(later.taint);
        if self.homeostat.is_none() {
            self.homeostat = later.homeostat.clone();
        }
        if later.provider.is_some() {
            self.provider = later.provider.clone();
        }
        if later.model.is_some() {
            self.model = later.model.clone();
        }
        self.reason = later.reason.clone();
    }

    /// The episode of several runs: the first row is the seed, each later
    /// row is merged in order. `None` for no runs.
    pub fn fold<'a>(runs: impl IntoIterator<Item = &'a RunStats>) -> Option<RunStats> {
        let mut runs = runs.into_iter();
        let mut episode = runs.next()?.clone();
        for r in runs {
            episode.merge(r);
        }
        Some(episode)
    }

    /// Whether the run ended on an error: [`StopCause::Error`], or its last
    /// tool call failed.
    pub fn ended_in_error(&self) -> bool {
        self.ended_on_failed_call || matches!(self.stop_cause, Some(StopCause::Error))
    }

    /// Whether the run was interrupted.
    pub fn interrupted(&self) -> bool {
        matches!(self.stop_cause, Some(StopCause::Interrupted))
    }
}

/// A `late_failure` record: a tool result that arrived after the run's
/// outcome was written turned out to be a failure, so the outcome of run
/// number `run` (0-based, in the session's own log order) gets
/// `tool_errors + 1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateFailure {
    /// Which outcome (0-based, in the session's own log order).
    pub run: u32,
    /// The tool call whose result failed.
    #[serde(default)]
    pub tool_use_id: String,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
