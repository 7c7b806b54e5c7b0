//! The semantic view: rebuild a session's view with the offline hash
//! embedder, find the earlier turns relevant to a question, and build the
//! token-budgeted graft block an agent would put back into its prompt.
//! Run: `cargo run -p memoir --features view --example recall`.

use memoir::embed::HashEmbedder;
use memoir::message::Message;
use memoir::record::SessionMeta;
use memoir::transcript::Session;
use memoir::view::{RetrievalMode, SessionView};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("memoir-recall-example-{}", std::process::id()));
    let session = Session::create(&dir, SessionMeta::new(Session::new_id()))?;
    session.append_messages(&[
        Message::user("the deploy key lives in the vault under ops/deploy"),
        Message::assistant("noted: ops/deploy in the vault"),
        Message::user("lunch is at noon on Fridays"),
        Message::user("the parser bug was an off-by-one in the tokenizer"),
    ])?;
    let transcript = session.transcript()?;

    // Every provider is synchronous: this call embeds every chunk.
    let embedder = HashEmbedder::new(384);
    let (view, report) = SessionView::rebuild(&transcript, &embedder, None)?;
    println!("indexed {} chunks", report.chunks);

    for hit in view.query_text_mode(
        &embedder,
        "where is the deploy key?",
        2,
        RetrievalMode::Hybrid,
    )? {
        println!(
            "seq {:>2}  {:.3}  {}",
            hit.chain_seq,
            hit.score,
            hit.meta.inline.unwrap_or_default()
        );
    }
    let block = view.graft_budget(&embedder, "tokenizer bug", 200, None)?;
    println!("graft block ({} tokens):\n{}", block.tokens, block.text);

    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
