//! How the importers place and count what real agent transcripts hold, on
//! minimal files written in each shape: Claude Code parallel tool calls
//! (one response split over lines sharing `message.id`, each result naming
//! its call line as parent), streamed responses with results interleaved,
//! true forks (rewinds, edited prompts) against fake ones, branch ids of
//! main, subagent and resumed sessions, source times, names and lookup,
//! a resumed session (a file repeating another's lines) stored as a fork
//! by reference holding only its own lines, and Codex reasoning shown once.

use std::fs;
use std::path::{Path, PathBuf};

use memoir::import::{self, Agent, ImportReport, Source};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::{Block, Role};
use memoir::store::Durability;
use memoir::transcript::Transcript;
use memoir::Message;
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

fn run(m: &SessionManager, agent: Agent, paths: &[PathBuf]) -> ImportReport {
    let sources: Vec<Source> = paths
        .iter()
        .map(|p| Source {
            agent,
            path: p.clone(),
        })
        .collect();
    import::import(m, &sources, &mut |_| {}).unwrap()
}

fn write_lines(path: &Path, lines: &[Value]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut s = String::new();
    for l in lines {
        s.push_str(&l.to_string());
        s.push('\n');
    }
    fs::write(path, s).unwrap();
}

const SID: &str = "7a1b2c3d-0000-4000-8000-000000000001";

fn time(n: usize) -> String {
    format!("2026-03-01T10:{:02}:{:02}.000Z", n / 60, n % 60)
}

/// A Claude Code envelope.
fn entry(kind: &str, uuid: &str, parent: Option<&str>, n: usize, message: Value) -> Value {
    json!({
        "type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": false,
        "userType": "external", "cwd": "/work/app", "sessionId": SID, "version": "2.1.39",
        "timestamp": time(n), "message": message,
    })
}

fn prompt(uuid: &str, parent: Option<&str>, n: usize, text: &str) -> Value {
    entry(
        "user",
        uuid,
        parent,
        n,
        json!({"role": "user", "content": text}),
    )
}

fn assistant(uuid: &str, parent: &str, n: usize, msg: &str, block: Value) -> Value {
    entry(
        "assistant",
        uuid,
        Some(parent),
        n,
        json!({"id": msg, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
               "stop_reason": null, "content": [block],
               "usage": {"input_tokens": 10, "output_tokens": 5}}),
    )
}

fn tool_use(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": format!("/work/app/{id}")}})
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn result(uuid: &str, parent: &str, n: usize, call: &str, source: Option<&str>) -> Value {
    let mut v = entry(
        "user",
        uuid,
        Some(parent),
        n,
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call, "content": format!("contents of {call}")}
        ]}),
    );
    v["toolUseResult"] = json!({"type": "text", "file": {"filePath": call}});
    if let Some(s) = source {
        v["sourceToolAssistantUUID"] = json!(s);
    }
    v
}

fn read(m: &SessionManager, id: &str) -> Transcript {
    m.read_stored(id).unwrap()
}

/// Each tool call has its result later in `messages`, with no other
/// assistant turn between them, and every id appears exactly once.
fn assert_calls_answered(messages: &[Message]) {
    let mut seen_uses = Vec::new();
    let mut seen_results = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for id in m.tool_use_ids() {
            seen_uses.push(id.to_string());
            let answer = messages[i + 1..]
                .iter()
                .position(|r| r.tool_result_ids().any(|r| r == id))
                .unwrap_or_else(|| panic!("call {id} has no result after it"));
            let between = &messages[i + 1..i + 1 + answer];
            assert!(
                between
                    .iter()
                    .all(|b| b.role != Role::User || b.tool_result_ids().next().is_some()),
                "a prompt separates call {id} from its result"
            );
        }
        seen_results.extend(m.tool_result_ids().map(str::to_string));
    }
    let mut u = seen_uses.clone();
    u.sort();
    u.dedup();
    assert_eq!(u.len(), seen_uses.len(), "a call is imported twice");
    let mut r = seen_results.clone();
    r.sort();
    r.dedup();
    assert_eq!(r.len(), seen_results.len(), "a result is imported twice");
    assert_eq!(u, r, "calls and results do not pair");
}

