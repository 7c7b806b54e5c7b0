//! Run outcomes (`outcome`, `late_failure`, `pending_note` records): the
//! seed's `record_outcome` / `outcomes` / `last_outcome` /
//! `outcomes_attributed` / `episode_stats` tests, ported, plus the format's
//! promises (unknown fields kept, unknown kinds skipped cleanly, forks do not
//! inherit their parent's runs).

use std::path::Path;

use memoir::manager::{LeasePolicy, ManagerOptions, SessionManager};
use memoir::message::{Message, Usage};
use memoir::record::{
    ForkPoint, Record, RunConfig, RunStats, SessionMeta, StopCause, Taint, ToolCall,
};
use memoir::transcript::Session;
use serde_json::json;

fn meta(id: &str) -> SessionMeta {
    let mut m = SessionMeta::new(id);
    m.provider = "anthropic".into();
    m.model = "claude-x".into();
    m.workspace = "/tmp/project".into();
    m
}

fn usage(input: u64) -> Usage {
    Usage {
        input_tokens: input,
        ..Usage::default()
    }
}

fn run(turns: u32, calls: u32) -> RunStats {
    RunStats {
        turns,
        tool_calls: calls,
        usage_complete: true,
        ..RunStats::default()
    }
}

#[test]
fn one_pass_read_agrees_with_the_readers_and_the_episode_is_a_fold() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("fold")).unwrap();
    s.append_messages(&[Message::user("hi")]).unwrap();
    s.record_outcome(&run(2, 3)).unwrap();
    s.append_messages(&[Message::assistant("done")]).unwrap();
    s.record_outcome(&run(5, 7)).unwrap();
    let t = Session::read(&s.path).unwrap();
    let episode = Session::episode_stats(&s.path).unwrap().unwrap();
    assert_eq!(t.episode().as_ref(), Some(&episode));
    assert_eq!(
        (episode.turns, episode.tool_calls),
        (7, 10),
        "a fold, not the last row"
    );
    assert_eq!(
        Session::load(&s.path).unwrap().conversation.messages,
        t.messages
    );
    assert_eq!(Session::outcomes(&s.path).unwrap().len(), 2);
    assert_eq!(Session::last_outcome(&s.path).unwrap().unwrap().turns, 5);
}

#[test]
fn an_outcome_round_trips_and_counts_tool_calls_like_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("rt")).unwrap();
    s.append_messages(&[Message::user("list"), Message::assistant("ok")])
        .unwrap();
    let calls = [
        ToolCall::default(),
        ToolCall {
            is_error: true,
            ..ToolCall::default()
        },
        ToolCall {
            unknown: true,
            ..ToolCall::default()
        },
        ToolCall {
            is_error: true,
            denied: true,
            ..ToolCall::default()
        },
        ToolCall {
            staged: true,
            ..ToolCall::default()
        },
    ];
    let stats = RunStats {
        turns: 3,
        usage: usage(100),
        cost_usd: Some(0.5),
        usage_complete: true,
        stop_cause: Some(StopCause::Completed),
        malformed_tool_args: 1,
        blocked_sends: 2,
        compactions: 4,
        context_overflows: Some(0),
        homeostat: Some(json!({"temperature": 0.7, "pressure": "low"})),
        taint: Taint {
            private: true,
            untrusted: false,
        },
        duration_secs: Some(12.5),
        ..RunStats::default()
    }
    .with_calls(&calls);
    assert_eq!(
        (
            stats.tool_calls,
            stats.tool_errors,
            stats.tool_denied,
            stats.tool_staged
        ),
        (5, 2, 1, 1),
        "tool_errors = error + unknown; a denial is not an error"
    );
    assert!(
        !stats.ended_on_failed_call,
        "the last call was staged, not failed"
    );
    s.record_outcome(&stats).unwrap();
    let back = Session::outcomes(&s.path).unwrap();
    assert_eq!(back, vec![stats.clone()]);
    assert_eq!(
        back[0].homeostat,
        Some(json!({"temperature": 0.7, "pressure": "low"})),
        "the conditions a run ran under reach the record"
    );
    let t = Session::read(&s.path).unwrap();
    assert_eq!(
        t.messages.len(),
        2,
        "an outcome does not disturb the messages"
    );
    assert!(t.report.is_clean());
    assert_eq!(
        Session::usage_totals(&s.path).unwrap().1,
        0,
        "run summaries, not outcomes, make usage_totals"
    );
    // The last call failing marks the run.
    let failed = RunStats::default().with_calls(&[ToolCall {
        unknown: true,
        ..ToolCall::default()
    }]);
    assert!(failed.ended_on_failed_call);
}

