//! Error responses: [`ApiError`] (a status and a JSON `wire::ErrorBody`),
//! the mapping from library errors (through [`ErrorClass`], with no
//! catch-all arm: a new class does not compile until it has a status), and
//! the mapping of axum's request rejections.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use memoir::client::wire;
use memoir::error_class::ErrorClass;
use memoir::manager::ManagerError;
use memoir::Error;

/// An error response: a status and a JSON [`wire::ErrorBody`].
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: wire::ErrorBody,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: wire::ErrorBody {
                error: code.into(),
                message: message.into(),
                ..Default::default()
            },
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// The HTTP status of a class of failure.
    pub fn status_of(class: ErrorClass) -> StatusCode {
        match class {
            ErrorClass::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorClass::NotFound => StatusCode::NOT_FOUND,
            ErrorClass::Conflict => StatusCode::CONFLICT,
            ErrorClass::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorClass::Unsupported => StatusCode::NOT_IMPLEMENTED,
            ErrorClass::Corrupt => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The status of this response.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

/// The body's `error` code: the class's code, refined where clients rely on
/// a finer one (`invalid_id`, `exists`, `busy`).
fn code_of(e: &Error, class: ErrorClass) -> &'static str {
    match e {
        Error::InvalidId { .. } => "invalid_id",
        Error::SessionExists(_) => "exists",
        Error::Busy { .. } => "busy",
        _ => class.code(),
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        let class = e.class();
        let status = ApiError::status_of(class);
        let message = match (&e, class) {
            // "No such session in this project": never says whether the id
            // exists elsewhere.
            (Error::NotFound(id) | Error::Deleted(id), _) => {
                format!("no session {id:?} in this project")
            }
            (_, ErrorClass::Unavailable) => format!(
                "the store is unavailable, retry later: {}",
                memoir::error::report(&e)
            ),
            _ => memoir::error::report(&e),
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            eprintln!("memoir serve: internal error: {message}");
        }
        let mut err = ApiError::new(status, code_of(&e, class), message);
        if let Error::Conflict {
            expected, actual, ..
        } = e
        {
            err.body.expected = Some(expected);
            err.body.actual = Some(actual);
        }
        err
    }
}

impl From<ManagerError> for ApiError {
    fn from(e: ManagerError) -> Self {
        match e {
            ManagerError::Store(e) => ApiError::from(e),
            other => {
                let class = other.class();
                ApiError::new(
                    ApiError::status_of(class),
                    class.code(),
                    memoir::error::report(&other),
                )
            }
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
