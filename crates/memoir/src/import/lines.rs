//! Reading an agent's JSONL file without ever writing to it: the file is
//! opened read-only and split into lines; each complete line is parsed as a
//! JSON object, and what does not parse is reported (file and line) and
//! skipped instead of stopping the import. A last line without its newline
//! that does not parse is a torn write in progress: it is reported apart and
//! left for the next run (the consumed offset stops before it).
//! Codex's cold rollouts, compressed with zstd (`*.jsonl.zst`), are read
//! through a decoder, line by line ([`read_compressed`]): memory stays
//! bounded by the longest line allowed ([`MAX_LINE`]) plus what is imported,
//! whatever the file expands to.
//!
//! A line longer than [`MAX_LINE`] is reported and skipped without being
//! parsed (in a compressed file, without being held in memory). Only regular
//! files are opened: a FIFO, socket or device is refused before it is
//! opened for reading (opening a FIFO would wait for a writer).

use std::fs::File;
use std::io::{BufRead, Read};
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

/// The `type` of the lines a Codex import makes from items of Codex's
/// thread-history projection that the rollout lacks.
pub(super) const HISTORY_ITEM: &str = "thread_history_item";

/// The name ending of a zstd-compressed JSONL file.
pub const ZSTD_SUFFIX: &str = ".jsonl.zst";

/// Most bytes a compressed file may expand to (a bomb stops here and the
/// rest reads as a torn line).
const MAX_DECOMPRESSED: u64 = 16 << 30;

/// The longest source line read (64 MiB, its newline excluded): a longer
/// line is reported as skipped, never parsed or held whole in memory.
pub const MAX_LINE: usize = 64 << 20;

/// Bad lines of one compressed file reported one by one; the rest are
/// counted in one last report.
const MAX_REPORTED: usize = 1000;

/// Whether `path` is zstd-compressed (read whole, never resumed).
pub fn is_compressed(path: &Path) -> bool {
    path.to_string_lossy().ends_with(ZSTD_SUFFIX)
}

/// `path` opened read-only, refused unless it is a regular file (checked on
/// the open file; a FIFO is opened without waiting for a writer).
pub fn open_file(path: &Path) -> Result<File, ImportError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut opts, libc::O_NONBLOCK);
    let file = opts
        .open(path)
        .map_err(|e| ImportError::io("open", path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| ImportError::io("stat", path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta.file_type()));
    }
    Ok(file)
}

/// The error for a source that is not a regular file.
pub fn not_regular(path: &Path, kind: &std::fs::FileType) -> ImportError {
    ImportError::Unsupported {
        path: path.to_path_buf(),
        reason: format!(
            "a {}, not a regular file: skipped",
            crate::store::file::file_kind(kind)
        ),
    }
}

/// `path` opened read-only, decompressed when it is a `.jsonl.zst`.
pub fn open(path: &Path) -> Result<Box<dyn Read>, ImportError> {
    let file = open_file(path)?;
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

/// Read all of `path` read-only (decompressed; a line of a compressed file
/// longer than [`MAX_LINE`] is read as an empty line).
pub fn read_all(path: &Path) -> Result<Vec<u8>, ImportError> {
    let mut reader = open(path)?;
    let mut bytes = Vec::new();
    if is_compressed(path) {
        let mut lines = BoundedLines::new(reader);
        while let Some(line) = lines
            .next_line()
            .map_err(|e| ImportError::io("read", path, e))?
        {
            if let Some(text) = line.text {
                bytes.extend_from_slice(text);
            }
            if line.newline {
                bytes.push(b'\n');
            }
        }
        return Ok(bytes);
    }
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| ImportError::io("read", path, e))?;
    Ok(bytes)
}

/// A compressed file, read line by line.
#[derive(Debug)]
pub struct Streamed {
    /// Its lines, as [`parse`] would give them.
    pub file: JsonlFile,
    /// The check hash of the decompressed prefix consumed
    /// (`super::cursor::prefix_hash` of those bytes).
    pub prefix_hash: String,
}

