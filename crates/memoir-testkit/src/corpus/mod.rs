//! The corpus generator: agent home trees (Claude Code `projects/…`, Codex
//! `sessions/YYYY/MM/DD/…`) written from a [`CorpusSpec`], and the
//! [`Manifest`] of what was written.
//!
//! Deterministic: the same spec writes the same bytes. Each session draws
//! from its own random stream and stops after the turn that reaches its byte
//! budget, so a larger budget writes the same prefix and more turns: running
//! [`generate`] again with [`CorpusSpec::grow`] set appends to the newest
//! sessions' files instead of rewriting them (a live agent's growth).

mod claude;
mod codex;
mod text;
mod time;

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

pub use time::iso;

/// The agent whose home tree is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    /// Claude Code (`<root>/projects/<project>/<session>.jsonl`).
    ClaudeCode,
    /// Codex CLI (`<root>/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl`).
    Codex,
}

impl AgentKind {
    /// The name importers and usage reports use (`claude-code`, `codex`).
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude-code",
            AgentKind::Codex => "codex",
        }
    }
}

/// How often each shape occurs. Probabilities are per turn unless named
/// otherwise; [`Shapes::default`] is the realistic mix (see README.md for
/// where each value comes from), [`Shapes::plain`] turns every optional
/// shape off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Shapes {
    /// Lognormal shape (sigma) of session sizes: most sessions small, a long tail.
    pub size_sigma: f64,
    /// Mean tool rounds (responses that call tools) per turn (geometric).
    pub tool_rounds: f64,
    /// Per tool-calling response: probability it makes 2–6 parallel calls.
    pub parallel_calls: f64,
    /// Per parallel response (Claude): results written between the calls
    /// (tools start while the response still streams).
    pub interleaved_results: f64,
    /// Per response: a thinking (Claude) or reasoning (Codex) block first.
    pub thinking: f64,
    /// Per tool round: one or more calls spawn subagents (`Task`/`Agent`).
    pub subagent: f64,
    /// Per turn, once a session file has 30 KB: a compaction.
    pub compaction: f64,
    /// Per turn: the user rewinds to an earlier prompt of the line (Claude).
    pub rewind: f64,
    /// Per prompt: a pasted image (base64 block).
    pub image: f64,
    /// Per turn (Claude 2.1.x): a `/btw` side question replaying the last answer.
    pub btw: f64,
    /// Per Claude session: it is resumed into a new file that repeats its lines.
    pub resume: f64,
    /// Per turn: the user interrupts (Claude marker line, Codex `turn_aborted`).
    pub interrupt: f64,
    /// Per turn: the model changes (`/model`).
    pub model_switch: f64,
    /// Per Codex response: `token_count` is re-emitted with unchanged totals.
    pub token_count_repeat: f64,
    /// Per tool result: the tool failed (`is_error`).
    pub tool_error: f64,
    /// Median tool-result size in bytes (lognormal, sigma 1.5, capped at 512 KB).
    pub result_median: f64,
}

impl Default for Shapes {
    fn default() -> Shapes {
        Shapes {
            size_sigma: 1.6,
            tool_rounds: 3.0,
            parallel_calls: 0.35,
            interleaved_results: 0.2,
            thinking: 0.5,
            subagent: 0.05,
            compaction: 0.03,
            rewind: 0.04,
            image: 0.03,
            btw: 0.02,
            resume: 0.08,
            interrupt: 0.04,
            model_switch: 0.03,
            token_count_repeat: 0.2,
            tool_error: 0.05,
            result_median: 1500.0,
        }
    }
}

impl Shapes {
    /// Every optional shape frequent, so that corpora of a few sessions
    /// hold each of them (property tests at small sizes).
    pub fn dense() -> Shapes {
        Shapes {
            parallel_calls: 0.5,
            interleaved_results: 0.3,
            subagent: 0.2,
            compaction: 0.2,
            rewind: 0.15,
            image: 0.1,
            btw: 0.15,
            resume: 0.3,
            interrupt: 0.1,
            model_switch: 0.1,
            token_count_repeat: 0.3,
            tool_error: 0.1,
            result_median: 800.0,
            ..Shapes::default()
        }
    }

