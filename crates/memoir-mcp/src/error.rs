//! A failed tool call: [`ToolError`], classed like every memoir front's
//! errors ([`ErrorKind`]) and returned to the client as a tool error
//! result (`isError: true` with `{error, message}`), never a panic or exit.

use memoir::error::ErrorKind;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// The kind (its code is the `error` field).
    pub class: ErrorKind,
    /// What went wrong, for the model to read.
    pub message: String,
}

impl ToolError {
    /// The caller's arguments are wrong.
    pub fn invalid(message: impl Into<String>) -> Self {
        ToolError {
            class: ErrorKind::Invalid,
            message: message.into(),
        }
    }

    /// No such session or note.
    pub fn not_found(message: impl Into<String>) -> Self {
        ToolError {
            class: ErrorKind::NotFound,
            message: message.into(),
        }
    }

    /// The server failed.
    pub fn internal(message: impl Into<String>) -> Self {
        ToolError {
            class: ErrorKind::Io,
            message: message.into(),
        }
    }

    /// The tool error result sent to the client.
    pub fn into_result(self) -> CallToolResult {
        let body = json!({ "error": self.class.code(), "message": self.message });
        let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
            "{}: {}",
            self.class.code(),
            self.message
        ))]);
        r.structured_content = Some(body);
        r
    }
}

impl From<memoir::Error> for ToolError {
    fn from(e: memoir::Error) -> Self {
        ToolError {
            class: e.kind(),
            message: e.to_string(),
        }
    }
}

impl From<memoir::manager::ManagerError> for ToolError {
    fn from(e: memoir::manager::ManagerError) -> Self {
        ToolError {
            class: e.kind(),
            message: e.to_string(),
        }
    }
}

impl From<memoir::search::SearchError> for ToolError {
    fn from(e: memoir::search::SearchError) -> Self {
        ToolError {
            class: e.kind(),
            message: e.to_string(),
        }
    }
}

impl From<memoir::view::ViewError> for ToolError {
    fn from(e: memoir::view::ViewError) -> Self {
        ToolError {
            class: e.kind(),
            message: e.to_string(),
        }
    }
}

impl From<memoir::embed::EmbeddingError> for ToolError {
    fn from(e: memoir::embed::EmbeddingError) -> Self {
        ToolError {
            class: e.kind(),
            message: e.to_string(),
        }
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(e: serde_json::Error) -> Self {
        ToolError::internal(e.to_string())
    }
}
