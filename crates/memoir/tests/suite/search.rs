//! The cross-session search index: every filter on a generated
//! 1,000-session store, crash safety under SIGKILL, compaction, rewritten
//! logs, trash and restore, forks, stale indexes.
//!
//! The checks that hold for every engine run on each [`Bed`]: the file
//! store (SQLite FTS5 under its directory) and PostgreSQL without and with
//! pgvector (the index in the store's own tables; skipped with a notice when
//! `.ci/postgres.sh`'s variables are unset), through one `beds!` list.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use chrono::Duration;
use memoir::message::{Message, Role};
use memoir::record::{ForkPoint, Record, SessionMeta};
use memoir::search::{SearchFilter, SearchHit, SearchIndex, SearchMode, SearchQuery};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use support::corpus::{self, KnownAnswer, Spec};

/// The file `name` of the live generation of the index directory
/// `search_dir` (the one its pointer `current` names).
pub fn live_file(search_dir: &Path, name: &str) -> std::path::PathBuf {
    let generation = std::fs::read_to_string(search_dir.join("current")).unwrap();
    search_dir.join(generation.trim()).join(name)
}

fn store(dir: &Path) -> Arc<dyn LogStore> {
    Arc::new(FileStore::new(dir, Durability::None))
}

/// A store to index and how to reach its index.
pub struct Bed {
    /// The store.
    pub store: Arc<dyn LogStore>,
    /// Its temp dir (the file store's sessions) or a throwaway schema.
    keep: Keep,
}

enum Keep {
    Dir(tempfile::TempDir),
    #[cfg(feature = "postgres")]
    Schema(crate::postgres_common::TempSchema),
}

impl Bed {
    /// A file store in a fresh temp dir.
    pub fn file() -> Bed {
        let tmp = tempfile::tempdir().unwrap();
        Bed {
            store: store(tmp.path()),
            keep: Keep::Dir(tmp),
        }
    }

    /// A PostgreSQL store in a fresh schema of the server named by `var`
    /// (`None`: no server configured, skipped with a notice).
    #[cfg(feature = "postgres")]
    pub fn postgres(var: &str) -> Option<Bed> {
        use memoir::store::postgres::{PgOptions, PgStore, VectorMode};
        let url = crate::postgres_common::pg_url(var)?;
        let schema = crate::postgres_common::TempSchema::new(&url);
        let options = PgOptions {
            durability: Durability::None,
            ..schema.options(VectorMode::Auto)
        };
        let pg = PgStore::connect(&url, options).expect("connect to PostgreSQL");
        Some(Bed {
            store: Arc::new(pg),
            keep: Keep::Schema(schema),
        })
    }

    /// The store's index, wherever its engine keeps it.
    pub fn index(&self) -> SearchIndex {
        SearchIndex::for_store(self.store.clone()).unwrap()
    }

    /// Make the index look written by another memoir: another layout
    /// version (SQLite) or another tokenizer (PostgreSQL).
    fn stamp_as_another_memoir(&self) {
        match &self.keep {
            Keep::Dir(tmp) => {
                let db = memoir::search::index_path(tmp.path()).unwrap();
                let conn = rusqlite::Connection::open(db).unwrap();
                conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema'", [])
                    .unwrap();
            }
            #[cfg(feature = "postgres")]
            Keep::Schema(schema) => {
                let n = schema
                    .client()
                    .execute(
                        "UPDATE memoir_search_meta SET value = 'an-older-tokenizer' \
                         WHERE key = 'tokenizer'",
                        &[],
                    )
                    .unwrap();
                assert_eq!(n, 1);
            }
        }
    }

    /// On PostgreSQL, check the stored document frequency of `term` (the
    /// SQLite engine reads FTS5's own, which cannot drift).
    fn assert_doc_frequency(&self, term: &str, docs: i64) {
        #[cfg(feature = "postgres")]
        if let Keep::Schema(schema) = &self.keep {
            let got: i64 = schema
                .client()
                .query_opt(
                    "SELECT docs FROM memoir_search_terms WHERE term = $1",
                    &[&term],
                )
                .unwrap()
                .map_or(0, |r| r.get(0));
            assert_eq!(got, docs, "document frequency of {term:?}");
        }
        let _ = (term, docs);
    }

    /// Whether the store keeps vectors in pgvector's type.
    fn is_pgvector(&self) -> bool {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.store.postgres() {
            return pg.vector_backend() == memoir::store::postgres::VectorBackend::PgVector;
        }
        false
    }

    /// Drop the HNSW index of the search vectors (pgvector only); whether
    /// there was one.
    fn drop_search_hnsw(&self) -> bool {
        #[cfg(feature = "postgres")]
        if let Keep::Schema(schema) = &self.keep {
            let mut c = schema.client();
            let names: Vec<String> = c
                .query(
                    "SELECT indexname::text FROM pg_indexes WHERE schemaname = $1 \
                     AND indexname LIKE 'memoir_search_vectors_hnsw_%'",
                    &[&schema.name],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            for n in &names {
                c.batch_execute(&format!("DROP INDEX \"{n}\"")).unwrap();
            }
            return !names.is_empty();
        }
        false
    }

    /// Replace session `id` behind the index's back: same id, new content
    /// (what a repair or an external rewrite leaves behind).
    fn replace(&self, id: &str, meta: &SessionMeta) {
        let file = self.store.location(id);
        if file.is_file() {
            std::fs::remove_file(file).unwrap();
        } else {
            self.store.delete(id).unwrap();
            self.store.purge(id).unwrap();
        }
        self.store.create(meta).unwrap();
    }
}

/// One test per bed for each check (`fn check(&Bed)`).
macro_rules! beds {
    ($($name:ident),* $(,)?) => {
        mod file {
            $(#[test] fn $name() { super::$name(&super::Bed::file()); })*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(#[test] fn $name() {
                if let Some(bed) = super::Bed::postgres(crate::postgres_common::POSTGRES_URL) {
                    super::$name(&bed);
                }
            })*
        }
        #[cfg(feature = "postgres")]
        mod pgvector {
            $(#[test] fn $name() {
                if let Some(bed) = super::Bed::postgres(crate::postgres_common::PGVECTOR_URL) {
                    super::$name(&bed);
                }
            })*
        }
    };
}