/// One response of `calls` parallel tool calls written the Claude Code
/// way: one line per `tool_use` sharing `message.id`, each result naming
/// the line of its call as parent; then a final answer.
fn parallel_file(calls: usize, with_source_uuid: bool) -> Vec<Value> {
    let mut lines = vec![prompt("u1", None, 0, "read the files")];
    let mut prev = "u1".to_string();
    for k in 0..calls {
        let uuid = format!("a{k}");
        lines.push(assistant(
            &uuid,
            &prev,
            1 + k,
            "msg_X",
            tool_use(&format!("T{k}")),
        ));
        prev = uuid;
    }
    for k in 0..calls {
        let call_line = format!("a{k}");
        lines.push(result(
            &format!("r{k}"),
            &call_line,
            10 + k,
            &format!("T{k}"),
            with_source_uuid.then_some(call_line.as_str()),
        ));
    }
    let last = format!("r{}", calls - 1);
    lines.push(assistant("done", &last, 30, "msg_Y", text("done")));
    lines
}

#[test]
fn parallel_tool_calls_are_one_session_with_every_result_after_its_call() {
    for calls in 2..=6 {
        for with_source_uuid in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let path = tmp.path().join(format!("{SID}.jsonl"));
            write_lines(&path, &parallel_file(calls, with_source_uuid));
            let m = manager(tmp.path());
            let report = run(&m, Agent::ClaudeCode, &[path]);
            assert_eq!(report.sessions.new, 1, "{calls} calls: {report:?}");
            assert!(report.notes.is_empty(), "{report:?}");
            let t = read(&m, &format!("cc-{SID}"));
            assert_calls_answered(&t.messages);
            // The response is one message holding every call.
            let call_msgs: Vec<&Message> = t
                .messages
                .iter()
                .filter(|m| m.tool_use_ids().next().is_some())
                .collect();
            assert_eq!(call_msgs.len(), 1);
            assert_eq!(call_msgs[0].tool_use_ids().count(), calls);
            assert_eq!(t.messages.last().unwrap().text_content(), "done");
            assert_eq!(t.messages.len(), 1 + 1 + calls + 1);
        }
    }
}

#[test]
fn streamed_response_with_results_interleaved_stays_on_one_line() {
    // thinking, text, call T0, its result, call T1 (parent: the result or
    // the previous block), its result, then the answer.
    for second_parent in ["r0", "a2"] {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(format!("{SID}.jsonl"));
        write_lines(
            &path,
            &[
                prompt("u1", None, 0, "look"),
                assistant(
                    "a0",
                    "u1",
                    1,
                    "msg_S",
                    json!({"type": "thinking", "thinking": "hm", "signature": "s"}),
                ),
                assistant("a1", "a0", 2, "msg_S", text("Reading both.")),
                assistant("a2", "a1", 3, "msg_S", tool_use("T0")),
                result("r0", "a2", 4, "T0", Some("a2")),
                assistant("a3", second_parent, 5, "msg_S", tool_use("T1")),
                result("r1", "a3", 6, "T1", Some("a3")),
                assistant("a4", "r1", 7, "msg_Z", text("both read")),
                prompt("u2", Some("a4"), 8, "thanks"),
            ],
        );
        let m = manager(tmp.path());
        let report = run(&m, Agent::ClaudeCode, &[path]);
        assert_eq!(report.sessions.new, 1, "{second_parent}: {report:?}");
        let t = read(&m, &format!("cc-{SID}"));
        assert_calls_answered(&t.messages);
        let texts: Vec<String> = t.messages.iter().map(|m| m.text_content()).collect();
        assert_eq!(texts.first().map(String::as_str), Some("look"));
        assert_eq!(texts.last().map(String::as_str), Some("thanks"));
        assert!(texts.iter().any(|t| t == "both read"));
    }
}

