//! Verifying a stream of framed lines into a [`RawLog`].
//!
//! The reader's tolerance rules live here, once, for every backend that
//! stores lines (and for the file store's writer, which must agree with the
//! reader on where a log ends): blank, garbage, torn and checksum-failing
//! lines are skipped and reported, never treated as the end of history; a
//! verified record after a gap or a broken link is applied and the break
//! reported; the records of a multi-record batch are held back until the
//! batch's last record verifies, and dropped (reported as a partial batch)
//! when it never does; only a missing header leaves [`RawLog::header`] empty.

use std::io::BufRead;

use super::{Issue, IssueKind, LoadReport, RawLog, SeqRecord, Span};
use crate::frame::{self, Hash, LineError, ZERO_HASH};
use crate::record::{Record, SessionMeta};
use crate::store::line;

/// The records of a batch whose last record has not been seen yet.
#[derive(Debug)]
struct PendingBatch {
    /// The `seq` of the batch's last record, as its records say.
    last: u64,
    /// `seq` of the first held record.
    first_seq: u64,
    /// Byte offset and line number of the first held record.
    offset: u64,
    line: u64,
    /// The applied state before the batch, restored when it is dropped.
    before: Option<(u64, Hash)>,
    before_last_seq: u64,
    records: Vec<SeqRecord>,
    /// Their spans (when the scanner keeps spans).
    spans: Vec<Span>,
}

/// Incremental verifier: feed it lines in order.
#[derive(Debug, Default)]
pub struct Scanner {
    log: RawLog,
    /// Only check framing and order; do not parse payloads.
    frames_only: bool,
    /// Keep each applied record's [`Span`] in [`RawLog::spans`] (the
    /// offsets fed are file offsets).
    keep_spans: bool,
    /// Scratch copy of the current line (decoding parses in place).
    scratch: Vec<u8>,
    /// `(seq, h)` of the last accepted record (applied or held in a batch).
    last: Option<(u64, Hash)>,
    pending: Option<PendingBatch>,
    /// A `meta` record was accepted at `seq` 0 (tracked in frames-only mode).
    header_seen: bool,
    line_no: u64,
}

impl Scanner {
    /// A scanner that has seen nothing.
    pub fn new() -> Self {
        Scanner::default()
    }

    /// A scanner that checks framing, hashes, order and batches but parses no
    /// payload (records are not collected): what a writer needs to find the
    /// end a reader will see.
    pub fn frames_only() -> Self {
        Scanner {
            frames_only: true,
            ..Scanner::default()
        }
    }