beds!(
    scores_within_a_session_prefix_never_move_when_another_prefix_grows,
    every_filter_finds_the_known_message_in_a_1000_session_store,
    a_compaction_indexes_the_summary_and_compacted_turns_stay_findable,
    a_rewritten_log_is_reindexed_from_scratch,
    deleting_a_session_hides_it_and_restoring_brings_it_back,
    a_fork_indexes_only_its_own_messages_and_appends_are_cheap_to_catch_up,
    an_index_stamped_by_another_memoir_is_rebuilt_never_trusted,
    rare_words_answer_fast_but_never_hide_better_or_further_common_matches,
    hybrid_reads_a_bounded_pool_yet_finds_an_old_rare_match_first,
    the_whole_error_text_ranks_above_a_message_holding_one_of_its_words,
    a_command_ranks_above_messages_sharing_one_word_with_it,
    no_hit_without_evidence_and_no_zero_score,
    identifiers_are_found_whole_and_by_their_parts,
    equal_scores_list_the_newest_message_first,
    the_evaluation_reports_every_category_and_mode,
);

fn query(text: &str, mode: SearchMode, filter: SearchFilter) -> SearchQuery {
    SearchQuery {
        text: text.to_string(),
        k: 10,
        mode,
        filter,
    }
}

fn found(hits: &[SearchHit], a: &KnownAnswer) -> bool {
    hits.iter()
        .any(|h| h.session == a.session && h.seq == a.seq)
}

fn first_is(hits: &[SearchHit], session: &str, seq: u64) -> bool {
    hits.first()
        .is_some_and(|h| h.session == session && h.seq == seq)
}

fn every_filter_finds_the_known_message_in_a_1000_session_store(bed: &Bed) {
    let spec = Spec {
        sessions: 1000,
        messages_per_session: 8,
        answer_every: 25,
        seed: 7,
        extra_result_lines: 0,
    };
    let answers = corpus::generate_into(bed.store.as_ref(), &spec);
    assert_eq!(answers.len(), 40);
    let mut ix = bed.index();
    let report = ix.update().unwrap();
    assert_eq!((report.sessions, report.reindexed), (1000, 1000));
    assert_eq!(report.messages, 8000);
    for a in &answers {
        let tool_filter = SearchFilter {
            tool: a.tool.clone(),
            ..Default::default()
        };
        let filters = [
            SearchFilter::default(),
            SearchFilter {
                project: Some(a.project.clone()),
                ..Default::default()
            },
            SearchFilter {
                agent: Some(a.agent.clone()),
                ..Default::default()
            },
            SearchFilter {
                session: Some(a.session[..5].to_string()),
                ..Default::default()
            },
            SearchFilter {
                since: Some(a.time),
                until: Some(a.time + Duration::seconds(1)),
                ..Default::default()
            },
            SearchFilter {
                role: Some(a.role),
                ..Default::default()
            },
            tool_filter,
            SearchFilter {
                project: Some(a.project.clone()),
                agent: Some(a.agent.clone()),
                session: Some(a.session.clone()),
                since: Some(a.time - Duration::hours(1)),
                until: Some(a.time + Duration::hours(1)),
                role: Some(a.role),
                tool: a.tool.clone(),
            },
        ];
        for (n, f) in filters.iter().enumerate() {
            for mode in [SearchMode::Lexical, SearchMode::Hybrid] {
                let hits = ix.search(&query(&a.query, mode, f.clone())).unwrap();
                assert!(
                    first_is(&hits, &a.session, a.seq),
                    "filter #{n} {f:?} {mode:?}: {a:?} -> {:?}",
                    hits.first()
                );
                let h = &hits[0];
                assert_eq!(h.project, a.project);
                assert_eq!(h.agent, a.agent);
                assert_eq!(h.role, a.role);
                assert_eq!(h.time, a.time);
                assert!(
                    h.snippet
                        .marked("[[", "]]")
                        .contains("[[migration]] was never applied"),
                    "{:?}",
                    h.snippet
                );
                if let Some(t) = &a.tool {
                    assert!(h.tools.contains(t), "{h:?}");
                }
            }
        }
        // Each filter also excludes: the answer is not found where it is not.
        let other_project = format!("/home/dev/proj-{:02}", (a.seq as usize + 1) % 20);
        let excluding = [
            SearchFilter {
                project: Some(if other_project == a.project {
                    "/elsewhere".into()
                } else {
                    other_project
                }),
                ..Default::default()
            },
            SearchFilter {
                agent: Some(
                    if a.agent == "codex" {
                        "memoir"
                    } else {
                        "codex"
                    }
                    .into(),
                ),
                ..Default::default()
            },
            SearchFilter {
                session: Some("s9".into()),
                ..Default::default()
            },
            SearchFilter {
                since: Some(a.time + Duration::seconds(1)),
                ..Default::default()
            },
            SearchFilter {
                until: Some(a.time),
                ..Default::default()
            },
            SearchFilter {
                role: Some(if a.role == Role::User {
                    Role::Tool
                } else {
                    Role::User
                }),
                ..Default::default()
            },
            SearchFilter {
                tool: Some("NoSuchTool".into()),
                ..Default::default()
            },
        ];
        for f in excluding {
            let hits = ix
                .search(&query(&a.query, SearchMode::Lexical, f.clone()))
                .unwrap();
            assert!(!found(&hits, a), "{f:?} should exclude {a:?}");
        }
    }
    // The project filter is a path prefix, not a string prefix.
    let hits = ix
        .search(&query(
            &answers[0].query,
            SearchMode::Lexical,
            SearchFilter {
                project: Some("/home/dev/proj-0".into()),
                ..Default::default()
            },
        ))
        .unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    // Semantic mode scans everything and still ranks the planted text first.
    let a = &answers[3];
    let semantic = query(
        "handler fails because the migration was never applied",
        SearchMode::Semantic,
        SearchFilter {
            session: Some(a.session.clone()),
            ..Default::default()
        },
    );
    let hits = ix.search(&semantic).unwrap();
    assert!(first_is(&hits, &a.session, a.seq), "{:?}", hits.first());
    // With stored vectors (pgvector ranks them in SQL), the same answer.
    let stored = ix.embed_missing(512, &mut |_, _| {}).unwrap();
    assert!(stored > 0 && stored <= 8000, "{stored}");
    assert_eq!(ix.stats().unwrap().vectors, stored);
    let hits = ix.search(&semantic).unwrap();
    assert!(first_is(&hits, &a.session, a.seq), "{:?}", hits.first());
    // Unfiltered: on pgvector this goes through the HNSW index.
    let hits = ix
        .search(&query(
            "handler fails because the migration was never applied",
            SearchMode::Semantic,
            SearchFilter::default(),
        ))
        .unwrap();
    assert_eq!(hits.len(), 10);
    assert!(
        hits.iter()
            .any(|h| answers.iter().any(|x| found(std::slice::from_ref(h), x))),
        "{hits:?}"
    );
    let had_index = bed.drop_search_hnsw();
    assert_eq!(
        had_index,
        bed.is_pgvector(),
        "embed_missing builds the index on pgvector"
    );
    if had_index {
        // The index existed (embed_missing built it); without it the exact
        // ranking answers, and the approximate one agreed with it.
        let exact = ix
            .search(&query(
                "handler fails because the migration was never applied",
                SearchMode::Semantic,
                SearchFilter::default(),
            ))
            .unwrap();
        let key = |h: &SearchHit| (h.session.clone(), h.seq);
        assert_eq!(key(&hits[0]), key(&exact[0]), "{hits:?} vs {exact:?}");
        let same = hits
            .iter()
            .filter(|h| exact.iter().any(|e| key(e) == key(h)))
            .count();
        assert!(same >= 8, "{hits:?} vs {exact:?}");
    }
    // An unchanged store costs no reading.
    let again = ix.update().unwrap();
    assert_eq!((again.unchanged, again.messages), (1000, 0));
}

