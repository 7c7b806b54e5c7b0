//! Which sessions a call may see: the server's [`Backend`] (a local file
//! store with a project path, or `memoir serve`'s shared store with one
//! project per bearer token) and the per-call [`Scope`] built from it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memoir::access::Caller;
use memoir::blob::ArtifactStore;
use memoir::embed::EmbeddingProvider;
use memoir::manager::{LeasePolicy, ManagerOptions, SessionManager};
use memoir::search::{SearchError, SearchIndex};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

use crate::error::ToolError;

/// Where the server's sessions are.
#[derive(Debug, Clone)]
pub enum Backend {
    /// A local session directory (stdio, or HTTP for one user).
    Local {
        /// The session directory.
        dir: PathBuf,
        /// The server's project: a workspace path.
        project: PathBuf,
        /// Whether the store is shared by several projects (the global
        /// store), so listings and searches filter on the workspace; a
        /// project's own `.memoir/sessions` holds only that project.
        shared: bool,
    },
    /// `memoir serve`'s shared store: the caller's project comes from its
    /// bearer token, and every call works through that project's namespace.
    Tenants {
        /// The shared store (all projects).
        store: Arc<dyn LogStore>,
        /// Where per-project search indexes live when the shared store has
        /// no index of its own (a remote store); a file or PostgreSQL store
        /// is searched through its own index, as `memoir serve` does.
        index_root: PathBuf,
    },
}

/// What a server was started with.
#[derive(Clone)]
pub struct McpConfig {
    /// The sessions.
    pub backend: Backend,
    /// Expose the destructive tools (`forget`, `fork_session`).
    pub allow_writes: bool,
    /// The embedder of hybrid search and recall.
    pub embedder: Arc<dyn EmbeddingProvider>,
    /// Large payloads (the blob store), when there is one.
    pub blobs: Option<Arc<ArtifactStore>>,
}

impl std::fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConfig")
            .field("backend", &self.backend)
            .field("allow_writes", &self.allow_writes)
            .field("embedder", &self.embedder.model_id())
            .finish()
    }
}

/// One call's view: the project it is scoped to and the manager over it.
pub struct Scope {
    /// The manager (unleased; the local project's workspace, or the token's namespace).
    pub manager: SessionManager,
    /// The store searches and usage read (the project's namespace for tenants).
    pub store: Arc<dyn LogStore>,
    /// The project's key: its workspace path or its server project name.
    pub project: String,
    /// The workspace filter of a shared local store (`None`: every session
    /// of the store is the project's).
    pub workspace: Option<PathBuf>,
    /// Whether `all_projects` may widen the scope (local stores only; a token
    /// never sees another project).
    pub may_widen: bool,
    index_key: (PathBuf, String),
    /// For a tenant: the shared store and the prefix of the tenant's ids in
    /// it, so the search can use the shared store's own index.
    pub(crate) tenant: Option<(Arc<dyn LogStore>, String)>,
    /// The member whose sessions alone the call may act on: a caller
    /// without `read` on the project (`None`: every session).
    pub only_member: Option<String>,
}

/// One open search index, shared by the calls that use it.
type SharedIndex = Arc<Mutex<SearchIndex>>;

/// The search index a call uses.
pub struct ScopedIndex {
    /// The index.
    pub index: SharedIndex,
    /// The prefix of the project's session ids in it (`P~` in a tenant's
    /// shared-store index): the search is restricted to it, and it is cut
    /// from the hits. `None` when the index holds the project's own ids.
    pub id_prefix: Option<String>,
}

/// Open search indexes, kept between calls: one per (index dir, project),
/// and one for a tenant backend's shared store.
#[derive(Default)]
pub struct Indexes {
    open: Mutex<HashMap<(PathBuf, String), SharedIndex>>,
    /// The shared store's own index (the engine `memoir serve`'s
    /// `/v1/search` uses), once opened; `Some(None)`: the store has none
    /// (a remote store), so tenants get per-project indexes.
    shared: Mutex<Option<Option<SharedIndex>>>,
}

