//! Importer properties over generated agent history (`memoir-testkit`'s
//! corpus: split streamed responses, parallel tool calls, subagents of each
//! Claude Code era, compaction, rewinds, resumes, `/btw` replays, images,
//! interruptions, Codex's duplicated streams and cumulative token counts),
//! checked against the generator's manifest, never against the importer's
//! own output: every prompt, tool call and tool result is stored exactly
//! once; a call and its result share a session, result after call; only the
//! generator's rewinds make branch sessions; usage per source session is the
//! manifest's; session times are the source's; re-import appends nothing.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::OnceLock;

use chrono::SecondsFormat;
use memoir::import::{self, Agent, ImportReport, Source};
use memoir::manager::{IndexEntry, ManagerOptions, SessionManager};
use memoir::message::Role;
use memoir::store::Durability;
use memoir::transcript::Transcript;
use memoir::usage::{self, GroupKey, PriceTable, UsageQuery};
use memoir_testkit::corpus::{
    generate, home_dir, AgentKind, CorpusSpec, Manifest, SessionKind, Shapes, Tokens,
};

/// Seeds of the corpora every property is checked on (between them they
/// hold every shape: see the first test).
const SEEDS: [u64; 2] = [3, 9];

/// Small corpora (a few hundred KB: debug builds import them in seconds)
/// where every shape is frequent. Resumes have their own test.
fn spec(seed: u64) -> CorpusSpec {
    CorpusSpec {
        seed,
        sessions: 4,
        target_mb: 0.2,
        shapes: Shapes {
            resume: 0.0,
            result_median: 200.0,
            tool_rounds: 1.2,
            ..Shapes::dense()
        },
        max_session_mb: 0.1,
        ..CorpusSpec::default()
    }
}

/// One stored session: its listing entry and its transcript.
struct Stored {
    entry: IndexEntry,
    t: Transcript,
}

impl Stored {
    fn kind(&self) -> Option<&str> {
        self.t
            .meta
            .source
            .as_ref()
            .and_then(|s| s.extra.get("kind"))
            .and_then(|k| k.as_str())
    }

    fn source_session(&self) -> Option<&str> {
        self.t.meta.source.as_ref()?.session.as_deref()
    }

    fn source_path(&self) -> Option<&Path> {
        self.t.meta.source.as_ref()?.path.as_deref()
    }
}

/// A generated corpus, imported into a fresh store, read back.
struct Imported {
    seed: u64,
    manifest: Manifest,
    first: ImportReport,
    again: ImportReport,
    sessions: Vec<Stored>,
    /// Usage report rows: memoir session id → tokens.
    usage: BTreeMap<String, Tokens>,
}

/// The import sources of both agents' homes under `root` (a home the
/// corpus has no session of is absent).
fn sources(root: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    for (agent, kind) in [
        (Agent::ClaudeCode, AgentKind::ClaudeCode),
        (Agent::Codex, AgentKind::Codex),
    ] {
        let home = root.join(home_dir(kind));
        if home.exists() {
            out.extend(import::sources_of(agent, Some(&home)).unwrap());
        }
    }
    out
}

fn manager(dir: &Path) -> SessionManager {
    SessionManager::open(
        &dir.join("store"),
        ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..ManagerOptions::default()
        },
    )
    .unwrap()
}

fn read_back(m: &SessionManager) -> (Vec<Stored>, BTreeMap<String, Tokens>) {
    let sessions = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|entry| {
            let t = m.read_stored(&entry.id).unwrap();
            Stored { entry, t }
        })
        .collect();
    let prices = PriceTable::shipped().unwrap();
    let query = UsageQuery {
        group_by: vec![GroupKey::Session],
        ..UsageQuery::default()
    };
    let report = usage::report(m.store().as_ref(), &query, &prices).unwrap();
    let usage = report
        .rows
        .iter()
        .map(|row| {
            let t = &row.totals;
            (
                row.key()[0].to_string(),
                Tokens {
                    input: t.input_tokens,
                    output: t.output_tokens,
                    cache_read: t.cache_read_tokens,
                    cache_creation: t.cache_write_tokens,
                    reasoning: t.reasoning_tokens,
                    ..Tokens::default()
                },
            )
        })
        .collect();
    (sessions, usage)
}

