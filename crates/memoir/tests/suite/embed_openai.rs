//! The OpenAI-compatible client against a real HTTP server on 127.0.0.1,
//! started inside the test process: batching, order, prefixes, the
//! `dimensions` parameter, Matryoshka truncation, 429 with Retry-After, 5xx,
//! timeouts, wrong widths, malformed JSON, refused connections.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memoir::embed::{
    cosine, EmbeddingError, EmbeddingProvider, HashEmbedder, OpenAiConfig, OpenAiEmbedder,
};

/// What the server does with the next request.
#[derive(Clone, Debug)]
enum Reply {
    /// Embed each input with `HashEmbedder(width)`; width = the request's
    /// `dimensions` or the server's native width.
    Ok,
    /// Like `Ok`, but the data array is reversed (indices still right).
    Reversed,
    /// A status with optional headers and body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// Wait, then answer `Ok` (the client should have timed out).
    Sleep(Duration),
    /// Vectors of this width whatever was asked.
    Width(usize),
    /// `200` with a body that is not JSON.
    Malformed,
    /// `200` with one embedding fewer than inputs.
    Short,
}

#[derive(Debug, Clone)]
struct Seen {
    auth: Option<String>,
    body: serde_json::Value,
}

struct Server {
    port: u16,
    native: usize,
    script: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start(native: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("addr").port();
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, seen2, stop2) = (script.clone(), seen.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (s3, seen3) = (s2.clone(), seen2.clone());
                std::thread::spawn(move || handle(conn, native, &s3, &seen3));
            }
        });
        Self {
            port,
            native,
            script,
            seen,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().extend(replies);
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn config(&self) -> OpenAiConfig {
        OpenAiConfig {
            api_key_env: None,
            native_dims: Some(self.native),
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(100),
            timeout: Duration::from_secs(5),
            ..OpenAiConfig::new(self.url(), "test-embed")
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn handle(
    conn: TcpStream,
    native: usize,
    script: &Mutex<VecDeque<Reply>>,
    seen: &Mutex<Vec<Seen>>,
) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(conn.try_clone().expect("clone stream"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return; // the shutdown poke
    }
    let mut len = 0usize;
    let mut auth = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            if k == "content-length" {
                len = v.trim().parse().unwrap_or(0);
            } else if k == "authorization" {
                auth = Some(v.trim().to_string());
            }
        }
    }
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    seen.lock().unwrap().push(Seen {
        auth,
        body: body.clone(),
    });
    let reply = script.lock().unwrap().pop_front().unwrap_or(Reply::Ok);
    let inputs: Vec<String> = body["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    let asked = body["dimensions"].as_u64().map(|d| d as usize);
    let embed = |width: usize, reverse: bool, drop_one: bool| -> String {
        let e = HashEmbedder::new(width);
        let mut data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                serde_json::json!({"object": "embedding", "index": i, "embedding": e.embed_sync(t)})
            })
            .collect();
        if reverse {
            data.reverse();
        }
        if drop_one {
            data.pop();
        }
        serde_json::json!({"object": "list", "data": data, "model": body["model"],
                           "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        .to_string()
    };
    let (status, headers, text) = match reply {
        Reply::Ok => (200, vec![], embed(asked.unwrap_or(native), false, false)),
        Reply::Reversed => (200, vec![], embed(asked.unwrap_or(native), true, false)),
        Reply::Sleep(d) => {
            std::thread::sleep(d);
            (200, vec![], embed(asked.unwrap_or(native), false, false))
        }
        Reply::Width(w) => (200, vec![], embed(w, false, false)),
        Reply::Short => (200, vec![], embed(asked.unwrap_or(native), false, true)),
        Reply::Malformed => (
            200,
            vec![],
            "{\"data\": [ {\"embedding\": [0.1, ".to_string(),
        ),
        Reply::Status(code, headers, text) => (code, headers, text),
    };
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        text.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&text);
    let mut conn = conn;
    let _ = conn.write_all(out.as_bytes());
    let _ = conn.flush();
}

/// The key's variable is set in a child process (see `support::env_child`).
const KEY_VAR: &str = "MEMOIR_TEST_OPENAI_KEY_A";

#[test]
fn batches_keep_order_and_send_the_key() {
    if !crate::support::env_child::in_child() {
        let key = std::ffi::OsStr::new("sk-test-123");
        crate::support::env_child::run_in_child(
            "embed_openai::batches_keep_order_and_send_the_key",
            &[(KEY_VAR, key)],
        );
        return;
    }
    let srv = Server::start(32);
    let cfg = OpenAiConfig {
        api_key_env: Some(KEY_VAR.into()),
        batch_size: 2,
        ..srv.config()
    };
    let e = OpenAiEmbedder::new(cfg).expect("client");
    srv.push([Reply::Ok, Reply::Reversed, Reply::Ok]);
    let texts = [
        "alpha one",
        "beta two",
        "gamma three",
        "delta four",
        "epsilon five",
    ];
    let got = e.embed_batch(&texts).expect("embed");
    assert_eq!(got.len(), 5);
    let h = HashEmbedder::new(32);
    for (t, v) in texts.iter().zip(&got) {
        assert_eq!(v.len(), 32);
        assert!(cosine(v, &h.embed_sync(t)) > 0.9999, "{t}");
    }
    let seen = srv.seen();
    assert_eq!(seen.len(), 3, "5 texts in batches of 2");
    for s in &seen {
        assert_eq!(s.auth.as_deref(), Some("Bearer sk-test-123"));
        assert_eq!(s.body["model"], "test-embed");
        assert_eq!(s.body["encoding_format"], "float");
        assert!(s.body.get("dimensions").is_none());
    }
    assert_eq!(seen[2].body["input"], serde_json::json!(["epsilon five"]));
}

#[test]
fn prefixes_dimensions_and_matryoshka_truncation() {
    let srv = Server::start(64);
    let cfg = OpenAiConfig {
        query_prefix: "query: ".into(),
        document_prefix: "passage: ".into(),
        dimensions: Some(48),
        truncate_to: Some(16),
        ..srv.config()
    };
    let e = OpenAiEmbedder::new(cfg).expect("client");
    assert_eq!(e.dimensions(), 16);
    let d = e.embed("the cat sat").expect("doc");
    let q = e.embed_query("where is the cat").expect("query");
    let seen = srv.seen();
    assert_eq!(
        seen[0].body["input"],
        serde_json::json!(["passage: the cat sat"])
    );
    assert_eq!(seen[0].body["dimensions"], 48);
    assert_eq!(
        seen[1].body["input"],
        serde_json::json!(["query: where is the cat"])
    );
    // Client-side truncation of the 48-wide answer, renormalised.
    for (v, text) in [
        (&d, "passage: the cat sat"),
        (&q, "query: where is the cat"),
    ] {
        assert_eq!(v.len(), 16);
        let n: f32 = v.iter().map(|x| x * x).sum();
        assert!((n - 1.0).abs() < 1e-5);
        let full = HashEmbedder::new(48).embed_sync(text);
        assert!(cosine(v, &full[..16]) > 0.9999);
    }
}

#[test]
fn retry_after_429_is_honoured() {
    let srv = Server::start(8);
    let e = OpenAiEmbedder::new(srv.config()).expect("client");
    srv.push([
        Reply::Status(429, vec![("Retry-After", "1".into())], "{}".into()),
        Reply::Ok,
    ]);
    let start = Instant::now();
    let v = e.embed("x").expect("embed after retry");
    let waited = start.elapsed();
    assert_eq!(v.len(), 8);
    assert_eq!(srv.seen().len(), 2);
    assert!(
        waited >= Duration::from_millis(950),
        "waited only {waited:?}"
    );
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
}

#[test]
fn persistent_429_becomes_rate_limited() {
    let srv = Server::start(8);
    let cfg = OpenAiConfig {
        max_retries: 2,
        ..srv.config()
    };
    let e = OpenAiEmbedder::new(cfg).expect("client");
    srv.push(
        std::iter::repeat_n(
            Reply::Status(
                429,
                vec![("retry-after-ms", "40".into())],
                "slow down".into(),
            ),
            3,
        )
        .collect::<Vec<_>>(),
    );
    let err = e.embed("x").unwrap_err();
    assert_eq!(err, EmbeddingError::RateLimited { retry_after_ms: 40 });
    assert_eq!(srv.seen().len(), 3, "first try + 2 retries");

    // A Retry-After longer than we are willing to wait: no sleeping, no retry.
    srv.push([Reply::Status(
        429,
        vec![("Retry-After", "3600".into())],
        "{}".into(),
    )]);
    let start = Instant::now();
    let err = e.embed("y").unwrap_err();
    assert_eq!(
        err,
        EmbeddingError::RateLimited {
            retry_after_ms: 3_600_000
        }
    );
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(srv.seen().len(), 4);
}

#[test]
fn server_errors_are_retried_then_reported() {
    let srv = Server::start(8);
    let cfg = OpenAiConfig {
        max_retries: 2,
        ..srv.config()
    };
    let e = OpenAiEmbedder::new(cfg).expect("client");
    srv.push([
        Reply::Status(500, vec![], "boom".into()),
        Reply::Status(503, vec![], "busy".into()),
        Reply::Ok,
    ]);
    assert_eq!(e.embed("x").expect("third time lucky").len(), 8);
    assert_eq!(srv.seen().len(), 3);

    srv.push(std::iter::repeat_n(
        Reply::Status(502, vec![], "bad gateway".into()),
        3,
    ));
    let err = e.embed("x").unwrap_err();
    match err {
        EmbeddingError::BackendError(m) => assert!(m.contains("502"), "{m}"),
        other => panic!("expected BackendError, got {other:?}"),
    }
    assert_eq!(srv.seen().len(), 6);

    // Client errors are not retried.
    srv.push([Reply::Status(
        400,
        vec![],
        "{\"error\": \"input too long\"}".into(),
    )]);
    let err = e.embed("x").unwrap_err();
    assert!(
        matches!(&err, EmbeddingError::BadInput(m) if m.contains("input too long")),
        "{err:?}"
    );
    assert_eq!(srv.seen().len(), 7);
    srv.push([Reply::Status(401, vec![], "no key".into())]);
    let err = e.embed("x").unwrap_err();
    assert!(
        matches!(&err, EmbeddingError::BackendError(m) if m.contains("401")),
        "{err:?}"
    );
    assert_eq!(srv.seen().len(), 8);
}

#[test]
fn timeouts_are_bounded() {
    let srv = Server::start(8);
    let cfg = OpenAiConfig {
        max_retries: 1,
        timeout: Duration::from_millis(300),
        ..srv.config()
    };
    let e = OpenAiEmbedder::new(cfg).expect("client");
    // Answers slower than both attempts and their backoff together, so the
    // bound below has room on a loaded machine.
    srv.push([
        Reply::Sleep(Duration::from_millis(4000)),
        Reply::Sleep(Duration::from_millis(4000)),
    ]);
    let start = Instant::now();
    let err = e.embed("x").unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(&err, EmbeddingError::BackendError(m) if m.to_lowercase().contains("timeout") || m.to_lowercase().contains("timed out")),
        "{err:?}"
    );
    assert!(took < Duration::from_millis(3000), "took {took:?}");
    assert_eq!(srv.seen().len(), 2);

    // A slow answer then a quick one: the retry succeeds.
    srv.push([Reply::Sleep(Duration::from_millis(1000)), Reply::Ok]);
    assert_eq!(e.embed("x").expect("retry").len(), 8);
}