#[test]
fn episode_sums_counters_and_takes_the_last_runs_ending() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("ep")).unwrap();
    let first = RunStats {
        turns: 1,
        tool_calls: 2,
        tool_errors: 1,
        compactions: 1,
        cost_usd: Some(0.25),
        usage: usage(10),
        usage_complete: true,
        stop_cause: Some(StopCause::MaxTurns),
        exhausted: true,
        ended_on_failed_call: true,
        taint: Taint {
            private: true,
            untrusted: false,
        },
        homeostat: Some(json!("first")),
        ..RunStats::default()
    };
    let second = RunStats {
        turns: 2,
        tool_calls: 3,
        tool_errors: 2,
        compactions: 2,
        cost_usd: Some(0.25),
        usage: usage(10),
        usage_complete: true,
        stop_cause: Some(StopCause::Completed),
        homeostat: Some(json!("second")),
        ..RunStats::default()
    };
    s.record_outcome(&first).unwrap();
    s.record_outcome(&second).unwrap();
    let e = Session::episode_stats(&s.path).unwrap().unwrap();
    assert_eq!(
        (e.turns, e.tool_calls, e.tool_errors, e.compactions),
        (3, 5, 3, 3)
    );
    assert_eq!(e.cost_usd, Some(0.5));
    assert_eq!(e.usage.input_tokens, 20);
    assert_eq!(
        e.stop_cause,
        Some(StopCause::Completed),
        "the last run's cause"
    );
    assert!(!e.ended_on_failed_call, "the last run's ending");
    assert!(!e.exhausted, "the last run's ending");
    assert!(e.taint.private && !e.taint.untrusted, "taint is ORed");
    assert_eq!(
        e.homeostat,
        Some(json!("first")),
        "the first run's conditions"
    );
    assert!(e.usage_complete);
}

#[test]
fn optional_sensors_sum_and_unknown_is_not_zero() {
    let a = RunStats {
        boredom_notices: Some(2),
        ..RunStats::default()
    };
    let b = RunStats {
        boredom_notices: Some(3),
        context_overflows: Some(1),
        ..RunStats::default()
    };
    let e = RunStats::fold([&a, &b]).unwrap();
    assert_eq!(e.boredom_notices, Some(5));
    assert_eq!(
        e.context_overflows,
        Some(1),
        "unknown + 1 is 1, not unknown"
    );
    assert_eq!(
        e.step_escalations_attempted, None,
        "unknown + unknown stays unknown"
    );
    assert_eq!(e.cost_usd, None, "no run priced: no cost, not zero");
    assert_eq!(RunStats::fold(std::iter::empty()), None);
}

#[test]
fn one_incomplete_run_makes_the_episode_a_lower_bound() {
    let complete = run(1, 0);
    let incomplete = RunStats {
        usage_complete: false,
        ..run(1, 0)
    };
    for order in [
        [&complete, &incomplete, &complete],
        [&incomplete, &complete, &complete],
        [&complete, &complete, &incomplete],
    ] {
        assert!(!RunStats::fold(order).unwrap().usage_complete);
    }
    assert!(
        RunStats::fold([&complete, &complete])
            .unwrap()
            .usage_complete
    );
}

#[test]
fn no_outcome_records_is_empty_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("none")).unwrap();
    s.append_messages(&[Message::user("hi")]).unwrap();
    assert_eq!(Session::outcomes(&s.path).unwrap(), Vec::<RunStats>::new());
    assert_eq!(Session::last_outcome(&s.path).unwrap(), None);
    assert_eq!(Session::episode_stats(&s.path).unwrap(), None);
    assert!(Session::outcomes_attributed(&s.path).unwrap().is_empty());
}

#[test]
fn outcomes_are_attributed_to_the_provider_and_model_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("attr")).unwrap();
    s.record_outcome(&run(1, 0)).unwrap();
    s.append(&Record::Config(Box::new(RunConfig {
        provider: "openai".into(),
        model: "gpt-x".into(),
        ..RunConfig::default()
    })))
    .unwrap();
    s.record_outcome(&run(2, 0)).unwrap();
    s.record_outcome(&RunStats {
        model: Some("gpt-y".into()),
        ..run(3, 0)
    })
    .unwrap();
    let rows: Vec<(String, String, u32)> = Session::outcomes_attributed(&s.path)
        .unwrap()
        .into_iter()
        .map(|(p, m, o)| (p, m, o.turns))
        .collect();
    assert_eq!(
        rows,
        [
            ("anthropic".into(), "claude-x".into(), 1),
            ("openai".into(), "gpt-x".into(), 2),
            ("openai".into(), "gpt-y".into(), 3),
        ]
    );
}

