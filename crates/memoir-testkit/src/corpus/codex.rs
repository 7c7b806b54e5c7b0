//! Codex rollouts: `sessions/YYYY/MM/DD/rollout-<ts>-<thread>.jsonl`, every
//! line a `{timestamp, type, payload}` envelope (paginated versions add a
//! top-level `ordinal` and `history_mode` in `session_meta`).
//!
//! A turn is `turn_context`, `task_started`, the prompt twice (the
//! `response_item` message and the `event_msg` user_message, in the order
//! the session's version writes them), tool rounds (reasoning, 1–6
//! `function_call`/`custom_tool_call` items, a `token_count` with the
//! cumulative `total_token_usage` and the request's `last_token_usage`, the
//! outputs in completion order), then the answer twice (`agent_message`,
//! `response_item` message), its `token_count` and `task_complete` — or
//! `turn_aborted` when the user interrupts.

use serde_json::{json, Value};

use super::text;
use super::time::{iso, parts};
use super::{
    AgentKind, Generated, OutFile, RequestTruth, SessionKind, SessionTruth, Shapes, Tokens,
};
use crate::rng::Rng;

/// (cli_version, paginated, weight).
const VERSIONS: &[(&str, bool, f64)] = &[
    ("0.46.0", false, 1.0),
    ("0.98.0", false, 2.0),
    ("0.150.1", false, 2.0),
    ("0.153.0", true, 2.0),
];

const MODELS: &[&str] = &["gpt-5.2-codex", "gpt-5.1-codex-max", "gpt-5.2"];

const CWDS: &[&str] = &[
    "/home/dev/src/memoir",
    "/home/dev/src/web-app",
    "/Users/ana/work/api_server",
    "/home/dev/src/infra",
];

/// Cumulative `total_token_usage`, in Codex's convention (input includes cached).
#[derive(Clone, Copy, Default)]
struct Raw {
    input: u64,
    cached: u64,
    output: u64,
    reasoning: u64,
}

impl Raw {
    fn json(&self) -> Value {
        json!({
            "input_tokens": self.input,
            "cached_input_tokens": self.cached,
            "output_tokens": self.output,
            "reasoning_output_tokens": self.reasoning,
            "total_tokens": self.input + self.output,
        })
    }
}

struct Gen<'s> {
    rng: Rng,
    shapes: &'s Shapes,
    index: usize,
    paginated: bool,
    clock: i64,
    ordinal: u64,
    bytes: Vec<u8>,
    truth: SessionTruth,
    model: &'static str,
    total: Raw,
    last: Option<Value>,
    ctx: u64,
    pending: u64,
    seq: usize,
    event_first: bool,
}

/// Generate one Codex rollout of about `budget` bytes.
pub(super) fn session(
    mut rng: Rng,
    shapes: &Shapes,
    index: usize,
    budget: u64,
    start_ms: i64,
) -> Generated {
    let (version, paginated) = {
        let w: Vec<f64> = VERSIONS.iter().map(|v| v.2).collect();
        let v = &VERSIONS[rng.weighted(&w)];
        (v.0, v.1)
    };
    let tid = if version == "0.46.0" {
        rng.uuid_v4()
    } else {
        rng.uuid_v7(start_ms)
    };
    let (y, mo, d, h, mi, s, _) = parts(start_ms);
    let rel = format!(
        "sessions/{y:04}/{mo:02}/{d:02}/rollout-{y:04}-{mo:02}-{d:02}T{h:02}-{mi:02}-{s:02}-{tid}.jsonl"
    );
    let cwd = rng.pick(CWDS).to_string();
    let model = *rng.pick(MODELS);
    let event_first = rng.chance(0.5);
    let truth = SessionTruth {
        agent: AgentKind::Codex,
        kind: SessionKind::Main,
        session_id: tid.clone(),
        path: rel.clone(),
        parent_session: None,
        agent_id: None,
        spawned_by: None,
        resumed_from: None,
        version: version.to_string(),
        cwd: cwd.clone(),
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
    };
    let mut g = Gen {
        rng,
        shapes,
        index,
        paginated,
        clock: start_ms,
        ordinal: 0,
        bytes: Vec::new(),
        truth,
        model,
        total: Raw::default(),
        last: None,
        ctx: 0,
        pending: 9_000,
        seq: 0,
        event_first,
    };
    let n = g.rng.range(4_000, 12_000) as usize;
    let instructions = text::prose(&mut g.rng, n);
    let mut meta = json!({
        "id": tid,
        "timestamp": iso(start_ms),
        "cwd": cwd,
        "originator": "codex_cli_rs",
        "cli_version": version,
        "source": *g.rng.pick(&["cli", "cli", "vscode", "exec"]),
        "model_provider": "openai",
        "base_instructions": {"text": instructions},
        "git": {"commit_hash": g.rng.hex(40), "branch": "main", "repository_url": "git@github.com:example/app.git"},
    });
    if paginated {
        meta["history_mode"] = json!("paginated");
    }
    g.line("session_meta", meta);
    let mut first = true;
    loop {
        g.turn(&cwd, first);
        first = false;
        if g.bytes.len() as u64 >= budget {
            break;
        }
        g.clock += g.rng.range(5_000, 900_000) as i64;
    }
    Generated {
        files: vec![OutFile {
            rel,
            bytes: g.bytes,
        }],
        truths: vec![g.truth],
        main_lines: Vec::new(),
    }
}

