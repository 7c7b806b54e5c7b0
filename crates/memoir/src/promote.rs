//! Promotion: at the end of a conversation, what a session view nominates
//! ([`SessionView::postmortem`]) becomes one durable fact of the project,
//! with its lineage, and later sessions of the project recall it.
//!
//! [`promote`] writes, in this order:
//!
//! 1. a note in the project's notes session ([`crate::notes`]) holding the
//!    fact and `promoted: {session, sources}` (each source a `(session, seq)`
//!    with the content hashes of its chunks and why it was nominated);
//! 2. a `promotion` record ([`Promotion`]) in the session the fact came
//!    from, naming the sources and the note (`docs/FORMAT.md`, "Promotion");
//! 3. the promoted records to Committed in the view, along legal lifecycle
//!    moves only (Stale and Speculative records pass through Frontier;
//!    Committed ones stay).
//!
//! A crash after 1 leaves the note with its lineage; the session's record
//! is then missing, never a record naming a missing note.
//!
//! Recall: [`history_with_facts`] is a session's history plus the project's
//! promoted facts, as turns of the notes session (`[chain_seq N of
//! notes-…]` in a graft block), each followed by where it came from, so a
//! later session's recall finds the fact and can open its source.
//!
//! The seed also mirrored every lifecycle move of a chunk onto a node of a
//! durable causal graph (`mirror_state`). memoir has no such graph: a view
//! is a disposable working window, rebuilt from the log, and its states are
//! the window's, not durable facts. What the lifecycle decides that must
//! outlive the process (this promotion) is written to the log as records,
//! where every later reader finds it.

use crate::manager::{Result, SessionManager};
use crate::message::Message;
use crate::notes::{list_notes, notes_session_id, Note, NotePromotion, Notes};
use crate::record::promotion::PROMOTION_FORMAT;
use crate::record::{PromotedNote, Promotion, PromotionSource, Record};
use crate::view::history::{History, Turn};
use crate::view::{NodeState, PromotionCandidate, PromotionReason, RecordKey, SessionView};

/// What [`promote`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Promoted {
    /// The note holding the fact.
    pub note: Note,
    /// The lineage record written to the session.
    pub promotion: Promotion,
    /// The records now Committed in the view.
    pub committed: Vec<RecordKey>,
}

/// A reason as the lineage names it.
fn reason_tag(r: &PromotionReason) -> String {
    match r {
        PromotionReason::Important => "important".into(),
        PromotionReason::ReferenceCount(n) => format!("references:{n}"),
        PromotionReason::TaskScore(s) => format!("task_score:{s}"),
    }
}

/// Move a record to Committed along legal moves; whether it got there.
fn commit(view: &SessionView, key: &RecordKey) -> bool {
    loop {
        match view.state(key) {
            Some(NodeState::Committed) => return true,
            Some(NodeState::Frontier) => {
                if view.commit(key).is_err() {
                    return false;
                }
            }
            Some(NodeState::Stale | NodeState::Speculative) => {
                if view.regraft(key).is_err() {
                    return false;
                }
            }
            Some(NodeState::Pruned) | None => return false,
        }
    }
}

/// Promote `candidates` (from [`SessionView::postmortem`]) of `view`'s
/// session as the durable fact `fact` of project `project` (its key: a
/// workspace path or a server project name, as [`Notes::new`]). `Ok(None)`,
/// and nothing written, when there is no candidate.
pub fn promote(
    manager: &mut SessionManager,
    project: &str,
    view: &SessionView,
    candidates: &[PromotionCandidate],
    fact: &str,
    tags: &[String],
) -> Result<Option<Promoted>> {
    if candidates.is_empty() {
        return Ok(None);
    }
    crate::notes::validate(fact, tags)?;
    let session = view.session_id().to_string();
    let sources: Vec<PromotionSource> = candidates
        .iter()
        .map(|c| PromotionSource {
            session: c.session.clone(),
            seq: c.chain_seq,
            content_hashes: c.content_hashes.clone(),
            reasons: c.reasons.iter().map(reason_tag).collect(),
        })
        .collect();
    let mut notes = Notes::new(manager, project);
    let note = notes.remember_promoted(
        fact,
        tags,
        &NotePromotion {
            session: session.clone(),
            sources: sources.clone(),
        },
    )?;
    let promotion = Promotion {
        v: PROMOTION_FORMAT,
        fact: fact.to_string(),
        sources,
        note: PromotedNote {
            session: notes.session_id().to_string(),
            id: note.id.clone(),
            seq: note.seq,
        },
        extra: Default::default(),
    };
    manager.append_session_records(
        &session,
        vec![Record::Promotion(Box::new(promotion.clone()))],
    )?;
    let committed = candidates
        .iter()
        .map(|c| RecordKey {
            session: c.session.clone(),
            seq: c.chain_seq,
        })
        .filter(|k| commit(view, k))
        .collect();
    Ok(Some(Promoted {
        note,
        promotion,
        committed,
    }))
}

/// The text a promoted fact is recalled by: the fact, then where it came
/// from (`(promoted from <session> seq 12, 18)`).
pub fn fact_text(note: &Note) -> String {
    match &note.promoted {
        Some(p) => {
            let seqs: Vec<String> = p
                .sources
                .iter()
                .map(|s| {
                    if s.session == p.session {
                        s.seq.to_string()
                    } else {
                        format!("{} of {}", s.seq, s.session)
                    }
                })
                .collect();
            format!(
                "{}\n(promoted from {} seq {})",
                note.text,
                p.session,
                seqs.join(", ")
            )
        }
        None => note.text.clone(),
    }
}

/// The history of session `id` (as [`SessionManager::read_history`]) plus
/// the live promoted facts of project `project`, each a current turn of the
/// notes session at its note's `seq` (text: [`fact_text`]). Facts promoted
/// from `id` itself are left out: the session already holds their sources.
pub fn history_with_facts(manager: &SessionManager, id: &str, project: &str) -> Result<History> {
    let mut history = manager.read_history(id)?;
    let notes_session = notes_session_id(project);
    for note in list_notes(manager, project)?.notes {
        let Some(p) = &note.promoted else {
            continue;
        };
        if p.session == id {
            continue;
        }
        let mut message = Message::user(fact_text(&note));
        message.timestamp = note.created_at;
        history.turns.push(Turn {
            session: notes_session.clone(),
            seq: note.seq,
            message,
            current: true,
        });
    }
    Ok(history)
}
