"""memoir as a LangGraph checkpointer (`BaseCheckpointSaver`).

One LangGraph thread is one memoir session (id from the thread id, see
`memoir._adapter.session_id_for`; header `source: {agent: "langgraph",
session: <thread_id>}`). Its log is a list of memoir messages (role
`system`, a one-line text for memoir's own tools) whose `langgraph` key
holds one of:

- `{"kind": "checkpoint", "ns", "id", "parent", "checkpoint", "metadata",
  "blobs"}`: one `put`. `checkpoint` (without its channel values) and
  `metadata` are the saver's `serde.dumps_typed` pairs, as `[type,
  base64]`; `blobs` are the values of the channels whose version this put
  created, `[[channel, version, type, base64], ...]` (a channel whose version
  did not change is not written again, as in `SqliteSaver`);
- `{"kind": "writes", "ns", "checkpoint_id", "task_id", "task_path",
  "writes": [[idx, channel, type, base64], ...]}`: one `put_writes`.
  Replaying keeps the first write of a `(task_id, idx)` and lets special
  channels (negative `idx`) replace, as `InMemorySaver` does.

The extended operations are memoir operations, so nothing is destroyed
without a trace: `copy_thread` is a fork by reference (no record copied),
`prune` and `delete_for_runs` are rewrites (the states they replaced stay in
the log: `revisions(thread_id)`, `restore_revision`), and so is
`delete_thread` (a rewrite to nothing: the thread id is free again at once,
the deleted checkpoints stay restorable; memoir's own delete + purge erase).

`prune(strategy="keep_latest")` keeps the latest checkpoint of each
namespace with every channel value it references and its pending writes;
it does not walk back for `DeltaChannel` snapshots (the pruned ancestors are
still in the log and can be restored).

`MemoirSaver` answers both the sync and the async methods (the async ones
run the store's blocking I/O in a worker thread; the native module releases
the GIL); `AsyncMemoirSaver` is the same saver as an async context manager
(`async with AsyncMemoirSaver.open(path) as saver`).
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    SerializerProtocol,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from memoir import _adapter
from memoir._memoir import Store

__all__ = ["MemoirSaver", "AsyncMemoirSaver", "Revision"]

AGENT = "langgraph"
KEY = "langgraph"
PREFIX = "lg"


Revision = _adapter.Revision


def _title(thread_id: str) -> str:
    return f"LangGraph thread {thread_id}"


def _pack(typed: tuple[str, bytes]) -> list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def _unpack(packed: Sequence[str]) -> tuple[str, bytes]:
    return (packed[0], base64.b64decode(packed[1]))


@dataclass
class _Checkpoint:
    ns: str
    id: str
    parent: str | None
    checkpoint: list[str]
    metadata: list[str]


@dataclass
class _Thread:
    """A thread's state, replayed from its session's messages."""

    checkpoints: dict[str, dict[str, _Checkpoint]] = field(default_factory=dict)
    blobs: dict[tuple[str, str, Any], list[str]] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], tuple[str, str, list[str], str]]] = field(
        default_factory=dict
    )
    """(ns, checkpoint id) -> (task id, idx) -> (task id, channel, packed value, task path)."""

    def apply(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "checkpoint":
            ns = record["ns"]
            for channel, version, typ, data in record.get("blobs", []):
                self.blobs[(ns, channel, _version_key(version))] = [typ, data]
            self.checkpoints.setdefault(ns, {})[record["id"]] = _Checkpoint(
                ns, record["id"], record.get("parent"), record["checkpoint"], record["metadata"]
            )
        elif kind == "writes":
            outer = self.writes.setdefault((record["ns"], record["checkpoint_id"]), {})
            task_id, task_path = record["task_id"], record.get("task_path", "")
            for idx, channel, typ, data in record["writes"]:
                inner = (task_id, idx)
                if idx >= 0 and inner in outer:
                    continue
                outer[inner] = (task_id, channel, [typ, data], task_path)

    def ordered_writes(self, ns: str, checkpoint_id: str) -> list[tuple[int, tuple[str, str, list[str], str]]]:
        """A checkpoint's writes as (idx, write), in `writes_sort_key` order."""
        stored = self.writes.get((ns, checkpoint_id), {})
        keys = sorted(stored, key=lambda k: writes_sort_key(stored[k][3], *k))
        return [(k[1], stored[k]) for k in keys]

    def records(self, keep: set[tuple[str, str]], serde: SerializerProtocol) -> list[dict[str, Any]]:
        """Messages that rebuild this state restricted to the checkpoints `keep` ((ns, id) pairs)."""
        out: list[dict[str, Any]] = []
        emitted: set[tuple[str, str, Any]] = set()
        for ns, cps in self.checkpoints.items():
            for cp in cps.values():
                if (ns, cp.id) not in keep:
                    continue
                versions = serde.loads_typed(_unpack(cp.checkpoint)).get("channel_versions", {})
                blobs = []
                for channel, version in versions.items():
                    key = (ns, channel, _version_key(version))
                    if key in self.blobs and key not in emitted:
                        emitted.add(key)
                        blobs.append([channel, version, *self.blobs[key]])
                out.append(_checkpoint_message(cp, blobs))
                for idx, (task_id, channel, packed, task_path) in self.ordered_writes(ns, cp.id):
                    out.append(_writes_message(ns, cp.id, task_id, task_path, [[idx, channel, *packed]]))
        return out


