//! Error responses: [`ApiError`] (a status and a JSON `wire::ErrorBody`),
//! the mapping from library errors (through the library's one
//! classification, [`ErrorKind`], with no catch-all arm: a new kind does not
//! compile until it has a status), and the mapping of axum's request
//! rejections.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use memoir::client::wire;
use memoir::error::ErrorKind;
use memoir::manager::ManagerError;
use memoir::Error;

/// An error response: a status and a JSON [`wire::ErrorBody`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    /// Boxed: handlers return `Result<_, ApiError>` everywhere.
    body: Box<wire::ErrorBody>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: Box::new(wire::ErrorBody {
                error: code.into(),
                message: message.into(),
                ..Default::default()
            }),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// The HTTP status of a kind of failure.
    pub fn status_of(kind: ErrorKind) -> StatusCode {
        match kind {
            ErrorKind::Invalid => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Exists => StatusCode::CONFLICT,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Busy => StatusCode::CONFLICT,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Unsupported => StatusCode::NOT_IMPLEMENTED,
            ErrorKind::Corrupt => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Io => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The response of a kind of failure: its status and the body's `error`
    /// code ([`ErrorKind::code`]).
    pub fn of_kind(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError::new(ApiError::status_of(kind), kind.code(), message)
    }

    /// The status of this response.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

/// The body's `error` code: the kind's code, except `invalid_id` for an id
/// the library refused (clients tell it from other bad requests).
fn code_of(e: &Error, kind: ErrorKind) -> &'static str {
    if let Error::InvalidId { .. } = e {
        return "invalid_id";
    }
    kind.code()
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let kind = e.kind();
        let status = ApiError::status_of(kind);
        let message = match (&e, kind) {
            // "No such session in this project": never says whether the id
            // exists elsewhere.
            (Error::NotFound(id) | Error::Deleted(id), _) => {
                format!("no session {id:?} in this project")
            }
            (_, ErrorKind::Unavailable) => format!(
                "the store is unavailable, retry later: {}",
                memoir::error::report(&e)
            ),
            _ => memoir::error::report(&e),
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            eprintln!("memoir serve: internal error: {message}");
        }
        let mut err = ApiError::new(status, code_of(&e, kind), message);
        if let Error::Conflict {
            expected, actual, ..
        } = &e
        {
            err.body.expected = Some(*expected);
            err.body.actual = Some(*actual);
        }
        if let Error::Busy {
            pid, host, since, ..
        } = e
        {
            err.body.holder = Some(memoir::store::lease::Holder { pid, host, since });
        }
        err
    }
}

impl From<ManagerError> for ApiError {
    fn from(e: ManagerError) -> Self {
        match e {
            ManagerError::Store(e) => ApiError::from(e),
            other => ApiError::of_kind(other.kind(), memoir::error::report(&other)),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let status = r.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "bad_request",
        };
        // 422 (well-formed JSON of the wrong shape) is reported as 400 too.
        let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
            StatusCode::BAD_REQUEST
        } else {
            status
        };
        ApiError::new(status, code, r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::bad_request(r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"memoir\""),
            );
        }
        resp
    }
}

/// Result of a handler.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// Run a blocking store call on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static, E: Into<ApiError> + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> ApiResult<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(Into::into),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("store task failed: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/SERVER.md's status table, row by row: every kind of the library
    /// has its status and body code (a new kind fails to compile in
    /// `status_of`).
    #[test]
    fn every_kind_has_its_status_and_code() {
        let table = [
            (ErrorKind::NotFound, 404, "not_found"),
            (ErrorKind::Exists, 409, "exists"),
            (ErrorKind::Conflict, 409, "conflict"),
            (ErrorKind::Busy, 409, "busy"),
            (ErrorKind::Unavailable, 503, "unavailable"),
            (ErrorKind::Unsupported, 501, "unsupported"),
            (ErrorKind::Corrupt, 500, "corrupt"),
            (ErrorKind::Invalid, 400, "bad_request"),
            (ErrorKind::Io, 500, "internal"),
        ];
        assert_eq!(table.len(), ErrorKind::ALL.len());
        for (kind, status, code) in table {
            let e = ApiError::of_kind(kind, "x");
            assert_eq!(e.status().as_u16(), status, "{kind:?}");
            assert_eq!(e.body.error, code, "{kind:?}");
        }
    }

    #[test]
    fn library_errors_keep_their_refined_codes() {
        let e = ApiError::from(Error::InvalidId {
            id: "../x".into(),
            reason: "escapes",
        });
        assert_eq!(
            (e.status().as_u16(), e.body.error.as_str()),
            (400, "invalid_id")
        );
        let e = ApiError::from(Error::Conflict {
            id: "s".into(),
            expected: 3,
            actual: 5,
        });
        assert_eq!(e.status().as_u16(), 409);
        assert_eq!((e.body.expected, e.body.actual), (Some(3), Some(5)));
        let e = ApiError::from(ManagerError::InTrash("s".into()));
        assert_eq!(
            (e.status().as_u16(), e.body.error.as_str()),
            (409, "conflict")
        );
    }
}