#[test]
fn a_rewind_under_parallel_calls_is_still_a_branch_with_a_plain_id() {
    // After the parallel calls and the answer, the user rewinds to the
    // second prompt and sends another: two prompts share a parent.
    let mut lines = parallel_file(3, false);
    lines.push(prompt("p1", Some("done"), 40, "first follow-up"));
    lines.push(assistant("p1a", "p1", 41, "msg_P1", text("answer one")));
    lines.push(prompt("p2", Some("done"), 50, "second follow-up"));
    lines.push(assistant("p2a", "p2", 51, "msg_P2", text("answer two")));
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{SID}.jsonl"));
    write_lines(&path, &lines);
    let m = manager(tmp.path());
    let report = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!(report.sessions.new, 2, "{report:?}");
    let main = read(&m, &format!("cc-{SID}"));
    assert_eq!(main.messages.last().unwrap().text_content(), "answer two");
    assert_calls_answered(&main.messages);
    let branch_id = format!("cc-{SID}-b-p1");
    let branch = read(&m, &branch_id);
    assert_eq!(branch.messages.last().unwrap().text_content(), "answer one");
    // The branch inherits everything up to the fork point, calls included.
    assert_calls_answered(&branch.messages);
    assert_eq!(branch.meta.source.as_ref().unwrap().extra["kind"], "branch");
    for e in m.list_sessions().unwrap() {
        assert!(!e.id.starts_with("cc-cc-"), "double prefix: {}", e.id);
    }
}

/// Every session's content blocks in order, by id (an import between two
/// lines of one response cuts it into two messages: blocks are compared).
fn all_blocks(m: &SessionManager) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| {
            let t = read(m, &e.id);
            let texts = t
                .messages
                .iter()
                .flat_map(|m| m.content.iter())
                .map(|b| serde_json::to_string(b).unwrap())
                .collect();
            (e.id, texts)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn importing_while_parallel_calls_are_written_matches_one_import_of_the_whole() {
    let mut lines = parallel_file(4, false);
    lines.push(prompt("p1", Some("done"), 40, "follow-up"));
    lines.push(assistant("p1a", "p1", 41, "msg_P1", tool_use("T9")));
    lines.push(assistant("p1b", "p1a", 42, "msg_P1", tool_use("T10")));
    lines.push(result("p1r", "p1a", 43, "T9", Some("p1a")));
    lines.push(result("p1s", "p1b", 44, "T10", Some("p1b")));
    lines.push(assistant("p1c", "p1s", 45, "msg_P2", text("answer")));
    let whole = tempfile::tempdir().unwrap();
    let path = whole.path().join(format!("{SID}.jsonl"));
    write_lines(&path, &lines);
    let fresh = manager(whole.path());
    run(&fresh, Agent::ClaudeCode, std::slice::from_ref(&path));

    let grown = tempfile::tempdir().unwrap();
    let path = grown.path().join(format!("{SID}.jsonl"));
    let m = manager(grown.path());
    for n in 1..=lines.len() {
        write_lines(&path, &lines[..n]);
        let report = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
        assert_eq!(report.sessions.forked, 0, "after {n} lines: {report:?}");
    }
    assert_eq!(all_blocks(&m), all_blocks(&fresh));
    for (id, _) in all_blocks(&m) {
        assert_calls_answered(&read(&m, &id).messages);
    }
}

#[test]
fn branches_of_subagent_files_carry_one_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("projects/-work-app");
    let sub = project.join(SID).join("subagents/agent-abc123.jsonl");
    let mut lines = vec![
        prompt("s1", None, 0, "survey"),
        assistant("s2", "s1", 1, "msg_1", text("first")),
        prompt("s3", Some("s2"), 2, "again"),
        assistant("s4", "s3", 3, "msg_2", text("second")),
        prompt("s5", Some("s2"), 4, "instead"),
        assistant("s6", "s5", 5, "msg_3", text("third")),
    ];
    for l in &mut lines {
        l["isSidechain"] = json!(true);
        l["agentId"] = json!("abc123");
    }
    write_lines(&sub, &lines);
    write_lines(
        &project.join(format!("{SID}.jsonl")),
        &[
            prompt("u1", None, 0, "go"),
            assistant("a1", "u1", 1, "msg_A", text("ok")),
        ],
    );
    let m = manager(tmp.path());
    let sources = import::sources_of(Agent::ClaudeCode, Some(tmp.path())).unwrap();
    let report = import::import(&m, &sources, &mut |_| {}).unwrap();
    let mut ids = report.created.clone();
    ids.sort();
    assert_eq!(
        ids,
        [
            format!("cc-{SID}"),
            format!("cc-{SID}-agent-abc123"),
            format!("cc-{SID}-agent-abc123-b-s3"),
        ]
    );
}

