//! `memoir demo`: memoir's main job on the embedded store, end to end. It
//! records a small, realistic coding-agent conversation (with tool calls, a
//! tool error and usage) and shows it; then it imports the user's own agent
//! history (every Claude Code, Codex, Gemini CLI or OpenCode home that holds
//! sessions) or, on a machine without any, the example sessions bundled in
//! the binary, and answers a search across all of it. This is the README's
//! first run on a machine without agent history. It is glue only: `memoir
//! import` and `memoir search` do the work.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use memoir::message::{Block, Message, Role, Usage};
use memoir::record::{Record, RunConfig, SessionMeta, Taint};
use memoir::transcript::Session;
use serde_json::json;

/// Arguments of `memoir demo`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    store: super::store::StoreArgs,
    /// Print JSON (the session's id, path and integrity) instead of the conversation.
    #[arg(long)]
    json: bool,
    /// What to search for across every session once the import is done.
    #[arg(long, default_value = "files")]
    query: String,
    /// Only record the demo conversation (no import, no search).
    #[arg(long)]
    no_import: bool,
}

/// Where the bundled examples are written before they are imported:
/// `$MEMOIR_HOME/demo-sources` (beside the store, stable across runs, so a
/// second demo finds them unchanged).
const EXAMPLES_DIR: &str = "demo-sources";

/// Include one file of `testdata/transcripts/` as `(relative path, bytes)`.
macro_rules! example {
    ($path:literal) => {
        (
            $path,
            include_bytes!(concat!("../../../../testdata/transcripts/", $path)) as &[u8],
        )
    };
}

/// The example sessions, bundled in the binary so that an installed memoir
/// runs the demo anywhere: real public Claude Code and Codex files, with the
/// README that names their sources and licences (`testdata/transcripts/`).
const EXAMPLES: &[(&str, &[u8])] = &[
    example!("README.md"),
    example!("claude-code/55550000-0000-4000-8000-000000000001.jsonl"),
    example!("claude-code/dag_compact_after_rewind.jsonl"),
    example!("claude-code/sidechain_integrated.jsonl"),
    example!("codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"),
    example!("codex/rollout-66666666-6666-4666-8666-666666666666.malformed.jsonl"),
    example!("codex/branch-history/2026-05-12T08-00-00-parent.jsonl"),
    example!("codex/branch-history/2026-05-12T08-02-00-branch.jsonl"),
];

/// Write the bundled examples under `root` (a file already holding the same
/// bytes is left alone) and return the folder to import.
fn write_examples(root: &Path) -> anyhow::Result<PathBuf> {
    let dir = root.join(EXAMPLES_DIR);
    for (name, bytes) in EXAMPLES {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_deref() == Some(*bytes) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(dir)
}

/// The agents whose home on this machine holds at least one session: a
/// source file with something in it (an agent's folders, or session files it
/// created empty, are no history).
fn agents_with_history() -> Vec<&'static str> {
    memoir::import::Agent::ALL
        .iter()
        .filter(|a| match memoir::import::sources_of(**a, None) {
            Ok(sources) => sources.iter().any(|s| holds_something(&s.path)),
            Err(_) => false,
        })
        .map(|a| a.as_str())
        .collect()
}

/// A source that may hold a session: a non-empty file, or a directory (an
/// OpenCode storage folder).
fn holds_something(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir() || m.len() > 0)
}

/// Parse `argv` as the arguments of another subcommand, so the demo runs
/// exactly what a user typing that command would.
fn subcommand_args<A: clap::Args>(argv: &[&str]) -> anyhow::Result<A> {
    #[derive(clap::Parser)]
    struct Wrap<A: clap::Args> {
        #[command(flatten)]
        inner: A,
    }
    Ok(<Wrap<A> as clap::Parser>::try_parse_from(argv)?.inner)
}

/// Import the user's agent history (or the shipped examples) into `dir` and
/// search it for `query`.
fn import_and_search(dir: &std::path::Path, query: &str) -> anyhow::Result<()> {
    let found = agents_with_history();
    let examples;
    let dir = dir.display().to_string();
    let argv: Vec<&str> = if !found.is_empty() {
        crate::outln!(
            "\n== importing your agents' history ({}) ==",
            found.join(", ")
        );
        vec!["import", "--all", "--dir", &dir]
    } else {
        examples = write_examples(&memoir::paths::memoir_home()?)?
            .display()
            .to_string();
        crate::outln!(
            "\n== no agent history on this machine: importing the example sessions bundled with memoir (copied to {examples}) =="
        );
        vec!["import", &examples, "--dir", &dir]
    };
    super::import::run(subcommand_args(&argv)?)?;
    crate::outln!("\n== memoir search {query:?} (every session, hybrid ranking) ==");
    super::search::run(subcommand_args(&[
        "search", query, "-k", "5", "--dir", &dir,
    ])?)?;
    crate::outln!(
        "\ntry: memoir search \"<words>\" | memoir usage --by day,model | memoir sessions list | memoir resume <id>"
    );
    Ok(())
}

