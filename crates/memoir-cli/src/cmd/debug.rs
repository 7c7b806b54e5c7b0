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
        Command::Hold { path } => {
            let session = Session::open(&path)?;
            let _lock = session.acquire()?;
            println!("held {}", std::process::id());
            std::io::stdout().flush()?;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
    }
}
