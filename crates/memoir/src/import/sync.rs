//! Applying planned sessions to the store, through the session manager.
//!
//! Per source: skip it when its cursor says it is unchanged; else parse it
//! and, per planned session, append only the records past what the cursor
//! (or, when the cursor is missing, the stored session) already holds. When
//! the already-imported records no longer match (the source was rewritten or
//! truncated), the new version becomes a fork by reference of the old session
//! at the last record both agree on, and the cursor moves to the fork.
//! Sessions are appended with the manager's durability; every touched session
//! is fsynced before the cursors are saved.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::cursor::{self, Change, Cursors, FileCursor, FileStat, SessionCursor};
use super::{
    parse_bytes, resumed, Agent, FileError, ForkAt, ImportError, ImportReport, ParentRef,
    ParseContext, Parsed, Planned, Progress, Source,
};
use crate::manager::SessionManager;
use crate::message::SOURCE_KEY;
use crate::record::{ForkPoint, Record};
use crate::store::lock::OwnerLock;

/// The file (in `<sessions dir>/import/`) that exists while a run has not
/// finished: a run that finds it checks the sessions it appends to against
/// what they already hold.
const RUNNING: &str = "running";

/// Recovering, the cuts tried past the last source line a session holds
/// beyond its cursor (where the interrupted run ended its last record).
const RECOVERY_CUTS: u64 = 32;

/// Save the cursors at least this often (in sources) during a long run.
const SAVE_EVERY: usize = 500;

pub(super) fn run(
    manager: &SessionManager,
    sources: &[Source],
    progress: &mut dyn FnMut(&Progress),
) -> Result<ImportReport, ImportError> {
    let dir = manager.sessions_dir().to_path_buf();
    let import_dir = dir.join("import");
    crate::paths::create_private_dir(&import_dir)?;
    let _lock = OwnerLock::acquire(&import_dir.join("lock"), "import")?;
    // Left by a run that did not finish: its sessions may hold records its
    // cursors do not count (appended, then killed before the save).
    let marker = import_dir.join(RUNNING);
    let recovering = marker.exists();
    if !recovering {
        crate::paths::atomic_write(&marker, std::process::id().to_string().as_bytes())?;
    }
    let mut cursors = Cursors::load(&dir)?;
    // Subagent links found in earlier runs (the spawning file may be unchanged now).
    let spawns = cursors
        .files
        .values()
        .flat_map(|fc| fc.spawns.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect();
    let mut run = Run {
        manager,
        report: ImportReport::default(),
        touched: BTreeSet::new(),
        spawns,
        first_lines: HashMap::new(),
        first_uuids: HashMap::new(),
        families: HashMap::new(),
        recovering,
        held: HashMap::new(),
    };
    let mut order: Vec<&Source> = sources.iter().collect();
    order.sort_by_key(|s| (s.agent, is_child_file(s), s.path.clone()));
    order.dedup_by_key(|s| s.path.clone());
    // New Claude Code files by first uuid: a resumed session repeats its
    // predecessor's, and is imported after it.
    for s in &order {
        if resumed::applies(s, is_child_file(s)) && !cursors.files.contains_key(&s.path) {
            if let Some(u) = resumed::first_uuid(&s.path) {
                run.first_uuids.insert(s.path.clone(), u);
            }
        }
    }
    resumed::order_new(&mut order, &run.first_uuids);
    run.families = resumed::families(&run.first_uuids, &mut cursors);
    let mut prog = Progress {
        files_total: order.len(),
        bytes_total: order
            .iter()
            .filter_map(|s| std::fs::metadata(&s.path).ok())
            .map(|m| m.len())
            .sum(),
        ..Progress::default()
    };
    run.report.files = order.len();
    let mut deferred: Vec<(PathBuf, Planned)> = Vec::new();
    let mut since_save = 0;
    for source in order {
        let size = std::fs::metadata(&source.path).map_or(0, |m| m.len());
        match run.source(&mut cursors, source, &mut deferred) {
            Ok(()) => {}
            Err(e @ (ImportError::Manager(_) | ImportError::Store(_))) => {
                run.finish(&mut cursors, &dir)?;
                return Err(e);
            }
            Err(e) => run.report.errors.push(FileError {
                file: source.path.clone(),
                error: e.to_string(),
            }),
        }
        prog.files_done += 1;
        prog.bytes_done += size;
        prog.sessions = run.report.sessions.new + run.report.sessions.updated;
        progress(&prog);
        since_save += 1;
        if since_save >= SAVE_EVERY {
            run.finish(&mut cursors, &dir)?;
            since_save = 0;
        }
    }
    // Forks whose parent came from a source read later in this run.
    for (path, planned) in deferred {
        let mut fc = match cursors.files.remove(&path) {
            Some(fc) => fc,
            None => continue,
        };
        let result = run.session(&mut cursors, &mut fc, planned, true);
        cursors.files.insert(path.clone(), fc);
        if let Err(e) = result.map(|_| ()) {
            run.report.errors.push(FileError {
                file: path,
                error: e.to_string(),
            });
        }
    }
    run.finish(&mut cursors, &dir)?;
    std::fs::remove_file(&marker).map_err(|e| ImportError::io("remove", &marker, e))?;
    Ok(run.report)
}

/// Parse a whole source: `bytes` (its content), or, for a compressed one,
/// as it is decompressed (with the check hash of what was consumed).
fn parse_whole(
    source: &Source,
    bytes: &[u8],
    ctx: &ParseContext,
) -> Result<(Parsed, Option<String>), ImportError> {
    if let Some((parsed, hash)) = super::parse_compressed(source, ctx)? {
        return Ok((parsed, Some(hash)));
    }
    Ok((parse_bytes(source, bytes, ctx)?, None))
}

/// Claude Code subagent files go after the sessions that spawned them.
fn is_child_file(s: &Source) -> bool {
    s.agent == Agent::ClaudeCode
        && (s.path.components().any(|c| c.as_os_str() == "subagents")
            || s.path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("agent-")))
}

