//! Resuming a session where it was: the agent's own resume command for an
//! imported session, `memoir sessions show` for a native one.

use std::path::PathBuf;

use serde::Serialize;

use crate::record::SessionMeta;

/// A command that reopens a session in the agent that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResumeCommand {
    /// The program (`claude`, `codex`, `gemini`, `opencode`, `memoir`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The directory to run it in (the session's project), when known.
    pub cwd: Option<PathBuf>,
    /// The agent the session came from ([`super::NATIVE_AGENT`] when native).
    pub agent: String,
}

impl ResumeCommand {
    /// The command as one shell line (`cd <dir> && <program> <args>`), quoted.
    pub fn shell_line(&self) -> String {
        let mut words = vec![quote(&self.program)];
        words.extend(self.args.iter().map(|a| quote(a)));
        let cmd = words.join(" ");
        match &self.cwd {
            Some(dir) => format!("cd {} && {cmd}", quote(&dir.to_string_lossy())),
            None => cmd,
        }
    }
}

fn quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// How to resume the session with header `meta`: the source agent's resume
/// command when it was imported (with the agent's own session id), else
/// `memoir sessions show <id>`.
pub fn resume_command(meta: &SessionMeta) -> ResumeCommand {
    let cwd = (!meta.workspace.as_os_str().is_empty()).then(|| meta.workspace.clone());
    let native = || ResumeCommand {
        program: "memoir".into(),
        args: vec!["sessions".into(), "show".into(), meta.id.clone()],
        cwd: None,
        agent: super::NATIVE_AGENT.into(),
    };
    let Some(source) = &meta.source else {
        return native();
    };
    let Some(uuid) = source.session.clone() else {
        return native();
    };
    let (program, args): (&str, Vec<String>) = match source.agent.as_str() {
        "claude-code" => ("claude", vec!["--resume".into(), uuid]),
        "codex" => ("codex", vec!["resume".into(), uuid]),
        "gemini-cli" => ("gemini", vec!["--resume".into(), uuid]),
        "opencode" => ("opencode", vec!["--session".into(), uuid]),
        _ => return native(),
    };
    ResumeCommand {
        program: program.into(),
        args,
        cwd,
        agent: source.agent.clone(),
    }
}

/// [`resume_command`], run where the agent looks the session up: Claude
/// Code finds a session by the project folder of the directory it started
/// in, so a subagent (or branch) is resumed from its parent session's
/// workspace (`source.parent_session`, read from `store`), not from the
/// directory the subagent worked in.
pub fn resume_command_in(store: &dyn crate::store::LogStore, meta: &SessionMeta) -> ResumeCommand {
    let mut cmd = resume_command(meta);
    let parent = meta
        .source
        .as_ref()
        .filter(|s| s.agent == "claude-code")
        .and_then(|s| s.extra.get("parent_session"))
        .and_then(|p| p.as_str());
    if let Some(Ok(Some(parent))) = parent.map(|p| store.read_header(p)) {
        if !parent.workspace.as_os_str().is_empty() {
            cmd.cwd = Some(parent.workspace);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SourceRef;

    #[test]
    fn each_agent_gets_its_own_resume_command_and_native_sessions_get_show() {
        let mut meta = SessionMeta::new("m1");
        assert_eq!(
            resume_command(&meta).shell_line(),
            "memoir sessions show m1"
        );
        meta.workspace = "/home/me/my project".into();
        meta.source = Some(SourceRef {
            agent: "claude-code".into(),
            agent_version: None,
            session: Some("0b9c-uuid".into()),
            path: None,
            extra: Default::default(),
        });
        assert_eq!(
            resume_command(&meta).shell_line(),
            "cd '/home/me/my project' && claude --resume 0b9c-uuid"
        );
        if let Some(s) = meta.source.as_mut() {
            s.agent = "codex".into();
        }
        let c = resume_command(&meta);
        assert_eq!(
            (c.program.as_str(), c.args.clone()),
            ("codex", vec!["resume".to_string(), "0b9c-uuid".to_string()])
        );
        if let Some(s) = meta.source.as_mut() {
            s.agent = "gemini-cli".into();
        }
        assert_eq!(resume_command(&meta).program, "gemini");
    }
}
