//! Usage reports over real file stores, with hand-computed totals.
//!
//! Sessions are written in the shape the importers produce (header `source`,
//! message `extra.source`, `provider_id`, `timestamp`), with the numbers of
//! the fixtures in `shared/fixtures/transcripts/` (Codex `branch-history`,
//! Claude Code `sidechain_integrated`): each test names what it would count
//! wrongly without de-duplication.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use memoir::message::{Message, Usage, UsageSource, SOURCE_KEY};
use memoir::record::{ForkPoint, Record, SessionMeta, SourceRef, Summary};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;
use memoir::usage::{self, GroupKey, PriceTable, ProjectFilter, UsageQuery};
use serde_json::{json, Map, Value};

fn store() -> (tempfile::TempDir, Arc<FileStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::new(dir.path(), Durability::None));
    (dir, store)
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn tokens(input: u64, output: u64, read: u64, write: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_input_tokens: read,
        cache_creation_input_tokens: write,
        ..Usage::default()
    }
}

/// An assistant response as an importer writes it.
fn response(
    provider_id: Option<&str>,
    source: Value,
    model: &str,
    when: &str,
    usage: Usage,
) -> Message {
    let mut m = Message::assistant("ok").with_usage(usage);
    m.provider_id = provider_id.map(str::to_string);
    m.model = Some(model.to_string());
    m.timestamp = Some(at(when));
    if let Value::Object(o) = source {
        if !o.is_empty() {
            m.extra.insert(SOURCE_KEY.to_string(), Value::Object(o));
        }
    }
    m
}

fn header(id: &str, agent: &str, created: &str, extra: Value) -> SessionMeta {
    let mut meta = SessionMeta::new(id);
    meta.created_at = at(created);
    meta.source = Some(SourceRef {
        agent: agent.to_string(),
        agent_version: None,
        session: Some(format!("src-{id}")),
        path: None,
        extra: match extra {
            Value::Object(o) => o,
            _ => Map::new(),
        },
    });
    meta
}

/// A Codex session's header that forks `parent` by reference after its
/// first `messages` messages (record `seq` = `messages`).
fn codex_fork(id: &str, parent: &str, messages: usize) -> SessionMeta {
    let mut meta = header(id, "codex", "2026-05-12T08:02:00Z", json!({}));
    meta.parent = Some(ForkPoint::new(parent, messages as u64, messages));
    meta
}

fn write(store: &Arc<FileStore>, meta: SessionMeta, messages: &[Message]) -> Session {
    let s = Session::create_in(store.clone(), meta).unwrap();
    s.append_messages(messages).unwrap();
    s
}

fn prices() -> PriceTable {
    PriceTable::shipped().unwrap()
}

fn by(keys: &[GroupKey]) -> UsageQuery {
    UsageQuery {
        group_by: keys.to_vec(),
        ..UsageQuery::default()
    }
}

fn row<'a>(r: &'a usage::UsageReport, key: &str) -> &'a usage::UsageRow {
    r.rows
        .iter()
        .find(|row| row.key() == [key])
        .unwrap_or_else(|| panic!("no row {key}: {:#?}", r.rows))
}

/// Codex `branch-history`: the parent reports cumulative 1,200 tokens
/// (input 1,000 of which 100 cached, output 200 of which 20 reasoning); the
/// branch replays that and reaches 2,050. Normalised (input excludes cached):
/// parent = 900 + 100 read + 200 out; branch adds 400 + 200 read + 250 out.
fn codex_parent(store: &Arc<FileStore>) -> Session {
    let parent = header("codex-parent", "codex", "2026-05-12T08:00:00Z", json!({}));
    let mut p = parent.clone();
    p.model = "gpt-5.2".into();
    let s = Session::create_in(store.clone(), p).unwrap();
    s.append_messages(&[
        Message::user("fix the bug"),
        response(
            None,
            json!({"response_id": "resp_parent_1", "line": 2}),
            "gpt-5.2",
            "2026-05-12T08:01:00Z",
            Usage {
                reasoning_tokens: 20,
                ..tokens(900, 200, 100, 0)
            },
        ),
    ])
    .unwrap();
    s
}

fn branch_usage() -> Usage {
    Usage {
        reasoning_tokens: 20,
        ..tokens(400, 250, 200, 0)
    }
}

