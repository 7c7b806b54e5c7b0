//! Importers against the real fixtures in `testdata/transcripts/`
//! (see its README; counts below were written down by reading the files),
//! plus incremental behaviour on copies in temp dirs: re-import is a no-op,
//! growth imports only the tail, rewrites and truncations become forks, torn
//! lines are retried, and the watcher picks up another process's appends.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memoir::import::{self, Agent, ImportReport, Source};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::{Block, Role, SOURCE_KEY};
use memoir::record::Record;
use memoir::store::Durability;
use memoir::transcript::Transcript;
use memoir::Message;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/transcripts")
        .join(rel)
}

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

fn read(m: &SessionManager, id: &str) -> Transcript {
    m.read_stored(id).unwrap()
}

fn own(t: &Transcript) -> &[Message] {
    &t.messages[t.inherited..]
}

fn copy_to(dir: &Path, rel: &str) -> PathBuf {
    let src = fixture(rel);
    let dst = dir.join(src.file_name().unwrap());
    fs::copy(&src, &dst).unwrap();
    dst
}

fn source_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn unknown_kinds(t: &Transcript) -> Vec<String> {
    t.unknown
        .iter()
        .filter_map(|r| match &r.record {
            Record::Unknown { raw, .. } => raw
                .get("entry")
                .and_then(|e| e.get("type"))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            _ => None,
        })
        .collect()
}

/// Every tool call of `messages` has exactly one result, and vice versa.
fn assert_paired(messages: &[Message]) {
    let uses: Vec<&str> = messages.iter().flat_map(|m| m.tool_use_ids()).collect();
    let mut results: Vec<&str> = messages.iter().flat_map(|m| m.tool_result_ids()).collect();
    let mut sorted = uses.clone();
    sorted.sort();
    results.sort();
    assert_eq!(sorted, results, "tool calls and results do not pair");
}

#[test]
fn claude_rewind_branch_is_a_fork_at_the_branch_point_and_compaction_is_crossed() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = fixture("claude-code/dag_compact_after_rewind.jsonl");
    let report = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    assert_eq!(report.sessions.new, 2, "{report:?}");
    assert!(
        report.skipped.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );

    // Main line: u1 a1 b2u b2a b2u2 b2a2 [compact_boundary] cs p1u p1a.
    let main = read(&m, "cc-dag_compact_after_rewind");
    let texts: Vec<String> = main.messages.iter().map(|m| m.text_content()).collect();
    assert_eq!(texts.len(), 9, "{texts:?}");
    assert_eq!(
        texts[..4],
        ["Start", "Ready", "Second attempt", "Second answer"]
    );
    assert_eq!(texts[8], "Final answer");
    assert_eq!(main.title.as_deref(), Some("Start"));
    assert_eq!(unknown_kinds(&main), vec!["system"]);
    let summary = &main.messages[6];
    assert_eq!(summary.extra[SOURCE_KEY]["compact_summary"], true);
    assert_eq!(main.messages[1].provider_id.as_deref(), Some("msg_a1"));
    assert_eq!(main.messages[1].extra[SOURCE_KEY]["request_id"], "req_a1");
    let u = main.messages[1].usage.unwrap();
    assert_eq!((u.input_tokens, u.output_tokens), (10, 5));
    assert_eq!(
        main.messages[0].timestamp.unwrap().to_rfc3339(),
        "2025-07-01T10:00:00+00:00"
    );
    let src = main.meta.source.as_ref().unwrap();
    assert_eq!(src.agent, "claude-code");
    assert_eq!(src.session.as_deref(), Some("s1"));
    assert_eq!(src.agent_version.as_deref(), Some("2.1.0"));
    assert_eq!(main.meta.workspace, Path::new("/tmp"));
    assert_eq!(main.meta.model, "claude-sonnet-4-20250514");

    // The abandoned first attempt: a fork of the main line after "Ready".
    let entries = m.list_sessions().unwrap();
    let branch = entries
        .iter()
        .find(|e| e.id != "cc-dag_compact_after_rewind")
        .unwrap();
    let b = read(&m, &branch.id);
    let parent = b
        .meta
        .parent
        .as_ref()
        .expect("branch is a fork by reference");
    assert_eq!(parent.session, "cc-dag_compact_after_rewind");
    assert_eq!(parent.messages, 2);
    assert_eq!(b.inherited, 2);
    let own_texts: Vec<String> = own(&b).iter().map(|m| m.text_content()).collect();
    assert_eq!(own_texts, ["First attempt", "First answer"]);
    assert_eq!(b.meta.source.as_ref().unwrap().extra["kind"], "branch");

    let again = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!(
        (again.records, again.sessions.new, again.files_read),
        (0, 0, 0)
    );
}