fn append(store: &dyn LogStore, id: &str, records: Vec<Record>) {
    store.append(id, &records, None).unwrap();
}

fn texts(ix: &SearchIndex, q: &str) -> Vec<(String, u64)> {
    ix.search(&query(q, SearchMode::Lexical, SearchFilter::default()))
        .unwrap()
        .into_iter()
        .map(|h| (h.session, h.seq))
        .collect()
}

fn a_compaction_indexes_the_summary_and_compacted_turns_stay_findable(bed: &Bed) {
    let st = bed.store.clone();
    st.create(&SessionMeta::new("comp")).unwrap();
    append(
        st.as_ref(),
        "comp",
        vec![
            Record::Message(Message::user("the quokka colony needs counting")),
            Record::Message(Message::assistant("counted seven quokkas")),
        ],
    );
    let mut ix = bed.index();
    ix.update().unwrap();
    append(
        st.as_ref(),
        "comp",
        vec![Record::Rewrite {
            messages: vec![
                Message::user("the quokka colony needs counting"),
                Message::assistant("summary: a marsupial census happened"),
            ],
        }],
    );
    let r = ix.update().unwrap();
    assert_eq!((r.extended, r.reindexed, r.messages), (1, 0, 1), "{r:?}");
    assert_eq!(texts(&ix, "marsupial census"), vec![("comp".into(), 3)]);
    // Dropped by the compaction, still findable at its own seq.
    assert_eq!(texts(&ix, "seven"), vec![("comp".into(), 2)]);
    // Kept by the compaction: indexed once, at its original seq.
    assert_eq!(texts(&ix, "colony"), vec![("comp".into(), 1)]);
}

fn a_rewritten_log_is_reindexed_from_scratch(bed: &Bed) {
    let st = bed.store.clone();
    st.create(&SessionMeta::new("rw")).unwrap();
    append(
        st.as_ref(),
        "rw",
        vec![
            Record::Message(Message::user("original axolotl text")),
            Record::Message(Message::user("second axolotl line")),
        ],
    );
    let mut ix = bed.index();
    ix.update().unwrap();
    assert_eq!(texts(&ix, "axolotl").len(), 2);
    // Replace the log: same id, different content.
    bed.replace("rw", &SessionMeta::new("rw"));
    append(
        st.as_ref(),
        "rw",
        vec![
            Record::Message(Message::user("replacement pangolin text")),
            Record::Message(Message::user("second pangolin line")),
            Record::Message(Message::user("third pangolin line")),
        ],
    );
    let r = ix.update().unwrap();
    assert_eq!((r.reindexed, r.extended), (1, 0), "{r:?}");
    assert!(texts(&ix, "axolotl").is_empty());
    assert_eq!(texts(&ix, "pangolin").len(), 3);
    assert_eq!(ix.stats().unwrap().messages, 3);
    // BM25's document frequencies follow (PostgreSQL keeps them in a table).
    bed.assert_doc_frequency("axolotl", 0);
    bed.assert_doc_frequency("pangolin", 3);
}

fn deleting_a_session_hides_it_and_restoring_brings_it_back(bed: &Bed) {
    let st = bed.store.clone();
    for id in ["keep", "gone"] {
        st.create(&SessionMeta::new(id)).unwrap();
        append(
            st.as_ref(),
            id,
            vec![Record::Message(Message::user(format!(
                "narwhal note from {id}"
            )))],
        );
    }
    let mut ix = bed.index();
    ix.update().unwrap();
    assert_eq!(texts(&ix, "narwhal").len(), 2);
    st.delete("gone").unwrap();
    let r = ix.update().unwrap();
    assert_eq!(r.removed, 1);
    assert_eq!(texts(&ix, "narwhal"), vec![("keep".into(), 1)]);
    bed.assert_doc_frequency("narwhal", 1);
    st.restore("gone").unwrap();
    let r = ix.update().unwrap();
    assert_eq!(r.reindexed, 1);
    assert_eq!(texts(&ix, "narwhal").len(), 2);
    // The per-session hook sees a deletion too.
    st.delete("keep").unwrap();
    assert_eq!(ix.note_append("keep").unwrap().removed, 1);
    assert_eq!(texts(&ix, "narwhal"), vec![("gone".into(), 1)]);
}

