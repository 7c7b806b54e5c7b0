//! Codex rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`,
//! `archived_sessions/`) into planned memoir sessions.
//!
//! Both line shapes are read: the `{timestamp,type,payload}` envelope and the
//! older bare items. Of the duplicated streams, `response_item` (what the
//! model saw) and `event_msg` (what the UI showed) repeat each user and
//! agent text: per text, the copy written first becomes the message and the
//! later copy is kept verbatim as a source record (so nothing only one of
//! them has is lost, and the choice never changes as the rollout grows);
//! rollouts with only one stream are read from it. Items of one response (reasoning, text, tool calls) form one
//! assistant message; tool outputs form tool messages; encrypted reasoning is
//! kept in the trace, never as text. Usage per response comes from
//! `token_usage_record` when the rollout has them, else from the deltas of
//! `token_count`'s cumulative counter (re-emits add nothing), normalised so
//! `input_tokens` excludes cached tokens. `thread_rolled_back` moves the
//! rolled-back turns into a fork of the main line at the cut. A fork
//! (`forked_from_id`, `history_base`, or a rollout that replays another's
//! first lines) references its parent instead of copying the replayed
//! prefix; spawned child threads name their parent. Everything else is kept
//! verbatim as source records.

use std::path::Path;

use serde_json::{json, Map, Value};

#[cfg(feature = "import-opencode")]
use super::codex_history;
use super::cursor::TailState;
use super::lines::{self, Line, HISTORY_ITEM};
use super::segments;
use super::{
    make_id, source_record, str_of, time_of, Agent, ForkAt, ForkFrom, ParentRef, ParseContext,
    Parsed, Planned,
};
use crate::message::{Block, Message, Role, Usage, SOURCE_KEY};
use crate::record::{Record, RunConfig, SessionMeta, SourceRef};

const AGENT: Agent = Agent::Codex;

/// Texts that mark a `user` message as injected context, not a human turn.
const INJECTED: &[&str] = &[
    "<environment_context",
    "<user_instructions",
    "<permissions",
    "<developer_instructions",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<turn_aborted",
];

/// Response items that belong to the assistant's side of a response.
const ASSISTANT_ITEMS: &[&str] = &[
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
    "tool_search_call",
    "image_generation_call",
];

/// One line, normalised: `(type, payload)`.
fn item(line: &Line, index: usize) -> (&str, &Map<String, Value>) {
    let v = &line.value;
    if let (Some(kind), Some(Value::Object(p))) = (str_of(v, "type"), v.get("payload")) {
        return (kind, p);
    }
    // Older rollouts: a bare meta object first, then bare response items.
    if index == 0 && v.contains_key("id") && !v.contains_key("type") {
        return ("session_meta", v);
    }
    match str_of(v, "type") {
        Some(t) if t == "message" || ASSISTANT_ITEMS.contains(&t) || t.ends_with("_output") => {
            ("response_item", v)
        }
        _ => ("", v),
    }
}

fn text_of_content(content: Option<&Value>) -> String {
    let mut out = String::new();
    if let Some(Value::Array(parts)) = content {
        for p in parts {
            // Parts are `{type, text}` objects (ThreadItems: plain strings).
            if let Some(t) = p.get("text").and_then(Value::as_str).or(p.as_str()) {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(t);
            }
        }
    } else if let Some(Value::String(s)) = content {
        out.push_str(s);
    }
    out
}

/// Content parts of a `message` item as blocks.
fn blocks_of(content: Option<&Value>) -> Vec<Block> {
    let mut out = Vec::new();
    match content {
        Some(Value::Array(parts)) => {
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => out.push(Block::Text {
                        text: p
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    }),
                    Some("input_image") => {
                        let url = p.get("image_url").and_then(Value::as_str).unwrap_or("");
                        match data_url(url) {
                            Some((media_type, data)) => out.push(Block::Image { media_type, data }),
                            None => out.push(Block::Unknown(p.clone())),
                        }
                    }
                    _ => out.push(Block::Unknown(p.clone())),
                }
            }
        }
        Some(Value::String(s)) => out.push(Block::Text { text: s.clone() }),
        _ => {}
    }
    out
}

/// `data:<type>;base64,<data>` → `(type, data)`.
fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let media = head.strip_suffix(";base64")?;
    Some((media.to_string(), data.to_string()))
}

/// Codex/OpenAI token counts, normalised (input excludes cached tokens).
fn usage_of(u: &Map<String, Value>) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let nested = |outer: &str, k: &str| {
        u.get(outer)
            .and_then(|o| o.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let cached = n("cached_input_tokens").max(nested("input_tokens_details", "cached_tokens"));
    let reasoning =
        n("reasoning_output_tokens").max(nested("output_tokens_details", "reasoning_tokens"));
    Usage {
        input_tokens: n("input_tokens").saturating_sub(cached),
        output_tokens: n("output_tokens"),
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: 0,
        reasoning_tokens: reasoning,
        ..Usage::default()
    }
}

/// Field-wise `a - b` (saturating).
fn minus(a: &Usage, b: &Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        cache_read_input_tokens: a
            .cache_read_input_tokens
            .saturating_sub(b.cache_read_input_tokens),
        cache_creation_input_tokens: 0,
        reasoning_tokens: a.reasoning_tokens.saturating_sub(b.reasoning_tokens),
        source: a.source,
        ..Usage::default()
    }
}

