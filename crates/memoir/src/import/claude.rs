//! Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl`,
//! subagents in `<session>/subagents/agent-<id>.jsonl` or, older,
//! `agent-<id>.jsonl`) into planned memoir sessions.
//!
//! The `uuid`/`parentUuid` tree is rebuilt (across `compact_boundary` through
//! `logicalParentUuid`); a parent that is not in the file is reported and the
//! entry hangs from the previous entry in file order. The main line ends at
//! the newest message (the last in the file); every other branch holding
//! messages (a rewind or edit) becomes a fork by reference of the line it
//! leaves, at the branch point. Inline sidechains (`isSidechain`) become child
//! sessions linked to the `Task`/`Agent` call that spawned them (through
//! `agentId`, else the call whose run covers their time). Assistant lines that
//! share `message.id` (one response split per content block) merge into one
//! message whose usage is the last line's. Every entry that is not a message
//! (system, progress, snapshots, titles, the 2026 metadata records, unknown
//! types) is kept verbatim as a source record; `custom-title`/`ai-title`/
//! `summary` also rename the session. `content-replacement` records only
//! describe how Claude Code masks tool results in the model's context: the
//! file keeps the original results, which are what is imported. A resumed
//! session's leading lines that repeat another file's
//! ([`ParseContext::repeated_lines`], decided by the caller) are left out:
//! the main session continues from them by reference.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use serde_json::{json, Map, Value};

use super::cursor::TailState;
use super::lines::{self, Line};
use super::{
    make_id, source_record, str_of, time_of, Agent, ForkAt, ForkFrom, ParentRef, ParseContext,
    Parsed, Planned, Skipped,
};
use crate::message::anthropic::{from_anthropic, usage_from_anthropic};
use crate::message::{Block, Message, Role, UsageSource, SOURCE_KEY};
use crate::record::{Record, SessionMeta, SourceRef};

const AGENT: Agent = Agent::ClaudeCode;

/// Envelope keys already carried by the message or its source trace.
const TRACE_KEYS: &[&str] = &["uuid", "parentUuid", "timestamp", "requestId", "message"];

/// Parse one Claude Code JSONL file.
pub fn parse(path: &Path, bytes: &[u8], ctx: &ParseContext) -> Parsed {
    parse_lines(path, lines::parse(path, bytes), ctx)
}