    /// Only linear sessions with single tool calls: no parallel calls,
    /// subagents, compaction, rewinds, images, `/btw`, resumes,
    /// interruptions, model switches, repeated token counts or errors.
    pub fn plain() -> Shapes {
        Shapes {
            parallel_calls: 0.0,
            interleaved_results: 0.0,
            subagent: 0.0,
            compaction: 0.0,
            rewind: 0.0,
            image: 0.0,
            btw: 0.0,
            resume: 0.0,
            interrupt: 0.0,
            model_switch: 0.0,
            token_count_repeat: 0.0,
            tool_error: 0.0,
            ..Shapes::default()
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CorpusSpec {
    /// Fixes every random choice.
    pub seed: u64,
    /// Top-level sessions (main files, resumed ones included) across all
    /// agents; 0 derives it from `target_mb` (about two per MB).
    pub sessions: usize,
    /// Approximate total size of the tree in MB (each session overshoots
    /// its budget by at most one turn).
    pub target_mb: f64,
    /// The agents; each session's is drawn uniformly from them.
    pub agents: Vec<AgentKind>,
    /// Shape frequencies.
    pub shapes: Shapes,
    /// Largest session budget in MB.
    pub max_session_mb: f64,
    /// Extra bytes, as a fraction of `target_mb`, given to the newest
    /// sessions (their files grow by appended turns; see the module doc).
    pub grow: f64,
}

impl Default for CorpusSpec {
    fn default() -> CorpusSpec {
        CorpusSpec {
            seed: 0,
            sessions: 16,
            target_mb: 4.0,
            agents: vec![AgentKind::ClaudeCode, AgentKind::Codex],
            shapes: Shapes::default(),
            max_session_mb: 64.0,
            grow: 0.0,
        }
    }
}

/// Tokens of one provider request, in memoir's (and ccusage's) convention:
/// `input` excludes cache reads and writes (Codex's cached tokens are
/// subtracted from its `input_tokens`), `output` includes reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens billed at the normal rate.
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Prompt tokens read from the cache.
    pub cache_read: u64,
    /// Prompt tokens written to the cache (`cache_5m + cache_1h` when the
    /// split is written).
    pub cache_creation: u64,
    /// Of `cache_creation`: `ephemeral_5m_input_tokens`.
    pub cache_5m: u64,
    /// Of `cache_creation`: `ephemeral_1h_input_tokens`.
    pub cache_1h: u64,
    /// Reasoning tokens (a part of `output`; Codex only).
    pub reasoning: u64,
}

impl Tokens {
    /// Add `o` to these.
    pub fn add(&mut self, o: &Tokens) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_creation += o.cache_creation;
        self.cache_5m += o.cache_5m;
        self.cache_1h += o.cache_1h;
        self.reasoning += o.reasoning;
    }
}

/// One provider request (one API response) as written to a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestTruth {
    /// Claude `message.id` (Codex: none).
    pub message_id: Option<String>,
    /// Claude `requestId` (Codex: none).
    pub request_id: Option<String>,
    /// The model that answered.
    pub model: String,
    /// The time of the response's first line.
    pub timestamp: String,
    /// Its tokens.
    pub usage: Tokens,
    /// True where the request is counted: false for a copy of a request
    /// first written elsewhere (a resumed session's repeated lines, a
    /// `/btw` replay), which must not be counted again.
    pub counted: bool,
}

/// What a source session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A main session file.
    Main,
    /// A main session file that starts by repeating another's lines.
    Resumed,
    /// A subagent file (`<session>/subagents/agent-<id>.jsonl` or the older
    /// `agent-<id>.jsonl` beside the session).
    Subagent,
    /// A subagent run written inline (`isSidechain`) in its parent's file.
    InlineSidechain,
    /// A `/btw` side question (a sidechain file that replays the last answer).
    Btw,
}

