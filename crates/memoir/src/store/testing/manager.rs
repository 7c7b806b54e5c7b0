//! The session manager's contract as checks, over any [`LogStore`](crate::store::LogStore): every
//! check builds [`SessionManager::with_store`] on a fresh, empty store and
//! drives it through the public API (create, append with tool calls, fork
//! inside a tool-call group, rewrite, checkpoint, rename, delete, restore,
//! purge, export, lease, project isolation, payload blobs and their
//! collection). `tests/suite/manager_conformance.rs` runs them on the file
//! store, the in-memory store and PostgreSQL, and `memoir-server`'s tests on
//! a `RemoteStore` over a real server (with [`PROJECT_CHECKS`] on one token
//! per project); a new backend calls [`run_all`]. [`scenario_digest`] renders one scenario's
//! observable results so backends can be compared for equality.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::ErrorKind;
use crate::manager::{
    ExportFormat, ExportOptions, LeasePolicy, ManagerError, ManagerOptions, SessionManager,
};
use crate::message::{Block, Message, Role};

pub use super::{Check, Store};

/// Every check, by name.
pub const CHECKS: &[(&str, Check)] = &[
    ("create_append_and_reload", create_append_and_reload),
    (
        "fork_inside_a_tool_group_moves_back",
        fork_inside_a_tool_group_moves_back,
    ),
    (
        "rewrite_and_checkpoint_persist",
        rewrite_and_checkpoint_persist,
    ),
    ("rename_and_list", rename_and_list),
    ("delete_restore_and_purge", delete_restore_and_purge),
    ("export_formats", export_formats),
    (
        "lease_refuses_a_second_manager",
        lease_refuses_a_second_manager,
    ),
    ("projects_are_isolated", projects_are_isolated),
    (
        "switch_repairs_dangling_tool_calls",
        switch_repairs_dangling_tool_calls,
    ),
    (
        "writes_never_land_in_a_reused_id",
        writes_never_land_in_a_reused_id,
    ),
    ("large_payloads_live_in_blobs", large_payloads_live_in_blobs),
    (
        "purge_drops_only_unreferenced_blobs",
        purge_drops_only_unreferenced_blobs,
    ),
];

/// The store each project's manager works on: the same store for a shared
/// backend (the manager's [`ManagerOptions::project`] scopes it), one
/// token's store per project for `memoir serve` (the token is the project).
pub type ProjectStores<'a> = &'a dyn Fn(&str) -> Store;

/// One check over a store per project: panics when the stores break the contract.
pub type ProjectCheck = fn(ProjectStores<'_>);

/// The checks that need one store per project (each also runs in
/// [`CHECKS`] with the same store for every project).
pub const PROJECT_CHECKS: &[(&str, ProjectCheck)] = &[
    ("projects_are_isolated", projects_are_isolated_in),
    (
        "writes_never_land_in_a_reused_id",
        writes_never_land_in_a_reused_id_in,
    ),
];

/// Run every check, each on a fresh store from `fresh`.
pub fn run_all(fresh: &dyn Fn() -> Store) {
    for (name, check) in CHECKS {
        eprintln!("manager conformance: {name}");
        check(&fresh());
    }
}

/// Options for the checks: batching by count only (deterministic).
pub fn options() -> ManagerOptions {
    ManagerOptions {
        flush_interval: Duration::from_secs(3600),
        ..ManagerOptions::default()
    }
}

fn manager(store: &Store) -> SessionManager {
    SessionManager::with_store(store.clone(), options())
}

/// An assistant message calling tools `ids`.
pub fn call(ids: &[&str]) -> Message {
    Message::new(
        Role::Assistant,
        ids.iter()
            .map(|id| Block::ToolUse {
                id: id.to_string(),
                name: "shell".into(),
                input: json!({"command": "ls"}),
            })
            .collect(),
    )
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.text_content()).collect()
}

/// A conversation with two tool-call groups (7 messages).
pub fn conversation() -> Vec<Message> {
    vec![
        Message::assistant("plan"),
        call(&["a"]),
        Message::tool_result("a", "listing a", false),
        Message::assistant("done a"),
        Message::user("next"),
        call(&["b", "c"]),
        Message::tool_result("b", "listing b", false),
    ]
}