    /// A scanner that also keeps each applied record's [`Span`]: for lines
    /// fed with their offsets in the log file, so that
    /// [`super::LogStore::read_span`] can read a record back.
    pub fn with_spans() -> Self {
        Scanner {
            keep_spans: true,
            ..Scanner::default()
        }
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

    /// Forget a batch whose last record never came, restoring the state before it.
    fn drop_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            self.last = p.before;
            self.log.last_seq = p.before_last_seq;
            self.log.report.issues.push(Issue {
                line: p.line,
                offset: p.offset,
                seq: p.first_seq,
                kind: IssueKind::PartialBatch {
                    last_seq: p.last,
                    held: p.records.len().max(1) as u64,
                },
            });
        }
    }

    /// True when a verified header was seen at `seq` 0.
    pub fn has_header(&self) -> bool {
        self.header_seen || self.log.header.is_some()
    }

    /// Byte offset where a batch still waiting for its last record starts.
    pub fn pending_batch_start(&self) -> Option<u64> {
        self.pending.as_ref().map(|p| p.offset)
    }

    /// Feed one line (without its newline) that started at byte `offset`.
    /// `terminated` is false for a last line with no newline.
    pub fn push(&mut self, line: &[u8], offset: u64, terminated: bool) {
        let checked = if self.frames_only {
            check_line_frames(line)
        } else {
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            scratch.extend_from_slice(line);
            let checked = check_line(&mut scratch, false);
            self.scratch = scratch;
            checked
        };
        self.push_checked(checked, line.len() as u64, offset, terminated);
    }

    /// Feed the result of [`check_line`] for one line of `len` bytes
    /// (without its newline) that started at byte `offset`: the part of
    /// [`Scanner::push`] that depends on the lines before it. Lines can be
    /// checked on other threads and pushed here in file order.
    pub fn push_checked(&mut self, checked: Checked, len: u64, offset: u64, terminated: bool) {
        self.line_no += 1;
        let (seq, prev, hash, batch, record, is_meta) = match checked {
            Checked::Blank => {
                if len > 0 || terminated {
                    let expected = self.expected_seq();
                    self.issue(offset, expected, IssueKind::SkippedBlank);
                }
                return;
            }
            Checked::Good(good) => (
                good.seq,
                good.prev,
                good.hash,
                good.batch,
                good.record,
                good.is_meta,
            ),
            Checked::Bad { error, framed_seq } => {
                let kind = if terminated {
                    IssueKind::SkippedCorrupt(error.to_string())
                } else {
                    IssueKind::TornTail { bytes: len }
                };
                let seq = framed_seq.unwrap_or_else(|| self.expected_seq());
                self.issue(offset, seq, kind);
                return;
            }
        };
        // A record that does not continue the open batch ends it unfinished.
        if let Some(p) = &self.pending {
            if batch != Some(p.last) || seq > p.last {
                self.drop_pending();
            }
        }
        let expected = self.expected_seq();
        if self.last.is_some() && seq < expected {
            self.issue(offset, seq, IssueKind::SkippedOutOfOrder { expected });
            return;
        }
        if let Some(last) = batch {
            if last < seq {
                self.issue(
                    offset,
                    seq,
                    IssueKind::SkippedCorrupt(format!("batch marker {last} is behind its seq")),
                );
                return;
            }
        }
        if is_meta {
            if seq != 0 || self.log.header.is_some() {
                self.issue(offset, seq, IssueKind::ExtraHeader);
                return;
            }
            if let Some(Record::Meta(meta)) = &record {
                self.log.header = Some(meta.clone());
            } else {
                self.header_seen = true;
            }
        }
        let prev_hash = self.last.map_or(ZERO_HASH, |(_, h)| h);
        if seq > expected {
            self.issue(
                offset,
                seq,
                IssueKind::Gap {
                    missing_from: expected,
                },
            );
        } else if prev != prev_hash {
            self.issue(offset, seq, IssueKind::ChainBreak);
        }
        let held = record
            .filter(|r| seq != 0 || !matches!(r, Record::Meta(_)))
            .map(|record| SeqRecord { seq, record });
        let span = (self.keep_spans && held.is_some()).then_some(Span { offset, len });
        match batch {
            Some(last) if last > seq => {
                let before = self.last;
                let before_last_seq = self.log.last_seq;
                let line_no = self.line_no;
                let p = self.pending.get_or_insert_with(|| PendingBatch {
                    last,
                    first_seq: seq,
                    offset,
                    line: line_no,
                    before,
                    before_last_seq,
                    records: Vec::new(),
                    spans: Vec::new(),
                });
                p.records.extend(held);
                p.spans.extend(span);
                self.last = Some((seq, hash));
            }
            _ => {
                if let Some(p) = self.pending.take() {
                    self.log.records.extend(p.records);
                    self.log.spans.extend(p.spans);
                }
                self.log.records.extend(held);
                self.log.spans.extend(span);
                self.last = Some((seq, hash));
                self.log.last_seq = seq;
            }
        }
    }

    /// `(seq, h)` of the last applied record (a batch still open does not count).
    pub fn last(&self) -> Option<(u64, Hash)> {
        match &self.pending {
            Some(p) => p.before,
            None => self.last,
        }
    }

    /// The header, once a verified `meta` record was seen at `seq` 0.
    pub fn header(&self) -> Option<&SessionMeta> {
        self.log.header.as_ref()
    }

    /// Move out the records applied so far, in order (the records of a batch
    /// still open stay held): a reader that folds records as it goes then
    /// never holds the whole list.
    pub fn take_records(&mut self) -> std::vec::Drain<'_, SeqRecord> {
        self.log.spans.clear();
        self.log.records.drain(..)
    }

    /// The verified log; a batch still open at the end is dropped and reported.
    pub fn finish(mut self) -> RawLog {
        self.drop_pending();
        self.log
    }
}

/// A line that verified on its own (its place in the chain is checked by
/// [`Scanner::push_checked`]).
#[derive(Debug)]
pub struct GoodLine {
    seq: u64,
    prev: Hash,
    hash: Hash,
    batch: Option<u64>,
    /// The payload (`None` in frames-only mode).
    record: Option<Record>,
    is_meta: bool,
}

/// What checking one line on its own found: the context-free half of the
/// reader's rules (framing, hash, payload parse), which is most of the work.
// The large variant is the common one (a record); boxing it would cost an
// allocation per line for the rare blank or bad ones' sake.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Checked {
    /// Empty or whitespace only.
    Blank,
    /// Framed, hashed and (unless frames only) parsed.
    Good(GoodLine),
    /// Refused; `framed_seq` is the line's own `seq` when only its payload was bad.
    Bad {
        /// Why.
        error: LineError,
        /// The `seq` of a line whose framing verified but whose payload did not.
        framed_seq: Option<u64>,
    },
}