#[test]
fn claude_sidechains_become_a_linked_child_with_split_response_merged() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = fixture("claude-code/sidechain_integrated.jsonl");
    let report = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!(report.sessions.new, 2, "{report:?}");
    // Line 1's parent is not in the file: tolerated and reported.
    assert_eq!(report.notes.len(), 1, "{report:?}");
    assert_eq!(report.notes[0].line, 1);

    let main = read(&m, "cc-sidechain_integrated");
    assert_eq!(main.messages.len(), 3);
    assert_eq!(main.messages[0].role, Role::Assistant);
    assert_eq!(
        main.messages[0].tool_use_ids().collect::<Vec<_>>(),
        ["toolu_01JA2mLseQCAW3MdwPE4qWEk"]
    );
    assert_eq!(main.messages[1].role, Role::Tool);
    assert_paired(&main.messages);
    let u = main.messages[0].usage.unwrap();
    assert_eq!(
        (
            u.input_tokens,
            u.cache_creation_input_tokens,
            u.output_tokens
        ),
        (3, 141272, 365)
    );
    assert_eq!(
        main.meta.workspace,
        Path::new("e:\\Workspace\\src\\github\\claude-code-log")
    );
    // The mojibake in the tool result is kept byte for byte.
    let tool_text = serde_json::to_string(&main.messages[1]).unwrap();
    assert!(tool_text.contains("Perfect! Now I have"), "{tool_text}");

    let child_id = "cc-sidechain_integrated-agent-e1c84ba5";
    let child = read(&m, child_id);
    let src = child.meta.source.as_ref().unwrap();
    assert_eq!(src.extra["kind"], "subagent");
    assert_eq!(src.extra["parent_session"], "cc-sidechain_integrated");
    assert_eq!(src.extra["tool_use_id"], "toolu_01JA2mLseQCAW3MdwPE4qWEk");
    assert_eq!(src.extra["agent_id"], "e1c84ba5");
    // Lines 3 and 4 share message.id: one message with both blocks, usage once.
    assert_eq!(child.messages.len(), 2);
    let merged = &child.messages[0];
    assert_eq!(merged.content.len(), 2);
    assert!(matches!(&merged.content[1], Block::ToolUse { name, .. } if name == "Grep"));
    let u = merged.usage.unwrap();
    assert_eq!(
        (u.cache_creation_input_tokens, u.output_tokens),
        (19830, 183)
    );
    assert_eq!(
        merged.extra[SOURCE_KEY]["merged"].as_array().unwrap().len(),
        1
    );
    let result = &child.messages[1];
    assert!(result.text_content().is_empty());
    let text = serde_json::to_string(result).unwrap();
    assert!(text.contains("3130â†’"), "mojibake kept: {text}");
}

#[test]
fn claude_recent_format_pairs_parallel_agent_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = fixture("claude-code/55550000-0000-4000-8000-000000000001.jsonl");
    let report = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!(report.sessions.new, 1);
    assert_eq!(report.messages, 11);
    let t = read(&m, "cc-55550000-0000-4000-8000-000000000001");
    assert_eq!(t.messages.len(), 11);
    assert_paired(&t.messages);
    let spawn = &t.messages[7];
    assert_eq!(
        spawn.tool_use_ids().collect::<Vec<_>>(),
        ["toolu_sc_showcol1", "toolu_sc_showcol2"]
    );
    assert_eq!(t.messages[8].role, Role::Tool);
    assert_eq!(t.messages[9].role, Role::Tool);
    let usage: u64 = t
        .messages
        .iter()
        .filter_map(|m| m.usage)
        .map(|u| u.total())
        .sum();
    assert_eq!(usage, 5 * 160);
    assert_eq!(
        t.meta.source.as_ref().unwrap().agent_version.as_deref(),
        Some("2.1.173")
    );
    assert!(t.title.as_deref().unwrap().starts_with("Give me a tour"));
}

#[test]
fn claude_subagent_files_are_children_linked_to_the_spawning_call() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("projects/-workspace-example-app");
    let sid = "55550000-0000-4000-8000-000000000001";
    fs::create_dir_all(project.join(sid).join("subagents")).unwrap();
    fs::copy(
        fixture(&format!("claude-code/{sid}.jsonl")),
        project.join(format!("{sid}.jsonl")),
    )
    .unwrap();
    // A subagent transcript in the 2.1 layout (synthetic, shaped like the parent's lines).
    let sub = project.join(sid).join("subagents/agent-showcol1.jsonl");
    fs::write(
        &sub,
        format!(
            concat!(
                r#"{{"type":"user","uuid":"s1","parentUuid":null,"isSidechain":true,"agentId":"showcol1","sessionId":"{sid}","cwd":"/workspace/example-app","timestamp":"2026-06-15T10:00:08.500Z","message":{{"role":"user","content":"Survey src/web"}}}}"#,
                "\n",
                r#"{{"type":"assistant","uuid":"s2","parentUuid":"s1","isSidechain":true,"agentId":"showcol1","sessionId":"{sid}","cwd":"/workspace/example-app","timestamp":"2026-06-15T10:00:08.900Z","requestId":"req_s2","message":{{"id":"msg_s2","role":"assistant","model":"claude-haiku-4-5-20251001","stop_reason":"end_turn","content":[{{"type":"text","text":"Column layout."}}],"usage":{{"input_tokens":7,"output_tokens":3}}}}}}"#,
                "\n"
            ),
            sid = sid
        ),
    )
    .unwrap();
    let m = manager(tmp.path());
    let sources = import::sources_of(Agent::ClaudeCode, Some(tmp.path())).unwrap();
    assert_eq!(sources.len(), 2);
    let report = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!(report.sessions.new, 2, "{report:?}");
    let child = read(&m, &format!("cc-{sid}-agent-showcol1"));
    let src = child.meta.source.as_ref().unwrap();
    assert_eq!(src.extra["parent_session"], format!("cc-{sid}"));
    assert_eq!(src.extra["tool_use_id"], "toolu_sc_showcol1");
    assert_eq!(child.messages.len(), 2);
    // `sessions list` shows where each session came from.
    let listed = m.list_sessions().unwrap();
    assert!(listed
        .iter()
        .all(|e| e.source.as_ref().is_some_and(|s| s.path.is_some())));
}

