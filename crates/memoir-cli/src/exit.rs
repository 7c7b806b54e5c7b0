//! Exit codes and error reports: the one place where a failure becomes an
//! exit status and a message on stderr (plain, or JSON under `--json`).
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (also: stdout was closed early, e.g. `| head`) |
//! | 1 | checked and found problems (`verify`), nothing matched, or another failure (I/O, corrupt data) |
//! | 2 | usage or input error (bad flag or value, invalid or empty id, ambiguous prefix, bad configuration, an operation the store cannot do) |
//! | 3 | conflict (id taken, lost `expected_seq` race, session busy or in the trash) |
//! | 4 | not found (no such session in the store searched) |
//! | 5 | backend unavailable (database or server down; retry later) |
//!
//! Library errors are classified by the library ([`ErrorKind`], found in
//! any error chain by [`memoir::kind_of`]); this module only maps
//! each kind to a code, with no catch-all arm.

use std::path::PathBuf;
use std::process::ExitCode;

use memoir::error::ErrorKind;
use memoir::kind_of;

/// `verify` found problems, or a search found nothing.
pub const PROBLEMS: u8 = 1;
/// Usage or input error.
pub const USAGE: u8 = 2;
/// Conflict.
pub const CONFLICT: u8 = 3;
/// Not found.
pub const NOT_FOUND: u8 = 4;
/// Backend unavailable.
pub const UNAVAILABLE: u8 = 5;

/// The exit code of a kind of failure.
pub fn code_of(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Invalid => USAGE,
        ErrorKind::NotFound => NOT_FOUND,
        ErrorKind::Exists => CONFLICT,
        ErrorKind::Conflict => CONFLICT,
        ErrorKind::Busy => CONFLICT,
        ErrorKind::Unavailable => UNAVAILABLE,
        ErrorKind::Unsupported => USAGE,
        ErrorKind::Corrupt => PROBLEMS,
        ErrorKind::Io => PROBLEMS,
    }
}

/// A failure the CLI itself detects, with its kind.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments or input (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A session that is not in the store that was searched (exit 4).
    #[error("{what} in {store}")]
    NotFoundIn {
        /// What was looked for (the library's message).
        what: String,
        /// The store searched: a directory or a server URL.
        store: String,
    },
}

impl CliError {
    /// A usage error.
    pub fn usage(message: impl Into<String>) -> anyhow::Error {
        CliError::Usage(message.into()).into()
    }

    fn kind(&self) -> ErrorKind {
        match self {
            CliError::Usage(_) => ErrorKind::Invalid,
            CliError::NotFoundIn { .. } => ErrorKind::NotFound,
        }
    }
}

/// Attach the store searched to a "not found" error (other errors pass).
pub fn name_store(err: impl Into<anyhow::Error>, store: impl Into<StoreName>) -> anyhow::Error {
    let err = err.into();
    if kind(&err) == ErrorKind::NotFound {
        return CliError::NotFoundIn {
            what: memoir::error::report(err.as_ref()),
            store: store.into().0,
        }
        .into();
    }
    err
}

/// How a store is named in messages.
pub struct StoreName(pub String);

impl From<&std::path::Path> for StoreName {
    fn from(p: &std::path::Path) -> Self {
        StoreName(p.display().to_string())
    }
}

impl From<&PathBuf> for StoreName {
    fn from(p: &PathBuf) -> Self {
        StoreName(p.display().to_string())
    }
}

impl From<&str> for StoreName {
    fn from(s: &str) -> Self {
        StoreName(s.to_string())
    }
}

/// stdout was closed by the reader (`memoir ... | head -1`).
#[derive(Debug, thiserror::Error)]
#[error("stdout closed")]
pub struct StdoutClosed;

/// The kind of any failure: the CLI's own, a library error anywhere in
/// the chain, or (for anything else) [`ErrorKind::Io`].
pub fn kind(err: &anyhow::Error) -> ErrorKind {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<CliError>() {
            return e.kind();
        }
        #[cfg(feature = "server")]
        if let Some(e) = cause.downcast_ref::<memoir_server::ServeError>() {
            return e.kind();
        }
        if let Some(k) = kind_of(cause) {
            return k;
        }
        if cause.downcast_ref::<clap::Error>().is_some() {
            return ErrorKind::Invalid;
        }
    }
    ErrorKind::Io
}