#[test]
fn late_failures_add_to_the_run_they_name_and_pending_notes_clear_at_the_next_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("late")).unwrap();
    s.record_late_failure(0, "toolu_early").unwrap(); // no run 0 yet: skipped
    s.record_outcome(&run(1, 2)).unwrap();
    s.record_pending_note("check the deploy").unwrap();
    s.record_outcome(&run(1, 1)).unwrap();
    s.record_late_failure(0, "toolu_1").unwrap();
    s.record_late_failure(0, "toolu_2").unwrap();
    s.record_late_failure(7, "toolu_x").unwrap(); // no run 7: skipped
    s.record_pending_note("owed").unwrap();
    let t = Session::read(&s.path).unwrap();
    let errors: Vec<u32> = t.outcomes.iter().map(|o| o.stats.tool_errors).collect();
    assert_eq!(errors, [2, 0]);
    assert_eq!(t.episode().unwrap().tool_errors, 2);
    assert_eq!(t.pending_notes, ["owed"]);
    assert_eq!(
        t.unknown.len(),
        2,
        "late failures naming no earlier run are kept, not applied"
    );
    assert_eq!(
        Session::last_outcome(&s.path).unwrap().unwrap().tool_errors,
        0
    );
}

#[test]
fn unknown_fields_and_causes_survive_a_round_trip() {
    let line = r#"{"record":"outcome","turns":4,"stop_cause":"budget_of_the_future","next_gen":{"x":1},"usage":{"input_tokens":5}}"#;
    let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).unwrap();
    let rec = Record::from_object(obj.clone()).unwrap();
    let Record::Outcome(stats) = &rec else {
        panic!("not an outcome: {rec:?}")
    };
    assert_eq!(stats.turns, 4);
    assert_eq!(
        stats.stop_cause,
        Some(StopCause::Other("budget_of_the_future".into()))
    );
    assert_eq!(stats.v, 1, "a row without a version is version 1");
    let back = rec.to_object().unwrap();
    assert_eq!(back["next_gen"], json!({"x": 1}));
    assert_eq!(back["stop_cause"], json!("budget_of_the_future"));
    assert_eq!(back["turns"], json!(4));
    // And through a real log.
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("future")).unwrap();
    s.append(&rec).unwrap();
    let read = Session::outcomes(&s.path).unwrap();
    assert_eq!(read[0].extra["next_gen"], json!({"x": 1}));
}

/// A build that predates a record kind reads it as an unknown record: kept
/// verbatim, never applied, and the rest of the log loads. The kinds this
/// build added are the ones earlier builds meet that way; a kind from a
/// later build plays their part here.
#[test]
fn a_reader_skips_record_kinds_it_does_not_know_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let s = Session::create(dir.path(), meta("older")).unwrap();
    s.append_messages(&[Message::user("a")]).unwrap();
    let later_kind = Record::from_object(
        serde_json::from_value(json!({"record": "outcome_v2", "turns": 9, "runs": [1, 2]}))
            .unwrap(),
    )
    .unwrap();
    assert!(matches!(later_kind, Record::Unknown { .. }));
    s.append(&later_kind).unwrap();
    s.append_messages(&[Message::assistant("b")]).unwrap();
    s.record_outcome(&run(1, 0)).unwrap();
    let t = Session::read(&s.path).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.messages.len(), 2);
    assert_eq!(t.outcomes.len(), 1, "an unknown kind is not an outcome");
    assert_eq!(t.unknown.len(), 1);
    assert_eq!(t.unknown[0].record, later_kind, "kept verbatim");
    // The new kinds are plain JSON objects with a "record" tag that older
    // builds route to their unknown-kind path.
    for rec in [
        Record::Outcome(Box::new(run(1, 0))),
        Record::PendingNote { note: "n".into() },
    ] {
        let obj = rec.to_object().unwrap();
        assert_eq!(obj["record"], json!(rec.kind()));
        assert!(!memoir::frame::RESERVED_KEYS
            .iter()
            .any(|k| *k != "record" && obj.contains_key(*k)));
    }
}