struct Run<'a> {
    manager: &'a SessionManager,
    report: ImportReport,
    touched: BTreeSet<String>,
    spawns: HashMap<String, String>,
    /// Codex: hash of a rollout's first line → the first rollout that had it.
    first_lines: HashMap<blake3::Hash, PathBuf>,
    /// Claude Code: the first uuid of each new file of this run.
    first_uuids: HashMap<PathBuf, String>,
    /// Claude Code: new and imported files that may repeat one another.
    families: resumed::Families,
    /// The previous run did not finish (see [`RUNNING`]).
    recovering: bool,
    /// The current source's planned sessions (by key) whose stored session
    /// already holds records past the cursor: how many, verified equal to
    /// the planned records that follow the cursor.
    held: HashMap<String, usize>,
}

impl Run<'_> {
    fn source(
        &mut self,
        cursors: &mut Cursors,
        source: &Source,
        deferred: &mut Vec<(PathBuf, Planned)>,
    ) -> Result<(), ImportError> {
        let kind = std::fs::metadata(&source.path)
            .map_err(|e| ImportError::io("stat", &source.path, e))?
            .file_type();
        if !kind.is_file() {
            // A FIFO, socket or device is never opened: reading a FIFO
            // would wait for a writer.
            if let ImportError::Unsupported { reason, .. } =
                super::lines::not_regular(&source.path, &kind)
            {
                self.report.skipped.push(super::Skipped {
                    file: source.path.clone(),
                    line: 0,
                    reason,
                });
            }
            return Ok(());
        }
        let stat = FileStat::of_source(source)?;
        let existing = cursors.files.get(&source.path).cloned();
        if let Some(fc) = &existing {
            if fc.unchanged(&stat) {
                self.report.sessions.unchanged += fc.sessions.len();
                if source.agent == Agent::Codex {
                    self.note_first_line(source, fc.first_line.as_deref())?;
                }
                return Ok(());
            }
        }
        let is_new = existing.is_none();
        let mut fc = existing.unwrap_or_else(|| FileCursor::new(source.agent, &stat));
        // A new file repeating an imported one's lines: a resumed session.
        let mut predecessor: Option<FileCursor> = None;
        if let Some(uuid) = self.first_uuids.get(&source.path).cloned() {
            fc.first_uuid = Some(uuid.clone());
            let folder = source.path.parent().map(Path::to_path_buf);
            let members = self
                .families
                .get(&(folder.unwrap_or_default(), uuid))
                .filter(|m| m.len() > 1);
            if let (true, Some(members)) = (is_new, members) {
                if let Some((p, lines)) =
                    resumed::predecessor(self.manager, cursors, &source.path, members)?
                {
                    fc.repeated_lines = lines;
                    predecessor = cursors.files.get(&p).cloned();
                }
            }
        }
        let mut ctx = ParseContext {
            cuts: fc.cuts.iter().copied().collect(),
            spawns: self.spawns.clone(),
            codex_parent: None,
            repeated_lines: fc.repeated_lines,
        };
        self.held.clear();
        let beyond = if self.recovering {
            self.beyond_cursor(&fc)?
        } else {
            HashMap::new()
        };
        if beyond.is_empty() && self.resume(cursors, &mut fc, source, &stat, &ctx)? {
            cursors.files.insert(source.path.clone(), fc);
            return Ok(());
        }
        if source.agent == Agent::Codex {
            let hash = super::lines::first_line(&source.path)?
                .map(|l| blake3::hash(&l).to_hex().to_string());
            if let Some(h) = &hash {
                ctx.codex_parent = self.note_first_line(source, Some(h))?;
            }
            fc.first_line = hash;
        }
        let compressed = super::lines::is_compressed(&source.path);
        let bytes = if source.agent == Agent::OpenCode || compressed {
            Vec::new()
        } else {
            super::lines::read_all(&source.path)?
        };
        let change = if fc.sessions.is_empty() && fc.offset == 0 {
            Change::New
        } else if compressed {
            // Read whole each time it changes: never resumed.
            Change::Rewritten
        } else {
            fc.change(&stat, &bytes)
        };
        let (mut parsed, streamed_hash) = parse_whole(source, &bytes, &ctx)?;
        self.report.files_read += 1;
        self.report.bytes_read += parsed.consumed;
        if change == Change::Grown && source.agent == Agent::ClaudeCode && fc.lines > 0 {
            // A response split across the previous import's end must not be
            // merged back into the message already imported.
            let cut = fc.lines + 1;
            if !self.matches(&fc, &parsed) && !ctx.cuts.contains(&cut) {
                ctx.cuts.insert(cut);
                let (retry, _) = parse_whole(source, &bytes, &ctx)?;
                if self.matches(&fc, &retry) {
                    fc.cuts.push(cut);
                    parsed = retry;
                }
            }
        }
        if self.recovering {
            parsed = self.recover(source, &bytes, &mut ctx, &mut fc, beyond, parsed)?;
        }
        let nothing_read = parsed.sessions.iter().all(|p| p.records.is_empty());
        if nothing_read && !parsed.skipped.is_empty() {
            // A source with content of which nothing could be read fails
            // (what could not be read is reported line by line).
            self.report.errors.push(FileError {
                file: source.path.clone(),
                error: format!(
                    "nothing could be read ({} lines or rows skipped, see skipped)",
                    parsed.skipped.len()
                ),
            });
            // No cursor: the next run tries again (and reports again).
            self.report.skipped.append(&mut parsed.skipped);
            self.report.notes.append(&mut parsed.notes);
            return Ok(());
        }
        self.spawns
            .extend(parsed.spawns.iter().map(|(k, v)| (k.clone(), v.clone())));
        fc.spawns = parsed
            .spawns
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        fc.tail = parsed.tail.take();
        self.report.skipped.append(&mut parsed.skipped);
        self.report.notes.append(&mut parsed.notes);
        if let Some(t) = parsed.torn.take() {
            self.report.torn.push(t);
        }
        for mut planned in std::mem::take(&mut parsed.sessions) {
            if let (Some(pred), Some(uuid), "main") = (
                &predecessor,
                parsed.continues_from.as_deref(),
                planned.key.as_str(),
            ) {
                if let Some((parent, messages)) = resumed::fork_point(self.manager, pred, uuid)? {
                    if let Some(src) = planned.meta.source.as_mut() {
                        src.extra
                            .insert("resumed_from".into(), Value::String(parent.clone()));
                    }
                    planned.fork = Some(super::ForkFrom {
                        parent: ParentRef::Session(parent),
                        at: ForkAt::Messages(messages),
                    });
                }
            }
            if let Some(planned) = self.session(cursors, &mut fc, planned, false)? {
                deferred.push((source.path.clone(), planned));
            }
        }
        fc.inode = stat.inode;
        fc.size = stat.size;
        fc.mtime_ns = stat.mtime_ns;
        // A database or a compressed rollout is read whole: consumed means
        // "as of this stat".
        fc.offset = if source.agent == Agent::OpenCode || super::lines::is_compressed(&source.path)
        {
            stat.size
        } else {
            parsed.consumed
        };
        fc.lines = parsed.complete_lines;
        fc.prefix_hash = match streamed_hash {
            Some(hash) => hash,
            None => {
                let end = (parsed.consumed as usize).min(bytes.len());
                cursor::prefix_hash(&bytes[..end])
            }
        };
        cursors.files.insert(source.path.clone(), fc);
        Ok(())
    }

    /// A grown source whose cursor can resume: verify the imported prefix
    /// (two check windows, not the whole file), parse only what follows it
    /// and append that to the main session. `Ok(false)` when the source
    /// needs the full path (new, rewritten, truncated, or new records that
    /// change the structure).
    fn resume(
        &mut self,
        cursors: &mut Cursors,
        fc: &mut FileCursor,
        source: &Source,
        stat: &FileStat,
        ctx: &ParseContext,
    ) -> Result<bool, ImportError> {
        let (Some(state), Some(main)) = (fc.tail.clone(), fc.sessions.get("main").cloned()) else {
            return Ok(false);
        };
        let Some(digest) = cursor::Digest::parse(&main.digest) else {
            return Ok(false);
        };
        if super::lines::is_compressed(&source.path) {
            return Ok(false);
        }
        if fc.offset == 0 || fc.verify(&source.path, stat)? != Change::Grown {
            return Ok(false);
        }
        if !resumed::exists(self.manager, &main.id)? {
            return Ok(false);
        }
        let bytes = super::lines::read_from(&source.path, fc.offset)?;
        let Some(mut parsed) = super::parse_tail(source, &bytes, fc.lines, &state, ctx) else {
            return Ok(false);
        };
        if source.agent == Agent::Codex {
            self.note_first_line(source, fc.first_line.as_deref())?;
        }
        self.report.files_read += 1;
        self.report.bytes_read += parsed.consumed;
        for (k, v) in parsed.spawns.drain() {
            fc.spawns.insert(k.clone(), v.clone());
            self.spawns.insert(k, v);
        }
        self.report.skipped.append(&mut parsed.skipped);
        self.report.notes.append(&mut parsed.notes);
        if let Some(t) = parsed.torn.take() {
            self.report.torn.push(t);
        }
        let records = parsed.sessions.pop().map(|p| p.records).unwrap_or_default();
        let added = self.append(&main.id, &records)?;
        self.count(added);
        self.report.sessions.unchanged += fc.sessions.len() - 1;
        let digest = digest.extend(&records)?;
        if let Some(sc) = fc.sessions.get_mut("main") {
            sc.records += records.len();
            sc.digest = digest.to_stored();
        }
        for c in parsed.cuts {
            if !fc.cuts.contains(&c) {
                fc.cuts.push(c);
            }
        }
        fc.tail = parsed.tail;
        fc.offset += parsed.consumed;
        fc.lines = parsed.complete_lines;
        fc.inode = stat.inode;
        fc.size = stat.size;
        fc.mtime_ns = stat.mtime_ns;
        fc.prefix_hash = cursor::prefix_hash_of_file(&source.path, fc.offset)?;
        let _ = cursors;
        Ok(true)
    }

    /// Codex: remember the rollout's first line; return an earlier rollout
    /// that starts with the same line (a fork that replays its parent).
    fn note_first_line(
        &mut self,
        source: &Source,
        known: Option<&str>,
    ) -> Result<Option<PathBuf>, ImportError> {
        let hash = match known.and_then(|h| blake3::Hash::from_hex(h).ok()) {
            Some(h) => h,
            None => match super::lines::first_line(&source.path)? {
                Some(line) => blake3::hash(&line),
                None => return Ok(None),
            },
        };
        match self.first_lines.get(&hash) {
            Some(p) if p != &source.path => Ok(Some(p.clone())),
            Some(_) => Ok(None),
            None => {
                self.first_lines.insert(hash, source.path.clone());
                Ok(None)
            }
        }
    }

    /// The records each known session of `fc` holds past what its cursor
    /// counts (left by an interrupted run), by planned key.
    fn beyond_cursor(&self, fc: &FileCursor) -> Result<HashMap<String, Vec<Record>>, ImportError> {
        let mut out = HashMap::new();
        for (key, sc) in &fc.sessions {
            if !resumed::exists(self.manager, &sc.id)? {
                continue;
            }
            let own = own_records(self.manager, &sc.id)?;
            let counted = sc.records.saturating_sub(sc.base);
            if own.len() > counted {
                out.insert(key.clone(), own[counted..].to_vec());
            }
        }
        Ok(out)
    }

    /// After an interrupted run: find the parse whose records agree with
    /// what the sessions already hold past their cursors (`beyond`), and
    /// for new planned sessions already in the store, with all they hold.
    /// The interrupted run ended its records at a line the cursor does not
    /// know: the parse is retried with an import boundary (a cut) after the
    /// cursor and after the last source line held, so that no record
    /// merges across it. The agreeing records are then not appended again
    /// ([`Run::held`]); when no parse agrees, the sessions are compared as
    /// on any rewrite (a fork), never appended twice.
    fn recover(
        &mut self,
        source: &Source,
        bytes: &[u8],
        ctx: &mut ParseContext,
        fc: &mut FileCursor,
        beyond: HashMap<String, Vec<Record>>,
        parsed: Parsed,
    ) -> Result<Parsed, ImportError> {
        // Planned sessions without a cursor whose session exists.
        let mut fresh: HashMap<String, Vec<Record>> = HashMap::new();
        for p in &parsed.sessions {
            if !fc.sessions.contains_key(&p.key) && resumed::exists(self.manager, &p.meta.id)? {
                fresh.insert(p.key.clone(), own_records(self.manager, &p.meta.id)?);
            }
        }
        if beyond.is_empty() && fresh.is_empty() {
            return Ok(parsed);
        }
        let last_line = beyond
            .values()
            .chain(fresh.values())
            .flatten()
            .filter_map(source_line_max)
            .max()
            .unwrap_or(fc.lines);
        let after_cursor = fc.lines + 1;
        let mut tries: Vec<Vec<u64>> = vec![vec![], vec![after_cursor]];
        for c in (last_line + 1)..=(last_line + RECOVERY_CUTS) {
            tries.push(vec![after_cursor, c]);
        }
        let mut first = Some(parsed);
        for cuts in tries {
            let candidate = match first.take() {
                Some(p) => p,
                None => {
                    let mut trial = ParseContext {
                        cuts: ctx.cuts.clone(),
                        spawns: ctx.spawns.clone(),
                        codex_parent: ctx.codex_parent.clone(),
                        repeated_lines: ctx.repeated_lines,
                    };
                    trial.cuts.extend(cuts.iter().copied());
                    parse_whole(source, bytes, &trial)?.0
                }
            };
            if let Some(held) = self.agrees(fc, &candidate, &beyond, &fresh)? {
                for c in cuts {
                    if ctx.cuts.insert(c) {
                        fc.cuts.push(c);
                    }
                }
                self.held = held;
                return Ok(candidate);
            }
        }
        // No parse agrees: compare as a rewrite (fork), never append twice.
        for key in beyond.keys() {
            if let Some(sc) = fc.sessions.get_mut(key) {
                sc.digest = String::new();
            }
        }
        Ok(parse_whole(source, bytes, ctx)?.0)
    }

    /// Whether `parsed` agrees with what the sessions hold: `Some(held)`
    /// (planned key → records already stored past the cursor) when it does.
    fn agrees(
        &self,
        fc: &FileCursor,
        parsed: &Parsed,
        beyond: &HashMap<String, Vec<Record>>,
        fresh: &HashMap<String, Vec<Record>>,
    ) -> Result<Option<HashMap<String, usize>>, ImportError> {
        if !self.matches(fc, parsed) {
            return Ok(None);
        }
        let mut held = HashMap::new();
        for (key, stored) in beyond {
            let (Some(p), Some(sc)) = (
                parsed.sessions.iter().find(|p| &p.key == key),
                fc.sessions.get(key),
            ) else {
                return Ok(None);
            };
            let Some(planned) = p.records.get(sc.records..sc.records + stored.len()) else {
                return Ok(None);
            };
            if !same(stored, planned)? {
                return Ok(None);
            }
            held.insert(key.clone(), stored.len());
        }
        for (key, stored) in fresh {
            let Some(p) = parsed.sessions.iter().find(|p| &p.key == key) else {
                return Ok(None);
            };
            match p.records.get(..stored.len()) {
                Some(planned) if same(stored, planned)? => {}
                _ => return Ok(None),
            }
        }
        Ok(Some(held))
    }

    /// Whether every session the cursor knows still matches its imported records.
    fn matches(&self, fc: &FileCursor, parsed: &Parsed) -> bool {
        fc.sessions.iter().all(|(key, sc)| {
            parsed.sessions.iter().any(|p| {
                &p.key == key
                    && p.records.len() >= sc.records
                    && cursor::digest_matches(&sc.digest, &p.records[..sc.records]).unwrap_or(false)
            })
        })
    }

    /// Bring one planned session into the store. `Ok(Some(planned))` (handed
    /// back) when its fork parent does not exist yet (retry after the other
    /// sources, or with `last_chance`, import it without the reference).
    fn session(
        &mut self,
        cursors: &mut Cursors,
        fc: &mut FileCursor,
        mut planned: Planned,
        last_chance: bool,
    ) -> Result<Option<Planned>, ImportError> {
        let known = fc.sessions.get(&planned.key).cloned();
        if let Some(sc) = &known {
            let prefix = match planned.records.get(..sc.records) {
                Some(prefix) => cursor::matching_digest(&sc.digest, prefix)?,
                None => None,
            };
            if let Some(prefix) = prefix {
                let id = sc.id.clone();
                let held = self.held.get(&planned.key).copied().unwrap_or(0);
                let added = self.append_tail_and_remember(
                    fc,
                    &planned,
                    &id,
                    (sc.records, prefix, held),
                    sc.base,
                )?;
                self.count(added);
                return Ok(None);
            }
            self.refork(cursors, fc, &planned, &sc.id.clone())?;
            return Ok(None);
        }
        let id = planned.meta.id.clone();
        if resumed::exists(self.manager, &id)? {
            // Imported before, cursor lost (or a copy of the same session).
            let own = own_records(self.manager, &id)?;
            if own.len() <= planned.records.len() && same(&own, &planned.records[..own.len()])? {
                let added = self.append_and_remember(fc, &planned, &id, own.len(), 0)?;
                self.count(added);
            } else {
                self.refork(cursors, fc, &planned, &id)?;
            }
            return Ok(None);
        }
        if let Some(fork) = planned.fork.clone() {
            let parent = match &fork.parent {
                ParentRef::Key(k) => fc.sessions.get(k).map(|s| s.id.clone()),
                ParentRef::Session(p) => Some(cursors.aliases.get(p).cloned().unwrap_or(p.clone())),
            };
            let parent = match parent {
                Some(p) if resumed::exists(self.manager, &p)? => Some(p),
                _ if !last_chance => return Ok(Some(planned)),
                _ => None,
            };
            match parent {
                Some(parent) => {
                    let messages = match fork.at {
                        ForkAt::Messages(n) => n,
                        ForkAt::SourceLine(line) => {
                            messages_while(self.manager, &parent, "line", |l| l <= line)?
                        }
                        ForkAt::Ordinal(end) => {
                            messages_while(self.manager, &parent, "ordinal", |o| o < end)?
                        }
                        ForkAt::BeforeUserMessage(n) => {
                            messages_before_user(self.manager, &parent, n)?
                        }
                    };
                    planned.meta.parent = self.manager.fork_reference(&parent, messages)?;
                    if planned.meta.parent.is_none() && messages > 0 {
                        self.report.notes.push(super::Skipped {
                            file: planned.meta.source.as_ref().and_then(|s| s.path.clone()).unwrap_or_default(),
                            line: 0,
                            reason: format!("fork of {parent} at message {messages} could not be referenced; imported whole"),
                        });
                    }
                }
                None => self.report.notes.push(super::Skipped {
                    file: planned
                        .meta
                        .source
                        .as_ref()
                        .and_then(|s| s.path.clone())
                        .unwrap_or_default(),
                    line: 0,
                    reason: format!(
                        "fork parent of {id} is not imported; imported without the reference"
                    ),
                }),
            }
        }
        self.manager.create_with_header(planned.meta.clone())?;
        self.report.sessions.new += 1;
        self.report.created.push(id.clone());
        self.touched.insert(id.clone());
        let added = self.append_and_remember(fc, &planned, &id, 0, 0)?;
        self.tally(added);
        Ok(None)
    }

    /// The source no longer matches what `old` holds: fork `old` at the last
    /// record both agree on and put the rest in the fork.
    fn refork(
        &mut self,
        cursors: &mut Cursors,
        fc: &mut FileCursor,
        planned: &Planned,
        old: &str,
    ) -> Result<(), ImportError> {
        // Compare messages as the reader sees them (ancestors stitched), so
        // a cut anywhere, even inside what `old` inherited, is found.
        let t = self.manager.read_stored(old)?;
        let mut common = 0;
        let mut start = 0;
        let mut seen = 0;
        for (i, r) in planned.records.iter().enumerate() {
            let Record::Message(m) = r else { continue };
            let same = t.messages.get(seen).is_some_and(|old_m| {
                serde_json::to_string(old_m).ok() == serde_json::to_string(m).ok()
            });
            if !same {
                break;
            }
            seen += 1;
            common = seen;
            start = i + 1;
        }
        let point: Option<ForkPoint> = self.manager.fork_reference(old, common)?;
        let (start, new_base) = match point {
            Some(_) => (start, start),
            None => (0, 0),
        };
        let mut meta = planned.meta.clone();
        meta.id = free_id(self.manager, &planned.meta.id)?;
        meta.parent = point;
        if let Some(src) = meta.source.as_mut() {
            src.extra
                .insert("replaces".into(), Value::String(old.to_string()));
        }
        self.manager.create_with_header(meta.clone())?;
        self.touched.insert(meta.id.clone());
        self.report.sessions.forked += 1;
        self.report.created.push(meta.id.clone());
        let added = self.append_and_remember(fc, planned, &meta.id, start, new_base)?;
        self.tally(added);
        cursors
            .aliases
            .insert(planned.meta.id.clone(), meta.id.clone());
        Ok(())
    }

    fn append(&mut self, id: &str, records: &[Record]) -> Result<(usize, usize), ImportError> {
        if records.is_empty() {
            return Ok((0, 0));
        }
        let with_images = self.images_as_blobs(records)?;
        let records = with_images.as_deref().unwrap_or(records);
        self.manager.append_records_to(id, records)?;
        self.touched.insert(id.to_string());
        let messages = records
            .iter()
            .filter(|r| matches!(r, Record::Message(_)))
            .count();
        Ok((records.len(), messages))
    }

    /// Imported images and documents (PDFs, text documents: `document`
    /// blocks) go to the store's blob store whatever their size (not inline
    /// base64; larger payloads of every kind go there anyway): `Some(records)`
    /// with them replaced by references, `None` when there is none (or the
    /// store keeps no blobs).
    fn images_as_blobs(&self, records: &[Record]) -> Result<Option<Vec<Record>>, ImportError> {
        use crate::message::Block;
        let has_media = |r: &Record| {
            matches!(r, Record::Message(m) if m.content.iter().any(|b| {
                matches!(b, Block::Image { .. }) || super::documents::payload(b).is_some()
            }))
        };
        if !records.iter().any(has_media) {
            return Ok(None);
        }
        let Some(payloads) = self.manager.store().blobs() else {
            return Ok(None);
        };
        let images = crate::blob::PayloadStore {
            store: payloads.store,
            policy: crate::blob::ExternalizePolicy {
                min_bytes: 0,
                tool_results: false,
                images: true,
                text: false,
            },
        };
        let mut out = records.to_vec();
        for r in out.iter_mut() {
            if let Record::Message(m) = r {
                crate::transcript::blobs::externalize_message(m, &images)?;
                super::documents::externalize(m, &images.store)?;
            }
        }
        Ok(Some(out))
    }

    /// Count an append to an existing session.
    fn count(&mut self, (records, messages): (usize, usize)) {
        if records == 0 {
            self.report.sessions.unchanged += 1;
        } else {
            self.report.sessions.updated += 1;
        }
        self.tally((records, messages));
    }

    fn tally(&mut self, (records, messages): (usize, usize)) {
        self.report.records += records;
        self.report.messages += messages;
    }

    /// Append `planned.records[known..]` to session `id` (but its first
    /// `held`, which the session holds already), the first `known`
    /// having the (checked) chained digest `prefix`, then remember the
    /// session's cursor: the digest is extended with the new records only.
    fn append_tail_and_remember(
        &mut self,
        fc: &mut FileCursor,
        planned: &Planned,
        id: &str,
        (known, prefix, held): (usize, cursor::Digest, usize),
        base: usize,
    ) -> Result<(usize, usize), ImportError> {
        let tail = &planned.records[known..];
        // The first `held` are in the session already (an interrupted run).
        let added = self.append(id, &tail[held.min(tail.len())..])?;
        let digest = prefix.extend(tail)?.to_stored();
        self.remember(fc, planned, id, digest, base);
        Ok(added)
    }

    fn remember(
        &mut self,
        fc: &mut FileCursor,
        planned: &Planned,
        id: &str,
        digest: String,
        base: usize,
    ) {
        fc.sessions.insert(
            planned.key.clone(),
            SessionCursor {
                id: id.to_string(),
                records: planned.records.len(),
                digest,
                base,
            },
        );
    }

    /// Append `planned.records[from..]` to session `id`, then remember the
    /// session's cursor (its digest covers every planned record). The
    /// digest is computed on another thread while the records are appended:
    /// both are a full pass over the records (each serialises them), and
    /// neither needs the other.
    fn append_and_remember(
        &mut self,
        fc: &mut FileCursor,
        planned: &Planned,
        id: &str,
        from: usize,
        base: usize,
    ) -> Result<(usize, usize), ImportError> {
        let (added, digest) = if planned.records.len() < PARALLEL_DIGEST_MIN {
            let added = self.append(id, &planned.records[from..]);
            (added, cursor::digest(&planned.records))
        } else {
            std::thread::scope(|scope| {
                let digest = scope.spawn(|| cursor::digest(&planned.records));
                let added = self.append(id, &planned.records[from..]);
                let digest = digest
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
                (added, digest)
            })
        };
        let added = added?;
        self.remember(fc, planned, id, digest?, base);
        Ok(added)
    }

    /// Make every touched session durable, then save the cursors.
    fn finish(&mut self, cursors: &mut Cursors, dir: &std::path::Path) -> Result<(), ImportError> {
        let store = self.manager.store();
        if !std::mem::take(&mut self.touched).into_iter().all(|id| {
            let path = store.location(&id);
            // Stores that are not files are durable on their own terms.
            !path.is_file() || File::open(&path).and_then(|f| f.sync_all()).is_ok()
        }) {
            return Err(ImportError::io(
                "fsync",
                dir,
                std::io::Error::other("an imported session could not be synced"),
            ));
        }
        let _ = crate::paths::sync_dir(dir);
        cursors.save(dir)
    }
}

