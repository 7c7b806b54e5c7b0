//! Who may do what on a shared store: access tokens and their roles.
//!
//! This module owns the token model behind `memoir serve`: a [`Role`] per
//! project ([`Grant`]), a token's stored [`TokenEntry`] (a member name, its
//! grants, the BLAKE3 digest of its secret, never the secret), minting
//! ([`mint`]: a high-entropy secret shown once), checking a presented
//! secret ([`TokenBook::authenticate`], constant-time digest comparison) and
//! the [`Caller`] it yields ([`Caller::has`]: a role on a project).
//!
//! Where tokens live ([`book_of`]): on PostgreSQL the `memoir_tokens` table
//! (so a revocation on one server holds on every server over the database);
//! on a file store the versioned file `.tokens.json` in the store directory
//! ([`file`], `docs/FORMAT.md`). Nothing here caches: every check reads the
//! book, so servers sharing a store are interchangeable.
//!
//! Secrets look like `memoir_<id>_<secret>`: `<id>` (16 hex digits) names the
//! entry, `<secret>` is two v4 UUIDs from the OS generator (244 random bits).

mod file;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::LogStore;

pub use file::{FileBook, TOKENS_FILE, TOKENS_FORMAT, TOKENS_VERSION};

/// The header field naming the member whose token created a session on a
/// shared server (the server sets it on every create; a client's value is
/// replaced).
pub const MEMBER_FIELD: &str = "member";

/// The request header naming the project a call works on, for a token
/// with roles on several projects.
pub const PROJECT_HEADER: &str = "x-memoir-project";

/// What a token may do on a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Search and view every session of the project.
    Read,
    /// Write the member's own sessions (create, append, push); without
    /// [`Role::Read`], others' sessions stay unseen.
    Publish,
    /// Tokens, the trash (delete, restore) and purge.
    Manage,
    /// Aggregate usage and cost only, never content.
    Usage,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 4] = [Role::Read, Role::Publish, Role::Manage, Role::Usage];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Publish => "publish",
            Role::Manage => "manage",
            Role::Usage => "usage",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = Error;
    fn from_str(s: &str) -> Result<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown role {s:?} (expected read, publish, manage or usage)"
                ))
            })
    }
}

/// Roles on one project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The project.
    pub project: String,
    /// What the token may do there.
    pub roles: BTreeSet<Role>,
}

impl Grant {
    /// Parse `PROJECT=ROLE[+ROLE...]` (e.g. `web=read+publish`).
    pub fn parse(spec: &str) -> Result<Grant> {
        let (project, roles) = spec.split_once('=').ok_or_else(|| {
            Error::Invalid(format!(
                "grant {spec:?}: expected PROJECT=ROLE[+ROLE...], e.g. web=read+publish"
            ))
        })?;
        let roles = roles
            .split(['+', ','])
            .map(|r| r.trim().parse())
            .collect::<Result<BTreeSet<Role>>>()?;
        let grant = Grant {
            project: project.trim().to_string(),
            roles,
        };
        grant.check()?;
        Ok(grant)
    }

    /// A project name usable as a namespace (a valid session id without
    /// `~`) and at least one role.
    pub fn check(&self) -> Result<()> {
        check_project(&self.project)?;
        if self.roles.is_empty() {
            return Err(Error::Invalid(format!(
                "the grant on project {:?} names no role",
                self.project
            )));
        }
        Ok(())
    }
}

/// A project name: a valid session id that does not contain `~` (which
/// separates project and session in a server's stored ids).
pub fn check_project(project: &str) -> Result<()> {
    crate::id::validate(project)?;
    if project.contains('~') {
        return Err(Error::Invalid(format!(
            "project name {project:?} contains '~' (it separates project and session ids)"
        )));
    }
    Ok(())
}

/// A member name: 1 to 64 letters, digits, `.`, `_`, `-` or `@`.
pub fn check_member(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "member name {name:?}: use 1 to 64 letters, digits, '.', '_', '-' or '@'"
        )))
    }
}

