//! The cross-session search's development set: its text format, planting
//! it into a store, and scoring a [`SearchIndex`] on it (recall@1/5/10 and
//! MRR by category and mode, query latency). `memoir eval search` is the
//! front; the set itself lives in `testdata/search-dev/`.
//!
//! `sessions.txt`: a session starts with `== ID | TITLE | PROJECT`; each
//! following line is one message, `u: TEXT` (user), `a: TEXT` (assistant),
//! or `$ TOOL: INPUT :: OUTPUT` (an assistant call of `TOOL` with
//! `{"command": INPUT}`, then its result `OUTPUT`). `\n` in a text is a
//! line break; lines starting with `#` and blank lines are skipped.
//! Messages are numbered from 1 within their session (a tool line is one
//! number, its call and its result both count as it).
//!
//! `queries.txt`: `CATEGORY | QUERY | ID:N ID:N ...`, the messages that
//! answer the query. Categories: concept, error, decision, tool, file.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde::Serialize;

use super::{Result, SearchError, SearchIndex, SearchMode, SearchQuery};
use crate::message::{Block, Message, Role};
use crate::record::{Record, SessionMeta};
use crate::store::LogStore;

/// One line of a development session.
#[derive(Debug, Clone, PartialEq)]
pub enum DevLine {
    /// A plain message.
    Text(Role, String),
    /// A tool call (`input` as its command) and its result.
    Tool {
        /// Tool name.
        name: String,
        /// The command.
        input: String,
        /// The result text.
        output: String,
    },
}

/// One development session.
#[derive(Debug, Clone, PartialEq)]
pub struct DevSession {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its project (workspace).
    pub project: String,
    /// Its messages, numbered from 1.
    pub lines: Vec<DevLine>,
}

/// One development query.
#[derive(Debug, Clone, PartialEq)]
pub struct DevQuery {
    /// concept, error, decision, tool or file.
    pub category: String,
    /// The query as a developer types it.
    pub text: String,
    /// `(session, line number)` of each message that answers it.
    pub relevant: Vec<(String, usize)>,
}

/// A development set: sessions and queries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevSet {
    /// The sessions.
    pub sessions: Vec<DevSession>,
    /// The queries.
    pub queries: Vec<DevQuery>,
}

fn invalid(file: &str, n: usize, what: &str) -> SearchError {
    SearchError::Invalid(format!("{file} line {n}: {what}"))
}

/// Parse `sessions.txt` and `queries.txt` texts.
pub fn parse_dev_set(sessions: &str, queries: &str) -> Result<DevSet> {
    let mut set = DevSet::default();
    for (n, line) in sessions.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(head) = line.strip_prefix("==") {
            let mut parts = head.split('|').map(str::trim);
            let id = parts.next().unwrap_or_default().to_string();
            if id.is_empty() {
                return Err(invalid("sessions.txt", n, "a session without an id"));
            }
            set.sessions.push(DevSession {
                id,
                title: parts.next().unwrap_or_default().to_string(),
                project: parts.next().unwrap_or_default().to_string(),
                lines: Vec::new(),
            });
            continue;
        }
        let Some(session) = set.sessions.last_mut() else {
            return Err(invalid("sessions.txt", n, "a message before any session"));
        };
        let unescape = |s: &str| s.trim().replace("\\n", "\n");
        let parsed = if let Some(t) = line.strip_prefix("u:") {
            DevLine::Text(Role::User, unescape(t))
        } else if let Some(t) = line.strip_prefix("a:") {
            DevLine::Text(Role::Assistant, unescape(t))
        } else if let Some(t) = line.strip_prefix('$') {
            let (name, rest) = t
                .split_once(':')
                .ok_or_else(|| invalid("sessions.txt", n, "a tool line without `NAME:`"))?;
            let (input, output) = rest
                .split_once(" :: ")
                .ok_or_else(|| invalid("sessions.txt", n, "a tool line without ` :: `"))?;
            DevLine::Tool {
                name: name.trim().to_string(),
                input: unescape(input),
                output: unescape(output),
            }
        } else {
            return Err(invalid("sessions.txt", n, "expected `u:`, `a:` or `$`"));
        };
        session.lines.push(parsed);
    }
    let known: HashMap<&str, usize> = set
        .sessions
        .iter()
        .map(|s| (s.id.as_str(), s.lines.len()))
        .collect();
    for (n, line) in queries.lines().enumerate().map(|(i, l)| (i + 1, l.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let [category, text, ids] = parts[..] else {
            return Err(invalid(
                "queries.txt",
                n,
                "expected `CATEGORY | QUERY | IDS`",
            ));
        };
        let mut relevant = Vec::new();
        for id in ids.split_whitespace() {
            let (s, k) = id
                .rsplit_once(':')
                .and_then(|(s, k)| Some((s, k.parse::<usize>().ok()?)))
                .ok_or_else(|| invalid("queries.txt", n, &format!("bad id {id:?}")))?;
            match known.get(s) {
                Some(&len) if (1..=len).contains(&k) => relevant.push((s.to_string(), k)),
                _ => return Err(invalid("queries.txt", n, &format!("unknown message {id}"))),
            }
        }
        if relevant.is_empty() {
            return Err(invalid("queries.txt", n, "no relevant message"));
        }
        set.queries.push(DevQuery {
            category: category.to_string(),
            text: text.to_string(),
            relevant,
        });
    }
    Ok(set)
}