/// The thread id in a rollout file name (`rollout-<time>-<uuid>.jsonl`).
fn id_from_name(path: &Path) -> String {
    let stem = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem.split('.').next().unwrap_or("").to_string();
    if stem.len() >= 36 {
        let tail = &stem[stem.len() - 36..];
        if uuid::Uuid::parse_str(tail).is_ok() {
            return tail.to_string();
        }
    }
    stem
}

/// The thread id of a rollout: its first `session_meta`, else its name.
fn thread_id(lines: &[Line], path: &Path) -> String {
    lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            let (kind, p) = item(l, i);
            (kind == "session_meta")
                .then(|| str_of(p, "id").map(str::to_string))
                .flatten()
        })
        .unwrap_or_else(|| id_from_name(path))
}

/// The record builder's state.
struct Builder {
    /// Texts emitted from one stream and not yet seen in the other:
    /// `(role, text, from_events)`.
    unmatched: Vec<(Role, String, bool)>,
    records: Vec<Record>,
    assistant: Option<Message>,
    tools: Option<Message>,
    /// Record index of each human turn's first record.
    turns: Vec<usize>,
    rollbacks: Vec<(u64, Vec<Record>, usize)>,
    last_total: Option<Usage>,
    /// Records before this index belong to an earlier import: usage never
    /// attaches to them (set at an import boundary, see [`ParseContext::cuts`]).
    floor: usize,
    /// The rollout's usage comes from `token_usage_record`s.
    usage_records: bool,
    seen_meta: bool,
    /// The highest `ordinal` fed, with the hash of its line when that line
    /// was fed by an earlier import (else `ordinal_line` is its index).
    ordinal: Option<(u64, String)>,
    /// Index, in this parse's lines, of the last line with `ordinal`.
    ordinal_line: Option<usize>,
    /// Lines of the predecessor segments (carried for a later run).
    segment_lines: u64,
    /// Tolerated oddities: `(line, reason)`.
    notes: Vec<(u64, String)>,
}

impl Builder {
    fn new(usage_records: bool) -> Builder {
        Builder {
            unmatched: Vec::new(),
            records: Vec::new(),
            assistant: None,
            tools: None,
            turns: Vec::new(),
            rollbacks: Vec::new(),
            last_total: None,
            floor: 0,
            usage_records,
            seen_meta: false,
            ordinal: None,
            ordinal_line: None,
            segment_lines: 0,
            notes: Vec::new(),
        }
    }

    /// A builder resuming from the state an earlier import left.
    fn resume(state: &TailState) -> Option<Builder> {
        let TailState::Codex {
            unmatched,
            last_total,
            usage_records,
            seen_meta,
            ordinal,
            segment_lines,
        } = state
        else {
            return None;
        };
        let mut b = Builder::new(*usage_records);
        b.unmatched = unmatched.clone();
        b.last_total = *last_total;
        b.seen_meta = *seen_meta;
        b.ordinal = ordinal.clone();
        b.segment_lines = *segment_lines;
        Some(b)
    }

    /// What a later run needs to resume after everything fed so far
    /// (`lines`: those of this parse).
    fn state(&self, lines: &[Line]) -> TailState {
        let ordinal = self.ordinal.as_ref().map(|(o, h)| {
            let h = match self.ordinal_line.and_then(|k| lines.get(k)) {
                Some(l) => line_hash(l),
                None => h.clone(),
            };
            (*o, h)
        });
        TailState::Codex {
            unmatched: self.unmatched.clone(),
            last_total: self.last_total,
            usage_records: self.usage_records,
            seen_meta: self.seen_meta,
            ordinal,
            segment_lines: self.segment_lines,
        }
    }

    /// Check line `i` of `lines`' top-level `ordinal` against those fed
    /// before: a line that repeats the last ordinal with identical content
    /// is a duplicate write (`false`: skip it); a repeated or decreasing
    /// ordinal on another line (Codex writing `thread_settings_applied`
    /// after `token_count` under one ordinal) is kept and reported. Lines
    /// without one pass. Lines are compared as parsed; only a repeat of the
    /// previous import's last ordinal hashes the line.
    fn admit(&mut self, lines: &[Line], i: usize) -> bool {
        let line = &lines[i];
        let Some(ordinal) = line.value.get("ordinal").and_then(Value::as_u64) else {
            return true;
        };
        match self.ordinal.as_ref().map(|(o, _)| *o) {
            Some(last) if ordinal == last => {
                let same = match self.ordinal_line.and_then(|k| lines.get(k)) {
                    Some(prev) => prev.value == line.value,
                    None => self
                        .ordinal
                        .as_ref()
                        .is_some_and(|(_, h)| *h == line_hash(line)),
                };
                if same {
                    self.notes.push((
                        line.number,
                        format!(
                            "ordinal {ordinal} written twice with the same content: copy skipped"
                        ),
                    ));
                    return false;
                }
                self.notes.push((
                    line.number,
                    format!("ordinal {ordinal} repeats the previous line's: line kept"),
                ));
                self.ordinal_line = Some(i);
                true
            }
            Some(last) if ordinal < last => {
                self.notes.push((
                    line.number,
                    format!("ordinal {ordinal} precedes {last}: line kept"),
                ));
                true
            }
            _ => {
                self.ordinal = Some((ordinal, String::new()));
                self.ordinal_line = Some(i);
                true
            }
        }
    }

