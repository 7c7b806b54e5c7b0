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

/// `text` safe to print on a terminal: each control character (an escape
/// sequence's ESC, a bell, a carriage return, C1 codes) is written as its
/// visible escape (`\u{1b}`), so text a session holds can never colour or
/// move the terminal (memoir prints no colour). Tab and newline are kept.
pub fn plain(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn is_unsafe(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn plain_leaves_no_control_characters() {
        let hostile = "a\u{1b}[31mred\u{1b}[0m\u{7}\r\u{9b}2J\u{7f} b\tc\nd";
        let shown = plain(hostile);
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{shown:?}"
        );
        assert_eq!(
            shown,
            "a\\u{1b}[31mred\\u{1b}[0m\\u{7}\\u{d}\\u{9b}2J\\u{7f} b\tc\nd"
        );
        assert_eq!(plain("plain text"), "plain text");
    }
}