/// A stored token: everything but its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenEntry {
    /// The public id (16 hex digits; part of the secret, used to revoke).
    pub id: String,
    /// The member it belongs to (usage reports group by it; sessions it
    /// creates name it).
    pub name: String,
    /// BLAKE3 of the whole secret, hex.
    pub digest: String,
    /// Roles per project.
    pub grants: Vec<Grant>,
    /// When it was minted.
    pub created_at: DateTime<Utc>,
    /// After this instant it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked (then it is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TokenEntry {
    /// The caller this token authenticates as.
    pub fn caller(&self) -> Caller {
        Caller::new(Some(self.id.clone()), &self.name, &self.grants)
    }

    /// Whether `secret` is this token's secret (constant-time comparison
    /// of BLAKE3 digests).
    pub fn verify(&self, secret: &str) -> bool {
        match blake3::Hash::from_hex(&self.digest) {
            Ok(want) => blake3::hash(secret.as_bytes()) == want,
            Err(_) => false,
        }
    }
}

/// A freshly minted token: its entry and the secret, shown once.
#[derive(Debug, Clone)]
pub struct NewToken {
    /// What is stored.
    pub entry: TokenEntry,
    /// What the client sends as `Authorization: Bearer <secret>`.
    pub secret: String,
}

/// Prefix of every minted secret.
pub const SECRET_PREFIX: &str = "memoir_";

/// Mint a token for member `name` with `grants` (checked), optionally
/// expiring.
pub fn mint(name: &str, grants: Vec<Grant>, expires_at: Option<DateTime<Utc>>) -> Result<NewToken> {
    check_member(name)?;
    if grants.is_empty() {
        return Err(Error::Invalid("a token needs at least one grant".into()));
    }
    let mut seen = BTreeSet::new();
    for g in &grants {
        g.check()?;
        if !seen.insert(g.project.as_str()) {
            return Err(Error::Invalid(format!(
                "project {:?} is granted twice",
                g.project
            )));
        }
    }
    let id = hex(&uuid::Uuid::new_v4().as_bytes()[..8]);
    let mut random = Vec::with_capacity(32);
    random.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    random.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    let secret = format!("{SECRET_PREFIX}{id}_{}", hex(&random));
    Ok(NewToken {
        entry: TokenEntry {
            id,
            name: name.to_string(),
            digest: blake3::hash(secret.as_bytes()).to_hex().to_string(),
            grants,
            created_at: Utc::now(),
            expires_at,
            revoked_at: None,
        },
        secret,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The entry id inside a minted secret, if it has the minted shape.
pub fn secret_id(secret: &str) -> Option<&str> {
    let rest = secret.strip_prefix(SECRET_PREFIX)?;
    let (id, tail) = rest.split_once('_')?;
    (id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) && !tail.is_empty()).then_some(id)
}

/// Who a request is: a member with roles per project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's id (`None` for a token from a server's configuration file).
    pub token_id: Option<String>,
    /// The member name.
    pub member: String,
    /// Roles per project.
    pub grants: BTreeMap<String, BTreeSet<Role>>,
}

impl Caller {
    /// A caller holding `grants`.
    pub fn new(token_id: Option<String>, member: &str, grants: &[Grant]) -> Caller {
        let mut map: BTreeMap<String, BTreeSet<Role>> = BTreeMap::new();
        for g in grants {
            map.entry(g.project.clone())
                .or_default()
                .extend(g.roles.iter().copied());
        }
        Caller {
            token_id,
            member: member.to_string(),
            grants: map,
        }
    }

    /// Whether the caller holds `role` on `project`.
    pub fn has(&self, project: &str, role: Role) -> bool {
        self.grants.get(project).is_some_and(|r| r.contains(&role))
    }

    /// Whether the caller holds any of `roles` on `project`.
    pub fn has_any(&self, project: &str, roles: &[Role]) -> bool {
        roles.iter().any(|r| self.has(project, *r))
    }

    /// The projects on which the caller holds `role`.
    pub fn projects_with(&self, role: Role) -> Vec<String> {
        self.grants
            .iter()
            .filter(|(_, r)| r.contains(&role))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The projects the caller holds any role on.
    pub fn projects(&self) -> Vec<String> {
        self.grants.keys().cloned().collect()
    }
}

impl Caller {
    /// The project a request works on: the one it names (the
    /// [`PROJECT_HEADER`]), else the caller's only project; an error when
    /// the caller holds roles on several and names none.
    pub fn project_for(&self, named: Option<&str>) -> Result<String> {
        if let Some(p) = named {
            return Ok(p.to_string());
        }
        let mut projects = self.grants.keys();
        match (projects.next(), projects.next()) {
            (Some(p), None) => Ok(p.clone()),
            _ => Err(Error::Invalid(format!(
                "the token has roles on several projects: name one with {PROJECT_HEADER}"
            ))),
        }
    }

    /// Whether the caller may see every session of `project` (`read`);
    /// without it, a `publish` member sees only the sessions it created.
    pub fn reads_all(&self, project: &str) -> bool {
        self.has(project, Role::Read)
    }
}

/// The refusal message of a caller lacking every one of `roles` (any one
/// would do) on `project` (empty: a team-wide check).
pub fn missing_roles(roles: &[Role], project: &str) -> String {
    let need = roles
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(" or ");
    let need = if need.is_empty() { "a" } else { &need };
    if project.is_empty() {
        format!("this token may not do that (it needs the {need} role)")
    } else {
        format!("this token may not do that (it needs the {need} role on project {project})")
    }
}

/// Who presents `secret` to a server: a minted secret (`memoir_<id>_...`)
/// from `book`, read now (so a revocation holds on the next request), else
/// the server's fixed tokens (`fixed`, e.g. its tokens file). A secret of
/// the minted shape that `book` does not know is tried against `fixed` too.
/// The outer error is a store failure; the inner one a refused token.
pub fn identify(
    book: Option<&dyn TokenBook>,
    secret: &str,
    fixed: impl FnOnce(&str) -> std::result::Result<Caller, AuthError>,
) -> Result<std::result::Result<Caller, AuthError>> {
    if let Some(book) = book {
        match book.authenticate(secret)? {
            Some(Ok(caller)) => return Ok(Ok(caller)),
            Some(Err(AuthError::Unknown)) | None => {}
            Some(Err(e)) => return Ok(Err(e)),
        }
    }
    Ok(fixed(secret))
}

/// Why a presented token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("missing Authorization: Bearer <token>")]
    Missing,
    /// Not valid text, or not `Bearer <token>`.
    #[error("the Authorization header must be `Bearer <token>`")]
    Malformed,
    /// No such token.
    #[error("unknown token")]
    Unknown,
    /// The token's `expires_at` has passed.
    #[error("the token has expired")]
    Expired,
    /// The token was revoked.
    #[error("the token was revoked")]
    Revoked,
}

impl AuthError {
    /// The stable error code (`unauthorized`, `token_expired` or `token_revoked`).
    pub fn code(self) -> &'static str {
        match self {
            AuthError::Expired => "token_expired",
            AuthError::Revoked => "token_revoked",
            _ => "unauthorized",
        }
    }
}