fn a_fork_indexes_only_its_own_messages_and_appends_are_cheap_to_catch_up(bed: &Bed) {
    let st = bed.store.clone();
    st.create(&SessionMeta::new("parent")).unwrap();
    append(
        st.as_ref(),
        "parent",
        vec![
            Record::Message(Message::user("inherited okapi question")),
            Record::Message(Message::assistant("inherited okapi answer")),
        ],
    );
    let mut fork = SessionMeta::new("child");
    fork.parent = Some(ForkPoint {
        session: "parent".into(),
        seq: 2,
        messages: 2,
        parent_created_at: None,
    });
    st.create(&fork).unwrap();
    append(
        st.as_ref(),
        "child",
        vec![Record::Message(Message::user(
            "the fork's own okapi follow-up",
        ))],
    );
    let mut ix = bed.index();
    ix.update().unwrap();
    let mut hits = texts(&ix, "okapi");
    hits.sort();
    assert_eq!(
        hits,
        vec![
            ("child".into(), 1),
            ("parent".into(), 1),
            ("parent".into(), 2)
        ]
    );
    // A compaction in the fork repeats the inherited messages: still not the fork's.
    append(
        st.as_ref(),
        "child",
        vec![Record::Rewrite {
            messages: vec![
                Message::user("inherited okapi question"),
                Message::assistant("compacted okapi summary"),
            ],
        }],
    );
    let r = ix.note_append("child").unwrap();
    assert_eq!((r.extended, r.messages), (1, 1), "{r:?}");
    let mut hits = texts(&ix, "okapi");
    hits.sort();
    assert_eq!(hits.len(), 4, "{hits:?}");
    assert_eq!(texts(&ix, "question"), vec![("parent".into(), 1)]);
}

fn an_index_stamped_by_another_memoir_is_rebuilt_never_trusted(bed: &Bed) {
    let st = bed.store.clone();
    st.create(&SessionMeta::new("one")).unwrap();
    append(
        st.as_ref(),
        "one",
        vec![Record::Message(Message::user("wombat burrow"))],
    );
    {
        let mut ix = bed.index();
        assert!(ix.update().unwrap().rebuilt, "a missing index is built");
        assert_eq!(texts(&ix, "wombat").len(), 1);
    }
    // A current index is trusted as it is.
    let ix = bed.index();
    assert!(!ix.rebuilt_on_open());
    assert_eq!(texts(&ix, "wombat").len(), 1);
    drop(ix);
    bed.stamp_as_another_memoir();
    let mut ix = bed.index();
    assert!(ix.rebuilt_on_open());
    assert!(texts(&ix, "wombat").is_empty(), "nothing is trusted");
    ix.update().unwrap();
    assert_eq!(texts(&ix, "wombat").len(), 1);
}

#[test]
fn a_corrupt_index_file_is_rebuilt_never_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    st.create(&SessionMeta::new("one")).unwrap();
    append(
        st.as_ref(),
        "one",
        vec![Record::Message(Message::user("wombat burrow"))],
    );
    let dir = tmp.path().join("search");
    {
        let mut ix = SearchIndex::open_store(st.clone(), &dir).unwrap();
        ix.update().unwrap();
        assert_eq!(texts(&ix, "wombat").len(), 1);
    }
    // Garbage where the database was.
    let file = live_file(&dir, memoir::search::INDEX_FILE);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    std::fs::write(&file, b"not a database at all, really").unwrap();
    let mut ix = SearchIndex::open_store(st.clone(), &dir).unwrap();
    assert!(ix.rebuilt_on_open());
    assert!(ix.update().unwrap().rebuilt);
    assert_eq!(texts(&ix, "wombat").len(), 1);
}

const EVERY_MODE: [SearchMode; 3] = [
    SearchMode::Lexical,
    SearchMode::Semantic,
    SearchMode::Hybrid,
];

/// How many documents of the index in `dir` keep their text inline, and
/// how many by span.
fn inline_and_spanned(dir: &Path) -> (i64, i64) {
    rusqlite::Connection::open(live_file(dir, memoir::search::INDEX_FILE))
        .unwrap()
        .query_row("SELECT count(text), count(span_at) FROM docs", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
}

/// Schema 4: the index keeps no copy of a `message` record's text, only
/// where the record lies in its log; hits and snippets in every mode read
/// it back (a `rewrite`'s messages stay inline). A log replaced under the
/// index, before the next update, never lends its text to a stale hit:
/// the record now at the span has the same `seq` and length but another
/// text, and the hit is left out until the update re-indexes the session.
#[test]
fn texts_are_read_back_from_the_log_and_a_stale_span_shows_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    let mut meta = SessionMeta::new("sp");
    meta.created_at = corpus::base_time();
    let write = |tusk: &str| {
        st.create(&meta).unwrap();
        append(
            st.as_ref(),
            "sp",
            vec![
                Record::Message(Message::user(format!("the {tusk} tusk is a tooth"))),
                Record::Message(Message::assistant("spiral teeth grow long")),
                Record::Rewrite {
                    messages: vec![Message::assistant(format!("summary: a {tusk} census"))],
                },
            ],
        );
    };
    write("narwhal");
    let mut ix = SearchIndex::open(tmp.path()).unwrap();
    ix.update().unwrap();
    assert_eq!(
        inline_and_spanned(&tmp.path().join("search")),
        (1, 2),
        "only the rewrite's text is stored"
    );
    for mode in EVERY_MODE {
        let hits = ix
            .search(&query("narwhal tusk", mode, SearchFilter::default()))
            .unwrap();
        assert_eq!(
            (hits[0].session.as_str(), hits[0].seq),
            ("sp", 1),
            "{mode:?}"
        );
        assert_eq!(
            hits[0].snippet.text, "the narwhal tusk is a tooth",
            "{mode:?}"
        );
    }
    let census = ix
        .search(&query(
            "census",
            SearchMode::Lexical,
            SearchFilter::default(),
        ))
        .unwrap();
    assert_eq!(census[0].snippet.text, "summary: a narwhal census");
    // The same log, but "dugongs" where "narwhal" was: every line keeps its
    // offset, length and seq.
    std::fs::remove_file(st.location("sp")).unwrap();
    write("dugongs");
    for mode in EVERY_MODE {
        let hits = ix
            .search(&query("narwhal", mode, SearchFilter::default()))
            .unwrap();
        assert!(
            hits.iter().all(|h| !(h.session == "sp" && h.seq == 1)),
            "{mode:?}: a stale span lent its text: {hits:?}"
        );
    }
    ix.update().unwrap();
    assert!(texts(&ix, "narwhal").is_empty());
    let hits = ix
        .search(&query(
            "dugongs",
            SearchMode::Hybrid,
            SearchFilter::default(),
        ))
        .unwrap();
    assert_eq!(hits[0].snippet.text, "the dugongs tusk is a tooth");
}

