//! Tool-call pairing and fork points.
//!
//! Owns the rules that keep a history acceptable to providers: where a
//! conversation may be cut ([`safe_cut`]: never between an assistant's tool
//! calls and their results, checking every group, parallel calls included),
//! which calls are still unanswered ([`open_calls`], [`ended_mid_tool`]), how
//! unanswered calls are closed ([`repair`]), and how a cut becomes a
//! by-reference [`ForkPoint`] ([`fork_point`]).

use std::collections::HashSet;

use crate::message::{Block, Message, Role};
use crate::record::ForkPoint;
use crate::store::LogStore;
use crate::transcript::{self, Transcript};

/// The text of the error result that closes an unanswered tool call.
pub const INTERRUPTED: &str =
    "error: this tool call was interrupted before it returned a result (closed by memoir on resume)";

/// A tool call with no result after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCall {
    /// Index of the message that made the call.
    pub message: usize,
    /// The call id.
    pub id: String,
}

/// The largest `k <= end` such that `messages[..k]` has no unanswered tool
/// call and no tool result without an earlier call. Every group is checked,
/// in order (a result must come after its call); a result for an id that is
/// not open makes every longer prefix invalid.
pub fn safe_cut(messages: &[Message], end: usize) -> usize {
    let end = end.min(messages.len());
    let mut open: HashSet<&str> = HashSet::new();
    let mut best = 0;
    for (i, m) in messages[..end].iter().enumerate() {
        for id in m.tool_result_ids() {
            if !open.remove(id) {
                return best;
            }
        }
        open.extend(m.tool_use_ids());
        if open.is_empty() {
            best = i + 1;
        }
    }
    best
}

/// Every tool call that no later message answers, in order.
pub fn open_calls(messages: &[Message]) -> Vec<OpenCall> {
    let mut open: Vec<OpenCall> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for id in m.tool_result_ids() {
            if let Some(pos) = open.iter().position(|c| c.id == id) {
                open.remove(pos);
            }
        }
        open.extend(m.tool_use_ids().map(|id| OpenCall {
            message: i,
            id: id.to_string(),
        }));
    }
    open
}

/// True when the history stops mid-tool: the last message carries tool
/// results (the model has not answered them yet), or some assistant tool
/// call has no result (the history a provider would reject).
pub fn ended_mid_tool(messages: &[Message]) -> bool {
    messages.last().is_some_and(Message::has_tool_results) || !open_calls(messages).is_empty()
}

/// How to close the unanswered tool calls of a history.
#[derive(Debug, Clone, PartialEq)]
pub enum Repair {
    /// Nothing is open.
    None,
    /// Only the last group is open: append this tool message.
    Append(Message),
    /// A group in the middle is open: the whole corrected list, with closing
    /// results inserted right after each open group's existing results.
    Rewrite(Vec<Message>),
}

/// A tool message closing `ids` with explicit error results.
fn closing_message(ids: &[&OpenCall]) -> Message {
    Message::new(
        Role::Tool,
        ids.iter()
            .map(|c| Block::ToolResult {
                tool_use_id: c.id.clone(),
                content: INTERRUPTED.to_string(),
                is_error: true,
            })
            .collect(),
    )
}

/// True when a message holds tool results and nothing else.
fn only_results(m: &Message) -> bool {
    !m.content.is_empty()
        && m.content
            .iter()
            .all(|b| matches!(b, Block::ToolResult { .. }))
}

/// What closes the open calls of `messages` (see [`Repair`]).
pub fn repair(messages: &[Message]) -> Repair {
    let open = open_calls(messages);
    let Some(first) = open.first() else {
        return Repair::None;
    };
    let trailing = open.iter().all(|c| c.message == first.message)
        && messages[first.message + 1..].iter().all(only_results);
    if trailing {
        return Repair::Append(closing_message(&open.iter().collect::<Vec<_>>()));
    }
    let mut out = Vec::with_capacity(messages.len() + open.len());
    let mut i = 0;
    while i < messages.len() {
        out.push(messages[i].clone());
        let group: Vec<&OpenCall> = open.iter().filter(|c| c.message == i).collect();
        i += 1;
        if group.is_empty() {
            continue;
        }
        while i < messages.len() && only_results(&messages[i]) {
            out.push(messages[i].clone());
            i += 1;
        }
        out.push(closing_message(&group));
    }
    Repair::Rewrite(out)
}

/// How a fork at a message cut is written.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkPlan {
    /// The child's header reference.
    pub point: ForkPoint,
    /// When the cut cannot be expressed as a reference alone (the source
    /// rewrote messages that precede it), the child's first record: a
    /// `rewrite` to exactly the cut prefix. `None` in the usual case.
    pub rewrite: Option<Vec<Message>>,
}