pub fn create_append_and_reload(store: &Store) {
    let mut m = manager(store);
    let id = m.create_session("Write a parser", None).unwrap();
    m.add_messages(conversation()).unwrap();
    m.flush().unwrap();
    assert_eq!(m.unsaved(), 0);
    let listed = m.list_sessions().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, id);
    assert_eq!(listed[0].title.as_deref(), Some("Write a parser"));
    assert_eq!(listed[0].messages, 8);
    let saved = m.messages.clone();
    drop(m);
    let mut again = manager(store);
    assert!(again.switch_session(&id).unwrap());
    // The open call `c` was closed on switch: one more message, the rest equal.
    assert_eq!(again.messages[..8], saved[..]);
    assert_eq!(again.read_session(&id).unwrap().messages, again.messages);
    assert!(!again.switch_session("no-such-session").unwrap());
    assert_eq!(again.resolve(&id[..id.len() - 2]).unwrap(), id);
    assert!(
        again.resolve("").is_err(),
        "an empty prefix matches nothing"
    );
}

pub fn fork_inside_a_tool_group_moves_back(store: &Store) {
    let mut m = manager(store);
    let id = m.create_session("task", None).unwrap();
    m.add_messages(conversation()).unwrap();
    m.flush().unwrap();
    // Message 2 is call(a): a cut after it would separate it from its result.
    let f = m.fork_session(&id, Some(3)).unwrap();
    assert_eq!((f.requested, f.effective), (3, 2));
    assert!(
        f.parent.parent_created_at.is_some(),
        "the parent is stamped"
    );
    let child = m.read_session(&f.id).unwrap();
    assert_eq!(child.messages, m.messages[..2]);
    assert_eq!(child.inherited, 2);
    let f2 = m.fork_session(&id, Some(4)).unwrap();
    assert_eq!(f2.effective, 4);
    // A cut inside the open group at the end moves back before it.
    let f3 = m.fork_session(&id, None).unwrap();
    assert_eq!(f3.effective, 6);
    // The fork grows on its own; the parent is untouched.
    m.append_session_messages(&f.id, vec![Message::user("child only")])
        .unwrap();
    assert_eq!(m.read_session(&f.id).unwrap().messages.len(), 3);
    assert_eq!(m.read_session(&id).unwrap().messages.len(), 8);
    match m.fork_session(&id, Some(0)) {
        Err(ManagerError::EmptyFork { .. }) => {}
        other => panic!("expected EmptyFork, got {other:?}"),
    }
}

pub fn rewrite_and_checkpoint_persist(store: &Store) {
    let mut m = manager(store);
    let id = m.create_session("task", None).unwrap();
    m.add_messages(conversation()[..4].to_vec()).unwrap();
    m.flush().unwrap();
    m.messages.truncate(2);
    m.messages.push(Message::assistant("summary"));
    m.flush().unwrap();
    let cp = json!({"cutoff_index": 2});
    m.set_context_checkpoint(Some(cp.clone())).unwrap();
    drop(m);
    let mut again = manager(store);
    again.switch_session(&id).unwrap();
    assert_eq!(texts(&again.messages), ["task", "plan", "summary"]);
    assert_eq!(again.context_checkpoint(), Some(cp));
}

pub fn rename_and_list(store: &Store) {
    let mut m = manager(store);
    let a = m.create_session("first", None).unwrap();
    let b = m.create_session("second", None).unwrap();
    assert!(m.rename_session(&a, "renamed").unwrap());
    assert!(!m.rename_session("missing", "x").unwrap());
    let listed = m.list_sessions().unwrap();
    let title = |id: &str| {
        listed
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.title.clone())
    };
    assert_eq!(title(&a).as_deref(), Some("renamed"));
    assert_eq!(title(&b).as_deref(), Some("second"));
    assert!(m.touch_session(&a).unwrap());
    assert!(!m.touch_session("missing").unwrap());
    assert!(m.ensure_session("made-by-ensure", "ensured").unwrap());
    assert!(!m.ensure_session("made-by-ensure", "").unwrap());
    assert_eq!(m.list_sessions().unwrap().len(), 3);
}