/// Ground truth of one source session (a file, or an inline sidechain).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionTruth {
    /// The agent.
    pub agent: AgentKind,
    /// What it is.
    pub kind: SessionKind,
    /// The source session id (Claude `sessionId`, shared by a session's
    /// subagents; Codex thread id).
    pub session_id: String,
    /// The file, relative to the root, with `/` separators.
    pub path: String,
    /// For subagents, sidechains and `/btw`: the session they belong to.
    pub parent_session: Option<String>,
    /// For subagents and sidechains: the `agentId`.
    pub agent_id: Option<String>,
    /// For subagents and sidechains: the `Task`/`Agent` call that spawned it.
    pub spawned_by: Option<String>,
    /// For resumed sessions: the session whose lines it repeats.
    pub resumed_from: Option<String>,
    /// The agent's version as written.
    pub version: String,
    /// The working directory.
    pub cwd: String,
    /// Human prompts written here (repeated copies excluded), in order.
    pub prompts: Vec<String>,
    /// Tool call ids written here, in order.
    pub tool_calls: Vec<String>,
    /// Tool result ids written here, in file order.
    pub tool_results: Vec<String>,
    /// Provider requests, in order.
    pub requests: Vec<RequestTruth>,
    /// Rewinds (each leaves exactly one abandoned branch).
    pub rewinds: usize,
    /// Compactions (`compact_boundary` + summary).
    pub compactions: usize,
    /// Interruptions.
    pub interrupts: usize,
    /// Pasted images.
    pub images: usize,
    /// Time of the first record (line) of this session.
    pub first_time: String,
    /// Time of the last record (line) of this session.
    pub last_time: String,
    /// Lines written for it.
    pub lines: u64,
    /// Bytes written for it (inline sidechains: their lines' bytes).
    pub bytes: u64,
}

impl SessionTruth {
    /// Usage counted for this session (copies excluded).
    pub fn counted_usage(&self) -> Tokens {
        let mut t = Tokens::default();
        for r in self.requests.iter().filter(|r| r.counted) {
            t.add(&r.usage);
        }
        t
    }

    /// Requests counted for this session.
    pub fn counted_requests(&self) -> usize {
        self.requests.iter().filter(|r| r.counted).count()
    }
}

/// The generator's record of a written tree: its independent ground truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The spec that wrote it.
    pub spec: CorpusSpec,
    /// Bytes of all files.
    pub bytes: u64,
    /// Bytes this run wrote (whole new files plus appended tails).
    pub bytes_written: u64,
    /// Every source session: main files first in generation order, each
    /// followed by its subagents, sidechains and `/btw` files.
    pub sessions: Vec<SessionTruth>,
}

impl Manifest {
    /// Counted usage summed per source session id (a Claude session with its
    /// subagents, sidechains and `/btw` files; a Codex thread).
    pub fn usage_by_session(&self) -> BTreeMap<String, Tokens> {
        let mut out: BTreeMap<String, Tokens> = BTreeMap::new();
        for s in &self.sessions {
            out.entry(s.session_id.clone())
                .or_default()
                .add(&s.counted_usage());
        }
        out
    }

    /// The files of one agent.
    pub fn files(&self, agent: AgentKind) -> Vec<&str> {
        let mut v: Vec<&str> = self
            .sessions
            .iter()
            .filter(|s| s.agent == agent && s.kind != SessionKind::InlineSidechain)
            .map(|s| s.path.as_str())
            .collect();
        v.dedup();
        v
    }

    /// JSON text of the manifest.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// One file a session generator produced.
struct OutFile {
    rel: String,
    bytes: Vec<u8>,
}

/// What a session generator returns.
struct Generated {
    files: Vec<OutFile>,
    truths: Vec<SessionTruth>,
    /// The main file's lines (a later resumed session repeats them).
    main_lines: Vec<String>,
}

/// Per-session plan.
struct Plan {
    agent: AgentKind,
    budget: u64,
    start_ms: i64,
    /// Growth: bytes written beyond what `budget` writes.
    extra: u64,
    /// Resume this plan's predecessor (a Claude session right before it).
    resumes_previous: bool,
}

/// Error of [`generate`]: a file could not be written.
#[derive(Debug)]
pub struct CorpusError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub source: io::Error,
}