fn at(s: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(s).unwrap().into()
}

#[test]
fn imported_sessions_are_timed_by_their_source_not_by_the_import() {
    // Two sessions from long ago, the older written second; a subagent
    // ending at the same time as its parent.
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("projects/-work-app");
    let older = "11111111-0000-4000-8000-000000000001";
    let newer = "22222222-0000-4000-8000-000000000002";
    let session = |sid: &str, day: u32, extra: &[Value]| {
        let mut lines = vec![
            prompt("u1", None, 0, "start"),
            assistant("a1", "u1", 1, "msg_1", text("ok")),
            prompt("u2", Some("a1"), 125, "more"),
        ];
        lines.extend_from_slice(extra);
        let s: Vec<Value> = lines
            .into_iter()
            .map(|mut l| {
                l["sessionId"] = json!(sid);
                let t = l["timestamp"]
                    .as_str()
                    .unwrap()
                    .replace("03-01", &format!("03-{day:02}"));
                l["timestamp"] = json!(t);
                l
            })
            .collect();
        write_lines(&project.join(format!("{sid}.jsonl")), &s);
    };
    session(newer, 2, &[]);
    session(older, 1, &[]);
    // The newer session's subagent, whose last record is its parent's time.
    let mut sub = vec![
        prompt("s1", None, 100, "sub"),
        assistant("s2", "s1", 125, "msg_s", text("sub done")),
    ];
    for l in &mut sub {
        l["isSidechain"] = json!(true);
        l["sessionId"] = json!(newer);
        let t = l["timestamp"].as_str().unwrap().replace("03-01", "03-02");
        l["timestamp"] = json!(t);
    }
    write_lines(&project.join(newer).join("subagents/agent-zz.jsonl"), &sub);

    let m = manager(tmp.path());
    let sources = import::sources_of(Agent::ClaudeCode, Some(tmp.path())).unwrap();
    import::import(&m, &sources, &mut |_| {}).unwrap();
    let listed = m.list_sessions().unwrap();
    let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            format!("cc-{newer}"),
            format!("cc-{newer}-agent-zz"),
            format!("cc-{older}")
        ],
        "newest source activity first, the parent before its subagent"
    );
    let old = listed
        .iter()
        .find(|e| e.id == format!("cc-{older}"))
        .unwrap();
    assert_eq!(old.created_at, at("2026-03-01T10:00:00Z"));
    assert_eq!(old.last_activity, at("2026-03-01T10:02:05Z"));
    // A later import of the grown source moves it to its new last record.
    let mut grown = fs::read_to_string(project.join(format!("{older}.jsonl"))).unwrap();
    let mut l = assistant("a2", "u2", 0, "msg_2", text("later"));
    l["sessionId"] = json!(older);
    l["timestamp"] = json!("2026-03-03T09:00:00.000Z");
    grown.push_str(&format!("{l}\n"));
    fs::write(project.join(format!("{older}.jsonl")), grown).unwrap();
    import::import(&m, &sources, &mut |_| {}).unwrap();
    let listed = m.list_sessions().unwrap();
    assert_eq!(listed[0].id, format!("cc-{older}"));
    assert_eq!(listed[0].last_activity, at("2026-03-03T09:00:00Z"));
    assert_eq!(listed[0].created_at, at("2026-03-01T10:00:00Z"));
}

