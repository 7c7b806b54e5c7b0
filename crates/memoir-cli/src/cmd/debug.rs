//! `memoir debug`: hidden tools for crash and concurrency tests.
//!
//! `append-loop` appends records to one session and prints `ack <first> <last>`
//! on stdout after each append returns, so a test that kills the process
//! knows exactly which records were acknowledged.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use memoir::message::Message;
use memoir::store::Durability;
use memoir::transcript::Session;

/// Subcommands of `memoir debug`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Append `count` messages to an existing transcript, printing an ack line after each append.
    AppendLoop {
        /// The transcript file.
        path: PathBuf,
        /// How many appends.
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// Messages per append (one write call each).
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Bytes of text per message.
        #[arg(long, default_value_t = 200)]
        size: usize,
        /// fsync, flush or none.
        #[arg(long, default_value = "fsync")]
        durability: String,
        /// Tag put in each message's text (e.g. the writer's number).
        #[arg(long, default_value = "w")]
        tag: String,
    },
    /// Crash-loop worker: random appends, batch appends, rewrites, forks,
    /// delete/restore and renames (index updates) on sessions `c0`..`c3` of
    /// `dir`, printing `ack <session> <tag>...` after each write returns.
    CrashOps {
        /// The store directory.
        dir: PathBuf,
        /// Seed of the operation mix (also makes the tags unique per run).
        #[arg(long)]
        seed: u64,
        /// How many operations.
        #[arg(long, default_value_t = 1000)]
        count: usize,
    },
    /// Take exclusive ownership of a session, print `held <pid>`, and wait forever.
    Hold {
        /// The transcript file.
        path: PathBuf,
    },
}

/// Run `memoir debug`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::AppendLoop {
            path,
            count,
            batch,
            size,
            durability,
            tag,
        } => {
            let session = Session::open_with(&path, durability.parse::<Durability>()?)?;
            let filler = "x".repeat(size);
            let stdout = std::io::stdout();
            for i in 0..count {
                let msgs: Vec<Message> = (0..batch)
                    .map(|j| Message::user(format!("{tag}:{}:{filler}", i * batch + j)))
                    .collect();
                let a = session.append_messages(&msgs)?;
                let mut out = stdout.lock();
                writeln!(out, "ack {} {}", a.first_seq, a.last_seq)?;
                out.flush()?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::CrashOps { dir, seed, count } => crash_ops(&dir, seed, count),
        Command::Hold { path } => {
            let session = Session::open(&path)?;
            let _lock = session.acquire()?;
            crate::outln!("held {}", std::process::id());
            std::io::stdout().flush()?;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
    }
}

/// Sessions the crash-loop worker writes to.
const CRASH_SESSIONS: &[&str] = &["c0", "c1", "c2", "c3"];

fn crash_ops(dir: &std::path::Path, seed: u64, count: usize) -> anyhow::Result<ExitCode> {
    use memoir::manager::{ManagerOptions, SessionManager};
    use memoir::record::SessionMeta;
    let options = ManagerOptions {
        durability: Durability::Flush,
        ..Default::default()
    };
    let mut manager = SessionManager::open(dir, options)?;
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let stdout = std::io::stdout();
    let ack = |line: String| -> anyhow::Result<()> {
        let mut out = stdout.lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        Ok(())
    };
    for op in 0..count {
        let id = CRASH_SESSIONS[next(CRASH_SESSIONS.len() as u64) as usize];
        let path = dir.join(format!("{id}.jsonl"));
        let session = match Session::open_with(&path, Durability::Flush) {
            Ok(s) => s,
            Err(memoir::Error::NotFound(_)) => {
                if manager.restore_session(id).is_err() {
                    let _ = Session::create_in(manager.store(), SessionMeta::new(id));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let tag = |j: usize| format!("s{seed}-o{op}-{j}");
        match next(7) {
            0 | 1 => {
                let a = session.append_messages(&[Message::user(tag(0))])?;
                note_repair(&a, id, &ack)?;
                ack(format!("ack {id} {}", tag(0)))?;
            }
            2 => {
                // A batch large enough that a kill often lands inside its write.
                let big = "x".repeat(next(256 * 1024) as usize);
                let msgs: Vec<Message> = (0..3)
                    .map(|j| {
                        Message::user(format!("{} {}", tag(j), if j == 1 { &big } else { "" }))
                    })
                    .collect();
                let a = session.append_messages(&msgs)?;
                note_repair(&a, id, &ack)?;
                ack(format!("ack {id} {} {} {}", tag(0), tag(1), tag(2)))?;
            }
            3 => {
                // A rewrite that keeps every message and adds one.
                let mut messages = session.transcript()?.messages;
                messages.push(Message::user(tag(0)));
                let a = session.append(&memoir::record::Record::Rewrite { messages })?;
                note_repair(&a, id, &ack)?;
                ack(format!("ack {id} {}", tag(0)))?;
            }
            4 => {
                let forked = manager.fork_session(id, None)?;
                ack(format!("fork {id} {}", forked.id))?;
            }
            5 => {
                if manager.delete_session(id)? {
                    manager.restore_session(id)?;
                }
                ack(format!("restored {id}"))?;
            }
            _ => {
                manager.rename_session(id, &tag(0))?;
                ack(format!("renamed {id}"))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Tell the crash-loop harness that an append had to cut what a killed
/// writer left (`repaired <session> <bytes>`).
fn note_repair(
    appended: &memoir::store::Appended,
    id: &str,
    ack: &dyn Fn(String) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    match &appended.repaired {
        Some(t) => ack(format!("repaired {id} {}", t.bytes)),
        None => Ok(()),
    }
}
