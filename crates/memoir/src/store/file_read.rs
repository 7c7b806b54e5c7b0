//! Reading a whole transcript into a verified [`RawLog`], fast: the file is
//! read in large chunks cut at line ends, the context-free half of the
//! reader's rules (framing, BLAKE3, payload parse; [`scan::check_line`]) runs
//! on several threads over disjoint slices of the chunk, in place (no copy
//! per line), and the results are fed in file order to the one
//! [`scan::Scanner`], which applies the order, chain and batch rules, while
//! the next chunk is read and checked. The outcome is the same `RawLog` as
//! [`scan::scan`] over the same bytes.
//!
//! Memory: a few chunks (1 MiB, or the longest line) besides the decoded
//! records, which [`read_log_each`] hands to a sink chunk by chunk instead of
//! collecting (a transcript load then holds the file's messages and one
//! chunk, not the records too). Small files (under 1 MiB) are read on the
//! calling thread.

use std::fs::File;
use std::io::{self, Read};
use std::sync::OnceLock;

use super::scan::{self, Checked, Scanner};
use super::{RawLog, RecordSink};

/// Bytes read per chunk (a longer line grows the chunk to hold it).
const CHUNK: usize = 1 << 20;

/// Files smaller than this are verified on the calling thread.
const PARALLEL_MIN: u64 = 1 << 20;

/// Bytes of a chunk per thread at least.
const MIN_SHARE: usize = if cfg!(test) { 256 } else { 64 << 10 };

/// At most this many verifying threads per read.
const MAX_THREADS: usize = 8;

/// How many threads verify the lines of a large file (the machine's
/// parallelism, at most [`MAX_THREADS`]; `MEMOIR_READ_THREADS` overrides it).
fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::env::var("MEMOIR_READ_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, MAX_THREADS)
    })
}

/// One checked line: its result, length (without the newline), offset and
/// whether it ended with a newline.
type Line = (Checked, u64, u64, bool);

/// Read and verify every line of `file` from its start (whatever its cursor).
pub fn read_log(file: &File) -> io::Result<RawLog> {
    let len = file.metadata()?.len();
    read_log_with(file, len, threads_for(len), CHUNK, None)
}

/// [`read_log`], handing each applied record to `sink` after each chunk
/// instead of collecting them (the log returned has no records): memory is
/// then one chunk and its records besides what the sink keeps.
pub fn read_log_each(file: &File, sink: &mut dyn RecordSink) -> io::Result<RawLog> {
    let len = file.metadata()?.len();
    read_log_with(file, len, threads_for(len), CHUNK, Some(sink))
}

fn threads_for(len: u64) -> usize {
    if len < PARALLEL_MIN {
        1
    } else {
        threads()
    }
}

/// [`read_log`] with a given thread count and chunk size, and a sink or not.
///
/// With several threads the reading and checking of the next chunk overlap
/// the ordered part (scanner and sink) of the one before: one thread reads
/// and checks (with helpers) while the calling thread applies; a checked
/// chunk waits until the one before is applied.
fn read_log_with(
    file: &File,
    len: u64,
    threads: usize,
    chunk: usize,
    sink: Option<&mut dyn RecordSink>,
) -> io::Result<RawLog> {
    let mut feed = Feed {
        scanner: Scanner::new(),
        sink,
        header_given: false,
        len,
    };
    let mut chunks = Chunks::new(file, len, chunk);
    if threads == 1 {
        let mut lines = Vec::new();
        while let Some((bytes, base)) = chunks.next()? {
            let end = bytes.len();
            check_lines(bytes, base, &mut lines);
            feed.push(&mut lines, base, end);
        }
        return Ok(feed.scanner.finish());
    }
    std::thread::scope(|scope| {
        let (checked_tx, checked_rx) = std::sync::mpsc::sync_channel(0);
        let (spare_tx, spare_rx) = std::sync::mpsc::channel::<Vec<Line>>();
        scope.spawn(move || {
            let mut lanes = Vec::new();
            loop {
                let next = match chunks.next() {
                    Ok(Some((bytes, base))) => {
                        let end = bytes.len();
                        let mut lines = spare_rx.try_recv().unwrap_or_default();
                        check_chunk(bytes, base, threads, &mut lines, &mut lanes);
                        Ok((lines, base, end))
                    }
                    Ok(None) => break,
                    Err(e) => Err(e),
                };
                let failed = next.is_err();
                // A closed channel: the applying side stopped.
                if checked_tx.send(next).is_err() || failed {
                    break;
                }
            }
        });
        for next in checked_rx {
            let (mut lines, base, end) = next?;
            feed.push(&mut lines, base, end);
            let _ = spare_tx.send(lines);
        }
        Ok::<(), io::Error>(())
    })?;
    Ok(feed.scanner.finish())
}

/// A file in chunks of about `chunk` bytes cut after a newline (a longer
/// line grows its chunk), read by position: the descriptor's cursor is
/// neither used nor moved.
struct Chunks<'f> {
    reader: super::ReadAt<'f>,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    base: u64,
    /// Bytes at the front of `buf` handed out by the last [`Chunks::next`].
    handed: usize,
    chunk: usize,
    eof: bool,
}

