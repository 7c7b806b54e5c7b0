//! `memoir doctor`: check a whole file store and repair what is safe.
//!
//! Owns the store-wide health check: every entry of the store directory is
//! classified (transcript, torn side file, temp file, other), every
//! transcript is read with the reader's rules, and each problem becomes a
//! [`Finding`] with a [`Severity`]. [`check`] with `repair` fixes what is safe
//! and never deletes data: a torn tail or partial batch is cut by the store's
//! own repair (its bytes saved to a side file), stale temp files are moved to
//! `<dir>/.doctor/<timestamp>/`, and over-permissive modes are tightened to
//! `0600`. Everything else needs a human and is reported as such.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::store::file::{self, FileStore, EXT};
use crate::store::{Durability, IssueKind, LogStore};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; nothing to do.
    Info,
    /// Safe to fix automatically (run with `--repair`).
    Fixable,
    /// Fixed by this run.
    Fixed,
    /// Needs a human decision; nothing was changed.
    NeedsHuman,
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Machine-readable kind, e.g. `torn_tail`, `chain_break`, `orphan_temp`.
    pub kind: &'static str,
    /// How bad it is.
    pub severity: Severity,
    /// The file concerned.
    pub path: PathBuf,
    /// The session concerned, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What is wrong (and what was done).
    pub detail: String,
}

/// The outcome of a check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The store directory.
    pub dir: PathBuf,
    /// Transcripts read.
    pub sessions: usize,
    /// Every finding, in directory order.
    pub findings: Vec<Finding>,
}

impl Report {
    /// True when something needs a human or a fix that was not applied.
    pub fn needs_attention(&self) -> bool {
        self.findings
            .iter()
            .any(|f| matches!(f.severity, Severity::NeedsHuman | Severity::Fixable))
    }
}

/// Check every entry of the file store in `dir`; with `repair`, fix what is
/// safe (see the module docs). A missing directory is an empty store.
pub fn check(dir: &Path, repair: bool) -> Result<Report> {
    let store = FileStore::new(dir, Durability::Fsync);
    let mut report = Report {
        dir: dir.to_path_buf(),
        ..Report::default()
    };
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(e).ctx("read directory", dir),
    };
    let mut names: Vec<(String, PathBuf, fs::FileType)> = Vec::new();
    for entry in entries {
        let entry = entry.ctx("read directory", dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().ctx("stat", entry.path())?;
        names.push((name, entry.path(), kind));
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    let live: HashSet<String> = names
        .iter()
        .filter_map(|(n, _, _)| n.strip_suffix(&format!(".{EXT}")).map(str::to_string))
        .collect();
    let stale: HashSet<PathBuf> = file::stale_temps(dir)?.into_iter().collect();
    let mut finding = |kind, severity, path: &Path, session: Option<&str>, detail: String| {
        report.findings.push(Finding {
            kind,
            severity,
            path: path.to_path_buf(),
            session: session.map(str::to_string),
            detail,
        });
    };
    for (name, path, ftype) in &names {
        if let Some(id) = name.strip_suffix(&format!(".{EXT}")) {
            if !ftype.is_file() {
                finding(
                    "not_regular",
                    Severity::NeedsHuman,
                    path,
                    Some(id),
                    format!(
                        "is a {}, not a regular file; never read or written",
                        file::file_kind(ftype)
                    ),
                );
                continue;
            }
            check_mode(path, id, repair, &mut finding)?;
            check_transcript(&store, &live, path, id, repair, &mut finding);
        } else if name.contains(&format!(".{EXT}.torn-")) && !name.ends_with(".tmp") {
            finding(
                "torn_side_file",
                Severity::Info,
                path,
                name.split(&format!(".{EXT}")).next(),
                "bytes cut from a torn tail or partial batch, kept verbatim".into(),
            );
        } else if stale.contains(path) {
            if repair {
                let moved = move_aside(dir, path)?;
                finding(
                    "orphan_temp",
                    Severity::Fixed,
                    path,
                    None,
                    format!("temp file of a dead writer moved to {}", moved.display()),
                );
            } else {
                finding(
                    "orphan_temp",
                    Severity::Fixable,
                    path,
                    None,
                    "temp file of a dead writer".into(),
                );
            }
        }
    }
    report.sessions = live.len();
    Ok(report)
}

type Sink<'a> = dyn FnMut(&'static str, Severity, &Path, Option<&str>, String) + 'a;

fn check_mode(path: &Path, id: &str, repair: bool, finding: &mut Sink<'_>) -> Result<()> {
    let mode = fs::symlink_metadata(path)
        .ctx("stat", path)?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    if repair {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).ctx("chmod", path)?;
        finding(
            "permissions",
            Severity::Fixed,
            path,
            Some(id),
            format!("mode {mode:o} tightened to 600"),
        );
    } else {
        finding(
            "permissions",
            Severity::Fixable,
            path,
            Some(id),
            format!("mode {mode:o} is readable by others (want 600)"),
        );
    }
    Ok(())
}