#[test]
fn a_fork_does_not_inherit_its_parents_runs() {
    let dir = tempfile::tempdir().unwrap();
    let parent = Session::create(dir.path(), meta("parent")).unwrap();
    parent
        .append_messages(&[Message::user("q"), Message::assistant("a")])
        .unwrap();
    let a = parent.record_outcome(&run(4, 0)).unwrap();
    let mut child = meta("child");
    child.parent = Some(ForkPoint::new("parent", a.last_seq, 2));
    let child = Session::create_in(parent.store().clone(), child).unwrap();
    child.record_outcome(&run(1, 0)).unwrap();
    let t = child.transcript().unwrap();
    assert_eq!(t.messages.len(), 2, "the messages are inherited");
    assert_eq!(t.episode().unwrap().turns, 1, "the runs are not");
}

#[test]
fn the_manager_records_an_outcome_after_the_unsaved_messages() {
    let dir = tempfile::tempdir().unwrap();
    let options = ManagerOptions {
        lease: LeasePolicy::Off,
        flush_every: 100,
        ..ManagerOptions::default()
    };
    let mut m = SessionManager::open(&dir.path().join("s"), options).unwrap();
    let id = m.create_session("task", None).unwrap();
    m.add_message(Message::assistant("working")).unwrap();
    m.record_outcome(run(2, 1)).unwrap();
    let t = m.read_session(&id).unwrap();
    assert_eq!(t.messages.len(), 2);
    assert_eq!(t.outcomes.len(), 1);
    assert!(
        t.outcomes[0].seq > t.message_seqs[1],
        "written after the messages"
    );
    assert_eq!(
        outcome_kinds(dir.path().join("s").join(format!("{id}.jsonl")).as_path()),
        1
    );
}

fn outcome_kinds(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| l.contains(r#""record":"outcome""#))
        .count()
}

/// `memoir usage` counts a session's outcomes only when nothing finer says
/// what it used: per-message usage first, then run summaries, then outcomes
/// (a harness writes the same run's tokens to all of them).
#[cfg(feature = "usage")]
#[test]
fn usage_counts_outcomes_only_where_nothing_finer_exists() {
    use memoir::record::Summary;
    use memoir::store::file::FileStore;
    use memoir::store::{Durability, LogStore};
    use memoir::usage::{self, GroupKey, PriceTable, UsageQuery};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::None));
    let open = |id: &str, messages: &[Message]| {
        let s = Session::create_in(store.clone(), SessionMeta::new(id)).unwrap();
        s.append_messages(messages).unwrap();
        s
    };
    let billed = |input: u64| RunStats {
        turns: 2,
        usage: usage(input),
        usage_complete: true,
        model: Some("claude-sonnet-4-5".into()),
        ..RunStats::default()
    };
    // Only outcomes: counted from them (two runs, two requests each).
    let only = open(
        "outcomes-only",
        &[Message::user("hi"), Message::assistant("ok")],
    );
    only.record_outcome(&billed(30)).unwrap();
    only.record_outcome(&billed(20)).unwrap();
    // Per-message usage and an outcome of the same run: counted once.
    let both = open(
        "messages-and-outcome",
        &[Message::assistant("x").with_usage(usage(7))],
    );
    both.record_outcome(&billed(7)).unwrap();
    // A run summary and an outcome of the same run: counted once.
    let summed = open("summary-and-outcome", &[Message::user("q")]);
    summed
        .append(&Record::Summary(Summary {
            usage: usage(11),
            turns: 1,
        }))
        .unwrap();
    summed.record_outcome(&billed(11)).unwrap();
    let query = UsageQuery {
        group_by: vec![GroupKey::Session],
        ..UsageQuery::default()
    };
    let r = usage::report(store.as_ref(), &query, &PriceTable::shipped().unwrap()).unwrap();
    let row = |key: &str| {
        r.rows
            .iter()
            .find(|row| row.key() == [key])
            .unwrap_or_else(|| panic!("no row {key}: {:#?}", r.rows))
            .totals
            .clone()
    };
    assert_eq!(row("outcomes-only").input_tokens, 50);
    assert_eq!(row("outcomes-only").requests, 4);
    assert_eq!(row("messages-and-outcome").input_tokens, 7, "never twice");
    assert_eq!(row("summary-and-outcome").input_tokens, 11, "never twice");
    assert_eq!(r.total.input_tokens, 68);
    // An outcome's model is what its usage is priced and grouped by.
    let by_model = UsageQuery {
        group_by: vec![GroupKey::Model],
        ..UsageQuery::default()
    };
    let r = usage::report(store.as_ref(), &by_model, &PriceTable::shipped().unwrap()).unwrap();
    assert!(r
        .rows
        .iter()
        .any(|row| row.key() == ["claude-sonnet-4-5"] && row.totals.input_tokens == 50));
}