/// The FTS5 vocabulary holds exactly the view tokenizer's terms, in every
/// script: document frequencies (BM25's weights, the rare-term path) are
/// looked up by those terms. `unicode61` split words at combining marks
/// (Devanagari vowel signs, the dot `İ` lowercases to) and at letters it
/// does not class as letters (circled ⓐ), so such a word had no frequency.
#[test]
fn the_index_vocabulary_is_the_tokenizers_terms_in_every_script() {
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    let text = "नमस्ते दुनिया İstanbul ⓐⓑ straße ΣΊΣΥΦΟΣ 東京 naïve Running TESTS x86_64";
    let mut meta = SessionMeta::new("vocab");
    meta.created_at = corpus::base_time();
    st.create(&meta).unwrap();
    append(
        st.as_ref(),
        "vocab",
        vec![
            Record::Message(Message::user(text)),
            Record::Message(Message::assistant("an unrelated reply")),
        ],
    );
    let mut ix = SearchIndex::open(tmp.path()).unwrap();
    ix.update().unwrap();
    let terms = rusqlite::Connection::open(live_file(
        &tmp.path().join(memoir::search::INDEX_DIR),
        memoir::search::TERMS_FILE,
    ))
    .unwrap();
    let mut vocab: Vec<String> = terms
        .prepare("SELECT term FROM terms_vocab")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    vocab.sort();
    // The index's tokenizer: code-aware terms (`x86_64` → `x86`, `64`, `x8664`).
    let tk = memoir::view::lexical::Tokenizer::new(memoir::view::lexical::TokenizerConfig::code());
    let mut expected = tk.tokens(text);
    expected.extend(tk.tokens("an unrelated reply"));
    expected.sort();
    expected.dedup();
    assert_eq!(vocab, expected);
    for word in ["नमस्ते", "İstanbul", "ⓐⓑ"] {
        let hits = ix
            .search(&query(word, SearchMode::Lexical, SearchFilter::default()))
            .unwrap();
        assert_eq!((hits.len(), hits[0].seq), (1, 1), "{word}");
        assert!(hits[0].score > 0.0, "{word}: {hits:?}");
    }
}

/// A store whose `read` gives spans but whose `read_span` reads none back
/// (a wrapper that forwards only `read`): the index checks a span per
/// session when it indexes it and keeps the texts inline instead, so
/// nothing indexed becomes unreadable.
#[test]
fn a_store_that_cannot_read_its_spans_back_gets_inline_texts() {
    let tmp = tempfile::tempdir().unwrap();
    let flaky = Arc::new(crate::support::flaky_store::FlakyStore::new(
        tmp.path(),
        false,
    ));
    flaky.create(&SessionMeta::new("w")).unwrap();
    append(
        flaky.as_ref(),
        "w",
        vec![
            Record::Message(Message::user("a wrapped okapi")),
            Record::Message(Message::user("a second okapi")),
        ],
    );
    assert_eq!(
        flaky.store.read("w").unwrap().spans.len(),
        2,
        "the inner store has spans"
    );
    let mut ix = SearchIndex::open_store(flaky.clone(), &tmp.path().join("search")).unwrap();
    ix.update().unwrap();
    assert_eq!(inline_and_spanned(&tmp.path().join("search")), (2, 0));
    assert_eq!(texts(&ix, "okapi").len(), 2);
}

/// The index's two files commit a batch one after the other, the terms
/// file first, each with its batch counter: a crash between the two
/// commits leaves the terms file one batch ahead (here: a stray document
/// the index file never got). Such an index is never trusted: a live one
/// is emptied and filled again by its next update, and one found so on
/// open is replaced; either way the results are complete and the stray
/// terms gone.
#[test]
fn a_terms_file_a_batch_ahead_is_emptied_and_filled_again() {
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    for (id, word) in [("a", "gecko"), ("b", "iguana")] {
        st.create(&SessionMeta::new(id)).unwrap();
        append(
            st.as_ref(),
            id,
            vec![Record::Message(Message::user(format!("a {word} basks")))],
        );
    }
    let terms_file = || live_file(&tmp.path().join("search"), memoir::search::TERMS_FILE);
    let run_ahead = || {
        let c = rusqlite::Connection::open(terms_file()).unwrap();
        memoir::search::fts5_tokenizer::register(&c).unwrap();
        c.execute_batch(
            "BEGIN; INSERT INTO terms(rowid, body) VALUES (999999, 'stray'); \
             UPDATE meta SET value = value + 1 WHERE key = 'batch'; COMMIT;",
        )
        .unwrap();
    };
    let stray_docs = || -> i64 {
        let c = rusqlite::Connection::open(terms_file()).unwrap();
        c.query_row(
            "SELECT count(*) FROM terms_vocab WHERE term = 'stray'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let mut ix = SearchIndex::open(tmp.path()).unwrap();
    ix.update().unwrap();
    ix.update().unwrap();
    // A live index: the next update that writes finds the counters apart.
    run_ahead();
    assert_eq!(stray_docs(), 1);
    append(
        st.as_ref(),
        "a",
        vec![Record::Message(Message::user("the gecko sheds"))],
    );
    let r = ix.update().unwrap();
    assert!(r.rebuilt, "{r:?}");
    assert_eq!(stray_docs(), 0);
    assert_eq!(texts(&ix, "gecko").len(), 2);
    assert_eq!(texts(&ix, "iguana"), vec![("b".into(), 1)]);
    drop(ix);
    // Found so on open: replaced.
    run_ahead();
    let mut ix = SearchIndex::open(tmp.path()).unwrap();
    assert!(ix.rebuilt_on_open());
    ix.update().unwrap();
    assert_eq!(stray_docs(), 0);
    assert_eq!(texts(&ix, "gecko").len(), 2);
    assert_eq!(texts(&ix, "iguana").len(), 1);
}

/// The child half of the SIGKILL test: index the store named by the
/// environment, forever (the parent kills it).
#[test]
fn child_index_until_killed() {
    let Ok(dir) = std::env::var("MEMOIR_SEARCH_KILL_DIR") else {
        return;
    };
    // Batches of 20,000: the 80,000 messages need four commits.
    let mut ix = SearchIndex::open(Path::new(&dir))
        .unwrap()
        .with_batch_docs(20_000);
    ix.update().unwrap();
    // Finished before the kill: tell the parent.
    std::fs::write(Path::new(&dir).join("finished"), b"1").unwrap();
}

#[test]
fn the_index_survives_sigkill_mid_update_and_catches_up() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = Spec {
        sessions: 800,
        messages_per_session: 100,
        answer_every: 8,
        seed: 11,
        extra_result_lines: 0,
    };
    let answers = corpus::generate(tmp.path(), &spec);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "search::child_index_until_killed", "--nocapture"])
        .env("MEMOIR_SEARCH_KILL_DIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first committed batch, then SIGKILL.
    let start = std::time::Instant::now();
    let db = loop {
        if let Some(db) = memoir::search::index_path(tmp.path()) {
            break db;
        }
        assert!(start.elapsed().as_secs() < 120, "no index was created");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let committed = |db: &Path| -> i64 {
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| c.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0)))
            .unwrap_or(0)
    };
    let start = std::time::Instant::now();
    while committed(&db) == 0 {
        assert!(start.elapsed().as_secs() < 120, "indexing never committed");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the indexing child died"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !tmp.path().join("finished").exists(),
        "the child finished before the kill; the test proves nothing"
    );
    let partial = committed(&db);
    assert!(partial > 0 && partial < 800, "{partial}");
    // The first fill runs with a rollback journal (SQLite file format
    // bytes 18-19: 1 = rollback, 2 = WAL); the catch-up below ends in WAL.
    let format = |db: &Path| {
        use std::io::Read;
        let mut header = [0u8; 20];
        std::fs::File::open(db)
            .unwrap()
            .read_exact(&mut header)
            .unwrap();
        header[18..20].to_vec()
    };
    assert_eq!(format(&db), [1, 1], "killed while filling a new index");
    let mut ix = SearchIndex::open(tmp.path()).unwrap();
    assert!(
        !ix.rebuilt_on_open(),
        "a killed update leaves a usable index"
    );
    let r = ix.update().unwrap();
    assert!(r.extended + r.reindexed > 0, "{r:?}");
    let stats = ix.stats().unwrap();
    assert_eq!(stats.sessions, 800);
    assert_eq!(stats.messages, 80_000, "every message exactly once");
    assert_eq!(format(&db), [2, 2], "a filled index is in WAL mode");
    for a in &answers {
        let hits = ix
            .search(&query(
                &a.query,
                SearchMode::Lexical,
                SearchFilter::default(),
            ))
            .unwrap();
        assert!(first_is(&hits, &a.session, a.seq), "{a:?}");
    }
}

