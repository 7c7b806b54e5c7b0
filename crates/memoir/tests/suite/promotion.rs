//! Promotion: the seed's `postmortem` nomination tests and
//! `promote_to_chain` test, ported, plus what memoir adds: the fact is a
//! note of the project with its lineage, the session keeps a `promotion`
//! record, and a later session finds the fact by search and by recall,
//! with where it came from.

use std::time::Duration;

use memoir::embed::HashEmbedder;
use memoir::manager::{LeasePolicy, ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::notes::{list_notes, notes_session_id};
use memoir::promote::{history_with_facts, promote};
use memoir::view::{
    ChunkMeta, NodeState, PromotionReason, PromotionSignals, RebuildOptions, SessionView,
};

fn axis(i: usize) -> Vec<f32> {
    let mut v = vec![0.01; 8];
    v[i] = 1.0;
    v
}

/// Records 1..=4, each on its own axis.
fn view() -> SessionView {
    let v = SessionView::new("s1", 8);
    for (seq, text) in [(1, "alpha"), (2, "beta"), (3, "gamma"), (4, "delta")] {
        assert!(v.insert_vector(
            axis(seq as usize),
            ChunkMeta::inline(seq, "user.text", text)
        ));
    }
    v
}

fn success(score: f32) -> PromotionSignals {
    PromotionSignals {
        task_score: score,
        ..PromotionSignals::default()
    }
}

#[test]
fn important_and_twice_recalled_records_are_nominated_with_their_reasons() {
    let v = view();
    assert!(v.mark_important(1));
    v.graft(&axis(2), 1);
    v.graft(&axis(2), 1);
    v.graft(&axis(3), 1);
    let c = v.postmortem(&PromotionSignals::default());
    let seqs: Vec<u64> = c.iter().map(|c| c.chain_seq).collect();
    assert_eq!(seqs, [1, 2], "recalled once or never: not nominated");
    assert_eq!(c[0].reasons, [PromotionReason::Important]);
    assert_eq!(c[1].reasons, [PromotionReason::ReferenceCount(2)]);
    assert_eq!(c[1].content_hashes, [memoir::view::content_hash("beta")]);
}

#[test]
fn task_success_lowers_the_threshold_to_one_and_adds_the_score() {
    let v = view();
    v.graft(&axis(3), 1);
    assert!(
        v.postmortem(&success(0.69)).is_empty(),
        "below the 0.7 threshold"
    );
    let c = v.postmortem(&success(0.7));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].chain_seq, 3);
    assert_eq!(
        c[0].reasons,
        [
            PromotionReason::ReferenceCount(1),
            PromotionReason::TaskScore(0.7)
        ]
    );
}

#[test]
fn a_pruned_record_is_never_promoted() {
    let v = view();
    assert!(v.mark_important(4));
    v.graft(&axis(4), 1);
    v.graft(&axis(4), 1);
    v.transition(4, NodeState::Pruned).unwrap();
    for signals in [PromotionSignals::default(), success(1.0)] {
        assert!(v.postmortem(&signals).iter().all(|c| c.chain_seq != 4));
    }
}

fn manager(root: &std::path::Path) -> SessionManager {
    let options = ManagerOptions {
        lease: LeasePolicy::Off,
        durability: memoir::store::Durability::None,
        flush_interval: Duration::from_secs(3600),
        workspace: Some(root.to_path_buf()),
        ..ManagerOptions::default()
    };
    SessionManager::open(&root.join("sessions"), options).unwrap()
}

const FACT: &str = "the staging deploy key lives in vault under ops/deploy-key";

/// A session whose record about the deploy key is marked important, and a
/// promotion of it. Returns (manager, session id, the promoted seq).
fn promoted_session(root: &std::path::Path, project: &str) -> (SessionManager, String, u64) {
    let mut m = manager(root);
    let id = m.create_session("set up staging", None).unwrap();
    m.add_messages([
        Message::assistant("where is the deploy key kept?"),
        Message::user("the deploy key is in vault at ops/deploy-key"),
        Message::assistant("noted, using it"),
    ])
    .unwrap();
    m.flush().unwrap();
    let t = m.read_session(&id).unwrap();
    let key_seq = t.message_seqs[2];
    let embedder = HashEmbedder::new(64);
    let history = m.read_history(&id).unwrap();
    let (view, _) =
        SessionView::rebuild_history(&history, &embedder, None, &RebuildOptions::default())
            .unwrap();
    assert!(view.mark_important(key_seq));
    let candidates = view.postmortem(&PromotionSignals::default());
    assert_eq!(candidates.len(), 1);
    let promoted = promote(&mut m, project, &view, &candidates, FACT, &["ops".into()])
        .unwrap()
        .expect("one candidate: promoted");
    assert_eq!(
        view.state(key_seq),
        Some(NodeState::Committed),
        "the chunk is committed"
    );
    assert_eq!(promoted.committed.len(), 1);
    (m, id, key_seq)
}