fn import_corpus(spec: &CorpusSpec) -> Imported {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    let manifest = generate(spec, &root).unwrap();
    let m = manager(tmp.path());
    let sources = sources(&root);
    let first = import::import(&m, &sources, &mut |_| {}).unwrap();
    let again = import::import(&m, &sources, &mut |_| {}).unwrap();
    let (sessions, usage) = read_back(&m);
    Imported {
        seed: spec.seed,
        manifest,
        first,
        again,
        sessions,
        usage,
    }
}

/// The corpora, generated and imported once for all the tests.
fn corpora() -> &'static [Imported] {
    static CORPORA: OnceLock<Vec<Imported>> = OnceLock::new();
    CORPORA.get_or_init(|| {
        std::thread::scope(|scope| {
            let runs: Vec<_> = SEEDS
                .iter()
                .map(|&s| scope.spawn(move || import_corpus(&spec(s))))
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        })
    })
}

fn own(t: &Transcript) -> &[memoir::Message] {
    &t.messages[t.inherited..]
}

/// Occurrences of `wanted` among `found`: those not seen exactly once.
fn not_once<'a>(
    wanted: impl IntoIterator<Item = &'a str>,
    found: &HashMap<&str, usize>,
) -> Vec<(String, usize)> {
    wanted
        .into_iter()
        .filter_map(|w| {
            let n = found.get(w).copied().unwrap_or(0);
            (n != 1).then(|| (w.to_string(), n))
        })
        .collect()
}

#[test]
fn the_corpus_has_every_shape_the_properties_are_about() {
    let mut kinds = BTreeMap::new();
    let (mut rewinds, mut compactions, mut interrupts, mut images) = (0, 0, 0, 0);
    for c in corpora() {
        assert!(
            c.first.errors.is_empty() && c.first.skipped.is_empty(),
            "seed {}: {:?}",
            c.seed,
            c.first.errors
        );
        for s in &c.manifest.sessions {
            *kinds.entry(format!("{:?}", s.kind)).or_insert(0) += 1;
            rewinds += s.rewinds;
            compactions += s.compactions;
            interrupts += s.interrupts;
            images += s.images;
        }
    }
    for k in [
        SessionKind::Main,
        SessionKind::Subagent,
        SessionKind::InlineSidechain,
        SessionKind::Btw,
    ] {
        assert!(
            kinds.contains_key(&format!("{k:?}")),
            "no {k:?} in {kinds:?}"
        );
    }
    assert!(
        rewinds > 0 && compactions > 0 && interrupts > 0 && images > 0,
        "{rewinds} {compactions} {interrupts} {images}"
    );
    let agents: std::collections::BTreeSet<AgentKind> = corpora()
        .iter()
        .flat_map(|c| c.manifest.sessions.iter().map(|s| s.agent))
        .collect();
    assert_eq!(agents.len(), 2, "{agents:?}");
    // Parallel calls: a response (one message.id) with several tool calls.
    let parallel = corpora().iter().any(|c| {
        c.sessions.iter().any(|s| {
            own(&s.t)
                .iter()
                .any(|m| m.role == Role::Assistant && m.tool_use_ids().count() > 1)
        })
    });
    assert!(parallel, "no response with parallel tool calls");
}