/// Sessions with fewer planned records digest them on the importing thread
/// (a thread would cost more than it saves).
const PARALLEL_DIGEST_MIN: usize = 64;

/// The records of session `id` itself (not its ancestors), as stored, with
/// large payloads read back from the blob store (so they compare equal to a
/// fresh parse of their source).
fn own_records(manager: &SessionManager, id: &str) -> Result<Vec<Record>, ImportError> {
    let store = manager.store();
    let raw = store.read(id)?;
    Ok(crate::transcript::blobs::resolve_raw(store.as_ref(), raw)
        .records
        .into_iter()
        .map(|r| r.record)
        .collect())
}

/// The highest source line a record was read from (its trace's `line`
/// and the lines merged into it).
fn source_line_max(record: &Record) -> Option<u64> {
    match record {
        Record::Message(m) => {
            let trace = m.extra.get(SOURCE_KEY)?;
            let merged = trace
                .get("merged")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|t| t.get("line").and_then(Value::as_u64));
            trace
                .get("line")
                .and_then(Value::as_u64)
                .into_iter()
                .chain(merged)
                .max()
        }
        Record::Config(c) => c.extra.get(SOURCE_KEY)?.get("line")?.as_u64(),
        Record::Unknown { raw, .. } => raw.get("line")?.as_u64(),
        _ => None,
    }
}

