"""What the OpenAI Agents and LangGraph adapters share (private).

- `session_id_for`: an SDK's own id (any string) -> a memoir session id that
  is deterministic, valid (`crate::id::validate`) and collision-free: safe
  ids stay readable (`oa-chat_1`), anything else is hashed (`oa~<sha256>`);
  the original id is kept in the session header's `source.session`.
- `lock_for`: one lock per (store, session) in this process, so a
  read-modify-write (pop, rewrite, dedup) never interleaves with another.
- `rewrite_from`: a read-modify-write of a session's messages that is
  written only if nothing landed in between (`expected_seq`), retried otherwise.
- `Revision` / `revisions`: the states a session had just before each
  `rewrite` record (pop, clear, compaction, prune): history is never
  destroyed, and each of them can be forked back (`fork_revision`).

Every call into the native module (`memoir._memoir`) that the adapters make
goes through here.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoir._memoir import ConflictError, NotFoundError, Store

_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+=-]{0,99}")

_locks_guard = threading.Lock()
_locks: dict[tuple[str, str], threading.RLock] = {}


def session_id_for(prefix: str, sdk_id: str) -> str:
    """The memoir session id holding the SDK object `sdk_id` (`prefix` names the SDK)."""
    if _SAFE.fullmatch(sdk_id) and ".." not in sdk_id:
        return f"{prefix}-{sdk_id}"
    digest = hashlib.sha256(sdk_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"{prefix}~{digest}"


def lock_for(store: Store, session: str) -> threading.RLock:
    """The process-wide lock of one session of one store."""
    key = (store.location, session)
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock


@dataclass(frozen=True)
class Revision:
    """A state a session had just before one of its rewrites replaced it."""

    seq: int
    """The record seq that state ends at (fork there to get it back)."""
    messages: int
    """How many messages (SDK items, LangGraph records) the state had."""


def revisions(store: Store, session: str) -> list[Revision]:
    """The states the session's own rewrites replaced, oldest first ([] for a missing session)."""
    try:
        found = store.revisions(session)
    except NotFoundError:
        return []
    return [Revision(seq=r["seq"], messages=r["messages"]) for r in found]


def append(store: Store, session: str, messages: list[dict[str, Any]], *, agent: str, sdk_id: str, title: str) -> None:
    """Append `messages` as one batch, creating the session (header `source: {agent, session: sdk_id}`) first if needed."""
    try:
        store.append(session, messages)
        return
    except NotFoundError:
        pass
    try:
        store.create(title=title, meta={"source": {"agent": agent, "session": sdk_id}}, id=session)
    except ConflictError:
        pass  # created meanwhile by another writer
    store.append(session, messages)


def load(store: Store, session: str) -> list[dict[str, Any]] | None:
    """The session's current messages, or None when it does not exist."""
    try:
        messages, _report = store.load(session)
    except NotFoundError:
        return None
    return messages


def rewrite_from(
    store: Store,
    session: str,
    change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None],
    *,
    attempts: int = 32,
) -> list[dict[str, Any]] | None:
    """Rewrite `session` to `change(current messages)` (None: leave it) unless another writer got in between.

    The rewrite is written only if no record landed since the read (`expected_seq`);
    a lost race re-reads and retries, so a read-modify-write (pop, prune) is safe
    across processes, not only across this process's threads (`lock_for`).
    Returns the messages `change` saw (None for a missing session).
    """
    for attempt in range(attempts):
        if attempt:
            time.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))  # jittered backoff after a lost race
        try:
            messages, report = store.load(session)
        except NotFoundError:
            return None
        new = change(messages)
        if new is None:
            return messages
        try:
            store.rewrite(session, new, expected_seq=report["last_seq"] + 1)
            return messages
        except ConflictError:
            continue
    raise ConflictError(f"session {session} kept changing under a rewrite ({attempts} attempts)")


def fork_state(store: Store, session: str, at_seq: int | None, target: str, *, title: str, agent: str, sdk_id: str) -> None:
    """Fork `session` as of record `at_seq` (its current state when None) into `target`, by reference."""
    store.fork_state(session, at_seq=at_seq, id=target, title=title, source={"agent": agent, "session": sdk_id})


def sessions_of(store: Store, prefix: str, agent: str) -> list[tuple[str, str]]:
    """(memoir id, SDK id) of every live session an adapter (`prefix`, `agent`) wrote, oldest first."""
    out = []
    for entry in store.list():
        sid = entry["id"]
        source = entry.get("source") or {}
        if sid[: len(prefix) + 1] in (f"{prefix}-", f"{prefix}~") and source.get("agent") == agent:
            out.append((entry.get("created_at", ""), sid, source.get("session", "")))
    return [(sid, sdk_id) for _created, sid, sdk_id in sorted(out)]


def delete(store: Store, session: str) -> bool:
    """Move a session to the trash; False when there is none."""
    return store.delete(session)
