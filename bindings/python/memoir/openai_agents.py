"""memoir as the session store of the OpenAI Agents SDK (`agents.memory.Session`).

`MemoirSession(session_id, store)` stores one SDK session in one memoir
session (id from `session_id`, see `memoir._adapter.session_id_for`; header
`source: {agent: "openai-agents", session: <session_id>}`):

- `add_items` appends one message per item, in one batch (fsync'd at the
  store's durability). A plain `{"role", "content": str}` item becomes a
  plain memoir text message; any other item is kept verbatim under the
  message's `openai_item` key, next to a text rendering for memoir's own
  tools (show, search, recall), so every item comes back deep-equal.
- `pop_item` and `clear_session` are memoir *rewrites*: the log keeps every
  item ever added; `revisions()` lists the states that rewrites replaced and
  `fork(new_id, revision=k)` brings one back as a new session (undo).
- `get_items(limit)` returns the latest `limit` items (the session settings'
  limit when None; 0 -> none; negative -> all, as `SQLiteSession` does).
- Every method takes the SDK's optional `wrapper` keyword: with a
  `scope=callable(wrapper) -> str`, each scope (e.g. a tenant) gets its own
  memoir session; without one the wrapper is ignored.

`MemoirCompactionSession` adds `run_compaction` (the SDK's
`OpenAIResponsesCompactionAwareSession`): a caller-supplied `compactor`
turns the history into a shorter one, recorded as one rewrite. The SDK's own
`OpenAIResponsesCompactionSession` may also wrap a `MemoirSession`: its
history replacement is then one rewrite too (`_atomic_replace_items`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any, Union

from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

from memoir import _adapter
from memoir._memoir import Store

__all__ = ["MemoirSession", "MemoirCompactionSession", "Revision"]

AGENT = "openai-agents"
ITEM_KEY = "openai_item"
_PLAIN_ROLES = ("user", "assistant", "system")

Revision = _adapter.Revision
Item = dict[str, Any]
Scope = Callable[[Any], Union[str, None]]
Compactor = Callable[[list[Item], dict[str, Any]], Union[list[Item], Awaitable[list[Item]]]]


def item_to_message(item: Item) -> dict[str, Any]:
    """The memoir message that stores one SDK item (lossless; see the module doc)."""
    if set(item) == {"role", "content"} and item["role"] in _PLAIN_ROLES and isinstance(item["content"], str):
        return {"role": item["role"], "content": [{"type": "text", "text": item["content"]}]}
    text = _text_of(item)
    return {
        "role": _role_of(item),
        "content": [{"type": "text", "text": text}] if text else [],
        ITEM_KEY: item,
    }


def message_to_item(message: dict[str, Any]) -> Item:
    """The SDK item a memoir message stores (a message memoir wrote itself reads as text)."""
    if ITEM_KEY in message:
        return message[ITEM_KEY]
    text = "".join(b.get("text", "") for b in message.get("content", []) if b.get("type") == "text")
    return {"role": message.get("role", "user"), "content": text}


def _role_of(item: Item) -> str:
    role = item.get("role")
    if role in _PLAIN_ROLES:
        return role
    if role == "developer":
        return "system"
    kind = str(item.get("type", ""))
    return "tool" if kind.endswith("_output") else "assistant"


def _text_of(item: Item) -> str:
    """A plain-text rendering of an item, for memoir's search and display only."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for value in (content, item.get("summary")):  # message parts; a reasoning item's summary
        if isinstance(value, list):
            parts += [str(p["text"]) for p in value if isinstance(p, dict) and "text" in p]
    if item.get("type") == "function_call":
        parts.append(f"{item.get('name', '')}({item.get('arguments', '')})")
    output = item.get("output")
    if isinstance(output, str):
        parts.append(output)
    return "\n".join(p for p in parts if p)


def _normalise(items: list[Item]) -> list[Item]:
    """Items as JSON would bring them back (tuples -> lists); TypeError for what JSON cannot hold."""
    return json.loads(json.dumps(items, allow_nan=False))