#[test]
fn promotion_writes_the_fact_with_its_lineage_and_commits_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().display().to_string();
    let (m, id, key_seq) = promoted_session(dir.path(), &project);
    // The durable fact: a note of the project, carrying its sources.
    let notes = list_notes(&m, &project).unwrap().notes;
    assert_eq!(notes.len(), 1);
    let note = &notes[0];
    assert_eq!(note.text, FACT);
    assert_eq!(note.tags, ["ops"]);
    assert_eq!(note.session.as_deref(), Some(id.as_str()));
    let lineage = note.promoted.as_ref().unwrap();
    assert_eq!(lineage.session, id);
    assert_eq!(lineage.sources.len(), 1);
    assert_eq!(
        (lineage.sources[0].session.as_str(), lineage.sources[0].seq),
        (id.as_str(), key_seq)
    );
    assert_eq!(
        lineage.sources[0].content_hashes,
        [memoir::view::content_hash(
            "the deploy key is in vault at ops/deploy-key"
        )]
    );
    assert_eq!(lineage.sources[0].reasons, ["important"]);
    // The session's own lineage record names the note.
    let t = m.read_session(&id).unwrap();
    assert_eq!(t.promotions.len(), 1);
    let p = &t.promotions[0];
    assert_eq!(p.fact, FACT);
    assert_eq!(p.sources, lineage.sources);
    assert_eq!(
        (p.note.session.as_str(), p.note.id.as_str(), p.note.seq),
        (
            notes_session_id(&project).as_str(),
            note.id.as_str(),
            note.seq
        )
    );
    assert_eq!(t.messages.len(), 4, "the conversation is untouched");
}

#[test]
fn nothing_to_promote_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().display().to_string();
    let mut m = manager(dir.path());
    let id = m.create_session("idle", None).unwrap();
    m.flush().unwrap();
    let view = SessionView::new(id.clone(), 8);
    assert!(promote(&mut m, &project, &view, &[], FACT, &[])
        .unwrap()
        .is_none());
    assert!(list_notes(&m, &project).unwrap().notes.is_empty());
    assert!(
        m.read_session(&notes_session_id(&project)).is_err(),
        "no notes session created"
    );
    assert!(m.read_session(&id).unwrap().promotions.is_empty());
}

#[test]
fn a_later_session_recalls_the_promoted_fact_with_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().display().to_string();
    let (mut m, origin, key_seq) = promoted_session(dir.path(), &project);
    let later = m
        .create_session("rotate the staging credentials", None)
        .unwrap();
    m.add_message(Message::assistant("checking what we know"))
        .unwrap();
    m.flush().unwrap();
    // Recall in the new session: the fact comes back, naming the notes
    // session's record and the source it was promoted from.
    let embedder = HashEmbedder::new(64);
    let history = history_with_facts(&m, &later, &project).unwrap();
    let (view, _) =
        SessionView::rebuild_history(&history, &embedder, None, &RebuildOptions::default())
            .unwrap();
    let block = view
        .graft_budget(&embedder, "where is the deploy key", 500, None)
        .unwrap();
    let notes_session = notes_session_id(&project);
    let item = block
        .items
        .iter()
        .find(|i| i.session == notes_session)
        .unwrap_or_else(|| panic!("the fact is not recalled: {}", block.text));
    assert!(block.text.contains(FACT), "{}", block.text);
    assert!(
        block
            .text
            .contains(&format!("(promoted from {origin} seq {key_seq})")),
        "{}",
        block.text
    );
    // The recalled record is the note, and the note leads to the source.
    let note = list_notes(&m, &project)
        .unwrap()
        .notes
        .into_iter()
        .find(|n| n.seq == item.chain_seq)
        .unwrap();
    let source = &note.promoted.unwrap().sources[0];
    let t = m.read_session(&source.session).unwrap();
    let at = t
        .message_seqs
        .iter()
        .position(|&s| s == source.seq)
        .unwrap();
    assert!(t.messages[at].text_content().contains("ops/deploy-key"));
    // The session it came from does not recall its own fact twice.
    let own = history_with_facts(&m, &origin, &project).unwrap();
    assert!(own.turns.iter().all(|t| t.session != notes_session));
}

#[cfg(feature = "search")]
#[test]
fn search_finds_the_promoted_fact() {
    use memoir::search::{SearchIndex, SearchMode, SearchQuery};
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().display().to_string();
    let (m, _, _) = promoted_session(dir.path(), &project);
    let mut index = SearchIndex::open(&dir.path().join("sessions")).unwrap();
    index.update().unwrap();
    let hits = index
        .search(&SearchQuery {
            mode: SearchMode::Lexical,
            ..SearchQuery::new("vault deploy-key staging")
        })
        .unwrap();
    let notes_session = notes_session_id(&project);
    let hit = hits
        .iter()
        .find(|h| h.session == notes_session)
        .unwrap_or_else(|| panic!("no hit in the notes session: {hits:#?}"));
    let note = &list_notes(&m, &project).unwrap().notes[0];
    assert_eq!(hit.seq, note.seq, "the hit is the promoted note");
}
