//! Claude Code sessions: `projects/<project>/<session>.jsonl` and the
//! subagent files of each era.
//!
//! One API response is several lines (thinking, text, each `tool_use`),
//! sharing `message.id` and `requestId`, each line's `parentUuid` the
//! previous line, the usage repeated on every line; each `tool_result` user
//! line hangs from the call line it answers (`sourceToolAssistantUUID`) and
//! carries a structured `toolUseResult`; the next response hangs from the
//! last result written.

use serde_json::{json, Map, Value};

use super::text;
use super::time::iso;
use super::AgentKind;
use super::{Generated, OutFile, RequestTruth, SessionKind, SessionTruth, Shapes, Tokens};
use crate::rng::Rng;

/// Where subagent runs are written, by Claude Code version.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    /// `isSidechain` lines inline in the session file (`Task`).
    Inline,
    /// `agent-<id>.jsonl` beside the session file (`Task`).
    ProjectFile,
    /// `<session>/subagents/agent-<id>.jsonl` (`Agent`; 2.1.x).
    SubagentsDir,
}

/// (version, era, weight).
const VERSIONS: &[(&str, Era, f64)] = &[
    ("2.0.14", Era::Inline, 1.0),
    ("2.0.46", Era::ProjectFile, 2.0),
    ("2.1.173", Era::SubagentsDir, 3.0),
    ("2.1.201", Era::SubagentsDir, 3.0),
];

const MODELS: &[&str] = &[
    "claude-opus-4-5-20251101",
    "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5-20251001",
];

const CWDS: &[&str] = &[
    "/home/dev/src/memoir",
    "/home/dev/src/web-app",
    "/Users/ana/work/api_server",
    "/home/dev/src/data.pipeline",
    "/home/dev/src/infra",
    "/Users/ana/work/mobile",
];

/// The project directory name Claude Code derives from a cwd.
fn project_dir(cwd: &str) -> String {
    cwd.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A tool call about to be written.
struct Call {
    id: String,
    name: &'static str,
    input: Value,
    agent: bool,
}

/// A conversation being written: the main line, an inline sidechain or a
/// subagent file.
struct Conv {
    file: usize,
    truth: usize,
    leaf: Option<String>,
    sidechain: bool,
    agent_id: Option<String>,
    /// Context tokens so far (cache reads of the next request).
    ctx: u64,
    /// Tokens added since the last request (cache writes of the next).
    pending: u64,
    model: &'static str,
    /// Prompts since the last rewind or compaction: (uuid, parent uuid).
    rewindable: Vec<(String, Option<String>)>,
}

/// The last finished answer of the main line (a `/btw` replays it).
struct LastAnswer {
    message_id: String,
    model: &'static str,
    content: Value,
    usage: Value,
    tokens: Tokens,
}

struct FileBuf {
    rel: String,
    bytes: Vec<u8>,
}

struct Gen<'s> {
    rng: Rng,
    shapes: &'s Shapes,
    index: usize,
    sid: String,
    version: &'static str,
    era: Era,
    cwd: String,
    git_branch: &'static str,
    clock: i64,
    cache_1h: bool,
    files: Vec<FileBuf>,
    main_lines: Vec<String>,
    truths: Vec<SessionTruth>,
    seq: usize,
    last_answer: Option<LastAnswer>,
}

