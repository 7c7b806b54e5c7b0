//! The session manager: sessions of one project, a fork that never splits a
//! tool call from its result, listing and a redacted export.
//! Run: `cargo run -p memoir --example manager`.

use memoir::manager::{ExportFormat, ExportOptions, ManagerOptions, SessionManager};
use memoir::message::{Block, Message, Role};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let project =
        std::env::temp_dir().join(format!("memoir-manager-example-{}", std::process::id()));
    std::fs::create_dir_all(&project)?;
    // Sessions live in <project>/.memoir/sessions.
    let mut m = SessionManager::for_project(&project, ManagerOptions::default())?;
    let id = m.create_session("fix the parser", None)?;
    m.add_messages([
        Message::user("the parser panics on empty input"),
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: "t1".into(),
                name: "shell".into(),
                input: serde_json::json!({"command": "cargo test -p parser"}),
            }],
        ),
        Message::tool_result("t1", "1 failed; DB_PASSWORD=hunter22", false),
        Message::assistant("fixed: empty input now returns an empty AST"),
    ])?;
    m.flush()?;

    // Fork after the tool call: the cut moves so the call keeps its result.
    let fork = m.fork_session(&id, Some(2))?;
    println!(
        "fork {} keeps {} of the {} messages asked for",
        fork.id, fork.effective, fork.requested
    );

    for entry in m.list_sessions()? {
        println!(
            "{}  {:>3} messages  {}",
            entry.id,
            entry.messages,
            entry.title.unwrap_or_default()
        );
    }

    #[cfg(feature = "redact")]
    {
        let e = m.export(
            &id,
            ExportOptions {
                format: ExportFormat::Markdown,
                redact: true,
            },
        )?;
        assert!(!e.text.contains("hunter22"));
        println!("{} secret(s) redacted:\n{}", e.redactions.total(), e.text);
    }
    #[cfg(not(feature = "redact"))]
    println!(
        "{}",
        m.export(
            &id,
            ExportOptions {
                format: ExportFormat::Markdown,
                redact: false
            }
        )?
        .text
    );

    std::fs::remove_dir_all(&project)?;
    Ok(())
}