fn same(a: &[Record], b: &[Record]) -> Result<bool, ImportError> {
    for (x, y) in a.iter().zip(b) {
        if x.to_json_string().map_err(crate::Error::from)?
            != y.to_json_string().map_err(crate::Error::from)?
        {
            return Ok(false);
        }
    }
    Ok(a.len() == b.len())
}

/// `base-r1`, `base-r2`, ...: the first id not in the store.
fn free_id(manager: &SessionManager, base: &str) -> Result<String, ImportError> {
    for n in 1.. {
        let id = format!("{base}-r{n}");
        if crate::id::validate(&id).is_err() {
            return Ok(crate::id::new_id());
        }
        if !resumed::exists(manager, &id)? {
            return Ok(id);
        }
    }
    Ok(crate::id::new_id())
}

/// How many of `id`'s leading messages have a source trace field `key`
/// satisfying `keep`.
fn messages_while(
    manager: &SessionManager,
    id: &str,
    key: &str,
    keep: impl Fn(u64) -> bool,
) -> Result<usize, ImportError> {
    let t = manager.read_stored(id)?;
    Ok(t.messages
        .iter()
        .take_while(|m| {
            m.extra
                .get(SOURCE_KEY)
                .and_then(|s| s.get(key))
                .and_then(Value::as_u64)
                .is_some_and(&keep)
        })
        .count())
}

/// How many of `id`'s messages come before its user message of 0-based
/// index `n` (all of them when it has fewer).
fn messages_before_user(manager: &SessionManager, id: &str, n: u64) -> Result<usize, ImportError> {
    let t = manager.read_stored(id)?;
    let mut users = 0u64;
    for (i, m) in t.messages.iter().enumerate() {
        if m.role == crate::message::Role::User {
            if users == n {
                return Ok(i);
            }
            users += 1;
        }
    }
    Ok(t.messages.len())
}
