//! `memoir changes <session>`: the files a session edited, reconstructed
//! from its tool calls by [`memoir::changes`], as a diff per file (or JSON).

use std::process::ExitCode;

use crate::out;
use crate::output::print_json;

use super::store::{resolve_id, StoreArgs};

/// Arguments of `memoir changes`.
#[derive(clap::Args)]
pub struct Args {
    /// Full id or unique prefix.
    pub id: String,
    /// Include the edits a fork inherited from its parent.
    #[arg(long)]
    pub inherited: bool,
    /// Print JSON (`{"session", "files": [...]}`).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Run `memoir changes`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let m = args.store.reader()?;
    let id = resolve_id(&m, &args.id)?;
    let t = m.read_session(&id)?;
    let skip = if args.inherited { 0 } else { t.inherited };
    let mut files = memoir::changes::reconstruct(&t.messages, &t.message_seqs);
    for f in &mut files {
        f.changes.retain(|c| c.message >= skip);
        f.added = f.changes.iter().map(|c| c.added).sum();
        f.removed = f.changes.iter().map(|c| c.removed).sum();
    }
    files.retain(|f| !f.changes.is_empty());
    if args.json {
        return print_json(&serde_json::json!({ "session": id, "files": files }));
    }
    if files.is_empty() {
        eprintln!("no file edits in the tool calls of {id}");
        return Ok(ExitCode::from(crate::exit::PROBLEMS));
    }
    out!("{}", memoir::changes::render_diff(&files));
    Ok(ExitCode::SUCCESS)
}
