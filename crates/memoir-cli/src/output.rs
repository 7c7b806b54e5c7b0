//! Writing to stdout without panicking: [`outln!`] and [`out!`] are
//! `println!`/`print!` that return an error instead. A reader that closes
//! the pipe early (`memoir sessions list --json | head -1`) turns into
//! [`crate::exit::StdoutClosed`], which exits 0 quietly (ripgrep's rule).

/// The error for a failed write to stdout.
pub fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        crate::exit::StdoutClosed.into()
    } else {
        anyhow::Error::from(e).context("writing to stdout")
    }
}

/// `println!` that returns early with an error when stdout fails.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*).map_err($crate::output::stdout_error)?
    }};
}

/// `print!` that returns early with an error when stdout fails.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout();
        write!(stdout, $($arg)*)
            .and_then(|()| stdout.flush())
            .map_err($crate::output::stdout_error)?
    }};
}

/// Print a JSON value (pretty) on stdout.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<std::process::ExitCode> {
    let text = serde_json::to_string_pretty(value)?;
    outln!("{text}");
    Ok(std::process::ExitCode::SUCCESS)
}