impl<'f> Chunks<'f> {
    fn new(file: &'f File, len: u64, chunk: usize) -> Self {
        Chunks {
            reader: super::ReadAt { file, pos: 0 },
            buf: Vec::with_capacity((len as usize).min(chunk) + 1),
            base: 0,
            handed: 0,
            chunk,
            eof: false,
        }
    }

    /// The next chunk and the file offset of its first byte; all its lines
    /// end with a newline except perhaps the file's last.
    fn next(&mut self) -> io::Result<Option<(&mut [u8], u64)>> {
        self.buf.drain(..self.handed);
        self.base += self.handed as u64;
        self.handed = 0;
        let mut want = self.chunk;
        loop {
            while self.buf.len() < want && !self.eof {
                let room = (want - self.buf.len()) as u64;
                self.eof = self.reader.by_ref().take(room).read_to_end(&mut self.buf)? == 0;
            }
            if self.buf.is_empty() {
                return Ok(None);
            }
            let end = if self.eof {
                self.buf.len()
            } else {
                match memchr::memrchr(b'\n', &self.buf) {
                    Some(p) => p + 1,
                    None => {
                        // One line longer than the chunk: read on.
                        want = self.buf.len() + self.chunk;
                        continue;
                    }
                }
            };
            self.handed = end;
            return Ok(Some((&mut self.buf[..end], self.base)));
        }
    }
}

/// The ordered half of a read: the scanner, and the sink it hands records to.
struct Feed<'s> {
    scanner: Scanner,
    sink: Option<&'s mut dyn RecordSink>,
    header_given: bool,
    /// The file's size, to estimate its record count from the first chunk.
    len: u64,
}

impl Feed<'_> {
    /// Apply the checked `lines` of the chunk of `end` bytes at offset `base`
    /// (emptying `lines`, keeping its room).
    fn push(&mut self, lines: &mut Vec<Line>, base: u64, end: usize) {
        for (checked, len, offset, terminated) in lines.drain(..) {
            self.scanner.push_checked(checked, len, offset, terminated);
        }
        let Some(sink) = self.sink.as_deref_mut() else {
            return;
        };
        if !self.header_given {
            if let Some(meta) = self.scanner.header() {
                sink.header(meta);
                self.header_given = true;
            }
        }
        let records = self.scanner.take_records();
        if base == 0 {
            // The first chunk's density estimates the whole file's (with a
            // margin: falling short would double the sink's lists).
            let scale = (self.len as f64 / end.max(1) as f64).max(1.0);
            let estimate = (records.len() as f64 * scale * 1.0625).ceil() as usize;
            sink.expect(estimate);
        }
        for record in records {
            sink.record(record);
        }
    }
}