fn rare_words_answer_fast_but_never_hide_better_or_further_common_matches(bed: &Bed) {
    let st = bed.store.clone();
    st.create(&SessionMeta::new("mix")).unwrap();
    let mut records = vec![Record::Message(Message::user("the quetzal saw one lemur"))];
    // More documents than the rare-term path reads (2,000): "lemur" is common.
    for i in 0..2100 {
        records.push(Record::Message(Message::user(format!(
            "lemur note {i} lemur lemur"
        ))));
    }
    append(st.as_ref(), "mix", records);
    let mut ix = bed.index();
    ix.update().unwrap();
    let q = |text: &str, k: usize| {
        ix.search(&SearchQuery {
            text: text.into(),
            k,
            mode: SearchMode::Lexical,
            filter: SearchFilter::default(),
        })
        .unwrap()
    };
    // One rare word and one common one: the rare document ranks first, and
    // the common word's documents still fill the rest of the list.
    let hits = q("quetzal lemur", 5);
    assert_eq!(hits.len(), 5, "{hits:?}");
    assert_eq!(hits[0].seq, 1);
    // Only rare words: every match is found.
    assert_eq!(q("quetzal", 5).len(), 1);
}

fn hybrid_reads_a_bounded_pool_yet_finds_an_old_rare_match_first(bed: &Bed) {
    let st = bed.store.clone();
    st.create(&SessionMeta::new("old")).unwrap();
    append(
        st.as_ref(),
        "old",
        vec![Record::Message(Message::user(
            "the quetzal handler broke the lemur migration",
        ))],
    );
    let mut ix = bed.index();
    ix.update().unwrap();
    // Far more newer documents holding the common words than the hybrid
    // side's pool (depth 100): "newest matches" alone would miss the old one.
    st.create(&SessionMeta::new("new")).unwrap();
    let records: Vec<Record> = (0..2500)
        .map(|i| Record::Message(Message::user(format!("lemur migration handler note {i}"))))
        .collect();
    append(st.as_ref(), "new", records);
    ix.update().unwrap();
    for mode in [SearchMode::Hybrid, SearchMode::Lexical] {
        let hits = ix
            .search(&query(
                "quetzal lemur migration",
                mode,
                SearchFilter::default(),
            ))
            .unwrap();
        assert_eq!(hits.len(), 10, "{mode:?}");
        assert!(first_is(&hits, "old", 1), "{mode:?}: {hits:?}");
    }
    // Only common words: hybrid still fills the list (from the newest matches).
    let hits = ix
        .search(&query(
            "lemur migration",
            SearchMode::Hybrid,
            SearchFilter::default(),
        ))
        .unwrap();
    assert_eq!(hits.len(), 10);
    // A phrase with a rare word: the rare document is in the pool too.
    let hits = ix
        .search(&query(
            "\"lemur migration\" quetzal",
            SearchMode::Hybrid,
            SearchFilter::default(),
        ))
        .unwrap();
    assert!(first_is(&hits, "old", 1), "{hits:?}");
}

