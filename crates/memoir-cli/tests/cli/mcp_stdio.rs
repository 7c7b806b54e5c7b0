//! `memoir mcp` over stdio as a real process: a request over the size
//! limit is answered with a JSON-RPC error naming the limit (under its id
//! when the id can be read, `null` otherwise), and the server keeps serving.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::memoir_in;

/// 16 MiB: the most bytes one message may take, its newline included.
const LIMIT: usize = 16 * 1024 * 1024;

struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: Receiver<Value>,
}

impl Mcp {
    fn start(home: &std::path::Path) -> Mcp {
        let mut child = memoir_in(home)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:.200}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Mcp {
            child,
            stdin,
            answers,
        }
    }

    fn send_line(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, v: Value) {
        self.send_line(v.to_string().as_bytes());
    }

    /// The next answer (responses only: notifications are skipped).
    fn answer(&self) -> Value {
        loop {
            let v = self
                .answers
                .recv_timeout(Duration::from_secs(120))
                .expect("memoir mcp did not answer");
            if v.get("id").is_some() {
                return v;
            }
        }
    }

    fn ping(&mut self, id: u64) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        let a = self.answer();
        assert_eq!(a["id"], id, "{a}");
        assert!(a.get("result").is_some(), "{a}");
    }
}

/// A `tools/call` line of exactly `size` bytes (without its newline), the
/// `id` before or after the padding.
fn call_of_size(id: &Value, id_last: bool, size: usize) -> Vec<u8> {
    let make = |pad: usize| {
        let args = json!({"query": "x".repeat(pad)});
        let params = json!({"name": "search_sessions", "arguments": args});
        if id_last {
            format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{params},"id":{id}}}"#)
        } else {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
        }
    };
    let empty = make(0).len();
    let line = make(size - empty);
    assert_eq!(line.len(), size);
    line.into_bytes()
}

fn assert_too_large(a: &Value, id: &Value) {
    assert_eq!(&a["id"], id, "{a:.300}");
    assert_eq!(a["error"]["code"], -32600, "{a:.300}");
    let message = a["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("16777216") && message.contains("16 MiB"),
        "{message}"
    );
}

#[test]
fn an_oversized_request_is_answered_and_the_server_keeps_serving() {
    let home = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(home.path());
    mcp.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(mcp.answer()["id"], 1);
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    mcp.ping(2);

    // Over the limit by one byte (with the newline) and well over it; the
    // id first, last, a string, or not there at all.
    let mut next = 10;
    for size in [LIMIT, LIMIT + 3 * 1024 * 1024] {
        for (id, id_last) in [(json!(next), false), (json!(format!("late-{next}")), true)] {
            mcp.send_line(&call_of_size(&id, id_last, size));
            assert_too_large(&mcp.answer(), &id);
            mcp.ping(next + 1);
            next += 2;
        }
        let mut junk = vec![b'x'; size];
        junk[0] = b'{';
        mcp.send_line(&junk);
        assert_too_large(&mcp.answer(), &Value::Null);
        mcp.ping(next);
        next += 1;
    }
    // Exactly at the limit (newline included): served as usual.
    let id = json!(next);
    mcp.send_line(&call_of_size(&id, false, LIMIT - 1));
    let a = mcp.answer();
    assert_eq!(a["id"], id, "{a:.300}");
    assert!(
        !a.to_string().contains("16777216"),
        "a request within the limit was refused: {a:.300}"
    );
    mcp.ping(next + 1);

    // Closing stdin ends the server cleanly.
    drop(mcp.stdin.take());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = mcp.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "memoir mcp did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
