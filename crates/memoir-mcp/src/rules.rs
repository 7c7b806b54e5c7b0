//! Who may call which tool: [`TOOL_RULES`], every tool with the roles it
//! needs on the caller's project ([`memoir::access::Role`], the roles of
//! `memoir serve`'s tokens), and [`check`], run before each call over HTTP.
//!
//! The rules follow `memoir serve`'s routes: reading sessions and notes
//! needs `read`; writing (notes, promotions, forks) needs `publish`, and a
//! write on a session another member created also needs `read` (a
//! `publish`-only member sees only its own sessions, as on the server);
//! usage needs `usage`. A tool without a rule is refused to everyone.
//! Over stdio and with `--no-auth` there is no caller and no check.

use memoir::access::{self, Caller, Role};

/// What a tool requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolRule {
    /// Any of these roles on the caller's project.
    pub any_of: &'static [Role],
    /// Whether the tool may act on a session another member created; then
    /// such a session also needs `read` (checked when the session is
    /// resolved: without `read`, another member's session is not found).
    pub others_need_read: bool,
}

const fn rule(any_of: &'static [Role], others_need_read: bool) -> ToolRule {
    ToolRule {
        any_of,
        others_need_read,
    }
}

const READ: &[Role] = &[Role::Read];
const PUBLISH: &[Role] = &[Role::Publish];
const USAGE: &[Role] = &[Role::Usage];

/// Every tool and its rule.
#[rustfmt::skip]
pub const TOOL_RULES: &[(&str, ToolRule)] = &[
    ("search_sessions", rule(READ, false)),
    ("recall", rule(READ, false)),
    ("list_sessions", rule(READ, false)),
    ("get_session", rule(READ, false)),
    ("resume_command", rule(READ, false)),
    ("list_notes", rule(READ, false)),
    ("blame", rule(READ, false)),
    ("remember", rule(PUBLISH, false)),
    ("promote", rule(PUBLISH, true)),
    ("usage", rule(USAGE, false)),
    ("forget", rule(PUBLISH, false)),
    ("fork_session", rule(PUBLISH, true)),
];

/// The rule of tool `name`; `None`: no rule (refused).
pub fn rule_of(name: &str) -> Option<ToolRule> {
    TOOL_RULES.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// Whether `caller` may call tool `name` on `project`: `Err` names the
/// missing role (the message of `memoir serve`'s 403).
pub fn check(caller: &Caller, project: &str, name: &str) -> Result<(), String> {
    match rule_of(name) {
        Some(r) if caller.has_any(project, r.any_of) => Ok(()),
        Some(r) => Err(format!(
            "{name}: {}",
            access::missing_roles(r.any_of, project)
        )),
        None => Err(format!("{name}: this tool has no access rule")),
    }
}