#[test]
fn codex_rollout_uses_one_stream_pairs_tools_and_never_renders_encrypted_reasoning() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path =
        fixture("codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl");
    let report = run(&m, Agent::Codex, &[path]);
    assert_eq!(report.sessions.new, 1);
    let t = read(&m, "cx-11111111-1111-4111-8111-111111111111");
    let roles: Vec<Role> = t.messages.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(
        roles,
        [User, Assistant, Tool, Assistant, Tool, Assistant, Tool, Assistant]
    );
    // The user and agent texts are not duplicated: the copy written first
    // (the event) is the message, the response_item copy a source record.
    let texts: Vec<String> = t.messages.iter().map(|m| m.text_content()).collect();
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.contains("List the synthetic files"))
            .count(),
        1
    );
    assert_eq!(texts[7], "The synthetic files are alpha.txt and beta.txt.");
    assert!(
        matches!(&t.messages[1].content[0], Block::Thinking { text, .. } if text == "I will inspect the synthetic directory.")
    );
    match &t.messages[1].content[1] {
        Block::ToolUse { id, name, input } => {
            assert_eq!(
                (id.as_str(), name.as_str()),
                ("call-structured-001", "exec_command")
            );
            assert_eq!(input["cmd"], "find . -maxdepth 1 -type f");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&t.messages[4].content[0], Block::ToolResult { content, .. } if content == "Done!")
    );
    assert_paired(&t.messages);
    for msg in &t.messages {
        for b in &msg.content {
            let s = format!("{b:?}");
            assert!(!s.contains("SYNTHETIC_ENCRYPTED"), "{s}");
        }
    }
    assert_eq!(t.meta.model, "synthetic-model");
    assert_eq!(t.meta.provider, "synthetic");
    assert_eq!(t.configs.len(), 1);
    assert_eq!(t.configs[0].sandbox.as_deref(), Some("read-only"));
    assert_eq!(t.title.as_deref(), Some("List the synthetic files."));
    // session_meta and the unknown future record are kept verbatim.
    let kinds: Vec<String> = t
        .unknown
        .iter()
        .filter_map(|r| match &r.record {
            Record::Unknown { raw, .. } => raw["entry"]["type"].as_str().map(str::to_string),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session_meta",
            "response_item",
            "response_item",
            "future_synthetic_record"
        ]
    );
}

#[test]
fn codex_malformed_line_is_skipped_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = fixture("codex/rollout-66666666-6666-4666-8666-666666666666.malformed.jsonl");
    let report = run(&m, Agent::Codex, std::slice::from_ref(&path));
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].line, 3);
    assert!(report.skipped[0]
        .file
        .ends_with("rollout-66666666-6666-4666-8666-666666666666.malformed.jsonl"));
    let t = read(&m, "cx-66666666-6666-4666-8666-666666666666");
    assert_eq!(t.messages.len(), 1);
    assert_eq!(
        t.messages[0].text_content(),
        "Safe line before malformed input."
    );
}

#[test]
fn codex_branch_replaying_its_parent_is_a_fork_and_usage_is_not_counted_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let parent = fixture("codex/branch-history/2026-05-12T08-00-00-parent.jsonl");
    let branch = fixture("codex/branch-history/2026-05-12T08-02-00-branch.jsonl");
    let report = run(&m, Agent::Codex, &[branch, parent]);
    assert_eq!(report.sessions.new, 2, "{report:?}");
    let p = read(&m, "cx-2026-05-12T08-00-00-parent");
    let b = read(&m, "cx-2026-05-12T08-02-00-branch");
    let total =
        |ms: &[Message]| -> u64 { ms.iter().filter_map(|m| m.usage).map(|u| u.total()).sum() };
    assert_eq!(total(own(&p)), 1200);
    assert_eq!(
        b.meta.parent.as_ref().unwrap().session,
        "cx-2026-05-12T08-00-00-parent"
    );
    assert_eq!(total(own(&b)), 850);
    let u = own(&b)[0].usage.unwrap();
    // 1600-300 new input minus the parent's 1000-100; cached 300-100.
    assert_eq!(
        (
            u.input_tokens,
            u.cache_read_input_tokens,
            u.output_tokens,
            u.reasoning_tokens
        ),
        (400, 200, 250, 20)
    );
}

#[test]
fn reimport_is_a_no_op_and_a_lost_cursor_adds_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let all: Vec<PathBuf> = [
        "dag_compact_after_rewind.jsonl",
        "sidechain_integrated.jsonl",
        "55550000-0000-4000-8000-000000000001.jsonl",
    ]
    .iter()
    .map(|f| fixture(&format!("claude-code/{f}")))
    .collect();
    let first = run(&m, Agent::ClaudeCode, &all);
    assert_eq!(first.sessions.new, 5);
    let again = run(&m, Agent::ClaudeCode, &all);
    assert_eq!(
        (again.records, again.files_read, again.sessions.unchanged),
        (0, 0, 5)
    );
    fs::remove_file(tmp.path().join("store/import/cursors.json")).unwrap();
    let lost = run(&m, Agent::ClaudeCode, &all);
    assert_eq!(
        (lost.records, lost.sessions.new, lost.sessions.forked),
        (0, 0, 0),
        "{lost:?}"
    );
    assert_eq!(m.list_sessions().unwrap().len(), 5);
}