impl Gen<'_> {
    fn tick(&mut self, lo: u64, hi: u64) {
        self.clock += self.rng.range(lo, hi) as i64;
    }

    fn line(&mut self, kind: &str, payload: Value) {
        let ts = iso(self.clock);
        let mut v = json!({"timestamp": ts, "type": kind, "payload": payload});
        if self.paginated {
            v["ordinal"] = json!(self.ordinal);
            self.ordinal += 1;
        }
        let text = serde_json::to_string(&v).unwrap_or_default();
        self.bytes.extend_from_slice(text.as_bytes());
        self.bytes.push(b'\n');
        if self.truth.first_time.is_empty() {
            self.truth.first_time = ts.clone();
        }
        self.truth.last_time = ts;
        self.truth.lines += 1;
        self.truth.bytes += text.len() as u64 + 1;
    }

    fn event(&mut self, payload: Value) {
        self.line("event_msg", payload);
    }

    fn item(&mut self, payload: Value) {
        self.line("response_item", payload);
    }

    fn turn(&mut self, cwd: &str, first: bool) {
        if self.rng.chance(self.shapes.model_switch) {
            self.model = *self.rng.pick(MODELS);
        }
        let turn_id = self.rng.uuid_v4();
        let approval = *self.rng.pick(&["on-request", "never"]);
        self.line(
            "turn_context",
            json!({
                "turn_id": turn_id,
                "cwd": cwd,
                "approval_policy": approval,
                "sandbox_policy": {"type": "workspace-write"},
                "model": self.model,
                "effort": "medium",
                "summary": "auto",
            }),
        );
        self.event(
            json!({"type": "task_started", "turn_id": turn_id, "model_context_window": 272_000}),
        );
        if first {
            self.item(json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>\nFilesystem sandboxing: workspace-write.\n</permissions instructions>"}]}));
            self.item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("<environment_context>\n  <cwd>{cwd}</cwd>\n  <shell>bash</shell>\n</environment_context>")}]}));
            self.pending += 3_000;
        }
        self.seq += 1;
        let tag = format!("{:04}c{:04}", self.index, self.seq);
        let prompt = text::prompt(&mut self.rng, &tag);
        self.truth.prompts.push(prompt.clone());
        self.pending += prompt.len() as u64 / 4 + 10;
        let mut content = vec![json!({"type": "input_text", "text": prompt})];
        let mut images = Vec::new();
        if self.rng.chance(self.shapes.image) {
            self.truth.images += 1;
            let n = self.rng.range(20_000, 300_000) as usize;
            let url = format!("data:image/png;base64,{}", text::base64(&mut self.rng, n));
            content.push(json!({"type": "input_image", "image_url": url}));
            images.push(json!(url));
            self.pending += 1_500;
        }
        let item = json!({"type": "message", "role": "user", "content": content});
        let event = json!({"type": "user_message", "message": prompt, "images": images, "local_images": []});
        if self.event_first {
            self.event(event);
            self.item(item);
        } else {
            self.item(item);
            self.event(event);
        }
        let p = 1.0 / (1.0 + self.shapes.tool_rounds.max(0.0));
        let mut rounds = 0;
        while rounds < 12 && !self.rng.chance(p) {
            rounds += 1;
        }
        let aborted = self.rng.chance(self.shapes.interrupt);
        let rounds = if aborted { rounds / 2 + 1 } else { rounds };
        for _ in 0..rounds {
            self.tick(1_000, 8_000);
            self.tool_round();
        }
        self.tick(1_000, 10_000);
        if aborted {
            self.event(
                json!({"type": "turn_aborted", "turn_id": turn_id, "reason": "interrupted"}),
            );
            self.item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<turn_aborted>\nThe user interrupted the previous turn on purpose.\n</turn_aborted>"}]}));
            self.truth.interrupts += 1;
            return;
        }
        let out = self.reasoning();
        let n = self.rng.lognormal(600.0, 1.0).min(20_000.0) as usize;
        let answer = text::prose(&mut self.rng, n);
        self.event(json!({"type": "agent_message", "message": answer}));
        self.item(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}));
        self.token_count(out + answer.len() as u64 / 4);
        self.tick(100, 1_000);
        self.event(
            json!({"type": "task_complete", "turn_id": turn_id, "last_agent_message": answer}),
        );
    }

    /// A reasoning item (with its event) at a response's start, maybe;
    /// returns its tokens.
    fn reasoning(&mut self) -> u64 {
        if !self.rng.chance(self.shapes.thinking) {
            return 0;
        }
        let n = self.rng.range(80, 600) as usize;
        let summary = text::prose(&mut self.rng, n);
        self.event(json!({"type": "agent_reasoning", "text": summary}));
        let m = self.rng.range(400, 3_000) as usize;
        let encrypted = text::base64(&mut self.rng, m);
        self.item(json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}], "content": null, "encrypted_content": encrypted}));
        self.tick(200, 3_000);
        (summary.len() + m) as u64 / 3
    }

    fn tool_round(&mut self) {
        let reasoning = self.reasoning();
        let k = if self.rng.chance(self.shapes.parallel_calls) {
            self.rng.range(2, 6) as usize
        } else {
            1
        };
        let mut calls = Vec::with_capacity(k);
        let mut out = reasoning;
        for _ in 0..k {
            let id = format!("call_{}", self.rng.base62(24));
            let custom = self.rng.chance(0.2);
            if custom {
                let patch = format!(
                    "*** Begin Patch\n*** Update File: {}\n@@\n-{}\n+{}\n*** End Patch",
                    text::file(&mut self.rng),
                    text::code(&mut self.rng, 80),
                    text::code(&mut self.rng, 100)
                );
                out += patch.len() as u64 / 4;
                self.item(json!({"type": "custom_tool_call", "status": "completed", "call_id": id, "name": "apply_patch", "input": patch}));
            } else {
                let args = json!({"cmd": format!("rg -n {} {}", self.rng.hex(6), text::file(&mut self.rng)), "workdir": "."}).to_string();
                out += args.len() as u64 / 4;
                self.item(json!({"type": "function_call", "name": "exec_command", "arguments": args, "call_id": id}));
            }
            self.truth.tool_calls.push(id.clone());
            calls.push((id, custom));
            self.tick(100, 1_500);
        }
        self.token_count(out);
        let mut order: Vec<usize> = (0..k).collect();
        if k > 1 && self.rng.chance(0.5) {
            self.rng.shuffle(&mut order);
        }
        for i in order {
            self.tick(200, 15_000);
            let (id, custom) = &calls[i];
            let id = id.clone();
            let size =
                (self.rng.lognormal(self.shapes.result_median, 1.5) as usize).min(512 * 1024);
            let body = text::code(&mut self.rng, size);
            self.pending += body.len() as u64 / 4;
            if *custom {
                let output = json!({"output": format!("Success. Updated the following files:\n{body}"), "metadata": {"exit_code": 0, "duration_seconds": 0.1}}).to_string();
                self.item(
                    json!({"type": "custom_tool_call_output", "call_id": id, "output": output}),
                );
            } else {
                let output = format!("Chunk ID: {}\nWall time: 0.2 seconds\nProcess exited with code 0\nOutput:\n{body}", self.rng.hex(6));
                self.item(json!({"type": "function_call_output", "call_id": id, "output": output}));
            }
            self.truth.tool_results.push(id);
        }
    }

    /// The `token_count` of a finished request that produced `out` tokens
    /// (maybe re-emitted with unchanged totals, as rate-limit refreshes are).
    fn token_count(&mut self, out: u64) {
        let input = self.ctx + self.pending + self.rng.range(50, 500);
        let cached = if self.ctx == 0 {
            0
        } else {
            (self.ctx as f64 * (0.85 + 0.15 * self.rng.f64())) as u64
        }
        .min(input);
        let output = out.max(1) + self.rng.range(5, 60);
        let reasoning = (output as f64 * 0.6 * self.rng.f64()) as u64;
        let last = Raw {
            input,
            cached,
            output,
            reasoning,
        };
        self.total.input += input;
        self.total.cached += cached;
        self.total.output += output;
        self.total.reasoning += reasoning;
        self.truth.requests.push(RequestTruth {
            message_id: None,
            request_id: None,
            model: self.model.to_string(),
            timestamp: iso(self.clock),
            usage: Tokens {
                input: input - cached,
                output,
                cache_read: cached,
                cache_creation: 0,
                cache_5m: 0,
                cache_1h: 0,
                reasoning,
            },
            counted: true,
        });
        self.ctx = input + output;
        self.pending = 0;
        let info = json!({
            "total_token_usage": self.total.json(),
            "last_token_usage": last.json(),
            "model_context_window": 272_000,
        });
        self.last = Some(info.clone());
        let limits = json!({"primary": {"used_percent": self.rng.range(1, 90), "window_minutes": 300, "resets_in_seconds": self.rng.range(60, 18_000)}});
        self.event(json!({"type": "token_count", "info": info, "rate_limits": limits}));
        if self.rng.chance(self.shapes.token_count_repeat) {
            self.tick(50, 500);
            let limits = json!({"primary": {"used_percent": self.rng.range(1, 90), "window_minutes": 300, "resets_in_seconds": self.rng.range(60, 18_000)}});
            self.event(
                json!({"type": "token_count", "info": self.last.clone(), "rate_limits": limits}),
            );
        }
    }
}
