//! Keeping the store current while agents run: import, then re-import the
//! sources whenever they change. Change detection is a periodic rescan (a
//! `stat` per source: unchanged sources cost no read), woken early by file
//! system notifications where the platform has them (`import-watch`
//! feature). Cursors are durable, so the watcher survives agent restarts,
//! file rotation (a new file is a new source; a replaced one is a rewrite)
//! and its own restarts.

use std::time::{Duration, Instant};

use super::{import, Agent, ImportError, ImportReport, Source};
use crate::manager::SessionManager;

/// What to watch.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Agents and directories (`None`: the agent's home) to keep imported.
    pub roots: Vec<(Agent, Option<std::path::PathBuf>)>,
    /// Explicit files to keep imported.
    pub files: Vec<Source>,
    /// Longest wait between rescans.
    pub interval: Duration,
}

/// Import `options`' sources, then keep importing what changes until
/// `keep_going` returns false (checked after every pass). `on_pass` gets each
/// pass's report (passes that found nothing new included).
pub fn watch(
    manager: &SessionManager,
    options: &WatchOptions,
    keep_going: &mut dyn FnMut() -> bool,
    on_pass: &mut dyn FnMut(&ImportReport),
) -> Result<(), ImportError> {
    let waker = notify_waker(options);
    loop {
        let started = Instant::now();
        let mut sources = options.files.clone();
        for (agent, dir) in &options.roots {
            match super::sources_of(*agent, dir.as_deref()) {
                Ok(found) => sources.extend(found),
                // A home that vanished (agent uninstalled, disk unmounted) is
                // simply empty until it comes back.
                Err(ImportError::Io { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let report = import(manager, &sources, &mut |_| {})?;
        on_pass(&report);
        if !keep_going() {
            return Ok(());
        }
        let wait = options.interval.saturating_sub(started.elapsed());
        match &waker {
            Some(w) => w.wait(wait),
            None => std::thread::sleep(wait),
        }
    }
}

#[cfg(feature = "import-watch")]
mod notify_impl {
    //! File system notifications (inotify, FSEvents, ...) that end a wait early.

    use std::sync::mpsc::{channel, Receiver};
    use std::time::Duration;

    use notify::{RecommendedWatcher, RecursiveMode, Watcher};

    pub(super) struct Waker {
        _watcher: RecommendedWatcher,
        events: Receiver<()>,
    }

    impl Waker {
        pub(super) fn new(dirs: &[std::path::PathBuf]) -> Option<Waker> {
            let (tx, rx) = channel();
            let mut watcher = notify::recommended_watcher(move |_res| {
                let _ = tx.send(());
            })
            .ok()?;
            let mut any = false;
            for d in dirs {
                any |= watcher.watch(d, RecursiveMode::Recursive).is_ok();
            }
            any.then_some(Waker {
                _watcher: watcher,
                events: rx,
            })
        }

        /// Wait up to `max`, returning early (after a short settle) on a change.
        pub(super) fn wait(&self, max: Duration) {
            if self.events.recv_timeout(max).is_ok() {
                std::thread::sleep(Duration::from_millis(50));
                while self.events.try_recv().is_ok() {}
            }
        }
    }
}

#[cfg(feature = "import-watch")]
fn notify_waker(options: &WatchOptions) -> Option<notify_impl::Waker> {
    let mut dirs = Vec::new();
    for (agent, dir) in &options.roots {
        let d = match dir {
            Some(d) => Some(d.clone()),
            None => super::default_home(*agent).ok().flatten(),
        };
        dirs.extend(d.map(|d| {
            if d.is_file() {
                d.parent().map(Into::into).unwrap_or(d)
            } else {
                d
            }
        }));
    }
    for s in &options.files {
        dirs.extend(s.path.parent().map(std::path::Path::to_path_buf));
    }
    notify_impl::Waker::new(&dirs)
}

/// Without notifications, every wait is a plain sleep until the next rescan.
#[cfg(not(feature = "import-watch"))]
struct Sleeper;

#[cfg(not(feature = "import-watch"))]
impl Sleeper {
    fn wait(&self, max: Duration) {
        std::thread::sleep(max);
    }
}

#[cfg(not(feature = "import-watch"))]
fn notify_waker(_options: &WatchOptions) -> Option<Sleeper> {
    None
}
