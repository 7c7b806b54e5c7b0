//! `memoir mcp` over stdin/stdout: one JSON-RPC message per line, at most
//! [`MAX_REQUEST_BYTES`] per line.
//!
//! The SDK's own stdio transport drops a longer line without a word, and a
//! client waiting for its answer would wait for ever. So lines pass through
//! [`serve`]'s filter first: a line within the limit goes to the SDK
//! unchanged; a longer one is read to its end without being kept, and is
//! answered with a JSON-RPC error (code `-32600`, invalid request) naming
//! the limit, under the request's `id` when one can be read from the line
//! (`null` otherwise), while the server keeps serving. Answers of both
//! kinds reach stdout whole, one line each, never interleaved.

use std::sync::Arc;

use rmcp::ServiceExt as _;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::MemoirMcp;

/// The most bytes one message may take, its newline included (16 MiB: the
/// SDK's own limit, and its HTTP transport's).
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// The JSON-RPC error code of an oversized request (invalid request).
pub const TOO_LARGE_CODE: i64 = -32600;

type Output<W> = Arc<Mutex<W>>;

/// Serve `server` on `input`/`output` until `input` ends (or the SDK stops).
pub async fn serve<R, W>(server: MemoirMcp, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_sdk, sdk_in) = tokio::io::duplex(1 << 16);
    let (sdk_out, from_sdk) = tokio::io::duplex(1 << 16);
    let output = Arc::new(Mutex::new(output));
    let filter = tokio::spawn(filter_requests(input, to_sdk, output.clone()));
    let pump = tokio::spawn(pass_answers(from_sdk, output.clone()));
    let served = async {
        let running = server
            .serve((sdk_in, sdk_out))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok::<_, std::io::Error>(())
    };
    let result = served.await;
    // The SDK has stopped: nothing more is read; what it wrote is flushed.
    filter.abort();
    match pump.await {
        Ok(r) => r?,
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    }
    result
}

/// Copy the SDK's answers to `output`, a whole line under the lock at a time.
async fn pass_answers<W>(
    from_sdk: tokio::io::DuplexStream,
    output: Output<W>,
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin + Send,
{
    let mut reader = BufReader::new(from_sdk);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            return Ok(());
        }
        let mut out = output.lock().await;
        out.write_all(&line).await?;
        out.flush().await?;
    }
}

/// Pass lines within the limit to the SDK; answer longer ones.
async fn filter_requests<R, W>(
    input: R,
    mut to_sdk: tokio::io::DuplexStream,
    output: Output<W>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut line: Vec<u8> = Vec::new();
    // The line being skipped, with what was read of its id and its size.
    let mut oversized: Option<(IdScan, usize)> = None;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            break;
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let take = newline.map_or(buf.len(), |i| i + 1);
        let chunk = &buf[..take];
        if let Some((scan, size)) = &mut oversized {
            scan.feed(chunk);
            *size += take;
        } else if line.len() + take > MAX_REQUEST_BYTES {
            let mut scan = IdScan::default();
            scan.feed(&line);
            scan.feed(chunk);
            oversized = Some((scan, line.len() + take));
            line = Vec::new();
        } else {
            line.extend_from_slice(chunk);
        }
        reader.consume(take);
        if newline.is_some() {
            match oversized.take() {
                Some((scan, size)) => answer_too_large(&output, scan.id(), size).await?,
                None => {
                    to_sdk.write_all(&line).await?;
                    line.clear();
                }
            }
        }
    }
    match oversized.take() {
        Some((scan, size)) => answer_too_large(&output, scan.id(), size).await?,
        None if !line.is_empty() => to_sdk.write_all(&line).await?,
        None => {}
    }
    to_sdk.shutdown().await
}

async fn answer_too_large<W>(output: &Output<W>, id: Value, size: usize) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin + Send,
{
    let message = format!(
        "request too large: {size} bytes or more in one message; memoir mcp reads at most \
         {MAX_REQUEST_BYTES} bytes (16 MiB) per message over stdio"
    );
    eprintln!("memoir mcp: refused a request (id {id}): {message}");
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": TOO_LARGE_CODE, "message": message },
    });
    let mut text = answer.to_string().into_bytes();
    text.push(b'\n');
    let mut out = output.lock().await;
    out.write_all(&text).await?;
    out.flush().await
}

