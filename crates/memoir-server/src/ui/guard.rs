//! The web view's gate: the per-run secret (URL token, then cookie), the
//! `Host` and `Origin` checks against DNS rebinding and cross-site requests,
//! and the security headers every response carries.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The Content-Security-Policy of every response: only the page's own
/// script, style and data; no inline script or style, no plug-ins, no
/// framing, no form posts elsewhere. `data:` images are the session's own
/// pictures, decoded in the page.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What the gate checks requests against.
pub(crate) struct Guard {
    /// Who may come in.
    secret: Secret,
    /// The cookie's name (per port: cookies are not port-scoped).
    cookie: String,
    /// The `Host` values accepted.
    hosts: Vec<String>,
    /// The `Origin` values accepted.
    origins: Vec<String>,
    /// Where a refused visitor is sent to get a token.
    hint: &'static str,
}

/// The secrets a gate accepts.
enum Secret {
    /// `memoir ui`: this run's secret, as its BLAKE3 digest.
    One(blake3::Hash),
    /// The team view: any bearer token of the server, each naming a project.
    Tokens(crate::TokenIndex),
}

/// The project a team-view request is scoped to (a request extension the
/// gate sets from the cookie's token).
#[derive(Debug, Clone)]
pub(crate) struct Project(pub String);

impl Guard {
    pub(crate) fn new(token: &str, port: u16) -> Guard {
        Guard {
            secret: Secret::One(blake3::hash(token.as_bytes())),
            cookie: format!("memoir_ui_{port}"),
            hosts: vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            origins: vec![
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
            ],
            hint: "open the URL `memoir ui` printed (it carries this run's token)",
        }
    }

    /// The team view's gate: the server's tokens, its hosts and origins.
    pub(crate) fn team(tokens: crate::TokenIndex, ui: &crate::config::TeamUi) -> Guard {
        Guard {
            secret: Secret::Tokens(tokens),
            cookie: format!("memoir_team_{}", ui.port),
            hosts: ui.hosts.clone(),
            origins: ui.origins.clone(),
            hint: "open /?token=YOUR_TOKEN (your bearer token of this server)",
        }
    }

    /// `Some(project)` when `candidate` is accepted (`Some(None)` for
    /// `memoir ui`'s secret, which names no project).
    fn admit(&self, candidate: &str) -> Option<Option<String>> {
        match &self.secret {
            // `blake3::Hash` equality is constant-time.
            Secret::One(digest) => (blake3::hash(candidate.as_bytes()) == *digest).then_some(None),
            // The team view shows content: the token's `read` role on its project.
            Secret::Tokens(tokens) => tokens
                .authenticate(Some(format!("Bearer {candidate}").as_bytes()))
                .ok()
                .filter(|g| g.caller().has(&g.project, memoir::access::Role::Read))
                .map(|g| Some(g.project.clone())),
        }
    }

    #[cfg(test)]
    fn matches(&self, candidate: &str) -> bool {
        self.admit(candidate).is_some()
    }

    fn cookie_value<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.cookie)
            .map(|(_, value)| value)
    }
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let mut resp = (
        status,
        Json(serde_json::json!({"error": code, "message": message})),
    )
        .into_response();
    secure(resp.headers_mut());
    resp
}

/// The security headers of every response.
fn secure(headers: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        h.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY,
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::CACHE_CONTROL, "no-store");
    headers.insert(
        header::HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

/// The `token` query parameter of `query`, if any.
fn query_token(query: &str) -> Option<&str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "token")
        .map(|(_, value)| value)
}

/// `query` without its `token` parameters.
fn without_token(query: &str) -> String {
    query
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("token=") && *pair != "token")
        .collect::<Vec<_>>()
        .join("&")
}

/// The gate, run before every route.
pub(crate) async fn check(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| guard.hosts.iter().any(|ok| ok == h)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "this server answers only to 127.0.0.1 and localhost on its own port",
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| guard.origins.iter().any(|allowed| allowed == o));
        if !ok {
            return refuse(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                "cross-origin requests are refused",
            );
        }
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "the web view is read-only",
        );
    }
    let query = req.uri().query().unwrap_or("");
    if let Some(token) = query_token(query) {
        if guard.admit(token).is_none() {
            return refuse(StatusCode::FORBIDDEN, "forbidden", guard.hint);
        }
        // Trade the URL's token for a cookie, and drop it from the address bar.
        let rest = without_token(query);
        let location = if rest.is_empty() {
            req.uri().path().to_string()
        } else {
            format!("{}?{rest}", req.uri().path())
        };
        let cookie = format!(
            "{}={token}; Path=/; HttpOnly; SameSite=Strict",
            guard.cookie
        );
        let mut resp = StatusCode::SEE_OTHER.into_response();
        if let (Ok(loc), Ok(set)) = (
            HeaderValue::from_str(&location),
            HeaderValue::from_str(&cookie),
        ) {
            resp.headers_mut().insert(header::LOCATION, loc);
            resp.headers_mut().insert(header::SET_COOKIE, set);
        }
        secure(resp.headers_mut());
        return resp;
    }
    let project = match guard.cookie_value(headers) {
        None => return refuse(StatusCode::UNAUTHORIZED, "unauthorized", guard.hint),
        Some(value) => match guard.admit(value) {
            None => return refuse(StatusCode::FORBIDDEN, "forbidden", guard.hint),
            Some(project) => project,
        },
    };
    let mut req = req;
    if let Some(project) = project {
        req.extensions_mut().insert(Project(project));
    }
    let mut resp = next.run(req).await;
    secure(resp.headers_mut());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_found_and_stripped_among_other_parameters() {
        assert_eq!(query_token("a=1&token=xyz&b=2"), Some("xyz"));
        assert_eq!(query_token("tokens=1"), None);
        assert_eq!(without_token("a=1&token=xyz&b=2"), "a=1&b=2");
        assert_eq!(without_token("token=xyz"), "");
    }

    #[test]
    fn the_cookie_is_read_by_its_own_name_only() {
        let g = Guard::new("secret", 4242);
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("memoir_ui_4243=other; memoir_ui_4242=secret"),
        );
        assert_eq!(g.cookie_value(&h), Some("secret"));
        assert!(g.matches("secret"));
        assert!(!g.matches("secreT"));
    }
}
