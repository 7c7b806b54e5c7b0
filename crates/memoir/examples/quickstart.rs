//! The README's library example: create a session, append an agent turn with a
//! tool call, load it back. Run: `cargo run -p memoir --example quickstart`
//! (it writes to a temporary directory, not your store).

use memoir::message::{Block, Message, Role};
use memoir::record::SessionMeta;
use memoir::transcript::Session;

fn main() -> memoir::Result<()> {
    let tmp = std::env::temp_dir().join(format!("memoir-quickstart-{}", std::process::id()));
    let dir = tmp.join("sessions");
    let mut meta = SessionMeta::new(Session::new_id());
    meta.model = "claude-sonnet-4-5".into();
    let session = Session::create(&dir, meta)?;
    session.append_messages(&[
        Message::user("list the files"),
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse {
                id: "toolu_1".into(),
                name: "fs_list".into(),
                input: serde_json::json!({"path": "."}),
            }],
        ),
        Message::tool_result("toolu_1", "a.rs\nb.rs", false),
    ])?; // returns after fdatasync
    let loaded = Session::load(&session.path)?;
    assert_eq!(loaded.conversation.messages.len(), 3);
    assert!(loaded.report.is_clean());
    println!(
        "{}: {} messages, chain verified",
        session.path.display(),
        loaded.conversation.messages.len()
    );
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}