#[test]
fn every_prompt_tool_call_and_tool_result_is_stored_exactly_once() {
    for c in corpora() {
        let mut prompts: HashMap<&str, usize> = HashMap::new();
        let mut calls: HashMap<&str, usize> = HashMap::new();
        let mut results: HashMap<&str, usize> = HashMap::new();
        let texts: Vec<(String, &Stored)> = c
            .sessions
            .iter()
            .flat_map(|s| {
                own(&s.t)
                    .iter()
                    .filter(|m| m.role == Role::User)
                    .map(move |m| (m.text_content(), s))
            })
            .collect();
        for (t, _) in &texts {
            *prompts.entry(t.as_str()).or_default() += 1;
        }
        for s in &c.sessions {
            for m in own(&s.t) {
                for id in m.tool_use_ids() {
                    *calls.entry(id).or_default() += 1;
                }
                for id in m.tool_result_ids() {
                    *results.entry(id).or_default() += 1;
                }
            }
        }
        let truths = &c.manifest.sessions;
        let bad_prompts = not_once(
            truths
                .iter()
                .flat_map(|s| s.prompts.iter().map(String::as_str)),
            &prompts,
        );
        let bad_calls = not_once(
            truths
                .iter()
                .flat_map(|s| s.tool_calls.iter().map(String::as_str)),
            &calls,
        );
        let bad_results = not_once(
            truths
                .iter()
                .flat_map(|s| s.tool_results.iter().map(String::as_str)),
            &results,
        );
        assert!(
            bad_prompts.is_empty() && bad_calls.is_empty() && bad_results.is_empty(),
            "seed {}: prompts {bad_prompts:?}\ncalls {bad_calls:?}\nresults {bad_results:?}",
            c.seed
        );
        // And nothing the sources do not hold.
        let all_calls: usize = truths.iter().map(|s| s.tool_calls.len()).sum();
        assert_eq!(calls.values().sum::<usize>(), all_calls, "seed {}", c.seed);
    }
}

#[test]
fn a_call_and_its_result_share_a_session_result_after_call() {
    for c in corpora() {
        for s in &c.sessions {
            let msgs = &s.t.messages;
            let mut call_at: HashMap<&str, usize> = HashMap::new();
            let mut result_at: HashMap<&str, usize> = HashMap::new();
            for (i, m) in msgs.iter().enumerate() {
                for id in m.tool_use_ids() {
                    call_at.insert(id, i);
                }
                for id in m.tool_result_ids() {
                    result_at.insert(id, i);
                }
            }
            for m in own(&s.t) {
                for id in m.tool_use_ids() {
                    let (call, result) = (call_at[id], result_at.get(id));
                    assert!(
                        result.is_some_and(|&r| r > call),
                        "seed {}: session {} has call {id} at {call} without a later result ({result:?})",
                        c.seed,
                        s.entry.id
                    );
                }
                for id in m.tool_result_ids() {
                    let (result, call) = (result_at[id], call_at.get(id));
                    assert!(
                        call.is_some_and(|&k| k < result),
                        "seed {}: session {} has result {id} at {result} without an earlier call ({call:?})",
                        c.seed,
                        s.entry.id
                    );
                }
            }
        }
    }
}

#[test]
fn only_the_sources_rewinds_make_branch_sessions() {
    for c in corpora() {
        let mut branches: BTreeMap<&str, usize> = BTreeMap::new();
        for s in c.sessions.iter().filter(|s| s.kind() == Some("branch")) {
            *branches
                .entry(s.source_session().unwrap_or(""))
                .or_default() += 1;
        }
        let mut expected: BTreeMap<&str, usize> = BTreeMap::new();
        for t in c.manifest.sessions.iter().filter(|t| t.rewinds > 0) {
            *expected.entry(t.session_id.as_str()).or_default() += t.rewinds;
        }
        assert_eq!(
            branches, expected,
            "seed {}: branch sessions per source session",
            c.seed
        );
        // One stored session per source session (main, resumed, subagent,
        // sidechain, /btw) plus one per rewind: no other session appears.
        let want = c.manifest.sessions.len() + expected.values().sum::<usize>();
        assert_eq!(
            c.sessions.len(),
            want,
            "seed {}: {} sessions stored",
            c.seed,
            c.sessions.len()
        );
    }
}

