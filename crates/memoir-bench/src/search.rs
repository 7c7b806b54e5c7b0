//! Cross-session search: memoir's persistent index against plain
//! SQLite FTS5 over the same messages, and the view's in-memory BM25, on a
//! generated coding-agent-shaped store with known-answer queries.
//!
//! `memoir-bench search [--sessions N] [--messages M] [--queries Q]
//! [--result-lines L] [--engines memoir,fts5,view,pg] [--dir DIR]` (default
//! 1,000 × 100 = 100k messages; the size is `--sessions 10000
//! --result-lines 60`, ~2 GB). Each engine indexes in its own child process,
//! so its peak RSS (VmHWM) is its own. With `--dir`, a store already there
//! (same number of sessions) is reused. `pg` is memoir's index on PostgreSQL
//! (the same library API; the store copied into a fresh schema first,
//! untimed) on the server at `$MEMOIR_BENCH_POSTGRES_URL` (else
//! `$MEMOIR_TEST_POSTGRES_URL`); its peak RSS is the client's only.

#[path = "../../memoir/tests/suite/support/corpus.rs"]
mod corpus;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{arg, num, percentile};
use corpus::{KnownAnswer, Spec};
use memoir::message::Message;
use memoir::record::Record;
use memoir::search::{SearchFilter, SearchIndex, SearchMode, SearchQuery};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::view::lexical::{Bm25Params, LexicalIndex, Tokenizer, TokenizerConfig};

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The transcripts in `dir` (its `*.jsonl`; not the index a previous run
/// left in `dir/search`, nor a peer's database).
fn jsonl_files(dir: &Path) -> Vec<std::fs::DirEntry> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default()
}

