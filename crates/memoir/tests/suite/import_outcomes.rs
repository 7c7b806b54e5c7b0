//! Outcomes of imported sessions, derived from what the sources say: Claude
//! Code stop reasons, API errors and interruption markers; Codex task
//! events. The sources are written here, line by line, in each agent's
//! transcript format.

use std::fs;
use std::path::Path;

use memoir::import::{self, Agent, Source};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::record::StopCause;
use memoir::runs::{self, RunGroup, RunQuery};
use memoir::store::Durability;
use serde_json::{json, Value};

fn manager(dir: &Path) -> SessionManager {
    SessionManager::open(
        &dir.join("store"),
        ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..ManagerOptions::default()
        },
    )
    .unwrap()
}

fn write_lines(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(path, text).unwrap();
}

const CC: &str = "0c0c0000-0000-4000-8000-000000000001";

fn cc(n: usize, parent: Option<usize>, kind: &str, message: Value, extra: Value) -> Value {
    let mut line = json!({
        "type": kind, "uuid": format!("u{n}"), "parentUuid": parent.map(|p| format!("u{p}")),
        "isSidechain": false, "userType": "external", "cwd": "/workspace/app", "sessionId": CC,
        "version": "2.1.0", "timestamp": format!("2026-06-15T10:00:{n:02}.000Z"), "message": message,
    });
    if let (Some(l), Value::Object(e)) = (line.as_object_mut(), extra) {
        l.extend(e);
    }
    line
}

fn prompt(n: usize, text: &str) -> Value {
    cc(
        n,
        n.checked_sub(1),
        "user",
        json!({"role": "user", "content": [{"type": "text", "text": text}]}),
        json!({}),
    )
}

fn reply(n: usize, content: Value, stop: Value, model: &str) -> Value {
    cc(
        n,
        Some(n - 1),
        "assistant",
        json!({"id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
               "stop_reason": stop, "content": content, "usage": {"input_tokens": 10, "output_tokens": 2}}),
        json!({}),
    )
}

fn result(n: usize, call: &str, is_error: bool) -> Value {
    cc(
        n,
        Some(n - 1),
        "user",
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": "out", "is_error": is_error}]}),
        json!({}),
    )
}

fn call(id: &str) -> Value {
    json!([{"type": "text", "text": "running"}, {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "make"}}])
}

fn text(t: &str) -> Value {
    json!([{"type": "text", "text": t}])
}

const SONNET: &str = "claude-sonnet-4-5";

#[test]
fn claude_code_stop_reasons_errors_and_interruptions_become_outcomes() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{CC}.jsonl"));
    write_lines(
        &path,
        &[
            prompt(1, "fix the build"),
            reply(2, call("t1"), json!("tool_use"), SONNET),
            result(3, "t1", true),
            reply(4, text("fixed"), json!("end_turn"), SONNET),
            prompt(5, "now the tests"),
            reply(6, call("t2"), json!("tool_use"), SONNET),
            result(7, "t2", false),
            prompt(8, "[Request interrupted by user for tool use]"),
            prompt(9, "write the docs"),
            reply(10, text("a very long"), json!("max_tokens"), SONNET),
            prompt(11, "try again"),
            cc(
                12,
                Some(11),
                "assistant",
                json!({"id": "msg_12", "type": "message", "role": "assistant", "model": "<synthetic>",
                       "stop_reason": "stop_sequence", "content": [{"type": "text", "text": "API Error: 500"}],
                       "usage": {"input_tokens": 0, "output_tokens": 0}}),
                json!({"isApiErrorMessage": true}),
            ),
            prompt(13, "one more"),
            reply(14, text("thinking about it"), Value::Null, SONNET),
        ],
    );
    let m = manager(tmp.path());
    let sources = vec![Source {
        agent: Agent::ClaudeCode,
        path,
    }];
    import::import(&m, &sources, &mut |_| {}).unwrap();
    let id = format!("cc-{CC}");
    let t = m.read_session(&id).unwrap();
    assert!(t.outcomes.is_empty(), "nothing is written at import");
    let runs = runs::outcomes_of(&t);
    let endings: Vec<(Option<StopCause>, u32, u32, u32, bool)> = runs
        .iter()
        .map(|o| {
            let s = &o.stats;
            (
                s.stop_cause.clone(),
                s.turns,
                s.tool_calls,
                s.tool_errors,
                s.ended_on_failed_call,
            )
        })
        .collect();
    assert_eq!(
        endings,
        [
            (Some(StopCause::Completed), 2, 1, 1, true),
            (Some(StopCause::Interrupted), 1, 1, 0, false),
            (Some(StopCause::OutputTokenBudget), 1, 0, 0, false),
            (Some(StopCause::Error), 1, 0, 0, false),
        ],
        "the unfinished last run is left out"
    );
    assert!(runs.iter().all(|o| o.provider == "anthropic"));
    assert_eq!(runs[0].model, SONNET);
    assert_eq!(runs[0].stats.reason.as_deref(), Some("end_turn"));
    assert_eq!(runs[0].stats.usage.input_tokens, 20);
    assert!(runs[0].stats.usage_complete);
    assert!(
        runs[2].stats.exhausted,
        "max_tokens used up the response's budget"
    );
    assert_eq!(
        runs[3].model, SONNET,
        "a synthetic model name is not the run's model"
    );
    // The outcome sits at the record that ended the run.
    assert_eq!(runs[1].seq, t.message_seqs[7]);

    let report = runs::report(&m, &RunQuery::default()).unwrap();
    assert_eq!(report.rows.len(), 1);
    let c = &report.rows[0].counts;
    assert_eq!(report.rows[0].key, SONNET);
    assert_eq!(
        (c.runs, c.completed, c.interrupted, c.failed, c.limit),
        (4, 0, 1, 2, 1),
        "the run that ended on a failed call counts as failed"
    );
}