#[test]
fn codex_branch_forked_by_reference_adds_850_to_the_parents_1200() {
    let (_d, store) = store();
    codex_parent(&store);
    // The branch as a fork by reference: its header names the parent's cut.
    let meta = codex_fork("codex-branch", "codex-parent", 2);
    write(
        &store,
        meta,
        &[
            Message::user("now the other one"),
            response(
                None,
                json!({"response_id": "resp_branch_1"}),
                "gpt-5.2",
                "2026-05-12T08:02:00Z",
                branch_usage(),
            ),
        ],
    );

    let all = usage::report(store.as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    assert_eq!(all.total.total_tokens, 2050);
    assert_eq!(all.total.requests, 2);
    assert_eq!(
        (
            all.total.input_tokens,
            all.total.cache_read_tokens,
            all.total.output_tokens
        ),
        (1300, 300, 450)
    );
    assert_eq!(all.total.reasoning_tokens, 40);
    assert_eq!(row(&all, "codex-parent").totals.total_tokens, 1200);
    let branch = row(&all, "codex-branch");
    assert_eq!(branch.totals.total_tokens, 850);
    assert_eq!(branch.inherited.as_ref().unwrap().total_tokens, 1200);
    assert_eq!(branch.parent.as_deref(), Some("codex-parent"));

    // The single-session view says the same, own and inherited apart.
    let one = usage::session_usage(store.as_ref(), "codex-br", &prices()).unwrap();
    assert_eq!(
        (one.own.total_tokens, one.inherited.total_tokens),
        (850, 1200)
    );
    let parent = usage::session_usage(store.as_ref(), "codex-parent", &prices()).unwrap();
    assert_eq!(
        (parent.own.total_tokens, parent.inherited.total_tokens),
        (1200, 0)
    );

    // gpt-5.2: $1.75 in, $0.175 cached, $14 out per Mtok.
    let expected = (1300.0 * 1.75 + 300.0 * 0.175 + 450.0 * 14.0) / 1e6;
    assert!(
        (all.total.cost_usd - expected).abs() < 1e-12,
        "{}",
        all.total.cost_usd
    );
    assert!(!all.total.cost_is_lower_bound);
}

#[test]
fn codex_branch_copied_with_the_replayed_response_still_totals_2050() {
    let (_d, store) = store();
    codex_parent(&store);
    // An importer that copies the replayed parent response into the branch
    // (same response id) must not make the store total 1,200 + 1,200 + 850.
    write(
        &store,
        header(
            "codex-branch-copy",
            "codex",
            "2026-05-12T08:02:00Z",
            json!({}),
        ),
        &[
            response(
                None,
                json!({"response_id": "resp_parent_1"}),
                "gpt-5.2",
                "2026-05-12T08:01:00Z",
                Usage {
                    reasoning_tokens: 20,
                    ..tokens(900, 200, 100, 0)
                },
            ),
            response(
                None,
                json!({"response_id": "resp_branch_1"}),
                "gpt-5.2",
                "2026-05-12T08:02:00Z",
                branch_usage(),
            ),
        ],
    );
    let r = usage::report(store.as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    assert_eq!(r.total.total_tokens, 2050);
    assert_eq!(r.duplicate_responses, 1);
    assert_eq!(row(&r, "codex-parent").totals.total_tokens, 1200);
    assert_eq!(row(&r, "codex-branch-copy").totals.total_tokens, 850);
    // Same numbers for the one session asked alone.
    let one = usage::session_usage(store.as_ref(), "codex-branch-copy", &prices()).unwrap();
    assert_eq!(one.own.total_tokens, 850);
}

/// `sidechain_integrated.jsonl`: one API message split over two lines that
/// repeat its usage, between two main-chain messages.
fn sidechain_integrated() -> Vec<Message> {
    let model = "claude-sonnet-4-5-20250929";
    vec![
        response(
            Some("msg_01H4wg8bFy2psdmQvJMU6kpD"),
            json!({"uuid": "83a7cabd", "request_id": "req_011CVJ517iGrQqjVFtrWsUgP"}),
            model,
            "2025-11-19T22:53:34.908Z",
            tokens(3, 365, 0, 141272),
        ),
        Message::user("tool result"),
        response(
            Some("msg_017zj75dqWUNqVxCUrhqbTkf"),
            json!({"uuid": "b674eedd", "request_id": "req_011CVJ51ytkcBEjrQhRNswqR", "is_sidechain": true}),
            model,
            "2025-11-19T22:53:39.112Z",
            tokens(3, 183, 0, 19830),
        ),
        response(
            Some("msg_017zj75dqWUNqVxCUrhqbTkf"),
            json!({"uuid": "3c78114e", "request_id": "req_011CVJ51ytkcBEjrQhRNswqR", "is_sidechain": true}),
            model,
            "2025-11-19T22:53:39.868Z",
            tokens(3, 183, 0, 19830),
        ),
        response(
            Some("msg_011b5A5rZCXR7eBYR4VbohVZ"),
            json!({"uuid": "91c82c1c", "request_id": "req_011CVJ5Au8m6JgC6Ly7SbVPv"}),
            model,
            "2025-11-19T22:55:40.790Z",
            tokens(3, 190, 141272, 2952),
        ),
    ]
}

#[test]
fn claude_split_assistant_lines_repeating_usage_count_once() {
    let (_d, store) = store();
    write(
        &store,
        header("cc-split", "claude-code", "2025-11-19T22:53:00Z", json!({})),
        &sidechain_integrated(),
    );
    let r = usage::report(store.as_ref(), &UsageQuery::default(), &prices()).unwrap();
    let t = &r.total;
    assert_eq!(t.requests, 3);
    assert_eq!(t.input_tokens, 9);
    assert_eq!(t.output_tokens, 365 + 183 + 190);
    assert_eq!(t.cache_write_tokens, 141272 + 19830 + 2952);
    assert_eq!(t.cache_read_tokens, 141272);
    // claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per Mtok:
    // 9*3 + 738*15 + 141272*0.3 + 164054*3.75 = 668,681.1 micro-dollars.
    assert!((t.cost_usd - 0.6686811).abs() < 1e-9, "{}", t.cost_usd);
}

#[test]
fn the_last_line_of_a_split_message_wins() {
    // A streaming placeholder line (output from message_start) followed by
    // the final line of the same message: the final counts are the ones.
    let (_d, store) = store();
    let mut placeholder = tokens(1, 2, 0, 500);
    placeholder.source = UsageSource::Transcript;
    write(
        &store,
        header(
            "cc-stream",
            "claude-code",
            "2026-01-01T00:00:00Z",
            json!({}),
        ),
        &[
            response(
                Some("msg_s"),
                json!({"request_id": "req_s"}),
                "claude-haiku-4-5",
                "2026-01-01T00:00:01Z",
                placeholder,
            ),
            response(
                Some("msg_s"),
                json!({"request_id": "req_s"}),
                "claude-haiku-4-5",
                "2026-01-01T00:00:02Z",
                tokens(40, 300, 0, 500),
            ),
        ],
    );
    let t = usage::report(store.as_ref(), &UsageQuery::default(), &prices())
        .unwrap()
        .total;
    assert_eq!((t.requests, t.input_tokens, t.output_tokens), (1, 40, 300));
    assert_eq!(t.provenance, UsageSource::Provider);
}

#[test]
fn a_btw_sidechain_replaying_the_parent_message_under_a_new_request_id_is_not_counted_twice() {
    let (_d, store) = store();
    let model = "claude-sonnet-4-5";
    // The sidechain file is older than the main one on purpose: side-ness,
    // not age, decides who keeps the replayed response.
    write(
        &store,
        header(
            "cc-btw",
            "claude-code",
            "2026-03-01T09:00:00Z",
            json!({"sidechain": true}),
        ),
        &[
            response(
                Some("msg_main_1"),
                json!({"request_id": "req_btw_replay"}),
                model,
                "2026-03-01T10:00:00Z",
                tokens(10, 100, 0, 1000),
            ),
            response(
                Some("msg_btw_1"),
                json!({"request_id": "req_btw_1"}),
                model,
                "2026-03-01T10:05:00Z",
                tokens(5, 50, 1000, 0),
            ),
        ],
    );
    write(
        &store,
        header("cc-main", "claude-code", "2026-03-01T10:00:00Z", json!({})),
        &[response(
            Some("msg_main_1"),
            json!({"request_id": "req_main_1"}),
            model,
            "2026-03-01T10:00:00Z",
            tokens(10, 100, 0, 1000),
        )],
    );
    let r = usage::report(store.as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    assert_eq!(r.total.requests, 2);
    assert_eq!(r.total.total_tokens, 1110 + 1055);
    assert_eq!(row(&r, "cc-main").totals.total_tokens, 1110);
    assert_eq!(row(&r, "cc-btw").totals.total_tokens, 1055);
    let side = usage::session_usage(store.as_ref(), "cc-btw", &prices()).unwrap();
    assert_eq!(side.own.requests, 1);
}

#[test]
fn a_subagent_counts_its_own_responses_and_not_the_parent_entries_it_copies() {
    let (_d, store) = store();
    let model = "claude-haiku-4-5-20251001";
    let main: Vec<Message> = (1..=3)
        .map(|i| {
            response(
                Some(&format!("msg_sc-a{i}")),
                json!({"uuid": format!("sc-a{i}")}),
                model,
                &format!("2026-06-15T10:00:0{i}Z"),
                tokens(120, 40, 0, 0),
            )
        })
        .collect();
    write(
        &store,
        header(
            "cc-showcase",
            "claude-code",
            "2026-06-15T10:00:00Z",
            json!({}),
        ),
        &main,
    );
    // Older subagent files copy the parent's entries (same ids) before their own.
    let mut sub = main[..2].to_vec();
    sub.push(response(
        Some("msg_agent_1"),
        json!({"uuid": "ag-1"}),
        model,
        "2026-06-15T10:00:05Z",
        tokens(300, 60, 0, 0),
    ));
    sub.push(Message::user("no usage here"));
    // An id-less response is counted once, where it is stored.
    sub.push(response(
        None,
        json!({}),
        model,
        "2026-06-15T10:00:06Z",
        tokens(7, 3, 0, 0),
    ));
    let mut meta = header(
        "cc-agent",
        "claude-code",
        "2026-06-15T10:00:04Z",
        json!({"subagent": {"agent_id": "showcol1"}}),
    );
    meta.kind = Some("subagent".into());
    write(&store, meta, &sub);

    let r = usage::report(store.as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    assert_eq!(r.total.requests, 5);
    assert_eq!(r.total.input_tokens, 3 * 120 + 300 + 7);
    assert_eq!(row(&r, "cc-showcase").totals.requests, 3);
    assert_eq!(row(&r, "cc-agent").totals.requests, 2);
    assert_eq!(r.duplicate_responses, 2);
    // claude-haiku-4-5: $1 in, $5 out per Mtok.
    let expected = ((3 * 120 + 300 + 7) as f64 * 1.0 + (3 * 40 + 60 + 3) as f64 * 5.0) / 1e6;
    assert!((r.total.cost_usd - expected).abs() < 1e-12);
}

#[test]
fn a_re_import_after_growth_adds_only_the_new_responses() {
    let (_d, store) = store();
    let model = "claude-sonnet-4-5";
    let turn = |i: u32| {
        response(
            Some(&format!("msg_r{i}")),
            json!({"uuid": format!("u{i}"), "request_id": format!("req_r{i}")}),
            model,
            &format!("2026-04-0{i}T12:00:00Z"),
            tokens(100 * u64::from(i), 10, 0, 0),
        )
    };
    write(
        &store,
        header("import-1", "claude-code", "2026-04-01T11:00:00Z", json!({})),
        &[turn(1), turn(2)],
    );
    // The source grew; the re-import wrote the whole file again as a new session.
    write(
        &store,
        header("import-2", "claude-code", "2026-04-05T11:00:00Z", json!({})),
        &[turn(1), turn(2), turn(3)],
    );
    let r = usage::report(store.as_ref(), &by(&[GroupKey::Day]), &prices()).unwrap();
    assert_eq!(r.total.requests, 3);
    assert_eq!(r.total.input_tokens, 600);
    assert_eq!(r.rows.len(), 3);
    assert_eq!(row(&r, "2026-04-03").totals.input_tokens, 300);
    assert_eq!(r.duplicate_responses, 2);
}

#[test]
fn compaction_keeps_dropped_responses_and_does_not_recount_carried_ones() {
    let (_d, store) = store();
    let mut meta = SessionMeta::new("native-compact");
    meta.created_at = at("2026-02-01T00:00:00Z");
    meta.model = "claude-sonnet-4-5".into();
    // Native responses without any id: counted once where stored.
    let a = Message::assistant("first").with_usage(tokens(1000, 10, 0, 0));
    let b = Message::assistant("second").with_usage(tokens(2000, 20, 0, 0));
    let s = write(
        &store,
        meta,
        &[Message::user("go"), a, Message::user("more"), b.clone()],
    );
    s.append(&Record::Rewrite {
        messages: vec![Message::system("summary of earlier turns"), b],
    })
    .unwrap();
    let t = usage::report(store.as_ref(), &UsageQuery::default(), &prices())
        .unwrap()
        .total;
    assert_eq!((t.requests, t.input_tokens, t.output_tokens), (2, 3000, 30));
    // Undated responses are dated by the session's start, and say so.
    assert_eq!(t.undated_requests, 2);
}

#[test]
fn run_summaries_count_only_when_messages_carry_no_usage() {
    let (_d, store) = store();
    let s = write(
        &store,
        SessionMeta::new("summaries-only"),
        &[Message::user("hi"), Message::assistant("hello")],
    );
    s.append(&Record::Summary(Summary {
        usage: tokens(50, 5, 0, 0),
        turns: 2,
    }))
    .unwrap();
    let both = write(
        &store,
        SessionMeta::new("both"),
        &[Message::assistant("x").with_usage(tokens(7, 1, 0, 0))],
    );
    both.append(&Record::Summary(Summary {
        usage: tokens(7, 1, 0, 0),
        turns: 1,
    }))
    .unwrap();
    let r = usage::report(store.as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    assert_eq!(row(&r, "summaries-only").totals.input_tokens, 50);
    assert_eq!(row(&r, "summaries-only").totals.requests, 2);
    assert_eq!(row(&r, "both").totals.input_tokens, 7);
    assert_eq!(r.total.input_tokens, 57);
}

#[test]
fn unknown_models_are_unpriced_and_make_the_cost_a_lower_bound() {
    let (_d, store) = store();
    write(
        &store,
        header("mixed", "codex", "2026-07-01T00:00:00Z", json!({})),
        &[
            response(
                Some("r1"),
                json!({}),
                "gpt-5",
                "2026-07-01T00:00:01Z",
                tokens(1_000_000, 0, 0, 0),
            ),
            response(
                Some("r2"),
                json!({}),
                "some-future-model-x",
                "2026-07-01T00:00:02Z",
                tokens(5, 5, 0, 0),
            ),
        ],
    );
    let r = usage::report(store.as_ref(), &by(&[GroupKey::Model]), &prices()).unwrap();
    assert!(r.total.cost_is_lower_bound);
    assert_eq!(r.total.unpriced_requests, 1);
    assert!(r.total.unpriced_models.contains("some-future-model-x"));
    assert!(
        (r.total.cost_usd - 1.25).abs() < 1e-9,
        "{}",
        r.total.cost_usd
    );
    let unknown = row(&r, "some-future-model-x");
    assert_eq!(
        (unknown.totals.unpriced_requests, unknown.totals.requests),
        (1, 1)
    );
    assert!(!row(&r, "gpt-5").totals.cost_is_lower_bound);
}

#[test]
fn filters_and_several_groupings() {
    let (_d, store) = store();
    codex_parent(&store);
    write(
        &store,
        header("cc-a", "claude-code", "2026-05-12T07:00:00Z", json!({})),
        &[
            response(
                Some("m1"),
                json!({}),
                "claude-sonnet-4-5",
                "2026-05-12T07:30:00Z",
                tokens(10, 1, 0, 0),
            ),
            response(
                Some("m2"),
                json!({}),
                "claude-haiku-4-5",
                "2026-05-13T07:30:00Z",
                tokens(20, 2, 0, 0),
            ),
        ],
    );
    let r = usage::report(
        store.as_ref(),
        &by(&[GroupKey::Day, GroupKey::Agent]),
        &prices(),
    )
    .unwrap();
    let keys: Vec<Vec<&str>> = r.rows.iter().map(|row| row.key()).collect();
    assert_eq!(
        keys,
        [
            vec!["2026-05-12", "claude-code"],
            vec!["2026-05-12", "codex"],
            vec!["2026-05-13", "claude-code"]
        ]
    );
    let q = UsageQuery {
        agent: Some("claude-code".into()),
        model: Some("SONNET".into()),
        ..UsageQuery::default()
    };
    assert_eq!(
        usage::report(store.as_ref(), &q, &prices())
            .unwrap()
            .total
            .input_tokens,
        10
    );
    let q = UsageQuery {
        since: Some(at("2026-05-13T00:00:00Z")),
        until: Some(at("2026-05-14T00:00:00Z")),
        ..UsageQuery::default()
    };
    assert_eq!(
        usage::report(store.as_ref(), &q, &prices())
            .unwrap()
            .total
            .input_tokens,
        20
    );
    let q = UsageQuery {
        project: Some(ProjectFilter::Named("nope".into())),
        ..UsageQuery::default()
    };
    assert_eq!(
        usage::report(store.as_ref(), &q, &prices())
            .unwrap()
            .total
            .requests,
        0
    );
    let week = usage::report(
        store.as_ref(),
        &by(&[GroupKey::Week, GroupKey::Month]),
        &prices(),
    )
    .unwrap();
    assert_eq!(week.rows[0].key(), ["2026-W20", "2026-05"]);
}

#[test]
fn billing_blocks_over_a_store() {
    let (_d, store) = store();
    write(
        &store,
        header("blocks", "claude-code", "2026-05-12T08:00:00Z", json!({})),
        &[
            response(
                Some("b1"),
                json!({}),
                "claude-sonnet-4-5",
                "2026-05-12T08:10:00Z",
                tokens(1, 1, 0, 0),
            ),
            response(
                Some("b2"),
                json!({}),
                "claude-sonnet-4-5",
                "2026-05-12T12:50:00Z",
                tokens(2, 2, 0, 0),
            ),
            response(
                Some("b3"),
                json!({}),
                "claude-sonnet-4-5",
                "2026-05-12T13:10:00Z",
                tokens(4, 4, 0, 0),
            ),
        ],
    );
    let blocks = usage::blocks_report(
        store.as_ref(),
        &UsageQuery::default(),
        &prices(),
        at("2026-05-13T00:00:00Z"),
    )
    .unwrap()
    .blocks;
    assert_eq!(blocks.len(), 2);
    assert_eq!(
        (blocks[0].totals.requests, blocks[0].totals.input_tokens),
        (2, 3)
    );
    assert_eq!(blocks[1].start, at("2026-05-12T13:00:00Z"));
}

#[test]
fn a_corrupt_session_is_reported_not_fatal() {
    let (dir, store) = store();
    codex_parent(&store);
    std::fs::write(dir.path().join("broken.jsonl"), "not a transcript\n").unwrap();
    let r = usage::report(store.as_ref(), &UsageQuery::default(), &prices()).unwrap();
    assert_eq!(r.total.total_tokens, 1200);
    assert_eq!(r.unreadable_sessions, 1);
    // The listing interface is all the report needs.
    let _: &dyn LogStore = store.as_ref();
}

#[test]
fn showcase_and_rewind_fixtures_total_as_hand_computed() {
    let (_d, store) = store();
    // `55550000-…-0001.jsonl`: five claude-haiku-4-5 responses of 120 in / 40 out
    // (no requestId in the file: the message id alone identifies them).
    let showcase: Vec<Message> = (1..=5)
        .map(|i| {
            response(
                Some(&format!("msg_sc-a{i}")),
                json!({"uuid": format!("sc-a{i}")}),
                "claude-haiku-4-5-20251001",
                &format!("2026-06-15T10:00:0{i}Z"),
                tokens(120, 40, 0, 0),
            )
        })
        .collect();
    write(
        &store,
        header(
            "cc-showcase",
            "claude-code",
            "2026-06-15T10:00:01Z",
            json!({}),
        ),
        &showcase,
    );
    // `dag_compact_after_rewind.jsonl`: the live chain a1, b2a, b2a2, p1a and
    // the abandoned rewind branch b1a (billed too), here a fork at a1.
    let turn = |id: &str, when: &str| {
        response(
            Some(&format!("msg_{id}")),
            json!({"uuid": id, "request_id": format!("req_{id}")}),
            "claude-sonnet-4-20250514",
            when,
            tokens(10, 5, 0, 0),
        )
    };
    write(
        &store,
        header("cc-dag", "claude-code", "2025-07-01T10:00:00Z", json!({})),
        &[
            Message::user("u1"),
            turn("a1", "2025-07-01T10:01:00Z"),
            Message::user("b2u"),
            turn("b2a", "2025-07-01T10:11:00Z"),
            turn("b2a2", "2025-07-01T10:21:00Z"),
            Message::system("compact summary"),
            turn("p1a", "2025-07-01T10:41:00Z"),
        ],
    );
    let mut branch = header(
        "cc-dag-rewind",
        "claude-code",
        "2025-07-01T10:02:00Z",
        json!({}),
    );
    branch.parent = Some(ForkPoint::new("cc-dag", 2, 2));
    write(
        &store,
        branch,
        &[Message::user("b1u"), turn("b1a", "2025-07-01T10:03:00Z")],
    );

    let r = usage::report(store.as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    let show = &row(&r, "cc-showcase").totals;
    assert_eq!(
        (show.input_tokens, show.output_tokens, show.requests),
        (600, 200, 5)
    );
    // haiku 4.5: $1 in, $5 out per Mtok -> 600 + 1000 µ$.
    assert!((show.cost_usd - 0.0016).abs() < 1e-12);
    let dag = &row(&r, "cc-dag").totals;
    let rewind = row(&r, "cc-dag-rewind");
    assert_eq!(
        (
            dag.input_tokens + rewind.totals.input_tokens,
            dag.output_tokens + rewind.totals.output_tokens
        ),
        (50, 25)
    );
    assert_eq!(rewind.inherited.as_ref().unwrap().requests, 1);
    // claude-sonnet-4 (priced from its Bedrock id): $3 in, $15 out -> 150 + 375 µ$.
    assert!((dag.cost_usd + rewind.totals.cost_usd - 0.000525).abs() < 1e-12);
    assert_eq!(r.total.requests, 10);
}

#[test]
fn a_fork_whose_parent_is_gone_keeps_its_own_counts_and_says_why_inherited_is_missing() {
    let (dir, store) = store();
    codex_parent(&store);
    let meta = codex_fork("codex-orphan", "codex-parent", 2);
    write(
        &store,
        meta,
        &[response(
            None,
            json!({"response_id": "resp_o"}),
            "gpt-5.2",
            "2026-05-12T08:02:00Z",
            branch_usage(),
        )],
    );
    std::fs::remove_file(dir.path().join("codex-parent.jsonl")).unwrap();
    let r = usage::report(store.as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    assert_eq!(r.total.total_tokens, 850);
    let orphan = row(&r, "codex-orphan");
    assert!(orphan.inherited.is_none());
    assert!(
        orphan
            .inherited_error
            .as_deref()
            .unwrap_or("")
            .contains("codex-parent"),
        "{orphan:?}"
    );
    let one = usage::session_usage(store.as_ref(), "codex-orphan", &prices()).unwrap();
    assert_eq!(one.own.total_tokens, 850);
    assert!(one.inherited_error.is_some());
}

#[test]
fn a_fork_response_naming_no_model_is_priced_with_the_parents_model() {
    // Codex states the model once (`turn_context`), in the replayed prefix a
    // branch shares with its parent: the branch's own response names none.
    let (_d, store) = store();
    let parent = write(
        &store,
        header("cx-parent", "codex", "2026-05-12T08:00:00Z", json!({})),
        &[response(
            None,
            json!({"response_id": "r1"}),
            "gpt-5.2",
            "2026-05-12T08:01:00Z",
            tokens(900, 200, 100, 0),
        )],
    );
    let meta = codex_fork("cx-branch", &parent.meta.id, 1);
    let mut own = response(
        None,
        json!({"response_id": "r2"}),
        "x",
        "2026-05-12T08:02:00Z",
        branch_usage(),
    );
    own.model = None;
    write(&store, meta, &[own]);
    let r = usage::report(store.as_ref(), &by(&[GroupKey::Model]), &prices()).unwrap();
    assert_eq!(r.rows.len(), 1, "{:#?}", r.rows);
    assert_eq!(r.rows[0].key(), ["gpt-5.2"]);
    assert!(!r.total.cost_is_lower_bound);
}

/// One Claude Code assistant line, compact JSON as Claude Code writes it.
#[cfg(feature = "import")]
#[allow(clippy::too_many_arguments)]
fn claude_line(
    session: &str,
    uuid: &str,
    message_id: &str,
    request_id: &str,
    model: &str,
    when: &str,
    input: u64,
    output: u64,
    cache: Value,
) -> String {
    let mut usage = json!({"input_tokens": input, "output_tokens": output,
        "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0});
    if let (Value::Object(u), Value::Object(c)) = (&mut usage, cache) {
        u.extend(c);
    }
    json!({"type": "assistant", "uuid": uuid, "parentUuid": null, "isSidechain": false,
        "sessionId": session, "cwd": "/work/app", "timestamp": when, "requestId": request_id,
        "message": {"id": message_id, "type": "message", "role": "assistant", "model": model,
            "stop_reason": "end_turn", "content": [{"type": "text", "text": format!("answer {uuid}")}],
            "usage": usage}})
    .to_string()
}

#[cfg(feature = "import")]
/// Import Claude Code files (one run each, in the order given) into a
/// fresh store and report usage by session.
fn import_claude(files: &[std::path::PathBuf]) -> (tempfile::TempDir, usage::UsageReport) {
    import_claude_in(files, false)
}

#[cfg(feature = "import")]
/// Import Claude Code files in one run into a fresh store and report
/// usage by session.
fn import_claude_run(files: &[std::path::PathBuf]) -> (tempfile::TempDir, usage::UsageReport) {
    import_claude_in(files, true)
}

#[cfg(feature = "import")]
fn import_claude_in(
    files: &[std::path::PathBuf],
    one_run: bool,
) -> (tempfile::TempDir, usage::UsageReport) {
    use memoir::import::{self, Agent, Source};
    use memoir::manager::{ManagerOptions, SessionManager};
    let dir = tempfile::tempdir().unwrap();
    let m = SessionManager::open(
        &dir.path().join("store"),
        ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..ManagerOptions::default()
        },
    )
    .unwrap();
    let sources: Vec<Source> = files
        .iter()
        .map(|path| Source {
            agent: Agent::ClaudeCode,
            path: path.clone(),
        })
        .collect();
    if one_run {
        import::import(&m, &sources, &mut |_| {}).unwrap();
    } else {
        for source in sources {
            import::import(&m, &[source], &mut |_| {}).unwrap();
        }
    }
    let r = usage::report(m.store().as_ref(), &by(&[GroupKey::Session]), &prices()).unwrap();
    (dir, r)
}

#[cfg(feature = "import")]
#[test]
fn responses_sharing_a_message_id_under_different_request_ids_all_count_in_any_import_order() {
    let files = tempfile::tempdir().unwrap();
    let project = files.path().join("projects").join("-work-app");
    std::fs::create_dir_all(&project).unwrap();
    let a = "aaaaaaaa-0000-4000-8000-000000000001";
    let b = "bbbbbbbb-0000-4000-8000-000000000002";
    let none = json!({});
    // Session a: two responses.
    let a_lines = [
        claude_line(
            a,
            "a1",
            "msg_shared",
            "req_a1",
            "claude-sonnet-4-5-20250929",
            "2026-04-01T10:00:00.000Z",
            100,
            10,
            none.clone(),
        ),
        claude_line(
            a,
            "a2",
            "msg_a2",
            "req_a2",
            "claude-sonnet-4-5-20250929",
            "2026-04-01T10:01:00.000Z",
            200,
            20,
            none.clone(),
        ),
    ];
    // Session b resumes a (its first line is a copy of a's first response),
    // then gets a different response that reuses the same message id under
    // its own request id, model, usage and content.
    let b_lines = [
        a_lines[0].clone(),
        claude_line(
            b,
            "b1",
            "msg_shared",
            "req_b1",
            "claude-haiku-4-5-20251001",
            "2026-04-01T11:00:00.000Z",
            7000,
            300,
            none.clone(),
        ),
    ];
    let pa = project.join(format!("{a}.jsonl"));
    let pb = project.join(format!("{b}.jsonl"));
    std::fs::write(&pa, a_lines.join("\n") + "\n").unwrap();
    std::fs::write(&pb, b_lines.join("\n") + "\n").unwrap();

    let (_d1, ab) = import_claude(&[pa.clone(), pb.clone()]);
    let (_d2, ba) = import_claude(&[pb.clone(), pa.clone()]);
    // Both files in one run, listed the resumed one first.
    let (_d3, together) = import_claude_run(&[pb, pa]);
    for r in [&ab, &ba, &together] {
        // a1 (once, although two files hold it: b continues a by
        // reference, or a, imported later, b), a2 and b1.
        assert_eq!(r.total.requests, 3, "{:#?}", r.rows);
        assert_eq!(r.total.input_tokens, 100 + 200 + 7000);
        assert_eq!(r.total.output_tokens, 10 + 20 + 300);
        assert_eq!(r.duplicate_responses, 0);
        // claude-sonnet-4-5 $3/$15, claude-haiku-4-5 $1/$5 per Mtok.
        let expected = (300.0 * 3.0 + 30.0 * 15.0 + 7000.0 * 1.0 + 300.0 * 5.0) / 1e6;
        assert!(
            (r.total.cost_usd - expected).abs() < 1e-12,
            "{}",
            r.total.cost_usd
        );
    }
    let per_session = |r: &usage::UsageReport| {
        let mut v: Vec<(String, u64, u64)> = r
            .rows
            .iter()
            .map(|row| {
                (
                    row.key().join("/"),
                    row.totals.requests,
                    row.totals.total_tokens,
                )
            })
            .collect();
        v.sort();
        v
    };
    // In one run, the repeated response stays with the session that wrote
    // it first whatever the order the files are listed in.
    assert_eq!(per_session(&ab), per_session(&together));
}

#[cfg(feature = "import")]
#[test]
fn one_hour_cache_writes_are_priced_at_the_one_hour_rate_after_import() {
    let files = tempfile::tempdir().unwrap();
    let project = files.path().join("projects").join("-work-app");
    std::fs::create_dir_all(&project).unwrap();
    let s = "cccccccc-0000-4000-8000-000000000003";
    let split = |five: u64, hour: u64| {
        json!({"cache_creation_input_tokens": five + hour,
            "cache_creation": {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour}})
    };
    let lines = [
        // Only 1-hour writes, only 5-minute writes, and both, on three models.
        claude_line(
            s,
            "h1",
            "msg_h1",
            "req_h1",
            "claude-sonnet-4-5-20250929",
            "2026-04-02T10:00:00.000Z",
            10,
            100,
            split(0, 40_000),
        ),
        claude_line(
            s,
            "h2",
            "msg_h2",
            "req_h2",
            "claude-opus-4-1-20250805",
            "2026-04-02T10:01:00.000Z",
            10,
            100,
            split(30_000, 0),
        ),
        claude_line(
            s,
            "h3",
            "msg_h3",
            "req_h3",
            "claude-haiku-4-5-20251001",
            "2026-04-02T10:02:00.000Z",
            10,
            100,
            split(10_000, 20_000),
        ),
    ];
    let path = project.join(format!("{s}.jsonl"));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (_d, r) = import_claude(&[path]);
    let t = &r.total;
    assert_eq!(t.cache_write_tokens, 40_000 + 30_000 + 30_000);
    assert_eq!(t.cache_write_1h_tokens, 40_000 + 20_000);
    // Per Mtok: sonnet-4-5 $3 in / $15 out, 1h write $6; opus-4-1 $15 / $75,
    // 5m write $18.75; haiku-4-5 $1 / $5, 5m write $1.25, 1h write $2.
    let expected = (10.0 * 3.0
        + 100.0 * 15.0
        + 40_000.0 * 6.0
        + 10.0 * 15.0
        + 100.0 * 75.0
        + 30_000.0 * 18.75
        + 10.0 * 1.0
        + 100.0 * 5.0
        + 10_000.0 * 1.25
        + 20_000.0 * 2.0)
        / 1e6;
    assert!(
        (t.cost_usd - expected).abs() < 1e-9,
        "{} != {expected}",
        t.cost_usd
    );
}
