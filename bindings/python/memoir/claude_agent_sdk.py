"""memoir as the session store of the Claude Agent SDK.

:class:`MemoirSessionStore` implements the SDK's ``SessionStore`` protocol
(``append``, ``load``, ``list_sessions``, ``list_session_summaries``,
``delete``, ``list_subkeys``) over a :class:`memoir.Store`, so a mirrored
session lives in memoir's checksummed, crash-safe log (a directory, or a
``memoir serve`` server shared by a team)::

    from claude_agent_sdk import ClaudeAgentOptions
    from memoir.claude_agent_sdk import MemoirSessionStore

    options = ClaudeAgentOptions(session_store=MemoirSessionStore("./sessions"))

How keys map onto memoir:

- each ``(project_key, session_id)`` is one memoir session whose id is
  derived from the key (``cc-<h(project_key)>-<h(session_id)>``, 16 hex
  digits of SHA-256 each), and whose header's ``source`` names the key
  (``agent: "claude-agent-sdk"``, ``session``, ``project_key``);
- a subagent subpath (``subagents/agent-<id>``) is a child session
  (``cc-<hp>-<hs>-<h(subpath)>``) whose header's ``source`` has
  ``kind: "subagent"``, ``subpath`` and ``parent_session`` (the main
  session's memoir id), as memoir's Claude Code importer tags subagents;
- each entry is one record of the application kind ``sdk_entry``
  (``{"record": "sdk_entry", "entry": <the entry, verbatim>}``): entries come
  back deep-equal and in order;
- the summary the SDK folds (``fold_session_summary``) is an ``sdk_summary``
  record written in the SAME atomic batch as the entries it folds, so the
  sidecar can never disagree with the transcript after a crash. Its
  ``mtime`` and ``list_sessions``' ``mtime`` are both the session's last
  activity in the store (the file's modification time for a directory), one
  clock, as the protocol requires.

Semantics the SDK asks for:

- retried batches are de-duplicated by ``entry["uuid"]`` (entries without a
  ``uuid`` are always appended);
- appends to one session are serialised in this process (a lock per
  session) and across processes (each batch is written with the seq it
  expects; a lost race re-reads the session and retries);
- ``delete`` of a main key moves the session and all its subagent sessions
  to memoir's trash (``Store.restore`` undoes it); a key with a subpath
  deletes only that child. Appending to a deleted key starts a new session
  (the trashed one is purged then).

Every call runs the native library in a worker thread
(``asyncio.to_thread``), so the event loop is never blocked on fsync.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from ._memoir import ConflictError, NotFoundError, Store

__all__ = ["MemoirSessionStore", "session_id_for"]

#: The ``source.agent`` of the sessions this adapter writes.
AGENT = "claude-agent-sdk"
#: The record kind of one SDK entry.
ENTRY_KIND = "sdk_entry"
#: The record kind of the folded session summary.
SUMMARY_KIND = "sdk_summary"
#: How often a batch is retried after losing a race to another writer.
MAX_RACES = 16

_ID_PREFIX = "cc-"
_HASH_HEX = 16


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_HEX]


def _project_prefix(project_key: str) -> str:
    return f"{_ID_PREFIX}{_h(project_key)}-"


def _main_id(project_key: str, session_id: str) -> str:
    return f"{_project_prefix(project_key)}{_h(session_id)}"


def session_id_for(key: SessionKey) -> str:
    """The memoir session id holding the transcript of ``key``."""
    main = _main_id(key["project_key"], key["session_id"])
    subpath = key.get("subpath")
    return f"{main}-{_h(subpath)}" if subpath else main


def _epoch_ms(stamp: str) -> int:
    """Milliseconds since the epoch of an RFC 3339 UTC time with up to 9
    fractional digits (``2026-01-01T00:00:00.123456789Z``)."""
    text = stamp.rstrip("Z")
    if text.endswith("+00:00"):
        text = text[: -len("+00:00")]
    whole, _, frac = text.partition(".")
    seconds = datetime.fromisoformat(whole + "+00:00").timestamp()
    millis = int((frac + "000")[:3]) if frac else 0
    return int(seconds) * 1000 + millis


def _mtime_of(entry: dict[str, Any]) -> int:
    """A listing entry's last activity in epoch ms (the store's write time)."""
    stamp = entry.get("stamp")
    if isinstance(stamp, dict) and isinstance(stamp.get("mtime_ns"), int) and stamp["mtime_ns"] > 0:
        return int(stamp["mtime_ns"]) // 1_000_000
    return _epoch_ms(entry.get("last_activity") or entry["created_at"])


@dataclass
class _State:
    """What this process knows of one session's log: the seq its next
    record gets, the entry uuids it holds and its last folded summary."""

    next_seq: int
    uuids: set[str] = field(default_factory=set)
    summary: SessionSummaryEntry | None = None


class MemoirSessionStore(SessionStore):
    """A Claude Agent SDK ``SessionStore`` backed by a memoir store.

    ``store`` is a :class:`memoir.Store`, or a location for
    :meth:`memoir.Store.open` (a directory, ``http(s)://`` with ``token``).
    Appends are acknowledged at the store's durability (``fsync`` by
    default: each batch survives power loss once ``append`` returns).
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        token: str | None = None,
        durability: str = "fsync",
    ) -> None:
        if isinstance(store, Store):
            self.store = store
        else:
            self.store = Store.open(os.fspath(store), token=token, durability=durability)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._states: dict[str, _State] = {}
        # Immutable facts read from headers: memoir id -> session_id / subpath.
        self._names: dict[str, tuple[str, str | None]] = {}

    # ----- SessionStore ----------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Mirror a batch of entries (one atomic memoir append)."""
        if not entries:
            return
        await asyncio.to_thread(self._append, key, list(entries))

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """The entries of ``key`` in append order, or ``None`` if never written."""
        return await asyncio.to_thread(self._load, key)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The main sessions of ``project_key`` with their mtime (epoch ms)."""
        return await asyncio.to_thread(self._list_sessions, project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The persisted summaries of ``project_key``'s main sessions."""
        return await asyncio.to_thread(self._list_summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        """Delete ``key`` (to memoir's trash); a main key takes its subkeys along."""
        await asyncio.to_thread(self._delete, key)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a main session."""
        return await asyncio.to_thread(self._list_subkeys, key)

    # ----- the synchronous core (runs in worker threads) -------------------

    def _lock(self, sid: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(sid)
            if lock is None:
                lock = self._locks[sid] = threading.Lock()
            return lock

    def _read_state(self, sid: str) -> _State | None:
        """The state of ``sid`` read from the store (``None``: no live session)."""
        try:
            records, report = self.store.records(sid, kinds=[ENTRY_KIND, SUMMARY_KIND])
        except NotFoundError:
            return None
        state = _State(next_seq=report["last_seq"] + 1)
        for r in records:
            if r["record"] == ENTRY_KIND:
                uuid = r["entry"].get("uuid") if isinstance(r["entry"], dict) else None
                if isinstance(uuid, str):
                    state.uuids.add(uuid)
            else:
                state.summary = r["summary"]
        return state

    def _create(self, key: SessionKey, sid: str) -> None:
        source: dict[str, Any] = {
            "agent": AGENT,
            "session": key["session_id"],
            "project_key": key["project_key"],
        }
        subpath = key.get("subpath")
        if subpath:
            source.update(
                kind="subagent",
                subpath=subpath,
                parent_session=_main_id(key["project_key"], key["session_id"]),
            )
        meta = {"kind": AGENT, "source": source}
        try:
            self.store.create(id=sid, meta=meta)
        except ConflictError:
            # Taken: created meanwhile by another writer (then it reads), or
            # a deleted session of this key still in the trash (purge it:
            # the SDK asked for it to be gone, and the key starts afresh).
            if self._read_state(sid) is not None:
                return
            self.store.purge(sid)
            self.store.create(id=sid, meta=meta)

    def _append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        sid = session_id_for(key)
        main = not key.get("subpath")
        with self._lock(sid):
            for _ in range(MAX_RACES):
                state = self._states.get(sid) or self._read_state(sid)
                if state is None:
                    self._create(key, sid)
                    state = self._read_state(sid)
                    if state is None:
                        raise NotFoundError(f"session {sid} vanished while it was created")
                seen = set(state.uuids)
                fresh: list[SessionStoreEntry] = []
                for entry in entries:
                    uuid = entry.get("uuid") if isinstance(entry, dict) else None
                    if isinstance(uuid, str):
                        if uuid in seen:
                            continue
                        seen.add(uuid)
                    fresh.append(entry)
                if not fresh:
                    self._states[sid] = state
                    return
                records: list[dict[str, Any]] = [
                    {"record": ENTRY_KIND, "entry": e} for e in fresh
                ]
                summary = None
                if main:
                    summary = fold_session_summary(state.summary, key, fresh)
                    records.append({"record": SUMMARY_KIND, "summary": summary})
                try:
                    written = self.store.append_records(
                        sid, records, expected_seq=state.next_seq
                    )
                except ConflictError:
                    # Another writer appended first: re-read and re-filter.
                    self._states.pop(sid, None)
                    continue
                except NotFoundError:
                    # Deleted behind our back: start over (recreates it).
                    self._states.pop(sid, None)
                    continue
                if written is None:  # unreachable: `records` is never empty
                    raise ConflictError(f"session {sid}: the batch was not written")
                state.next_seq = written[1] + 1
                state.uuids = seen
                if summary is not None:
                    state.summary = summary
                self._states[sid] = state
                return
            raise ConflictError(f"session {sid}: lost {MAX_RACES} races to other writers")

    def _load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        sid = session_id_for(key)
        try:
            records, _ = self.store.records(sid, kinds=[ENTRY_KIND])
        except NotFoundError:
            return None
        return [r["entry"] for r in records]

    def _name(self, sid: str) -> tuple[str, str | None]:
        """``(session_id, subpath)`` of one of this adapter's sessions."""
        name = self._names.get(sid)
        if name is None:
            source = self.store.header(sid).get("source") or {}
            name = (source.get("session", ""), source.get("subpath"))
            self._names[sid] = name
        return name

    def _entries(self, prefix: str) -> list[dict[str, Any]]:
        return [e for e in self.store.list() if e["id"].startswith(prefix)]

    def _mains(self, project_key: str) -> list[tuple[str, str, int, int]]:
        """``(memoir id, session_id, mtime, last_seq)`` of the project's main sessions."""
        prefix = _project_prefix(project_key)
        out = []
        for e in self._entries(prefix):
            if "-" in e["id"][len(prefix) :]:
                continue  # a subagent session
            try:
                session_id, _ = self._name(e["id"])
            except NotFoundError:
                continue  # deleted since the listing
            out.append((e["id"], session_id, _mtime_of(e), int(e["last_seq"])))
        return out

    def _list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        return [
            {"session_id": session_id, "mtime": mtime}
            for _, session_id, mtime, _ in self._mains(project_key)
        ]

    def _list_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        out: list[SessionSummaryEntry] = []
        for sid, session_id, mtime, last_seq in self._mains(project_key):
            with self._lock(sid):
                # The cached state is current when it ends where the log does.
                state = self._states.get(sid)
                if state is None or state.next_seq != last_seq + 1:
                    state = self._read_state(sid)
                    if state is None:
                        continue
                    self._states[sid] = state
            if state.summary is None:
                continue
            summary = dict(state.summary)
            summary["session_id"] = session_id
            summary["mtime"] = mtime
            out.append(summary)  # type: ignore[arg-type]
        return out

    def _delete(self, key: SessionKey) -> None:
        sid = session_id_for(key)
        targets = [sid]
        if not key.get("subpath"):
            targets += [e["id"] for e in self._entries(sid + "-")]
        for target in targets:
            with self._lock(target):
                self.store.delete(target)
                self._states.pop(target, None)

    def _list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        main = _main_id(key["project_key"], key["session_id"])
        out = []
        for e in self._entries(main + "-"):
            try:
                _, subpath = self._name(e["id"])
            except NotFoundError:
                continue
            if subpath:
                out.append(subpath)
        return out
