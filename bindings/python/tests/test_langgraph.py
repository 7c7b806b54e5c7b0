"""`memoir.langgraph.MemoirSaver` / `AsyncMemoirSaver` against LangGraph.

- `langgraph-checkpoint-conformance` (every capability: the base five plus
  `delete_for_runs`, `copy_thread` and `prune`) on both savers;
- a real graph (deterministic nodes, no LLM) with an interrupt and a resume,
  time travel (replay from and fork at an earlier checkpoint), run side by
  side on `SqliteSaver` and on memoir with the same observable results;
- what only memoir does: threads survive a reopen, `copy_thread` is a fork by
  reference, `prune`/`delete_for_runs` are rewrites that keep the log, and
  `delete_thread` is one too (the id is free again at once, the state restorable).
"""

from __future__ import annotations

import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import uuid4

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint, generate_config, generate_metadata
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

import memoir
from memoir.langgraph import AsyncMemoirSaver, MemoirSaver

# ---------------------------------------------------------------------------
# Conformance
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("saver_class", [MemoirSaver, AsyncMemoirSaver])
@pytest.mark.asyncio
async def test_conformance_suite_passes(tmp_path, saver_class):
    counter = iter(range(1_000))

    @checkpointer_test(name=f"{saver_class.__name__}-conformance")
    async def memoir_checkpointer():
        # A fresh store per capability suite, as the runner expects.
        yield saver_class(memoir.Store.open(str(tmp_path / f"store-{next(counter)}")))

    report = await validate(memoir_checkpointer)
    failures = {cap: r.failures for cap, r in report.results.items() if r.passed is not True}
    assert failures == {}, failures
    # Every capability was detected and exercised (none skipped as "not implemented").
    assert all(r.detected for r in report.results.values()), report.results
    assert sum(r.tests_passed for r in report.results.values()) > 60


# ---------------------------------------------------------------------------
# A real graph: interrupt, resume, time travel
# ---------------------------------------------------------------------------


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    value: int


def double(state: State) -> dict[str, Any]:
    return {"log": ["double"], "value": state["value"] * 2}


def ask_human(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "add how much?", "value": state["value"]})
    return {"log": [f"human:{answer}"], "value": state["value"] + int(answer)}


def square(state: State) -> dict[str, Any]:
    return {"log": ["square"], "value": state["value"] ** 2}


def build_graph(checkpointer):
    g = StateGraph(State)
    g.add_node("double", double)
    g.add_node("ask_human", ask_human)
    g.add_node("square", square)
    g.add_edge(START, "double")
    g.add_edge("double", "ask_human")
    g.add_edge("ask_human", "square")
    g.add_edge("square", END)
    return g.compile(checkpointer=checkpointer)


def run_scenario(checkpointer) -> dict[str, Any]:
    """Interrupt, resume, replay and fork on one checkpointer; returns everything observable."""
    graph = build_graph(checkpointer)
    config = {"configurable": {"thread_id": "t1"}}
    out: dict[str, Any] = {}

    first = graph.invoke({"log": [], "value": 3}, config)
    out["interrupted"] = [i.value for i in first["__interrupt__"]]
    state = graph.get_state(config)
    out["paused_next"] = state.next
    out["paused_values"] = state.values

    resumed = graph.invoke(Command(resume="4"), config)
    out["resumed"] = resumed
    history = list(graph.get_state_history(config))
    out["history"] = [(s.values, s.next, s.metadata["step"], s.metadata["source"]) for s in history]

    # Time travel 1: replay from the checkpoint before `ask_human` ran; it interrupts again.
    before_ask = next(s for s in history if s.next == ("ask_human",))
    replay = graph.invoke(None, before_ask.config)
    out["replay_interrupt"] = [i.value for i in replay["__interrupt__"]]
    out["replay_resumed"] = graph.invoke(Command(resume="10"), config)

    # Time travel 2: fork at that checkpoint with a different value, then resume.
    forked_config = graph.update_state(before_ask.config, {"value": 100})
    graph.invoke(None, forked_config)
    out["fork_resumed"] = graph.invoke(Command(resume="1"), config)
    out["history_len"] = len(list(graph.get_state_history(config)))
    out["latest"] = graph.get_state(config).values
    return out


def test_graph_interrupt_resume_time_travel_same_as_sqlite(tmp_path):
    conn = sqlite3.connect(str(tmp_path / "lg.db"), check_same_thread=False)
    try:
        expected = run_scenario(SqliteSaver(conn))
    finally:
        conn.close()
    got = run_scenario(MemoirSaver(memoir.Store.open(str(tmp_path / "store"))))

    assert got == expected
    # And the scenario means what it says:
    assert got["interrupted"] == [{"question": "add how much?", "value": 6}]
    assert got["resumed"] == {"log": ["double", "human:4", "square"], "value": 100}
    assert got["replay_resumed"]["value"] == (6 + 10) ** 2
    assert got["fork_resumed"]["value"] == (100 + 1) ** 2