fn check_transcript(
    store: &FileStore,
    live: &HashSet<String>,
    path: &Path,
    id: &str,
    repair: bool,
    finding: &mut Sink<'_>,
) {
    let raw = match store.read(id) {
        Ok(raw) => raw,
        Err(e) => {
            finding(
                "unreadable",
                Severity::NeedsHuman,
                path,
                Some(id),
                e.to_string(),
            );
            return;
        }
    };
    let Some(meta) = raw.header.clone() else {
        finding(
            "no_header",
            Severity::NeedsHuman,
            path,
            Some(id),
            "no verified header at seq 0".into(),
        );
        return;
    };
    if meta.id != id {
        finding(
            "name_mismatch",
            Severity::NeedsHuman,
            path,
            Some(id),
            format!(
                "header names session {:?}; never acted on as either",
                meta.id
            ),
        );
        return;
    }
    let mut tail_cut = false;
    for issue in &raw.report.issues {
        let (kind, at_tail) = match issue.kind {
            IssueKind::TornTail { .. } => ("torn_tail", true),
            IssueKind::PartialBatch { .. } => ("partial_batch", true),
            IssueKind::ChainBreak => ("chain_break", false),
            IssueKind::Gap { .. } => ("seq_gap", false),
            IssueKind::SkippedOutOfOrder { .. } => ("out_of_order", false),
            IssueKind::ExtraHeader => ("extra_header", false),
            IssueKind::SkippedBlank => ("blank_line", false),
            IssueKind::SkippedCorrupt(_) => ("corrupt_line", false),
        };
        if at_tail {
            tail_cut = true;
            continue;
        }
        finding(
            kind,
            Severity::NeedsHuman,
            path,
            Some(id),
            issue.to_string(),
        );
    }
    if tail_cut {
        if repair {
            match store.repair(id) {
                Ok(Some(t)) => finding(
                    "torn_tail",
                    Severity::Fixed,
                    path,
                    Some(id),
                    format!(
                        "{} bytes at offset {} cut and saved to {}",
                        t.bytes,
                        t.offset,
                        t.saved_to.display()
                    ),
                ),
                Ok(None) => {}
                Err(e) => finding(
                    "torn_tail",
                    Severity::NeedsHuman,
                    path,
                    Some(id),
                    e.to_string(),
                ),
            }
        } else {
            finding(
                "torn_tail",
                Severity::Fixable,
                path,
                Some(id),
                "a torn last line or unfinished batch (the next append cuts it)".into(),
            );
        }
    }
    if let Some(parent) = &meta.parent {
        if !live.contains(&parent.session) {
            finding(
                "dangling_parent",
                Severity::NeedsHuman,
                path,
                Some(id),
                format!("fork parent {} is missing (deleted?)", parent.session),
            );
        }
    }
    if let Ok(t) = crate::transcript::read_in(store, id) {
        for issue in &t.report.blobs {
            finding(
                "blob_unresolved",
                Severity::NeedsHuman,
                path,
                Some(id),
                format!(
                    "seq {}: payload blob {} does not resolve ({:?})",
                    issue.seq, issue.hash, issue.problem
                ),
            );
        }
        check_index(store, &t, path, id, repair, finding);
        let own = &t.messages[t.inherited.min(t.messages.len())..];
        let results: HashSet<&str> = own.iter().flat_map(|m| m.tool_result_ids()).collect();
        let open: Vec<&str> = own
            .iter()
            .flat_map(|m| m.tool_use_ids())
            .filter(|u| !results.contains(u))
            .collect();
        if !open.is_empty() {
            finding(
                "tool_call_without_result",
                Severity::Info,
                path,
                Some(id),
                format!(
                    "{} tool call(s) without a result: {}",
                    open.len(),
                    open.join(", ")
                ),
            );
        }
    }
}

/// Index drift: a listing-index entry that no longer describes the
/// transcript (derived data, so the fix is a rebuild from the log).
fn check_index(
    store: &FileStore,
    t: &crate::transcript::Transcript,
    path: &Path,
    id: &str,
    repair: bool,
    finding: &mut Sink<'_>,
) {
    let index = crate::manager::index::Index::new(store.dir());
    if index.load(id).is_none() {
        return; // no entry yet: the next listing builds it
    }
    let fresh = index
        .load_fresh(id)
        .is_some_and(|e| e.last_seq == t.last_seq);
    if fresh {
        return;
    }
    if repair {
        match index.refresh(t) {
            Ok(_) => finding(
                "index_drift",
                Severity::Fixed,
                path,
                Some(id),
                "stale index entry rebuilt from the transcript".into(),
            ),
            Err(e) => finding(
                "index_drift",
                Severity::NeedsHuman,
                path,
                Some(id),
                format!("stale index entry could not be rebuilt: {e}"),
            ),
        }
    } else {
        finding(
            "index_drift",
            Severity::Fixable,
            path,
            Some(id),
            "the index entry does not match the transcript (rebuilt on --repair or the next listing)".into(),
        );
    }
}

/// Move `path` into `<dir>/.doctor/<timestamp>/`, keeping its name.
fn move_aside(dir: &Path, path: &Path) -> Result<PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S").to_string();
    let aside = dir.join(".doctor").join(stamp);
    crate::paths::create_private_dir(&aside)?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::Invalid(format!("{} has no file name", path.display())))?;
    let to = aside.join(name);
    fs::rename(path, &to).ctx("rename", path)?;
    Ok(to)
}