/// Two indexes over one store updating at the same time (two servers, or a
/// server and `memoir index`): every message is indexed exactly once,
/// whoever wins each session; then both note the same appends at once.
fn two_indexers_at_once_index_every_message_exactly_once(bed: &Bed) {
    let spec = Spec {
        sessions: 120,
        messages_per_session: 20,
        answer_every: 10,
        seed: 5,
        extra_result_lines: 0,
    };
    let answers = corpus::generate_into(bed.store.as_ref(), &spec);
    let mut first = bed.index();
    let mut second = bed.index();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| first.update().unwrap());
        let b = s.spawn(|| second.update().unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.messages + b.messages, 2400, "{a:?} {b:?}");
    assert_eq!(a.reindexed + b.reindexed, 120, "{a:?} {b:?}");
    let stats = first.stats().unwrap();
    assert_eq!((stats.sessions, stats.messages), (120, 2400));
    for ans in &answers {
        let hits = first
            .search(&query(
                &ans.query,
                SearchMode::Lexical,
                SearchFilter::default(),
            ))
            .unwrap();
        assert!(first_is(&hits, &ans.session, ans.seq), "{ans:?}");
        let same = hits
            .iter()
            .filter(|h| h.session == ans.session && h.seq == ans.seq)
            .count();
        assert_eq!(same, 1, "indexed twice: {hits:?}");
    }
    // New sessions, each noted by both indexes at once (two processes
    // appending through their own managers' hooks).
    let barrier = std::sync::Barrier::new(2);
    for n in 0..40 {
        let id = format!("noted-twice-{n}");
        bed.store.create(&SessionMeta::new(&id)).unwrap();
        let m = Message::user(format!("a zanzibar quokka number{n} noted by both"));
        bed.store.append(&id, &[Record::Message(m)], None).unwrap();
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| {
                barrier.wait();
                first.note_append(&id)
            });
            let b = s.spawn(|| {
                barrier.wait();
                second.note_append(&id)
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        assert!(a.is_ok() && b.is_ok(), "session {n}: {a:?} {b:?}");
    }
    let hits = first
        .search(&SearchQuery {
            k: 100,
            ..query(
                "zanzibar quokka",
                SearchMode::Lexical,
                SearchFilter::default(),
            )
        })
        .unwrap();
    assert_eq!(hits.len(), 40, "each noted session indexed once: {hits:?}");
}

