//! `memoir mcp`: every agent's session memory as Model Context Protocol
//! tools, over stdio or streamable HTTP.
//!
//! A thin front over the library, on the official Rust SDK (`rmcp`, pinned
//! exactly). [`MemoirMcp`] is the [`rmcp::ServerHandler`]: it lists the
//! tools of [`catalog`] (destructive ones only with `--allow-writes`), runs
//! each call's handler ([`tools`]) on tokio's blocking pool, and serves the
//! resources of [`resources`]. Protocol revisions: `2026-07-28` (stateless,
//! `server/discover`) when the client asks for it, `2025-11-25` and
//! `2025-06-18` (the `initialize` handshake) for older clients; the SDK's
//! negotiation picks the client's revision when the server supports it.
//!
//! Over HTTP each call is checked against the caller's token roles
//! ([`rules`]): a tool the caller may not use is left out of `tools/list`
//! and a call to it is refused with a JSON-RPC error naming the missing role.
//!
//! Modules: [`scope`] (which sessions a call may see: a local project, or a
//! bearer token's project on a shared store), [`tools`] and [`catalog`],
//! [`page`] (size bounds and cursors), [`resources`], [`http`] (streamable
//! HTTP with `memoir serve`'s tokens), [`register`] (Claude Code and Codex
//! registration snippets), [`stdio`] (stdin/stdout with a bounded message
//! size), [`error`].

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![deny(missing_docs)]

pub mod catalog;
pub mod error;
pub mod http;
pub mod page;
pub mod register;
pub mod resources;
pub mod rules;
pub mod scope;
pub mod stdio;
pub mod tools;

use std::borrow::Cow;
use std::sync::Arc;

use memoir::access::{Caller, Role};
use rmcp::model::ErrorCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

pub use error::ToolError;
pub use scope::{Backend, McpConfig};

/// The protocol revisions this server speaks, oldest first.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// The project a bearer token granted, put in the HTTP request's extensions
/// by [`http`]'s authentication layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

/// The MCP server over a memoir store.
#[derive(Clone)]
pub struct MemoirMcp {
    config: Arc<McpConfig>,
    indexes: Arc<scope::Indexes>,
}

impl std::fmt::Debug for MemoirMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoirMcp")
            .field("config", &self.config)
            .finish()
    }
}

const INSTRUCTIONS: &str = "memoir holds this project's agent sessions (Claude Code, Codex, Gemini CLI, OpenCode and native ones) and remembered notes. Use search_sessions to find what was said or decided before, get_session to read around a hit, recall for a token-budgeted context block, remember to keep a fact for later sessions, and resume_command to reopen a session.";

/// The tenant of a request: the token's project, when it came over HTTP.
fn tenant(ctx: &RequestContext<RoleServer>) -> Option<String> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Tenant>())
        .map(|t| t.0.clone())
}

/// The caller of a request: who its token is, when it came over HTTP with
/// authentication.
fn caller(ctx: &RequestContext<RoleServer>) -> Option<Caller> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .cloned()
}

/// Whether the request may read session content (resources): no caller
/// (stdio, `--no-auth`), or one holding `read` on its project.
fn reads(ctx: &RequestContext<RoleServer>, project: Option<&str>) -> bool {
    caller(ctx).is_none_or(|c| c.reads_all(project.unwrap_or_default()))
}

/// The JSON-RPC error code of a call the caller's roles do not allow
/// (in the range JSON-RPC leaves to servers).
pub const FORBIDDEN: ErrorCode = ErrorCode(-32003);

/// The JSON-RPC error refusing tool or resource `what` to a caller lacking
/// every role of `needs` on `project`.
fn forbidden(message: String, what: &str, project: &str, needs: &[Role]) -> McpError {
    let needs: Vec<&str> = needs.iter().map(|r| r.as_str()).collect();
    McpError::new(
        FORBIDDEN,
        message,
        Some(serde_json::json!({
            "error": "forbidden", "tool": what, "project": project, "needs": needs,
        })),
    )
}

