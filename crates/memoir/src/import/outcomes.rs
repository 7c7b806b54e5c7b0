//! Run outcomes of imported sessions, derived when read from what the
//! importers keep of the source (each message's `extra.source` trace and the
//! source records): Claude Code's `stop_reason`s, API error messages and
//! `[Request interrupted by user…]` markers; Codex's `task_complete`,
//! `turn_aborted` and `error` events. `docs/FORMAT.md` ("Imported
//! sessions", "Run outcomes") lists the rules per agent.
//!
//! They are derived, not written: an imported log holds the source's own
//! lines, and a re-import compares the records it would write with the
//! stored ones; an outcome counted at import time would also depend on where
//! an incremental import happened to cut a running turn. Read from the whole
//! log, a run's counters are always complete. Only runs whose ending the
//! source states are returned; a run cut off without one is left out.

use serde_json::Value;

use crate::message::{Block, Message, Role, UsageSource, SOURCE_KEY};
use crate::record::{Record, RunStats, StopCause};
use crate::transcript::{AttributedOutcome, Transcript};

/// The outcomes an imported session's source states, in log order (`[]`
/// for a native session or an agent whose transcripts say nothing of it).
pub fn derived_outcomes(t: &Transcript) -> Vec<AttributedOutcome> {
    match t.meta.source.as_ref().map(|s| s.agent.as_str()) {
        Some("claude-code") => claude(t),
        Some("codex") => codex(t),
        _ => Vec::new(),
    }
}

/// A run being counted.
#[derive(Default)]
struct Run {
    stats: RunStats,
    started: bool,
    incomplete_usage: bool,
    last_call_failed: bool,
    model: Option<String>,
    error: Option<String>,
}

impl Run {
    fn new() -> Run {
        Run::default()
    }

    fn assistant(&mut self, m: &Message) {
        self.started = true;
        self.stats.turns += 1;
        for b in &m.content {
            if matches!(b, Block::ToolUse { .. }) {
                self.stats.tool_calls += 1;
                self.last_call_failed = false;
            }
        }
        match &m.usage {
            Some(u) => {
                self.stats.usage.add(u);
                self.incomplete_usage |= u.source != UsageSource::Provider;
            }
            None => self.incomplete_usage = true,
        }
        if let Some(model) = m
            .model
            .as_ref()
            .filter(|s| !s.is_empty() && !s.starts_with('<'))
        {
            self.model = Some(model.clone());
        }
    }

    fn tool(&mut self, m: &Message) {
        self.started = true;
        for b in &m.content {
            if let Block::ToolResult { is_error, .. } = b {
                self.stats.tool_errors += u32::from(*is_error);
                self.last_call_failed = *is_error;
            }
        }
    }

    /// The outcome of this run, ended at record `seq` by `cause`.
    fn end(
        self,
        seq: u64,
        cause: StopCause,
        reason: &str,
        provider: &str,
        model: String,
    ) -> AttributedOutcome {
        let mut stats = self.stats;
        stats.usage_complete = stats.turns > 0 && !self.incomplete_usage;
        stats.exhausted = matches!(cause, StopCause::OutputTokenBudget);
        stats.ended_on_failed_call = self.last_call_failed;
        stats.stop_cause = Some(cause);
        stats.reason = Some(reason.to_string());
        AttributedOutcome {
            seq,
            provider: provider.to_string(),
            model,
            stats,
        }
    }
}