#[test]
fn a_source_session_id_resolves_to_its_top_level_session() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("projects/-work-app");
    let mut lines = parallel_file(2, true);
    lines.push(prompt("p1", Some("done"), 40, "first follow-up"));
    lines.push(prompt("p2", Some("done"), 50, "second follow-up"));
    write_lines(&project.join(format!("{SID}.jsonl")), &lines);
    let mut sub = vec![
        prompt("s1", None, 10, "sub"),
        assistant("s2", "s1", 11, "msg_s", text("sub done")),
    ];
    for l in &mut sub {
        l["isSidechain"] = json!(true);
    }
    write_lines(&project.join(SID).join("subagents/agent-q1.jsonl"), &sub);
    let m = manager(tmp.path());
    let sources = import::sources_of(Agent::ClaudeCode, Some(tmp.path())).unwrap();
    let report = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!(report.sessions.new, 3, "{report:?}");
    let main = format!("cc-{SID}");
    assert_eq!(m.resolve(SID).unwrap(), main);
    assert_eq!(m.resolve(&SID[..8]).unwrap(), main);
    assert_eq!(m.resolve(&main).unwrap(), main);
    assert_eq!(
        m.resolve(&format!("{SID}-agent-q1")).unwrap(),
        format!("cc-{SID}-agent-q1")
    );
    assert!(m.resolve("ffffffff").is_err());
}

#[test]
fn synthetic_prompts_are_never_titles() {
    let synthetic = [
        "[Request interrupted by user]",
        "[Request interrupted by user for tool use]",
        "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>",
        "<local-command-stdout>Set model to opus</local-command-stdout>",
        "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages or otherwise consider them in your response unless the user explicitly asks you to.",
        "This session is being continued from a previous conversation that ran out of context.",
        "  <system-reminder>x</system-reminder>",
    ];
    for first in synthetic {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(format!("{SID}.jsonl"));
        write_lines(
            &path,
            &[
                prompt("u0", None, 0, first),
                prompt("u1", Some("u0"), 1, "fix the parser"),
                assistant("a1", "u1", 2, "msg_1", text("ok")),
            ],
        );
        let m = manager(tmp.path());
        run(&m, Agent::ClaudeCode, &[path]);
        let t = read(&m, &format!("cc-{SID}"));
        assert_eq!(
            t.title.as_deref(),
            Some("fix the parser"),
            "first: {first:?}"
        );
        assert!(import::is_synthetic_prompt(first));
    }
    assert!(!import::is_synthetic_prompt("fix the parser"));
}

const THREAD: &str = "0199dddd-0000-7000-8000-00000000000d";

fn codex_line(n: usize, kind: &str, payload: Value) -> Value {
    json!({"timestamp": time(n), "type": kind, "payload": payload})
}

fn codex_head() -> Vec<Value> {
    vec![
        codex_line(
            0,
            "session_meta",
            json!({"id": THREAD, "timestamp": time(0), "cwd": "/work/app", "originator": "codex_cli_rs", "cli_version": "0.50.0"}),
        ),
        codex_line(
            1,
            "turn_context",
            json!({"cwd": "/work/app", "model": "gpt-5-codex"}),
        ),
        codex_line(
            2,
            "event_msg",
            json!({"type": "user_message", "message": "why?"}),
        ),
        codex_line(
            2,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "why?"}]}),
        ),
    ]
}

fn import_codex(lines: &[Value]) -> (SessionManager, Transcript, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!(
        "sessions/2026/03/01/rollout-2026-03-01T10-00-00-{THREAD}.jsonl"
    ));
    write_lines(&path, lines);
    let m = manager(tmp.path());
    let report = run(&m, Agent::Codex, &[path]);
    assert_eq!(report.sessions.new, 1, "{report:?}");
    let t = read(&m, &format!("cx-{THREAD}"));
    (m, t, tmp)
}

