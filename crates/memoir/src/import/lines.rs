//! Reading an agent's JSONL file without ever writing to it: the file is
//! opened read-only and split into lines; each complete line is parsed as a
//! JSON object, and what does not parse is reported (file and line) and
//! skipped instead of stopping the import. A last line without its newline
//! that does not parse is a torn write in progress: it is reported apart and
//! left for the next run (the consumed offset stops before it).
//! Codex's cold rollouts, compressed with zstd (`*.jsonl.zst`), are read
//! through a decoder.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use super::{ImportError, Skipped};

/// One parsed line.
#[derive(Debug, Clone)]
pub struct Line {
    /// 1-based line number.
    pub number: u64,
    /// The object on the line.
    pub value: Map<String, Value>,
}

/// A JSONL file, read.
#[derive(Debug, Default)]
pub struct JsonlFile {
    /// The lines that parsed, in order.
    pub lines: Vec<Line>,
    /// Lines that did not parse (skipped).
    pub skipped: Vec<Skipped>,
    /// A partial last line (no newline, does not parse), retried next run.
    pub torn: Option<Skipped>,
    /// Bytes up to the end of the last complete line.
    pub consumed: u64,
    /// Complete lines read (parsed or skipped).
    pub complete_lines: u64,
}

/// The name ending of a zstd-compressed JSONL file.
pub const ZSTD_SUFFIX: &str = ".jsonl.zst";

/// Most bytes a compressed file may expand to (a bomb stops here and the
/// rest reads as a torn line).
const MAX_DECOMPRESSED: u64 = 16 << 30;

/// Whether `path` is zstd-compressed (read whole, never resumed).
pub fn is_compressed(path: &Path) -> bool {
    path.to_string_lossy().ends_with(ZSTD_SUFFIX)
}

/// `path` opened read-only, decompressed when it is a `.jsonl.zst`.
pub fn open(path: &Path) -> Result<Box<dyn Read>, ImportError> {
    let file = File::open(path).map_err(|e| ImportError::io("open", path, e))?;
    if !is_compressed(path) {
        return Ok(Box::new(file));
    }
    let decoder =
        ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(file)).map_err(|e| {
            ImportError::io(
                "decompress",
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
            )
        })?;
    Ok(Box::new(decoder.take(MAX_DECOMPRESSED)))
}

/// Read all of `path` read-only (decompressed).
pub fn read_all(path: &Path) -> Result<Vec<u8>, ImportError> {
    let mut reader = open(path)?;
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| ImportError::io("read", path, e))?;
    Ok(bytes)
}

/// Read `path` read-only from byte `offset` to its end.
pub fn read_from(path: &Path, offset: u64) -> Result<Vec<u8>, ImportError> {
    use std::io::{Seek, SeekFrom};
    let mut file = File::open(path).map_err(|e| ImportError::io("open", path, e))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| ImportError::io("seek", path, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ImportError::io("read", path, e))?;
    Ok(bytes)
}

/// Split and parse `bytes` (the content of `path`) as JSONL.
pub fn parse(path: &Path, bytes: &[u8]) -> JsonlFile {
    parse_from(path, bytes, 0)
}

/// Split and parse `bytes`, the part of `path` after its first
/// `lines_before` lines (line numbers continue from there; `consumed` and
/// `complete_lines` count from the start of `bytes` and of the file).
pub fn parse_from(path: &Path, bytes: &[u8], lines_before: u64) -> JsonlFile {
    let mut out = JsonlFile {
        complete_lines: lines_before,
        ..JsonlFile::default()
    };
    let mut start = 0usize;
    let mut number = lines_before;
    while start < bytes.len() {
        number += 1;
        let (end, complete) = match memchr_newline(&bytes[start..]) {
            Some(i) => (start + i, true),
            None => (bytes.len(), false),
        };
        let raw = trim_line(&bytes[start..end]);
        let parsed = if raw.is_empty() {
            None
        } else {
            Some(serde_json::from_slice::<Value>(raw))
        };
        match parsed {
            None => {}
            Some(Ok(Value::Object(value))) => out.lines.push(Line { number, value }),
            Some(Ok(_)) if complete => out.skipped.push(skipped(path, number, "not a JSON object")),
            Some(Err(e)) if complete => {
                out.skipped
                    .push(skipped(path, number, &format!("not JSON: {e}")))
            }
            Some(_) => {
                out.torn = Some(skipped(
                    path,
                    number,
                    &format!("torn last line ({} bytes without newline)", end - start),
                ));
                break;
            }
        }
        if complete {
            out.complete_lines = number;
            out.consumed = (end + 1) as u64;
            start = end + 1;
        } else {
            // A parseable last line without its newline is complete.
            out.complete_lines = number;
            out.consumed = end as u64;
            start = end;
        }
    }
    out
}

fn skipped(path: &Path, line: u64, reason: &str) -> Skipped {
    Skipped {
        file: path.to_path_buf(),
        line,
        reason: reason.to_string(),
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// The line without surrounding whitespace, a `\r` or NUL padding (torn
/// ext4 appends leave runs of NUL bytes).
fn trim_line(raw: &[u8]) -> &[u8] {
    let is_pad = |b: &u8| b.is_ascii_whitespace() || *b == 0;
    let start = raw.iter().position(|b| !is_pad(b)).unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|b| !is_pad(b))
        .map_or(start, |i| i + 1);
    &raw[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_skipped_and_a_torn_tail_is_left_for_later() {
        let text = b"{\"a\":1}\n{bad\n\n\0\0{\"b\":2}\n[1]\n{\"c\":";
        let f = parse(Path::new("x.jsonl"), text);
        assert_eq!(f.lines.len(), 2);
        assert_eq!(f.lines[1].number, 4);
        let lines: Vec<u64> = f.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![2, 5]);
        assert_eq!(f.torn.as_ref().map(|t| t.line), Some(6));
        assert_eq!(f.consumed as usize, text.len() - b"{\"c\":".len());
        assert_eq!(f.complete_lines, 5);
    }

    #[test]
    fn a_parseable_last_line_without_newline_counts() {
        let f = parse(Path::new("x"), b"{\"a\":1}\n{\"b\":2}");
        assert_eq!(f.lines.len(), 2);
        assert!(f.torn.is_none());
        assert_eq!(f.consumed, 15);
    }
}
