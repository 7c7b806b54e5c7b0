//! A tenant's `search_sessions` over `memoir mcp --http`'s shared store, on
//! a real PostgreSQL server, two ways in the same run:
//!
//! - **store index**: the store's own search tables, restricted to the
//!   tenant's `P~` ids (what a PostgreSQL or file store gets);
//! - **per-project index**: a SQLite index per project over the tenant's
//!   namespace, which has no file fingerprints to skip unchanged sessions
//!   with (what every tenant got before, and a store without an index of
//!   its own still gets). The same store behind a wrapper that hides it.
//!
//! `MEMOIR_TEST_POSTGRES_URL=postgres://... cargo bench -p memoir-mcp --bench
//! tenant_search -- [--sessions N] [--messages M] [--calls C]` (defaults:
//! 300 sessions of 20 replies per project, two projects, 30 calls; the URL
//! is what `bash .ci/postgres.sh start` prints). A throwaway schema is
//! created and dropped.

#[path = "support/args.rs"]
mod args;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use args::{num, percentile};
use chrono::{DateTime, Utc};
use memoir::embed::HashEmbedder;
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::postgres::{PgOptions, PgStore};
use memoir::store::{Appended, Durability, Listed, LogStore, RawLog, RecordSink};
use memoir_mcp::{Backend, McpConfig, MemoirMcp};
use serde_json::json;

/// The store behind a wrapper that is neither a file store nor PostgreSQL
/// to the search index, so a tenant gets a per-project index.
#[derive(Debug)]
struct Hidden(Arc<PgStore>);

impl LogStore for Hidden {
    fn create(&self, meta: &SessionMeta) -> memoir::Result<Appended> {
        self.0.create(meta)
    }
    fn append(&self, id: &str, records: &[Record], next: Option<u64>) -> memoir::Result<Appended> {
        self.0.append(id, records, next)
    }
    fn read(&self, id: &str) -> memoir::Result<RawLog> {
        self.0.read(id)
    }
    fn read_each(&self, id: &str, sink: &mut dyn RecordSink) -> memoir::Result<RawLog> {
        self.0.read_each(id, sink)
    }
    fn read_header(&self, id: &str) -> memoir::Result<Option<SessionMeta>> {
        self.0.read_header(id)
    }
    fn list(&self) -> memoir::Result<(Vec<Listed>, usize)> {
        self.0.list()
    }
    fn list_project(&self, project: &str) -> memoir::Result<(Vec<Listed>, usize)> {
        self.0.list_project(project)
    }
    fn last_activity(&self, id: &str) -> memoir::Result<Option<DateTime<Utc>>> {
        self.0.last_activity(id)
    }
    fn location(&self, id: &str) -> PathBuf {
        self.0.location(id)
    }
    fn durability(&self) -> Durability {
        self.0.durability()
    }
}

fn server(store: Arc<dyn LogStore>, index_root: &Path) -> MemoirMcp {
    MemoirMcp::new(McpConfig {
        backend: Backend::Tenants {
            store,
            index_root: index_root.to_path_buf(),
        },
        allow_writes: false,
        embedder: Arc::new(HashEmbedder::new(256)),
        blobs: None,
    })
}

/// Milliseconds of each of `calls` searches by `tenant`, after one to warm up.
fn time_searches(s: &MemoirMcp, tenant: &str, calls: usize) -> Vec<f64> {
    let args = json!({ "query": "wombat protocol" })
        .as_object()
        .unwrap()
        .clone();
    let run = || {
        let t = Instant::now();
        let r = s.call_blocking(Some(tenant), "search_sessions", args.clone());
        assert_ne!(r.is_error, Some(true), "{:?}", r.content);
        t.elapsed().as_secs_f64() * 1e3
    };
    run();
    (0..calls).map(|_| run()).collect()
}

fn main() {
    let Ok(url) = std::env::var("MEMOIR_TEST_POSTGRES_URL") else {
        eprintln!("set MEMOIR_TEST_POSTGRES_URL (bash .ci/postgres.sh start prints it)");
        std::process::exit(2);
    };
    let (sessions, messages, calls) = (
        num("--sessions", 300),
        num("--messages", 20),
        num("--calls", 30),
    );
    let schema = format!("memoir_bench_{}", uuid::Uuid::new_v4().simple());
    let options = PgOptions {
        schema: schema.clone(),
        durability: Durability::Fsync,
        ..PgOptions::default()
    };
    let store = Arc::new(PgStore::connect(&url, options).expect("connect"));
    let shared: Arc<dyn LogStore> = store.clone();
    for project in ["alpha", "beta"] {
        for i in 0..sessions {
            let mut m = memoir_server::namespace::project_manager(shared.clone(), project);
            m.create_session(&format!("task {i}: the wombat protocol"), None)
                .expect("create");
            for j in 0..messages {
                m.add_message(Message::assistant(format!(
                    "reply {j} of {i}: notes on the build"
                )))
                .expect("add");
            }
            m.flush().expect("flush");
        }
    }
    let root = tempfile::tempdir().expect("tmp");
    println!(
        "tenant search_sessions on PostgreSQL: 2 projects x {sessions} sessions x {} messages, {calls} calls",
        messages + 1
    );
    println!();
    println!("| index | p50 ms | p99 ms |");
    println!("|---|---|---|");
    let mut p50 = Vec::new();
    for (name, store) in [
        ("store index (PostgreSQL tables, P~ filter)", shared.clone()),
        (
            "per-project SQLite index over the namespace",
            Arc::new(Hidden(store.clone())) as Arc<dyn LogStore>,
        ),
    ] {
        let s = server(
            store,
            &root.path().join(name.split(' ').next().unwrap_or("x")),
        );
        let mut v = time_searches(&s, "alpha", calls);
        let (mid, hi) = (percentile(&mut v, 0.5), percentile(&mut v, 0.99));
        println!("| {name} | {mid:.2} | {hi:.2} |");
        p50.push(mid);
    }
    println!();
    println!(
        "per-project ÷ store index, p50: {:.1}x the time",
        p50[1] / p50[0]
    );
    let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let _ = c.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"));
}