/// Check every line of `chunk` (whose first byte is at file offset `base`;
/// all its lines end with a newline except perhaps the file's last), split
/// over up to `threads` threads at line boundaries, results in order in
/// `out`; `lanes` is the other threads' room, kept from chunk to chunk.
fn check_chunk(
    chunk: &mut [u8],
    base: u64,
    threads: usize,
    out: &mut Vec<Line>,
    lanes: &mut Vec<Vec<Line>>,
) {
    let parts = threads.min(chunk.len() / MIN_SHARE).max(1);
    if parts == 1 {
        return check_lines(chunk, base, out);
    }
    // Cut points at line ends near equal shares of the chunk.
    let mut cuts = Vec::with_capacity(parts + 1);
    cuts.push(0);
    for k in 1..parts {
        let target = chunk.len() * k / parts;
        let prev = *cuts.last().unwrap_or(&0);
        let cut = memchr::memchr(b'\n', &chunk[target.max(prev)..])
            .map_or(chunk.len(), |p| target.max(prev) + p + 1);
        cuts.push(cut);
    }
    cuts.push(chunk.len());
    let mut slices = Vec::with_capacity(parts);
    let mut rest = chunk;
    for w in cuts.windows(2) {
        let (head, tail) = rest.split_at_mut(w[1] - w[0]);
        slices.push((head, base + w[0] as u64));
        rest = tail;
    }
    if lanes.len() < parts - 1 {
        lanes.resize_with(parts - 1, Vec::new);
    }
    std::thread::scope(|scope| {
        let mut slices = slices.into_iter();
        let first = slices.next();
        let handles: Vec<_> = slices
            .zip(lanes.iter_mut())
            .map(|((slice, at), lane)| scope.spawn(move || check_lines(slice, at, lane)))
            .collect();
        // This thread takes the first share itself.
        if let Some((slice, at)) = first {
            check_lines(slice, at, out);
        }
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    for lane in lanes.iter_mut().take(parts - 1) {
        out.append(lane);
    }
}

/// Check the lines of `bytes` (at file offset `base`) on this thread,
/// appending them to `out` (whose room is reused from chunk to chunk: a
/// `Line` is ~0.5 KB, as large as a short line).
fn check_lines(bytes: &mut [u8], base: u64, out: &mut Vec<Line>) {
    let mut start = 0;
    while start < bytes.len() {
        let (end, next, terminated) = match memchr::memchr(b'\n', &bytes[start..]) {
            Some(p) => (start + p, start + p + 1, true),
            None => (bytes.len(), bytes.len(), false),
        };
        let checked = scan::check_line(&mut bytes[start..end], false);
        out.push((
            checked,
            (end - start) as u64,
            base + start as u64,
            terminated,
        ));
        start = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ZERO_HASH;
    use crate::message::Message;
    use crate::record::{Record, SessionMeta};
    use crate::store::line;
    use std::io::Write;

    /// A log with every kind of damage the reader tolerates, spread so that
    /// chunk and thread boundaries fall everywhere.
    fn damaged_log() -> Vec<u8> {
        let mut out = Vec::new();
        let mut h = line::encode_into(
            &mut out,
            0,
            &ZERO_HASH,
            &Record::Meta(SessionMeta::new("s")),
        )
        .unwrap();
        let mut seq = 1;
        for i in 0..300u64 {
            let text = "word ".repeat((i as usize * 37) % 400);
            match i % 50 {
                7 => out.extend_from_slice(b"   \n"),
                13 => out.extend_from_slice(b"{\"seq\":99,garbage}\n"),
                21 => {
                    // A batch of three.
                    let recs: Vec<Record> = (0..3)
                        .map(|k| Record::Message(Message::user(format!("b{k}"))))
                        .collect();
                    h = line::encode_batch(&mut out, seq, &h, &recs).unwrap().0;
                    seq += 3;
                }
                33 => {
                    // A line whose hash fails (one byte flipped).
                    let mut bad = Vec::new();
                    line::encode_into(&mut bad, seq, &h, &Record::Message(Message::user("flip")))
                        .unwrap();
                    bad[20] ^= 1;
                    out.extend_from_slice(&bad);
                }
                _ => {
                    h = line::encode_into(
                        &mut out,
                        seq,
                        &h,
                        &Record::Message(Message::user(format!("{i} {text}"))),
                    )
                    .unwrap();
                    seq += 1;
                }
            }
        }
        // A partial batch and a torn last line.
        let recs: Vec<Record> = (0..3)
            .map(|k| Record::Message(Message::user(format!("p{k}"))))
            .collect();
        let mut batch = Vec::new();
        line::encode_batch(&mut batch, seq, &h, &recs).unwrap();
        let first_two: usize = batch
            .split_inclusive(|&b| b == b'\n')
            .take(2)
            .map(<[u8]>::len)
            .sum();
        out.extend_from_slice(&batch[..first_two + 10]);
        out
    }

    #[test]
    fn chunked_parallel_reads_equal_the_sequential_scan() {
        let bytes = damaged_log();
        let want = scan::scan(&bytes[..]).unwrap();
        assert!(
            want.records.len() > 250 && want.report.issues.len() >= 10,
            "{:?}",
            want.report
        );
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&bytes).unwrap();
        // Chunks smaller than some lines (they grow), odd sizes, many threads.
        for (threads, chunk) in [(1, 1 << 20), (1, 1000), (3, 4096), (4, 777), (8, 65536)] {
            let got = read_log_with(&file, bytes.len() as u64, threads, chunk, None).unwrap();
            assert_eq!(got.header, want.header, "{threads} threads, chunk {chunk}");
            assert_eq!(
                got.records, want.records,
                "{threads} threads, chunk {chunk}"
            );
            assert_eq!(got.report, want.report, "{threads} threads, chunk {chunk}");
            assert_eq!(
                got.last_seq, want.last_seq,
                "{threads} threads, chunk {chunk}"
            );
            // Handed to a sink chunk by chunk: the same records, in order,
            // after the header, and the same log without them.
            let mut sink = Collect::default();
            let rest =
                read_log_with(&file, bytes.len() as u64, threads, chunk, Some(&mut sink)).unwrap();
            assert_eq!(sink.header, want.header, "{threads} threads, chunk {chunk}");
            assert!(!sink.record_before_header);
            assert_eq!(
                sink.records, want.records,
                "{threads} threads, chunk {chunk}"
            );
            assert!(sink.expected > 0);
            assert!(rest.records.is_empty());
            assert_eq!(
                (rest.header, rest.report, rest.last_seq),
                (want.header.clone(), want.report.clone(), want.last_seq)
            );
        }
    }

    /// A sink that keeps what it is given.
    #[derive(Default)]
    struct Collect {
        header: Option<SessionMeta>,
        records: Vec<crate::store::SeqRecord>,
        record_before_header: bool,
        expected: usize,
    }

    impl RecordSink for Collect {
        fn header(&mut self, meta: &SessionMeta) {
            assert!(self.header.is_none(), "the header is given once");
            self.header = Some(meta.clone());
        }
        fn record(&mut self, record: crate::store::SeqRecord) {
            self.record_before_header |= self.header.is_none();
            self.records.push(record);
        }
        fn expect(&mut self, records: usize) {
            self.expected += records;
        }
    }
}