/// The token of an `Authorization` header value (`Bearer <token>`).
pub fn bearer(header: Option<&[u8]>) -> std::result::Result<&str, AuthError> {
    let value = header.ok_or(AuthError::Missing)?;
    let text = std::str::from_utf8(value).map_err(|_| AuthError::Malformed)?;
    Ok(text
        .strip_prefix("Bearer ")
        .ok_or(AuthError::Malformed)?
        .trim())
}

/// Where a store keeps its tokens. Every call reads the backing store (no
/// cache), so a change made through one handle is seen by all.
pub trait TokenBook: Send + Sync + std::fmt::Debug {
    /// Every entry, revoked ones included.
    fn list(&self) -> Result<Vec<TokenEntry>>;
    /// The entry of token `id`.
    fn get(&self, id: &str) -> Result<Option<TokenEntry>>;
    /// Store a new entry.
    fn insert(&self, entry: &TokenEntry) -> Result<()>;
    /// Mark token `id` revoked; false when there is no such live token.
    fn revoke(&self, id: &str) -> Result<bool>;

    /// The caller a presented minted secret authenticates as. `Ok(None)`:
    /// not a minted secret (the caller may try other tokens);
    /// [`AuthError`] when it has the minted shape but is refused. A store
    /// failure is an error of its own (the outer `Result`).
    fn authenticate(&self, secret: &str) -> Result<Option<std::result::Result<Caller, AuthError>>> {
        let Some(id) = secret_id(secret) else {
            return Ok(None);
        };
        let Some(entry) = self.get(id)? else {
            return Ok(Some(Err(AuthError::Unknown)));
        };
        if !entry.verify(secret) {
            return Ok(Some(Err(AuthError::Unknown)));
        }
        if entry.revoked_at.is_some() {
            return Ok(Some(Err(AuthError::Revoked)));
        }
        if entry.expires_at.is_some_and(|t| t <= Utc::now()) {
            return Ok(Some(Err(AuthError::Expired)));
        }
        Ok(Some(Ok(entry.caller())))
    }
}