impl MemoirMcp {
    /// A server over `config`.
    pub fn new(config: McpConfig) -> MemoirMcp {
        MemoirMcp {
            config: Arc::new(config),
            indexes: Arc::new(scope::Indexes::default()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    fn tools(&self) -> Vec<Tool> {
        catalog::tools(self.config.allow_writes)
    }

    /// The tools `caller` may call on `project` (every offered tool when
    /// there is no caller: stdio, `--no-auth`).
    pub fn tools_for(&self, caller: Option<(&Caller, &str)>) -> Vec<Tool> {
        self.tools()
            .into_iter()
            .filter(|t| caller.is_none_or(|(c, p)| rules::check(c, p, &t.name).is_ok()))
            .collect()
    }

    /// Run one tool call for `caller` on `project` (blocking), as an HTTP
    /// request does: an unknown tool, or one the caller's roles do not
    /// allow ([`rules`]), is a JSON-RPC error; a failing call a tool error.
    pub fn call_as(
        &self,
        caller: &Caller,
        project: &str,
        name: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, McpError> {
        self.admit(Some((caller, project)), name)?;
        Ok(self.run(Some(project), Some(caller), name, args))
    }

    /// Whether tool `name` is offered and, over HTTP, allowed to `caller`.
    fn admit(&self, caller: Option<(&Caller, &str)>, name: &str) -> Result<(), McpError> {
        if self.get_tool(name).is_none() {
            let hint = if catalog::WRITE_TOOLS.contains(&name) {
                " (start the server with --allow-writes to enable it)"
            } else {
                ""
            };
            return Err(McpError::invalid_params(
                format!("unknown tool {name:?}{hint}"),
                None,
            ));
        }
        if let Some((c, project)) = caller {
            if let Err(message) = rules::check(c, project, name) {
                let needs = rules::rule_of(name).map_or(&[][..], |r| r.any_of);
                return Err(forbidden(message, name, project, needs));
            }
        }
        Ok(())
    }

    fn run(
        &self,
        tenant: Option<&str>,
        caller: Option<&Caller>,
        name: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> CallToolResult {
        match tools::call(&self.config, &self.indexes, tenant, caller, name, args) {
            Ok(value) => {
                let text = value.to_string();
                let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
                r.structured_content = Some(value);
                r
            }
            Err(e) => e.into_result(),
        }
    }

    /// Run one tool call (blocking) with no caller (stdio, `--no-auth`, or
    /// a trusted embedder): its structured result, or a tool error.
    pub fn call_blocking(
        &self,
        tenant: Option<&str>,
        name: &str,
        args: serde_json::Map<String, serde_json::Value>,
    ) -> CallToolResult {
        self.run(tenant, None, name, args)
    }
}

/// Run `f` on the blocking pool; a panic there is an internal error, not a crash.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, McpError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| McpError::internal_error(format!("handler failed: {e}"), None))
}

impl ServerHandler for MemoirMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("memoir", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = caller(&context);
        let project = tenant(&context).unwrap_or_default();
        Ok(ListToolsResult::with_all_items(
            self.tools_for(caller.as_ref().map(|c| (c, project.as_str()))),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let caller = caller(&context);
        let tenant = tenant(&context);
        self.admit(
            caller
                .as_ref()
                .map(|c| (c, tenant.as_deref().unwrap_or_default())),
            &name,
        )?;
        let args = request.arguments.unwrap_or_default();
        let this = self.clone();
        let result =
            blocking(move || this.run(tenant.as_deref(), caller.as_ref(), &name, args)).await?;
        Ok(CallToolResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let tenant = tenant(&context);
        if !reads(&context, tenant.as_deref()) {
            // Resources are session content: hidden without `read`.
            return Ok(ListResourcesResult::with_all_items(Vec::new()));
        }
        let config = self.config.clone();
        let list = blocking(move || resources::list(&config, tenant.as_deref())).await?;
        Ok(ListResourcesResult::with_all_items(
            list.map_err(|e| McpError::internal_error(e.message, None))?,
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let tenant = tenant(&context);
        if !reads(&context, tenant.as_deref()) {
            let project = tenant.as_deref().unwrap_or_default();
            return Err(forbidden(
                format!(
                    "{}: {}",
                    request.uri,
                    memoir::access::missing_roles(&[Role::Read], project)
                ),
                &request.uri,
                project,
                &[Role::Read],
            ));
        }
        let config = self.config.clone();
        let uri = request.uri.clone();
        let read = blocking(move || resources::read(&config, tenant.as_deref(), &uri)).await?;
        match read {
            Ok(r) => Ok(ReadResourceResponse::Complete(r)),
            Err(e) if e.class == memoir::error::ErrorKind::Io => {
                Err(McpError::internal_error(e.message, None))
            }
            Err(e) if e.class == memoir::error::ErrorKind::Invalid => {
                Err(McpError::invalid_params(e.message, None))
            }
            Err(e) => Err(McpError::resource_not_found(e.message, None)),
        }
    }
}

/// Serve `server` over stdin/stdout until the client closes them (see
/// [`stdio`]: an oversized request is answered, not dropped).
pub async fn serve_stdio(server: MemoirMcp) -> Result<(), std::io::Error> {
    stdio::serve(server, tokio::io::stdin(), tokio::io::stdout()).await
}