/// Generate one Claude Code session of about `budget` bytes (subagent files
/// included). With `resume`, the session repeats the given session's lines
/// first and continues from its last line.
pub(super) fn session(
    mut rng: Rng,
    shapes: &Shapes,
    index: usize,
    budget: u64,
    start_ms: i64,
    resume: Option<(&str, &[String])>,
) -> Generated {
    let (version, era) = {
        let w: Vec<f64> = VERSIONS.iter().map(|v| v.2).collect();
        let v = &VERSIONS[rng.weighted(&w)];
        (v.0, v.1)
    };
    let mut cwd = rng.pick(CWDS).to_string();
    let sid = rng.uuid_v4();
    let model = *rng.pick(&MODELS[..2]);
    let cache_1h = rng.chance(0.3);
    let git_branch = *rng.pick(&["main", "main", "fix/import", "feature/search"]);
    let mut clock = start_ms;
    let mut copied: Vec<String> = Vec::new();
    let mut resumed_from = None;
    let mut resume_leaf = None;
    let mut copied_requests = Vec::new();
    let mut first_time = None;
    if let Some((from_sid, lines)) = resume {
        let needle = format!("\"sessionId\":\"{from_sid}\"");
        let with = format!("\"sessionId\":\"{sid}\"");
        let mut seen = std::collections::HashSet::new();
        for l in lines {
            copied.push(l.replace(&needle, &with));
            let Ok(v) = serde_json::from_str::<Value>(l) else {
                continue;
            };
            if first_time.is_none() {
                first_time = v["timestamp"].as_str().map(str::to_string);
                if let Some(c) = v["cwd"].as_str() {
                    cwd = c.to_string();
                }
            }
            if let Some(t) = v["timestamp"].as_str() {
                clock = clock.max(super::time::parse_ms(t).unwrap_or(clock));
            }
            if v["isSidechain"] != json!(true) {
                resume_leaf = v["uuid"].as_str().map(str::to_string);
            }
            if v["type"] == "assistant" && v["isSidechain"] != json!(true) {
                let mid = v["message"]["id"].as_str().unwrap_or("").to_string();
                if seen.insert(mid.clone()) {
                    copied_requests.push(RequestTruth {
                        message_id: Some(mid),
                        request_id: v["requestId"].as_str().map(str::to_string),
                        model: v["message"]["model"].as_str().unwrap_or("").to_string(),
                        timestamp: v["timestamp"].as_str().unwrap_or("").to_string(),
                        usage: tokens_of(&v["message"]["usage"]),
                        counted: false,
                    });
                }
            }
        }
        resumed_from = Some(from_sid.to_string());
        // The user comes back hours later.
        clock += rng.range(600_000, 8 * 3_600_000) as i64;
    }
    let rel = format!("projects/{}/{sid}.jsonl", project_dir(&cwd));
    let mut bytes = Vec::new();
    for l in &copied {
        bytes.extend_from_slice(l.as_bytes());
        bytes.push(b'\n');
    }
    let copy_bytes = bytes.len() as u64;
    let truth = SessionTruth {
        agent: AgentKind::ClaudeCode,
        kind: if resumed_from.is_some() {
            SessionKind::Resumed
        } else {
            SessionKind::Main
        },
        session_id: sid.clone(),
        path: rel.clone(),
        parent_session: None,
        agent_id: None,
        spawned_by: None,
        resumed_from,
        version: version.to_string(),
        cwd: cwd.clone(),
        prompts: Vec::new(),
        tool_calls: Vec::new(),
        tool_results: Vec::new(),
        requests: copied_requests,
        rewinds: 0,
        compactions: 0,
        interrupts: 0,
        images: 0,
        first_time: first_time.clone().unwrap_or_default(),
        last_time: String::new(),
        lines: copied.len() as u64,
        bytes: copy_bytes,
    };
    let mut g = Gen {
        rng,
        shapes,
        index,
        sid,
        version,
        era,
        cwd,
        git_branch,
        clock,
        cache_1h,
        files: vec![FileBuf { rel, bytes }],
        main_lines: copied,
        truths: vec![truth],
        seq: 0,
        last_answer: None,
    };
    let mut main = Conv {
        file: 0,
        truth: 0,
        leaf: resume_leaf,
        sidechain: false,
        agent_id: None,
        ctx: if first_time.is_some() { 60_000 } else { 0 },
        pending: 14_000,
        model,
        rewindable: Vec::new(),
    };
    loop {
        g.turn(&mut main);
        let total: u64 = g.files.iter().map(|f| f.bytes.len() as u64).sum();
        if total.saturating_sub(copy_bytes) >= budget {
            break;
        }
        // The user reads, thinks, comes back.
        g.tick(5_000, 900_000);
    }
    Generated {
        files: g
            .files
            .into_iter()
            .map(|f| OutFile {
                rel: f.rel,
                bytes: f.bytes,
            })
            .collect(),
        truths: g.truths,
        main_lines: g.main_lines,
    }
}