impl std::fmt::Display for CorpusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write {}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for CorpusError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Write the tree `spec` describes under `root` (Claude Code files under
/// `root/claude`, Codex under `root/codex`, so each is an agent home) and
/// return its [`Manifest`]. Files already there that hold a prefix of what
/// is to be written are appended to, not rewritten.
pub fn generate(spec: &CorpusSpec, root: &Path) -> Result<Manifest, CorpusError> {
    let plans = plan(spec);
    let mut manifest = Manifest {
        spec: spec.clone(),
        bytes: 0,
        bytes_written: 0,
        sessions: Vec::new(),
    };
    let mut previous_main: Vec<String> = Vec::new();
    let mut previous_id = String::new();
    for (i, p) in plans.iter().enumerate() {
        let rng = Rng::derive(spec.seed, i as u64 + 1);
        let resume = p
            .resumes_previous
            .then_some((previous_id.as_str(), previous_main.as_slice()));
        let run = |budget: u64| match p.agent {
            AgentKind::ClaudeCode => {
                claude::session(rng.clone(), &spec.shapes, i, budget, p.start_ms, resume)
            }
            AgentKind::Codex => codex::session(rng.clone(), &spec.shapes, i, budget, p.start_ms),
        };
        let mut g = run(p.budget);
        if p.extra > 0 {
            // Growth is measured from what the base budget wrote (its last
            // turn may overshoot the budget by more than the growth).
            let written: u64 = g.files.iter().map(|f| f.bytes.len() as u64).sum();
            g = run(written + p.extra);
        }
        let home = root.join(home_dir(p.agent));
        for f in &g.files {
            let path = home.join(&f.rel);
            manifest.bytes += f.bytes.len() as u64;
            manifest.bytes_written +=
                write_or_append(&path, &f.bytes).map_err(|source| CorpusError { path, source })?;
        }
        if p.agent == AgentKind::ClaudeCode {
            previous_id = g.truths[0].session_id.clone();
        }
        previous_main = g.main_lines;
        for mut t in g.truths {
            t.path = format!("{}/{}", home_dir(p.agent), t.path);
            manifest.sessions.push(t);
        }
    }
    Ok(manifest)
}

/// The agent's home directory under the corpus root.
pub fn home_dir(agent: AgentKind) -> &'static str {
    match agent {
        AgentKind::ClaudeCode => "claude",
        AgentKind::Codex => "codex",
    }
}

/// Budgets, agents and start times of every top-level session.
fn plan(spec: &CorpusSpec) -> Vec<Plan> {
    let mut rng = Rng::derive(spec.seed, 0);
    let n = if spec.sessions == 0 {
        ((spec.target_mb * 2.0).ceil() as usize).max(1)
    } else {
        spec.sessions
    };
    let agents = if spec.agents.is_empty() {
        vec![AgentKind::ClaudeCode]
    } else {
        spec.agents.clone()
    };
    let weights: Vec<f64> = (0..n)
        .map(|_| rng.lognormal(1.0, spec.shapes.size_sigma))
        .collect();
    let sum: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let total = spec.target_mb.max(0.0) * 1_048_576.0;
    let max = (spec.max_session_mb * 1_048_576.0).max(4096.0);
    // Sessions run over 90 days from 2026-03-02, newest last.
    let t0 = time::ms_of(2026, 3, 2);
    let span = 90 * 86_400_000i64;
    let mut plans: Vec<Plan> = Vec::with_capacity(n);
    for (i, w) in weights.iter().enumerate() {
        let budget = (w / sum * total).clamp(3000.0, max) as u64;
        let start_ms = t0 + span * i as i64 / n as i64 + rng.range(0, 3_600_000) as i64;
        // A resumed session follows the Claude Code session it repeats.
        let resumes_previous = i > 0
            && plans[i - 1].agent == AgentKind::ClaudeCode
            && !plans[i - 1].resumes_previous
            && rng.chance(spec.shapes.resume);
        let agent = if resumes_previous {
            AgentKind::ClaudeCode
        } else {
            *rng.pick(&agents)
        };
        plans.push(Plan {
            agent,
            budget,
            start_ms,
            extra: 0,
            resumes_previous,
        });
    }
    // Growth goes to the newest sessions that no later session repeats.
    let mut extra = (spec.grow.max(0.0) * total) as u64;
    for i in (0..n).rev() {
        if extra == 0 {
            break;
        }
        if plans.get(i + 1).is_some_and(|p| p.resumes_previous) {
            continue;
        }
        let add = extra.min(plans[i].budget.max(64 * 1024));
        plans[i].extra = add;
        extra -= add;
    }
    plans
}