impl Indexes {
    /// The index of `scope`, opened on first use. A tenant searches the
    /// shared store's own index (SQLite beside a file store, tables in a
    /// PostgreSQL store), caught up from the store's change journal or in
    /// one query, restricted to its project's ids; only a store without an
    /// index of its own gets a per-project index over the tenant's
    /// namespace, which re-reads changed sessions through it.
    pub fn get(
        &self,
        scope: &Scope,
        embedder: &Arc<dyn EmbeddingProvider>,
    ) -> Result<ScopedIndex, ToolError> {
        if let Some((store, prefix)) = &scope.tenant {
            let mut shared = self
                .shared
                .lock()
                .map_err(|_| ToolError::internal("index lock poisoned"))?;
            if shared.is_none() {
                *shared = Some(match SearchIndex::for_store(store.clone()) {
                    Ok(ix) => Some(Arc::new(Mutex::new(ix.with_embedder(embedder.clone())))),
                    Err(SearchError::Unsupported(_)) => None,
                    Err(e) => return Err(e.into()),
                });
            }
            if let Some(Some(index)) = shared.as_ref() {
                return Ok(ScopedIndex {
                    index: index.clone(),
                    id_prefix: Some(prefix.clone()),
                });
            }
        }
        let mut map = self
            .open
            .lock()
            .map_err(|_| ToolError::internal("index lock poisoned"))?;
        let index = match map.get(&scope.index_key) {
            Some(ix) => ix.clone(),
            None => {
                let ix = SearchIndex::open_store(scope.store.clone(), &scope.index_key.0)?
                    .with_embedder(embedder.clone());
                let ix = Arc::new(Mutex::new(ix));
                map.insert(scope.index_key.clone(), ix.clone());
                ix
            }
        };
        Ok(ScopedIndex {
            index,
            id_prefix: None,
        })
    }
}

/// Where `memoir mcp --http` keeps the per-project search indexes of store
/// `spec`: `<dir>/search/mcp/<project>` for a directory, else
/// `$MEMOIR_HOME/search/mcp-<hash of the spec>/<project>`.
pub fn tenant_index_root(spec: &str) -> memoir::Result<PathBuf> {
    if spec.contains("://") {
        let key = blake3::hash(spec.as_bytes()).to_hex();
        Ok(memoir::paths::memoir_home()?
            .join(memoir::search::INDEX_DIR)
            .join(format!("mcp-{}", &key[..16])))
    } else {
        Ok(PathBuf::from(spec)
            .join(memoir::search::INDEX_DIR)
            .join("mcp"))
    }
}

fn manager_options(workspace: Option<PathBuf>) -> ManagerOptions {
    ManagerOptions {
        repair_on_switch: false,
        lease: LeasePolicy::Off,
        workspace,
        ..ManagerOptions::default()
    }
}

impl Backend {
    /// The scope of a call; `tenant` is the bearer token's project (required
    /// for [`Backend::Tenants`]).
    pub fn scope(&self, tenant: Option<&str>) -> Result<Scope, ToolError> {
        self.scope_as(tenant, None)
    }

    /// [`Backend::scope`] for `caller` (an HTTP request's token): the
    /// sessions it creates name its member, and without `read` on the
    /// project it acts only on the sessions its member created.
    pub fn scope_as(
        &self,
        tenant: Option<&str>,
        caller: Option<&Caller>,
    ) -> Result<Scope, ToolError> {
        match self {
            Backend::Local {
                dir,
                project,
                shared,
            } => {
                let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir, Durability::Fsync));
                let manager = SessionManager::with_store(
                    store.clone(),
                    manager_options(Some(project.clone())),
                );
                Ok(Scope {
                    manager,
                    store,
                    project: project.display().to_string(),
                    workspace: shared.then(|| project.clone()),
                    may_widen: true,
                    index_key: (dir.join(memoir::search::INDEX_DIR), String::new()),
                    tenant: None,
                    only_member: None,
                })
            }
            Backend::Tenants { store, index_root } => {
                let Some(project) = tenant else {
                    return Err(ToolError::internal("no project for this request"));
                };
                let member = caller.map(|c| c.member.as_str());
                let ns: Arc<dyn LogStore> = Arc::new(
                    memoir_server::namespace::ProjectStore::new(store.clone(), project)
                        .with_member(member),
                );
                Ok(Scope {
                    manager: memoir_server::namespace::project_manager_as(
                        store.clone(),
                        project,
                        member,
                    ),
                    store: ns,
                    project: project.to_string(),
                    workspace: None,
                    may_widen: false,
                    index_key: (index_root.join(project), project.to_string()),
                    tenant: Some((store.clone(), memoir_server::namespace::id_prefix(project))),
                    only_member: caller
                        .filter(|c| !c.reads_all(project))
                        .map(|c| c.member.clone()),
                })
            }
        }
    }
}

impl Scope {
    /// Whether a session with workspace `ws` is in the project.
    pub fn owns_workspace(&self, ws: &Path) -> bool {
        self.workspace.as_ref().is_none_or(|p| ws.starts_with(p))
    }

    /// Whether the call may act on a session with header `meta`: every
    /// session of the project, or (for a caller without `read`) only those
    /// its member created, as `memoir serve` rules.
    pub fn may_act_on(&self, meta: &memoir::record::SessionMeta) -> bool {
        memoir_server::namespace::created_by(meta, self.only_member.as_deref())
    }
}