/// Parse one Claude Code JSONL file, already split into lines.
pub(crate) fn parse_lines(path: &Path, file: lines::JsonlFile, ctx: &ParseContext) -> Parsed {
    let mut parsed = Parsed {
        skipped: file.skipped,
        torn: file.torn,
        consumed: file.consumed,
        complete_lines: file.complete_lines,
        ..Parsed::default()
    };
    let mut entries = file.lines;
    // A resumed session's repeated lines are its predecessor's: not
    // imported again (the main session continues from them by reference).
    let first_time = entries.iter().find_map(|e| time_of(&e.value, "timestamp"));
    let (repeated, last_repeated) = take_repeated(&mut entries, ctx.repeated_lines);
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let child_file = is_child_path(path);
    let tree = Tree::build(&entries, child_file, path, &repeated, &mut parsed.notes);
    if ctx.repeated_lines > 0 {
        parsed.continues_from = tree
            .main
            .first()
            .and_then(|&i| str_of(&entries[i].value, "parentUuid"))
            .filter(|p| repeated.contains(*p))
            .map(str::to_string)
            .or(last_repeated);
    }

    let session_id = entries
        .iter()
        .find_map(|e| str_of(&e.value, "sessionId"))
        .map(str::to_string);
    let main_id = if child_file {
        let parent = session_id
            .clone()
            .unwrap_or_else(|| parent_dir_session(path));
        make_id(AGENT, &[&parent, &stem])
    } else {
        make_id(AGENT, &[&stem])
    };
    let parent_session = session_id
        .clone()
        .filter(|_| child_file)
        .map(|sid| make_id(AGENT, &[&sid]));

    // Who spawned which subagent (for this file's sidechains and for
    // subagent files read later).
    let calls = agent_calls(&entries, &tree.main);
    for c in &calls {
        if let Some(agent) = &c.agent_id {
            parsed.spawns.insert(agent.clone(), c.tool_use_id.clone());
        }
    }

    // ----- the main line and its branches ----------------------------------
    let mut out: Vec<Planned> = Vec::new();
    let main_leaf = tree
        .main
        .iter()
        .rev()
        .copied()
        .find(|&i| is_message(&entries[i]));
    let mut queue: Vec<LineJob> = vec![LineJob {
        key: "main".into(),
        id: main_id.clone(),
        start: None,
        leaf: main_leaf,
        parent: None,
        inherited: 0,
    }];
    let mut on_line: HashSet<usize> = HashSet::new();
    let mut jobs_done: Vec<(LineJob, Vec<usize>)> = Vec::new();
    while let Some(job) = queue.pop() {
        let path_nodes = match job.leaf {
            Some(leaf) => tree.path(job.start, leaf),
            None => Vec::new(),
        };
        on_line.extend(path_nodes.iter().copied());
        // Branches leave this line at any of its nodes.
        let on_this: HashSet<usize> = path_nodes.iter().copied().collect();
        for &n in path_nodes.iter().rev() {
            for &c in tree.children.get(&n).map(Vec::as_slice).unwrap_or(&[]) {
                if on_this.contains(&c) {
                    continue;
                }
                if let Some(leaf) = tree.last_message.get(&c).copied() {
                    let uuid = str_of(&entries[c].value, "uuid").unwrap_or("").to_string();
                    let short: String = uuid
                        .chars()
                        .filter(|c| c.is_ascii_alphanumeric())
                        .take(12)
                        .collect();
                    queue.push(LineJob {
                        key: format!("branch:{uuid}"),
                        id: branch_id(&job.id, &short),
                        start: Some(c),
                        leaf: Some(leaf),
                        parent: Some((job.key.clone(), n)),
                        inherited: 0,
                    });
                }
            }
        }
        jobs_done.push((job, path_nodes));
    }
    // Main first, then branches in the order found (parents before children).
    let mut message_counts: HashMap<String, HashMap<usize, usize>> = HashMap::new();
    let main_extras: Vec<usize> = (0..entries.len())
        .filter(|i| !on_line.contains(i) && !tree.sidechain.contains(i))
        .collect();
    let mut main_meta: Option<SessionMeta> = None;
    let mut custom_title = false;
    for (job, path_nodes) in jobs_done {
        let (fork, inherited) = match &job.parent {
            Some((pkey, node)) => {
                let n = message_counts
                    .get(pkey)
                    .and_then(|m| m.get(node))
                    .copied()
                    .unwrap_or(0);
                (
                    Some(ForkFrom {
                        parent: ParentRef::Key(pkey.clone()),
                        at: ForkAt::Messages(n),
                    }),
                    n,
                )
            }
            None => (None, job.inherited),
        };
        let mut stream = path_nodes.clone();
        if job.key == "main" {
            stream.extend(main_extras.iter().copied());
            stream.sort_unstable();
        }
        let mut counts = HashMap::new();
        let mut titled = false;
        let records = build_records(
            &mut entries,
            &stream,
            &ctx.cuts,
            job.key == "main",
            inherited,
            &mut counts,
            &mut titled,
        );
        if job.key == "main" {
            custom_title = titled;
        }
        message_counts.insert(job.key.clone(), counts);
        let mut meta = header(
            &entries,
            &stream,
            &job.id,
            path,
            session_id.as_deref(),
            &records,
        );
        if job.key == "main" && ctx.repeated_lines > 0 {
            // A resumed session starts with its source's first record.
            if let Some(t) = first_time {
                meta.created_at = t;
            }
            if let Some(src) = meta.source.as_mut() {
                src.extra
                    .insert("repeated_lines".into(), json!(ctx.repeated_lines));
            }
        }
        if let Some(src) = meta.source.as_mut() {
            if child_file {
                src.extra.insert("kind".into(), json!("subagent"));
                let agent_id = stem.strip_prefix("agent-").unwrap_or(&stem).to_string();
                if let Some(tool) = ctx.spawns.get(&agent_id) {
                    src.extra.insert("tool_use_id".into(), json!(tool));
                }
                src.extra.insert("agent_id".into(), json!(agent_id));
                if let Some(p) = &parent_session {
                    src.extra.insert("parent_session".into(), json!(p));
                }
            }
            if let Some(start) = job.start {
                src.extra.insert("kind".into(), json!("branch"));
                src.extra.insert(
                    "branch_uuid".into(),
                    json!(str_of(&entries[start].value, "uuid")),
                );
            }
        }
        if job.key == "main" {
            main_meta = Some(meta.clone());
        } else if let (Some(m), Some(t)) = (&main_meta, &meta.title) {
            if m.title.as_ref() == Some(t) {
                meta.title = Some(format!("Branch: {t}"));
            }
        }
        out.push(Planned {
            key: job.key,
            meta,
            fork,
            records,
        });
    }

    // ----- inline sidechains: child sessions ---------------------------------
    if !child_file && !tree.sidechain.is_empty() {
        for group in sidechain_groups(&entries, &tree, &calls) {
            let mut counts = HashMap::new();
            let records = build_records(
                &mut entries,
                &group.nodes,
                &ctx.cuts,
                false,
                0,
                &mut counts,
                &mut false,
            );
            let id = make_id(AGENT, &[&stem, "agent", &group.key]);
            let mut meta = header(
                &entries,
                &group.nodes,
                &id,
                path,
                session_id.as_deref(),
                &records,
            );
            if let Some(src) = meta.source.as_mut() {
                src.extra.insert("kind".into(), json!("subagent"));
                src.extra.insert("parent_session".into(), json!(main_id));
                if let Some(a) = &group.agent_id {
                    src.extra.insert("agent_id".into(), json!(a));
                }
                if let Some(call) = &group.call {
                    src.extra
                        .insert("tool_use_id".into(), json!(call.tool_use_id));
                    if let Some(d) = &call.description {
                        meta.title = Some(crate::manager::short_title(d));
                    }
                }
            }
            if group.call.is_none() {
                parsed.notes.push(Skipped {
                    file: path.to_path_buf(),
                    line: entries[group.nodes[0]].number,
                    reason: "sidechain not linked to a spawning Task/Agent call".into(),
                });
            }
            out.push(Planned {
                key: format!("agent:{}", group.key),
                meta,
                fork: None,
                records,
            });
        }
    }
    parsed.sessions = out;
    parsed.tail = main_leaf.and_then(|leaf| tail_state(&entries, &tree, leaf, custom_title));
    parsed
}