@pytest.mark.asyncio
async def test_async_graph_runs_on_async_saver(tmp_path):
    async with AsyncMemoirSaver.open(str(tmp_path / "store")) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": "async"}}
        first = await graph.ainvoke({"log": [], "value": 5}, config)
        assert [i.value for i in first["__interrupt__"]] == [{"question": "add how much?", "value": 10}]
        done = await graph.ainvoke(Command(resume="2"), config)
        assert done == {"log": ["double", "human:2", "square"], "value": 144}
        states = [s async for s in graph.aget_state_history(config)]
        assert [s.metadata["step"] for s in states] == [3, 2, 1, 0, -1]


def test_threads_survive_reopening_the_store(tmp_path):
    path = str(tmp_path / "store")
    graph = build_graph(MemoirSaver(memoir.Store.open(path)))
    config = {"configurable": {"thread_id": "durable"}}
    graph.invoke({"log": [], "value": 2}, config)

    # A new process would open the store afresh: the interrupted run resumes from disk.
    reopened = build_graph(MemoirSaver(memoir.Store.open(path)))
    assert reopened.get_state(config).next == ("ask_human",)
    done = reopened.invoke(Command(resume="1"), config)
    assert done["value"] == 25


# ---------------------------------------------------------------------------
# Extended operations as memoir sessions
# ---------------------------------------------------------------------------


def _put_chain(saver, tid: str, n: int, run_id: str | None = None, ns: str = "") -> list[dict]:
    configs = []
    parent = None
    for i in range(n):
        config = generate_config(tid, checkpoint_ns=ns)
        if parent:
            config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        extra = {"run_id": run_id} if run_id else {}
        cp = generate_checkpoint(channel_values={"i": i})
        cp["channel_versions"] = {"i": i + 1}
        parent = saver.put(config, cp, generate_metadata(step=i, **extra), {"i": i + 1})
        configs.append(parent)
    return configs