#[test]
fn wrong_widths_and_malformed_answers_are_errors() {
    let srv = Server::start(8);
    let e = OpenAiEmbedder::new(srv.config()).expect("client");
    srv.push([Reply::Width(7)]);
    assert_eq!(
        e.embed("x").unwrap_err(),
        EmbeddingError::DimensionMismatch {
            expected: 8,
            got: 7
        }
    );
    srv.push([Reply::Malformed]);
    let err = e.embed("x").unwrap_err();
    assert!(
        matches!(&err, EmbeddingError::BackendError(m) if m.contains("malformed")),
        "{err:?}"
    );
    srv.push([Reply::Short]);
    let err = e.embed_batch(&["a", "b"]).unwrap_err();
    assert!(
        matches!(&err, EmbeddingError::BackendError(m) if m.contains("1 embeddings for 2")),
        "{err:?}"
    );
    // None of these were retried.
    assert_eq!(srv.seen().len(), 3);

    // Truncation cannot widen: asking for 16 of an 8-wide answer.
    let e16 = OpenAiEmbedder::new(OpenAiConfig {
        native_dims: None,
        truncate_to: Some(16),
        ..srv.config()
    })
    .expect("client");
    assert_eq!(e16.dimensions(), 16);
    let err = e16.embed("x").unwrap_err();
    assert_eq!(
        err,
        EmbeddingError::DimensionMismatch {
            expected: 16,
            got: 8
        }
    );
}

#[test]
fn refused_connection_is_a_backend_error() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let cfg = OpenAiConfig {
        api_key_env: None,
        native_dims: Some(8),
        max_retries: 1,
        initial_backoff: Duration::from_millis(10),
        ..OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m")
    };
    let e = OpenAiEmbedder::new(cfg).expect("client");
    let err = e.embed("x").unwrap_err();
    assert!(matches!(err, EmbeddingError::BackendError(_)), "{err:?}");
}