/// Read a development set from a directory holding `sessions.txt` and
/// `queries.txt`.
pub fn load_dev_set(dir: &Path) -> Result<DevSet> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| {
            SearchError::Invalid(format!("cannot read {}: {e}", dir.join(name).display()))
        })
    };
    parse_dev_set(&read("sessions.txt")?, &read("queries.txt")?)
}

/// Where the set's messages landed: `(session, seq)` → line number.
pub type Planted = HashMap<(String, u64), usize>;

/// Write the set's sessions into `store` (sessions a day apart, messages a
/// minute apart, from 2026-01-01), returning where each line landed.
pub fn plant(set: &DevSet, store: &dyn LogStore) -> Result<Planted> {
    let base: DateTime<Utc> = Utc
        .with_ymd_and_hms(2026, 1, 1, 9, 0, 0)
        .single()
        .unwrap_or_default();
    let mut planted = Planted::new();
    for (si, s) in set.sessions.iter().enumerate() {
        let mut meta = SessionMeta::new(&s.id);
        let start = base + Duration::days(si as i64);
        meta.created_at = start;
        meta.workspace = s.project.clone().into();
        meta.title = (!s.title.is_empty()).then(|| s.title.clone());
        store.create(&meta)?;
        let mut minute = 0i64;
        let mut stamp = |m: Message| {
            minute += 1;
            Message {
                timestamp: Some(start + Duration::minutes(minute)),
                ..m
            }
        };
        for (li, line) in s.lines.iter().enumerate() {
            let records: Vec<Record> = match line {
                DevLine::Text(role, text) => {
                    vec![Record::Message(stamp(Message::text(*role, text.clone())))]
                }
                DevLine::Tool {
                    name,
                    input,
                    output,
                } => {
                    let call = format!("call-{}", li + 1);
                    vec![
                        Record::Message(stamp(Message::new(
                            Role::Assistant,
                            vec![Block::ToolUse {
                                id: call.clone(),
                                name: name.clone(),
                                input: serde_json::json!({ "command": input }),
                            }],
                        ))),
                        Record::Message(stamp(Message::tool_result(call, output.clone(), false))),
                    ]
                }
            };
            let at = store.append(&s.id, &records, None)?;
            for seq in at.first_seq..=at.last_seq {
                planted.insert((s.id.clone(), seq), li + 1);
            }
        }
    }
    Ok(planted)
}

/// Recall and MRR of one mode over one category (or `all`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EvalRow {
    /// The mode.
    pub mode: SearchMode,
    /// The category, `all` for every query.
    pub category: String,
    /// Queries.
    pub queries: usize,
    /// Share of queries whose first hit answers them.
    pub r1: f64,
    /// ... one of the first five.
    pub r5: f64,
    /// ... one of the first ten.
    pub r10: f64,
    /// Mean reciprocal rank of the first answering hit (0 past ten).
    pub mrr: f64,
}