#[test]
fn usage_per_source_session_is_the_manifests() {
    for c in corpora() {
        let mut stored: BTreeMap<String, Tokens> = BTreeMap::new();
        for s in &c.sessions {
            let key = s.source_session().unwrap_or("").to_string();
            let row = c.usage.get(&s.entry.id).copied().unwrap_or_default();
            stored.entry(key).or_default().add(&row);
        }
        let mut want = c.manifest.usage_by_session();
        // The stored side does not split cache writes by lifetime.
        for t in want.values_mut() {
            t.cache_5m = 0;
            t.cache_1h = 0;
        }
        let diff: Vec<_> = want
            .iter()
            .filter(|(k, v)| stored.get(*k) != Some(v))
            .map(|(k, v)| format!("{k}: manifest {v:?}, store {:?}", stored.get(k)))
            .collect();
        assert!(diff.is_empty(), "seed {}:\n{}", c.seed, diff.join("\n"));
    }
}

#[test]
fn session_times_are_the_first_and_last_source_record() {
    let fmt = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
    for c in corpora() {
        for truth in c
            .manifest
            .sessions
            .iter()
            .filter(|t| t.kind != SessionKind::InlineSidechain)
        {
            let s = c
                .sessions
                .iter()
                .find(|s| {
                    s.kind() != Some("branch")
                        && s.source_path().is_some_and(|p| p.ends_with(&truth.path))
                })
                .unwrap_or_else(|| panic!("seed {}: no session from {}", c.seed, truth.path));
            assert_eq!(
                (fmt(s.entry.created_at), fmt(s.entry.last_activity)),
                (truth.first_time.clone(), truth.last_time.clone()),
                "seed {}: {} ({:?}) created / last activity",
                c.seed,
                s.entry.id,
                truth.kind
            );
        }
    }
}

#[test]
fn re_import_of_an_unchanged_corpus_appends_nothing() {
    for c in corpora() {
        assert_eq!(
            (
                c.again.records,
                c.again.messages,
                c.again.sessions.new,
                c.again.files_read
            ),
            (0, 0, 0, 0),
            "seed {}: {:?}",
            c.seed,
            c.again
        );
    }
}

#[test]
fn grown_sources_import_only_their_tails_and_keep_every_item_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    let base = spec(SEEDS[1]);
    let before = generate(&base, &root).unwrap();
    let m = manager(tmp.path());
    let sources = sources(&root);
    import::import(&m, &sources, &mut |_| {}).unwrap();
    let after = generate(&CorpusSpec { grow: 0.2, ..base }, &root).unwrap();
    assert!(after.bytes > before.bytes);
    let sources_after = self::sources(&root);
    let grown = import::import(&m, &sources_after, &mut |_| {}).unwrap();
    assert_eq!(grown.sessions.forked, 0, "{grown:?}");
    let (sessions, _) = read_back(&m);
    let mut calls: HashMap<&str, usize> = HashMap::new();
    for s in &sessions {
        for msg in own(&s.t) {
            for id in msg.tool_use_ids() {
                *calls.entry(id).or_default() += 1;
            }
        }
    }
    let bad = not_once(
        after
            .sessions
            .iter()
            .flat_map(|s| s.tool_calls.iter().map(String::as_str)),
        &calls,
    );
    assert!(bad.is_empty(), "{bad:?}");
}

/// Claude Code sessions resumed into a new file that first repeats the
/// earlier session's lines (same uuids, `message.id`s and `requestId`s).
fn resumed_corpus() -> Imported {
    let spec = CorpusSpec {
        seed: 5,
        sessions: 4,
        target_mb: 0.1,
        agents: vec![AgentKind::ClaudeCode],
        shapes: Shapes {
            resume: 1.0,
            ..Shapes::plain()
        },
        ..CorpusSpec::default()
    };
    let c = import_corpus(&spec);
    assert!(
        c.manifest
            .sessions
            .iter()
            .any(|s| s.kind == SessionKind::Resumed),
        "the corpus has a resumed session"
    );
    c
}

