//! Verifying a stream of framed lines into a [`RawLog`].
//!
//! The reader's tolerance rules live here, once, for every backend that
//! stores lines: blank, garbage, torn and checksum-failing lines are skipped
//! and reported, never treated as the end of history; a verified record after
//! a gap or a broken link is applied and the break reported; only a missing
//! header leaves [`RawLog::header`] empty.

use std::io::BufRead;

use super::{Issue, IssueKind, LoadReport, RawLog, SeqRecord};
use crate::record::Record;
use crate::transcript::codec::{self, Hash, LineError, ZERO_HASH};

/// Incremental verifier: feed it lines in order.
#[derive(Debug, Default)]
pub struct Scanner {
    log: RawLog,
    /// Scratch copy of the current line (decoding parses in place).
    scratch: Vec<u8>,
    /// `(seq, h)` of the last applied record.
    last: Option<(u64, Hash)>,
    line_no: u64,
}

impl Scanner {
    /// A scanner that has seen nothing.
    pub fn new() -> Self {
        Scanner::default()
    }

    fn expected_seq(&self) -> u64 {
        self.last.map_or(0, |(s, _)| s + 1)
    }

    fn issue(&mut self, offset: u64, seq: u64, kind: IssueKind) {
        self.log.report.issues.push(Issue {
            line: self.line_no,
            offset,
            seq,
            kind,
        });
    }

    /// Feed one line (without its newline) that started at byte `offset`.
    /// `terminated` is false for a last line with no newline.
    pub fn push(&mut self, line: &[u8], offset: u64, terminated: bool) {
        self.line_no += 1;
        let expected = self.expected_seq();
        if line.iter().all(u8::is_ascii_whitespace) {
            if !line.is_empty() || terminated {
                self.issue(offset, expected, IssueKind::SkippedBlank);
            }
            return;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(line);
        let decoded = match codec::decode(&mut self.scratch) {
            Ok(d) => d,
            Err(err) => {
                let kind = if terminated {
                    IssueKind::SkippedCorrupt(err.to_string())
                } else {
                    IssueKind::TornTail {
                        bytes: line.len() as u64,
                    }
                };
                let seq = match (&err, codec::verify_frame(line)) {
                    (LineError::BadRecord(_), Ok((seq, _, _))) => seq,
                    _ => expected,
                };
                self.issue(offset, seq, kind);
                return;
            }
        };
        let prev_hash = self.last.map_or(ZERO_HASH, |(_, h)| h);
        if self.last.is_some() && decoded.seq < expected {
            self.issue(
                offset,
                decoded.seq,
                IssueKind::SkippedOutOfOrder { expected },
            );
            return;
        }
        if let Record::Meta(meta) = &decoded.record {
            if decoded.seq != 0 || self.log.header.is_some() {
                self.issue(offset, decoded.seq, IssueKind::ExtraHeader);
                return;
            }
            self.log.header = Some(meta.clone());
        }
        if decoded.seq > expected {
            self.issue(
                offset,
                decoded.seq,
                IssueKind::Gap {
                    missing_from: expected,
                },
            );
        } else if decoded.prev != prev_hash {
            self.issue(offset, decoded.seq, IssueKind::ChainBreak);
        }
        self.last = Some((decoded.seq, decoded.hash));
        self.log.last_seq = decoded.seq;
        if decoded.seq != 0 || !matches!(decoded.record, Record::Meta(_)) {
            self.log.records.push(SeqRecord {
                seq: decoded.seq,
                record: decoded.record,
            });
        }
    }

    /// `(seq, h)` of the last applied record.
    pub fn last(&self) -> Option<(u64, Hash)> {
        self.last
    }

    /// The verified log.
    pub fn finish(self) -> RawLog {
        self.log
    }
}

/// Verify every line of `reader`. I/O errors are returned; bad lines are reported.
pub fn scan<R: BufRead>(mut reader: R) -> std::io::Result<RawLog> {
    let mut scanner = Scanner::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut offset = 0u64;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        let terminated = buf.last() == Some(&b'\n');
        let line = if terminated { &buf[..n - 1] } else { &buf[..] };
        scanner.push(line, offset, terminated);
        offset += n as u64;
    }
    Ok(scanner.finish())
}

/// The report's summary line for humans, e.g. for `memoir sessions verify`.
pub fn describe(report: &LoadReport) -> String {
    match report.issues.first() {
        None => "chain verifies".into(),
        Some(first) => format!(
            "{} problem(s); first bad seq {}: {}",
            report.issues.len(),
            first.seq,
            first
        ),
    }
}
