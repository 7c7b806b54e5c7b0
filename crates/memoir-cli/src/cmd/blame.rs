//! `memoir blame <file>[:line]`: which session and message last wrote a
//! line of a file, or every recorded edit of the file, newest first
//! ([`memoir::blame`]; the sessions are found through the store's search
//! index unless `--scan`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use memoir::blame::{self, Edit, FileHistory};

use crate::outln;
use crate::output::print_json;

use super::store::StoreArgs;

/// Arguments of `memoir blame`.
#[derive(clap::Args)]
pub struct Args {
    /// The file, optionally with a line: `src/lib.rs` or `src/lib.rs:42`
    /// (relative to the current directory).
    pub target: String,
    /// Read every session instead of asking the search index for candidates.
    #[arg(long)]
    pub scan: bool,
    /// Print JSON (the file's history, or `{path, line, text, edit}`).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `file` and `line` of `path:line` (a suffix of digits after the last `:`).
fn split_target(target: &str) -> (&str, Option<usize>) {
    if let Some((file, line)) = target.rsplit_once(':') {
        if !file.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = line.parse() {
                return (file, Some(n));
            }
        }
    }
    (target, None)
}

fn describe(e: &Edit) -> String {
    let seq = e.seq.map(|s| format!(", seq {s}")).unwrap_or_default();
    let failed = if e.failed { " (failed)" } else { "" };
    format!(
        "{}  {}  message {}{seq}  {} {} +{} -{}{failed}  {}",
        e.time.format("%Y-%m-%d %H:%M"),
        e.session,
        e.message,
        e.tool,
        e.kind.as_str(),
        e.added,
        e.removed,
        e.title.as_deref().unwrap_or("(untitled)")
    )
}

/// Run `memoir blame`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (file, line) = split_target(&args.target);
    let cwd = std::env::current_dir().context("current directory")?;
    let path = blame::normalize(&cwd.join(file));
    let resolved = args.store.resolve()?;
    let m = args.store.reader()?;
    let history: FileHistory = if args.scan {
        blame::file_history(&m, &path, None)?
    } else {
        let mut ix = super::search::open_index(&resolved.dir, memoir::search::SearchMode::Lexical)?;
        blame::file_history_indexed(&m, &mut ix, &path, |id| Some(id.to_string()))?
    };
    let Some(line) = line else {
        if args.json {
            return print_json(&history);
        }
        let sessions: std::collections::HashSet<&str> =
            history.edits.iter().map(|e| e.session.as_str()).collect();
        eprintln!(
            "{}: {} edit(s) in {} session(s)",
            history.path.display(),
            history.edits.len(),
            sessions.len()
        );
        for e in &history.edits {
            outln!("{}", describe(e));
        }
        return Ok(ExitCode::SUCCESS);
    };
    let content = read_now(&path)?;
    let b = blame::blame_line(&history, &content, line)?;
    if args.json {
        print_json(&b)?;
    } else {
        match &b.edit {
            Some(e) => outln!("{}:{}  {}", b.path.display(), b.line, describe(e)),
            None => outln!(
                "{}:{}  no recorded edit wrote this line",
                b.path.display(),
                b.line
            ),
        }
        outln!("    {}", b.text);
    }
    Ok(if b.edit.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::PROBLEMS)
    })
}

/// The file as it is now (what a line number refers to).
fn read_now(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).map_err(|source| memoir::Error::Io {
        op: "read",
        path: PathBuf::from(path),
        source,
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::split_target;

    #[test]
    fn a_line_suffix_is_split_off_only_when_it_is_a_number() {
        assert_eq!(split_target("src/lib.rs:42"), ("src/lib.rs", Some(42)));
        assert_eq!(split_target("src/lib.rs"), ("src/lib.rs", None));
        assert_eq!(split_target("C:lib.rs"), ("C:lib.rs", None));
        assert_eq!(split_target("a:b:7"), ("a:b", Some(7)));
        assert_eq!(split_target(":7"), (":7", None));
    }
}