fn thinking_texts(t: &Transcript) -> Vec<String> {
    t.messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::Thinking { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn codex_reasoning_summaries_are_shown_once_whichever_stream_comes_first() {
    let parts = ["**Looking** at the parser", "Then the lexer"];
    let events: Vec<Value> = parts
        .iter()
        .map(|p| {
            codex_line(
                3,
                "event_msg",
                json!({"type": "agent_reasoning", "text": p}),
            )
        })
        .collect();
    let item = codex_line(
        4,
        "response_item",
        json!({"type": "reasoning", "summary": parts.iter().map(|p| json!({"type": "summary_text", "text": p})).collect::<Vec<_>>(),
               "encrypted_content": "gAAAA-secret"}),
    );
    let answer = [
        codex_line(
            5,
            "event_msg",
            json!({"type": "agent_message", "message": "because"}),
        ),
        codex_line(
            5,
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "because"}]}),
        ),
    ];
    for events_first in [true, false] {
        let mut lines = codex_head();
        if events_first {
            lines.extend(events.iter().cloned());
            lines.push(item.clone());
        } else {
            lines.push(item.clone());
            lines.extend(events.iter().cloned());
        }
        lines.extend(answer.iter().cloned());
        let (_m, t, _tmp) = import_codex(&lines);
        let shown = thinking_texts(&t).join("\n");
        for p in parts {
            assert_eq!(
                shown.matches(p).count(),
                1,
                "events first: {events_first}: {shown:?}"
            );
        }
        assert!(!serde_json::to_string(&t.messages)
            .unwrap()
            .contains("\"text\":\"gAAAA"));
    }
}

#[test]
fn codex_token_counts_fold_into_their_turn_not_into_empty_messages() {
    let count = |n: usize, total: u64| {
        codex_line(
            n,
            "event_msg",
            json!({"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": total, "cached_input_tokens": 0, "output_tokens": 10, "reasoning_output_tokens": 0, "total_tokens": total + 10},
            "last_token_usage": {"input_tokens": 50, "cached_input_tokens": 0, "output_tokens": 10, "reasoning_output_tokens": 0, "total_tokens": 60}}}),
        )
    };
    let mut lines = codex_head();
    lines.extend([
        codex_line(3, "response_item", json!({"type": "function_call", "name": "shell", "arguments": "{\"cmd\":\"ls\"}", "call_id": "c1"})),
        count(4, 100),
        codex_line(5, "response_item", json!({"type": "function_call_output", "call_id": "c1", "output": "a b"})),
        codex_line(6, "event_msg", json!({"type": "agent_message", "message": "two files"})),
        codex_line(6, "response_item", json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two files"}]})),
        count(7, 200),
        // A response that wrote no item of its own (the context compaction).
        codex_line(8, "compacted", json!({"message": "summary of the turn"})),
        count(9, 300),
    ]);
    let (_m, t, _tmp) = import_codex(&lines);
    for m in &t.messages {
        assert!(
            !m.content.is_empty(),
            "an empty {:?} message: {:?}",
            m.role,
            m.extra
        );
    }
    let input: u64 = t
        .messages
        .iter()
        .filter_map(|m| m.usage)
        .map(|u| u.input_tokens + u.cache_read_input_tokens)
        .sum();
    assert_eq!(input, 300);
}

#[test]
fn an_openai_export_reports_each_kind_of_loss_once() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{SID}.jsonl"));
    let mut lines = Vec::new();
    let mut prev: Option<String> = None;
    for turn in 0..40 {
        let u = format!("u{turn}");
        lines.push(prompt(&u, prev.as_deref(), turn * 3, "next"));
        let a = format!("a{turn}");
        lines.push(assistant(
            &a,
            &u,
            turn * 3 + 1,
            &format!("msg_{turn}"),
            text("ok"),
        ));
        prev = Some(a);
    }
    write_lines(&path, &lines);
    let mut m = manager(tmp.path());
    run(&m, Agent::ClaudeCode, &[path]);
    let e = m
        .export(
            &format!("cc-{SID}"),
            memoir::manager::ExportOptions {
                format: memoir::manager::ExportFormat::OpenAi,
                redact: false,
            },
        )
        .unwrap();
    assert!(e.losses.len() >= 80, "{}", e.losses.len());
    let kinds: Vec<&str> = e.loss_summary.iter().map(|s| s.kind).collect();
    let mut unique = kinds.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), kinds.len(), "a kind is summarised twice");
    assert!(kinds.len() <= 6, "{kinds:?}");
    assert_eq!(
        e.loss_summary.iter().map(|s| s.count).sum::<usize>(),
        e.losses.len()
    );
    let metadata = e
        .loss_summary
        .iter()
        .find(|s| s.kind == "metadata")
        .unwrap();
    assert_eq!(metadata.messages, 40);
    assert!(metadata.details.contains(&"usage".to_string()));
}