class MemoirSession:
    """An OpenAI Agents SDK session stored in a memoir store (see the module doc)."""

    def __init__(
        self,
        session_id: str,
        store: Store | str | os.PathLike[str],
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        scope: Scope | None = None,
    ) -> None:
        """Open (lazily create) the session `session_id` in `store` (a `memoir.Store`, or a path/URL to open)."""
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )
        self.store = store if isinstance(store, Store) else Store.open(os.fspath(store))
        self._scope = scope
        self._closed = False

    # ----- which memoir session ------------------------------------------

    def memoir_session(self, wrapper: Any = None) -> str:
        """The id of the memoir session that holds this SDK session (for `wrapper`'s scope)."""
        return _adapter.session_id_for("oa", self._sdk_key(wrapper))

    def _sdk_key(self, wrapper: Any) -> str:
        scope = self._scope(wrapper) if (self._scope is not None and wrapper is not None) else None
        return self.session_id if scope is None else f"{self.session_id}\x1f{scope}"

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("MemoirSession is closed")

    # ----- the SDK's Session protocol --------------------------------------

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Item]:
        """The latest `limit` items in order (all when the effective limit is None)."""
        self._check_open()
        effective = resolve_session_limit(limit, self.session_settings)
        sid = self.memoir_session(wrapper)
        items = await asyncio.to_thread(self._items, sid)
        if effective is None or effective < 0:
            return items
        return items[-effective:] if effective > 0 else []

    async def add_items(self, items: list[Item], *, wrapper: Any = None) -> None:
        """Append `items` (one batch, one fsync)."""
        self._check_open()
        if not items:
            return
        messages = [item_to_message(i) for i in _normalise(list(items))]
        sid = self.memoir_session(wrapper)
        key = self._sdk_key(wrapper)
        await _settle(asyncio.to_thread(self._append, sid, key, messages))

    async def pop_item(self, *, wrapper: Any = None) -> Item | None:
        """Remove and return the newest item (a rewrite: the log keeps it); None when empty."""
        self._check_open()
        return await _settle(asyncio.to_thread(self._pop, self.memoir_session(wrapper)))

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Empty the session (a rewrite to no items: the log keeps them)."""
        self._check_open()
        await _settle(asyncio.to_thread(self._replace, self.memoir_session(wrapper), self._sdk_key(wrapper), None))

    # ----- what memoir adds ---------------------------------------------------

    async def revisions(self, *, wrapper: Any = None) -> list[Revision]:
        """The states that pops, clears and compactions replaced, oldest first."""
        self._check_open()
        sid = self.memoir_session(wrapper)
        return await asyncio.to_thread(_adapter.revisions, self.store, sid)

    async def fork(self, new_session_id: str, *, revision: int | None = None, wrapper: Any = None) -> MemoirSession:
        """A new session starting from this one's current state, or from `revisions()[revision]` (undo).

        The fork references this session's log (nothing is copied); both go on independently.
        """
        self._check_open()
        sid = self.memoir_session(wrapper)
        child = MemoirSession(new_session_id, self.store, session_settings=self.session_settings)
        target = child.memoir_session()

        def fork() -> None:
            at_seq = None
            if revision is not None:
                at_seq = _adapter.revisions(self.store, sid)[revision].seq
            _adapter.fork_state(self.store, sid, at_seq, target, title=new_session_id, agent=AGENT, sdk_id=new_session_id)

        await asyncio.to_thread(fork)
        return child

    def close(self) -> None:
        """Mark the session closed (the store stays open for its other users)."""
        self._closed = True

    async def _atomic_replace_items(self, items: list[Item]) -> bool:
        """The SDK compaction wrapper's hook: replace the whole history in one rewrite."""
        self._check_open()
        normalised = _normalise(list(items))
        await _settle(asyncio.to_thread(self._replace, self.memoir_session(), self._sdk_key(None), normalised))
        return True

    # ----- blocking parts (run in a worker thread) -------------------------

    def _items(self, sid: str) -> list[Item]:
        messages = _adapter.load(self.store, sid)
        return [] if messages is None else [message_to_item(m) for m in messages]

    def _append(self, sid: str, key: str, messages: list[dict[str, Any]]) -> None:
        with _adapter.lock_for(self.store, sid):
            _adapter.append(self.store, sid, messages, agent=AGENT, sdk_id=key, title=self.session_id)

    def _pop(self, sid: str) -> Item | None:
        with _adapter.lock_for(self.store, sid):
            seen = _adapter.rewrite_from(self.store, sid, lambda messages: messages[:-1] if messages else None)
            return message_to_item(seen[-1]) if seen else None

    def _replace(self, sid: str, key: str, items: list[Item] | None) -> None:
        new = [item_to_message(i) for i in items or []]
        with _adapter.lock_for(self.store, sid):
            seen = _adapter.rewrite_from(self.store, sid, lambda messages: None if messages == new else new)
            if seen is None and new:
                # Nothing stored yet: the replacement is a plain append.
                _adapter.append(self.store, sid, new, agent=AGENT, sdk_id=key, title=self.session_id)


class MemoirCompactionSession(MemoirSession):
    """A `MemoirSession` with `run_compaction` (the SDK's compaction-aware protocol).

    `compactor(items, args)` (sync or async) returns the compacted history; it
    runs when `args["force"]` is true or `should_compact(items, args)` says so
    (default: 20 items or more). The result is recorded as one rewrite, so
    the uncompacted history stays in the log (`revisions()`, `fork`).
    """

    def __init__(
        self,
        session_id: str,
        store: Store | str | os.PathLike[str],
        *,
        compactor: Compactor,
        should_compact: Callable[[list[Item], dict[str, Any]], bool] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        scope: Scope | None = None,
    ) -> None:
        """Like `MemoirSession`, with the `compactor` that `run_compaction` applies."""
        super().__init__(session_id, store, session_settings=session_settings, scope=scope)
        self._compactor = compactor
        self._should_compact = should_compact or (lambda items, _args: len(items) >= 20)

    async def run_compaction(self, args: dict[str, Any] | None = None, *, wrapper: Any = None) -> None:
        """Compact the history now if forced or due (see the class doc)."""
        self._check_open()
        args = dict(args or {})
        sid = self.memoir_session(wrapper)
        items = await asyncio.to_thread(self._items, sid)
        if not items or not (args.get("force") or self._should_compact(items, args)):
            return
        compacted = self._compactor(items, args)
        if inspect.isawaitable(compacted):
            compacted = await compacted
        await _settle(asyncio.to_thread(self._replace, sid, self._sdk_key(wrapper), _normalise(list(compacted))))


async def _settle(awaitable: Awaitable[Any]) -> Any:
    """Await a store mutation to its end even if the caller is cancelled meanwhile.

    A write handed to a worker thread cannot be taken back: reporting the
    cancellation before it settles would let the caller believe it did not happen.
    """
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    result = task.result()
    if cancelled is not None:
        raise cancelled
    return result