pub fn delete_restore_and_purge(store: &Store) {
    let mut m = manager(store);
    let parent = m.create_session("parent task", None).unwrap();
    m.add_messages([Message::assistant("p1"), Message::user("p2")])
        .unwrap();
    m.flush().unwrap();
    let fork = m.fork_session(&parent, Some(2)).unwrap().id;
    let lone = m.create_session("lone", None).unwrap();
    // Delete: gone from the listing, in the trash, its id not re-creatable.
    assert!(m.delete_session(&parent).unwrap());
    assert!(!m.delete_session(&parent).unwrap());
    let live: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert!(!live.contains(&parent), "{live:?}");
    let trash: Vec<String> = m
        .list_trash()
        .unwrap()
        .into_iter()
        .map(|t| t.entry.id)
        .collect();
    assert_eq!(trash, std::slice::from_ref(&parent));
    assert!(matches!(m.read_session(&parent), Err(e) if e.is_not_found()));
    match m.append_session_messages(&parent, vec![Message::user("x")]) {
        Err(ManagerError::InTrash(id)) => assert_eq!(id, parent),
        other => panic!("expected InTrash, got {other:?}"),
    }
    // Its fork still reads its prefix.
    assert_eq!(
        texts(&m.read_session(&fork).unwrap().messages),
        ["parent task", "p1"]
    );
    // Purge keeps what a surviving fork needs.
    let report = m.purge_trash(None).unwrap();
    assert!(report.purged.is_empty());
    assert_eq!(report.kept, [(parent.clone(), vec![fork.clone()])]);
    // Restore brings it back, records intact.
    let entry = m.restore_session(&parent).unwrap();
    assert_eq!(entry.messages, 3);
    assert!(matches!(
        m.restore_session(&parent),
        Err(ManagerError::NotInTrash(_))
    ));
    // Delete both, purge all: gone for good.
    assert!(m.delete_session(&fork).unwrap());
    assert!(m.delete_session(&parent).unwrap());
    let mut purged = m.purge_trash(None).unwrap().purged;
    purged.sort();
    let mut want = vec![parent.clone(), fork.clone()];
    want.sort();
    assert_eq!(purged, want);
    assert!(m.list_trash().unwrap().is_empty());
    let live: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(live, [lone]);
}