#[test]
fn an_index_entry_timing_an_import_by_its_file_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(format!("{SID}.jsonl"));
    write_lines(&path, &parallel_file(2, false));
    let m = manager(tmp.path());
    run(&m, Agent::ClaudeCode, &[path]);
    let id = format!("cc-{SID}");
    let source_time = m.list_sessions().unwrap()[0].last_activity;
    assert_eq!(source_time, at("2026-03-01T10:00:30Z"));
    drop(m);
    // What an older build wrote: the transcript's mtime as last activity.
    let index = tmp.path().join("store/index");
    let entry_path = index.join(format!("{id}.json"));
    let mut entry: Value = serde_json::from_slice(&fs::read(&entry_path).unwrap()).unwrap();
    let mtime = entry["stamp"]["mtime_ns"].as_i64().unwrap();
    entry["last_activity"] =
        serde_json::to_value(chrono::DateTime::from_timestamp_nanos(mtime)).unwrap();
    fs::write(&entry_path, serde_json::to_vec(&entry).unwrap()).unwrap();
    let _ = fs::remove_file(index.join("listing"));
    let m = manager(tmp.path());
    assert_eq!(m.list_sessions().unwrap()[0].last_activity, source_time);
}

/// An original session and its resumed copy in one project folder: the
/// copy repeats the original's four lines (uuids kept, its own
/// `sessionId`), then asks a second question. The copy's name sorts first.
fn original_and_resumed(dir: &Path) -> (PathBuf, PathBuf, Vec<Value>) {
    let project = dir.join("projects").join("-work-app");
    let original = project.join("ffff0000-0000-4000-8000-00000000000a.jsonl");
    let resumed = project.join("00000000-0000-4000-8000-00000000000b.jsonl");
    let lines = vec![
        prompt("u1", None, 1, "first question"),
        assistant("a1", "u1", 2, "msg_1", tool_use("call_1")),
        result("r1", "a1", 3, "call_1", Some("a1")),
        assistant("a2", "r1", 4, "msg_2", text("first answer")),
    ];
    write_lines(&original, &lines);
    let mut copy: Vec<Value> = lines
        .iter()
        .map(|l| {
            let mut l = l.clone();
            l["sessionId"] = json!("00000000-0000-4000-8000-00000000000b");
            l
        })
        .collect();
    copy.push(prompt("u2", Some("a2"), 100, "second question"));
    copy.push(assistant("a3", "u2", 101, "msg_3", text("second answer")));
    write_lines(&resumed, &copy);
    (original, resumed, copy)
}

/// Users' texts, tool call ids and provider ids of every session's own
/// messages, with how many sessions hold each.
fn own_items(m: &SessionManager) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for e in m.list_sessions().unwrap() {
        let t = read(m, &e.id);
        for msg in &t.messages[t.inherited..] {
            let mut items: Vec<String> = msg.tool_use_ids().map(str::to_string).collect();
            items.extend(msg.tool_result_ids().map(|id| format!("result:{id}")));
            if msg.role == Role::User {
                items.push(msg.text_content());
            }
            items.extend(msg.provider_id.clone());
            for i in items.into_iter().filter(|i| !i.is_empty()) {
                *out.entry(i).or_insert(0) += 1;
            }
        }
    }
    out
}

