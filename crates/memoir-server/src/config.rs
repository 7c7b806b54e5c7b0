//! What the server serves and who may call it: [`ServerConfig`], bearer
//! token grants ([`TokenGrant`], [`parse_tokens`]), store specs
//! ([`open_store`]), the listen-address rule ([`check_listen`]) and the
//! start-up error type ([`ServeError`]), and [`TokenIndex`]: who a bearer
//! token is (shared with `memoir mcp --http`).

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use chrono::{DateTime, Utc};
pub use memoir::access::AuthError;
use memoir::access::{Caller, Grant, Role};
use memoir::error::ErrorKind;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::Error;
use serde::Deserialize;

use crate::{DEFAULT_MAX_BLOB, DEFAULT_MAX_BODY};

/// Errors starting the server (bad configuration, store, socket).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A configuration problem (tokens file, store spec).
    #[error("{0}")]
    Config(String),
    /// The store failed to open.
    #[error(transparent)]
    Store(#[from] Error),
    /// Binding or serving failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl ServeError {
    /// What the caller can do about this error (a bad configuration is
    /// the caller's input).
    pub fn kind(&self) -> ErrorKind {
        match self {
            ServeError::Config(_) => ErrorKind::Invalid,
            ServeError::Store(e) => e.kind(),
            ServeError::Io(_) => ErrorKind::Io,
        }
    }
}

