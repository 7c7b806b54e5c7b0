//! Stable-toolchain fuzzing of every parser that reads untrusted bytes: the
//! line scanner and record decoder, the message deserialisers, the OpenAI and
//! Anthropic converters and the HTTP API's request bodies.
//!
//! Each target mutates a corpus seeded from the repository's fixtures
//! (`testdata/transcripts/`, lines this build writes, converter and wire
//! examples) with a seeded generator: bit flips, interesting bytes, deletions,
//! duplications, splices and truncations. A target must never panic, and
//! where a parse succeeds, a property must hold (a decoded record re-encodes
//! to a line that decodes to the same record; a parsed message serialises to
//! JSON that parses to the same message).
//!
//! Budget: by default a few hundred inputs per target (part of every test
//! run); `MEMOIR_FUZZ_SECS=N` runs each target for N seconds and
//! `MEMOIR_FUZZ_SEED` picks the generator seed (`.ci/fuzz` does both). A
//! panic prints the seed, the target and the input (hex) and saves the input
//! under the system temp dir; add it to `tests/data/fuzz/<target>/` and it is
//! replayed on every run from then on (the regression corpus).

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memoir::client::wire;
use memoir::message::anthropic::{from_anthropic, to_anthropic_lossy};
use memoir::message::openai::{from_openai, to_openai_lossy};
use memoir::message::{Block, Message, Role};
use memoir::record::{Record, SessionMeta};
use memoir::store::scan::scan;
use memoir::transcript::codec;
use memoir::transcript::Session;
use serde_json::{json, Value};

/// xorshift64*: deterministic, seeded, printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: &[u8] = b"\"{}[]:,\\\n\r\t 0-9eE.ntfu\x00\x7f\xff\xc3\xa9";

fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                v.drain(i..i + n);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(32));
                let piece = v[i..i + n].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, piece);
            }
            4 => {
                let other = &corpus[rng.below(corpus.len())];
                if !other.is_empty() {
                    let i = rng.below(other.len());
                    let n = 1 + rng.below((other.len() - i).min(64));
                    let at = rng.below(len + 1);
                    v.splice(at..at, other[i..i + n].iter().copied());
                }
            }
            5 if len > 0 => v.truncate(rng.below(len)),
            _ => {
                let at = rng.below(len + 1);
                v.insert(at, INTERESTING[rng.below(INTERESTING.len())]);
            }
        }
    }
    v
}

/// Give a line a correct `h` again (so mutations reach the payload parser
/// instead of stopping at the checksum): rehash the bytes before the last
/// `,"h":"` with the codec's own hash.
fn reseal(line: &mut [u8]) {
    const KEY: &[u8] = b",\"h\":\"";
    let Some(at) = line.windows(KEY.len()).rposition(|w| w == KEY) else {
        return;
    };
    let hex_start = at + KEY.len();
    if line.len() < hex_start + 2 * codec::HASH_LEN {
        return;
    }
    let hex = codec::hex(&codec::hash_bytes(&line[..at]));
    line[hex_start..hex_start + 2 * codec::HASH_LEN].copy_from_slice(hex.as_bytes());
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Lines written by this build: a header, messages of every block kind, a
/// title, a config, a summary.
fn native_transcript() -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Session::create(dir.path(), SessionMeta::new("fuzz-seed")).expect("create");
    s.append_messages(&[
        Message::user("hello \u{e9}\u{1F600} \"quoted\" \\ back"),
        Message::new(
            Role::Assistant,
            vec![
                Block::Thinking {
                    text: "think".into(),
                    signature: Some("sig".into()),
                },
                Block::ToolUse {
                    id: "t1".into(),
                    name: "shell".into(),
                    input: json!({"cmd": "ls", "n": [1, 2.5, null, true]}),
                },
            ],
        ),
        Message::tool_result("t1", "a\nb", true),
    ])
    .expect("append");
    s.append_records(&[
        Record::Title {
            title: "a title".into(),
        },
        Record::Config(Box::new(memoir::record::RunConfig {
            system_prompt: Some("be careful".into()),
            ..Default::default()
        })),
    ])
    .expect("records");
    s.record_summary(memoir::message::Usage::default(), 1)
        .expect("summary");
    std::fs::read(&s.path).expect("read")
}