/// Remove the first `lines` lines (a resumed session's repeated history)
/// from `entries`: their uuids, and the uuid of the last of them on the
/// main thread.
fn take_repeated(entries: &mut Vec<Line>, lines: u64) -> (HashSet<String>, Option<String>) {
    if lines == 0 {
        return (HashSet::new(), None);
    }
    let split = entries.partition_point(|e| e.number <= lines);
    let mut uuids = HashSet::new();
    let mut last = None;
    for e in entries.drain(..split) {
        if let Some(u) = str_of(&e.value, "uuid") {
            if e.value.get("isSidechain") != Some(&Value::Bool(true)) {
                last = Some(u.to_string());
            }
            uuids.insert(u.to_string());
        }
    }
    (uuids, last)
}

/// The id of a branch leaving the session `of` at the entry whose uuid
/// starts with `short`: `<of>-b-<short>` (the agent prefix once), or a
/// hashed id when that would not validate.
fn branch_id(of: &str, short: &str) -> String {
    let id = format!("{of}-b-{short}");
    if crate::id::validate(&id).is_ok() {
        return id;
    }
    let rest = of
        .strip_prefix(AGENT.id_prefix())
        .and_then(|r| r.strip_prefix('-'))
        .unwrap_or(of);
    make_id(AGENT, &[rest, "b", short])
}

/// Most entries a resumable main line may have below its last message.
const MAX_LEAF: usize = 4096;

/// The state a later run resumes from: the main line's last message and
/// the (message-free) entries below it, and the last main entry.
fn tail_state(entries: &[Line], tree: &Tree, leaf: usize, custom_title: bool) -> Option<TailState> {
    let mut below: HashSet<usize> = HashSet::from([leaf]);
    let mut leaf_uuids = vec![str_of(&entries[leaf].value, "uuid")?.to_string()];
    for &i in tree.main.iter().filter(|&&i| i > leaf) {
        if tree.parent.get(&i).is_some_and(|p| below.contains(p)) {
            below.insert(i);
            leaf_uuids.push(str_of(&entries[i].value, "uuid")?.to_string());
        }
    }
    if leaf_uuids.len() > MAX_LEAF {
        return None;
    }
    let last_main = tree
        .main
        .last()
        .and_then(|&i| str_of(&entries[i].value, "uuid"))
        .map(str::to_string);
    Some(TailState::ClaudeCode {
        leaf: leaf_uuids,
        last_main,
        custom_title,
    })
}