#[test]
fn a_grown_source_imports_only_its_tail_even_inside_a_split_response() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let full = source_lines(&fixture("claude-code/sidechain_integrated.jsonl"));
    let path = tmp.path().join("grow.jsonl");
    // Cut between lines 3 and 4: the two halves of one response.
    fs::write(&path, full[..3].join("\n") + "\n").unwrap();
    let first = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    assert_eq!(first.sessions.new, 2);
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all((full[3..].join("\n") + "\n").as_bytes())
        .unwrap();
    drop(f);
    let second = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    assert_eq!(second.sessions.forked, 0, "{second:?}");
    assert_eq!(second.sessions.new, 0);
    // New: line 4 (continuation), line 5 (tool result), line 6 (main answer).
    assert_eq!(second.messages, 3, "{second:?}");
    let child = read(&m, "cc-grow-agent-e1c84ba5");
    assert_eq!(child.messages.len(), 3);
    assert_eq!(child.messages[0].provider_id, child.messages[1].provider_id);
    let third = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!((third.records, third.sessions.forked), (0, 0));
}

#[test]
fn a_grown_codex_rollout_appends_only_new_records() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = copy_to(
        tmp.path(),
        "codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
    );
    let full = source_lines(&path);
    fs::write(&path, full[..7].join("\n") + "\n").unwrap();
    let first = run(&m, Agent::Codex, std::slice::from_ref(&path));
    let id = "cx-11111111-1111-4111-8111-111111111111";
    let before = m.store().read(id).unwrap().last_seq;
    fs::write(&path, full.join("\n") + "\n").unwrap();
    let second = run(&m, Agent::Codex, std::slice::from_ref(&path));
    assert_eq!(
        (second.sessions.updated, second.sessions.forked),
        (1, 0),
        "{second:?}"
    );
    let after = m.store().read(id).unwrap().last_seq;
    assert_eq!(after - before, second.records as u64);
    // 11 records plus the two later copies of already-shown texts.
    assert_eq!(first.records + second.records, 13);
    assert_eq!(read(&m, id).messages.len(), 8);
}

/// Every session of `m`, by id, with its messages as the reader sees them.
fn all_messages(m: &SessionManager) -> Vec<(String, Vec<Message>)> {
    let mut ids: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let msgs = read(m, &id).messages;
            (id, msgs)
        })
        .collect()
}

#[test]
fn a_grown_source_is_read_from_its_cursor_and_matches_a_fresh_import() {
    for (agent, rel, cut) in [
        (
            Agent::ClaudeCode,
            "claude-code/55550000-0000-4000-8000-000000000001.jsonl",
            5,
        ),
        // The main line grows after a compaction, beside a rewind branch.
        (
            Agent::ClaudeCode,
            "claude-code/dag_compact_after_rewind.jsonl",
            10,
        ),
        (
            Agent::Codex,
            "codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
            7,
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let m = manager(&tmp.path().join("grown"));
        let path = copy_to(tmp.path(), rel);
        let full = source_lines(&path);
        fs::write(&path, full[..cut].join("\n") + "\n").unwrap();
        run(&m, agent, std::slice::from_ref(&path));
        let tail = full[cut..].join("\n") + "\n";
        let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(tail.as_bytes()).unwrap();
        drop(f);
        let second = run(&m, agent, std::slice::from_ref(&path));
        // Only the appended bytes were read: the prefix was checked by its
        // cursor windows, not parsed again.
        assert_eq!(second.bytes_read, tail.len() as u64, "{rel}: {second:?}");
        assert_eq!(
            (
                second.sessions.forked,
                second.sessions.new,
                second.sessions.updated
            ),
            (0, 0, 1),
            "{rel}: {second:?}"
        );
        let fresh = manager(&tmp.path().join("fresh"));
        run(&fresh, agent, std::slice::from_ref(&path));
        assert_eq!(all_messages(&m), all_messages(&fresh), "{rel}");
        let third = run(&m, agent, &[path]);
        assert_eq!((third.records, third.files_read), (0, 0), "{rel}");
    }
}

#[test]
fn a_resumed_source_rewritten_before_its_cursor_is_still_a_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = copy_to(
        tmp.path(),
        "claude-code/55550000-0000-4000-8000-000000000001.jsonl",
    );
    let mut lines = source_lines(&path);
    fs::write(&path, lines[..9].join("\n") + "\n").unwrap();
    run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    // Same length before the cursor, one byte changed, and new lines after it.
    lines[2] = lines[2].replacen('e', "E", 1);
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    let r = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!(r.sessions.forked, 1, "{r:?}");
}

#[test]
fn a_compressed_cold_codex_rollout_imports_like_the_plain_one() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl";
    let plain = fixture(&format!("codex/{name}"));
    let home = tmp.path().join("codex");
    let day = home.join("sessions/2026/01/02");
    fs::create_dir_all(&day).unwrap();
    let packed = ruzstd::encoding::compress_to_vec(
        fs::File::open(&plain).unwrap(),
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    fs::write(day.join(format!("{name}.zst")), &packed).unwrap();
    assert_eq!(
        import::detect_file(&day.join(format!("{name}.zst"))).unwrap(),
        Some(Agent::Codex)
    );
    let sources = import::sources_of(Agent::Codex, Some(&home)).unwrap();
    assert_eq!(sources.len(), 1, "{sources:?}");
    let m = manager(&tmp.path().join("a"));
    let first = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert!(
        first.errors.is_empty() && first.skipped.is_empty(),
        "{first:?}"
    );
    let fresh = manager(&tmp.path().join("b"));
    run(&fresh, Agent::Codex, &[plain]);
    assert_eq!(all_messages(&m), all_messages(&fresh));
    let again = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!((again.files_read, again.records), (0, 0), "{again:?}");
}