    /// An import boundary: what follows never merges into earlier records.
    fn boundary(&mut self) {
        self.flush();
        self.turns.clear();
        self.floor = self.records.len();
    }

    /// One line of the rollout.
    fn feed(&mut self, line: &Line, kind: &str, payload: &Map<String, Value>) {
        let raw = || source_record(AGENT, line.number, line.value.clone());
        match kind {
            "session_meta" => {
                self.seen_meta = true;
                self.raw(raw());
            }
            "turn_context" => {
                self.flush();
                self.records
                    .push(Record::Config(Box::new(run_config(line, payload))));
            }
            "response_item" => response_item(self, line, payload, &raw),
            "event_msg" => event(self, line, payload, self.usage_records, &raw),
            "token_usage_record" => {
                self.raw(raw());
                if let Some(u) = payload.get("usage").and_then(Value::as_object) {
                    self.usage(line, usage_of(u), str_of(payload, "response_id"));
                }
            }
            "compacted" => {
                self.flush();
                self.raw(raw());
            }
            HISTORY_ITEM => history_item(self, line, payload, &raw),
            _ => self.raw(raw()),
        }
    }

    /// Whether `text` (of `role`) was already emitted from the other stream:
    /// the first copy written is the message, the later one a source record.
    fn duplicate(&mut self, role: Role, text: &str, from_events: bool) -> bool {
        let text = text.trim();
        if let Some(k) = self
            .unmatched
            .iter()
            .position(|(r, t, e)| *r == role && t == text && *e != from_events)
        {
            self.unmatched.remove(k);
            return true;
        }
        self.unmatched.push((role, text.to_string(), from_events));
        if self.unmatched.len() > 32 {
            self.unmatched.remove(0);
        }
        false
    }

    fn trace(line: &Line, kind: &str, payload: &Map<String, Value>) -> Map<String, Value> {
        let mut t = Map::new();
        t.insert("line".into(), json!(line.number));
        if let Some(o) = line.value.get("ordinal") {
            t.insert("ordinal".into(), o.clone());
        }
        let mut it: Map<String, Value> = payload
            .iter()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "content" | "text" | "arguments" | "input" | "output" | "summary" | "message"
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        it.insert("item".into(), json!(kind));
        t.insert("items".into(), Value::Array(vec![Value::Object(it)]));
        t
    }

    fn new_message(role: Role, line: &Line, kind: &str, payload: &Map<String, Value>) -> Message {
        let mut m = Message::new(role, Vec::new());
        m.timestamp = time_of(&line.value, "timestamp");
        m.extra.insert(
            SOURCE_KEY.into(),
            Value::Object(Self::trace(line, kind, payload)),
        );
        m
    }

    /// Add an item's trace to a message built from several items.
    fn add_trace(m: &mut Message, line: &Line, kind: &str, payload: &Map<String, Value>) {
        let t = Self::trace(line, kind, payload);
        if let Some(Value::Object(trace)) = m.extra.get_mut(SOURCE_KEY) {
            if let (Some(Value::Array(items)), Some(Value::Array(more))) =
                (trace.get_mut("items"), t.get("items"))
            {
                items.extend(more.iter().cloned());
            }
        }
    }

    /// A source record, after whatever response or tool outputs it follows.
    fn raw(&mut self, record: Record) {
        self.flush();
        self.records.push(record);
    }

    fn flush(&mut self) {
        if let Some(m) = self.assistant.take() {
            self.records.push(Record::Message(m));
        }
        if let Some(m) = self.tools.take() {
            self.records.push(Record::Message(m));
        }
    }

    fn assistant_part(
        &mut self,
        line: &Line,
        kind: &str,
        payload: &Map<String, Value>,
        block: Option<Block>,
    ) {
        if let Some(t) = self.tools.take() {
            self.records.push(Record::Message(t));
        }
        match &mut self.assistant {
            Some(m) => Self::add_trace(m, line, kind, payload),
            None => self.assistant = Some(Self::new_message(Role::Assistant, line, kind, payload)),
        }
        if let (Some(m), Some(b)) = (&mut self.assistant, block) {
            m.content.push(b);
        }
    }