mod concurrent {
    #[test]
    fn file() {
        super::two_indexers_at_once_index_every_message_exactly_once(&super::Bed::file());
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres() {
        if let Some(bed) = super::Bed::postgres(crate::postgres_common::POSTGRES_URL) {
            super::two_indexers_at_once_index_every_message_exactly_once(&bed);
        }
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn pgvector() {
        if let Some(bed) = super::Bed::postgres(crate::postgres_common::PGVECTOR_URL) {
            super::two_indexers_at_once_index_every_message_exactly_once(&bed);
        }
    }
}

/// Write `sessions` sessions `{prefix}{n}` of `per` messages: every message
/// says "pipeline" (a common word), every seventh "flamingo" too, in texts
/// of varied lengths.
fn write_project(st: &dyn LogStore, prefix: &str, sessions: usize, per: usize, extra: &str) {
    for n in 0..sessions {
        let id = format!("{prefix}{n}");
        st.create(&SessionMeta::new(&id)).unwrap();
        let records: Vec<Record> = (0..per)
            .map(|i| {
                let pad = "word ".repeat((i * 3 + n) % 11);
                let bird = if i % 7 == 0 { "pink flamingo " } else { "" };
                Record::Message(Message::user(format!(
                    "{bird}the pipeline {pad}runs {extra} step {i}"
                )))
            })
            .collect();
        st.append(&id, &records, None).unwrap();
    }
}

/// BM25's statistics are those of the session prefix a search is
/// restricted to (a server's project, ids `P~...`): one project's scores,
/// in every mode and on every lexical path (rare words, common words past
/// the rare-term path, phrases), are identical before and after another
/// project adds thousands of documents holding the query's words; the
/// unrestricted scores do move (the other project's documents count there).
fn scores_within_a_session_prefix_never_move_when_another_prefix_grows(bed: &Bed) {
    let st = bed.store.clone();
    write_project(st.as_ref(), "beta~s", 21, 100, "");
    let mut ix = bed.index();
    ix.update().unwrap();
    let queries = [
        "flamingo",
        "pipeline",
        "flamingo pipeline",
        "\"pink flamingo\" pipeline",
    ];
    let scores = |ix: &SearchIndex, session: Option<&str>| -> Vec<(String, String, u64, u32)> {
        let mut out = Vec::new();
        for q in queries {
            for mode in [SearchMode::Lexical, SearchMode::Hybrid] {
                let filter = SearchFilter {
                    session: session.map(str::to_string),
                    ..SearchFilter::default()
                };
                let mut query = query(q, mode, filter);
                query.k = 20;
                let hits = ix.search(&query).unwrap();
                assert!(!hits.is_empty(), "{q} {mode:?}");
                out.extend(
                    hits.into_iter()
                        .map(|h| (q.to_string(), h.session, h.seq, h.score.to_bits())),
                );
            }
        }
        out
    };
    let before = scores(&ix, Some("beta~"));
    let whole_before = scores(&ix, None);
    write_project(st.as_ref(), "alpha~s", 40, 100, "flamingo pipeline pink");
    ix.update().unwrap();
    assert_eq!(scores(&ix, Some("beta~")), before);
    assert_ne!(
        scores(&ix, None),
        whole_before,
        "the other project counts unrestricted"
    );
    // An index opened afresh scores the same.
    let fresh = bed.index();
    assert_eq!(scores(&fresh, Some("beta~")), before);
}

/// A session of short messages that each hold one word of the queries
/// below (the near misses), then `long` (the answer, a long tool output),
/// all in one store.
fn near_misses(bed: &Bed, long: &str, misses: &[&str]) -> SearchIndex {
    let st = bed.store.clone();
    st.create(&SessionMeta::new("answer")).unwrap();
    append(
        st.as_ref(),
        "answer",
        vec![Record::Message(Message::user(long.to_string()))],
    );
    st.create(&SessionMeta::new("misses")).unwrap();
    let records: Vec<Record> = (0..40)
        .map(|i| Record::Message(Message::user(format!("{} {i}", misses[i % misses.len()]))))
        .collect();
    append(st.as_ref(), "misses", records);
    let mut ix = bed.index();
    ix.update().unwrap();
    ix
}

/// Half-remembered error text: the message holding all of it (in a long
/// stack trace) ranks above short messages holding one of its words, in
/// every mode that reads terms.
fn the_whole_error_text_ranks_above_a_message_holding_one_of_its_words(bed: &Bed) {
    let trace = format!(
        "TypeError: client.generate is not a function\n{}",
        "    at handler (src/pages/api/describe.ts:9:17)\n".repeat(30)
    );
    let ix = near_misses(
        bed,
        &trace,
        &[
            "serverless functions cold start",
            "list the functions above 500 kB",
            "we generate the report nightly",
        ],
    );
    for mode in [SearchMode::Hybrid, SearchMode::Lexical] {
        let hits = ix
            .search(&query(
                "generate is not a function",
                mode,
                SearchFilter::default(),
            ))
            .unwrap();
        assert!(first_is(&hits, "answer", 1), "{mode:?}: {hits:?}");
    }
}

/// `mix test` finds the command, not "Add comprehensive tests".
fn a_command_ranks_above_messages_sharing_one_word_with_it(bed: &Bed) {
    let run = format!(
        "$ mix test test/ledger\n{}\nFinished in 0.4 seconds\n10 tests, 0 failures",
        "..........".repeat(40)
    );
    let ix = near_misses(
        bed,
        &run,
        &[
            "Add comprehensive tests",
            "mix the colours of the theme",
            "tests pass",
        ],
    );
    for mode in [SearchMode::Hybrid, SearchMode::Lexical] {
        let hits = ix
            .search(&query("mix test", mode, SearchFilter::default()))
            .unwrap();
        assert!(first_is(&hits, "answer", 1), "{mode:?}: {hits:?}");
    }
}

/// Every hit carries evidence: a positive score, in every mode; a message
/// holding no query term and no similarity is not listed.
fn no_hit_without_evidence_and_no_zero_score(bed: &Bed) {
    let ix = near_misses(
        bed,
        "the quokka census counted seven quokkas",
        &[
            "a marsupial survey",
            "quokka photos",
            "census of the colony",
        ],
    );
    for mode in [
        SearchMode::Hybrid,
        SearchMode::Lexical,
        SearchMode::Semantic,
    ] {
        let hits = ix
            .search(&query("quokka census", mode, SearchFilter::default()))
            .unwrap();
        assert!(!hits.is_empty(), "{mode:?}");
        for h in &hits {
            assert!(h.score > 0.0, "{mode:?}: {h:?}");
        }
        if mode != SearchMode::Semantic {
            assert!(
                hits.iter().all(|h| !h.snippet.highlights.is_empty()),
                "{mode:?}: {hits:?}"
            );
            assert!(first_is(&hits, "answer", 1), "{mode:?}: {hits:?}");
        }
    }
}

/// `read_file_lines` is found by the identifier (exactly, above messages
/// that hold its words apart) and by its words; `readFileLines` is the
/// same identifier.
fn identifiers_are_found_whole_and_by_their_parts(bed: &Bed) {
    let ix = near_misses(
        bed,
        "TileIndex::load calls read_file_lines(path) for tiles.idx",
        &[
            "read the file and count the lines",
            "lines of the file we read",
            "file lines read twice",
        ],
    );
    for q in ["read_file_lines", "readFileLines", "TileIndex::load"] {
        let hits = ix
            .search(&query(q, SearchMode::Lexical, SearchFilter::default()))
            .unwrap();
        assert!(first_is(&hits, "answer", 1), "{q}: {hits:?}");
        let marked = hits[0].snippet.marked(
            memoir::search::snippet::MARK_OPEN,
            memoir::search::snippet::MARK_CLOSE,
        );
        assert!(!marked.contains("_[["), "a word cut: {marked}");
    }
}

/// Two messages with the same text score the same; the newer is listed
/// first, though it was written (and indexed) first.
fn equal_scores_list_the_newest_message_first(bed: &Bed) {
    use chrono::TimeZone;
    let st = bed.store.clone();
    let t0 = chrono::Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap();
    for (id, ts) in [("a-newer", t0 + Duration::days(1)), ("b-older", t0)] {
        st.create(&SessionMeta::new(id)).unwrap();
        let m = Message {
            timestamp: Some(ts),
            ..Message::user("the pelican census of the wetland")
        };
        append(st.as_ref(), id, vec![Record::Message(m)]);
    }
    let mut ix = bed.index();
    ix.update().unwrap();
    for mode in [
        SearchMode::Hybrid,
        SearchMode::Lexical,
        SearchMode::Semantic,
    ] {
        let hits = ix
            .search(&query("pelican census", mode, SearchFilter::default()))
            .unwrap();
        assert_eq!(hits.len(), 2, "{mode:?}: {hits:?}");
        assert_eq!(hits[0].score, hits[1].score, "{mode:?}: {hits:?}");
        assert_eq!(hits[0].session, "a-newer", "{mode:?}: {hits:?}");
    }
}

/// `memoir eval search`'s measure: recall@1/5/10 and MRR per category,
/// then over all queries, for each mode; a query never answered counts 0
/// and is listed as a miss.
fn the_evaluation_reports_every_category_and_mode(bed: &Bed) {
    use memoir::search::eval::{evaluate, parse_dev_set, plant};
    let sessions = "== e1 | Ledger | /p\n\
        u: the flamingo ledger rounds half to even\n\
        $ Bash: mix test :: 3 tests, 0 failures\n\
        == e2 | Deploy | /p\n\
        u: rotate the quokka deploy key monthly\n";
    let queries = "concept | flamingo ledger rounding | e1:1\n\
        concept | quokka deploy key | e2:1\n\
        tool | mix test | e1:2\n\
        tool | zebra stripes | e2:1\n";
    let set = parse_dev_set(sessions, queries).unwrap();
    let planted = plant(&set, bed.store.as_ref()).unwrap();
    let mut ix = bed.index();
    ix.update().unwrap();
    let modes = [SearchMode::Lexical, SearchMode::Hybrid];
    let eval = evaluate(&ix, &set, &planted, &modes).unwrap();
    for mode in modes {
        let rows: Vec<_> = eval.rows.iter().filter(|r| r.mode == mode).collect();
        let cats: Vec<&str> = rows.iter().map(|r| r.category.as_str()).collect();
        assert_eq!(cats, ["concept", "tool", "all"], "{mode:?}");
        let figures = |r: &memoir::search::eval::EvalRow| (r.queries, r.r1, r.r5, r.r10, r.mrr);
        assert_eq!(figures(rows[0]), (2, 1.0, 1.0, 1.0, 1.0), "{mode:?}");
        assert_eq!(figures(rows[1]), (2, 0.5, 0.5, 0.5, 0.5), "{mode:?}");
        assert_eq!(figures(rows[2]), (4, 0.75, 0.75, 0.75, 0.75), "{mode:?}");
        let misses: Vec<_> = eval.misses.iter().filter(|m| m.mode == mode).collect();
        assert_eq!(misses.len(), 1, "{mode:?}: {misses:?}");
        assert_eq!(
            (misses[0].query.as_str(), misses[0].rank),
            ("zebra stripes", None)
        );
    }
    let latency_modes: Vec<SearchMode> = eval.latency.iter().map(|l| l.0).collect();
    assert_eq!(latency_modes, modes);
}