/// The token book of `store`: its PostgreSQL table, or the tokens file of a
/// file store's directory; `None` for a store that keeps none.
pub fn book_of(store: &Arc<dyn LogStore>) -> Option<Arc<dyn TokenBook>> {
    #[cfg(feature = "postgres")]
    if store.postgres().is_some() {
        return Some(Arc::new(PgBook(store.clone())));
    }
    let dir = store.index_dir()?;
    Some(Arc::new(FileBook::new(dir)))
}

/// The tokens in a PostgreSQL store's `memoir_tokens` table.
#[cfg(feature = "postgres")]
#[derive(Debug)]
struct PgBook(Arc<dyn LogStore>);

#[cfg(feature = "postgres")]
impl PgBook {
    fn pg(&self) -> Result<&crate::store::postgres::PgStore> {
        self.0
            .postgres()
            .ok_or_else(|| Error::Invalid("not a PostgreSQL store".into()))
    }
}

#[cfg(feature = "postgres")]
fn parse_entry(text: &str) -> Result<TokenEntry> {
    serde_json::from_str(text).map_err(|e| Error::Corrupt {
        path: "memoir_tokens".into(),
        detail: format!("token entry: {e}"),
    })
}

#[cfg(feature = "postgres")]
impl TokenBook for PgBook {
    fn list(&self) -> Result<Vec<TokenEntry>> {
        self.pg()?
            .token_rows()?
            .iter()
            .map(|t| parse_entry(t))
            .collect()
    }

    fn get(&self, id: &str) -> Result<Option<TokenEntry>> {
        self.pg()?
            .token_row(id)?
            .map(|t| parse_entry(&t))
            .transpose()
    }

    fn insert(&self, entry: &TokenEntry) -> Result<()> {
        self.pg()?
            .insert_token_row(&entry.id, &serde_json::to_string(entry)?)
    }

    fn revoke(&self, id: &str) -> Result<bool> {
        let Some(mut entry) = self.get(id)? else {
            return Ok(false);
        };
        if entry.revoked_at.is_some() {
            return Ok(false);
        }
        entry.revoked_at = Some(Utc::now());
        self.pg()?
            .revoke_token_row(id, &serde_json::to_string(&entry)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_secrets_verify_and_name_their_entry() {
        let grants = vec![Grant::parse("web=read+publish").unwrap()];
        let t = mint("ana", grants, None).unwrap();
        assert_eq!(secret_id(&t.secret), Some(t.entry.id.as_str()));
        assert!(t.entry.verify(&t.secret));
        let mut wrong = t.secret.clone();
        wrong.push('0');
        assert!(!t.entry.verify(&wrong));
        assert!(!t.entry.digest.contains(&t.secret[20..]));
        let other = mint("ana", vec![Grant::parse("web=read").unwrap()], None).unwrap();
        assert_ne!(t.secret, other.secret);
        let c = t.entry.caller();
        assert!(c.has("web", Role::Read) && c.has("web", Role::Publish));
        assert!(!c.has("web", Role::Manage) && !c.has("api", Role::Read));
    }

    #[test]
    fn bad_grants_and_names_are_refused() {
        for bad in ["web", "web=", "web=owner", "a~b=read", "=read"] {
            assert!(Grant::parse(bad).is_err(), "{bad}");
        }
        assert!(mint("has space", vec![Grant::parse("w=read").unwrap()], None).is_err());
        assert!(mint("ana", Vec::new(), None).is_err());
        let g = Grant::parse("w=read").unwrap();
        assert!(mint("ana", vec![g.clone(), g], None).is_err());
    }
}