    fn tool_output(&mut self, line: &Line, kind: &str, payload: &Map<String, Value>) {
        if let Some(a) = self.assistant.take() {
            self.records.push(Record::Message(a));
        }
        let call_id = str_of(payload, "call_id").unwrap_or("").to_string();
        let (content, is_error) = match payload.get("output") {
            Some(Value::String(s)) => (s.clone(), false),
            Some(Value::Object(o)) => (
                o.get("content")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
                o.get("success") == Some(&Value::Bool(false)),
            ),
            other => (text_of_content(other), false),
        };
        let block = Block::ToolResult {
            tool_use_id: call_id,
            content,
            is_error,
        };
        match &mut self.tools {
            Some(m) => Self::add_trace(m, line, kind, payload),
            None => self.tools = Some(Self::new_message(Role::Tool, line, kind, payload)),
        }
        if let Some(m) = &mut self.tools {
            m.content.push(block);
            // Outputs that are not plain text (content items) are kept whole.
            if matches!(payload.get("output"), Some(Value::Array(_))) {
                if let Some(Value::Object(t)) = m.extra.get_mut(SOURCE_KEY) {
                    if let Some(outputs) = t
                        .entry("outputs")
                        .or_insert_with(|| Value::Array(Vec::new()))
                        .as_array_mut()
                    {
                        outputs.push(payload.get("output").cloned().unwrap_or(Value::Null));
                    }
                }
            }
        }
    }

