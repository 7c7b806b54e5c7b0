//! Where each agent keeps its sessions, and which agent wrote a file.
//!
//! Homes: Claude Code `$CLAUDE_CONFIG_DIR`, else `~/.claude` (or the older
//! `~/.config/claude`); Codex `$CODEX_HOME`, else `~/.codex`; Gemini CLI
//! `$GEMINI_CLI_HOME/.gemini` (or `$GEMINI_CLI_HOME` itself), else
//! `~/.gemini`; OpenCode `$XDG_DATA_HOME/opencode/opencode.db`, else
//! `~/.local/share/opencode/opencode.db`. A directory given instead may be
//! the home or any folder below it: the session files are found under it.
//! Symbolic links to directories are not followed (no cycles, no escapes).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{lines, Agent, ImportError};
use crate::paths::env_path;

/// The agent's default home (its database for OpenCode), when it exists.
pub fn default_home(agent: Agent) -> Result<Option<PathBuf>, ImportError> {
    let home = env_path("HOME")?;
    let candidates: Vec<PathBuf> = match agent {
        Agent::ClaudeCode => match env_path("CLAUDE_CONFIG_DIR")? {
            Some(d) => vec![d],
            None => home
                .iter()
                .flat_map(|h| [h.join(".claude"), h.join(".config/claude")])
                .collect(),
        },
        Agent::Codex => match env_path("CODEX_HOME")? {
            Some(d) => vec![d],
            None => home.iter().map(|h| h.join(".codex")).collect(),
        },
        Agent::GeminiCli => match env_path("GEMINI_CLI_HOME")? {
            Some(d) => vec![d.join(".gemini"), d],
            None => home.iter().map(|h| h.join(".gemini")).collect(),
        },
        Agent::OpenCode => {
            let data = match env_path("XDG_DATA_HOME")? {
                Some(d) => Some(d),
                None => home.map(|h| h.join(".local/share")),
            };
            data.into_iter()
                .map(|d| d.join("opencode").join("opencode.db"))
                .collect()
        }
    };
    Ok(candidates.into_iter().find(|p| p.exists()))
}

/// The session files of `agent` under `dir` (a file is returned as is).
pub fn find_sources(agent: Agent, dir: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let meta = fs::metadata(dir).map_err(|e| ImportError::io("stat", dir, e))?;
    if !meta.is_dir() {
        // A file is returned as is; a special file (FIFO, socket, device)
        // too, and the import skips it with a note, never opening it.
        return Ok(vec![dir.to_path_buf()]);
    }
    if agent == Agent::OpenCode {
        let db = dir.join("opencode.db");
        return Ok(if db.is_file() { vec![db] } else { Vec::new() });
    }
    // From a home, look only where sessions live.
    let roots: Vec<PathBuf> = match agent {
        Agent::ClaudeCode if dir.join("projects").is_dir() => vec![dir.join("projects")],
        Agent::Codex if dir.join("sessions").is_dir() || dir.join("archived_sessions").is_dir() => {
            ["sessions", "archived_sessions"]
                .iter()
                .map(|d| dir.join(d))
                .filter(|d| d.is_dir())
                .collect()
        }
        Agent::GeminiCli if dir.join("tmp").is_dir() => vec![dir.join("tmp")],
        _ => vec![dir.to_path_buf()],
    };
    let mut out = Vec::new();
    for root in roots {
        walk(&root, &mut |p| {
            if is_session_file(agent, p) {
                out.push(p.to_path_buf());
            }
        })?;
    }
    out.sort();
    Ok(out)
}

fn is_session_file(agent: Agent, p: &Path) -> bool {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    match agent {
        Agent::ClaudeCode => {
            name.ends_with(".jsonl")
                && name != "journal.jsonl"
                && name != "history.jsonl"
                && !p.components().any(|c| c.as_os_str() == "tool-results")
        }
        Agent::Codex => {
            name.starts_with("rollout-")
                && (name.ends_with(".jsonl") || name.ends_with(lines::ZSTD_SUFFIX))
                // Stored segments are read through the references to them.
                && !super::segments::is_stored_segment(p)
        }
        Agent::GeminiCli => {
            name.starts_with("session-") && (name.ends_with(".json") || name.ends_with(".jsonl"))
        }
        Agent::OpenCode => name == "opencode.db",
    }
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) -> Result<(), ImportError> {
    let entries = fs::read_dir(dir).map_err(|e| ImportError::io("list", dir, e))?;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            walk(&path, f)?;
        } else if kind.is_file() {
            f(&path);
        }
    }
    Ok(())
}

/// Which agent wrote `path`, from its first bytes (`None`: not recognised).
/// A path that is not a regular file is refused before it is opened for
/// reading ([`ImportError::Unsupported`]).
pub fn detect_file(path: &Path) -> Result<Option<Agent>, ImportError> {
    let mut head = Vec::new();
    lines::open(path)?
        .take(256 * 1024)
        .read_to_end(&mut head)
        .map_err(|e| ImportError::io("read", path, e))?;
    if head.starts_with(b"SQLite format 3\0") {
        return Ok(Some(Agent::OpenCode));
    }
    let text = String::from_utf8_lossy(&head);
    let first = text.trim_start();
    // One JSON object over the whole file: a legacy Gemini chat.
    if first.starts_with('{')
        && !first
            .lines()
            .next()
            .is_some_and(|l| l.trim_end().ends_with('}'))
    {
        return Ok(first
            .contains("\"projectHash\"")
            .then_some(Agent::GeminiCli));
    }
    for line in first.lines().take(20) {
        let Ok(serde_json::Value::Object(v)) = serde_json::from_str::<serde_json::Value>(line)
        else {
            continue;
        };
        let kind = v.get("type").and_then(|t| t.as_str()).unwrap_or("");
        if v.contains_key("payload")
            && matches!(
                kind,
                "session_meta" | "response_item" | "event_msg" | "turn_context" | "compacted"
            )
        {
            return Ok(Some(Agent::Codex));
        }
        if v.contains_key("projectHash") || (v.contains_key("$set") && !v.contains_key("uuid")) {
            return Ok(Some(Agent::GeminiCli));
        }
        if v.contains_key("sessionId")
            && (v.contains_key("uuid") || v.contains_key("leafUuid") || kind == "summary")
            || kind == "summary" && v.contains_key("leafUuid")
        {
            return Ok(Some(Agent::ClaudeCode));
        }
        if v.contains_key("instructions") && v.contains_key("id") {
            return Ok(Some(Agent::Codex));
        }
    }
    Ok(None)
}
