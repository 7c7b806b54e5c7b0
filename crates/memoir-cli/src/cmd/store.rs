//! `--dir` / `--project`: which session store a command uses. The order is
//! the library's ([`memoir::paths::resolve_store`]); this file only turns
//! flags into a request and opens the manager on the result.

use std::path::PathBuf;

use anyhow::Context as _;
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::paths::{resolve_store, ResolvedStore, StoreRequest};
use memoir::store::Durability;

use crate::exit::{name_store, CliError};

/// Where the sessions are (shared by `sessions`, `recall` and `demo`).
///
/// Order (first match wins): --dir, --project, $MEMOIR_SESSION_DIR, the
/// current directory's project (nearest ancestor with .memoir/sessions),
/// $MEMOIR_HOME/sessions.
#[derive(clap::Args, Clone, Default)]
pub struct StoreArgs {
    /// Session directory (wins over everything else).
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Use this project's sessions (PATH/.memoir/sessions). Without --dir or
    /// --project: $MEMOIR_SESSION_DIR, else the current directory's project,
    /// else $MEMOIR_HOME/sessions.
    #[arg(long, global = true, value_name = "PATH")]
    pub project: Option<PathBuf>,
}

impl StoreArgs {
    /// The resolved store (never creates anything).
    pub fn resolve(&self) -> anyhow::Result<ResolvedStore> {
        let cwd = std::env::current_dir().context("current directory")?;
        let request = StoreRequest {
            dir: self.dir.clone(),
            project: self.project.clone(),
        };
        Ok(resolve_store(&request, &cwd)?)
    }

    /// A manager over the resolved store, creating it if missing (for
    /// commands that write). New sessions record the project (or, outside
    /// one, the current directory) as their workspace.
    pub fn manager(&self, durability: Durability) -> anyhow::Result<SessionManager> {
        let resolved = self.resolve()?;
        open(&resolved, durability)
    }

    /// A manager over the resolved store for a command that only reads: a
    /// missing store is "not found" (naming it) and is not created.
    pub fn reader(&self) -> anyhow::Result<SessionManager> {
        let resolved = self.resolve()?;
        if !resolved.dir.is_dir() {
            return Err(CliError::NotFoundIn {
                what: "no session store".into(),
                store: resolved.dir.display().to_string(),
            }
            .into());
        }
        open(&resolved, Durability::Fsync)
    }

    /// Does the resolved store exist yet?
    pub fn exists(&self) -> anyhow::Result<Option<ResolvedStore>> {
        let resolved = self.resolve()?;
        Ok(resolved.dir.is_dir().then_some(resolved))
    }
}

fn open(resolved: &ResolvedStore, durability: Durability) -> anyhow::Result<SessionManager> {
    let workspace = match &resolved.project {
        Some(p) => Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        None => std::env::current_dir().ok(),
    };
    let options = ManagerOptions {
        durability,
        repair_on_switch: false,
        workspace,
        ..Default::default()
    };
    let manager = SessionManager::open(&resolved.dir, options)
        .with_context(|| format!("opening sessions in {}", resolved.dir.display()))?;
    // A store with a search index keeps it current on every write (an index
    // that does not open is caught up by the next `memoir search`/`index`).
    if memoir::search::index_path(&resolved.dir).is_some() {
        if let Ok(ix) = memoir::search::SearchIndex::open(&resolved.dir) {
            return Ok(manager.with_search_index(std::sync::Arc::new(std::sync::Mutex::new(ix))));
        }
    }
    Ok(manager)
}

/// Resolve a full id or unique prefix among `m`'s live sessions; "not
/// found" names the store searched.
pub fn resolve_id(m: &SessionManager, prefix: &str) -> anyhow::Result<String> {
    m.resolve(prefix)
        .map_err(|e| name_store(e, m.sessions_dir()))
}

/// Resolve a full id or unique prefix among `m`'s trashed sessions.
pub fn resolve_trashed(m: &SessionManager, prefix: &str) -> anyhow::Result<String> {
    m.resolve_trashed(prefix)
        .map_err(|e| name_store(e, m.sessions_dir()))
}