    fn user(
        &mut self,
        line: &Line,
        kind: &str,
        payload: &Map<String, Value>,
        blocks: Vec<Block>,
        role: Option<&str>,
    ) {
        self.flush();
        let text: String = blocks
            .iter()
            .filter_map(|b| match b {
                Block::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let trimmed = text.trim_start();
        let injected = INJECTED.iter().any(|p| trimmed.starts_with(p));
        let role = match role {
            Some("developer" | "system") => Role::System,
            _ if injected => Role::System,
            _ => Role::User,
        };
        let mut m = Self::new_message(role, line, kind, payload);
        if injected {
            if let Some(Value::Object(t)) = m.extra.get_mut(SOURCE_KEY) {
                t.insert("injected".into(), json!(true));
            }
        }
        m.content = blocks;
        if role == Role::User {
            self.turns.push(self.records.len());
        }
        self.records.push(Record::Message(m));
    }

    /// Attach one response's usage: to the response being built, else to the
    /// last assistant message of the turn, else to a usage-only message.
    fn usage(&mut self, line: &Line, usage: Usage, response_id: Option<&str>) {
        if usage.is_zero() {
            return;
        }
        let set = |m: &mut Message| {
            match &mut m.usage {
                Some(u) => u.add(&usage),
                None => m.usage = Some(usage),
            }
            if let (Some(id), Some(Value::Object(t))) = (response_id, m.extra.get_mut(SOURCE_KEY)) {
                t.insert("response_id".into(), json!(id));
            }
        };
        if let Some(m) = &mut self.assistant {
            set(m);
            self.flush();
            return;
        }
        let turn_start = self
            .turns
            .last()
            .copied()
            .unwrap_or(self.floor)
            .max(self.floor);
        // The turn's last assistant message without usage, else (a
        // response whose items were all shown already, or had none) its
        // last assistant message, which then counts both responses.
        let turn = &mut self.records[turn_start..];
        let unused = turn.iter().rposition(
            |r| matches!(r, Record::Message(m) if m.role == Role::Assistant && m.usage.is_none()),
        );
        let any = turn
            .iter()
            .rposition(|r| matches!(r, Record::Message(m) if m.role == Role::Assistant));
        let last = unused.or(any).and_then(|k| match &mut turn[k] {
            Record::Message(m) => Some(m),
            _ => None,
        });
        match last {
            Some(m) => set(m),
            None => {
                let mut payload = Map::new();
                payload.insert("usage_only".into(), json!(true));
                let mut m = Self::new_message(Role::Assistant, line, "usage", &payload);
                set(&mut m);
                self.records.push(Record::Message(m));
            }
        }
    }

    fn token_count(&mut self, line: &Line, payload: &Map<String, Value>) {
        let info = payload.get("info").and_then(Value::as_object);
        let total = info
            .and_then(|i| i.get("total_token_usage"))
            .and_then(Value::as_object)
            .map(usage_of);
        let last = info
            .and_then(|i| i.get("last_token_usage"))
            .and_then(Value::as_object)
            .map(usage_of);
        let delta = match (total, self.last_total) {
            (Some(t), Some(prev)) if t.total() < prev.total() => last.unwrap_or(t),
            (Some(t), Some(prev)) => minus(&t, &prev),
            (Some(t), None) => t,
            // Oldest rollouts: flat per-response counts.
            (None, _) if payload.contains_key("input_tokens") => usage_of(payload),
            (None, _) => last.unwrap_or_default(),
        };
        if let Some(t) = total {
            self.last_total = Some(t);
        }
        self.usage(line, delta, None);
    }

    /// `thread_rolled_back{num_turns}`: the last turns leave the main line.
    fn roll_back(&mut self, line: &Line, turns: usize) {
        self.flush();
        if turns == 0 || self.turns.is_empty() {
            return;
        }
        let keep = self.turns.len().saturating_sub(turns);
        let cut = self.turns[keep];
        self.turns.truncate(keep);
        let removed = self.records.split_off(cut);
        let messages = self
            .records
            .iter()
            .filter(|r| matches!(r, Record::Message(_)))
            .count();
        self.rollbacks.push((line.number, removed, messages));
    }
}

/// Parse one Codex rollout. `ctx.codex_parent` names a rollout this one
/// replays the first lines of (a fork written without a reference).
pub fn parse(path: &Path, bytes: &[u8], ctx: &ParseContext) -> Parsed {
    parse_lines(path, lines::parse(path, bytes), ctx)
}

/// Parse one Codex rollout, already split into lines.
pub(crate) fn parse_lines(path: &Path, file: lines::JsonlFile, ctx: &ParseContext) -> Parsed {
    let own_tid = thread_id(&file.lines, path);
    // Predecessor segments of the same thread come first, numbered before
    // the rollout's own lines (see `segments`).
    let mut chain = segments::chain(path, &file.lines, &own_tid);
    let offset = chain.line_count;
    let mut parsed = Parsed {
        skipped: std::mem::take(&mut chain.skipped),
        notes: std::mem::take(&mut chain.notes),
        torn: file.torn,
        consumed: file.consumed,
        complete_lines: file.complete_lines + offset,
        ..Parsed::default()
    };
    parsed.skipped.extend(file.skipped);
    let segment_files = chain.files.clone();
    let mut lines = std::mem::take(&mut chain.lines);
    lines.extend(file.lines.into_iter().map(|mut l| {
        l.number += offset;
        l
    }));
    #[cfg(feature = "import-opencode")]
    let lines = {
        let (lines, notes) = codex_history::fill(path, &own_tid, lines);
        parsed.notes.extend(notes);
        lines
    };
    let items: Vec<(&str, &Map<String, Value>)> =
        lines.iter().enumerate().map(|(i, l)| item(l, i)).collect();
    let has_usage_records = items.iter().any(|(k, _)| *k == "token_usage_record");
    let tid = thread_id(&lines, path);
    let id = make_id(AGENT, &[&tid]);
    let meta_payload = items
        .iter()
        .find(|(k, _)| *k == "session_meta")
        .map(|(_, p)| (*p).clone())
        .unwrap_or_default();

    // A fork by reference: `history_base` of another thread (paginated
    // history: the rollout holds only its own records), or a
    // `rollout_reference` to another thread at the head.
    let history_base = meta_payload
        .get("history_base")
        .and_then(Value::as_object)
        .filter(|_| str_of(&meta_payload, "history_mode") != Some("legacy"))
        .filter(|hb| str_of(hb, "thread_id").is_some_and(|t| t != tid));
    let head_reference = lines
        .iter()
        .zip(&items)
        .take(8)
        .find_map(|(_, (k, p))| segments::Reference::of(k, p).filter(|r| !r.continues(&tid)));
    let by_reference: Option<ForkFrom> = if let Some(hb) = history_base {
        let parent = str_of(hb, "thread_id").unwrap_or_default();
        hb.get("end_ordinal_exclusive")
            .and_then(Value::as_u64)
            .map(|end| ForkFrom {
                parent: ParentRef::Session(make_id(AGENT, &[parent])),
                at: ForkAt::Ordinal(end),
            })
    } else {
        head_reference.and_then(|r| {
            let parent = r.thread_id.clone()?;
            Some(ForkFrom {
                parent: ParentRef::Session(make_id(AGENT, &[&parent])),
                at: ForkAt::BeforeUserMessage(r.nth_user_message.unwrap_or(u64::MAX)),
            })
        })
    };

    // The replayed prefix of a fork: lines up to `copied_through`.
    let mut fork: Option<(String, u64)> = None;
    if by_reference.is_some() {
        // Nothing replayed: the parent is referenced, not copied.
    } else if let Some(parent_path) = &ctx.codex_parent {
        if let Ok(parent_bytes) = lines::read_all(parent_path) {
            let parent = lines::parse(parent_path, &parent_bytes).lines;
            let same = lines
                .iter()
                .zip(&parent)
                .take_while(|(a, b)| a.value == b.value)
                .count();
            if same > 0 && same < lines.len() {
                let pid = thread_id(&parent, parent_path);
                fork = Some((make_id(AGENT, &[&pid]), lines[same - 1].number));
            }
        }
    } else if let Some(parent) = str_of(&meta_payload, "forked_from_id") {
        // Copied parent items carry their original (earlier) timestamps.
        let start = time_of(&meta_payload, "timestamp")
            .or_else(|| lines.first().and_then(|l| time_of(&l.value, "timestamp")));
        let mut copied = 0u64;
        for (i, l) in lines.iter().enumerate().skip(1) {
            let replayed = items[i].0 == "session_meta"
                || matches!((time_of(&l.value, "timestamp"), start), (Some(t), Some(s)) if t < s);
            if !replayed {
                break;
            }
            copied = l.number;
        }
        fork = Some((make_id(AGENT, &[parent]), copied));
    }
    let copied_through = fork.as_ref().map_or(0, |f| f.1);

    let mut b = Builder::new(has_usage_records);
    b.segment_lines = offset;
    let mut inherited_records = 0usize;
    let mut inherited_messages = 0usize;
    let mut split_done = copied_through == 0;
    for (i, line) in lines.iter().enumerate() {
        if !split_done && line.number > copied_through {
            split_done = true;
            b.flush();
            inherited_records = b.records.len();
            inherited_messages = b
                .records
                .iter()
                .filter(|r| matches!(r, Record::Message(_)))
                .count();
            // What comes next is the fork's own: never folded into the parent's.
            b.turns.clear();
            b.floor = b.records.len();
        }
        if ctx.cuts.contains(&line.number) {
            b.boundary();
        }
        if !b.admit(&lines, i) {
            continue;
        }
        let (kind, payload) = items[i];
        b.feed(line, kind, payload);
    }
    b.flush();
    parsed.notes.extend(b.notes.drain(..).map(|(line, reason)| {
        let (file, line) = chain.locate(path, line);
        super::Skipped { file, line, reason }
    }));
    if split_done && !lines.is_empty() {
        parsed.tail = Some(b.state(&lines));
    }
    let mut records = b.records;
    let own = if !split_done {
        // Everything was replayed: nothing of its own (yet).
        Vec::new()
    } else {
        records.split_off(inherited_records)
    };
    let mut meta = header(path, &lines, &meta_payload, &id, &tid, &own);
    if !segment_files.is_empty() {
        if let Some(src) = meta.source.as_mut() {
            src.extra.insert("segments".into(), json!(segment_files));
        }
    }
    let fork_from = fork
        .map(|(parent, _)| ForkFrom {
            parent: ParentRef::Session(parent),
            at: ForkAt::Messages(inherited_messages),
        })
        .or(by_reference);
    if meta.title.is_none() {
        meta.title = fork_from.as_ref().map(|_| format!("Fork of {tid}"));
    }
    parsed.sessions.push(Planned {
        key: "main".into(),
        meta: meta.clone(),
        fork: fork_from,
        records: own,
    });
    for (line, removed, messages) in b.rollbacks {
        let mut m = meta.clone();
        m.id = make_id(AGENT, &[&tid, "rollback", &line.to_string()]);
        m.title = super::first_user_title(&removed).map(|t| format!("Rolled back: {t}"));
        if let Some(src) = m.source.as_mut() {
            src.extra.insert("kind".into(), json!("rolled_back"));
            src.extra.insert("rolled_back_at_line".into(), json!(line));
        }
        parsed.sessions.push(Planned {
            key: format!("rollback:{line}"),
            meta: m,
            fork: Some(ForkFrom {
                parent: ParentRef::Key("main".into()),
                at: ForkAt::Messages(inherited_messages + messages),
            }),
            records: removed,
        });
    }
    parsed
}

/// Parse only what was appended to a rollout after its first
/// `lines_before` lines, from the state the previous import left. `None`
/// when the new lines need the whole rollout (a roll-back, the first
/// `token_usage_record` of a rollout counted from `token_count`s).
pub fn parse_tail(
    path: &Path,
    bytes: &[u8],
    lines_before: u64,
    state: &TailState,
    _ctx: &ParseContext,
) -> Option<Parsed> {
    let mut b = Builder::resume(state)?;
    let file = lines::parse_from(path, bytes, lines_before);
    let lines = file.lines;
    // Index 1+: a bare first line is never taken for a meta object here.
    let items: Vec<(&str, &Map<String, Value>)> = lines.iter().map(|l| item(l, 1)).collect();
    let needs_all = items.iter().any(|(k, p)| {
        (*k == "token_usage_record" && !b.usage_records)
            || (*k == "event_msg" && str_of(p, "type") == Some("thread_rolled_back"))
            || *k == "rollout_reference"
            || *k == "session_meta"
    });
    if needs_all {
        return None;
    }
    for (i, (line, (kind, payload))) in lines.iter().zip(&items).enumerate() {
        if b.admit(&lines, i) {
            b.feed(line, kind, payload);
        }
    }
    b.flush();
    // Reports name lines of this file, not of the segment chain.
    let offset = b.segment_lines;
    let in_file = |mut s: super::Skipped| {
        s.line = s.line.saturating_sub(offset);
        s
    };
    let mut parsed = Parsed {
        skipped: file.skipped.into_iter().map(in_file).collect(),
        notes: b
            .notes
            .drain(..)
            .map(|(line, reason)| super::Skipped {
                file: path.to_path_buf(),
                line: line.saturating_sub(offset),
                reason,
            })
            .collect(),
        torn: file.torn.map(in_file),
        consumed: file.consumed,
        complete_lines: file.complete_lines,
        resumed: true,
        cuts: lines.first().map(|l| vec![l.number]).unwrap_or_default(),
        tail: Some(b.state(&lines)),
        ..Parsed::default()
    };
    parsed.sessions.push(Planned {
        key: "main".into(),
        meta: SessionMeta::new(""),
        fork: None,
        records: b.records,
    });
    Some(parsed)
}

fn response_item(b: &mut Builder, line: &Line, p: &Map<String, Value>, raw: &dyn Fn() -> Record) {
    let t = str_of(p, "type").unwrap_or("");
    match t {
        "message" => match str_of(p, "role") {
            Some(role @ ("assistant" | "user"))
                if b.duplicate(
                    if role == "user" {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    &text_of_content(p.get("content")),
                    false,
                ) =>
            {
                b.raw(raw());
            }
            Some("assistant") => {
                let blocks = blocks_of(p.get("content"));
                b.assistant_part(line, t, p, None);
                if let Some(m) = &mut b.assistant {
                    m.content.extend(blocks);
                }
            }
            role => {
                let blocks = blocks_of(p.get("content"));
                b.user(line, t, p, blocks, role);
            }
        },
        "reasoning" => {
            // Each summary part is also an `agent_reasoning` event: a part
            // already shown from its event is not shown again (and a later
            // event repeating a part shown here is a source record).
            let parts = summary_parts(p);
            let fresh: Vec<String> = parts
                .iter()
                .filter(|part| !b.duplicate(Role::System, part, false))
                .cloned()
                .collect();
            let content = text_of_content(p.get("content"));
            if !parts.is_empty() && fresh.is_empty() && content.is_empty() {
                // Shown whole from its events: kept whole (with its
                // encrypted content) as a source record.
                b.raw(raw());
            } else {
                b.assistant_part(line, t, p, thinking_of(fresh.join("\n"), &content));
            }
        }
        "function_call" => {
            let args = str_of(p, "arguments").unwrap_or("");
            let input = serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.into()));
            let block = Block::ToolUse {
                id: str_of(p, "call_id").unwrap_or("").into(),
                name: str_of(p, "name").unwrap_or("").into(),
                input,
            };
            b.assistant_part(line, t, p, Some(block));
        }
        "custom_tool_call" => {
            let block = Block::ToolUse {
                id: str_of(p, "call_id").unwrap_or("").into(),
                name: str_of(p, "name").unwrap_or("").into(),
                input: p.get("input").cloned().unwrap_or(Value::Null),
            };
            b.assistant_part(line, t, p, Some(block));
        }
        "local_shell_call" => {
            let block = Block::ToolUse {
                id: str_of(p, "call_id")
                    .or_else(|| str_of(p, "id"))
                    .unwrap_or("")
                    .into(),
                name: "local_shell".into(),
                input: p.get("action").cloned().unwrap_or(Value::Null),
            };
            b.assistant_part(line, t, p, Some(block));
        }
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            b.tool_output(line, t, p);
        }
        _ if ASSISTANT_ITEMS.contains(&t) => {
            b.assistant_part(line, t, p, Some(Block::Unknown(Value::Object(p.clone()))));
        }
        _ => {
            b.flush();
            b.raw(raw());
        }
    }
}