/// Parse only what was appended to a file after its first `lines_before`
/// lines, from the state the previous import left. `None` when the new
/// entries do not simply continue the main line (a rewind branch, a
/// sidechain, a parent the state does not know): then the file is parsed
/// again in full. The records returned go after the main session's; the
/// first new message never merges into the last imported one (its line is
/// returned in [`Parsed::cuts`] so a full parse later agrees).
pub fn parse_tail(
    path: &Path,
    bytes: &[u8],
    lines_before: u64,
    state: &TailState,
    ctx: &ParseContext,
) -> Option<Parsed> {
    let TailState::ClaudeCode {
        leaf,
        last_main,
        custom_title,
    } = state
    else {
        return None;
    };
    let file = lines::parse_from(path, bytes, lines_before);
    let child_file = is_child_path(path);
    let mut entries = file.lines;
    let known: HashSet<&str> = leaf.iter().map(String::as_str).collect();
    // Parent of each new entry with a uuid: `Some(i)` a new entry, `None` the known leaf.
    let mut parent: HashMap<usize, Option<usize>> = HashMap::new();
    let mut by_uuid: HashMap<&str, usize> = HashMap::new();
    let mut prev_main: Option<&str> = last_main.as_deref();
    for (i, e) in entries.iter().enumerate() {
        let Some(uuid) = str_of(&e.value, "uuid") else {
            continue;
        };
        if !child_file && e.value.get("isSidechain") == Some(&Value::Bool(true)) {
            return None;
        }
        if known.contains(uuid) || by_uuid.contains_key(uuid) {
            return None;
        }
        let named =
            str_of(&e.value, "parentUuid").or_else(|| str_of(&e.value, "logicalParentUuid"));
        match named.or(prev_main) {
            Some(p) if by_uuid.contains_key(p) => parent.insert(i, Some(by_uuid[p])),
            Some(p) if known.contains(p) => parent.insert(i, None),
            _ => return None,
        };
        by_uuid.insert(uuid, i);
        prev_main = Some(uuid);
    }
    let messages: Vec<usize> = (0..entries.len())
        .filter(|&i| is_message(&entries[i]))
        .collect();
    let mut leaf_uuids: Vec<String>;
    match messages.last() {
        None => {
            leaf_uuids = leaf.clone();
            leaf_uuids.extend(
                parent
                    .keys()
                    .filter_map(|&i| str_of(&entries[i].value, "uuid").map(str::to_string)),
            );
        }
        Some(&new_leaf) => {
            let mut on_path: HashSet<usize> = HashSet::new();
            let mut at = Some(new_leaf);
            while let Some(i) = at {
                on_path.insert(i);
                at = parent.get(&i).copied().flatten();
            }
            if messages.iter().any(|m| !on_path.contains(m)) {
                return None; // a branch with messages: the full parse plans it
            }
            let mut below: HashSet<usize> = HashSet::from([new_leaf]);
            leaf_uuids = vec![str_of(&entries[new_leaf].value, "uuid")?.to_string()];
            for (i, e) in entries.iter().enumerate().skip(new_leaf + 1) {
                if parent
                    .get(&i)
                    .copied()
                    .flatten()
                    .is_some_and(|p| below.contains(&p))
                {
                    below.insert(i);
                    leaf_uuids.push(str_of(&e.value, "uuid")?.to_string());
                }
            }
        }
    }
    let mut cuts = ctx.cuts.clone();
    let mut new_cuts = Vec::new();
    if let Some(&first) = messages.first() {
        let n = entries[first].number;
        if str_of(&entries[first].value, "type") == Some("assistant") && cuts.insert(n) {
            new_cuts.push(n);
        }
    }
    // Subagent links, before the records take the contents out.
    let mut spawns = HashMap::new();
    let mut mains: Vec<usize> = by_uuid.values().copied().collect();
    mains.sort_unstable();
    for c in agent_calls(&entries, &mains) {
        if let Some(agent) = c.agent_id {
            spawns.insert(agent, c.tool_use_id);
        }
    }
    for e in &entries {
        spawned_by_result(e, &mut spawns);
    }
    let last_main = prev_main.map(str::to_string);
    let stream: Vec<usize> = (0..entries.len()).collect();
    let mut titled = *custom_title;
    let records = build_records(
        &mut entries,
        &stream,
        &cuts,
        true,
        0,
        &mut HashMap::new(),
        &mut titled,
    );
    let mut parsed = Parsed {
        skipped: file.skipped,
        torn: file.torn,
        consumed: file.consumed,
        complete_lines: file.complete_lines,
        cuts: new_cuts,
        resumed: true,
        spawns,
        ..Parsed::default()
    };
    parsed.tail = (leaf_uuids.len() <= MAX_LEAF).then_some(TailState::ClaudeCode {
        leaf: leaf_uuids,
        last_main,
        custom_title: titled,
    });
    parsed.sessions.push(Planned {
        key: "main".into(),
        meta: SessionMeta::new(""),
        fork: None,
        records,
    });
    Some(parsed)
}

/// A tool result naming the subagent it ran (`toolUseResult.agentId`)
/// whose call was imported earlier: agent id → tool call id.
fn spawned_by_result(e: &Line, spawns: &mut HashMap<String, String>) {
    let Some(agent) = e
        .value
        .get("toolUseResult")
        .and_then(|r| r.get("agentId"))
        .and_then(Value::as_str)
    else {
        return;
    };
    let Some(content) = e
        .value
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for block in content {
        if block.get("type").and_then(Value::as_str) == Some("tool_result") {
            if let Some(id) = block.get("tool_use_id").and_then(Value::as_str) {
                spawns
                    .entry(agent.to_string())
                    .or_insert_with(|| id.to_string());
            }
        }
    }
}

/// Subagent files: under `subagents/`, or the older `agent-*.jsonl`.
pub(super) fn is_child_path(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "subagents")
        || path
            .file_stem()
            .is_some_and(|s| s.to_string_lossy().starts_with("agent-"))
}

#[derive(Debug, Clone, Default)]
struct LineJob {
    key: String,
    id: String,
    /// First node of a branch (`None`: from the root).
    start: Option<usize>,
    leaf: Option<usize>,
    /// The line this one branches off, and the node it leaves at.
    parent: Option<(String, usize)>,
    inherited: usize,
}