#[test]
fn imported_images_are_blobs_not_inline_base64() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    // A 1×1 PNG pasted into a prompt: small, yet kept out of the log.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let line = serde_json::json!({
        "type": "user", "uuid": "img-1", "parentUuid": null, "sessionId": "img",
        "timestamp": "2026-06-15T10:00:00.000Z", "cwd": "/work",
        "message": {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
        ]}
    });
    let path = tmp.path().join("img.jsonl");
    fs::write(&path, format!("{line}\n")).unwrap();
    let r = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    assert_eq!(r.sessions.new, 1, "{r:?}");
    let raw = fs::read_to_string(m.store().location("cc-img")).unwrap();
    assert!(!raw.contains(png), "the image is inline in the log");
    assert!(
        raw.contains("\"blob\"") && raw.contains("\"media_type\":\"image/png\""),
        "no blob reference in the log: {raw}"
    );
    let t = read(&m, "cc-img");
    let images: Vec<&Block> = t.messages[0]
        .content
        .iter()
        .filter(|b| matches!(b, Block::Image { .. }))
        .collect();
    assert_eq!(images.len(), 1, "{:?}", t.messages[0].content);
    assert!(
        matches!(images[0], Block::Image { data, media_type } if data == png && media_type == "image/png")
    );
    // Re-import compares the stored record (image read back): nothing new.
    let again = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!((again.records, again.sessions.forked), (0, 0), "{again:?}");
}

#[test]
fn rewritten_and_truncated_sources_become_forks_not_silent_merges() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = copy_to(
        tmp.path(),
        "claude-code/55550000-0000-4000-8000-000000000001.jsonl",
    );
    run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    let id = "cc-55550000-0000-4000-8000-000000000001";
    let original = read(&m, id);

    // Rewritten in place: the last answer changed.
    let mut lines = source_lines(&path);
    lines[10] = lines[10].replace("Both modules are surveyed", "REWRITTEN answer");
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    let r = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    assert_eq!((r.sessions.forked, r.messages), (1, 1), "{r:?}");
    let fork_id = format!("{id}-r1");
    let fork = read(&m, &fork_id);
    assert_eq!(fork.meta.parent.as_ref().unwrap().session, id);
    assert_eq!(fork.inherited, 10);
    assert!(fork.messages[10].text_content().starts_with("REWRITTEN"));
    assert_eq!(fork.meta.source.as_ref().unwrap().extra["replaces"], id);
    // The original import is untouched.
    assert_eq!(read(&m, id).messages, original.messages);

    // Truncated: the fork of the fork ends where the source now ends.
    fs::write(&path, lines[..4].join("\n") + "\n").unwrap();
    let t = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    assert_eq!(t.sessions.forked, 1, "{t:?}");
    let cut = read(&m, &format!("{id}-r2"));
    assert_eq!(cut.messages.len(), 4);
    // Growing again continues the newest fork.
    fs::write(&path, lines[..6].join("\n") + "\n").unwrap();
    let g = run(&m, Agent::ClaudeCode, &[path]);
    assert_eq!(
        (g.sessions.forked, g.sessions.updated, g.messages),
        (0, 1, 2),
        "{g:?}"
    );
    assert_eq!(read(&m, &format!("{id}-r2")).messages.len(), 6);
}

#[test]
fn a_torn_last_line_is_reported_and_retried_next_run() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = copy_to(
        tmp.path(),
        "codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
    );
    let full = source_lines(&path);
    let half = &full[3][..full[3].len() / 2];
    fs::write(&path, full[..3].join("\n") + "\n" + half).unwrap();
    let first = run(&m, Agent::Codex, std::slice::from_ref(&path));
    assert_eq!(first.torn.len(), 1, "{first:?}");
    assert_eq!(first.torn[0].line, 4);
    assert!(first.skipped.is_empty());
    let id = "cx-11111111-1111-4111-8111-111111111111";
    // The user's text, from its event line (line 3).
    assert_eq!(read(&m, id).messages.len(), 1);
    // The writer finishes the line: its response_item copy of the text is
    // kept as a source record, nothing is re-imported or forked.
    fs::write(&path, full[..4].join("\n") + "\n").unwrap();
    let second = run(&m, Agent::Codex, std::slice::from_ref(&path));
    assert!(second.torn.is_empty());
    assert_eq!(
        (second.records, second.messages, second.sessions.forked),
        (1, 0, 0)
    );
    let t = read(&m, id);
    assert_eq!(t.messages[0].text_content(), "List the synthetic files.");
    assert_eq!(t.unknown.last().map(|r| r.seq), Some(t.last_seq));
}

#[test]
fn sources_are_never_written() {
    let tmp = tempfile::tempdir().unwrap();
    let m = manager(tmp.path());
    let path = copy_to(tmp.path(), "claude-code/dag_compact_after_rewind.jsonl");
    let mut perms = fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    fs::set_permissions(&path, perms).unwrap();
    let before = fs::read(&path).unwrap();
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let r = run(&m, Agent::ClaudeCode, std::slice::from_ref(&path));
    assert_eq!(r.sessions.new, 2);
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), mtime);
}