/// Was `--json` given (before a `--`)? Errors are then printed as JSON.
pub fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// Print `err` on stderr (once, as a JSON object under `--json`) and return
/// its exit code. A closed stdout exits 0 without a word.
pub fn report(err: &anyhow::Error, json: bool) -> ExitCode {
    if err.chain().any(|c| c.is::<StdoutClosed>()) {
        return ExitCode::SUCCESS;
    }
    let kind = kind(err);
    let code = code_of(kind);
    let message = memoir::error::report(err.as_ref());
    if json {
        let body = serde_json::json!({
            "error": kind.code(),
            "message": message,
            "exit": code,
        });
        eprintln!("{body}");
    } else {
        eprintln!("memoir: {message}");
    }
    ExitCode::from(code)
}

/// A subcommand this build left out, with the cargo feature that adds it:
/// `(command, feature, built)`.
pub type OptionalCommand = (&'static str, &'static str, bool);

/// When `err` is clap's "unrecognized subcommand" for a command of
/// `optional` that this build left out, the usage error (exit 2) that names
/// the feature to build with; `None` for any other error.
pub fn missing_feature(err: &clap::Error, optional: &[OptionalCommand]) -> Option<anyhow::Error> {
    use clap::error::{ContextKind, ContextValue};
    if err.kind() != clap::error::ErrorKind::InvalidSubcommand {
        return None;
    }
    let Some(ContextValue::String(name)) = err.get(ContextKind::InvalidSubcommand) else {
        return None;
    };
    let (command, feature, _) = optional
        .iter()
        .find(|(command, _, built)| command == name && !built)?;
    Some(CliError::usage(format!(
        "`memoir {command}` is not in this build of memoir: it needs the cargo feature `{feature}`, \
         which the default build has (cargo install --locked --path crates/memoir-cli, \
         or add --features {feature} to a --no-default-features build)"
    )))
}

/// Report a clap parse error: help and version go to stdout with exit 0;
/// anything else is a usage error (exit 2), as JSON under `--json`.
pub fn report_parse_error(err: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind as ClapKind;
    match err.kind() {
        ClapKind::DisplayHelp | ClapKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        _ if json => {
            let text = err.render().to_string();
            let first = text.lines().next().unwrap_or_default();
            let message = first.strip_prefix("error: ").unwrap_or(first).to_string();
            let body = serde_json::json!({
                "error": ErrorKind::Invalid.code(),
                "message": message,
                "exit": USAGE,
            });
            eprintln!("{body}");
            ExitCode::from(USAGE)
        }
        _ => {
            let _ = err.print();
            ExitCode::from(USAGE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_map_to_documented_codes() {
        let cases: Vec<(anyhow::Error, u8)> = vec![
            (memoir::Error::NotFound("x".into()).into(), NOT_FOUND),
            (
                memoir::Error::InvalidId {
                    id: "".into(),
                    reason: "empty",
                }
                .into(),
                USAGE,
            ),
            (memoir::Error::SessionExists("x".into()).into(), CONFLICT),
            (
                memoir::manager::ManagerError::InTrash("x".into()).into(),
                CONFLICT,
            ),
            (
                memoir::Error::Io {
                    op: "connect",
                    path: "db".into(),
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                }
                .into(),
                UNAVAILABLE,
            ),
            (
                anyhow::Error::from(memoir::Error::NotFound("x".into())).context("while reading"),
                NOT_FOUND,
            ),
            (CliError::usage("bad"), USAGE),
            (anyhow::anyhow!("something else"), PROBLEMS),
        ];
        for (err, code) in cases {
            assert_eq!(code_of(kind(&err)), code, "{err:#}");
        }
    }

    /// The exit-code table of docs/CLI.md, row by row: every kind of the library
    /// has its documented code (a new kind fails to compile in `code_of`).
    #[test]
    fn every_kind_has_the_readme_code() {
        let table = [
            (ErrorKind::NotFound, 4),
            (ErrorKind::Exists, 3),
            (ErrorKind::Conflict, 3),
            (ErrorKind::Busy, 3),
            (ErrorKind::Unavailable, 5),
            (ErrorKind::Unsupported, 2),
            (ErrorKind::Corrupt, 1),
            (ErrorKind::Invalid, 2),
            (ErrorKind::Io, 1),
        ];
        assert_eq!(table.len(), ErrorKind::ALL.len());
        for (kind, code) in table {
            assert_eq!(code_of(kind), code, "{kind:?}");
        }
    }

    #[test]
    fn not_found_names_the_store_and_keeps_its_class() {
        let e = name_store(
            memoir::Error::NotFound("abc".into()),
            std::path::Path::new("/s"),
        );
        assert_eq!(kind(&e), ErrorKind::NotFound);
        assert_eq!(e.to_string(), "no session matching \"abc\" in /s");
        let other = name_store(CliError::usage("x"), "/s");
        assert_eq!(other.to_string(), "x");
    }
}
