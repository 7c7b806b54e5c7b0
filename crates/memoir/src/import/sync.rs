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
use std::path::PathBuf;

use serde_json::Value;

use super::cursor::{self, Change, Cursors, FileCursor, FileStat, SessionCursor};
use super::{
    parse_bytes, Agent, FileError, ForkAt, ImportError, ImportReport, ParentRef, ParseContext,
    Parsed, Planned, Progress, Source,
};
use crate::manager::SessionManager;
use crate::message::SOURCE_KEY;
use crate::record::{ForkPoint, Record};
use crate::store::lock::OwnerLock;

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
    };
    let mut order: Vec<&Source> = sources.iter().collect();
    order.sort_by_key(|s| (s.agent, is_child_file(s), s.path.clone()));
    order.dedup_by_key(|s| s.path.clone());
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
    Ok(run.report)
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
}

impl Run<'_> {
    fn source(
        &mut self,
        cursors: &mut Cursors,
        source: &Source,
        deferred: &mut Vec<(PathBuf, Planned)>,
    ) -> Result<(), ImportError> {
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
        let mut fc = existing.unwrap_or_else(|| FileCursor::new(source.agent, &stat));
        let mut ctx = ParseContext {
            cuts: fc.cuts.iter().copied().collect(),
            spawns: self.spawns.clone(),
            codex_parent: None,
        };
        if self.resume(cursors, &mut fc, source, &stat, &ctx)? {
            cursors.files.insert(source.path.clone(), fc);
            return Ok(());
        }
        if source.agent == Agent::Codex {
            let hash = super::codex::first_line(&source.path)?
                .map(|l| blake3::hash(&l).to_hex().to_string());
            if let Some(h) = &hash {
                ctx.codex_parent = self.note_first_line(source, Some(h))?;
            }
            fc.first_line = hash;
        }
        let bytes = if source.agent == Agent::OpenCode {
            Vec::new()
        } else {
            super::lines::read_all(&source.path)?
        };
        let change = if fc.sessions.is_empty() && fc.offset == 0 {
            Change::New
        } else {
            fc.change(&stat, &bytes)
        };
        let mut parsed = parse_bytes(source, &bytes, &ctx)?;
        self.report.files_read += 1;
        self.report.bytes_read += parsed.consumed;
        if change == Change::Grown && source.agent == Agent::ClaudeCode && fc.lines > 0 {
            // A response split across the previous import's end must not be
            // merged back into the message already imported.
            let cut = fc.lines + 1;
            if !self.matches(&fc, &parsed) && !ctx.cuts.contains(&cut) {
                ctx.cuts.insert(cut);
                let retry = parse_bytes(source, &bytes, &ctx)?;
                if self.matches(&fc, &retry) {
                    fc.cuts.push(cut);
                    parsed = retry;
                }
            }
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
        for planned in std::mem::take(&mut parsed.sessions) {
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
        let end = (parsed.consumed as usize).min(bytes.len());
        fc.prefix_hash = cursor::prefix_hash(&bytes[..end]);
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
        if !exists(self.manager, &main.id)? {
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
            None => match super::codex::first_line(&source.path)? {
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
                let added = self.append_tail_and_remember(
                    fc,
                    &planned,
                    &id,
                    (sc.records, prefix),
                    sc.base,
                )?;
                self.count(added);
                return Ok(None);
            }
            self.refork(cursors, fc, &planned, &sc.id.clone())?;
            return Ok(None);
        }
        let id = planned.meta.id.clone();
        if exists(self.manager, &id)? {
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
                Some(p) if exists(self.manager, &p)? => Some(p),
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

    /// Append `planned.records[known..]` to session `id`, the first `known`
    /// having the (checked) chained digest `prefix`, then remember the
    /// session's cursor: the digest is extended with the new records only.
    fn append_tail_and_remember(
        &mut self,
        fc: &mut FileCursor,
        planned: &Planned,
        id: &str,
        (known, prefix): (usize, cursor::Digest),
        base: usize,
    ) -> Result<(usize, usize), ImportError> {
        let tail = &planned.records[known..];
        let added = self.append(id, tail)?;
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

/// Whether the store has a live session `id`.
fn exists(manager: &SessionManager, id: &str) -> Result<bool, ImportError> {
    match manager.store().read_header(id) {
        Ok(h) => Ok(h.is_some()),
        Err(crate::Error::NotFound(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

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
        if !exists(manager, &id)? {
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