/// Check one line (without its newline) on its own: verify its framing and
/// hash and, unless `frames_only`, parse its payload in place (the buffer is
/// restored, see [`frame::decode_with`]).
pub fn check_line(line: &mut [u8], frames_only: bool) -> Checked {
    if frames_only {
        return check_line_frames(line);
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return Checked::Blank;
    }
    match line::decode(line) {
        Ok(d) => {
            let is_meta = matches!(d.record, Record::Meta(_));
            Checked::Good(GoodLine {
                seq: d.seq,
                prev: d.prev,
                hash: d.hash,
                batch: d.batch,
                record: Some(d.record),
                is_meta,
            })
        }
        Err(error) => {
            let framed_seq = match &error {
                LineError::BadRecord(_) => frame::verify(line).ok().map(|f| f.seq),
                _ => None,
            };
            Checked::Bad { error, framed_seq }
        }
    }
}

/// [`check_line`] in frames-only mode (no payload parse, no scratch).
fn check_line_frames(line: &[u8]) -> Checked {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Checked::Blank;
    }
    match frame::verify(line) {
        Ok(f) => Checked::Good(GoodLine {
            is_meta: f.kind(line) == Some("meta"),
            seq: f.seq,
            prev: f.prev,
            hash: f.hash,
            batch: f.batch,
            record: None,
        }),
        Err(error) => Checked::Bad {
            error,
            framed_seq: None,
        },
    }
}

/// Verify every line of `reader`. I/O errors are returned; bad lines are reported.
pub fn scan<R: BufRead>(reader: R) -> std::io::Result<RawLog> {
    Ok(scan_with(reader, Scanner::with_spans())?.0.finish())
}

/// Feed every line of `reader` to `scanner`; also returns the byte offset of
/// the last line when it has no newline (a tail a writer must settle).
pub fn scan_with<R: BufRead>(
    mut reader: R,
    mut scanner: Scanner,
) -> std::io::Result<(Scanner, Option<u64>)> {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut offset = 0u64;
    let mut unterminated = None;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        let terminated = buf.last() == Some(&b'\n');
        let line = if terminated { &buf[..n - 1] } else { &buf[..] };
        if !terminated {
            unterminated = Some(offset);
        }
        scanner.push(line, offset, terminated);
        offset += n as u64;
    }
    Ok((scanner, unterminated))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    fn batch_file(records: usize, keep_lines: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let header = Record::Meta(crate::record::SessionMeta::new("s"));
        let h0 = line::encode_into(&mut out, 0, &ZERO_HASH, &header).unwrap();
        let one = Record::Message(Message::user("single"));
        let h1 = line::encode_into(&mut out, 1, &h0, &one).unwrap();
        let batch: Vec<Record> = (0..records)
            .map(|i| Record::Message(Message::user(format!("b{i}"))))
            .collect();
        let mut tail = Vec::new();
        line::encode_batch(&mut tail, 2, &h1, &batch).unwrap();
        let kept: Vec<&[u8]> = tail
            .split_inclusive(|&b| b == b'\n')
            .take(keep_lines)
            .collect();
        out.extend(kept.concat());
        out
    }

    #[test]
    fn a_complete_batch_is_applied() {
        let log = scan(&batch_file(3, 3)[..]).unwrap();
        assert!(log.report.is_clean(), "{:?}", log.report);
        assert_eq!(log.records.len(), 4);
        assert_eq!(log.last_seq, 4);
    }

    #[test]
    fn a_batch_without_its_last_record_is_dropped_whole() {
        for keep in 1..3 {
            let log = scan(&batch_file(3, keep)[..]).unwrap();
            assert_eq!(log.records.len(), 1, "keep {keep}: only the single record");
            assert_eq!(log.last_seq, 1);
            assert!(
                matches!(
                    log.report.issues.as_slice(),
                    [Issue { seq: 2, kind: IssueKind::PartialBatch { last_seq: 4, held }, .. }] if *held == keep as u64
                ),
                "{:?}",
                log.report
            );
            // The writer's view agrees.
            let (s, _) = scan_with(&batch_file(3, keep)[..], Scanner::frames_only()).unwrap();
            assert_eq!(s.last().map(|l| l.0), Some(1));
            assert!(s.pending_batch_start().is_some());
        }
    }

    #[test]
    fn a_record_after_a_partial_batch_continues_from_before_it() {
        let mut file = batch_file(3, 2);
        // What a writer that ignored the partial batch would do: chain after seq 1.
        let (before, _) = scan_with(&file[..], Scanner::frames_only()).unwrap();
        let (seq, h1) = before.last().unwrap();
        assert_eq!(seq, 1);
        line::encode_into(&mut file, 2, &h1, &Record::Message(Message::user("next"))).unwrap();
        let log = scan(&file[..]).unwrap();
        assert_eq!(log.records.len(), 2);
        assert_eq!(log.last_seq, 2);
        assert_eq!(log.report.issues.len(), 1, "{:?}", log.report);
    }
}