pub fn export_formats(store: &Store) {
    let mut m = manager(store);
    let id = m.create_session("export me", None).unwrap();
    m.add_messages(conversation()[..4].to_vec()).unwrap();
    let jsonl = m.export(&id, ExportOptions::default()).unwrap();
    assert_eq!(jsonl.messages, 5, "unsaved messages are flushed first");
    let lines: Vec<Value> = jsonl
        .text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["format"], "memoir.session-export");
    assert_eq!(lines.len(), 7);
    let openai = m
        .export(
            &id,
            ExportOptions {
                format: ExportFormat::OpenAi,
                ..Default::default()
            },
        )
        .unwrap();
    let v: Value = serde_json::from_str(&openai.text).unwrap();
    assert_eq!(v.as_array().map(Vec::len), Some(5), "{v}");
    let md = m
        .export(
            &id,
            ExportOptions {
                format: ExportFormat::Markdown,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(md.text.contains("export me"));
}

pub fn lease_refuses_a_second_manager(store: &Store) {
    let mut a = manager(store);
    let id = a.create_session("leased", None).unwrap();
    if a.lease().is_none() {
        // A store without leases: say so when one is required.
        let mut required = SessionManager::with_store(
            store.clone(),
            ManagerOptions {
                lease: LeasePolicy::Required,
                ..options()
            },
        );
        match required.switch_session(&id) {
            Err(ManagerError::Store(e)) => assert_eq!(e.kind(), ErrorKind::Unsupported),
            other => panic!("expected Unsupported, got {other:?}"),
        }
        return;
    }
    let mut b = manager(store);
    match b.switch_session(&id) {
        Err(ManagerError::Store(e)) => {
            assert_eq!(e.kind(), ErrorKind::Busy);
            assert!(
                e.to_string().contains(&std::process::id().to_string()),
                "{e}"
            );
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    // Non-driving writes still go through (short appends never need the lease).
    assert!(b.rename_session(&id, "renamed by b").unwrap());
    // Switching away releases it.
    a.create_session("other", None).unwrap();
    assert!(b.switch_session(&id).unwrap());
    assert!(b.lease().is_some());
    let mut off = SessionManager::with_store(
        store.clone(),
        ManagerOptions {
            lease: LeasePolicy::Off,
            ..options()
        },
    );
    assert!(
        off.switch_session(&id).unwrap(),
        "no lease asked, none refused"
    );
}

pub fn projects_are_isolated(store: &Store) {
    projects_are_isolated_in(&|_| store.clone())
}

pub fn projects_are_isolated_in(stores: ProjectStores<'_>) {
    let in_project = |p: &str| {
        SessionManager::with_store(
            stores(p),
            ManagerOptions {
                project: Some(p.to_string()),
                ..options()
            },
        )
    };
    let mut a = in_project("alpha");
    let mut b = in_project("beta");
    let id = a.create_session("alpha's secret", None).unwrap();
    b.create_session("beta's own", None).unwrap();
    assert_eq!(a.list_sessions().unwrap().len(), 1);
    assert_eq!(b.list_sessions().unwrap().len(), 1);
    assert!(matches!(b.read_session(&id), Err(e) if e.is_not_found()));
    assert!(matches!(b.fork_session(&id, None), Err(e) if e.is_not_found()));
    assert!(!b.rename_session(&id, "stolen").unwrap());
    assert!(!b.delete_session(&id).unwrap());
    assert!(!b.switch_session(&id).unwrap());
    assert!(b.resolve(&id).is_err());
    // A's fork stays in A.
    let f = a.fork_session(&id, None).unwrap();
    assert_eq!(a.list_sessions().unwrap().len(), 2);
    assert!(matches!(b.read_session(&f.id), Err(e) if e.is_not_found()));
    assert!(a.delete_session(&id).unwrap());
    assert!(b.list_trash().unwrap().is_empty(), "A's trash is A's");
    assert!(matches!(
        b.restore_session(&id),
        Err(ManagerError::NotInTrash(_))
    ));
}

pub fn switch_repairs_dangling_tool_calls(store: &Store) {
    let mut m = manager(store);
    let id = m.create_session("task", None).unwrap();
    m.add_messages([call(&["x"])]).unwrap();
    m.flush().unwrap();
    drop(m);
    let mut again = manager(store);
    again.switch_session(&id).unwrap();
    assert_eq!(again.messages.len(), 3);
    assert_eq!(
        again.messages[2].tool_result_ids().collect::<Vec<_>>(),
        ["x"]
    );
    assert!(
        again.messages[2]
            .content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { is_error: true, .. })),
        "closed with an error result: {:?}",
        again.messages[2]
    );
    drop(again);
    let m3 = manager(store);
    assert_eq!(m3.read_session(&id).unwrap().messages.len(), 3, "durable");
}

/// A manager driving session X keeps writing after X is deleted elsewhere,
/// purged, and its id taken by another project's new session: the writes are
/// refused ("not found"), and the new session never sees them.
pub fn writes_never_land_in_a_reused_id(store: &Store) {
    writes_never_land_in_a_reused_id_in(&|_| store.clone())
}

pub fn writes_never_land_in_a_reused_id_in(stores: ProjectStores<'_>) {
    let in_project = |p: &str| {
        SessionManager::with_store(
            stores(p),
            ManagerOptions {
                project: Some(p.to_string()),
                lease: LeasePolicy::Off,
                ..options()
            },
        )
    };
    let mut a = in_project("alpha");
    let id = a.create_session("alpha's", None).unwrap();
    let mut elsewhere = in_project("alpha");
    assert!(elsewhere.delete_session(&id).unwrap());
    elsewhere.purge_trash(None).unwrap();
    let mut b = in_project("beta");
    assert!(b.ensure_session(&id, "beta's").unwrap());
    a.add_message(Message::assistant("alpha's secret")).unwrap();
    match a.flush() {
        Err(e) => assert!(e.is_not_found(), "{e}"),
        Ok(()) => panic!("the write landed in another project's session"),
    }
    assert!(b
        .read_session(&id)
        .unwrap()
        .messages
        .iter()
        .all(|m| !m.text_content().contains("alpha")));
    // The same within one project: a re-created id is another session.
    let mut c = in_project("beta");
    c.switch_session(&id).unwrap();
    assert!(b.delete_session(&id).unwrap());
    b.purge_trash(None).unwrap();
    assert!(b.ensure_session(&id, "second life").unwrap());
    let written = c
        .add_message(Message::assistant("for the first life"))
        .and_then(|()| c.flush());
    assert!(written.unwrap_err().is_not_found());
    assert_eq!(b.read_session(&id).unwrap().messages.len(), 0);
}

/// A tool output above the blob threshold (64 KiB), distinct per `tag`.
pub fn big_output(tag: &str) -> String {
    format!("{tag}: {}", "a long tool output line\n".repeat(4_000))
}

fn turn_with(output: &str, call_id: &str) -> Vec<Message> {
    vec![
        call(&[call_id]),
        Message::tool_result(call_id, output, false),
    ]
}

/// Whether `store`'s blob store holds the blob of `payload`.
fn holds(store: &Store, payload: &str) -> bool {
    let blobs = store.blobs().expect("a blob store");
    blobs
        .store
        .contains(&crate::blob::hash_bytes(payload.as_bytes()))
}

/// The bytes of a session's own records as stored (references, not payloads).
fn stored_bytes(store: &Store, id: &str) -> usize {
    store
        .read(id)
        .unwrap()
        .records
        .iter()
        .map(|r| {
            serde_json::to_string(&r.record.to_object().unwrap())
                .unwrap()
                .len()
        })
        .sum()
}

/// A payload above the threshold is written once to the store's blob store
/// (the records hold a reference), reads back byte for byte, and a rewrite
/// and a fork carrying it reference the same blob.
pub fn large_payloads_live_in_blobs(store: &Store) {
    assert!(store.blobs().is_some(), "every backend has a blob store");
    let output = big_output("one");
    let mut m = manager(store);
    let id = m.create_session("big", None).unwrap();
    m.add_messages(turn_with(&output, "t1")).unwrap();
    m.flush().unwrap();
    assert!(holds(store, &output));
    assert!(
        stored_bytes(store, &id) < 16 * 1024,
        "the payload is not inline: {} bytes",
        stored_bytes(store, &id)
    );
    let t = m.read_session(&id).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.messages[2].content, turn_with(&output, "t1")[1].content);
    // A rewrite (compaction) carrying it and a fork of it add no payload bytes.
    m.add_message(Message::assistant("after")).unwrap();
    m.flush().unwrap();
    m.messages.truncate(3);
    m.flush().unwrap();
    let keep = m.messages.clone();
    let f = m.fork_session(&id, None).unwrap();
    let forked = m.read_session(&f.id).unwrap();
    assert_eq!(forked.messages, keep);
    assert!(stored_bytes(store, &id) < 48 * 1024);
    drop(m);
    let again = manager(store);
    assert_eq!(again.read_session(&id).unwrap().messages, keep, "durable");
}