/// The lines of one API response and of the tool results answering it.
///
/// Claude Code writes a response as one line per content block, sharing
/// `message.id`, each line's `parentUuid` the previous line; a tool
/// result names the line of ITS call as parent (`sourceToolAssistantUUID`
/// the same). Parallel calls therefore look like siblings under the
/// response's lines, although the conversation is one line: the response,
/// then every result. A unit chains its members in file order, and an
/// entry hanging from any member (the next prompt or response) hangs from
/// the unit's latest member before it, so only a true fork (two prompts or
/// responses after the same turn: a rewind, an edited or re-sent prompt)
/// makes siblings.
#[derive(Default)]
struct Units {
    /// Per member line: its unit.
    unit_of: HashMap<usize, usize>,
    /// Per unit: its member lines, in file order.
    members: Vec<Vec<usize>>,
}

impl Units {
    fn of(entries: &[Line], by_uuid: &HashMap<&str, usize>, side: &dyn Fn(usize) -> bool) -> Units {
        let mut units = Units::default();
        let mut by_response: HashMap<&str, usize> = HashMap::new();
        let mut by_call: HashMap<&str, usize> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            if side(i) || str_of(&e.value, "uuid").is_none() || !is_message(e) {
                continue;
            }
            let v = &e.value;
            let blocks = v
                .get("message")
                .and_then(|m| m.get("content"))
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let parent = str_of(v, "parentUuid").and_then(|p| by_uuid.get(p).copied());
            let unit = if str_of(v, "type") == Some("assistant") {
                let Some(id) = v
                    .get("message")
                    .and_then(|m| m.get("id"))
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                // Another line of the response: it follows one of its members.
                let joined = by_response
                    .get(id)
                    .copied()
                    .filter(|&u| parent.is_some_and(|p| units.unit_of.get(&p) == Some(&u)));
                let u = joined.unwrap_or_else(|| {
                    units.members.push(Vec::new());
                    units.members.len() - 1
                });
                by_response.insert(id, u);
                for b in blocks {
                    if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                        if let Some(call) = b.get("id").and_then(Value::as_str) {
                            by_call.insert(call, u);
                        }
                    }
                }
                Some(u)
            } else {
                // A tool result: the unit of the call it answers.
                str_of(v, "sourceToolAssistantUUID")
                    .and_then(|s| by_uuid.get(s))
                    .and_then(|s| units.unit_of.get(s).copied())
                    .or_else(|| {
                        blocks.iter().find_map(|b| {
                            (b.get("type").and_then(Value::as_str) == Some("tool_result"))
                                .then(|| b.get("tool_use_id").and_then(Value::as_str))
                                .flatten()
                                .and_then(|c| by_call.get(c).copied())
                        })
                    })
            };
            if let Some(u) = unit {
                units.members[u].push(i);
                units.unit_of.insert(i, u);
            }
        }
        units
    }

    /// The parent of entry `i` whose named parent is `named`: a member
    /// follows the previous member of its unit; an entry naming a member
    /// of another unit follows that unit's latest member before it.
    fn parent_of(&self, i: usize, named: Option<usize>) -> Option<usize> {
        let latest_before = |u: usize| {
            self.members[u]
                .iter()
                .copied()
                .take_while(|&m| m < i)
                .last()
        };
        if let Some(&u) = self.unit_of.get(&i) {
            if self.members[u].first() != Some(&i) {
                return latest_before(u);
            }
        }
        match named.and_then(|p| self.unit_of.get(&p)) {
            Some(&u) if self.unit_of.get(&i) != Some(&u) => latest_before(u).or(named),
            _ => named,
        }
    }
}

/// The parent links of a file's entries (indices into the entries).
struct Tree {
    parent: HashMap<usize, usize>,
    children: BTreeMap<usize, Vec<usize>>,
    /// Main-thread nodes, in file order.
    main: Vec<usize>,
    /// Sidechain nodes (inline subagents), in file order.
    sidechain: HashSet<usize>,
    /// Per node: the last message node of its subtree.
    last_message: HashMap<usize, usize>,
}