#[test]
fn watch_picks_up_lines_appended_by_another_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions/2026/01/02");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl");
    let full = source_lines(&fixture(
        "codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl",
    ));
    fs::write(&path, full[..4].join("\n") + "\n").unwrap();
    let store = tmp.path().join("store");
    let home = tmp.path().to_path_buf();
    let watcher = std::thread::spawn(move || {
        let m = SessionManager::open(&store, ManagerOptions::default()).unwrap();
        let options = import::watch::WatchOptions {
            roots: vec![(Agent::Codex, Some(home))],
            files: Vec::new(),
            interval: Duration::from_millis(200),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let seen = std::cell::Cell::new(0usize);
        import::watch::watch(
            &m,
            &options,
            &mut || Instant::now() < deadline && seen.get() < 8,
            &mut |r| seen.set(seen.get() + r.messages),
        )
        .unwrap();
        seen.get()
    });
    std::thread::sleep(Duration::from_millis(600));
    // Another process appends the rest of the rollout.
    let rest = full[4..].join("\n") + "\n";
    let appended = Instant::now();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("cat >> '{}'", path.display()))
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(rest.as_bytes())?;
            child.wait()
        })
        .unwrap();
    assert!(status.success());
    let seen = watcher.join().unwrap();
    assert_eq!(seen, 8, "all 8 messages imported");
    assert!(appended.elapsed() < Duration::from_secs(10));
}

#[test]
fn gemini_legacy_json_and_jsonl_with_set_records() {
    let tmp = tempfile::tempdir().unwrap();
    let chats = tmp.path().join(".gemini/tmp/myproj/chats");
    fs::create_dir_all(&chats).unwrap();
    fs::write(
        tmp.path().join(".gemini/projects.json"),
        r#"{"projects":{"/home/u/myproj":"myproj"}}"#,
    )
    .unwrap();
    // Synthetic files in the two documented shapes (no public fixture exists).
    fs::write(
        chats.join("session-2026-01-01T10-00-aaaa.json"),
        r#"{"sessionId":"aaaa","projectHash":"h","startTime":"2026-01-01T10:00:00.000Z","lastUpdated":"2026-01-01T10:01:00.000Z","messages":[
{"id":"m1","timestamp":"2026-01-01T10:00:01.000Z","type":"user","content":"Count the files"},
{"id":"m2","timestamp":"2026-01-01T10:00:02.000Z","type":"gemini","content":"There are 3.","model":"gemini-2.5-pro","thoughts":[{"subject":"Plan","description":"list them","timestamp":"2026-01-01T10:00:01.500Z"}],"tokens":{"input":100,"output":10,"cached":40,"thoughts":5,"tool":0,"total":155},"toolCalls":[{"id":"c1","name":"ls","args":{"path":"."},"status":"success","result":[{"functionResponse":{"id":"c1","name":"ls","response":{"output":"a b c"}}}]}]},
{"id":"m3","timestamp":"2026-01-01T10:00:03.000Z","type":"info","content":"Saved"}]}"#,
    )
    .unwrap();
    fs::write(
        chats.join("session-2026-01-02T10-00-bbbb.jsonl"),
        concat!(
            r#"{"sessionId":"bbbb","projectHash":"h","startTime":"2026-01-02T10:00:00.000Z"}"#, "\n",
            r#"{"id":"u1","timestamp":"2026-01-02T10:00:01.000Z","type":"user","content":[{"text":"Hello"}]}"#, "\n",
            r#"{"id":"g1","timestamp":"2026-01-02T10:00:02.000Z","type":"gemini","content":"Hi"}"#, "\n",
            r#"{"id":"g1","timestamp":"2026-01-02T10:00:02.000Z","type":"gemini","content":"Hi there","tokens":{"input":5,"output":2}}"#, "\n",
            r#"{"$set":{"summary":"Greeting","lastUpdated":"2026-01-02T10:00:03.000Z"}}"#, "\n",
        ),
    )
    .unwrap();
    let m = manager(tmp.path());
    let sources = import::sources_of(Agent::GeminiCli, Some(&tmp.path().join(".gemini"))).unwrap();
    assert_eq!(sources.len(), 2);
    for s in &sources {
        assert_eq!(
            import::detect_file(&s.path).unwrap(),
            Some(Agent::GeminiCli),
            "{:?}",
            s.path
        );
    }
    let r = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!(r.sessions.new, 2, "{r:?}");
    let a = read(&m, "gm-aaaa");
    assert_eq!(a.meta.workspace, Path::new("/home/u/myproj"));
    assert_eq!(a.messages.len(), 3);
    assert_paired(&a.messages);
    let u = a.messages[1].usage.unwrap();
    assert_eq!(
        (
            u.input_tokens,
            u.cache_read_input_tokens,
            u.output_tokens,
            u.reasoning_tokens
        ),
        (60, 40, 15, 5)
    );
    assert!(
        matches!(&a.messages[1].content[0], Block::Thinking { text, .. } if text == "Plan: list them")
    );
    assert_eq!(a.unknown.len(), 1);
    let b = read(&m, "gm-bbbb");
    assert_eq!(b.messages.len(), 2);
    assert_eq!(b.messages[1].text_content(), "Hi there");
    assert_eq!(b.meta.title.as_deref(), Some("Greeting"));
}