/// Purge drops the blobs only purged sessions referenced, and keeps every
/// blob a live or a trashed session still references.
pub fn purge_drops_only_unreferenced_blobs(store: &Store) {
    let (only_purged, shared, trashed_only) = (
        big_output("purged"),
        big_output("shared"),
        big_output("trashed"),
    );
    let mut m = manager(store);
    let doomed = m.create_session("doomed", None).unwrap();
    m.add_messages(turn_with(&only_purged, "p")).unwrap();
    m.add_messages(turn_with(&shared, "s")).unwrap();
    m.flush().unwrap();
    let live = m.create_session("live", None).unwrap();
    m.add_messages(turn_with(&shared, "s2")).unwrap();
    m.flush().unwrap();
    let kept = m.create_session("kept in the trash", None).unwrap();
    m.add_messages(turn_with(&trashed_only, "k")).unwrap();
    m.flush().unwrap();
    assert!(m.delete_session(&doomed).unwrap());
    assert!(m.delete_session(&kept).unwrap());
    let report = m.purge_trash(Some(std::slice::from_ref(&doomed))).unwrap();
    assert_eq!(report.purged, std::slice::from_ref(&doomed));
    assert!(!holds(store, &only_purged), "its only session was purged");
    assert!(holds(store, &shared), "a live session references it");
    assert!(
        holds(store, &trashed_only),
        "a trashed session references it"
    );
    let t = m.read_session(&live).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.messages[2].content, turn_with(&shared, "s2")[1].content);
    // Restored, the trashed session has its payload.
    m.restore_session(&kept).unwrap();
    let t = m.read_session(&kept).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(
        t.messages[2].content,
        turn_with(&trashed_only, "k")[1].content
    );
}

