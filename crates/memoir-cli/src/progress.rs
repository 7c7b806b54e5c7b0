//! Progress on stderr for anything that can take more than a second
//! (indexing, rebuilding a view, evaluating, importing). Shown only when
//! stderr is a terminal; never coloured (so `NO_COLOR` has nothing to turn
//! off). Commands use [`Progress`] and never indicatif directly.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar or spinner; a no-op when stderr is not a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Should progress be drawn at all? Only on a terminal stderr.
    pub fn enabled() -> bool {
        std::io::stderr().is_terminal()
    }

    // For the import and index commands (other branches); not every build calls it.
    #[allow(dead_code)]
    /// A bar over `total` steps of `what` (e.g. "conversations").
    pub fn bar(total: u64, what: &str) -> Progress {
        if !Progress::enabled() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let template = format!("{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {what} {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar: Some(bar) }
    }

    /// A spinner for work of unknown length ("rebuilding the view").
    pub fn spinner(what: &str) -> Progress {
        if !Progress::enabled() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress { bar: Some(bar) }
    }

    // For the import and index commands (other branches); not every build calls it.
    #[allow(dead_code)]
    /// Advance by `n` steps.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    // For the import and index commands (other branches); not every build calls it.
    #[allow(dead_code)]
    /// Set the trailing message (e.g. the current item).
    pub fn message(&self, msg: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_message(msg.into());
        }
    }

    /// Remove the bar from the terminal.
    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
