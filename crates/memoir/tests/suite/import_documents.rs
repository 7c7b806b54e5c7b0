//! Claude `document` content blocks (PDFs, text documents) are imported as
//! blobs, like images: the log keeps a reference with media type and size,
//! the readers and the export give the bytes back. Fixture:
//! `tests/data/import/claude-document.jsonl` (see the README beside it).

use std::fs;
use std::path::Path;

use memoir::import::{self, Agent, Source};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Block;
use memoir::store::Durability;
use serde_json::Value;

const SESSION: &str = "cc-d0c00000-0000-4000-8000-000000000001";

fn fixture() -> (Value, Value) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import/claude-document.jsonl");
    let first: Value =
        serde_json::from_str(fs::read_to_string(path).unwrap().lines().next().unwrap()).unwrap();
    let content = &first["message"]["content"];
    (content[1].clone(), content[2].clone())
}

#[test]
fn claude_documents_are_blobs_with_their_media_type_and_come_back_on_export() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import/claude-document.jsonl");
    let path = tmp
        .path()
        .join("d0c00000-0000-4000-8000-000000000001.jsonl");
    fs::copy(&src, &path).unwrap();
    let mut m = SessionManager::open(
        &tmp.path().join("store"),
        ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..ManagerOptions::default()
        },
    )
    .unwrap();
    let sources = vec![Source {
        agent: Agent::ClaudeCode,
        path: path.clone(),
    }];
    let report = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!((report.sessions.new, report.messages), (1, 2), "{report:?}");
    let (pdf, note) = fixture();
    let pdf_data = pdf["source"]["data"].as_str().unwrap().to_string();
    let note_data = note["source"]["data"].as_str().unwrap().to_string();
    assert_eq!(pdf_data.len(), 168);

    // On disk: references, not payloads.
    let raw = fs::read_to_string(m.store().location(SESSION)).unwrap();
    assert!(!raw.contains(&pdf_data), "the PDF is inline in the log");
    let docs: Vec<Value> = raw
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("content").cloned())
        .flat_map(|c| c.as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "document")
        .collect();
    assert_eq!(docs.len(), 2, "{raw}");
    let refs: Vec<(String, u64)> = docs
        .iter()
        .map(|d| {
            let r = &d["source"]["data"];
            assert_eq!(r["blob"].as_str().map(str::len), Some(64), "{d}");
            (
                r["media_type"].as_str().unwrap().to_string(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        refs,
        vec![
            ("application/pdf".to_string(), 168),
            ("text/plain".to_string(), note_data.len() as u64)
        ]
    );
    // A text document's reference previews its start (as text payloads'
    // do); a PDF's has none.
    assert_eq!(docs[0]["source"]["data"]["preview"], "");
    assert_eq!(docs[1]["source"]["data"]["preview"], note_data.as_str());
    // The block keeps its other fields (title, source type).
    assert_eq!(docs[0]["title"], "spec.pdf");
    assert_eq!(docs[0]["source"]["type"], "base64");

    // Read back: the documents exactly as the source had them.
    let t = m.read_stored(SESSION).unwrap();
    let read: Vec<&Value> = t.messages[0]
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Unknown(v) if v["type"] == "document" => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(read, vec![&pdf, &note]);
    // The export carries the bytes.
    let export = m.export_jsonl(SESSION).unwrap();
    assert!(export.contains(&pdf_data) && export.contains(&note_data));

    // Re-import compares the stored records (payloads read back): nothing new.
    let again = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!((again.records, again.sessions.forked), (0, 0), "{again:?}");
    // Lost cursor: still nothing new.
    fs::remove_file(tmp.path().join("store/import/cursors.json")).unwrap();
    let lost = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!((lost.records, lost.sessions.forked), (0, 0), "{lost:?}");
}