#[test]
fn a_resumed_session_stores_and_counts_what_it_repeats_once() {
    let c = resumed_corpus();
    let mut texts: HashMap<String, usize> = HashMap::new();
    let mut calls: HashMap<&str, usize> = HashMap::new();
    for s in &c.sessions {
        for m in own(&s.t) {
            if m.role == Role::User {
                *texts.entry(m.text_content()).or_default() += 1;
            }
            for id in m.tool_use_ids() {
                *calls.entry(id).or_default() += 1;
            }
        }
    }
    let texts: HashMap<&str, usize> = texts.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let truths = &c.manifest.sessions;
    let bad_prompts = not_once(
        truths
            .iter()
            .flat_map(|s| s.prompts.iter().map(String::as_str)),
        &texts,
    );
    let bad_calls = not_once(
        truths
            .iter()
            .flat_map(|s| s.tool_calls.iter().map(String::as_str)),
        &calls,
    );
    assert!(
        bad_prompts.is_empty() && bad_calls.is_empty(),
        "prompts {bad_prompts:?}\ncalls {bad_calls:?}"
    );
    let mut stored: BTreeMap<String, Tokens> = BTreeMap::new();
    for s in &c.sessions {
        let row = c.usage.get(&s.entry.id).copied().unwrap_or_default();
        stored
            .entry(s.source_session().unwrap_or("").to_string())
            .or_default()
            .add(&row);
    }
    let mut want = c.manifest.usage_by_session();
    for t in want.values_mut() {
        t.cache_5m = 0;
        t.cache_1h = 0;
    }
    assert_eq!(stored, want);
    // Each resumed session continues, by reference, the session it repeats.
    for t in truths.iter().filter(|t| t.kind == SessionKind::Resumed) {
        let s = c
            .sessions
            .iter()
            .find(|s| s.source_session() == Some(t.session_id.as_str()))
            .unwrap_or_else(|| panic!("no session of {}", t.session_id));
        let parent = s.t.meta.parent.as_ref().expect("a fork by reference");
        let from = c
            .sessions
            .iter()
            .find(|p| p.entry.id == parent.session)
            .and_then(|p| p.source_session());
        assert_eq!(from, t.resumed_from.as_deref(), "{}", s.entry.id);
        assert!(s.t.inherited > 0, "{}", s.entry.id);
    }
    assert_eq!(
        (c.again.records, c.again.sessions.new, c.again.files_read),
        (0, 0, 0),
        "{:?}",
        c.again
    );
}

/// An import leaves the listing and the usage summaries current: the first
/// listing after it reads the snapshot and rebuilds nothing, and the first
/// usage refresh finds the store-wide summary current (nothing recomputed,
/// no session file to fold in); the same after the sources grow and are
/// imported again.
#[test]
fn an_import_leaves_the_listing_and_usage_summaries_current() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    let s = spec(SEEDS[0]);
    generate(&s, &root).unwrap();
    let m = manager(tmp.path());
    for round in ["first import", "after growth"] {
        if round == "after growth" {
            let grown = generate(
                &CorpusSpec {
                    grow: 0.05,
                    ..s.clone()
                },
                &root,
            )
            .unwrap();
            assert!(grown.bytes_written > 0);
        }
        let report = import::import(&m, &sources(&root), &mut |_| {}).unwrap();
        assert!(report.records > 0, "{round}: nothing imported");
        let listing = m.list_sessions_report().unwrap();
        assert!(!listing.entries.is_empty());
        assert!(!listing.full_scan, "{round}: the listing scanned the store");
        assert_eq!(listing.rebuilt, 0, "{round}: entries rebuilt");
        let refresh = usage::refresh(m.store().as_ref()).unwrap();
        assert_eq!(refresh.sessions, listing.entries.len(), "{round}");
        assert_eq!(
            (refresh.recomputed, refresh.from_appends),
            (0, 0),
            "{round}: usage summaries not current"
        );
    }
}