fn usage(input: u64, output: u64, cache_read: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_input_tokens: cache_read,
        cache_creation_input_tokens: 0,
        ..Usage::default()
    }
}

/// The demo conversation: a user asks to fix a failing test.
pub fn conversation() -> Vec<Message> {
    vec![
        Message::user("The test `parses_empty_input` fails in src/parser.rs. Can you fix it?"),
        Message::new(
            Role::Assistant,
            vec![
                Block::Thinking { text: "Run the test first to see the failure.".into(), signature: None },
                Block::ToolUse { id: "toolu_01".into(), name: "shell".into(), input: json!({"command": "cargo test parses_empty_input"}) },
            ],
        )
        .with_usage(usage(1850, 64, 0)),
        Message::tool_result(
            "toolu_01",
            "thread 'parses_empty_input' panicked at src/parser.rs:42:18:\ncalled `Option::unwrap()` on a `None` value\ntest result: FAILED. 0 passed; 1 failed",
            true,
        ),
        Message::new(
            Role::Assistant,
            vec![Block::ToolUse { id: "toolu_02".into(), name: "read_file".into(), input: json!({"path": "src/parser.rs", "lines": [38, 46]}) }],
        )
        .with_usage(usage(120, 41, 1850)),
        Message::tool_result("toolu_02", "fn parse(input: &str) -> Ast {\n    let first = input.chars().next().unwrap();\n    ...", false),
        Message::new(
            Role::Assistant,
            vec![
                Block::Text { text: "`parse` unwraps the first character, which panics on empty input. I'll return an empty AST instead.".into() },
                Block::ToolUse { id: "toolu_03".into(), name: "edit_file".into(), input: json!({"path": "src/parser.rs", "old": "let first = input.chars().next().unwrap();", "new": "let Some(first) = input.chars().next() else { return Ast::empty() };"}) },
            ],
        )
        .with_usage(usage(140, 96, 1970)),
        Message::tool_result("toolu_03", "edited src/parser.rs (1 line)", false),
        Message::new(Role::Assistant, vec![Block::ToolUse { id: "toolu_04".into(), name: "shell".into(), input: json!({"command": "cargo test"}) }])
            .with_usage(usage(90, 30, 2110)),
        Message::tool_result("toolu_04", "test result: ok. 27 passed; 0 failed", false),
        Message::assistant("Fixed: `parse` now returns `Ast::empty()` for empty input instead of unwrapping. All 27 tests pass.")
            .with_usage(usage(60, 35, 2200)),
    ]
}

/// Run `memoir demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = args.store.resolve()?.dir;
    let mut meta = SessionMeta::new(Session::new_id());
    meta.provider = "anthropic".into();
    meta.model = "claude-sonnet-4-5".into();
    meta.workspace = std::env::current_dir().unwrap_or_default();
    meta.title = Some("demo: fix parses_empty_input".into());
    meta.kind = Some("demo".into());
    let session = Session::create(&dir, meta)?;
    session.append(&Record::Config(Box::new(RunConfig {
        harness_version: Some(format!("memoir-demo {}", env!("CARGO_PKG_VERSION"))),
        provider: "anthropic".into(),
        model: "claude-sonnet-4-5".into(),
        workspace: session.meta.workspace.clone(),
        system_prompt: Some("You are a careful coding agent.".into()),
        tools: vec!["shell".into(), "read_file".into(), "edit_file".into()],
        max_turns: Some(50),
        permission_mode: Some("ask".into()),
        ..Default::default()
    })))?;
    let messages = conversation();
    // A harness appends as the run goes: the user turn, then each step.
    session.append_messages(&messages[..1])?;
    for step in messages[1..].chunks(2) {
        session.append_messages(step)?;
    }
    let total = messages
        .iter()
        .filter_map(|m| m.usage)
        .fold(Usage::default(), |mut acc, u| {
            acc.add(&u);
            acc
        });
    session.record_summary(total, 5)?;
    session.append(&Record::Taint(Taint {
        private: true,
        untrusted: false,
    }))?;

    let report = Session::verify(&session.path)?;
    let code = if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::PROBLEMS)
    };
    if args.json {
        crate::output::print_json(&json!({
            "id": session.meta.id,
            "path": session.path,
            "clean": report.is_clean(),
            "summary": memoir::store::scan::describe(&report),
        }))?;
        return Ok(code);
    }
    crate::outln!("recorded session {} in {}", session.meta.id, dir.display());
    super::sessions::run(super::sessions::Command::Show {
        id: session.meta.id.clone(),
        store: args.store.clone(),
        json: false,
        around: None,
        context: 3,
    })?;
    crate::outln!("integrity: {}", memoir::store::scan::describe(&report));
    crate::outln!(
        "\ntry: memoir sessions list | memoir sessions usage {id} | memoir sessions verify {id}",
        id = session.meta.id
    );
    if !args.no_import && code == ExitCode::SUCCESS {
        import_and_search(&dir, &args.query)?;
    }
    Ok(code)
}