/// Finds the top-level `"id"` of a JSON-RPC request while its bytes stream
/// past, keeping only a few of them.
#[derive(Default)]
struct IdScan {
    depth: u32,
    in_string: bool,
    escape: bool,
    /// At depth 1, the next string is a key.
    expect_key: bool,
    reading_key: bool,
    key: Vec<u8>,
    /// A key was read; its `:` follows.
    after_key: bool,
    capturing: bool,
    value: Vec<u8>,
    found: Option<Value>,
}

/// The most bytes of an id value kept.
const MAX_ID_BYTES: usize = 1024;

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.found.is_some() {
                return;
            }
            if self.capturing {
                if !self.in_string && self.depth == 1 && (b == b',' || b == b'}') {
                    self.finish_value();
                } else if self.value.len() < MAX_ID_BYTES {
                    self.value.push(b);
                } else {
                    // Too long for an id: give up on it.
                    self.capturing = false;
                    self.found = Some(Value::Null);
                    return;
                }
            }
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.reading_key {
                        self.reading_key = false;
                        self.after_key = true;
                    }
                    continue;
                }
                if self.reading_key && self.key.len() <= 2 {
                    self.key.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && self.expect_key {
                        self.reading_key = true;
                        self.expect_key = false;
                        self.key.clear();
                    }
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    self.expect_key = self.depth == 1 && b == b'{';
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b',' if self.depth == 1 => self.expect_key = true,
                b':' if self.depth == 1 && self.after_key => {
                    self.after_key = false;
                    if self.key == b"id" {
                        self.capturing = true;
                        self.value.clear();
                    }
                }
                _ => {}
            }
        }
    }

    fn finish_value(&mut self) {
        self.capturing = false;
        let id = serde_json::from_slice::<Value>(self.value.trim_ascii())
            .ok()
            .filter(|v| v.is_number() || v.is_string());
        self.found = Some(id.unwrap_or(Value::Null));
    }

    /// The request's id, `null` when none could be read.
    fn id(mut self) -> Value {
        if self.capturing {
            self.finish_value();
        }
        self.found.unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(line: &str, chunk: usize) -> Value {
        let mut scan = IdScan::default();
        for part in line.as_bytes().chunks(chunk) {
            scan.feed(part);
        }
        scan.id()
    }

    #[test]
    fn the_id_is_read_wherever_it_is_and_in_any_chunking() {
        let big = "x".repeat(5000);
        let cases = [
            (
                format!(r#"{{"jsonrpc":"2.0","id":7,"method":"m","params":{{"t":"{big}"}}}}"#),
                serde_json::json!(7),
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","method":"m","params":{{"id":1,"t":"{big}"}},"id":"abc"}}"#
                ),
                serde_json::json!("abc"),
            ),
            (
                format!(r#"{{ "params" : {{"a":["id",{{"id":3}}],"t":"{big}"}}, "id" : -12 }}"#),
                serde_json::json!(-12),
            ),
            (
                format!(r#"{{"method":"m","params":{{"t":"\"id\":5 {big}"}},"id":"q\"x"}}"#),
                serde_json::json!("q\"x"),
            ),
            (
                format!(r#"{{"method":"m","params":{{"t":"{big}"#),
                Value::Null,
            ),
            (
                format!(r#"{{"id":{{"nested":1}},"t":"{big}"}}"#),
                Value::Null,
            ),
            (format!(r#"[{{"id":1,"t":"{big}"}}]"#), Value::Null),
            (big.clone(), Value::Null),
        ];
        for (line, want) in &cases {
            for chunk in [1, 3, 64, 1 << 20] {
                assert_eq!(
                    &id_of(line, chunk),
                    want,
                    "chunk {chunk}: {}",
                    &line[..60.min(line.len())]
                );
            }
        }
    }
}