/// Bytes of the transcripts in `dir`.
fn jsonl_bytes(dir: &Path) -> u64 {
    jsonl_files(dir)
        .iter()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Before each engine, untimed: the previous engine's writes flushed to
/// disk (`sync`) and every transcript read once, so each engine starts
/// from the same state (a store in use is in the page cache) instead of
/// paying for the writeback or the reads the one before it caused.
fn settle(dir: &Path) {
    let _ = Command::new("sync").status();
    let mut sink = Vec::new();
    for e in jsonl_files(dir) {
        use std::io::Read;
        sink.clear();
        if let Ok(mut f) = std::fs::File::open(e.path()) {
            let _ = f.read_to_end(&mut sink);
        }
    }
}

fn spec() -> Spec {
    let sessions = num("--sessions", 1000);
    let queries = num("--queries", 250);
    Spec {
        sessions,
        messages_per_session: num("--messages", 100),
        answer_every: (sessions / queries).max(1),
        seed: 42,
        extra_result_lines: num("--result-lines", 0),
    }
}

/// The known answers (regenerated: deterministic, no store reading).
fn answers(spec: &Spec) -> Vec<KnownAnswer> {
    (0..spec.sessions)
        .filter_map(|i| {
            let (msgs, a) = corpus::messages_of(spec, i);
            let meta = corpus::meta_of(i);
            a.map(|(j, query, role, tool)| KnownAnswer {
                query,
                session: meta.id.clone(),
                seq: j as u64 + 1,
                project: meta.workspace.to_string_lossy().into_owned(),
                agent: String::new(),
                role,
                time: msgs[j].timestamp.unwrap_or_default(),
                tool,
            })
        })
        .collect()
}

fn text_of(m: &Message) -> String {
    // The peers index the same text memoir does: text, tool calls, results.
    let mut s = String::new();
    for b in &m.content {
        match b {
            memoir::message::Block::Text { text } => s.push_str(text),
            memoir::message::Block::ToolUse { name, input, .. } => {
                s.push_str(name);
                s.push(' ');
                s.push_str(&input.to_string());
            }
            memoir::message::Block::ToolResult { content, .. } => s.push_str(content),
            _ => {}
        }
        s.push('\n');
    }
    s
}

/// Every (session, seq, text) of the store, streamed one session at a time.
fn for_each_message(store: &dyn LogStore, mut f: impl FnMut(&str, u64, &str)) -> usize {
    let (listed, _) = store.list().expect("list");
    let mut n = 0;
    for l in listed {
        let raw = store.read(&l.meta.id).expect("read");
        for r in raw.records {
            if let Record::Message(m) = &r.record {
                f(&l.meta.id, r.seq, &text_of(m));
                n += 1;
            }
        }
    }
    n
}

struct Row {
    engine: &'static str,
    index_s: f64,
    msgs: usize,
    rss_mb: f64,
    size_mb: f64,
    incr_ms: String,
    lex_p50: f64,
    lex_p99: f64,
    hyb_p50: String,
    hyb_p99: String,
    hyb_once: String,
    recall_lex: f64,
    recall_hyb: String,
}

fn print_row(r: &Row) {
    println!(
        "| {} | {:.1} | {:.0} | {:.0} | {:.0} | {} | {:.2} | {:.2} | {} | {} | {} | {:.3} | {} |",
        r.engine,
        r.index_s,
        r.msgs as f64 / r.index_s,
        r.rss_mb,
        r.size_mb,
        r.incr_ms,
        r.lex_p50,
        r.lex_p99,
        r.hyb_p50,
        r.hyb_p99,
        r.hyb_once,
        r.recall_lex,
        r.recall_hyb
    );
}

/// Child: memoir's index, full build, incremental update, searches.
fn child_memoir(dir: &Path) {
    let t = Instant::now();
    let mut ix = SearchIndex::open(dir).expect("open");
    let report = ix.rebuild().expect("rebuild");
    let index_s = t.elapsed().as_secs_f64();
    let store = FileStore::new(dir, Durability::None);
    measure(
        "memoir search (SQLite FTS5 + view tokenizer, hash hybrid)",
        &mut ix,
        &store,
        index_s,
        report.messages as usize,
        &|| SearchIndex::open(dir).expect("open"),
    );
}

/// Child: memoir's index on PostgreSQL (the store copied in first, untimed).
fn child_pg(dir: &Path) {
    use memoir::store::postgres::{PgOptions, PgStore};
    let url = std::env::var("MEMOIR_BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("MEMOIR_TEST_POSTGRES_URL"))
        .expect("set MEMOIR_BENCH_POSTGRES_URL (or MEMOIR_TEST_POSTGRES_URL) for --engines pg");
    let schema = format!("memoir_bench_{}", uuid::Uuid::new_v4().simple());
    let options = PgOptions {
        schema: schema.clone(),
        durability: Durability::None,
        ..PgOptions::default()
    };
    let pg = std::sync::Arc::new(PgStore::connect(&url, options).expect("connect"));
    let files = FileStore::new(dir, Durability::None);
    let t = Instant::now();
    let (listed, _) = files.list().expect("list");
    for l in &listed {
        let raw = files.read(&l.meta.id).expect("read");
        pg.create(raw.header.as_ref().expect("header"))
            .expect("create");
        let records: Vec<Record> = raw.records.into_iter().map(|r| r.record).collect();
        for chunk in records.chunks(500) {
            pg.append(&l.meta.id, chunk, None).expect("append");
        }
    }
    eprintln!(
        "copied the store into {schema} in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let mut ix = SearchIndex::open_postgres(pg.clone()).expect("open");
    let report = ix.rebuild().expect("rebuild");
    let index_s = t.elapsed().as_secs_f64();
    measure(
        "memoir search on PostgreSQL (tsvector + GIN, same BM25, hash hybrid)",
        &mut ix,
        pg.as_ref(),
        index_s,
        report.messages as usize,
        &|| SearchIndex::open_postgres(pg.clone()).expect("open"),
    );
    drop(ix);
    drop(pg);
    if std::env::var_os("MEMOIR_BENCH_KEEP_SCHEMA").is_some() {
        eprintln!("kept schema {schema} (MEMOIR_BENCH_KEEP_SCHEMA)");
        return;
    }
    if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"));
    }
}

/// Measure a built index: size, incremental updates after appends, lexical
/// and hybrid latency and recall of the known answers; print its row.
fn measure(
    name: &'static str,
    ix: &mut SearchIndex,
    store: &dyn LogStore,
    index_s: f64,
    messages: usize,
    reopen: &dyn Fn() -> SearchIndex,
) {
    let spec = spec();
    let answers = answers(&spec);
    let rss = peak_rss_mb();
    let size = ix.stats().expect("stats").bytes as f64 / 1e6;
    // Incremental: append one message to one session, then catch up.
    let mut note = Vec::new();
    let mut full = Vec::new();
    for i in 0..20 {
        let id = format!("s{:06}", (i * 37) % spec.sessions);
        store
            .append(
                &id,
                &[Record::Message(Message::user(format!("appended note {i}")))],
                None,
            )
            .expect("append");
        let t = Instant::now();
        ix.note_append(&id).expect("note");
        note.push(t.elapsed().as_secs_f64() * 1e3);
        store
            .append(
                &id,
                &[Record::Message(Message::user(format!("second note {i}")))],
                None,
            )
            .expect("append");
        let t = Instant::now();
        ix.update().expect("update");
        full.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let lat = |mode: SearchMode| -> (f64, f64, f64) {
        let mut v = Vec::new();
        let mut hit = 0;
        for a in &answers {
            let q = SearchQuery {
                text: a.query.clone(),
                k: 10,
                mode,
                filter: SearchFilter::default(),
            };
            let t = Instant::now();
            let hits = ix.search(&q).expect("search");
            v.push(t.elapsed().as_secs_f64() * 1e3);
            hit += hits
                .iter()
                .any(|h| h.session == a.session && h.seq == a.seq) as usize;
        }
        let recall = hit as f64 / answers.len().max(1) as f64;
        (percentile(&mut v, 0.5), percentile(&mut v, 0.99), recall)
    };
    let (l50, l99, lr) = lat(SearchMode::Lexical);
    let (h50, h99, hr) = lat(SearchMode::Hybrid);
    // As a one-shot `memoir search` runs: the index opened afresh (untimed)
    // for each query, so nothing a previous query learnt is reused.
    // Fifty queries: each opening costs more than its query.
    let mut once = Vec::new();
    for a in answers.iter().take(50) {
        let fresh = reopen();
        let q = SearchQuery {
            text: a.query.clone(),
            k: 10,
            mode: SearchMode::Hybrid,
            filter: SearchFilter::default(),
        };
        let t = Instant::now();
        fresh.search(&q).expect("search");
        once.push(t.elapsed().as_secs_f64() * 1e3);
    }
    print_row(&Row {
        engine: name,
        index_s,
        msgs: messages,
        rss_mb: rss,
        size_mb: size,
        incr_ms: format!(
            "{:.2} (note_append) / {:.1} (update)",
            percentile(&mut note, 0.5),
            percentile(&mut full, 0.5)
        ),
        lex_p50: l50,
        lex_p99: l99,
        hyb_p50: format!("{h50:.2}"),
        hyb_p99: format!("{h99:.2}"),
        hyb_once: format!(
            "{:.2} / {:.2}",
            percentile(&mut once, 0.5),
            percentile(&mut once, 0.99)
        ),
        recall_lex: lr,
        recall_hyb: format!("{hr:.3}"),
    });
}

/// Child: plain SQLite FTS5 (porter tokenizer, content stored), same messages.
fn child_fts5(dir: &Path) {
    let spec = spec();
    let answers = answers(&spec);
    let db_path = dir.join("peer-fts5.sqlite");
    let _ = std::fs::remove_file(&db_path);
    let t = Instant::now();
    let mut conn = rusqlite::Connection::open(&db_path).expect("open");
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
         CREATE VIRTUAL TABLE m USING fts5(session UNINDEXED, seq UNINDEXED, body, tokenize='porter unicode61');",
    )
    .expect("schema");
    let store = FileStore::new(dir, Durability::None);
    let tx = conn.transaction().expect("tx");
    let n = {
        let mut ins = tx
            .prepare("INSERT INTO m(session, seq, body) VALUES (?1, ?2, ?3)")
            .expect("prepare");
        for_each_message(&store, |s, seq, text| {
            ins.execute(rusqlite::params![s, seq as i64, text])
                .expect("insert");
        })
    };
    tx.commit().expect("commit");
    let index_s = t.elapsed().as_secs_f64();
    let rss = peak_rss_mb();
    let size = std::fs::metadata(&db_path).map_or(0, |m| m.len()) as f64 / 1e6;
    let mut v = Vec::new();
    let mut hit = 0;
    let mut st = conn
        .prepare("SELECT session, seq FROM m WHERE m MATCH ?1 ORDER BY rank LIMIT 10")
        .expect("prepare");
    for a in &answers {
        let q = a
            .query
            .split_whitespace()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ");
        let t = Instant::now();
        let rows: Vec<(String, i64)> = st
            .query_map([q], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        v.push(t.elapsed().as_secs_f64() * 1e3);
        hit += rows
            .iter()
            .any(|(s, q)| *s == a.session && *q as u64 == a.seq) as usize;
    }
    print_row(&Row {
        engine: "plain SQLite FTS5 (porter, content stored)",
        index_s,
        msgs: n,
        rss_mb: rss,
        size_mb: size,
        incr_ms: "n/a".into(),
        lex_p50: percentile(&mut v, 0.5),
        lex_p99: percentile(&mut v, 0.99),
        hyb_p50: "n/a".into(),
        hyb_p99: "n/a".into(),
        hyb_once: "n/a".into(),
        recall_lex: hit as f64 / answers.len().max(1) as f64,
        recall_hyb: "n/a".into(),
    });
}

/// Child: the view's in-memory BM25 over every message (rebuilt per process).
fn child_view_bm25(dir: &Path) {
    let spec = spec();
    let answers = answers(&spec);
    let tk = Tokenizer::new(TokenizerConfig::default());
    let t = Instant::now();
    let mut ix = LexicalIndex::new(Bm25Params::default());
    let mut keys: Vec<(u32, u64)> = Vec::new();
    let mut sessions: Vec<String> = Vec::new();
    let store = FileStore::new(dir, Durability::None);
    let n = for_each_message(&store, |s, seq, text| {
        if sessions.last().map(String::as_str) != Some(s) {
            sessions.push(s.to_string());
        }
        ix.insert(&tk.tokens(text));
        keys.push((sessions.len() as u32 - 1, seq));
    });
    let index_s = t.elapsed().as_secs_f64();
    let rss = peak_rss_mb();
    let mut v = Vec::new();
    let mut hit = 0;
    for a in &answers {
        let t = Instant::now();
        let hits = ix.search(&tk.tokens(&a.query), 10, &|_| true);
        v.push(t.elapsed().as_secs_f64() * 1e3);
        hit += hits.iter().any(|(slot, _)| {
            let (s, seq) = keys[*slot as usize];
            sessions[s as usize] == a.session && seq == a.seq
        }) as usize;
    }
    print_row(&Row {
        engine: "view BM25 (in memory, rebuilt per process)",
        index_s,
        msgs: n,
        rss_mb: rss,
        size_mb: 0.0,
        incr_ms: "n/a".into(),
        lex_p50: percentile(&mut v, 0.5),
        lex_p99: percentile(&mut v, 0.99),
        hyb_p50: "n/a".into(),
        hyb_p99: "n/a".into(),
        hyb_once: "n/a".into(),
        recall_lex: hit as f64 / answers.len().max(1) as f64,
        recall_hyb: "n/a".into(),
    });
}

/// Entry point of `memoir-bench search`.
pub fn main() {
    if let (Some(phase), Some(dir)) = (arg("--phase"), arg("--dir")) {
        let dir = PathBuf::from(dir);
        match phase.as_str() {
            "memoir" => child_memoir(&dir),
            "fts5" => child_fts5(&dir),
            "view" => child_view_bm25(&dir),
            "pg" => child_pg(&dir),
            other => panic!("unknown phase {other}"),
        }
        return;
    }
    let spec = spec();
    let tmp;
    let dir = match arg("--dir") {
        Some(d) => PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir().expect("tempdir");
            tmp.path().to_path_buf()
        }
    };
    let have = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
                .count()
        })
        .unwrap_or(0);
    if have != spec.sessions {
        let t = Instant::now();
        let answers = corpus::generate(&dir, &spec);
        eprintln!(
            "generated {} sessions x {} messages ({} known answers) in {:.1}s",
            spec.sessions,
            spec.messages_per_session,
            answers.len(),
            t.elapsed().as_secs_f64()
        );
    }
    let store_mb = jsonl_bytes(&dir) as f64 / 1e6;
    println!(
        "store: {} sessions, {} messages, {:.0} MB of JSONL, {} known-answer queries; {} cores",
        spec.sessions,
        spec.sessions * spec.messages_per_session,
        store_mb,
        answers(&spec).len(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!();
    println!("| engine | full index s | msg/s | peak RSS MB | index MB | incremental ms (p50) | lexical p50 ms | lexical p99 ms | hybrid p50 ms | hybrid p99 ms | hybrid p50 / p99 ms, one query per opening | recall@10 lexical | recall@10 hybrid |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe().expect("exe");
    let pass: Vec<String> = crate::args().skip(1).collect();
    let engines = arg("--engines").unwrap_or_else(|| "memoir,fts5,view".into());
    for phase in engines.split(',') {
        settle(&dir);
        let mut c = Command::new(&exe);
        c.arg("search").args(&pass).args(["--phase", phase]);
        if arg("--dir").is_none() {
            c.args(["--dir", &dir.to_string_lossy()]);
        }
        let status = c.status().expect("child");
        assert!(status.success(), "{phase} failed");
    }
}