impl Tree {
    /// `repeated`: uuids of the lines a resumed session repeats (removed):
    /// an entry naming one of them starts the session's own lines.
    fn build(
        entries: &[Line],
        child_file: bool,
        path: &Path,
        repeated: &HashSet<String>,
        notes: &mut Vec<Skipped>,
    ) -> Tree {
        let mut by_uuid: HashMap<&str, usize> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            if let Some(u) = str_of(&e.value, "uuid") {
                by_uuid.entry(u).or_insert(i);
            }
        }
        let side = |i: usize| {
            !child_file && entries[i].value.get("isSidechain") == Some(&Value::Bool(true))
        };
        let mut tree = Tree {
            parent: HashMap::new(),
            children: BTreeMap::new(),
            main: Vec::new(),
            sidechain: HashSet::new(),
            last_message: HashMap::new(),
        };
        let units = Units::of(entries, &by_uuid, &side);
        let mut prev_main: Option<usize> = None;
        for (i, e) in entries.iter().enumerate() {
            if str_of(&e.value, "uuid").is_none() {
                continue;
            }
            let named =
                str_of(&e.value, "parentUuid").or_else(|| str_of(&e.value, "logicalParentUuid"));
            let found = named
                .and_then(|p| by_uuid.get(p).copied())
                .filter(|&p| p < i);
            let found = if side(i) {
                found
            } else {
                units.parent_of(i, found)
            };
            if side(i) {
                tree.sidechain.insert(i);
                if let Some(p) = found.filter(|&p| side(p)) {
                    tree.parent.insert(i, p);
                }
                continue;
            }
            let parent = match (named, found) {
                (_, Some(p)) if !side(p) => Some(p),
                (Some(missing), _) if prev_main.is_none() && repeated.contains(missing) => None,
                (Some(missing), _) => {
                    notes.push(Skipped {
                        file: path.to_path_buf(),
                        line: e.number,
                        reason: format!(
                            "parent {missing} is not in the file; attached in file order"
                        ),
                    });
                    prev_main
                }
                (None, _) => prev_main,
            };
            if let Some(p) = parent {
                tree.parent.insert(i, p);
                tree.children.entry(p).or_default().push(i);
            }
            tree.main.push(i);
            prev_main = Some(i);
        }
        for &i in tree.main.iter().rev() {
            let mine = tree
                .last_message
                .get(&i)
                .copied()
                .or_else(|| is_message(&entries[i]).then_some(i));
            if let Some(m) = mine {
                tree.last_message.insert(i, m);
                if let Some(&p) = tree.parent.get(&i) {
                    let slot = tree.last_message.entry(p).or_insert(m);
                    *slot = (*slot).max(m);
                }
            }
        }
        tree
    }

    /// The nodes from `start` (or the root) down to `leaf`, in order.
    fn path(&self, start: Option<usize>, leaf: usize) -> Vec<usize> {
        let mut out = vec![leaf];
        let mut at = leaf;
        while Some(at) != start {
            match self.parent.get(&at) {
                Some(&p) => {
                    out.push(p);
                    at = p;
                }
                None => break,
            }
        }
        out.reverse();
        out
    }
}

fn is_message(e: &Line) -> bool {
    matches!(str_of(&e.value, "type"), Some("user" | "assistant"))
        && e.value.get("message").is_some_and(Value::is_object)
}

