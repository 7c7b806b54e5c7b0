//! `memoir resume <id-or-search>`: print (or with `--exec` run) the command
//! that reopens a session in the agent that wrote it
//! ([`memoir::search::resume_command_in`]). The argument is a session id or
//! prefix; failing that, a search whose best hit names the session.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use memoir::search::{resume_command_in, SearchMode, SearchQuery};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

use super::search::{open_index, sessions_dir};

/// Arguments of `memoir resume`.
#[derive(clap::Args)]
pub struct Args {
    /// A session id or unique prefix, or words to search for.
    pub target: String,
    /// Run the command (in the session's project directory) instead of printing it.
    #[arg(long)]
    pub exec: bool,
    /// Session directory (default: the current project's, else the global store).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run `memoir resume`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = sessions_dir(&args.dir)?;
    let store = FileStore::new(&dir, Durability::Fsync);
    let id = match memoir::transcript::find_in(&store, &args.target) {
        Ok(id) => id,
        Err(memoir::Error::NotFound(_)) | Err(memoir::Error::InvalidId { .. }) => {
            let mut ix = open_index(&dir, SearchMode::Lexical)?;
            ix.update().context("updating the search index")?;
            let mut q = SearchQuery::new(args.target.clone());
            q.mode = SearchMode::Lexical;
            q.k = 1;
            match ix.search(&q)?.into_iter().next() {
                Some(hit) => hit.session,
                None => {
                    return Err(crate::exit::name_store(
                        memoir::Error::NotFound(args.target.clone()),
                        &dir,
                    ))
                }
            }
        }
        Err(e) => return Err(e.into()),
    };
    let meta = store
        .read_header(&id)?
        .with_context(|| format!("session {id} has no header"))?;
    let cmd = resume_command_in(&store, &meta);
    if args.exec {
        let mut c = std::process::Command::new(&cmd.program);
        c.args(&cmd.args);
        if let Some(dir) = &cmd.cwd {
            c.current_dir(dir);
        }
        let status = c
            .status()
            .with_context(|| format!("running {}", cmd.shell_line()))?;
        return Ok(ExitCode::from(
            status.code().unwrap_or(2).clamp(0, 255) as u8
        ));
    }
    if args.json {
        let out = serde_json::json!({
            "session": id,
            "command": cmd,
            "shell": cmd.shell_line(),
        });
        crate::outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        crate::outln!("{}", cmd.shell_line());
    }
    Ok(ExitCode::SUCCESS)
}
