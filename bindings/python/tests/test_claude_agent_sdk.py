"""The Claude Agent SDK adapter: the SDK's own conformance suite, plus the
semantics the suite does not cover (retry de-duplication, concurrency,
persistence across store objects, the memoir mapping)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from claude_agent_sdk.testing import run_session_store_conformance

import memoir
from memoir.claude_agent_sdk import MemoirSessionStore, session_id_for

_dirs = itertools.count()


async def test_sdk_conformance_on_a_directory(tmp_path):
    def make():
        d = tmp_path / f"s{next(_dirs)}"
        return MemoirSessionStore(str(d))

    await run_session_store_conformance(make)


async def test_sdk_conformance_in_memory():
    await run_session_store_conformance(lambda: MemoirSessionStore(memoir.Store.memory()))


KEY = {"project_key": "proj", "session_id": "5f2c-uuid"}


def entry(uuid, n, **extra):
    return {"type": "user", "uuid": uuid, "n": n, **extra}


async def test_retried_batches_are_deduplicated_by_uuid(store_dir):
    s = MemoirSessionStore(str(store_dir))
    batch = [entry("a", 1), entry("b", 2)]
    await s.append(KEY, batch)
    await s.append(KEY, batch)  # the SDK's retry of a batch that did land
    await s.append(KEY, [entry("b", 2), entry("c", 3), {"type": "title", "t": "no uuid"}])
    await s.append(KEY, [{"type": "title", "t": "no uuid"}])
    got = await s.load(KEY)
    assert [e.get("uuid") for e in got] == ["a", "b", "c", None, None]
    # A fresh adapter over the same directory knows the stored uuids too.
    s2 = MemoirSessionStore(str(store_dir))
    await s2.append(KEY, [entry("a", 1), entry("d", 4)])
    assert [e.get("uuid") for e in await s2.load(KEY)] == ["a", "b", "c", None, None, "d"]


async def test_entries_round_trip_deep_equal(store_dir):
    s = MemoirSessionStore(str(store_dir))
    odd = {
        "type": "assistant",
        "uuid": "u1",
        # keys the memoir line framing reserves at the top level of a record
        "seq": 7, "record": "x", "prev": "p", "h": "h", "batch": 2,
        "nested": {"list": [1, 2.5, None, True, "ünïcode ✓"], "empty": {}},
        "big": 2**62,
        "float": 1.0,
    }
    await s.append(KEY, [odd])
    assert await MemoirSessionStore(str(store_dir)).load(KEY) == [odd]


async def test_concurrent_appends_to_one_session_are_serialised(store_dir):
    stores = [MemoirSessionStore(str(store_dir)) for _ in range(3)]

    async def writer(w):
        for i in range(15):
            await stores[w].append(KEY, [entry(f"{w}-{i}", i)])

    await asyncio.gather(*(writer(w) for w in range(3)))
    got = await stores[0].load(KEY)
    assert sorted(e["uuid"] for e in got) == sorted(f"{w}-{i}" for w in range(3) for i in range(15))
    # Each writer's entries stay in its call order.
    for w in range(3):
        mine = [e["n"] for e in got if e["uuid"].startswith(f"{w}-")]
        assert mine == list(range(15))


async def test_subagents_are_child_sessions_and_delete_goes_to_the_trash(store_dir):
    s = MemoirSessionStore(str(store_dir))
    sub = {**KEY, "subpath": "subagents/agent-7"}
    await s.append(KEY, [entry("m", 1)])
    await s.append(sub, [entry("s", 1)])
    store = memoir.Store.open(str(store_dir))
    child = store.header(session_id_for(sub))
    assert child["source"]["kind"] == "subagent"
    assert child["source"]["parent_session"] == session_id_for(KEY)
    assert child["source"]["subpath"] == "subagents/agent-7"
    await s.delete(KEY)
    assert await s.load(KEY) is None and await s.load(sub) is None
    trashed = {e["id"] for e in store.list(trash=True)}
    assert trashed == {session_id_for(KEY), session_id_for(sub)}
    # Recoverable with memoir, and the adapter sees it again.
    store.restore(session_id_for(KEY))
    assert await s.load(KEY) == [entry("m", 1)]
    # Writing to a deleted key starts afresh.
    await s.delete(KEY)
    await s.append(KEY, [entry("n", 2)])
    assert await s.load(KEY) == [entry("n", 2)]
    # ...and can be deleted again (the earlier copy left the trash when the key restarted).
    await s.delete(KEY)
    assert await s.load(KEY) is None
    assert {e["id"] for e in store.list(trash=True)} == {session_id_for(KEY), session_id_for(sub)}


async def test_summary_is_written_with_its_batch(store_dir):
    s = MemoirSessionStore(str(store_dir))
    await s.append(KEY, [entry("a", 1, timestamp="2026-01-01T00:00:00.000Z", customTitle="T")])
    store = memoir.Store.open(str(store_dir))
    records, report = store.records(session_id_for(KEY))
    kinds = [r["record"] for r in records]
    assert kinds == ["sdk_entry", "sdk_summary"]
    # One batch: both records share the append (their seqs are consecutive).
    assert [r["seq"] for r in records] == [1, 2]
    [summary] = await MemoirSessionStore(str(store_dir)).list_session_summaries("proj")
    assert summary["session_id"] == "5f2c-uuid"
    assert summary["data"] == records[1]["summary"]["data"]


async def test_a_retry_through_another_writer_is_deduplicated(store_dir):
    # Two adapters (two processes, say), both with the session cached. A
    # batch lands through one; its retry arrives through the other, whose
    # cache has not seen it: the expected-seq check makes it re-read.
    a, b = MemoirSessionStore(str(store_dir)), MemoirSessionStore(str(store_dir))
    await a.append(KEY, [entry("first", 0)])
    await b.append(KEY, [entry("first", 0)])  # b now caches the session too
    await a.append(KEY, [entry("x", 1)])
    await b.append(KEY, [entry("x", 1), entry("y", 2)])
    assert [e["uuid"] for e in await a.load(KEY)] == ["first", "x", "y"]
