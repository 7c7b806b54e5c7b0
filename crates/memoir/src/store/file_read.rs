//! Reading a whole transcript into a verified [`RawLog`], fast: the file is
//! read in large chunks cut at line ends, the context-free half of the
//! reader's rules (framing, BLAKE3, payload parse; [`scan::check_line`]) runs
//! on several threads, a whole chunk each, in place (no copy per line), and
//! the results are fed in file order to the one [`scan::Scanner`], which
//! applies the order, chain and batch rules, while the next chunks are read
//! and checked. The outcome is the same `RawLog` as [`scan::scan`] over the
//! same bytes.
//!
//! Memory: a few chunks per thread (512 KiB, or the longest line) besides the decoded
//! records, which [`read_log_each`] hands to a sink chunk by chunk instead of
//! collecting (a transcript load then holds the file's messages and a
//! few chunks, not the records too). Small files (under 1 MiB) are read on the
//! calling thread.

use std::fs::File;
use std::io::{self, Read};
use std::sync::OnceLock;

use super::scan::{self, Checked, Scanner};
use super::{RawLog, RecordSink};

/// Bytes read per chunk (a longer line grows the chunk to hold it). Each
/// worker holds up to [`DEPTH`] chunks with their decoded records, so the
/// chunk size bounds a load's memory beyond what it keeps: with 1 MiB
/// chunks, a fork's read of a 25 MB parent held 0.47x the file beyond it
/// (`tests/load_memory.rs` allows 0.1x + 4 MiB); 512 KiB chunks load as fast.
const CHUNK: usize = 512 << 10;

/// Files smaller than this are verified on the calling thread.
const PARALLEL_MIN: u64 = 1 << 20;

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

/// Chunks each verifying thread may hold (queued or in hand) at a time.
const DEPTH: usize = 2;

/// A chunk on its way through the pipeline: its bytes, its file offset and
/// its checked lines (both buffers recycled from chunk to chunk).
type Job = (Vec<u8>, u64, Vec<Line>);

/// [`read_log`] with a given thread count and chunk size, and a sink or not.
///
/// With several threads, whole chunks are checked by `threads` workers,
/// chunk `k` by worker `k mod threads`, while the calling thread reads the
/// chunks ahead (at most [`DEPTH`] per worker) and applies the checked ones
/// in file order (taking them round-robin from the workers keeps the
/// order). No chunk waits for another's check: a slow chunk holds up only
/// its own worker's queue.
fn read_log_with(
    file: &File,
    len: u64,
    threads: usize,
    chunk: usize,
    sink: Option<&mut dyn RecordSink>,
) -> io::Result<RawLog> {
    let mut feed = Feed {
        // Spans are kept for a collected log only (a sink takes the
        // records as they come).
        scanner: if sink.is_none() {
            Scanner::with_spans()
        } else {
            Scanner::new()
        },
        sink,
        header_given: false,
        len,
    };
    let mut chunks = Chunks::new(file, chunk);
    if threads == 1 {
        let (mut bytes, mut lines) = (Vec::new(), Vec::new());
        while let Some(base) = chunks.next_into(&mut bytes)? {
            check_lines(&mut bytes, base, &mut lines);
            feed.push(&mut lines, base, bytes.len());
        }
        return Ok(feed.scanner.finish());
    }
    std::thread::scope(|scope| -> io::Result<()> {
        let mut to_workers = Vec::with_capacity(threads);
        let mut from_workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let (job_tx, job_rx) = std::sync::mpsc::sync_channel::<Job>(DEPTH);
            let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<Job>(DEPTH);
            scope.spawn(move || {
                for (mut bytes, base, mut lines) in job_rx {
                    check_lines(&mut bytes, base, &mut lines);
                    if done_tx.send((bytes, base, lines)).is_err() {
                        break; // the applying side stopped
                    }
                }
            });
            to_workers.push(job_tx);
            from_workers.push(done_rx);
        }
        let mut spare: Vec<(Vec<u8>, Vec<Line>)> = Vec::new();
        let (mut sent, mut applied, mut more) = (0usize, 0usize, true);
        loop {
            // Keep every worker's queue full: at most DEPTH chunks each, so
            // no send blocks.
            while more && sent - applied < threads * DEPTH {
                let (mut bytes, lines) = spare.pop().unwrap_or_default();
                match chunks.next_into(&mut bytes)? {
                    Some(base) => {
                        if to_workers[sent % threads]
                            .send((bytes, base, lines))
                            .is_err()
                        {
                            return Ok(()); // a worker panicked: the scope says so
                        }
                        sent += 1;
                    }
                    None => more = false,
                }
            }
            if applied == sent {
                return Ok(());
            }
            let Ok((bytes, base, mut lines)) = from_workers[applied % threads].recv() else {
                return Ok(()); // a worker panicked: the scope says so
            };
            feed.push(&mut lines, base, bytes.len());
            spare.push((bytes, lines));
            applied += 1;
        }
    })?;
    Ok(feed.scanner.finish())
}

/// A file in chunks of about `chunk` bytes cut after a newline (a longer
/// line grows its chunk), read by position: the descriptor's cursor is
/// neither used nor moved. Each chunk is read into a buffer the caller owns,
/// so chunks can be checked on other threads while the next is read.
struct Chunks<'f> {
    reader: super::ReadAt<'f>,
    /// Bytes read past the last chunk's final newline: the start of the
    /// next chunk.
    carry: Vec<u8>,
    /// File offset of the next chunk's first byte.
    base: u64,
    chunk: usize,
    eof: bool,
}

impl<'f> Chunks<'f> {
    fn new(file: &'f File, chunk: usize) -> Self {
        Chunks {
            reader: super::ReadAt { file, pos: 0 },
            carry: Vec::new(),
            base: 0,
            chunk,
            eof: false,
        }
    }

    /// Read the next chunk into `buf` (replacing its contents) and return
    /// the file offset of its first byte; all its lines end with a newline
    /// except perhaps the file's last. `None` at the end of the file.
    ///
    /// A recycled `buf` is read into where it stands (only bytes it never
    /// had are zeroed first), not cleared and grown again.
    fn next_into(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<u64>> {
        let mut filled = self.carry.len();
        let mut want = self.chunk.max(filled + 1);
        buf.resize(want, 0);
        buf[..filled].copy_from_slice(&self.carry);
        self.carry.clear();
        loop {
            while filled < want && !self.eof {
                match self.reader.read(&mut buf[filled..want]) {
                    Ok(0) => self.eof = true,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if filled == 0 {
                buf.clear();
                return Ok(None);
            }
            let end = if self.eof {
                filled
            } else {
                match memchr::memrchr(b'\n', &buf[..filled]) {
                    Some(p) => p + 1,
                    None => {
                        // One line longer than the chunk: read on.
                        want = filled + self.chunk;
                        buf.resize(want, 0);
                        continue;
                    }
                }
            };
            self.carry.extend_from_slice(&buf[end..filled]);
            buf.truncate(end);
            let base = self.base;
            self.base += end as u64;
            return Ok(Some(base));
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
