//! `memoir sync` end to end, with real processes: three simulated laptops
//! (generated Claude Code and Codex history imported into three stores, one
//! of them growing between syncs, plus a native session with a planted
//! secret and a fork of it) push into one `memoir serve` over a file store,
//! and into two `memoir serve` processes over one PostgreSQL database with
//! the laptops alternating between them. After every sync the server holds
//! exactly what each laptop would send (`memoir::push::prepare`): every
//! session, its header's fork parent, every record, hence the same record
//! count, last digest and usage; a re-sync sends nothing; a sync killed with
//! SIGKILL mid-way and re-run leaves every record there once; `--dry-run`
//! sends nothing; the secret never reaches the server. And `memoir import
//! --watch --push` keeps a server current as the agents write.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::client::{wire, Client};
use memoir::message::Message;
use memoir::record::SessionMeta;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir_testkit::{generate, AgentKind, CorpusSpec, Shapes};
use serde_json::Value;

use crate::common::memoir_in;

const TOKEN: &str = "sync-test-token-0123456789";
const SECRET: &str = "AKIAZ7QW3RTYUI5OPL2K";

/// A running `memoir serve`, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(home: &Path, store: &str) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = memoir_in(home)
        .args([
            "serve",
            "--store",
            store,
            "--token",
            &format!("team={TOKEN}"),
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let client = Client::new(&url, Some(TOKEN.into())).unwrap();
    let t0 = Instant::now();
    while client.list().is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Server { child, url }
}

/// One laptop: its agent homes and its memoir store.
struct Laptop {
    home: PathBuf,
    src: PathBuf,
    store: PathBuf,
    spec: CorpusSpec,
}

impl Laptop {
    fn new(root: &Path, n: usize, sessions: usize) -> Laptop {
        let home = root.join(format!("laptop{n}"));
        std::fs::create_dir_all(&home).unwrap();
        let spec = CorpusSpec {
            seed: 40 + n as u64,
            sessions,
            target_mb: 0.1 * sessions as f64,
            agents: vec![AgentKind::ClaudeCode, AgentKind::Codex],
            shapes: Shapes {
                resume: 0.0,
                ..Shapes::dense()
            },
            max_session_mb: 0.2,
            ..CorpusSpec::default()
        };
        let l = Laptop {
            src: home.join("src"),
            store: home.join("store"),
            home,
            spec,
        };
        l.import(0.0);
        l
    }

    /// (Re)generate the agent history, growing the newest sessions by
    /// `grow`, and import it.
    fn import(&self, grow: f64) {
        generate(
            &CorpusSpec {
                grow,
                ..self.spec.clone()
            },
            &self.src,
        )
        .unwrap();
        let out = memoir_in(&self.home)
            .args(["import", "--all"])
            .env("CLAUDE_CONFIG_DIR", self.src.join("claude"))
            .env("CODEX_HOME", self.src.join("codex"))
            .arg("--dir")
            .arg(&self.store)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn files(&self) -> Arc<dyn LogStore> {
        Arc::new(FileStore::new(&self.store, Durability::None))
    }

    /// A native session holding a secret, and a fork of it.
    fn plant_secret(&self) {
        let store = self.files();
        let id = "native-with-secret".to_string();
        store.create(&SessionMeta::new(id.clone())).unwrap();
        let m = |t: &str| memoir::Record::Message(Message::user(t));
        store
            .append(
                &id,
                &[
                    m("deploy with the key below"),
                    m(&format!("aws_access_key_id = {SECRET}")),
                    m("done"),
                ],
                None,
            )
            .unwrap();
        let mut fork = SessionMeta::new("native-fork".to_string());
        fork.parent = Some(memoir::record::ForkPoint::new(&id, 2, 2));
        store.create(&fork).unwrap();
        store
            .append("native-fork", &[m("a different ending")], None)
            .unwrap();
    }

    /// Append to the planted session (a session growing between syncs).
    fn grow_native(&self) {
        self.files()
            .append(
                "native-with-secret",
                &[memoir::Record::Message(Message::user("one more turn"))],
                None,
            )
            .unwrap();
    }

    fn sync(&self, url: &str, extra: &[&str]) -> Value {
        let out = memoir_in(&self.home)
            .args(["sync", "--remote", url, "--token", TOKEN, "--json", "--dir"])
            .arg(&self.store)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn sync_killed(&self, url: &str, client: &Client) -> bool {
        let mut child = memoir_in(&self.home)
            .args(["sync", "--remote", url, "--token", TOKEN, "--json", "--dir"])
            .arg(&self.store)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let before = client.list().unwrap().sessions.len();
        let t0 = Instant::now();
        while client.list().unwrap().sessions.len() < before + 3
            && t0.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        let running = child.try_wait().unwrap().is_none();
        // `Child::kill` is SIGKILL on Unix.
        child.kill().unwrap();
        child.wait().unwrap();
        running
    }

    /// The server holds exactly what this laptop sends, for every session.
    fn check_on(&self, client: &Client) -> usize {
        let store = self.files();
        let (listed, unreadable) = store.list().unwrap();
        assert_eq!(unreadable, 0);
        let ids: Vec<String> = listed.iter().map(|l| l.meta.id.clone()).collect();
        let heads = client.heads(&ids).unwrap();
        assert_eq!(heads.len(), ids.len(), "every session is on the server");
        for (l, head) in listed.iter().zip(&heads) {
            let id = &l.meta.id;
            assert_eq!(&head.id, id);
            let (meta, records) = memoir::push::prepare(store.as_ref(), id, true).unwrap();
            let log = client.log(id).unwrap();
            assert!(log.report.is_clean(), "{id}: {:?}", log.report);
            let server_meta = log.header.clone().unwrap();
            assert_eq!(server_meta.parent, meta.parent, "{id}: fork parent");
            assert_eq!(server_meta.source, meta.source, "{id}: source");
            assert_eq!(log.last_seq, records.len() as u64, "{id}: record count");
            assert_eq!(head.last_seq, records.len() as u64);
            let got: Vec<_> = log.records.iter().map(|r| r.record.clone()).collect();
            for (a, b) in got.iter().zip(&records) {
                assert_eq!(
                    wire::record_digest(a).unwrap(),
                    wire::record_digest(b).unwrap(),
                    "{id}: records differ: {}\n{}",
                    a.to_json_string().unwrap(),
                    b.to_json_string().unwrap()
                );
            }
            if let Some(last) = records.last() {
                assert_eq!(
                    head.last_digest,
                    wire::record_digest(last).unwrap(),
                    "{id}: last digest"
                );
            }
            // Usage as the server replays it equals the laptop's.
            let local = memoir::transcript::read_in(store.as_ref(), id).unwrap();
            let remote = client.load(id).unwrap();
            assert_eq!(remote.usage, local.usage, "{id}: usage");
            assert_eq!(
                remote.messages.len(),
                local.messages.len(),
                "{id}: messages"
            );
        }
        ids.len()
    }
}

fn assert_no_secret(client: &Client) {
    for s in client.list().unwrap().sessions {
        let export = client.export(&s.meta.id).unwrap();
        assert!(!export.contains(SECRET), "{} leaked the secret", s.meta.id);
    }
}

fn laptops(root: &Path) -> Vec<Laptop> {
    let l: Vec<Laptop> = (0..3)
        .map(|n| Laptop::new(root, n, if n == 0 { 12 } else { 4 }))
        .collect();
    l[1].plant_secret();
    l
}

/// Run the whole scenario against `urls` (laptop `i`'s `k`-th sync goes to
/// `urls[(i + k) % urls.len()]`).
fn scenario(root: &Path, urls: &[String]) {
    let laptops = laptops(root);
    let client = |k: usize| Client::new(&urls[k % urls.len()], Some(TOKEN.into())).unwrap();

    // Dry run: counts, and nothing on the server.
    let dry = laptops[2].sync(&urls[0], &["--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert!(dry["records"].as_u64().unwrap() > 0, "{dry}");
    assert!(dry["bytes"].as_u64().unwrap() > 0, "{dry}");
    assert_eq!(client(0).list().unwrap().sessions.len(), 0, "dry run sent");

    // Laptop 0 (the biggest) is killed mid-way first, then re-run.
    let killed_mid_way = laptops[0].sync_killed(&urls[0], &client(0));
    assert!(killed_mid_way, "the sync finished before the kill");
    let resumed = laptops[0].sync(&urls[1 % urls.len()], &[]);
    assert!(
        resumed["failed"].as_array().unwrap().is_empty(),
        "{resumed}"
    );

    // First syncs of the others; the dry run's counts were right.
    let mut total = 0;
    let mut first = Vec::new();
    for (i, l) in laptops.iter().enumerate().skip(1) {
        let r = l.sync(&urls[i % urls.len()], &[]);
        assert!(r["failed"].as_array().unwrap().is_empty(), "{r}");
        if i == 2 {
            assert_eq!(r["records"], dry["records"], "{r} vs {dry}");
            assert_eq!(r["created"], dry["created"]);
        }
        first.push(r);
    }
    assert!(first[0]["redacted"].as_u64().unwrap() >= 1, "{}", first[0]);
    for (i, l) in laptops.iter().enumerate() {
        total += l.check_on(&client(i + 1));
    }
    assert_eq!(client(0).list().unwrap().sessions.len(), total);
    assert_no_secret(&client(1));

    // Re-sync: nothing sent, on either server.
    for (i, l) in laptops.iter().enumerate() {
        let r = l.sync(&urls[(i + 1) % urls.len()], &[]);
        assert_eq!(r["records"], 0, "{r}");
        assert_eq!(r["bytes"], 0, "{r}");
        assert_eq!(r["created"], 0, "{r}");
    }

    // Laptop 1 keeps working: its native session and its imported history
    // grow; only the new records go.
    laptops[1].grow_native();
    laptops[1].import(0.3);
    let grown = laptops[1].sync(&urls[0], &[]);
    assert!(grown["grown"].as_u64().unwrap() >= 1, "{grown}");
    let store = laptops[1].files();
    let native = memoir::push::prepare(store.as_ref(), "native-with-secret", true)
        .unwrap()
        .1
        .len() as u64;
    assert!(grown["records"].as_u64().unwrap() > 0, "{grown}");
    assert!(
        grown["records"].as_u64().unwrap() < first[0]["records"].as_u64().unwrap(),
        "only the new records are sent: {grown}"
    );
    assert!(native >= 4);
    for (i, l) in laptops.iter().enumerate() {
        l.check_on(&client(i));
    }
    assert_no_secret(&client(0));
    let again = laptops[1].sync(&urls[1 % urls.len()], &[]);
    assert_eq!(again["records"], 0, "{again}");
}

#[test]
fn laptops_sync_into_a_file_store_server() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve(tmp.path(), tmp.path().join("server").to_str().unwrap());
    scenario(tmp.path(), std::slice::from_ref(&server.url));
}

#[test]
fn laptops_sync_into_two_servers_over_one_postgres() {
    let Some(url) = crate::postgres_common::pg_url(crate::postgres_common::POSTGRES_URL) else {
        return;
    };
    let schema = crate::postgres_common::TempSchema::new(&url);
    let spec = format!("{url}#schema={}", schema.name);
    let tmp = tempfile::tempdir().unwrap();
    let a = serve(tmp.path(), &spec);
    let b = serve(tmp.path(), &spec);
    scenario(tmp.path(), &[a.url.clone(), b.url.clone()]);
}

/// `memoir import --all --watch --push URL`: the laptop's history reaches
/// the server after the first round, and what the agents write later after
/// the round that imports it.
#[test]
fn import_watch_push_keeps_the_server_current() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve(tmp.path(), tmp.path().join("server").to_str().unwrap());
    let client = Client::new(&server.url, Some(TOKEN.into())).unwrap();
    let laptop = Laptop::new(tmp.path(), 7, 3);
    let mut watcher = memoir_in(&laptop.home)
        .args(["import", "--all", "--watch", "--interval", "0.2", "--json"])
        .env("CLAUDE_CONFIG_DIR", laptop.src.join("claude"))
        .env("CODEX_HOME", laptop.src.join("codex"))
        .arg("--dir")
        .arg(&laptop.store)
        .args(["--push", &server.url, "--token", TOKEN])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let caught_up = |laptop: &Laptop| {
        let store = laptop.files();
        let (listed, _) = store.list().unwrap();
        let ids: Vec<String> = listed.iter().map(|l| l.meta.id.clone()).collect();
        let heads = client.heads(&ids).unwrap();
        heads.len() == ids.len()
            && ids.iter().zip(&heads).all(|(id, h)| {
                let (_, records) = memoir::push::prepare(store.as_ref(), id, true).unwrap();
                h.last_seq == records.len() as u64
            })
    };
    let wait = |what: &str| {
        let t0 = Instant::now();
        while !caught_up(&laptop) {
            assert!(t0.elapsed() < Duration::from_secs(60), "{what}: not pushed");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("first round");
    let first: u64 = client.heads(&[]).map(|h| h.len() as u64).unwrap();
    assert_eq!(first, 0, "an empty heads query answers nothing");
    let total = |laptop: &Laptop| -> u64 {
        let store = laptop.files();
        let (listed, _) = store.list().unwrap();
        listed
            .iter()
            .map(|l| store.read(&l.meta.id).unwrap().last_seq)
            .sum()
    };
    let records_before = total(&laptop);
    // The agents keep writing: the sources grow.
    generate(
        &CorpusSpec {
            grow: 0.5,
            ..laptop.spec.clone()
        },
        &laptop.src,
    )
    .unwrap();
    let t0 = Instant::now();
    while total(&laptop) == records_before {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the growth was not imported"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait("after growth");
    // A round that began while the generator was writing is followed by one
    // that imports the rest: let it finish and push too.
    std::thread::sleep(Duration::from_secs(1));
    wait("settled");
    watcher.kill().unwrap();
    watcher.wait().unwrap();
    laptop.check_on(&client);
}