/// The seed corpus: fixture files, their lines, native lines, and the
/// regression inputs of `target`.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut files = Vec::new();
    files_under(&repo_root().join("testdata/transcripts"), &mut files);
    let mut out: Vec<Vec<u8>> = Vec::new();
    let native = native_transcript();
    for bytes in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|p| std::fs::read(p).ok())
        .chain(std::iter::once(native))
    {
        out.extend(bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec));
        out.push(bytes);
    }
    for v in [
        json!([{"role": "system", "content": "be brief"},
               {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
               {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "ok"}]),
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]},
               {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                                  {"type": "tool_use", "id": "u1", "name": "f", "input": {"a": 1}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": [{"type": "text", "text": "r"}], "is_error": false}]}]),
        json!({"meta": {"id": "s1", "created_at": "2026-01-01T00:00:00Z"}, "id": "s1"}),
        json!({"records": [{"record": "title", "title": "t"}], "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}], "expected_seq": 3}),
        json!({"parent": "p", "upto": 2, "id": "f"}),
        json!({"query": "where", "top_k": 5}),
    ] {
        out.push(serde_json::to_vec(&v).expect("json"));
    }
    let mut regressions = Vec::new();
    files_under(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/fuzz")
            .join(target),
        &mut regressions,
    );
    out.extend(regressions.iter().filter_map(|p| std::fs::read(p).ok()));
    out
}

fn budget() -> (Option<Duration>, usize) {
    let secs = std::env::var("MEMOIR_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64);
    (secs, 400)
}

fn seed() -> u64 {
    std::env::var("MEMOIR_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6d65_6d6f_6972)
        | 1
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Run `target` on every corpus entry, then on mutations, within the budget.
fn fuzz(name: &str, target: impl Fn(&[u8])) {
    let corpus = corpus(name);
    let seed = seed();
    let mut rng = Rng(seed);
    let (secs, min_runs) = budget();
    let start = Instant::now();
    let mut runs = 0usize;
    let run_one = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| target(input))).is_err() {
            let path = std::env::temp_dir().join(format!(
                "memoir-fuzz-{name}-{}.bin",
                hex_of(&codec::hash_bytes(input)[..8])
            ));
            let _ = std::fs::write(&path, input);
            panic!(
                "fuzz target {name} failed (MEMOIR_FUZZ_SEED={seed}); input saved to {} \
                 (copy it to crates/memoir/tests/data/fuzz/{name}/): {}",
                path.display(),
                hex_of(input)
            );
        }
    };
    for input in &corpus {
        run_one(input);
    }
    loop {
        let done = match secs {
            Some(limit) => start.elapsed() >= limit,
            None => runs >= min_runs,
        };
        if done {
            break;
        }
        let base = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, base, &corpus);
        run_one(&input);
        runs += 1;
    }
    eprintln!(
        "fuzz {name}: {runs} mutated inputs + {} seeds in {:?}",
        corpus.len(),
        start.elapsed()
    );
}

/// A decoded record, framed again, decodes to the same record.
fn check_decode(line: &[u8]) {
    let mut buf = line.to_vec();
    if let Ok(d) = codec::decode(&mut buf) {
        let mut out = Vec::new();
        let Ok(_) = codec::encode_into(&mut out, d.seq, &d.prev, &d.record) else {
            return;
        };
        out.pop(); // the newline
        let again = codec::decode(&mut out).expect("a re-encoded record must decode");
        assert_eq!(again.record, d.record, "re-encoding changed the record");
        assert_eq!(again.seq, d.seq);
    }
}

#[test]
fn fuzz_scanner_and_decoder() {
    fuzz("scan", |bytes| {
        // The whole input as a file, as is and with every line resealed.
        let raw = scan(Cursor::new(bytes)).expect("in-memory reads cannot fail");
        assert!(raw.records.len() <= bytes.split(|&b| b == b'\n').count());
        let mut sealed = Vec::with_capacity(bytes.len());
        for line in bytes.split(|&b| b == b'\n') {
            let mut line = line.to_vec();
            reseal(&mut line);
            check_decode(&line);
            sealed.extend_from_slice(&line);
            sealed.push(b'\n');
        }
        let _ = scan(Cursor::new(&sealed)).expect("in-memory reads cannot fail");
    });
}

#[test]
fn fuzz_message_deserialisers() {
    fuzz("message", |bytes| {
        if let Ok(m) = serde_json::from_slice::<Message>(bytes) {
            let text = serde_json::to_string(&m).expect("a parsed message serialises");
            let back: Message = serde_json::from_str(&text).expect("and parses back");
            assert_eq!(back, m, "message round trip");
        }
        if let Ok(b) = serde_json::from_slice::<Block>(bytes) {
            let text = serde_json::to_string(&b).expect("a parsed block serialises");
            let back: Block = serde_json::from_str(&text).expect("and parses back");
            assert_eq!(back, b, "block round trip");
        }
        if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(bytes) {
            let _ = Record::from_object(o);
        }
    });
}

#[test]
fn fuzz_openai_and_anthropic_converters() {
    fuzz("convert", |bytes| {
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
            return;
        };
        let items: Vec<Value> = match v {
            Value::Array(a) => a,
            other => vec![other],
        };
        if let Ok(messages) = from_openai(&items) {
            let _ = to_openai_lossy(&messages);
            let _ = to_anthropic_lossy(&messages);
        }
        let system = items.first().filter(|v| v.is_string());
        if let Ok(messages) = from_anthropic(system, &items) {
            let _ = to_anthropic_lossy(&messages);
            let _ = to_openai_lossy(&messages);
        }
    });
}

#[test]
fn fuzz_http_request_bodies() {
    fuzz("wire", |bytes| {
        let _ = serde_json::from_slice::<wire::CreateSession>(bytes);
        let _ = serde_json::from_slice::<wire::ForkRequest>(bytes);
        let _ = serde_json::from_slice::<wire::SearchRequest>(bytes);
        if let Ok(req) = serde_json::from_slice::<wire::AppendRequest>(bytes) {
            let _ = wire::records_from(req.records, req.messages);
        }
    });
}

/// The importers read files written by other programs: Claude Code, Codex and
/// Gemini CLI sources of any bytes parse to a report, never a panic.
#[cfg(feature = "import")]
#[test]
fn fuzz_importers() {
    use memoir::import::{parse_source, Agent, ParseContext, Source};
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("source.jsonl");
    fuzz("import", |bytes| {
        std::fs::write(&path, bytes).expect("write the fuzz input");
        for agent in [Agent::ClaudeCode, Agent::Codex, Agent::GeminiCli] {
            let source = Source {
                agent,
                path: path.clone(),
            };
            let _ = parse_source(&source, &ParseContext::default());
        }
    });
}
