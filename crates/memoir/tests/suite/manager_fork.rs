//! Property: a fork at any cut of any conversation with parallel tool calls
//! (some left unanswered, results in any order, stray results) holds exactly
//! the source's prefix up to the effective cut, which is the longest prefix
//! no longer than the request with no orphaned tool call or result; and a
//! fork of that fork does the same.

use std::collections::HashMap;

use memoir::manager::{ManagerError, ManagerOptions, SessionManager};
use memoir::message::{Block, Message, Role};
use memoir::store::Durability;
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Step {
    User,
    Assistant,
    /// Parallel calls: how many, which are answered (bit mask), results in
    /// one tool message or one each, and a shuffle seed for their order.
    Tools {
        calls: usize,
        answered: u8,
        split: bool,
        shuffle: u64,
    },
    /// A result for a call that was never made.
    Stray,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::User),
        3 => Just(Step::Assistant),
        5 => (1usize..4, any::<u8>(), any::<bool>(), any::<u64>()).prop_map(
            |(calls, answered, split, shuffle)| Step::Tools { calls, answered, split, shuffle }
        ),
        1 => Just(Step::Stray),
    ]
}

fn build(steps: &[Step]) -> Vec<Message> {
    let mut out = vec![Message::user("start")];
    for (g, s) in steps.iter().enumerate() {
        match s {
            Step::User => out.push(Message::user(format!("u{g}"))),
            Step::Assistant => out.push(Message::assistant(format!("a{g}"))),
            Step::Stray => out.push(Message::tool_result(format!("stray{g}"), "?", false)),
            Step::Tools {
                calls,
                answered,
                split,
                shuffle,
            } => {
                let ids: Vec<String> = (0..*calls).map(|i| format!("g{g}c{i}")).collect();
                out.push(Message::new(
                    Role::Assistant,
                    ids.iter()
                        .map(|id| Block::ToolUse {
                            id: id.clone(),
                            name: "t".into(),
                            input: json!({"g": g}),
                        })
                        .collect(),
                ));
                let mut results: Vec<Block> = ids
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| answered & 0x80 != 0 || answered & (1 << i) != 0)
                    .map(|(_, id)| Block::ToolResult {
                        tool_use_id: id.clone(),
                        content: format!("r-{id}"),
                        is_error: false,
                    })
                    .collect();
                // Deterministic shuffle.
                let mut seed = *shuffle | 1;
                for i in (1..results.len()).rev() {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    results.swap(i, (seed % (i as u64 + 1)) as usize);
                }
                if results.is_empty() {
                    continue;
                }
                if *split {
                    out.extend(
                        results
                            .into_iter()
                            .map(|b| Message::new(Role::Tool, vec![b])),
                    );
                } else {
                    out.push(Message::new(Role::Tool, results));
                }
            }
        }
    }
    out
}

/// Independent check: every result answers an earlier, not yet answered
/// call, and every call is answered within the list.
fn well_paired(messages: &[Message]) -> bool {
    let mut calls: HashMap<String, bool> = HashMap::new();
    for m in messages {
        for b in &m.content {
            match b {
                Block::ToolResult { tool_use_id, .. } => match calls.get_mut(tool_use_id) {
                    Some(answered @ false) => *answered = true,
                    _ => return false,
                },
                Block::ToolUse { id, .. } => {
                    calls.insert(id.clone(), false);
                }
                _ => {}
            }
        }
    }
    calls.values().all(|answered| *answered)
}

/// Fork `source` at `cut` and check the property; returns the fork's id
/// and messages when one was made.
fn check_fork(
    m: &mut SessionManager,
    source: &str,
    source_messages: &[Message],
    cut: usize,
) -> Result<Option<(String, Vec<Message>)>, TestCaseError> {
    let limit = cut.min(source_messages.len());
    let longest_valid = (1..=limit)
        .rev()
        .find(|&k| well_paired(&source_messages[..k]))
        .unwrap_or(0);
    match m.fork_session(source, Some(cut)) {
        Err(ManagerError::EmptyFork { .. }) => {
            prop_assert_eq!(longest_valid, 0);
            Ok(None)
        }
        Err(e) => Err(TestCaseError::fail(format!("fork failed: {e}"))),
        Ok(f) => {
            prop_assert_eq!(f.effective, longest_valid, "the longest safe prefix");
            prop_assert!(!f.materialized);
            let got = m.read_session_messages(&f.id).unwrap();
            prop_assert_eq!(&got[..], &source_messages[..f.effective]);
            prop_assert!(well_paired(&got), "orphaned call or result in the fork");
            Ok(Some((f.id, got)))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn forks_never_orphan_a_tool_call_or_result(
        steps in prop::collection::vec(step(), 0..24),
        cut in 0usize..80,
        cut2 in 0usize..80,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut m = SessionManager::for_project(
            dir.path(),
            ManagerOptions { durability: Durability::None, ..Default::default() },
        )
        .unwrap();
        let messages = build(&steps);
        m.append_session_messages("source", messages.clone()).unwrap();
        prop_assert_eq!(m.read_session_messages("source").unwrap(), messages.clone());
        if let Some((child, child_messages)) = check_fork(&mut m, "source", &messages, cut)? {
            // A fork of the fork, after the parent and the child moved on.
            m.append_session_messages("source", vec![Message::user("parent later")]).unwrap();
            m.append_session_messages(&child, vec![Message::assistant("child later")]).unwrap();
            let mut child_now = child_messages.clone();
            child_now.push(Message::assistant("child later"));
            prop_assert_eq!(m.read_session_messages(&child).unwrap(), child_now.clone());
            check_fork(&mut m, &child, &child_now, cut2)?;
        }
    }
}