/// One scenario's observable results, with ids and times replaced by
/// placeholders, so two backends can be compared for equality: fork cuts,
/// listings, trash and every export format.
pub fn scenario_digest(store: &Store) -> Value {
    let mut m = manager(store);
    let id = m.create_session("digest", None).unwrap();
    m.add_messages(conversation()).unwrap();
    m.flush().unwrap();
    let fork = m.fork_session(&id, Some(3)).unwrap();
    m.rename_session(&fork.id, "the fork").unwrap();
    let mut exports = Vec::new();
    for format in [
        ExportFormat::Jsonl,
        ExportFormat::OpenAi,
        ExportFormat::Markdown,
    ] {
        for sid in [&id, &fork.id] {
            let text = m
                .export(
                    sid,
                    ExportOptions {
                        format,
                        ..Default::default()
                    },
                )
                .unwrap()
                .text;
            exports.push(normalise(&text, &[(&id, "<parent>"), (&fork.id, "<fork>")]));
        }
    }
    m.delete_session(&fork.id).unwrap();
    let trash = m.list_trash().unwrap().len();
    let listed: Vec<Value> = m
        .list_sessions()
        .unwrap()
        .iter()
        .map(|e| json!({"title": e.title, "messages": e.messages, "inherited": e.inherited}))
        .collect();
    json!({
        "fork": {"requested": fork.requested, "effective": fork.effective,
                 "messages": fork.parent.messages, "materialized": fork.materialized},
        "exports": exports,
        "listed": listed,
        "trash": trash,
    })
}

/// `text` with each id replaced and RFC 3339 timestamps blanked.
fn normalise(text: &str, ids: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (id, placeholder) in ids {
        out = out.replace(id, placeholder);
    }
    blank_timestamps(&out)
}

/// `text` with every RFC 3339 timestamp (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`)
/// replaced by `<time>`.
fn blank_timestamps(text: &str) -> String {
    let b = text.as_bytes();
    let digits = |from: usize, n: usize| {
        b.get(from..from + n)
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        let head = digits(i, 4)
            && at(i + 4, b'-')
            && digits(i + 5, 2)
            && at(i + 7, b'-')
            && digits(i + 8, 2)
            && at(i + 10, b'T')
            && digits(i + 11, 2)
            && at(i + 13, b':')
            && digits(i + 14, 2)
            && at(i + 16, b':')
            && digits(i + 17, 2);
        if !head {
            i += 1;
            continue;
        }
        let mut j = i + 19;
        if at(j, b'.') && digits(j + 1, 1) {
            j += 1;
            while digits(j, 1) {
                j += 1;
            }
        }
        let end = if at(j, b'Z') {
            Some(j + 1)
        } else if (at(j, b'+') || at(j, b'-'))
            && digits(j + 1, 2)
            && at(j + 3, b':')
            && digits(j + 4, 2)
        {
            Some(j + 6)
        } else {
            None
        };
        match end {
            Some(end) => {
                out.push_str(&text[copied..i]);
                out.push_str("<time>");
                copied = end;
                i = end;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}