/// Tokens of a written usage object.
fn tokens_of(u: &Value) -> Tokens {
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Tokens {
        input: n("input_tokens"),
        output: n("output_tokens"),
        cache_read: n("cache_read_input_tokens"),
        cache_creation: n("cache_creation_input_tokens"),
        cache_5m: u["cache_creation"]["ephemeral_5m_input_tokens"]
            .as_u64()
            .unwrap_or(0),
        cache_1h: u["cache_creation"]["ephemeral_1h_input_tokens"]
            .as_u64()
            .unwrap_or(0),
        reasoning: 0,
    }
}

impl Gen<'_> {
    fn tick(&mut self, lo: u64, hi: u64) {
        self.clock += self.rng.range(lo, hi) as i64;
    }

    fn tag(&mut self, kind: &str) -> String {
        self.seq += 1;
        format!("{:04}{kind}{:04}", self.index, self.seq)
    }

    /// Write one line of `conv` hanging from `parent`; returns its uuid.
    fn line(&mut self, conv: &Conv, parent: Option<&str>, body: Vec<(&str, Value)>) -> String {
        let uuid = self.rng.uuid_v4();
        let mut m = Map::new();
        m.insert(
            "parentUuid".into(),
            parent.map_or(Value::Null, |p| json!(p)),
        );
        m.insert("isSidechain".into(), json!(conv.sidechain));
        m.insert("userType".into(), json!("external"));
        m.insert("cwd".into(), json!(self.cwd));
        m.insert("sessionId".into(), json!(self.sid));
        m.insert("version".into(), json!(self.version));
        m.insert("gitBranch".into(), json!(self.git_branch));
        if let Some(a) = &conv.agent_id {
            m.insert("agentId".into(), json!(a));
        }
        for (k, v) in body {
            m.insert(k.into(), v);
        }
        m.insert("uuid".into(), json!(uuid));
        let ts = iso(self.clock);
        m.insert("timestamp".into(), json!(ts));
        let text = serde_json::to_string(&Value::Object(m)).unwrap_or_default();
        let f = &mut self.files[conv.file];
        f.bytes.extend_from_slice(text.as_bytes());
        f.bytes.push(b'\n');
        let t = &mut self.truths[conv.truth];
        if t.first_time.is_empty() {
            t.first_time = ts.clone();
        }
        t.last_time = ts;
        t.lines += 1;
        t.bytes += text.len() as u64 + 1;
        if conv.file == 0 {
            self.main_lines.push(text);
        }
        uuid
    }

    /// One user turn of the main line: a prompt, tool rounds, an answer.
    fn turn(&mut self, conv: &mut Conv) {
        let main_bytes = self.files[0].bytes.len();
        if main_bytes > 30_000 && conv.leaf.is_some() && self.rng.chance(self.shapes.compaction) {
            self.compact(conv);
        }
        if self.era == Era::SubagentsDir
            && self.last_answer.is_some()
            && self.rng.chance(self.shapes.btw)
        {
            self.btw(conv);
        }
        if self.rng.chance(self.shapes.model_switch) {
            conv.model = *self.rng.pick(MODELS);
        }
        // A rewind: the new prompt hangs where an earlier one did.
        let mut parent = conv.leaf.clone();
        if self.rng.chance(self.shapes.rewind) {
            let choices: Vec<usize> = (0..conv.rewindable.len())
                .filter(|&i| conv.rewindable[i].1.is_some())
                .collect();
            if !choices.is_empty() {
                let i = choices[self.rng.below(choices.len())];
                parent = conv.rewindable[i].1.clone();
                conv.rewindable.clear();
                self.truths[conv.truth].rewinds += 1;
            }
        }
        let tag = self.tag("p");
        let prompt = text::prompt(&mut self.rng, &tag);
        self.truths[conv.truth].prompts.push(prompt.clone());
        let content = if self.rng.chance(self.shapes.image) {
            self.truths[conv.truth].images += 1;
            let n = self.rng.range(20_000, 300_000) as usize;
            json!([
                {"type": "text", "text": prompt},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": text::base64(&mut self.rng, n)}}
            ])
        } else {
            json!(prompt)
        };
        conv.pending += prompt.len() as u64 / 4 + 20;
        let uuid = self.line(
            conv,
            parent.as_deref(),
            vec![
                ("type", json!("user")),
                ("message", json!({"role": "user", "content": content})),
            ],
        );
        conv.rewindable.push((uuid.clone(), parent));
        conv.leaf = Some(uuid);
        let interrupted = self.rng.chance(self.shapes.interrupt);
        let rounds = self.rounds();
        let rounds = if interrupted { rounds / 2 } else { rounds };
        for _ in 0..rounds {
            self.tick(1_000, 8_000);
            self.tool_round(conv, true);
        }
        self.tick(1_000, 10_000);
        if interrupted {
            // The answer stops mid-stream; the user's marker follows.
            self.answer(conv, true);
            self.tick(500, 5_000);
            let leaf = conv.leaf.clone();
            let uuid = self.line(
                conv,
                leaf.as_deref(),
                vec![
                    ("type", json!("user")),
                    (
                        "message",
                        json!({"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]}),
                    ),
                ],
            );
            conv.leaf = Some(uuid);
            self.truths[conv.truth].interrupts += 1;
        } else {
            self.answer(conv, false);
        }
    }

    /// Tool rounds in a turn (geometric with mean `tool_rounds`).
    fn rounds(&mut self) -> usize {
        let p = 1.0 / (1.0 + self.shapes.tool_rounds.max(0.0));
        let mut n = 0;
        while n < 12 && !self.rng.chance(p) {
            n += 1;
        }
        n
    }

    /// One response that calls tools, then its results.
    fn tool_round(&mut self, conv: &mut Conv, may_spawn: bool) {
        let parallel = self.rng.chance(self.shapes.parallel_calls);
        let k = if parallel {
            self.rng.range(2, 6) as usize
        } else {
            1
        };
        let spawn = may_spawn && self.rng.chance(self.shapes.subagent);
        let agents = if spawn {
            if parallel {
                self.rng.range(1, k as u64) as usize
            } else {
                1
            }
        } else {
            0
        };
        let mut calls = Vec::with_capacity(k);
        for i in 0..k {
            calls.push(if i < agents {
                self.agent_call()
            } else {
                self.tool_call()
            });
        }
        let interleave = k > 1 && agents == 0 && self.rng.chance(self.shapes.interleaved_results);
        self.response_with(conv, calls, false, false, interleave);
    }

    fn tool_call(&mut self) -> Call {
        let id = format!("toolu_01{}", self.rng.base62(22));
        let file = format!("{}/{}", self.cwd, text::file(&mut self.rng));
        let (name, input) = match self.rng.weighted(&[4.0, 3.0, 1.5, 2.0, 0.5, 0.5]) {
            0 => ("Read", json!({"file_path": file})),
            1 => (
                "Bash",
                json!({"command": format!("cargo test -p app {}", self.rng.hex(6)), "description": "Run the tests"}),
            ),
            2 => (
                "Grep",
                json!({"pattern": format!("fn {}", self.rng.hex(4)), "path": self.cwd, "output_mode": "content"}),
            ),
            3 => {
                let old = text::code(&mut self.rng, 120);
                let new = text::code(&mut self.rng, 160);
                (
                    "Edit",
                    json!({"file_path": file, "old_string": old, "new_string": new}),
                )
            }
            4 => (
                "mcp__github__search_issues",
                json!({"query": format!("is:open label:bug {}", self.rng.hex(4))}),
            ),
            _ => (
                "TodoWrite",
                json!({"todos": [{"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing the parser"}]}),
            ),
        };
        Call {
            id,
            name,
            input,
            agent: false,
        }
    }

    fn agent_call(&mut self) -> Call {
        let id = format!("toolu_01{}", self.rng.base62(22));
        let tag = self.tag("a");
        let prompt = text::prompt(&mut self.rng, &tag);
        Call {
            id,
            name: if self.era == Era::SubagentsDir {
                "Agent"
            } else {
                "Task"
            },
            input: json!({
                "description": "Survey a module",
                "subagent_type": *self.rng.pick(&["general-purpose", "Explore", "code-reviewer"]),
                "prompt": prompt,
            }),
            agent: true,
        }
    }

    /// The turn's answer: a response without tool calls.
    fn answer(&mut self, conv: &mut Conv, interrupted: bool) {
        self.response_with(conv, Vec::new(), interrupted, true, false);
    }

    /// Write one API response (thinking?, text?, calls) and, for calls,
    /// their results.
    fn response_with(
        &mut self,
        conv: &mut Conv,
        calls: Vec<Call>,
        interrupted: bool,
        answer: bool,
        interleave: bool,
    ) {
        let message_id = format!("msg_01{}", self.rng.base62(22));
        let request_id = format!("req_011C{}", self.rng.base62(20));
        let mut blocks: Vec<Value> = Vec::new();
        let mut out_chars = 0usize;
        if self.rng.chance(self.shapes.thinking) {
            let n = self.rng.lognormal(600.0, 1.0).min(20_000.0) as usize;
            let t = text::prose(&mut self.rng, n);
            out_chars += t.len();
            blocks.push(json!({"type": "thinking", "thinking": t, "signature": text::base64(&mut self.rng, 300)}));
        }
        if answer || self.rng.chance(0.6) {
            let n = if answer {
                self.rng.lognormal(700.0, 1.0).min(30_000.0) as usize
            } else {
                self.rng.range(30, 200) as usize
            };
            let t = text::prose(&mut self.rng, n);
            out_chars += t.len();
            blocks.push(json!({"type": "text", "text": t}));
        }
        for c in &calls {
            out_chars += c.input.to_string().len();
            blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}));
        }
        // Usage: the whole context is read from the cache, what was added
        // since the last request is written to it.
        let output = (out_chars as u64 / 4 + self.rng.range(5, 80)).max(1);
        let creation = conv.pending + self.rng.range(0, 400);
        let (c5, c1) = if self.cache_1h {
            (0, creation)
        } else {
            (creation, 0)
        };
        let input = self.rng.range(1, 12);
        let mut usage = json!({
            "input_tokens": input,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": conv.ctx,
        });
        if self.era != Era::Inline {
            usage["cache_creation"] =
                json!({"ephemeral_5m_input_tokens": c5, "ephemeral_1h_input_tokens": c1});
        }
        usage["output_tokens"] = json!(output);
        usage["service_tier"] = json!("standard");
        let tokens = tokens_of(&usage);
        self.truths[conv.truth].requests.push(RequestTruth {
            message_id: Some(message_id.clone()),
            request_id: Some(request_id.clone()),
            model: conv.model.to_string(),
            timestamp: iso(self.clock),
            usage: tokens,
            counted: true,
        });
        conv.ctx += creation + output;
        conv.pending = 0;

        let has_calls = !calls.is_empty();
        let last = blocks.len().saturating_sub(1);
        let mut call_lines: Vec<(String, usize)> = Vec::new();
        let mut pending_results: Vec<usize> = Vec::new();
        let first_call = blocks.len() - calls.len();
        let mut results_done = 0usize;
        // Each line of the response hangs from the previous one, results
        // written in between notwithstanding.
        let mut previous = conv.leaf.clone();
        for (i, block) in blocks.iter().enumerate() {
            let stop = if interrupted || i != last {
                Value::Null
            } else if has_calls {
                json!("tool_use")
            } else {
                json!("end_turn")
            };
            let uuid = self.line(
                conv,
                previous.as_deref(),
                vec![
                    ("type", json!("assistant")),
                    (
                        "message",
                        json!({
                            "model": conv.model,
                            "id": message_id,
                            "type": "message",
                            "role": "assistant",
                            "content": [block],
                            "stop_reason": stop,
                            "stop_sequence": null,
                            "usage": usage,
                        }),
                    ),
                    ("requestId", json!(request_id)),
                ],
            );
            conv.leaf = Some(uuid.clone());
            previous = Some(uuid.clone());
            if i >= first_call {
                let ci = i - first_call;
                call_lines.push((uuid, ci));
                self.truths[conv.truth]
                    .tool_calls
                    .push(calls[ci].id.clone());
                if interleave && ci > 0 {
                    // The previous call's tool finished while this one streamed.
                    pending_results.push(ci - 1);
                }
            }
            self.tick(150, 2_500);
            while let Some(r) = pending_results.pop() {
                let cl = call_lines[r].0.clone();
                self.result(conv, &calls[r], &cl, None);
                results_done = r + 1;
            }
        }
        if answer && conv.truth == 0 {
            self.last_answer = (!interrupted).then(|| LastAnswer {
                message_id: message_id.clone(),
                model: conv.model,
                content: blocks.last().cloned().unwrap_or(Value::Null),
                usage: usage.clone(),
                tokens,
            });
        }
        if !has_calls {
            return;
        }
        // The remaining results, in completion order.
        let mut order: Vec<usize> = (results_done..calls.len()).collect();
        if order.len() > 1 && self.rng.chance(0.5) {
            self.rng.shuffle(&mut order);
        }
        // Subagents run before their results arrive.
        let mut runs: Vec<Option<(String, u64, u64)>> = vec![None; calls.len()];
        for &i in &order {
            if calls[i].agent {
                runs[i] = Some(self.subagent(conv, &calls[i]));
            }
        }
        for &i in &order {
            let cl = call_lines[i].0.clone();
            let summary = runs[i].take();
            self.tick(100, 6_000);
            self.result(conv, &calls[i], &cl, summary);
        }
    }

    /// The user line delivering `call`'s result, hanging from its call line.
    fn result(
        &mut self,
        conv: &mut Conv,
        call: &Call,
        call_line: &str,
        agent_run: Option<(String, u64, u64)>,
    ) {
        let error = agent_run.is_none() && self.rng.chance(self.shapes.tool_error);
        let size = (self.rng.lognormal(self.shapes.result_median, 1.5) as usize).min(512 * 1024);
        let (content, structured): (Value, Value) = if let Some((agent_id, tokens, tools)) =
            &agent_run
        {
            let summary = text::prose(&mut self.rng, size.min(4000));
            let mut content = vec![json!({"type": "text", "text": summary})];
            if self.era == Era::SubagentsDir {
                content.push(json!({"type": "text", "text": format!(
                    "agentId: {agent_id} (use SendMessage with to: '{agent_id}' to continue this agent)\n<usage>total_tokens: {tokens}\ntool_uses: {tools}\nduration_ms: {}</usage>",
                    self.rng.range(2_000, 90_000)
                )}));
            }
            (
                json!(content.clone()),
                json!({
                    "status": "completed",
                    "prompt": call.input["prompt"],
                    "agentId": agent_id,
                    "content": [content[0]],
                    "totalDurationMs": self.rng.range(2_000, 90_000),
                    "totalTokens": tokens,
                    "totalToolUseCount": tools,
                }),
            )
        } else if error {
            (
                json!("<tool_use_error>File does not exist.</tool_use_error>"),
                json!("Error: File does not exist."),
            )
        } else {
            match call.name {
                "Read" => {
                    let body = text::code(&mut self.rng, size);
                    let lines = body.lines().count();
                    let numbered: String = body
                        .lines()
                        .enumerate()
                        .map(|(i, l)| format!("{:>6}\u{2192}{l}\n", i + 1))
                        .collect();
                    (
                        json!(numbered),
                        json!({"type": "text", "file": {"filePath": call.input["file_path"], "content": body, "numLines": lines, "startLine": 1, "totalLines": lines}}),
                    )
                }
                "Bash" => {
                    let out = text::code(&mut self.rng, size);
                    (
                        json!(out),
                        json!({"stdout": out, "stderr": "", "interrupted": false, "isImage": false}),
                    )
                }
                "Edit" => {
                    let original = text::code(&mut self.rng, size);
                    (
                        json!(format!("The file {} has been updated.", call.input["file_path"].as_str().unwrap_or(""))),
                        json!({
                            "filePath": call.input["file_path"],
                            "oldString": call.input["old_string"],
                            "newString": call.input["new_string"],
                            "originalFile": original,
                            "structuredPatch": [{"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1, "lines": ["-a", "+b"]}],
                            "userModified": false,
                            "replaceAll": false,
                        }),
                    )
                }
                "mcp__github__search_issues" => {
                    let t = text::prose(&mut self.rng, size);
                    let block = json!([{"type": "text", "text": t}]);
                    (block.clone(), block)
                }
                "TodoWrite" => (
                    json!("Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress."),
                    json!({"oldTodos": [], "newTodos": call.input["todos"]}),
                ),
                _ => {
                    let out = text::code(&mut self.rng, size);
                    (json!(out.clone()), json!({"mode": "content", "numFiles": 3, "filenames": [], "content": out, "numLines": 12}))
                }
            }
        };
        conv.pending += (content.to_string().len() as u64) / 4;
        let mut block = json!({"tool_use_id": call.id, "type": "tool_result", "content": content});
        if error {
            block["is_error"] = json!(true);
        }
        let mut body = vec![
            ("type", json!("user")),
            ("message", json!({"role": "user", "content": [block]})),
            ("toolUseResult", structured),
        ];
        if self.era == Era::SubagentsDir {
            body.push(("sourceToolAssistantUUID", json!(call_line)));
        }
        let uuid = self.line(conv, Some(call_line), body);
        conv.leaf = Some(uuid);
        self.truths[conv.truth].tool_results.push(call.id.clone());
    }

    /// Run the subagent `call` spawns; returns (agentId, tokens, tool uses).
    fn subagent(&mut self, parent: &Conv, call: &Call) -> (String, u64, u64) {
        let agent_id = if self.era == Era::SubagentsDir {
            format!("a{}", self.rng.hex(16))
        } else {
            self.rng.hex(8)
        };
        let (file, kind, path) = match self.era {
            Era::Inline => (
                parent.file,
                SessionKind::InlineSidechain,
                self.files[parent.file].rel.clone(),
            ),
            Era::ProjectFile => {
                let dir = self.files[0]
                    .rel
                    .rsplit_once('/')
                    .map_or("", |(d, _)| d)
                    .to_string();
                let rel = format!("{dir}/agent-{agent_id}.jsonl");
                self.files.push(FileBuf {
                    rel: rel.clone(),
                    bytes: Vec::new(),
                });
                (self.files.len() - 1, SessionKind::Subagent, rel)
            }
            Era::SubagentsDir => {
                let rel = format!(
                    "{}/subagents/agent-{agent_id}.jsonl",
                    self.files[0].rel.trim_end_matches(".jsonl")
                );
                self.files.push(FileBuf {
                    rel: rel.clone(),
                    bytes: Vec::new(),
                });
                (self.files.len() - 1, SessionKind::Subagent, rel)
            }
        };
        let truth = self.new_truth(kind, path, Some(agent_id.clone()), Some(call.id.clone()));
        let model = if self.rng.chance(0.5) {
            MODELS[2]
        } else {
            parent.model
        };
        let mut conv = Conv {
            file,
            truth,
            leaf: None,
            sidechain: true,
            agent_id: Some(agent_id.clone()),
            ctx: 0,
            pending: 12_000,
            model,
            rewindable: Vec::new(),
        };
        self.tick(300, 2_000);
        let prompt = call.input["prompt"].as_str().unwrap_or("").to_string();
        self.truths[truth].prompts.push(prompt.clone());
        let uuid = self.line(
            &conv,
            None,
            vec![
                ("type", json!("user")),
                ("message", json!({"role": "user", "content": prompt})),
            ],
        );
        conv.leaf = Some(uuid);
        let rounds = self.rng.range(1, 5);
        for _ in 0..rounds {
            self.tick(800, 6_000);
            self.tool_round(&mut conv, false);
        }
        self.tick(800, 6_000);
        self.response_with(&mut conv, Vec::new(), false, true, false);
        let t = &self.truths[truth];
        let tokens: u64 = t
            .requests
            .iter()
            .map(|r| r.usage.input + r.usage.output + r.usage.cache_read + r.usage.cache_creation)
            .sum();
        (agent_id, tokens, t.tool_calls.len() as u64)
    }

    fn new_truth(
        &mut self,
        kind: SessionKind,
        path: String,
        agent_id: Option<String>,
        spawned_by: Option<String>,
    ) -> usize {
        self.truths.push(SessionTruth {
            agent: AgentKind::ClaudeCode,
            kind,
            session_id: self.sid.clone(),
            path,
            parent_session: Some(self.sid.clone()),
            agent_id,
            spawned_by,
            resumed_from: None,
            version: self.version.to_string(),
            cwd: self.cwd.clone(),
            prompts: Vec::new(),
            tool_calls: Vec::new(),
            tool_results: Vec::new(),
            requests: Vec::new(),
            rewinds: 0,
            compactions: 0,
            interrupts: 0,
            images: 0,
            first_time: String::new(),
            last_time: String::new(),
            lines: 0,
            bytes: 0,
        });
        self.truths.len() - 1
    }

    /// `compact_boundary` (no parent, `logicalParentUuid` the leaf) and the
    /// summary the line continues from.
    fn compact(&mut self, conv: &mut Conv) {
        self.tick(2_000, 30_000);
        let leaf = conv.leaf.clone();
        let trigger = if self.rng.chance(0.8) {
            "auto"
        } else {
            "manual"
        };
        let boundary = self.line(
            conv,
            None,
            vec![
                ("logicalParentUuid", json!(leaf)),
                ("type", json!("system")),
                ("subtype", json!("compact_boundary")),
                ("content", json!("Conversation compacted")),
                ("isMeta", json!(false)),
                ("level", json!("info")),
                (
                    "compactMetadata",
                    json!({"trigger": trigger, "preTokens": conv.ctx}),
                ),
            ],
        );
        self.tick(500, 3_000);
        let n = self.rng.range(1_500, 12_000) as usize;
        let summary = format!(
            "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n{}",
            text::prose(&mut self.rng, n)
        );
        let uuid = self.line(
            conv,
            Some(&boundary),
            vec![
                ("type", json!("user")),
                ("message", json!({"role": "user", "content": summary})),
                ("isCompactSummary", json!(true)),
                ("isVisibleInTranscriptOnly", json!(true)),
            ],
        );
        conv.leaf = Some(uuid);
        conv.ctx = self.rng.range(15_000, 30_000);
        conv.pending = 0;
        conv.rewindable.clear();
        self.truths[conv.truth].compactions += 1;
    }

    /// A `/btw` side question: a sidechain file under `subagents/` that
    /// replays the last answer (same `message.id`, a new `requestId`), then
    /// asks and answers the side question.
    fn btw(&mut self, main: &Conv) {
        let Some(last) = self.last_answer.take() else {
            return;
        };
        let agent_id = format!("a{}", self.rng.hex(16));
        let rel = format!(
            "{}/subagents/agent-{agent_id}.jsonl",
            self.files[0].rel.trim_end_matches(".jsonl")
        );
        self.files.push(FileBuf {
            rel: rel.clone(),
            bytes: Vec::new(),
        });
        let file = self.files.len() - 1;
        let truth = self.new_truth(SessionKind::Btw, rel, Some(agent_id.clone()), None);
        let mut conv = Conv {
            file,
            truth,
            leaf: None,
            sidechain: true,
            agent_id: Some(agent_id),
            ctx: main.ctx,
            pending: 0,
            model: last.model,
            rewindable: Vec::new(),
        };
        self.tick(1_000, 20_000);
        let request_id = format!("req_011C{}", self.rng.base62(20));
        self.truths[truth].requests.push(RequestTruth {
            message_id: Some(last.message_id.clone()),
            request_id: Some(request_id.clone()),
            model: last.model.to_string(),
            timestamp: iso(self.clock),
            usage: last.tokens,
            counted: false,
        });
        let uuid = self.line(
            &conv,
            None,
            vec![
                ("type", json!("assistant")),
                (
                    "message",
                    json!({
                        "model": last.model,
                        "id": last.message_id,
                        "type": "message",
                        "role": "assistant",
                        "content": [last.content],
                        "stop_reason": "end_turn",
                        "stop_sequence": null,
                        "usage": last.usage,
                    }),
                ),
                ("requestId", json!(request_id)),
            ],
        );
        conv.leaf = Some(uuid);
        self.tick(500, 5_000);
        let tag = self.tag("b");
        let question = text::prompt(&mut self.rng, &tag);
        self.truths[truth].prompts.push(question.clone());
        let leaf = conv.leaf.clone();
        let uuid = self.line(
            &conv,
            leaf.as_deref(),
            vec![
                ("type", json!("user")),
                ("message", json!({"role": "user", "content": question})),
            ],
        );
        conv.leaf = Some(uuid);
        conv.pending = 200;
        self.tick(1_000, 8_000);
        self.response_with(&mut conv, Vec::new(), false, true, false);
    }
}