/// `<session>/subagents/agent-x.jsonl` → `<session>`.
fn parent_dir_session(path: &Path) -> String {
    path.parent()
        .and_then(|p| {
            if p.ends_with("subagents") {
                p.parent()
            } else {
                Some(p)
            }
        })
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Turn a stream of entries into records: messages (split responses
/// merged), source records, and renames (main line only).
fn build_records(
    entries: &mut [Line],
    stream: &[usize],
    cuts: &BTreeSet<u64>,
    main: bool,
    inherited: usize,
    counts: &mut HashMap<usize, usize>,
    custom_title: &mut bool,
) -> Vec<Record> {
    let mut records: Vec<Record> = Vec::with_capacity(stream.len());
    let mut last_message: Option<usize> = None;
    let mut messages = inherited;
    for &i in stream {
        if is_message(&entries[i]) {
            let m = to_message(&mut entries[i]);
            let merge = m.role == Role::Assistant
                && !cuts.contains(&entries[i].number)
                && m.provider_id.is_some()
                && last_message.is_some_and(|k| match &records[k] {
                    Record::Message(prev) => {
                        prev.role == Role::Assistant
                            && prev.provider_id == m.provider_id
                            && request_id(prev) == request_id(&m)
                    }
                    _ => false,
                });
            match (merge, last_message) {
                (true, Some(k)) => {
                    if let Record::Message(prev) = &mut records[k] {
                        merge_into(prev, m);
                    }
                }
                _ => {
                    records.push(Record::Message(m));
                    last_message = Some(records.len() - 1);
                    messages += 1;
                }
            }
            counts.insert(i, messages);
            continue;
        }
        let e = &entries[i];
        let kind = str_of(&e.value, "type").unwrap_or("");
        counts.insert(i, messages);
        records.push(source_record(AGENT, e.number, e.value.clone()));
        if !main {
            continue;
        }
        let title = match kind {
            "custom-title" => {
                *custom_title = true;
                str_of(&e.value, "customTitle")
            }
            "ai-title" if !*custom_title => str_of(&e.value, "aiTitle"),
            "summary" if !*custom_title => str_of(&e.value, "summary"),
            _ => None,
        };
        if let Some(t) = title.filter(|t| !t.trim().is_empty()) {
            records.push(Record::Title {
                title: t.to_string(),
            });
        }
    }
    records
}

/// One message entry as a memoir message, with its source trace. The
/// entry's `message.content` and `toolUseResult` (the bulky parts) are
/// moved out of it, not copied: nothing reads them after this.
fn to_message(e: &mut Line) -> Message {
    let number = e.number;
    let v = &mut e.value;
    let is_assistant = str_of(v, "type") == Some("assistant");
    let role = if is_assistant { "assistant" } else { "user" };
    let content = v
        .get_mut("message")
        .and_then(|m| m.get_mut("content"))
        .map(Value::take)
        .unwrap_or(Value::Array(Vec::new()));
    let wire = json!({"role": role, "content": content});
    let mut m = match from_anthropic(None, std::slice::from_ref(&wire)) {
        Ok(mut v) if v.len() == 1 => v.remove(0),
        _ => {
            let mut wire = wire;
            let content = wire
                .get_mut("content")
                .map(Value::take)
                .unwrap_or(Value::Null);
            Message::new(
                if is_assistant {
                    Role::Assistant
                } else {
                    Role::User
                },
                vec![Block::Unknown(content)],
            )
        }
    };
    let v = &mut e.value;
    m.timestamp = time_of(v, "timestamp");
    let msg = v.get("message").and_then(Value::as_object);
    if let (true, Some(msg)) = (is_assistant, msg) {
        m.provider_id = str_of(msg, "id").map(str::to_string);
        m.model = str_of(msg, "model").map(str::to_string);
        if let Some(u) = msg.get("usage").and_then(|u| usage_from_anthropic(u).ok()) {
            let mut u = u;
            // A line written before the response finished carries placeholder counts.
            if msg.get("stop_reason").is_none_or(Value::is_null) {
                u.source = UsageSource::Transcript;
            }
            m.usage = Some(u);
        }
    }
    let mut trace = Map::new();
    trace.insert("line".into(), json!(number));
    for (key, name) in [
        ("uuid", "uuid"),
        ("parentUuid", "parent_uuid"),
        ("requestId", "request_id"),
    ] {
        if let Some(s) = str_of(v, key) {
            trace.insert(name.into(), json!(s));
        }
    }
    if v.get("isMeta") == Some(&Value::Bool(true)) {
        trace.insert("is_meta".into(), json!(true));
    }
    if v.get("isCompactSummary") == Some(&Value::Bool(true)) {
        trace.insert("compact_summary".into(), json!(true));
    }
    let rest: Map<String, Value> = v
        .get("message")
        .and_then(Value::as_object)
        .map(|msg| {
            msg.iter()
                .filter(|(k, _)| k.as_str() != "content")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut entry: Map<String, Value> = Map::new();
    for (k, val) in v.iter_mut() {
        if TRACE_KEYS.contains(&k.as_str()) {
            continue;
        }
        let val = if k == "toolUseResult" {
            val.take()
        } else {
            val.clone()
        };
        entry.insert(k.clone(), val);
    }
    entry.insert("message".into(), Value::Object(rest));
    trace.insert("entry".into(), Value::Object(entry));
    m.extra.insert(SOURCE_KEY.into(), Value::Object(trace));
    m
}

/// The `requestId` of the line a message came from: the lines of one split
/// response share it, a different response reusing a `message.id` does not.
fn request_id(m: &Message) -> Option<&str> {
    m.extra
        .get(SOURCE_KEY)
        .and_then(|t| t.get("request_id"))
        .and_then(Value::as_str)
}

/// Fold the next line of a split response into the message: its blocks are
/// appended, its usage (the response's final counts) replaces the earlier.
fn merge_into(prev: &mut Message, next: Message) {
    prev.content.extend(next.content);
    if next.usage.is_some() {
        prev.usage = next.usage;
    }
    let Some(Value::Object(trace)) = prev.extra.get_mut(SOURCE_KEY) else {
        return;
    };
    let Some(Value::Object(next_trace)) = next.extra.get(SOURCE_KEY) else {
        return;
    };
    let parts = trace
        .entry("merged")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(parts) = parts {
        let mut part = next_trace.clone();
        if let Some(at) = next.timestamp {
            part.insert(
                "timestamp".into(),
                json!(at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            );
        }
        parts.push(Value::Object(part));
    }
}

/// The header of a planned session made of `stream`.
fn header(
    entries: &[Line],
    stream: &[usize],
    id: &str,
    path: &Path,
    session_id: Option<&str>,
    records: &[Record],
) -> SessionMeta {
    let first = |key: &str| {
        stream
            .iter()
            .find_map(|&i| str_of(&entries[i].value, key).map(str::to_string))
    };
    let mut meta = SessionMeta::new(id);
    meta.created_at = stream
        .iter()
        .find_map(|&i| time_of(&entries[i].value, "timestamp"))
        .unwrap_or_else(chrono::Utc::now);
    meta.provider = "anthropic".into();
    meta.model = records
        .iter()
        .find_map(|r| match r {
            Record::Message(m) => m.model.clone().filter(|m| !m.starts_with('<')),
            _ => None,
        })
        .unwrap_or_default();
    meta.workspace = first("cwd").map(Into::into).unwrap_or_default();
    meta.title = title_of(records);
    meta.kind = Some("imported".into());
    let mut extra = Map::new();
    if let Some(b) = first("gitBranch").filter(|b| !b.is_empty()) {
        extra.insert("git_branch".into(), json!(b));
    }
    meta.source = Some(SourceRef {
        agent: AGENT.as_str().into(),
        agent_version: first("version"),
        session: session_id.map(str::to_string),
        path: Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
        extra,
    });
    meta
}

/// The first real prompt: not harness metadata, not a compaction summary.
fn title_of(records: &[Record]) -> Option<String> {
    super::first_user_title_of(records.iter().filter(|r| match r {
        Record::Message(m) => {
            let trace = m.extra.get(SOURCE_KEY);
            let flag = |k: &str| trace.and_then(|t| t.get(k)) == Some(&Value::Bool(true));
            !flag("is_meta") && !flag("compact_summary")
        }
        _ => false,
    }))
}

/// A `Task`/`Agent` call of the main thread and what came back.
#[derive(Debug, Clone)]
struct AgentCall {
    tool_use_id: String,
    description: Option<String>,
    called: Option<chrono::DateTime<chrono::Utc>>,
    answered: Option<chrono::DateTime<chrono::Utc>>,
    agent_id: Option<String>,
}

fn agent_calls(entries: &[Line], main: &[usize]) -> Vec<AgentCall> {
    let mut calls: Vec<AgentCall> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for &i in main {
        let v = &entries[i].value;
        let Some(content) = v
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use")
                    if matches!(
                        block.get("name").and_then(Value::as_str),
                        Some("Task" | "Agent")
                    ) =>
                {
                    let id = block
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    by_id.insert(id.clone(), calls.len());
                    calls.push(AgentCall {
                        tool_use_id: id,
                        description: block
                            .get("input")
                            .and_then(|i| i.get("description"))
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        called: time_of(v, "timestamp"),
                        answered: None,
                        agent_id: None,
                    });
                }
                Some("tool_result") => {
                    let id = block
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if let Some(&k) = by_id.get(id) {
                        calls[k].answered = time_of(v, "timestamp");
                        calls[k].agent_id = v
                            .get("toolUseResult")
                            .and_then(|r| r.get("agentId"))
                            .and_then(Value::as_str)
                            .or_else(|| str_of(v, "agentId"))
                            .map(str::to_string);
                    }
                }
                _ => {}
            }
        }
    }
    calls
}

/// Inline sidechain entries grouped into subagent runs.
struct SideGroup {
    key: String,
    agent_id: Option<String>,
    call: Option<AgentCall>,
    nodes: Vec<usize>,
}

fn sidechain_groups(entries: &[Line], tree: &Tree, calls: &[AgentCall]) -> Vec<SideGroup> {
    // Connected runs of sidechain entries.
    let mut nodes: Vec<usize> = tree.sidechain.iter().copied().collect();
    nodes.sort_unstable();
    let mut root_of: HashMap<usize, usize> = HashMap::new();
    for &i in &nodes {
        let root = tree
            .parent
            .get(&i)
            .and_then(|p| root_of.get(p))
            .copied()
            .unwrap_or(i);
        root_of.insert(i, root);
    }
    let mut runs: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &i in &nodes {
        runs.entry(root_of[&i]).or_default().push(i);
    }
    let mut groups: Vec<SideGroup> = Vec::new();
    for (_, run) in runs {
        let agent_id = run
            .iter()
            .find_map(|&i| str_of(&entries[i].value, "agentId").map(str::to_string));
        let when = run
            .iter()
            .find_map(|&i| time_of(&entries[i].value, "timestamp"));
        let call = agent_id
            .as_ref()
            .and_then(|a| calls.iter().find(|c| c.agent_id.as_ref() == Some(a)))
            .or_else(|| {
                let t = when?;
                calls.iter().rfind(|c| {
                    c.called.is_some_and(|c| c <= t) && c.answered.is_none_or(|a| t <= a)
                })
            })
            .cloned();
        let key: String = call
            .as_ref()
            .and_then(|c| {
                c.agent_id
                    .clone()
                    .or_else(|| agent_id.clone())
                    .or_else(|| Some(c.tool_use_id.clone()))
            })
            .or_else(|| agent_id.clone())
            .unwrap_or_else(|| {
                str_of(&entries[run[0]].value, "uuid")
                    .unwrap_or("sidechain")
                    .to_string()
            })
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        match groups.iter_mut().find(|g| g.key == key) {
            Some(g) => {
                g.nodes.extend(run);
                g.nodes.sort_unstable();
                if g.agent_id.is_none() {
                    g.agent_id = agent_id;
                }
            }
            None => groups.push(SideGroup {
                key,
                agent_id: agent_id.or_else(|| call.as_ref().and_then(|c| c.agent_id.clone())),
                call,
                nodes: run,
            }),
        }
    }
    groups
}