/// The source trace of a message, and of the further lines merged into it.
fn traces(m: &Message) -> impl Iterator<Item = &Value> {
    let trace = m.extra.get(SOURCE_KEY);
    let merged = trace
        .and_then(|t| t.get("merged"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    trace.into_iter().chain(merged)
}

/// The last non-null `message.stop_reason` of a Claude Code response.
fn stop_reason(m: &Message) -> Option<&str> {
    traces(m)
        .filter_map(|t| {
            t.pointer("/entry/message/stop_reason")
                .and_then(Value::as_str)
        })
        .last()
}

fn flag(m: &Message, key: &str) -> bool {
    traces(m).any(|t| {
        t.get(key) == Some(&Value::Bool(true))
            || t.get("entry").and_then(|e| e.get(key)) == Some(&Value::Bool(true))
    })
}

/// Claude Code: a run is what follows a user prompt. It ends at an assistant
/// response whose `stop_reason` ends the turn (`end_turn`, `stop_sequence`:
/// completed; `max_tokens`: output_token_budget; `refusal` and other values:
/// kept as they are), at an API error message (`isApiErrorMessage`: error),
/// or at a `[Request interrupted by user…]` marker (interrupted). A response
/// that calls a tool, and `tool_use`, `pause_turn` and unfinished (`null`)
/// stop reasons, continue the run.
fn claude(t: &Transcript) -> Vec<AttributedOutcome> {
    let mut out = Vec::new();
    let mut run = Run::new();
    let own = t.inherited.min(t.messages.len());
    for (m, &seq) in t.messages[own..].iter().zip(&t.message_seqs[own..]) {
        match m.role {
            Role::Assistant => {
                run.assistant(m);
                let api_error = flag(m, "isApiErrorMessage");
                let calls = m.content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
                let cause = match stop_reason(m) {
                    _ if api_error => Some((StopCause::Error, "api_error")),
                    _ if calls => None,
                    Some(r @ ("end_turn" | "stop_sequence")) => Some((StopCause::Completed, r)),
                    Some(r @ "max_tokens") => Some((StopCause::OutputTokenBudget, r)),
                    Some("tool_use" | "pause_turn") | None => None,
                    Some(other) => Some((StopCause::Other(other.to_string()), other)),
                };
                if let Some((cause, reason)) = cause {
                    let model = run.model.clone().unwrap_or_else(|| t.meta.model.clone());
                    out.push(std::mem::take(&mut run).end(seq, cause, reason, "anthropic", model));
                }
            }
            Role::Tool => run.tool(m),
            Role::User => {
                let text = m.text_content();
                let text = text.trim();
                if text.starts_with("[Request interrupted by user") {
                    if run.started {
                        let model = run.model.clone().unwrap_or_else(|| t.meta.model.clone());
                        let reason = text.trim_matches(|c| c == '[' || c == ']');
                        out.push(std::mem::take(&mut run).end(
                            seq,
                            StopCause::Interrupted,
                            reason,
                            "anthropic",
                            model,
                        ));
                    }
                } else if !flag(m, "is_meta") && !flag(m, "compact_summary") {
                    // A new prompt: a run left without an ending stays unknown.
                    run = Run::new();
                }
            }
            Role::System => {}
        }
    }
    out
}

/// The `event_msg` payload of a Codex source record.
fn codex_event(r: &Record) -> Option<&serde_json::Map<String, Value>> {
    let Record::Unknown { kind, raw } = r else {
        return None;
    };
    if kind != super::SOURCE_RECORD {
        return None;
    }
    let entry = raw.get("entry")?;
    if entry.get("type").and_then(Value::as_str) != Some("event_msg") {
        return None;
    }
    entry.get("payload")?.as_object()
}

/// Codex: a run is a task, from `task_started` to `task_complete`
/// (completed) or `turn_aborted` (`interrupted` and `replaced`: interrupted;
/// other reasons kept as they are). An `error` event ends its task as an
/// error when no `task_complete` follows before the next task starts (or
/// the log ends). The model is the one in force (`turn_context`).
fn codex(t: &Transcript) -> Vec<AttributedOutcome> {
    let own = t.inherited.min(t.messages.len());
    // Messages and source records, merged by seq.
    let mut items: Vec<(u64, Result<usize, &Record>)> = (own..t.messages.len())
        .map(|i| (t.message_seqs[i], Ok(i)))
        .chain(t.unknown.iter().map(|r| (r.seq, Err(&r.record))))
        .collect();
    items.sort_by_key(|(seq, _)| *seq);
    let mut out = Vec::new();
    let mut run = Run::new();
    let mut position = own;
    let model_at = |position: usize, run: &Run| -> String {
        t.config_covering(position.saturating_sub(1))
            .map(|c| c.model.clone())
            .filter(|m| !m.is_empty())
            .or_else(|| run.model.clone())
            .unwrap_or_else(|| t.meta.model.clone())
    };
    for (seq, item) in items {
        match item {
            Ok(i) => {
                position = i + 1;
                let m = &t.messages[i];
                match m.role {
                    Role::Assistant => run.assistant(m),
                    Role::Tool => run.tool(m),
                    _ => {}
                }
            }
            Err(record) => {
                let Some(p) = codex_event(record) else {
                    continue;
                };
                let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
                let ending = match ty {
                    "task_started" => {
                        if let Some(message) = run.error.take() {
                            let model = model_at(position, &run);
                            let ended = std::mem::take(&mut run);
                            out.push(ended.end(seq, StopCause::Error, &message, "openai", model));
                        }
                        run = Run::new();
                        run.started = true;
                        continue;
                    }
                    "error" => {
                        run.error = Some(
                            p.get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("error")
                                .to_string(),
                        );
                        continue;
                    }
                    "task_complete" => match run.error.take() {
                        Some(message) => (StopCause::Error, message),
                        None => (StopCause::Completed, ty.to_string()),
                    },
                    "turn_aborted" => {
                        let reason = p.get("reason").and_then(Value::as_str).unwrap_or("");
                        let cause = match reason {
                            "interrupted" | "replaced" => StopCause::Interrupted,
                            "" => StopCause::Other(ty.to_string()),
                            other => StopCause::Other(other.to_string()),
                        };
                        (cause, format!("{ty}: {reason}"))
                    }
                    _ => continue,
                };
                let model = model_at(position, &run);
                let ended = std::mem::take(&mut run);
                out.push(ended.end(seq, ending.0, &ending.1, "openai", model));
            }
        }
    }
    if let Some(message) = run.error.take() {
        let model = model_at(position, &run);
        let seq = t.last_seq;
        out.push(run.end(seq, StopCause::Error, &message, "openai", model));
    }
    out
}