#[cfg(feature = "import-opencode")]
#[test]
fn opencode_database_is_read_without_being_written() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("opencode.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            r#"
            CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, directory TEXT, title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER);
            CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
            CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
            INSERT INTO session VALUES ('ses_1','p1',NULL,'/work/app','Fix the build','1.2.3',1706459830000,1706459835000);
            INSERT INTO message VALUES ('msg_1','ses_1',1706459830000,1706459830000,'{"role":"user","time":{"created":1706459830000}}');
            INSERT INTO message VALUES ('msg_2','ses_1',1706459831000,1706459835000,'{"role":"assistant","time":{"created":1706459831000},"modelID":"gpt-5","providerID":"openai","tokens":{"input":10,"output":20,"reasoning":4,"cache":{"read":3,"write":0}}}');
            INSERT INTO part VALUES ('prt_1','msg_1','ses_1',0,0,'{"type":"text","text":"Please fix the build"}');
            INSERT INTO part VALUES ('prt_2','msg_2','ses_1',0,0,'{"type":"reasoning","text":"look at errors"}');
            INSERT INTO part VALUES ('prt_3','msg_2','ses_1',0,0,'{"type":"tool","tool":"bash","callID":"call_1","state":{"status":"completed","input":{"cmd":"make"},"output":"ok"}}');
            INSERT INTO part VALUES ('prt_4','msg_2','ses_1',0,0,'{"type":"step-finish","tokens":{}}');
            "#,
        )
        .unwrap();
    }
    let before = fs::read(&db).unwrap();
    let m = manager(tmp.path());
    assert_eq!(import::detect_file(&db).unwrap(), Some(Agent::OpenCode));
    let r = run(&m, Agent::OpenCode, std::slice::from_ref(&db));
    assert_eq!(r.sessions.new, 1, "{r:?}");
    let t = read(&m, "oc-ses_1");
    assert_eq!(t.title.as_deref(), Some("Fix the build"));
    assert_eq!(t.meta.workspace, Path::new("/work/app"));
    assert_eq!(t.messages.len(), 3);
    assert_paired(&t.messages);
    let u = t.messages[1].usage.unwrap();
    assert_eq!(
        (
            u.output_tokens,
            u.reasoning_tokens,
            u.cache_read_input_tokens
        ),
        (24, 4, 3)
    );
    assert_eq!(fs::read(&db).unwrap(), before);
    let again = run(&m, Agent::OpenCode, &[db]);
    assert_eq!(again.records, 0);
}

/// An OpenCode database of `sessions` sessions of `per` messages each.
#[cfg(feature = "import-opencode")]
fn opencode_db(path: &Path, sessions: usize, per: usize) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(
        r#"
        CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, directory TEXT, title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER);
        CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
        CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT);
        "#,
    )
    .unwrap();
    c.execute_batch("BEGIN").unwrap();
    let filler = "x".repeat(600);
    for s in 0..sessions {
        c.execute(
            "INSERT INTO session VALUES (?1,'p',NULL,'/w','t','1',?2,0)",
            rusqlite::params![format!("ses_{s:02}"), 1_706_459_830_000i64 + s as i64],
        )
        .unwrap();
        for n in 0..per {
            let mid = format!("msg_{s:02}_{n:02}");
            c.execute(
                "INSERT INTO message VALUES (?1,?2,?3,0,?4)",
                rusqlite::params![
                    mid,
                    format!("ses_{s:02}"),
                    n as i64,
                    format!(r#"{{"role":"user","note":"{filler}"}}"#)
                ],
            )
            .unwrap();
            c.execute(
                "INSERT INTO part VALUES (?1,?2,?3,0,0,?4)",
                rusqlite::params![
                    format!("prt_{s:02}_{n:02}"),
                    mid,
                    format!("ses_{s:02}"),
                    format!(r#"{{"type":"text","text":"message {n}"}}"#)
                ],
            )
            .unwrap();
        }
    }
    c.execute_batch("COMMIT").unwrap();
}

/// Overwrite every page of `table`'s b-tree but its first (the table still
/// opens; reading its rows fails), as a damaged disk or a torn copy does.
#[cfg(feature = "import-opencode")]
fn damage_table(db: &Path, table: &str) {
    let (page_size, pages): (u64, Vec<u64>) = {
        let c = rusqlite::Connection::open(db).unwrap();
        let page_size: u64 = c
            .query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0))
            .unwrap() as u64;
        let root: i64 = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        // Every page after the root up to the next b-tree root holds this table's rows.
        let count: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
        (page_size, ((root as u64 + 1)..=count as u64).collect())
    };
    let mut bytes = fs::read(db).unwrap();
    for p in pages {
        let at = ((p - 1) * page_size) as usize;
        for b in &mut bytes[at..at + page_size as usize] {
            *b = 0xA5;
        }
    }
    fs::write(db, bytes).unwrap();
}

