//! Peak memory of loading a transcript (at most 1.5× the
//! file). Alone in its own test binary because it installs a counting global
//! allocator, which measures every allocation of the process.
//!
//! The bound is on live heap bytes (what the allocator was asked for and not
//! given back), the part of the resident set the reader controls; the bench
//! (`memoir-bench transcript`, `BENCH_ONLY=load`) measures the resident set.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use memoir::message::{Block, Message, Role, Usage};
use memoir::record::{ForkPoint, Record, SessionMeta, Taint};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;
use serde_json::json;

/// The system allocator, counting live bytes and their high-water mark.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// The one `unsafe` of the test suite: a global allocator is an unsafe trait.
// SAFETY: every call is forwarded to `System` with the same arguments; the
// counters only observe sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (the caller upholds `alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with this layout.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Words for generated text.
const WORDS: [&str; 16] = [
    "the", "parser", "now", "returns", "an", "empty", "tree", "for", "blank", "input", "and",
    "tests", "cover", "each", "edge", "case",
];

fn prose(seed: usize, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 8);
    let mut k = seed;
    while out.len() < bytes {
        out.push_str(WORDS[k % WORDS.len()]);
        out.push(if k.is_multiple_of(13) { '\n' } else { ' ' });
        k = k.wrapping_mul(2_654_435_761).wrapping_add(11) >> 3;
    }
    out
}

/// The turns of a coding agent, ~1 KB each: a request, a tool call with its
/// reasoning, the tool's output, an answer with usage.
fn turn(i: usize) -> Message {
    match i % 4 {
        0 => Message::user(format!("step {i}: {}", prose(i, 800))),
        1 => Message::new(
            Role::Assistant,
            vec![
                Block::Thinking {
                    text: prose(i, 250),
                    signature: Some(format!("sig{i:06}")),
                },
                Block::ToolUse {
                    id: format!("call_{i:08}"),
                    name: "shell".into(),
                    input: json!({"command": format!("cargo test case_{i}"), "timeout": 60, "why": prose(i + 1, 300)}),
                },
            ],
        ),
        2 => Message::tool_result(format!("call_{:08}", i - 1), prose(i, 900), i % 8 == 6),
        _ => Message::assistant(prose(i, 900)).with_usage(Usage {
            input_tokens: 1200 + i as u64,
            output_tokens: 80,
            cache_read_input_tokens: 900,
            ..Usage::default()
        }),
    }
}

/// A transcript of about `bytes` bytes: batches of turns and single appends,
/// with taint and title records between them. Returns its path and size.
fn write_transcript(dir: &std::path::Path, bytes: u64) -> (std::path::PathBuf, u64) {
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir, Durability::None));
    let s = Session::create_in(store, SessionMeta::new("big")).unwrap();
    let mut i = 0;
    while std::fs::metadata(&s.path).unwrap().len() < bytes {
        let batch: Vec<Message> = (i..i + 40).map(turn).collect();
        s.append_messages(&batch).unwrap();
        s.append_messages(&[turn(i + 40)]).unwrap();
        s.append(&Record::Taint(Taint {
            private: i.is_multiple_of(3),
            untrusted: false,
        }))
        .unwrap();
        i += 41;
    }
    let size = std::fs::metadata(&s.path).unwrap().len();
    (s.path, size)
}

/// Room for what a read holds besides the messages, whatever the file's
/// size: a chunk being checked while the one before is applied (1 MiB each,
/// with their decoded records).
const READ_ROOM: usize = 4 << 20;

/// Live heap bytes at the peak of `load` and after it, above those before.
fn measure<T>(load: impl FnOnce() -> T) -> (T, usize, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = load();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    let kept = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    (out, peak, kept)
}

/// Check the bounds for a load of `size` file bytes.
fn check(what: &str, size: u64, peak: usize, kept: usize) {
    let ratio = |b: usize| b as f64 / size as f64;
    eprintln!(
        "{what}: {size} B read, peak {peak} B ({:.2}x), kept {kept} B ({:.2}x)",
        ratio(peak),
        ratio(kept)
    );
    let bound = size as usize * 3 / 2 + READ_ROOM;
    assert!(
        peak <= bound,
        "{what}: reading {size} bytes peaked at {peak} live heap bytes ({:.2}x), over 1.5x + 4 \
         MiB = {bound}",
        ratio(peak)
    );
    // Above what it keeps, a load holds a few chunks, never a second copy
    // of the records (a record list beside the messages is ~0.2x).
    assert!(
        peak - kept.min(peak) <= size as usize / 10 + READ_ROOM,
        "{what}: the load held {} bytes above the {kept} it kept ({:.2}x)",
        peak - kept.min(peak),
        ratio(peak - kept.min(peak))
    );
}

// One test: the counters are the process's, so no other test may run beside it.
#[test]
fn loading_a_transcript_or_its_fork_peaks_below_one_and_a_half_times_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (path, size) = write_transcript(tmp.path(), 24 << 20);

    let (t, peak, kept) = measure(|| Session::read(&path).unwrap());
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert!(t.messages.len() > 20_000, "{} messages", t.messages.len());
    check("session", size, peak, kept);

    // A fork by reference cut halfway reads the whole parent and keeps its
    // first half.
    let half = t.messages.len() / 2;
    let mut meta = SessionMeta::new("fork");
    meta.parent = Some(ForkPoint::new("big", t.message_seqs[half - 1], half));
    drop(t);
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(tmp.path(), Durability::None));
    let fork = Session::create_in(store, meta).unwrap();
    fork.append_messages(&(0..40).map(turn).collect::<Vec<_>>())
        .unwrap();
    let fork_size = std::fs::metadata(&fork.path).unwrap().len();
    let (f, peak, kept) = measure(|| Session::read(&fork.path).unwrap());
    assert!(f.report.is_clean(), "{:?}", f.report);
    assert_eq!((f.inherited, f.messages.len()), (half, half + 40));
    check("fork", size + fork_size, peak, kept);
}