def _ids(saver, tid: str) -> list[str]:
    """Every checkpoint id of a thread, all namespaces."""
    return [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": tid}})]


def test_copy_thread_is_a_fork_by_reference(tmp_path):
    store = memoir.Store.open(str(tmp_path / "store"))
    saver = MemoirSaver(store)
    src, dst = str(uuid4()), str(uuid4())
    _put_chain(saver, src, 3)
    saver.copy_thread(src, dst)
    assert _ids(saver, dst) == _ids(saver, src)

    target = saver.session_of(dst)
    info = store.load(target)[1]
    assert info["inherited"] > 0, info  # the parent's records are referenced, not copied

    # The copy diverges independently.
    last = saver.get_tuple(generate_config(dst))
    cp = generate_checkpoint(channel_values={"i": 99})
    cp["channel_versions"] = {"i": 99}
    saver.put(last.config, cp, generate_metadata(step=3), {"i": 99})
    assert len(_ids(saver, dst)) == 4 and len(_ids(saver, src)) == 3
    assert saver.get_tuple(generate_config(dst)).checkpoint["channel_values"] == {"i": 99}


def test_prune_and_delete_for_runs_keep_the_log(tmp_path):
    store = memoir.Store.open(str(tmp_path / "store"))
    saver = MemoirSaver(store)
    tid = str(uuid4())
    _put_chain(saver, tid, 2, run_id="run-a")
    _put_chain(saver, tid, 2, run_id="run-b", ns="child:1")
    everything = _ids(saver, tid)
    assert len(everything) == 4

    saver.delete_for_runs(["run-a"])
    assert len(_ids(saver, tid)) == 2
    saver.prune([tid], strategy="keep_latest")
    assert len(_ids(saver, tid)) == 1

    # Both were rewrites: the states before them are still in the log, and
    # each can be forked back into a thread of its own.
    revisions = saver.revisions(tid)
    assert [r.messages for r in revisions] == [4, 2]  # one record per put here
    saver.restore_revision(tid, revisions[0], target_thread_id="recovered")
    assert sorted(_ids(saver, "recovered")) == sorted(everything)


@pytest.mark.parametrize("kind", ["directory", "memory"])
def test_delete_thread_keeps_the_log_and_frees_the_id(tmp_path, kind):
    store = memoir.Store.open(str(tmp_path / "store")) if kind == "directory" else memoir.Store.memory()
    saver = MemoirSaver(store)
    tid = str(uuid4())
    _put_chain(saver, tid, 2)
    saver.put_writes(saver.get_tuple(generate_config(tid)).config, [("ch", 1)], "task")
    before = _ids(saver, tid)
    saver.delete_thread(tid)
    assert _ids(saver, tid) == []
    assert saver.get_tuple(generate_config(tid)) is None
    assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == []

    # The id is usable again at once (a chat UI resetting its thread)...
    _put_chain(saver, tid, 1)
    assert len(_ids(saver, tid)) == 1
    # ...and the deleted state can still be brought back.
    (deleted,) = saver.revisions(tid)
    assert deleted.messages == 3
    saver.restore_revision(tid, deleted, target_thread_id="undeleted")
    assert _ids(saver, "undeleted") == before
    assert saver.get_tuple(generate_config("undeleted")).pending_writes == [("task", "ch", 1)]


def test_list_across_threads_and_filters(tmp_path):
    saver = MemoirSaver(memoir.Store.open(str(tmp_path / "store")))
    a = _put_chain(saver, "thread-a", 3, run_id="r1")
    _put_chain(saver, "thread-b", 2, run_id="r2")
    assert len(list(saver.list(None))) == 5
    assert len(list(saver.list(None, filter={"run_id": "r2"}))) == 2
    assert [t.metadata["step"] for t in saver.list(generate_config("thread-a"), limit=2)] == [2, 1]
    before = list(saver.list(generate_config("thread-a"), before=a[1]))
    assert [t.metadata["step"] for t in before] == [0]
    # A fresh saver reads the same answers from the store.
    fresh = MemoirSaver(saver.store)
    assert [t.checkpoint["id"] for t in fresh.list(None)] == [t.checkpoint["id"] for t in saver.list(None)]


def test_thread_ids_that_are_not_memoir_ids(tmp_path):
    saver = MemoirSaver(memoir.Store.open(str(tmp_path / "store")))
    for tid in ["a/b", "../x", "with space", "ü" * 150]:
        _put_chain(saver, tid, 1)
        got = saver.get_tuple(generate_config(tid))
        assert got is not None and got.config["configurable"]["thread_id"] == tid
    assert not (tmp_path / "x").exists()
    assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {
        "a/b",
        "../x",
        "with space",
        "ü" * 150,
    }


def test_foreign_sessions_are_not_threads(tmp_path):
    store = memoir.Store.open(str(tmp_path / "store"))
    store.create(title="a chat, not a LangGraph thread")
    saver = MemoirSaver(store)
    assert list(saver.list(None)) == []
    _put_chain(saver, "t", 1)
    assert len(list(saver.list(None))) == 1


def test_blobs_are_shared_between_checkpoints_not_repeated(tmp_path: Path):
    """A channel whose version did not change is not written again (same as SqliteSaver)."""
    saver = MemoirSaver(memoir.Store.open(str(tmp_path / "store")))
    tid = "blobs"
    cfg = generate_config(tid)
    cp1 = generate_checkpoint(channel_values={"big": "x" * 1000, "small": 1})
    cp1["channel_versions"] = {"big": 1, "small": 1}
    c1 = saver.put(cfg, cp1, generate_metadata(step=0), {"big": 1, "small": 1})
    cp2 = generate_checkpoint(channel_values={"big": "x" * 1000, "small": 2})
    cp2["channel_versions"] = {"big": 1, "small": 2}
    saver.put(c1, cp2, generate_metadata(step=1), {"small": 2})
    latest = saver.get_tuple(generate_config(tid))
    assert latest.checkpoint["channel_values"] == {"big": "x" * 1000, "small": 2}
    assert saver.stored_blob_count(tid) == 3


def test_write_rules_match_in_memory_saver(tmp_path):
    """First write of a (task, idx) wins; special channels (negative idx) are replaced; order is writes_sort_key's."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.serde.types import ERROR, INTERRUPT

    def scenario(saver) -> list[tuple[str, str, Any]]:
        stored = saver.put(generate_config("w"), generate_checkpoint(), generate_metadata(), {})
        saver.put_writes(stored, [("a", 1), ("b", 2)], "task-2", task_path="~2")
        saver.put_writes(stored, [("a", "ignored"), (ERROR, "first error")], "task-2", task_path="~2")
        saver.put_writes(stored, [(ERROR, "second error"), (INTERRUPT, {"why": "human"})], "task-2", task_path="~2")
        saver.put_writes(stored, [("c", 3)], "task-1", task_path="~1")
        return saver.get_tuple(stored).pending_writes

    expected = scenario(InMemorySaver())
    got = scenario(MemoirSaver(memoir.Store.open(str(tmp_path / "store"))))
    assert got == expected
    assert ("task-2", "a", 1) in got and ("task-2", ERROR, "second error") in got
    assert got[0] == ("task-1", "c", 3)