#[cfg(feature = "import-opencode")]
#[test]
fn a_damaged_opencode_database_is_reported_not_imported_as_empty_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("opencode.db");
    opencode_db(&db, 20, 10);
    // Intact, it imports whole.
    let whole = tmp.path().join("whole");
    fs::create_dir_all(&whole).unwrap();
    let r = run(&manager(&whole), Agent::OpenCode, std::slice::from_ref(&db));
    assert_eq!((r.sessions.new, r.messages), (20, 200), "{r:?}");
    damage_table(&db, "message");
    let m = manager(tmp.path());
    let sources = [Source {
        agent: Agent::OpenCode,
        path: db.clone(),
    }];
    let r = import::import(&m, &sources, &mut |_| {}).unwrap();
    // Nothing could be read: the source fails (the CLI exits non-zero) and
    // no empty session is created.
    assert_eq!(r.errors.len(), 1, "{r:?}");
    assert!(
        r.notes.iter().any(|n| n.reason.contains("damaged")),
        "{r:?}"
    );
    assert_eq!(r.sessions.new, 0, "{r:?}");
    assert!(
        r.skipped
            .iter()
            .filter(|s| s.reason.contains("could not be read"))
            .count()
            >= 20,
        "every session's loss is reported: {r:?}"
    );
    // Not remembered as imported: a re-run reports it again.
    let again = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!(again.errors.len(), 1, "{again:?}");
}

/// Content items that are not JSON objects, as agents' files may hold them.
fn items_that_are_not_objects() -> Vec<serde_json::Value> {
    use serde_json::json;
    vec![
        json!(null),
        json!(1),
        json!(-2.5),
        json!("x"),
        json!(true),
        json!([]),
        json!([1]),
        json!([[null]]),
        json!(["x", {"type": "text", "text": "inner"}]),
    ]
}

/// Every session of the store reads back whole: the chain verifies and no
/// line is refused (what `sessions verify` and `doctor` check).
fn assert_every_session_reads(m: &SessionManager, what: &str) {
    let (listed, _) = m.store().list().unwrap();
    assert!(!listed.is_empty(), "{what}: nothing imported");
    for s in listed {
        let raw = m.read_raw(&s.meta.id).unwrap();
        assert!(
            raw.report.is_clean(),
            "{what}: {}: {:?}",
            s.meta.id,
            raw.report
        );
        m.read_stored(&s.meta.id).unwrap();
    }
}

/// Whether some message of `id` keeps `item` as a raw block.
fn keeps_raw(m: &SessionManager, id: &str, item: &serde_json::Value) -> bool {
    let raw = serde_json::json!({"type": import::RAW_BLOCK, "value": item});
    read(m, id).messages.iter().any(|msg| {
        msg.content
            .iter()
            .any(|b| *b == Block::Unknown(raw.clone()))
    })
}

#[test]
fn content_items_that_are_not_objects_import_as_readable_raw_blocks() {
    use serde_json::json;
    let tmp = tempfile::tempdir().unwrap();
    for (n, item) in items_that_are_not_objects().into_iter().enumerate() {
        let dir = tmp.path().join(format!("case{n}"));
        fs::create_dir_all(&dir).unwrap();
        let m = manager(&dir);
        let env = |uuid: &str, parent: Option<&str>, kind: &str, content: serde_json::Value| {
            json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s",
                   "timestamp": "2026-01-01T00:00:00Z",
                   "message": {"role": kind, "content": content}})
            .to_string()
        };
        let claude = dir.join("claude.jsonl");
        fs::write(
            &claude,
            [
                env("u1", None, "user", json!([item.clone()])),
                env(
                    "u2",
                    Some("u1"),
                    "assistant",
                    json!([{"type": "text", "text": "ok"}, item.clone()]),
                ),
                env("u3", Some("u2"), "user", item.clone()),
            ]
            .join("\n")
                + "\n",
        )
        .unwrap();
        let codex = dir.join("rollout-2026-01-01T00-00-00-c.jsonl");
        let tid = format!("{n:08}-0000-4000-8000-000000000000");
        fs::write(
            &codex,
            [
                json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": tid, "cwd": "/w"}}),
                json!({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [item.clone()]}}),
                json!({"timestamp": "2026-01-01T00:00:02Z", "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}, item.clone()]}}),
            ]
            .iter()
            .map(|v| v.to_string() + "\n")
            .collect::<String>(),
        )
        .unwrap();
        let gemini = dir.join("session-g.jsonl");
        fs::write(
            &gemini,
            [
                json!({"sessionId": format!("g{n}"), "projectHash": "h", "startTime": "2026-01-01T00:00:00Z"}),
                json!({"id": "m1", "type": "user", "timestamp": "2026-01-01T00:00:01Z", "content": [item.clone()]}),
                json!({"id": "m2", "type": "gemini", "timestamp": "2026-01-01T00:00:02Z", "content": [item.clone()]}),
            ]
            .iter()
            .map(|v| v.to_string() + "\n")
            .collect::<String>(),
        )
        .unwrap();
        let sources = [
            (Agent::ClaudeCode, claude),
            (Agent::Codex, codex),
            (Agent::GeminiCli, gemini),
        ];
        for (agent, path) in &sources {
            let r = run(&m, *agent, std::slice::from_ref(path));
            assert!(r.errors.is_empty(), "{item} {agent:?}: {r:?}");
            assert_eq!(r.sessions.new, 1, "{item} {agent:?}: {r:?}");
        }
        assert_every_session_reads(&m, &item.to_string());
        assert!(keeps_raw(&m, "cc-claude", &item), "claude keeps {item}");
        assert!(
            keeps_raw(&m, &format!("cx-{tid}"), &item),
            "codex keeps {item}"
        );
        // A re-run finds everything imported (the digests agree).
        for (agent, path) in &sources {
            let again = run(&m, *agent, std::slice::from_ref(path));
            assert_eq!(again.records, 0, "{item} {agent:?}: {again:?}");
        }
    }
}