def _version_key(version: Any) -> Any:
    """Versions are compared as JSON gives them back (1 and 1.0 differ, as in SQL savers)."""
    return (type(version).__name__, version)


def _checkpoint_message(cp: _Checkpoint, blobs: list[list[Any]]) -> dict[str, Any]:
    return {
        "role": "system",
        "content": [{"type": "text", "text": f"langgraph checkpoint {cp.id} ns={cp.ns!r}"}],
        KEY: {
            "kind": "checkpoint",
            "ns": cp.ns,
            "id": cp.id,
            "parent": cp.parent,
            "checkpoint": cp.checkpoint,
            "metadata": cp.metadata,
            "blobs": blobs,
        },
    }


def _writes_message(
    ns: str, checkpoint_id: str, task_id: str, task_path: str, writes: list[list[Any]]
) -> dict[str, Any]:
    channels = ", ".join(sorted({str(w[1]) for w in writes}))
    return {
        "role": "system",
        "content": [{"type": "text", "text": f"langgraph writes to {channels} by task {task_id}"}],
        KEY: {
            "kind": "writes",
            "ns": ns,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "task_path": task_path,
            "writes": writes,
        },
    }


class MemoirSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints in a memoir store, one session per thread (see the module doc)."""

    def __init__(self, store: Store | str | os.PathLike[str], *, serde: SerializerProtocol | None = None) -> None:
        """Save into `store` (a `memoir.Store`, or a path/URL to open)."""
        super().__init__(serde=serde)
        self.store = store if isinstance(store, Store) else Store.open(os.fspath(store))

    # ----- threads ----------------------------------------------------------

    def session_of(self, thread_id: str) -> str:
        """The memoir session id of a thread."""
        return _adapter.session_id_for(PREFIX, thread_id)

    def _thread(self, thread_id: str) -> _Thread | None:
        messages = _adapter.load(self.store, self.session_of(thread_id))
        if messages is None:
            return None
        return self._replay(messages)

    def _replay(self, messages: list[dict[str, Any]]) -> _Thread:
        thread = _Thread()
        for m in messages:
            record = m.get(KEY)
            if isinstance(record, dict):
                thread.apply(record)
        return thread

    def _thread_ids(self) -> list[str]:
        return [sdk_id for _sid, sdk_id in _adapter.sessions_of(self.store, PREFIX, AGENT)]

    def _tuple(self, thread_id: str, thread: _Thread, cp: _Checkpoint) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed(_unpack(cp.checkpoint))
        values: dict[str, Any] = {}
        for channel, version in checkpoint.get("channel_versions", {}).items():
            packed = thread.blobs.get((cp.ns, channel, _version_key(version)))
            if packed is not None and packed[0] != "empty":
                values[channel] = self.serde.loads_typed(_unpack(packed))
        configurable = {"thread_id": thread_id, "checkpoint_ns": cp.ns}
        return CheckpointTuple(
            config={"configurable": {**configurable, "checkpoint_id": cp.id}},
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self.serde.loads_typed(_unpack(cp.metadata)),
            parent_config=({"configurable": {**configurable, "checkpoint_id": cp.parent}} if cp.parent else None),
            pending_writes=[
                (task_id, channel, self.serde.loads_typed(_unpack(packed)))
                for _idx, (task_id, channel, packed, _path) in thread.ordered_writes(cp.ns, cp.id)
            ],
        )

    # ----- BaseCheckpointSaver: reads ----------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (its `checkpoint_id`), else the thread's latest in its namespace."""
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        thread = self._thread(thread_id)
        if thread is None:
            return None
        cps = thread.checkpoints.get(ns, {})
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            cp = cps.get(checkpoint_id)
        else:
            cp = cps[max(cps)] if cps else None
        return None if cp is None else self._tuple(thread_id, thread, cp)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (and namespace, id) or of all threads."""
        conf = config["configurable"] if config else {}
        thread_ids = [conf["thread_id"]] if "thread_id" in conf else self._thread_ids()
        want_ns = conf.get("checkpoint_ns")
        want_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        remaining = limit
        for thread_id in thread_ids:
            thread = self._thread(thread_id)
            if thread is None:
                continue
            for ns, cps in thread.checkpoints.items():
                if want_ns is not None and ns != want_ns:
                    continue
                for checkpoint_id in sorted(cps, reverse=True):
                    if want_id and checkpoint_id != want_id:
                        continue
                    if before_id and checkpoint_id >= before_id:
                        continue
                    cp = cps[checkpoint_id]
                    if filter:
                        metadata = self.serde.loads_typed(_unpack(cp.metadata))
                        if not all(metadata.get(k) == v for k, v in filter.items()):
                            continue
                    if remaining is not None:
                        if remaining <= 0:
                            return
                        remaining -= 1
                    yield self._tuple(thread_id, thread, cp)

    # ----- BaseCheckpointSaver: writes ---------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append one checkpoint (and the channel values whose version it created)."""
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        c = checkpoint.copy()
        values: dict[str, Any] = c.pop("channel_values")  # type: ignore[misc]
        blobs = [
            [k, v, *_pack(self.serde.dumps_typed(values[k]) if k in values else ("empty", b""))]
            for k, v in new_versions.items()
        ]
        cp = _Checkpoint(
            ns=ns,
            id=checkpoint["id"],
            parent=conf.get("checkpoint_id"),
            checkpoint=_pack(self.serde.dumps_typed(c)),
            metadata=_pack(self.serde.dumps_typed(get_checkpoint_metadata(config, metadata))),
        )
        self._append(thread_id, [_checkpoint_message(cp, blobs)])
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append the writes of one task to the checkpoint `config` names."""
        if not writes:
            return
        conf = config["configurable"]
        packed = [
            [WRITES_IDX_MAP.get(channel, idx), channel, *_pack(self.serde.dumps_typed(value))]
            for idx, (channel, value) in enumerate(writes)
        ]
        message = _writes_message(conf.get("checkpoint_ns", ""), conf["checkpoint_id"], task_id, task_path, packed)
        self._append(conf["thread_id"], [message])

    def _append(self, thread_id: str, messages: list[dict[str, Any]]) -> None:
        sid = self.session_of(thread_id)
        with _adapter.lock_for(self.store, sid):
            _adapter.append(self.store, sid, messages, agent=AGENT, sdk_id=thread_id, title=_title(thread_id))

    # ----- extended operations ----------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint and write of the thread: a rewrite to nothing.

        The log keeps them (`revisions`, `restore_revision`), and the thread id
        can be used again at once, on every store. To erase a thread for good,
        delete its memoir session and purge it (`store.delete(saver.session_of(t))`,
        `store.purge(...)`).
        """
        self._rewrite(thread_id, lambda _thread: set())

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Make `target_thread_id` a fork by reference of `source_thread_id` (every checkpoint and write)."""
        source = self.session_of(source_thread_id)
        target = self.session_of(target_thread_id)
        with _adapter.lock_for(self.store, source):
            messages = _adapter.load(self.store, source)
            if not messages:
                return
            if _adapter.load(self.store, target):
                raise ValueError(f"copy_thread: target thread {target_thread_id!r} already has checkpoints")
            _adapter.fork_state(
                self.store, source, None, target, title=_title(target_thread_id), agent=AGENT, sdk_id=target_thread_id
            )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's latest checkpoint (`keep_latest`) or none (`delete`); a rewrite."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r} (keep_latest or delete)")
        for thread_id in thread_ids:

            def keep(thread: _Thread) -> set[tuple[str, str]]:
                if strategy == "delete":
                    return set()
                return {(ns, max(cps)) for ns, cps in thread.checkpoints.items() if cps}

            self._rewrite(thread_id, keep)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop every checkpoint (and its writes) whose metadata `run_id` is in `run_ids`; rewrites."""
        runs = set(run_ids)
        if not runs:
            return
        for thread_id in self._thread_ids():

            def keep(thread: _Thread) -> set[tuple[str, str]]:
                return {
                    (ns, cp.id)
                    for ns, cps in thread.checkpoints.items()
                    for cp in cps.values()
                    if self.serde.loads_typed(_unpack(cp.metadata)).get("run_id") not in runs
                }

            self._rewrite(thread_id, keep)

    def _rewrite(self, thread_id: str, keep_of: Callable[[_Thread], set[tuple[str, str]]]) -> None:
        """Rewrite the thread to the checkpoints `keep_of(thread)` names (no record when nothing changes)."""

        def change(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            thread = self._replay(messages)
            keep = keep_of(thread)
            everything = {(ns, i) for ns, cps in thread.checkpoints.items() for i in cps}
            if keep == everything and (keep or not messages):
                return None
            return thread.records(keep, self.serde)

        sid = self.session_of(thread_id)
        with _adapter.lock_for(self.store, sid):
            _adapter.rewrite_from(self.store, sid, change)

    def revisions(self, thread_id: str) -> list[Revision]:
        """The states of a thread that prunes and run deletions replaced, oldest first.

        `messages` counts the thread's records (one per `put`, one per `put_writes`).
        """
        return _adapter.revisions(self.store, self.session_of(thread_id))

    def restore_revision(self, thread_id: str, revision: Revision, *, target_thread_id: str) -> None:
        """Bring a replaced state back as a new thread (a fork of the log at that point, by reference)."""
        target = self.session_of(target_thread_id)
        with _adapter.lock_for(self.store, target):
            if _adapter.load(self.store, target):
                raise ValueError(f"restore_revision: target thread {target_thread_id!r} already has checkpoints")
            _adapter.fork_state(
                self.store,
                self.session_of(thread_id),
                revision.seq,
                target,
                title=_title(target_thread_id),
                agent=AGENT,
                sdk_id=target_thread_id,
            )

    def stored_blob_count(self, thread_id: str) -> int:
        """How many channel values the thread's log holds (for tests and diagnostics)."""
        thread = self._thread(thread_id)
        return 0 if thread is None else len(thread.blobs)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded increasing versions (`InMemorySaver`'s scheme), so they sort as strings."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{0:016}"

    # ----- async twins (the blocking I/O runs in a worker thread) -------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async `get_tuple`."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async `list`."""
        items = await asyncio.to_thread(lambda: list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async `put`."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async `put_writes`."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async `delete_thread`."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async `copy_thread`."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async `prune`."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async `delete_for_runs`."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    @classmethod
    @contextmanager
    def open(cls, path: str | os.PathLike[str], **kwargs: Any) -> Iterator[MemoirSaver]:
        """`with MemoirSaver.open(path) as saver:` (mirrors `SqliteSaver.from_conn_string`)."""
        yield cls(Store.open(os.fspath(path)), **kwargs)


class AsyncMemoirSaver(MemoirSaver):
    """`MemoirSaver` for asyncio code: `async with AsyncMemoirSaver.open(path) as saver:`."""

    @classmethod
    @asynccontextmanager
    async def open(cls, path: str | os.PathLike[str], **kwargs: Any) -> AsyncIterator[AsyncMemoirSaver]:  # type: ignore[override]
        """Open the store in a worker thread and yield the saver."""
        store = await asyncio.to_thread(Store.open, os.fspath(path))
        yield cls(store, **kwargs)