/// Read the compressed file at `path` line by line, parsing each line as it
/// comes: what is held is the lines that parsed and at most one line of up
/// to [`MAX_LINE`] bytes (a longer one is skipped as it streams by).
pub fn read_compressed(path: &Path) -> Result<Streamed, ImportError> {
    use super::cursor::CHECK_WINDOW;
    let mut lines = BoundedLines::new(open(path)?);
    let mut out = JsonlFile::default();
    let mut head: Vec<u8> = Vec::new();
    let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut unreported = 0u64;
    let mut number = 0u64;
    let mut report = |out: &mut JsonlFile, s: Skipped| {
        if out.skipped.len() < MAX_REPORTED {
            out.skipped.push(s);
        } else {
            unreported += 1;
        }
    };
    while let Some(line) = lines
        .next_line()
        .map_err(|e| ImportError::io("read", path, e))?
    {
        number += 1;
        // An over-long line counts as empty (as `read_all` gives it).
        let text: &[u8] = match line.text {
            Some(text) => {
                let raw = trim_line(text);
                let parsed = (!raw.is_empty()).then(|| serde_json::from_slice::<Value>(raw));
                match parsed {
                    Some(Ok(Value::Object(value))) => out.lines.push(Line { number, value }),
                    Some(Ok(_)) if line.newline => {
                        report(&mut out, skipped(path, number, "not a JSON object"))
                    }
                    Some(Err(e)) if line.newline => {
                        report(&mut out, skipped(path, number, &format!("not JSON: {e}")))
                    }
                    Some(_) => {
                        out.torn = Some(skipped(
                            path,
                            number,
                            &format!("torn last line ({} bytes without newline)", text.len()),
                        ));
                        break;
                    }
                    None => {}
                }
                text
            }
            None => {
                report(
                    &mut out,
                    skipped(
                        path,
                        number,
                        &format!("line longer than {MAX_LINE} bytes ({} bytes)", line.len),
                    ),
                );
                b""
            }
        };
        let mut bytes = text.to_vec();
        if line.newline {
            bytes.push(b'\n');
        }
        if head.len() < CHECK_WINDOW {
            let take = (CHECK_WINDOW - head.len()).min(bytes.len());
            head.extend_from_slice(&bytes[..take]);
        }
        tail.extend(bytes.iter().copied());
        let excess = tail.len().saturating_sub(CHECK_WINDOW);
        tail.drain(..excess);
        out.complete_lines = number;
        out.consumed += bytes.len() as u64;
    }
    if unreported > 0 {
        out.skipped.push(skipped(
            path,
            number,
            &format!("{unreported} more bad lines skipped (not reported one by one)"),
        ));
    }
    let tail: Vec<u8> = tail.into_iter().collect();
    let len = out.consumed;
    let head_len = head.len().min(len as usize);
    let prefix_hash = super::cursor::window_hash(len, &head[..head_len], &tail);
    Ok(Streamed {
        file: out,
        prefix_hash,
    })
}

/// One line from [`BoundedLines`].
struct BoundedLine<'a> {
    /// The line without its newline; `None` when it was longer than [`MAX_LINE`].
    text: Option<&'a [u8]>,
    /// Its length in bytes (newline excluded).
    len: u64,
    /// Whether it ended with a newline (else it is the file's last).
    newline: bool,
}

/// Lines of a reader, each held only up to [`MAX_LINE`] bytes.
struct BoundedLines<R> {
    reader: std::io::BufReader<R>,
    buf: Vec<u8>,
}

impl<R: Read> BoundedLines<R> {
    fn new(reader: R) -> Self {
        BoundedLines {
            reader: std::io::BufReader::with_capacity(256 << 10, reader),
            buf: Vec::new(),
        }
    }

    fn next_line(&mut self) -> std::io::Result<Option<BoundedLine<'_>>> {
        self.buf.clear();
        let mut len = 0u64;
        let mut over = false;
        let newline = loop {
            let chunk = match self.reader.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if len == 0 {
                    return Ok(None);
                }
                break false;
            }
            let (part, found) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], true),
                None => (chunk, false),
            };
            len += part.len() as u64;
            if !over && len > MAX_LINE as u64 {
                over = true;
                self.buf = Vec::new();
            }
            if !over {
                self.buf.extend_from_slice(part);
            }
            let used = part.len() + usize::from(found);
            self.reader.consume(used);
            if found {
                break true;
            }
        };
        Ok(Some(BoundedLine {
            text: (!over).then_some(&self.buf[..]),
            len,
            newline,
        }))
    }
}

/// Read `path` read-only from byte `offset` to its end.
pub fn read_from(path: &Path, offset: u64) -> Result<Vec<u8>, ImportError> {
    use std::io::{Seek, SeekFrom};
    let mut file = open_file(path)?;
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
        if complete && end - start > MAX_LINE {
            out.skipped.push(skipped(
                path,
                number,
                &format!("line longer than {MAX_LINE} bytes ({} bytes)", end - start),
            ));
            out.complete_lines = number;
            out.consumed = (end + 1) as u64;
            start = end + 1;
            continue;
        }
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

/// The first line of a file (a Codex rollout's `session_meta`), at most
/// 4 MiB of it: read up to its newline, never the rest of the file.
pub(super) fn first_line(path: &Path) -> Result<Option<Vec<u8>>, ImportError> {
    use std::io::BufRead;
    let file = open(path)?;
    let mut reader = std::io::BufReader::with_capacity(64 << 10, file.take(4 << 20));
    let mut buf = Vec::new();
    reader
        .read_until(b'\n', &mut buf)
        .map_err(|e| ImportError::io("read", path, e))?;
    Ok((buf.last() == Some(&b'\n')).then(|| {
        buf.pop();
        buf
    }))
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