/// One bearer token of the tokens file and what it may do.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TokenGrant {
    /// The secret the client sends as `Authorization: Bearer <token>`.
    pub token: String,
    /// The project it works on.
    pub project: String,
    /// After this instant the token is refused (401 `token_expired`).
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Its roles on the project; absent: every role ([`LEGACY_ROLES`],
    /// what a project token could do before roles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<BTreeSet<Role>>,
    /// The member it belongs to; absent: `token-` and the first 8 hex
    /// digits of the token's BLAKE3 digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The roles of a tokens-file entry without `roles`: all of them, on its project.
pub const LEGACY_ROLES: [Role; 4] = Role::ALL;

impl TokenGrant {
    /// A grant of every role on `project` (a tokens-file entry without `roles`).
    pub fn new(token: impl Into<String>, project: impl Into<String>) -> TokenGrant {
        TokenGrant {
            token: token.into(),
            project: project.into(),
            ..TokenGrant::default()
        }
    }

    /// Its roles ([`LEGACY_ROLES`] when the entry names none).
    pub fn roles(&self) -> BTreeSet<Role> {
        self.roles
            .clone()
            .unwrap_or_else(|| LEGACY_ROLES.into_iter().collect())
    }

    /// Its member name.
    pub fn member(&self) -> String {
        match &self.name {
            Some(n) => n.clone(),
            None => format!(
                "token-{}",
                &blake3::hash(self.token.as_bytes()).to_hex()[..8]
            ),
        }
    }

    /// The caller it authenticates as.
    pub fn caller(&self) -> Caller {
        Caller::new(
            None,
            &self.member(),
            &[Grant {
                project: self.project.clone(),
                roles: self.roles(),
            }],
        )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    tokens: Vec<TokenGrant>,
}

/// Parse a tokens file: `{"tokens":[{"token":"...","project":"a","expires_at":"2027-01-01T00:00:00Z","roles":["read"],"name":"ci"}]}`.
pub fn parse_tokens(text: &str) -> Result<Vec<TokenGrant>, ServeError> {
    let file: TokensFile =
        serde_json::from_str(text).map_err(|e| ServeError::Config(format!("tokens file: {e}")))?;
    for g in &file.tokens {
        check_grant(g)?;
    }
    Ok(file.tokens)
}

fn check_grant(g: &TokenGrant) -> Result<(), ServeError> {
    if g.token.len() < 16 {
        return Err(ServeError::Config(format!(
            "the token for project {:?} is shorter than 16 characters",
            g.project
        )));
    }
    memoir::access::check_project(&g.project)
        .map_err(|e| ServeError::Config(format!("project name: {e}")))?;
    if g.roles.as_ref().is_some_and(|r| r.is_empty()) {
        return Err(ServeError::Config(format!(
            "the token for project {:?} names no role",
            g.project
        )));
    }
    if let Some(name) = &g.name {
        memoir::access::check_member(name).map_err(|e| ServeError::Config(e.to_string()))?;
    }
    Ok(())
}

/// The tokens of the server's tokens file by BLAKE3 digest (the secrets are
/// not kept; `blake3::Hash` compares in constant time): the bearer-token
/// check of `memoir serve` and `memoir mcp --http` for configured tokens.
#[derive(Debug, Clone, Default)]
pub struct TokenIndex(HashMap<blake3::Hash, TokenGrant>);

impl TokenIndex {
    /// Index `grants` by the digest of their token.
    pub fn new(grants: Vec<TokenGrant>) -> TokenIndex {
        TokenIndex(
            grants
                .into_iter()
                .map(|g| (blake3::hash(g.token.as_bytes()), g))
                .collect(),
        )
    }

    /// The grant of an `Authorization` header's value (`Bearer <token>`).
    pub fn authenticate(&self, header: Option<&[u8]>) -> Result<&TokenGrant, AuthError> {
        self.find(memoir::access::bearer(header)?)
    }

    /// The grant of a presented token.
    pub fn find(&self, token: &str) -> Result<&TokenGrant, AuthError> {
        let grant = self
            .0
            .get(&blake3::hash(token.as_bytes()))
            .ok_or(AuthError::Unknown)?;
        if grant.expires_at.is_some_and(|t| t <= Utc::now()) {
            return Err(AuthError::Expired);
        }
        Ok(grant)
    }

    /// Whether no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the server serves and how.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where sessions live (listings use its `LogStore::list_project`,
    /// which PostgreSQL answers from an index).
    pub store: Arc<dyn LogStore>,
    /// Accepted tokens.
    pub tokens: Vec<TokenGrant>,
    /// Largest accepted request body, in bytes.
    pub max_body: usize,
    /// Largest accepted payload blob upload (`PUT /v1/blobs/{hash}`), in bytes.
    pub max_blob: usize,
    /// Serve the team view (the web view, per token's project) beside the
    /// API, with these `Host`/`Origin` rules (builds with the feature `ui`).
    pub ui: Option<TeamUi>,
}

/// Where the team view answers: the `Host` and `Origin` values its gate
/// accepts (anything else is refused, against DNS rebinding and
/// cross-site requests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamUi {
    /// The port the server listens on (names the cookie).
    pub port: u16,
    /// Accepted `Host` header values (`name:port`).
    pub hosts: Vec<String>,
    /// Accepted `Origin` header values.
    pub origins: Vec<String>,
}

impl TeamUi {
    /// The rules for a server bound to `addr`: its own `ip:port` (and
    /// `localhost:port` on loopback) over `http://`, plus each of `names`
    /// (`host` or `host:port`, as a proxy in front forwards it) over
    /// `http://` and `https://`.
    pub fn for_listen(addr: SocketAddr, names: &[String]) -> TeamUi {
        let port = addr.port();
        let own = match addr {
            SocketAddr::V4(a) => format!("{}:{port}", a.ip()),
            SocketAddr::V6(a) => format!("[{}]:{port}", a.ip()),
        };
        let mut hosts = vec![own];
        if addr.ip().is_loopback() {
            hosts.push(format!("localhost:{port}"));
        }
        let mut origins: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
        for name in names {
            hosts.push(name.clone());
            origins.push(format!("http://{name}"));
            origins.push(format!("https://{name}"));
        }
        TeamUi {
            port,
            hosts,
            origins,
        }
    }
}

impl ServerConfig {
    /// A configuration over `store` with `tokens` and default limits.
    pub fn new(store: Arc<dyn LogStore>, tokens: Vec<TokenGrant>) -> Self {
        ServerConfig {
            store,
            tokens,
            max_body: DEFAULT_MAX_BODY,
            max_blob: DEFAULT_MAX_BLOB,
            ui: None,
        }
    }
}

/// Open a store from a spec: `postgres://...` / `postgresql://...` (optionally
/// `#schema=NAME`), or a directory for the file store.
pub fn open_store(spec: &str, durability: Durability) -> Result<ServerConfig, ServeError> {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        {
            let (url, schema) = match spec.split_once("#schema=") {
                Some((u, s)) => (u, s.to_string()),
                None => (spec, "public".to_string()),
            };
            let options = memoir::store::postgres::PgOptions {
                schema,
                durability,
                pool_size: 32,
                ..Default::default()
            };
            let pg = Arc::new(memoir::store::postgres::PgStore::connect(url, options)?);
            return Ok(ServerConfig::new(pg, Vec::new()));
        }
        #[cfg(not(feature = "postgres"))]
        return Err(ServeError::Config(
            "this build has no PostgreSQL support (feature `postgres`)".into(),
        ));
    }
    if spec.contains("://") {
        return Err(ServeError::Config(format!(
            "unknown store {spec:?}: use postgres://... or a directory"
        )));
    }
    Ok(ServerConfig::new(
        Arc::new(FileStore::new(spec, durability)),
        Vec::new(),
    ))
}

/// Check that `addr` is a loopback address unless `allow_public` is set.
pub fn check_listen(addr: &SocketAddr, allow_public: bool) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || allow_public {
        Ok(())
    } else {
        Err(ServeError::Config(format!(
            "{addr} is not a loopback address; pass --allow-public to listen on it (and use TLS in front)"
        )))
    }
}