/// Write `bytes` to `path`: append the tail when the file holds a prefix of
/// them, leave it when it holds them all, else (re)write it. Returns the
/// bytes written.
fn write_or_append(path: &Path, bytes: &[u8]) -> io::Result<u64> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    if let Ok(mut f) = fs::File::open(path) {
        let len = f.metadata()?.len() as usize;
        if len <= bytes.len() {
            let mut have = Vec::with_capacity(len);
            f.read_to_end(&mut have)?;
            if have == bytes[..len] {
                if len == bytes.len() {
                    return Ok(0);
                }
                let mut w = fs::OpenOptions::new().append(true).open(path)?;
                w.write_all(&bytes[len..])?;
                return Ok((bytes.len() - len) as u64);
            }
        }
    }
    fs::write(path, bytes)?;
    Ok(bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> CorpusSpec {
        CorpusSpec {
            seed,
            sessions: 12,
            target_mb: 1.0,
            ..CorpusSpec::default()
        }
    }

    fn tree_bytes(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.insert(
                        p.strip_prefix(root).unwrap().to_path_buf(),
                        fs::read(&p).unwrap(),
                    );
                }
            }
        }
        out
    }

    #[test]
    fn the_same_spec_writes_the_same_tree_and_another_seed_another() {
        let (a, b, c) = (tempfile_dir("a"), tempfile_dir("b"), tempfile_dir("c"));
        let ma = generate(&spec(5), &a).unwrap();
        let mb = generate(&spec(5), &b).unwrap();
        let mc = generate(&spec(6), &c).unwrap();
        assert_eq!(ma, mb);
        assert_eq!(tree_bytes(&a), tree_bytes(&b));
        assert_ne!(tree_bytes(&a), tree_bytes(&c));
        assert_ne!(ma.sessions, mc.sessions);
        for d in [a, b, c] {
            let _ = fs::remove_dir_all(d);
        }
    }

    #[test]
    fn every_line_is_json_and_the_manifest_counts_the_bytes() {
        let root = tempfile_dir("json");
        let m = generate(&spec(9), &root).unwrap();
        let files = tree_bytes(&root);
        let total: u64 = files.values().map(|b| b.len() as u64).sum();
        assert_eq!(total, m.bytes);
        for (p, b) in &files {
            for line in b.split(|c| *c == b'\n').filter(|l| !l.is_empty()) {
                serde_json::from_slice::<serde_json::Value>(line)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            }
        }
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn growing_appends_to_the_newest_sessions_only() {
        let root = tempfile_dir("grow");
        let before_m = generate(&spec(11), &root).unwrap();
        let before = tree_bytes(&root);
        let grown = CorpusSpec {
            grow: 0.05,
            ..spec(11)
        };
        let after_m = generate(&grown, &root).unwrap();
        let after = tree_bytes(&root);
        assert!(after_m.bytes > before_m.bytes);
        assert_eq!(after_m.bytes_written, after_m.bytes - before_m.bytes);
        for (p, old) in &before {
            let new = &after[p];
            assert!(new.starts_with(old), "{} was rewritten", p.display());
        }
        let _ = fs::remove_dir_all(root);
    }

    /// The files agree with the manifest, read independently of the
    /// generator: ids, result parents, split responses, times, Codex totals.
    #[test]
    fn the_files_say_what_the_manifest_says() {
        use serde_json::Value;
        use std::collections::{BTreeSet, HashMap};
        let root = tempfile_dir("truth");
        let spec = CorpusSpec {
            seed: 21,
            sessions: 10,
            target_mb: 1.0,
            shapes: Shapes::dense(),
            ..CorpusSpec::default()
        };
        let m = generate(&spec, &root).unwrap();
        let mut paths: BTreeSet<&str> = BTreeSet::new();
        for s in &m.sessions {
            paths.insert(&s.path);
        }
        for path in paths {
            let truths: Vec<&SessionTruth> = m.sessions.iter().filter(|s| s.path == path).collect();
            let text = fs::read_to_string(root.join(path)).unwrap();
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let want_calls: BTreeSet<&str> = truths
                .iter()
                .flat_map(|t| t.tool_calls.iter().map(String::as_str))
                .collect();
            let want_results: Vec<&str> = truths
                .iter()
                .flat_map(|t| t.tool_results.iter().map(String::as_str))
                .collect();
            let mut calls = BTreeSet::new();
            let mut results = Vec::new();
            let times: Vec<&str> = lines
                .iter()
                .map(|l| l["timestamp"].as_str().unwrap())
                .collect();
            if truths[0].kind != SessionKind::Resumed {
                assert!(
                    times.windows(2).all(|w| w[0] <= w[1]),
                    "{path}: time goes back"
                );
                assert_eq!(times[0], truths[0].first_time, "{path}");
            }
            assert_eq!(*times.last().unwrap(), truths[0].last_time, "{path}");
            if truths[0].agent == AgentKind::ClaudeCode {
                let mut call_line: HashMap<String, String> = HashMap::new();
                let mut by_message: HashMap<String, (Value, Value)> = HashMap::new();
                let copied: usize = if truths[0].kind == SessionKind::Resumed {
                    // The copy's ids belong to the session it repeats.
                    let from = truths[0].resumed_from.as_deref().unwrap();
                    m.sessions
                        .iter()
                        .find(|s| {
                            s.session_id == from
                                && s.kind != SessionKind::Subagent
                                && s.kind != SessionKind::Btw
                        })
                        .map_or(0, |s| s.lines as usize)
                } else {
                    0
                };
                for (i, l) in lines.iter().enumerate() {
                    let uuid = l["uuid"].as_str().unwrap().to_string();
                    for b in l["message"]["content"].as_array().into_iter().flatten() {
                        if b["type"] == "tool_use" {
                            call_line.insert(b["id"].as_str().unwrap().into(), uuid.clone());
                            if i >= copied {
                                calls.insert(b["id"].as_str().unwrap().to_string());
                            }
                        }
                        if b["type"] == "tool_result" {
                            let id = b["tool_use_id"].as_str().unwrap();
                            assert_eq!(
                                l["parentUuid"].as_str(),
                                call_line.get(id).map(String::as_str),
                                "{path}: result {id} hangs from its call line"
                            );
                            if let Some(src) = l.get("sourceToolAssistantUUID") {
                                assert_eq!(src.as_str(), l["parentUuid"].as_str());
                            }
                            if i >= copied {
                                results.push(id.to_string());
                            }
                        }
                    }
                    if l["type"] == "assistant" {
                        let id = l["message"]["id"].as_str().unwrap().to_string();
                        let seen = by_message
                            .entry(id)
                            .or_insert((l["requestId"].clone(), l["message"]["usage"].clone()));
                        assert_eq!(
                            seen,
                            &(l["requestId"].clone(), l["message"]["usage"].clone()),
                            "{path}: split response differs"
                        );
                    }
                }
                let requests: usize = truths.iter().map(|t| t.requests.len()).sum();
                assert_eq!(
                    requests,
                    by_message.len(),
                    "{path}: one request per message.id"
                );
            } else {
                let mut last_total = Tokens::default();
                for l in &lines {
                    let p = &l["payload"];
                    if p["type"] == "function_call" || p["type"] == "custom_tool_call" {
                        calls.insert(p["call_id"].as_str().unwrap().to_string());
                    }
                    if p["type"] == "function_call_output" || p["type"] == "custom_tool_call_output"
                    {
                        results.push(p["call_id"].as_str().unwrap().to_string());
                    }
                    if p["type"] == "token_count" {
                        let t = &p["info"]["total_token_usage"];
                        let n = |k: &str| t[k].as_u64().unwrap();
                        last_total = Tokens {
                            input: n("input_tokens") - n("cached_input_tokens"),
                            output: n("output_tokens"),
                            cache_read: n("cached_input_tokens"),
                            reasoning: n("reasoning_output_tokens"),
                            ..Tokens::default()
                        };
                    }
                }
                assert_eq!(
                    last_total,
                    truths[0].counted_usage(),
                    "{path}: cumulative total"
                );
            }
            let calls: BTreeSet<&str> = calls.iter().map(String::as_str).collect();
            assert_eq!(calls, want_calls, "{path}");
            let mut results_sorted: Vec<&str> = results.iter().map(String::as_str).collect();
            let mut want_sorted = want_results.clone();
            results_sorted.sort();
            want_sorted.sort();
            assert_eq!(results_sorted, want_sorted, "{path}");
        }
        let _ = fs::remove_dir_all(root);
    }

    fn tempfile_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "memoir-testkit-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }
}
