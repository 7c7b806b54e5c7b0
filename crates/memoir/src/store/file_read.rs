//! Reading a whole transcript into a verified [`RawLog`], fast: the file is
//! read in large chunks cut at line ends, the context-free half of the
//! reader's rules (framing, BLAKE3, payload parse; [`scan::check_line`]) runs
//! on several threads over disjoint slices of the chunk, in place (no copy
//! per line), and the results are fed in file order to the one
//! [`scan::Scanner`], which applies the order, chain and batch rules. The
//! outcome is the same `RawLog` as [`scan::scan`] over the same bytes.
//!
//! Memory: one chunk (1 MiB, or the longest line) besides the decoded
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
fn read_log_with(
    file: &File,
    len: u64,
    threads: usize,
    chunk: usize,
    mut sink: Option<&mut dyn RecordSink>,
) -> io::Result<RawLog> {
    let mut scanner = Scanner::new();
    // By position: the descriptor's cursor is neither used nor moved.
    let mut reader = super::ReadAt { file, pos: 0 };
    let mut buf: Vec<u8> = Vec::with_capacity((len as usize).min(chunk) + 1);
    let mut base = 0u64; // file offset of buf[0]
    let mut want = chunk;
    let mut eof = false;
    let mut header_given = false;
    while !eof || !buf.is_empty() {
        while buf.len() < want && !eof {
            let room = (want - buf.len()) as u64;
            eof = reader.by_ref().take(room).read_to_end(&mut buf)? == 0;
        }
        let end = if eof {
            buf.len()
        } else {
            match memchr::memrchr(b'\n', &buf) {
                Some(p) => p + 1,
                None => {
                    // One line longer than the chunk: read on.
                    want = buf.len() + chunk;
                    continue;
                }
            }
        };
        want = chunk;
        for (checked, len, offset, terminated) in check_chunk(&mut buf[..end], base, threads) {
            scanner.push_checked(checked, len, offset, terminated);
        }
        if let Some(sink) = sink.as_deref_mut() {
            if !header_given {
                if let Some(meta) = scanner.header() {
                    sink.header(meta);
                    header_given = true;
                }
            }
            let records = scanner.take_records();
            if base == 0 {
                // The first chunk's density estimates the whole file's.
                let scale = len as f64 / end.max(1) as f64;
                sink.expect((records.len() as f64 * scale.max(1.0)).ceil() as usize);
            }
            for record in records {
                sink.record(record);
            }
        }
        buf.drain(..end);
        base += end as u64;
    }
    Ok(scanner.finish())
}

/// Check every line of `chunk` (whose first byte is at file offset `base`;
/// all its lines end with a newline except perhaps the file's last), split
/// over up to `threads` threads at line boundaries, results in order.
fn check_chunk(chunk: &mut [u8], base: u64, threads: usize) -> Vec<Line> {
    let parts = threads.min(chunk.len() / MIN_SHARE).max(1);
    if parts == 1 {
        return check_lines(chunk, base);
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
    std::thread::scope(|scope| {
        let mut slices = slices.into_iter();
        let first = slices.next();
        let handles: Vec<_> = slices
            .map(|(slice, at)| scope.spawn(move || check_lines(slice, at)))
            .collect();
        // The calling thread takes the first share itself.
        let mut out = first.map_or_else(Vec::new, |(slice, at)| check_lines(slice, at));
        for h in handles {
            match h.join() {
                Ok(lines) => out.extend(lines),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// Check the lines of `bytes` (at file offset `base`) on this thread.
fn check_lines(bytes: &mut [u8], base: u64) -> Vec<Line> {
    let mut out = Vec::with_capacity(bytes.len() / 512 + 1);
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
    out
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
            assert_eq!(sink.records, want.records, "{threads} threads, chunk {chunk}");
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