fn cx(n: u32, kind: &str, payload: Value) -> Value {
    json!({"timestamp": format!("2026-01-02T03:04:{n:02}.000Z"), "type": kind, "payload": payload})
}

#[test]
fn codex_task_events_become_outcomes_with_the_model_in_force() {
    let tmp = tempfile::tempdir().unwrap();
    let thread = "22222222-2222-4222-8222-222222222222";
    let path = tmp
        .path()
        .join(format!("rollout-2026-01-02T03-04-05-{thread}.jsonl"));
    let user = |n, t: &str| {
        [
            cx(
                n,
                "event_msg",
                json!({"type": "user_message", "message": t}),
            ),
            cx(
                n,
                "response_item",
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}),
            ),
        ]
    };
    let answer = |n, t: &str| {
        [
            cx(
                n,
                "event_msg",
                json!({"type": "agent_message", "message": t}),
            ),
            cx(
                n,
                "response_item",
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]}),
            ),
        ]
    };
    let mut lines = vec![
        cx(
            1,
            "session_meta",
            json!({"id": thread, "timestamp": "2026-01-02T03:04:01.000Z", "cwd": "/workspace/p", "originator": "codex_cli_rs", "cli_version": "0.50.0", "source": "cli", "model_provider": "openai"}),
        ),
        cx(
            2,
            "turn_context",
            json!({"cwd": "/workspace/p", "model": "gpt-5-codex", "approval_policy": "never", "sandbox_policy": {"type": "read-only"}}),
        ),
        cx(3, "event_msg", json!({"type": "task_started"})),
    ];
    lines.extend(user(4, "list the files"));
    lines.push(cx(5, "response_item", json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "c1"})));
    lines.push(cx(
        6,
        "response_item",
        json!({"type": "function_call_output", "call_id": "c1", "output": "a.rs"}),
    ));
    lines.extend(answer(7, "a.rs"));
    lines.push(cx(
        8,
        "event_msg",
        json!({"type": "task_complete", "last_agent_message": "a.rs"}),
    ));
    lines.push(cx(9, "turn_context", json!({"cwd": "/workspace/p", "model": "gpt-5", "approval_policy": "never", "sandbox_policy": {"type": "read-only"}})));
    lines.push(cx(10, "event_msg", json!({"type": "task_started"})));
    lines.extend(user(11, "refactor everything"));
    lines.push(cx(
        12,
        "event_msg",
        json!({"type": "turn_aborted", "reason": "interrupted"}),
    ));
    lines.push(cx(13, "event_msg", json!({"type": "task_started"})));
    lines.extend(user(14, "try once more"));
    lines.push(cx(
        15,
        "event_msg",
        json!({"type": "error", "message": "stream disconnected"}),
    ));
    lines.push(cx(16, "event_msg", json!({"type": "task_started"})));
    lines.extend(user(17, "still there?"));
    write_lines(&path, &lines);
    let m = manager(tmp.path());
    let sources = vec![Source {
        agent: Agent::Codex,
        path,
    }];
    import::import(&m, &sources, &mut |_| {}).unwrap();
    let t = m.read_session(&format!("cx-{thread}")).unwrap();
    let runs = runs::outcomes_of(&t);
    let rows: Vec<(Option<StopCause>, &str, u32)> = runs
        .iter()
        .map(|o| {
            (
                o.stats.stop_cause.clone(),
                o.model.as_str(),
                o.stats.tool_calls,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (Some(StopCause::Completed), "gpt-5-codex", 1),
            (Some(StopCause::Interrupted), "gpt-5", 0),
            (Some(StopCause::Error), "gpt-5", 0),
        ],
        "a task still running at the end of the log has no outcome"
    );
    assert_eq!(
        runs[1].stats.reason.as_deref(),
        Some("turn_aborted: interrupted")
    );
    assert_eq!(runs[2].stats.reason.as_deref(), Some("stream disconnected"));
    let by_model = runs::report(
        &m,
        &RunQuery {
            group: RunGroup::Model,
            agent: Some("codex".into()),
        },
    )
    .unwrap();
    let keys: Vec<(&str, u64)> = by_model
        .rows
        .iter()
        .map(|r| (r.key.as_str(), r.counts.runs))
        .collect();
    assert_eq!(keys, [("gpt-5", 2), ("gpt-5-codex", 1)]);
}