/// An item of the thread-history projection the rollout lacks: user and
/// agent messages and reasoning become (parts of) messages; other items
/// (command executions, file changes, ...) are kept verbatim.
fn history_item(b: &mut Builder, line: &Line, p: &Map<String, Value>, raw: &dyn Fn() -> Record) {
    match str_of(p, "type").unwrap_or("") {
        "userMessage" => {
            let blocks = match p.get("content") {
                Some(Value::Array(parts)) => parts
                    .iter()
                    .map(
                        |part| match (str_of_value(part, "type"), str_of_value(part, "text")) {
                            (Some("text"), Some(t)) => Block::Text { text: t.into() },
                            _ => Block::Unknown(part.clone()),
                        },
                    )
                    .collect(),
                _ => Vec::new(),
            };
            b.user(line, HISTORY_ITEM, p, blocks, None);
        }
        "agentMessage" => {
            let text = str_of(p, "text").unwrap_or("").to_string();
            b.assistant_part(line, HISTORY_ITEM, p, Some(Block::Text { text }));
        }
        "reasoning" => b.assistant_part(line, HISTORY_ITEM, p, reasoning_block(p)),
        _ => b.raw(raw()),
    }
}

/// The texts of a reasoning item's summary parts, non-empty ones.
fn summary_parts(p: &Map<String, Value>) -> Vec<String> {
    match p.get("summary") {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str).or(part.as_str()))
            .filter(|t| !t.trim().is_empty())
            .map(str::to_string)
            .collect(),
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// A reasoning item's readable text (summary, then content) as thinking;
/// encrypted content is never rendered.
fn reasoning_block(p: &Map<String, Value>) -> Option<Block> {
    thinking_of(
        text_of_content(p.get("summary")),
        &text_of_content(p.get("content")),
    )
}

