//! Who may call what: [`ROUTES`], every route of the API with its
//! [`Access`] rule. The router is built from this list (a route is served
//! only if it has a rule) and the `Auth` extractor checks a request's
//! token against its route's rule before any handler runs; a route without
//! a rule is refused to everyone.
//!
//! Project routes work on one project: the token's only project, or the
//! one named by the `X-Memoir-Project` header. Team routes (`/v1/usage`,
//! `/v1/tokens`) span every project on which the token holds the role.
//! Handlers add the ownership rule of `publish` (a member without `read`
//! sees and writes only the sessions it created).

use memoir::access::Role;

/// What a route requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token (health check, API description).
    Public,
    /// Any of these roles on the request's project.
    Project(&'static [Role]),
    /// This role on at least one project (the handler narrows to those).
    Team(Role),
}

/// One route: its method, its path pattern and its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// The path pattern, as routed (`/v1/sessions/{id}`).
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
}

const READ: &[Role] = &[Role::Read];
const READ_OR_OWN: &[Role] = &[Role::Read, Role::Publish];
const PUBLISH: &[Role] = &[Role::Publish];
const MANAGE: &[Role] = &[Role::Manage];

const fn r(method: &'static str, path: &'static str, access: Access) -> Route {
    Route {
        method,
        path,
        access,
    }
}

/// Every route of the API and its rule.
#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    r("GET", "/healthz", Access::Public),
    r("GET", "/openapi.json", Access::Public),
    r("GET", "/v1/sessions", Access::Project(READ_OR_OWN)),
    r("POST", "/v1/sessions", Access::Project(PUBLISH)),
    r("GET", "/v1/sessions/{id}", Access::Project(READ_OR_OWN)),
    r("DELETE", "/v1/sessions/{id}", Access::Project(MANAGE)),
    r("GET", "/v1/sessions/{id}/meta", Access::Project(READ_OR_OWN)),
    r("GET", "/v1/sessions/{id}/log", Access::Project(READ_OR_OWN)),
    r("POST", "/v1/sessions/{id}/records", Access::Project(PUBLISH)),
    r("POST", "/v1/sessions/{id}/fork", Access::Project(PUBLISH)),
    r("GET", "/v1/sessions/{id}/export", Access::Project(READ_OR_OWN)),
    r("POST", "/v1/sessions/{id}/restore", Access::Project(MANAGE)),
    r("POST", "/v1/sessions/{id}/purge", Access::Project(MANAGE)),
    r("POST", "/v1/sessions/{id}/search", Access::Project(READ_OR_OWN)),
    r("POST", "/v1/sessions/{id}/lease", Access::Project(PUBLISH)),
    r("POST", "/v1/sessions/{id}/lease/{lease}", Access::Project(PUBLISH)),
    r("DELETE", "/v1/sessions/{id}/lease/{lease}", Access::Project(PUBLISH)),
    r("POST", "/v1/heads", Access::Project(READ_OR_OWN)),
    r("GET", "/v1/trash", Access::Project(MANAGE)),
    r("GET", "/v1/trash/{id}/log", Access::Project(MANAGE)),
    r("PUT", "/v1/blobs/{hash}", Access::Project(PUBLISH)),
    r("GET", "/v1/blobs/{hash}", Access::Project(READ)),
    #[cfg(feature = "search")]
    r("POST", "/v1/search", Access::Project(READ)),
    r("GET", "/v1/usage", Access::Team(Role::Usage)),
    r("GET", "/v1/tokens", Access::Team(Role::Manage)),
    r("POST", "/v1/tokens", Access::Team(Role::Manage)),
    r("DELETE", "/v1/tokens/{id}", Access::Team(Role::Manage)),
];

/// The rule of `method` on the path pattern `path`; `None`: no such route
/// (refused).
pub fn rule(method: &str, path: &str) -> Option<Access> {
    ROUTES
        .iter()
        .find(|r| r.method == method && r.path == path)
        .map(|r| r.access)
}
