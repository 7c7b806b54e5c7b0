//! How agents register memoir (`memoir mcp --print-config claude|codex`):
//! the command line and the configuration file snippet each agent reads.

use serde_json::json;

/// An agent that registers MCP servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code: `claude mcp add`, project `.mcp.json`.
    Claude,
    /// Codex: `codex mcp add`, `[mcp_servers.<name>]` in `config.toml`.
    Codex,
}

impl std::str::FromStr for Agent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "claude" | "claude-code" => Ok(Agent::Claude),
            "codex" => Ok(Agent::Codex),
            other => Err(format!("unknown agent {other:?} (claude or codex)")),
        }
    }
}

/// The registration text for `agent`, starting `memoir mcp` with `args`
/// (e.g. `["--allow-writes"]`).
pub fn config(agent: Agent, args: &[String]) -> String {
    let mut argv = vec!["mcp".to_string()];
    argv.extend(args.iter().cloned());
    let line = argv.join(" ");
    match agent {
        Agent::Claude => {
            let file = json!({"mcpServers": {"memoir": {"type": "stdio", "command": "memoir", "args": argv}}});
            let pretty = serde_json::to_string_pretty(&file).unwrap_or_default();
            format!(
                "# Claude Code, for you (local scope):\nclaude mcp add memoir -- memoir {line}\n\
                 # or for everyone on the project (writes .mcp.json, check it in):\n\
                 claude mcp add -s project memoir -- memoir {line}\n\
                 # .mcp.json:\n{pretty}\n"
            )
        }
        Agent::Codex => {
            let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
            format!(
                "# Codex:\ncodex mcp add memoir -- memoir {line}\n\
                 # or in ~/.codex/config.toml (or a trusted project's .codex/config.toml):\n\
                 [mcp_servers.memoir]\ncommand = \"memoir\"\nargs = [{}]\n",
                quoted.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_name_the_command_and_parse() {
        let c = config(Agent::Claude, &[]);
        assert!(c.contains("claude mcp add memoir -- memoir mcp\n"));
        let json_start = c.find('{').unwrap();
        let v: serde_json::Value = serde_json::from_str(&c[json_start..]).unwrap();
        assert_eq!(v["mcpServers"]["memoir"]["command"], "memoir");
        assert_eq!(v["mcpServers"]["memoir"]["args"], json!(["mcp"]));
        let x = config(Agent::Codex, &["--allow-writes".into()]);
        assert!(x.contains("codex mcp add memoir -- memoir mcp --allow-writes\n"));
        assert!(x.contains(
            "[mcp_servers.memoir]\ncommand = \"memoir\"\nargs = [\"mcp\", \"--allow-writes\"]\n"
        ));
        assert!("gemini".parse::<Agent>().is_err());
    }
}