/// Summary text then content text as one thinking block (none when both are empty).
fn thinking_of(summary: String, content: &str) -> Option<Block> {
    let mut text = summary;
    if !content.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(content);
    }
    (!text.is_empty()).then_some(Block::Thinking {
        text,
        signature: None,
    })
}

/// A short BLAKE3 of a line's JSON (to recognise a copy of it later).
fn line_hash(line: &Line) -> String {
    serde_json::to_vec(&line.value)
        .map(|b| blake3::hash(&b).to_hex()[..32].to_string())
        .unwrap_or_default()
}

fn str_of_value<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn event(
    b: &mut Builder,
    line: &Line,
    p: &Map<String, Value>,
    has_usage_records: bool,
    raw: &dyn Fn() -> Record,
) {
    let t = str_of(p, "type").unwrap_or("");
    let text = str_of(p, "message")
        .or_else(|| str_of(p, "text"))
        .unwrap_or("");
    match t {
        "user_message" if b.duplicate(Role::User, text, true) => b.raw(raw()),
        "agent_message" if b.duplicate(Role::Assistant, text, true) => b.raw(raw()),
        "agent_reasoning" if b.duplicate(Role::System, text, true) => b.raw(raw()),
        "user_message" => {
            let mut blocks = vec![Block::Text { text: text.into() }];
            if let Some(Value::Array(images)) = p.get("images") {
                for img in images {
                    match img.as_str().and_then(data_url) {
                        Some((media_type, data)) => blocks.push(Block::Image { media_type, data }),
                        None => blocks.push(Block::Unknown(img.clone())),
                    }
                }
            }
            b.user(line, t, p, blocks, None);
        }
        "agent_message" => b.assistant_part(line, t, p, Some(Block::Text { text: text.into() })),
        "agent_reasoning" => b.assistant_part(
            line,
            t,
            p,
            Some(Block::Thinking {
                text: text.into(),
                signature: None,
            }),
        ),
        "token_count" => {
            b.raw(raw());
            if !has_usage_records {
                b.token_count(line, p);
            }
        }
        "thread_rolled_back" => {
            let n = p.get("num_turns").and_then(Value::as_u64).unwrap_or(0) as usize;
            b.roll_back(line, n);
            b.raw(raw());
        }
        _ => b.raw(raw()),
    }
}