/// The fork point of `source` (read as `t` through `store`) at message
/// `end` (`0 < end <= t.messages.len()`). A cut at or past what the source
/// inherited references the source; a cut inside its inherited prefix
/// references the ancestor that wrote those messages. The reference is
/// checked by reading it back; when the source's rewrites make a pure
/// reference impossible, the plan references the source's current end and
/// carries a `rewrite` to the prefix.
pub fn fork_point(
    store: &dyn LogStore,
    source: &str,
    t: &Transcript,
    end: usize,
) -> crate::Result<ForkPlan> {
    let prefix = &t.messages[..end.min(t.messages.len())];
    let verified = |point: ForkPoint| {
        transcript::read_at(store, &point)
            .is_ok_and(|at| at.messages == prefix)
            .then_some(point)
    };
    let own = (end >= t.inherited)
        .then(|| own_point(source, t, end, t.last_seq))
        .and_then(verified);
    let point = own.or_else(|| ancestor(store, t, end, 0).ok().flatten().and_then(verified));
    Ok(match point {
        Some(point) => ForkPlan {
            point,
            rewrite: None,
        },
        None => ForkPlan {
            point: ForkPoint::new(source, t.last_seq, t.messages.len()),
            rewrite: Some(prefix.to_vec()),
        },
    })
}

/// A cut at message `end` of session `id` in state `t` (whose log ends, for
/// this purpose, at `last_seq`). The records between the last kept message
/// and the next one (taint, config) are included: the fork starts with the
/// same state.
fn own_point(id: &str, t: &Transcript, end: usize, last_seq: u64) -> ForkPoint {
    let seq = match t.message_seqs.get(end) {
        Some(next) => next.saturating_sub(1),
        None => last_seq,
    };
    ForkPoint::new(id, seq, end)
}

/// The reference, among the ancestors of `t`, for a cut inside its
/// inherited prefix (`end <= t.inherited`).
fn ancestor(
    store: &dyn LogStore,
    t: &Transcript,
    end: usize,
    depth: usize,
) -> crate::Result<Option<ForkPoint>> {
    let Some(parent) = &t.meta.parent else {
        return Ok(None);
    };
    if end > t.inherited || depth >= 256 {
        return Ok(None);
    }
    let at = transcript::read_at(store, parent)?;
    if end >= at.inherited {
        return Ok(Some(own_point(&parent.session, &at, end, parent.seq)));
    }
    ancestor(store, &at, end, depth + 1)
}

/// How many messages a cut "through record `at_seq`" keeps: the user-facing
/// numbering of a cut is the record `seq` that `sessions show` prints. Every
/// inherited message (a fork's parent prefix) is kept, plus the session's own
/// messages whose record `seq` is at most `at_seq`. A `seq` past the
/// session's last record is refused.
pub fn messages_through_seq(t: &Transcript, at_seq: u64) -> crate::Result<usize> {
    if at_seq > t.last_seq {
        return Err(crate::Error::Invalid(format!(
            "seq {at_seq} is past the end of session {} (its last seq is {})",
            t.meta.id, t.last_seq
        )));
    }
    let inherited = t.inherited.min(t.message_seqs.len());
    let own = t.message_seqs[inherited..]
        .iter()
        .filter(|&&s| s <= at_seq)
        .count();
    Ok(inherited + own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(ids: &[&str]) -> Message {
        Message::new(
            Role::Assistant,
            ids.iter()
                .map(|id| Block::ToolUse {
                    id: id.to_string(),
                    name: "t".into(),
                    input: json!({}),
                })
                .collect(),
        )
    }

    #[test]
    fn cut_checks_every_group_and_order() {
        let m = vec![
            Message::user("u"),
            call(&["a", "b"]),
            Message::tool_result("a", "ra", false),
            Message::tool_result("b", "rb", false),
            Message::assistant("x"),
        ];
        assert_eq!(safe_cut(&m, 5), 5);
        assert_eq!(safe_cut(&m, 3), 1);
        assert_eq!(safe_cut(&m, 4), 4);
        // An earlier group left open blocks every later cut.
        let m2 = vec![Message::user("u"), call(&["a"]), Message::assistant("x")];
        assert_eq!(safe_cut(&m2, 3), 1);
        // A result before its call is an orphan.
        let m3 = vec![
            Message::user("u"),
            Message::tool_result("a", "r", false),
            call(&["a"]),
        ];
        assert_eq!(safe_cut(&m3, 3), 1);
    }

    #[test]
    fn repair_appends_for_the_last_group_and_rewrites_a_middle_one() {
        let m = vec![
            Message::user("u"),
            call(&["a", "b"]),
            Message::tool_result("a", "ra", false),
        ];
        assert!(ended_mid_tool(&m));
        match repair(&m) {
            Repair::Append(msg) => assert_eq!(msg.tool_result_ids().collect::<Vec<_>>(), ["b"]),
            other => panic!("{other:?}"),
        }
        let m2 = vec![Message::user("u"), call(&["a"]), Message::assistant("x")];
        match repair(&m2) {
            Repair::Rewrite(list) => {
                assert_eq!(list.len(), 4);
                assert_eq!(list[2].tool_result_ids().collect::<Vec<_>>(), ["a"]);
                assert!(open_calls(&list).is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(repair(&[Message::user("u")]), Repair::None);
    }
}