/// A query whose first hit does not answer it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EvalMiss {
    /// The mode.
    pub mode: SearchMode,
    /// The query.
    pub query: String,
    /// Rank of the first answering hit (1-based), `None` past ten.
    pub rank: Option<usize>,
    /// `session:line` of the first hit, when there is one.
    pub first: Option<String>,
}

/// What [`evaluate`] measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SearchEval {
    /// Per mode: every category, then `all`.
    pub rows: Vec<EvalRow>,
    /// Per mode: query latency, median and 99th percentile, milliseconds.
    pub latency: Vec<(SearchMode, f64, f64)>,
    /// The queries not answered first.
    pub misses: Vec<EvalMiss>,
}

/// Run every query of `set` in each of `modes` (ten hits) against `ix`,
/// where `planted` says which message is which.
pub fn evaluate(
    ix: &SearchIndex,
    set: &DevSet,
    planted: &Planted,
    modes: &[SearchMode],
) -> Result<SearchEval> {
    let mut out = SearchEval {
        rows: Vec::new(),
        latency: Vec::new(),
        misses: Vec::new(),
    };
    for &mode in modes {
        // category → (queries, r1, r5, r10, mrr sum)
        let mut by: BTreeMap<String, [f64; 5]> = BTreeMap::new();
        let mut times = Vec::with_capacity(set.queries.len());
        for q in &set.queries {
            let query = SearchQuery {
                mode,
                ..SearchQuery::new(q.text.clone())
            };
            let t = Instant::now();
            let hits = ix.search(&query)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            let line_of = |h: &super::SearchHit| {
                planted
                    .get(&(h.session.clone(), h.seq))
                    .map(|&l| (h.session.clone(), l))
            };
            let rank = hits
                .iter()
                .position(|h| line_of(h).is_some_and(|id| q.relevant.contains(&id)))
                .map(|p| p + 1);
            for cat in [q.category.as_str(), "all"] {
                let acc = by.entry(cat.to_string()).or_default();
                acc[0] += 1.0;
                let r = rank.unwrap_or(usize::MAX);
                acc[1] += f64::from(u8::from(r <= 1));
                acc[2] += f64::from(u8::from(r <= 5));
                acc[3] += f64::from(u8::from(r <= 10));
                acc[4] += rank.map_or(0.0, |r| 1.0 / r as f64);
            }
            if rank != Some(1) {
                out.misses.push(EvalMiss {
                    mode,
                    query: q.text.clone(),
                    rank,
                    first: hits.first().map(|h| match line_of(h) {
                        Some((s, l)) => format!("{s}:{l}"),
                        None => format!("{}@{}", h.session, h.seq),
                    }),
                });
            }
        }
        let all = by.remove("all").unwrap_or_default();
        for (category, acc) in by.into_iter().chain([("all".to_string(), all)]) {
            let n = acc[0].max(1.0);
            out.rows.push(EvalRow {
                mode,
                category,
                queries: acc[0] as usize,
                r1: acc[1] / n,
                r5: acc[2] / n,
                r10: acc[3] / n,
                mrr: acc[4] / n,
            });
        }
        times.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            times
                .get(((times.len() as f64 - 1.0) * p).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        out.latency.push((mode, pct(0.5), pct(0.99)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_set_format_parses_and_rejects_unknown_ids() {
        let sessions = "== s1 | Title | /p\nu: hello\\nworld\n$ Bash: ls :: a b\na: done\n";
        let set = parse_dev_set(sessions, "tool | list files | s1:2\n").unwrap();
        assert_eq!(set.sessions[0].lines.len(), 3);
        assert_eq!(
            set.sessions[0].lines[0],
            DevLine::Text(Role::User, "hello\nworld".into())
        );
        assert_eq!(set.queries[0].relevant, vec![("s1".to_string(), 2)]);
        assert!(parse_dev_set(sessions, "tool | x | s1:4\n").is_err());
        assert!(parse_dev_set(sessions, "tool | x | s2:1\n").is_err());
    }
}