fn run_config(line: &Line, p: &Map<String, Value>) -> RunConfig {
    let mut c = RunConfig {
        harness_version: None,
        model: str_of(p, "model").unwrap_or("").into(),
        workspace: str_of(p, "cwd").unwrap_or("").into(),
        effort: str_of(p, "effort").map(str::to_string),
        permission_mode: str_of(p, "approval_policy").map(str::to_string),
        sandbox: p
            .get("sandbox_policy")
            .and_then(|s| s.get("type").or(Some(s)))
            .and_then(Value::as_str)
            .map(str::to_string),
        ..RunConfig::default()
    };
    c.extra.insert(
        SOURCE_KEY.into(),
        json!({"agent": AGENT.as_str(), "line": line.number, "entry": line.value}),
    );
    c
}

fn header(
    path: &Path,
    lines: &[Line],
    meta: &Map<String, Value>,
    id: &str,
    tid: &str,
    records: &[Record],
) -> SessionMeta {
    let mut m = SessionMeta::new(id);
    m.created_at = time_of(meta, "timestamp")
        .or_else(|| lines.first().and_then(|l| time_of(&l.value, "timestamp")))
        .unwrap_or_else(chrono::Utc::now);
    m.provider = str_of(meta, "model_provider")
        .unwrap_or("openai")
        .to_string();
    let config = records.iter().find_map(|r| match r {
        Record::Config(c) => Some(c),
        _ => None,
    });
    m.model = config.map(|c| c.model.clone()).unwrap_or_default();
    m.workspace = str_of(meta, "cwd")
        .map(Into::into)
        .or_else(|| config.map(|c| c.workspace.clone()))
        .unwrap_or_default();
    m.title = super::first_user_title(records);
    m.kind = Some("imported".into());
    let mut extra = Map::new();
    for key in [
        "originator",
        "source",
        "forked_from_id",
        "history_base",
        "agent_nickname",
        "agent_role",
        "git",
        "history_mode",
        "segment_id",
    ] {
        if let Some(v) = meta.get(key).filter(|v| !v.is_null()) {
            extra.insert(key.into(), v.clone());
        }
    }
    let parent_thread = str_of(meta, "parent_thread_id").or_else(|| {
        meta.get("source")
            .and_then(|s| s.get("subagent"))
            .and_then(|s| s.get("thread_spawn"))
            .and_then(|t| t.get("parent_thread_id"))
            .and_then(Value::as_str)
    });
    if let Some(p) = parent_thread {
        extra.insert("kind".into(), json!("subagent"));
        extra.insert("parent_session".into(), json!(make_id(AGENT, &[p])));
    }
    m.source = Some(SourceRef {
        agent: AGENT.as_str().into(),
        agent_version: str_of(meta, "cli_version").map(str::to_string),
        session: Some(tid.to_string()),
        path: Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
        extra,
    });
    m
}