#[test]
fn a_resumed_session_is_a_fork_of_the_session_it_repeats_holding_only_its_own_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let (original, resumed, mut lines) = original_and_resumed(tmp.path());
    let m = manager(tmp.path());
    let both = [resumed.clone(), original.clone()];
    let first = run(&m, Agent::ClaudeCode, &both);
    assert!(
        first.errors.is_empty() && first.notes.is_empty(),
        "{first:?}"
    );
    let items = own_items(&m);
    assert!(items.values().all(|&n| n == 1), "{items:?}");
    for want in [
        "first question",
        "second question",
        "call_1",
        "result:call_1",
        "msg_3",
    ] {
        assert_eq!(items.get(want), Some(&1), "{want}: {items:?}");
    }
    let orig = read(&m, "cc-ffff0000-0000-4000-8000-00000000000a");
    assert_eq!((orig.inherited, orig.messages.len()), (0, 4));
    let copy = read(&m, "cc-00000000-0000-4000-8000-00000000000b");
    let parent = copy.meta.parent.as_ref().expect("a fork by reference");
    assert_eq!(parent.session, orig.meta.id);
    assert_eq!((copy.inherited, copy.messages.len()), (4, 6));
    assert_eq!(copy.messages[4].text_content(), "second question");
    // Timed by its source: its first record, its last.
    assert_eq!(copy.meta.created_at, at(&time(1)));
    assert_eq!(copy.title.as_deref(), Some("second question"));

    // Again: nothing new.
    let again = run(&m, Agent::ClaudeCode, &both);
    assert_eq!((again.records, again.sessions.new), (0, 0), "{again:?}");

    // The resumed session grows: only its new lines are appended, to it.
    lines.push(prompt("u3", Some("a3"), 200, "third question"));
    lines.push(assistant("a4", "u3", 201, "msg_4", text("third answer")));
    write_lines(&resumed, &lines);
    let grown = run(&m, Agent::ClaudeCode, &both);
    assert_eq!(
        (grown.messages, grown.sessions.new, grown.sessions.forked),
        (2, 0, 0),
        "{grown:?}"
    );
    let copy = read(&m, "cc-00000000-0000-4000-8000-00000000000b");
    assert_eq!((copy.inherited, copy.messages.len()), (4, 8));
    let items = own_items(&m);
    assert!(items.values().all(|&n| n == 1), "{items:?}");
}

#[test]
fn a_session_imported_after_its_resumed_copy_is_a_fork_of_the_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let (original, resumed, _) = original_and_resumed(tmp.path());
    let m = manager(tmp.path());
    // The copy alone first (whole: nothing it repeats is imported), then both.
    run(&m, Agent::ClaudeCode, std::slice::from_ref(&resumed));
    let report = run(&m, Agent::ClaudeCode, &[original.clone(), resumed.clone()]);
    assert!(report.errors.is_empty(), "{report:?}");
    let items = own_items(&m);
    assert!(items.values().all(|&n| n == 1), "{items:?}");
    assert_eq!(items.get("first question"), Some(&1), "{items:?}");
    let orig = read(&m, "cc-ffff0000-0000-4000-8000-00000000000a");
    let parent = orig.meta.parent.as_ref().expect("a fork by reference");
    assert_eq!(parent.session, "cc-00000000-0000-4000-8000-00000000000b");
    assert_eq!((orig.inherited, orig.messages.len()), (4, 4));
}

#[test]
fn a_resumed_copy_with_nothing_of_its_own_yet_grows_without_repeating_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let (original, resumed, lines) = original_and_resumed(tmp.path());
    // First only the copy (as Claude Code writes it before the next prompt).
    write_lines(&resumed, &lines[..4]);
    let m = manager(tmp.path());
    let both = [resumed.clone(), original.clone()];
    let first = run(&m, Agent::ClaudeCode, &both);
    assert!(first.errors.is_empty(), "{first:?}");
    let items = own_items(&m);
    assert!(items.values().all(|&n| n == 1), "{items:?}");
    assert_eq!(items.get("first question"), Some(&1), "{items:?}");
    // Then the rest: appended once, to the copy's session.
    write_lines(&resumed, &lines);
    let grown = run(&m, Agent::ClaudeCode, &both);
    assert_eq!(
        (grown.messages, grown.sessions.new, grown.sessions.forked),
        (2, 0, 0),
        "{grown:?}"
    );
    let items = own_items(&m);
    assert!(items.values().all(|&n| n == 1), "{items:?}");
    assert_eq!(items.get("second question"), Some(&1), "{items:?}");
    let copy = read(&m, "cc-00000000-0000-4000-8000-00000000000b");
    assert_eq!(
        copy.messages.last().unwrap().text_content(),
        "second answer"
    );
}
