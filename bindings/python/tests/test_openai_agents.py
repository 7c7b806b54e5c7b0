"""`memoir.openai_agents.MemoirSession` against the OpenAI Agents SDK.

The first part is the SDK's own SQLite-session suite (openai-agents 0.24.0,
`tests/memory/test_session.py` and `test_session_limit.py`), ported to a
fixture parametrised over `SQLiteSession` and `MemoirSession`: every test runs
on both backends and asserts the same results. Tests that poke SQLite
internals (connection reaping, rollback of a dropped table, corrupt rows
inserted with SQL) have no memoir equivalent and are left out; a differential
test then runs one random operation sequence on both backends and compares
every answer. The last part covers what only memoir does: `pop_item` and
`clear_session` are rewrites (an undo is a fork), sessions survive a reopen,
the `wrapper` scope, and compaction recorded as one rewrite.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
from pathlib import Path
from typing import Any, cast

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, SQLiteSession, TResponseInputItem, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession
from agents.memory.session import _session_accepts_wrapper, is_openai_responses_compaction_aware_session
from agents.run_context import RunContextWrapper
from agents.testing import ScriptedModel
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import memoir
from memoir.openai_agents import MemoirCompactionSession, MemoirSession

BACKENDS = ["sqlite", "memoir"]
set_tracing_disabled(True)  # no trace export (and no "OPENAI_API_KEY is not set" noise) in tests


def get_text_message(content: str) -> ResponseOutputMessage:
    """The SDK tests' helper (tests/test_responses.py): one assistant text output."""
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )


def _run_sync_wrapper(agent, input_data, **kwargs):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, input_data, **kwargs)
    finally:
        loop.close()


async def run_agent_async(runner_method: str, agent, input_data, **kwargs):
    """Run an agent with one of the three Runner entry points (as the SDK tests do)."""
    if runner_method == "run":
        return await Runner.run(agent, input_data, **kwargs)
    if runner_method == "run_sync":
        return await asyncio.to_thread(_run_sync_wrapper, agent, input_data, **kwargs)
    if runner_method == "run_streamed":
        result = Runner.run_streamed(agent, input_data, **kwargs)
        async for _event in result.stream_events():
            pass
        return result
    raise ValueError(f"Unknown runner method: {runner_method}")


class Backends:
    """Makes sessions of one backend; sessions made with the same `db` share one database/store."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root
        self.stores: dict[str, memoir.Store] = {}
        self.sessions: list[Any] = []

    def store(self, db: str = "db") -> memoir.Store:
        if db not in self.stores:
            self.stores[db] = memoir.Store.open(str(self.root / f"{db}-memoir"))
        return self.stores[db]

    def session(self, session_id: str, *, db: str = "db", session_settings: Any = None) -> Any:
        if self.kind == "sqlite":
            s: Any = SQLiteSession(session_id, self.root / f"{db}.db", session_settings=session_settings)
        else:
            s = MemoirSession(session_id, self.store(db), session_settings=session_settings)
        self.sessions.append(s)
        return s

    def close(self) -> None:
        for s in self.sessions:
            s.close()


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    b = Backends(request.param, tmp_path)
    yield b
    b.close()


# ---------------------------------------------------------------------------
# The SDK's suite, on both backends
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_memory_basic_functionality_parametrized(backend, runner_method):
    session = backend.session("test_session_123")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    model.enqueue([get_text_message("San Francisco")])
    result1 = await run_agent_async(
        runner_method, agent, "What city is the Golden Gate Bridge in?", session=session
    )
    assert result1.final_output == "San Francisco"

    model.enqueue([get_text_message("California")])
    result2 = await run_agent_async(runner_method, agent, "What state is it in?", session=session)
    assert result2.final_output == "California"

    last_input = model.calls[-1].input
    assert len(last_input) == 3
    assert last_input[0] == {"content": "What city is the Golden Gate Bridge in?", "role": "user"}
    assert last_input[1]["content"][0]["text"] == "San Francisco"


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_memory_with_explicit_instance_parametrized(backend, runner_method):
    session = backend.session("test_session_456")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    model.enqueue([get_text_message("Hello")])
    result1 = await run_agent_async(runner_method, agent, "Hi there", session=session)
    assert result1.final_output == "Hello"

    model.enqueue([get_text_message("I remember you said hi")])
    result2 = await run_agent_async(runner_method, agent, "Do you remember what I said?", session=session)
    assert result2.final_output == "I remember you said hi"
    assert len(await session.get_items()) == 4


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_memory_different_sessions_parametrized(backend, runner_method):
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    session_1 = backend.session("session_1")
    model.enqueue([get_text_message("I like cats")])
    await run_agent_async(runner_method, agent, "I like cats", session=session_1)

    session_2 = backend.session("session_2")
    model.enqueue([get_text_message("I like dogs")])
    await run_agent_async(runner_method, agent, "I like dogs", session=session_2)

    model.enqueue([get_text_message("Yes, you mentioned cats")])
    result3 = await run_agent_async(runner_method, agent, "What did I say I like?", session=session_1)
    assert result3.final_output == "Yes, you mentioned cats"
    contents = [item.get("content") for item in model.calls[-1].input if item.get("role") == "user"]
    assert contents == ["I like cats", "What did I say I like?"]


@pytest.mark.asyncio
async def test_session_memory_direct(backend):
    session = backend.session("direct_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
    ]
    await session.add_items(items)
    retrieved = await session.get_items()
    assert retrieved == items

    await session.clear_session()
    assert await session.get_items() == []


@pytest.mark.asyncio
async def test_session_memory_pop_item(backend):
    session = backend.session("pop_test")
    assert await session.pop_item() is None

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "How are you?"},
    ]
    await session.add_items(items)
    assert len(await session.get_items()) == 3

    assert await session.pop_item() == {"role": "user", "content": "How are you?"}
    after = await session.get_items()
    assert len(after) == 2 and after[-1].get("content") == "Hi there!"
    assert await session.pop_item() == {"role": "assistant", "content": "Hi there!"}
    assert await session.pop_item() == {"role": "user", "content": "Hello"}
    assert await session.pop_item() is None
    assert await session.get_items() == []


@pytest.mark.asyncio
async def test_session_memory_pop_different_sessions(backend):
    session_1 = backend.session("session_1")
    session_2 = backend.session("session_2")
    await session_1.add_items([{"role": "user", "content": "Session 1 message"}])
    await session_2.add_items(
        [
            {"role": "user", "content": "Session 2 message 1"},
            {"role": "user", "content": "Session 2 message 2"},
        ]
    )
    popped = await session_2.pop_item()
    assert popped is not None and popped.get("content") == "Session 2 message 2"
    assert [i.get("content") for i in await session_1.get_items()] == ["Session 1 message"]
    assert [i.get("content") for i in await session_2.get_items()] == ["Session 2 message 1"]


@pytest.mark.asyncio
async def test_session_get_items_with_limit(backend):
    session = backend.session("count_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Message 1"},
        {"role": "assistant", "content": "Response 1"},
        {"role": "user", "content": "Message 2"},
        {"role": "assistant", "content": "Response 2"},
        {"role": "user", "content": "Message 3"},
        {"role": "assistant", "content": "Response 3"},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=2) == items[-2:]
    assert await session.get_items(limit=4) == items[-4:]
    assert await session.get_items(limit=10) == items
    assert await session.get_items(limit=0) == []


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_memory_appends_list_input_by_default(backend, runner_method):
    session = backend.session("test_validation_parametrized")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await session.add_items(initial_history)
    list_input = [{"role": "user", "content": "Test message"}]
    model.enqueue([get_text_message("This should run")])
    await run_agent_async(runner_method, agent, list_input, session=session)
    assert model.calls[-1].input == initial_history + list_input


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_callback_prepared_input(backend, runner_method):
    session = backend.session("session_1")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi, I'm here to assist you."},
    ]
    await session.add_items(initial_history)

    def filter_assistant_messages(history, new_input):
        return [item for item in history if item["role"] == "user"] + new_input

    new_turn_input = [{"role": "user", "content": "What your name?"}]
    model.enqueue([get_text_message("I'm gpt-4o")])
    await run_agent_async(
        runner_method,
        agent,
        new_turn_input,
        session=session,
        run_config=RunConfig(session_input_callback=filter_assistant_messages),
    )
    assert model.calls[-1].input == [initial_history[0], new_turn_input[0]]


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_callback_repeating_history_does_not_grow_session(backend, runner_method):
    session = backend.session("session_repeat")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    def repeat_first(history, new_input):
        if not history:
            return new_input
        return history + [history[0]] + new_input

    for turn in range(3):
        model.enqueue([get_text_message(f"assistant {turn}")])
        await run_agent_async(
            runner_method,
            agent,
            f"user {turn}",
            session=session,
            run_config=RunConfig(session_input_callback=repeat_first),
        )
    stored = await session.get_items()
    assert [i.get("content") for i in stored if i.get("role") == "user"] == ["user 0", "user 1", "user 2"]
    assert len(stored) == 6


@pytest.mark.asyncio
async def test_session_unicode_content(backend):
    session = backend.session("unicode_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "こんにちは"},
        {"role": "assistant", "content": "😊👍"},
        {"role": "user", "content": "Привет"},
    ]
    await session.add_items(items)
    assert await session.get_items() == items


@pytest.mark.asyncio
async def test_session_special_characters_and_sql_injection(backend):
    session = backend.session("special_chars_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "O'Reilly"},
        {"role": "assistant", "content": "DROP TABLE sessions;"},
        {"role": "user", "content": '"SELECT * FROM users WHERE name = "admin";"'},
        {"role": "assistant", "content": "Robert'); DROP TABLE students;--"},
        {"role": "user", "content": "Normal message"},
        {"role": "user", "content": "line\nbreak\ttab \u0000nul \\ backslash"},
    ]
    await session.add_items(items)
    assert await session.get_items() == items


@pytest.mark.asyncio
async def test_session_concurrent_access(backend):
    session = backend.session("concurrent_test")
    items: list[TResponseInputItem] = [{"role": "user", "content": f"Message {i}"} for i in range(10)]

    def add_item(item):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.run_until_complete(session.add_items([item]))
        loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as executor:
        list(executor.map(add_item, items))
    contents = {item.get("content") for item in await session.get_items()}
    assert contents == {f"Message {i}" for i in range(10)}


@pytest.mark.asyncio
async def test_session_concurrent_pops_each_item_once(backend):
    """Not in the SDK suite: concurrent pops must hand out every item exactly once."""
    session = backend.session("concurrent_pop")
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(12)])
    popped = await asyncio.gather(*(session.pop_item() for _ in range(15)))
    got = sorted(p["content"] for p in popped if p is not None)
    assert got == sorted(f"m{i}" for i in range(12))
    assert popped.count(None) == 3
    assert await session.get_items() == []


@pytest.mark.asyncio
async def test_session_shared_database_isolates_sessions(backend):
    session_1 = backend.session("session_1")
    session_2 = backend.session("session_2")
    await asyncio.gather(
        session_1.add_items([{"role": "user", "content": "session_1"}]),
        session_2.add_items([{"role": "user", "content": "session_2"}]),
    )
    assert [i.get("content") for i in await session_1.get_items()] == ["session_1"]
    assert [i.get("content") for i in await session_2.get_items()] == ["session_2"]


@pytest.mark.asyncio
async def test_session_add_items_exception_propagates_in_streamed(backend):
    session = backend.session("test_exception_session")

    async def _failing_add_items(_items, **_kwargs):
        raise RuntimeError("Simulated session.add_items failure")

    session.add_items = _failing_add_items  # type: ignore[method-assign]
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([get_text_message("This should not be reached")])
    result = Runner.run_streamed(agent, "Hello", session=session)

    async def consume_stream():
        async for _event in result.stream_events():
            pass

    with pytest.raises(RuntimeError, match="Simulated session.add_items failure"):
        await asyncio.wait_for(consume_stream(), timeout=5.0)


@pytest.mark.asyncio
async def test_session_settings_default(backend):
    session = backend.session("default_settings_test")
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None


@pytest.mark.asyncio
async def test_session_settings_constructor(backend):
    session = backend.session("constructor_settings_test", session_settings=SessionSettings(limit=5))
    assert session.session_settings.limit == 5


@pytest.mark.asyncio
async def test_session_settings_constructor_normalizes_dictionary(backend):
    session = backend.session("dictionary_settings_test", session_settings={"limit": 0})
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit == 0
    assert session.session_settings.resolve({"limit": 4}).limit == 4


def test_session_settings_rejects_unknown_dictionary_fields(backend):
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        backend.session("invalid_settings_test", session_settings={"limitt": 1})


@pytest.mark.asyncio
async def test_get_items_uses_session_settings_limit(backend):
    session = backend.session("uses_settings_limit_test", session_settings=SessionSettings(limit=3))
    items: list[TResponseInputItem] = [{"role": "user", "content": f"Message {i}"} for i in range(5)]
    await session.add_items(items)
    assert await session.get_items() == items[-3:]


@pytest.mark.asyncio
async def test_get_items_explicit_limit_overrides_session_settings(backend):
    session = backend.session("explicit_override_test", session_settings=SessionSettings(limit=5))
    items: list[TResponseInputItem] = [{"role": "user", "content": f"Message {i}"} for i in range(10)]
    await session.add_items(items)
    assert await session.get_items(limit=2) == items[-2:]


@pytest.mark.asyncio
async def test_runner_with_session_settings_override(backend):
    session = backend.session("runner_override_test", session_settings=SessionSettings(limit=100))
    await session.add_items([{"role": "user", "content": f"Turn {i}"} for i in range(10)])
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([get_text_message("Got it")])
    await Runner.run(
        agent,
        "New question",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    history = [i for i in model.calls[-1].input if i.get("content") != "New question"]
    assert [i.get("content") for i in history] == ["Turn 8", "Turn 9"]


# --- tests/memory/test_session_limit.py ---


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_limit_parameter(backend, runner_method):
    session = backend.session("limit_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    for i in (1, 2, 3):
        model.enqueue([get_text_message(f"Reply {i}")])
        await run_agent_async(runner_method, agent, f"Message {i}", session=session)
    assert len(await session.get_items()) == 6

    model.enqueue([get_text_message("Reply 4")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 4",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 3
    assert last_input[0].get("content") == "Message 3"
    assert last_input[1].get("content")[0]["text"] == "Reply 3"
    assert last_input[2].get("content") == "Message 4"


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_limit_drops_unmatched_history_function_call_output(backend, runner_method):
    session = backend.session("limit_tool_pair")
    history = cast(
        list[TResponseInputItem],
        [
            {"role": "user", "content": "What is the weather?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
            },
        ],
    )
    await session.add_items(history)
    assert await session.get_items(limit=2) == history[-2:]

    model = ScriptedModel()
    model.enqueue([get_text_message("Tomorrow is sunny too.")])
    agent = Agent(name="test", model=model)
    await run_agent_async(
        runner_method,
        agent,
        "What about tomorrow?",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    assert model.calls[-1].input == [history[-1], {"role": "user", "content": "What about tomorrow?"}]


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_limit_zero(backend, runner_method):
    session = backend.session("limit_zero_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    for i in (1, 2):
        model.enqueue([get_text_message(f"Reply {i}")])
        await run_agent_async(runner_method, agent, f"Message {i}", session=session)
    model.enqueue([get_text_message("Reply 3")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 3",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=0)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 1 and last_input[0].get("content") == "Message 3"


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_limit_none_gets_all_history(backend, runner_method):
    session = backend.session("limit_none_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    for i in range(1, 6):
        model.enqueue([get_text_message(f"Reply {i}")])
        await run_agent_async(runner_method, agent, f"Message {i}", session=session)
    assert len(await session.get_items()) == 10
    model.enqueue([get_text_message("Reply 6")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 6",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=None)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 11
    assert last_input[0].get("content") == "Message 1"
    assert last_input[-1].get("content") == "Message 6"


@pytest.mark.parametrize("runner_method", ["run", "run_sync", "run_streamed"])
@pytest.mark.asyncio
async def test_session_limit_larger_than_history(backend, runner_method):
    session = backend.session("limit_large_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([get_text_message("Reply 1")])
    await run_agent_async(runner_method, agent, "Message 1", session=session)
    model.enqueue([get_text_message("Reply 2")])
    await run_agent_async(
        runner_method,
        agent,
        "Message 2",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=100)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 3
    assert last_input[0].get("content") == "Message 1"
    assert last_input[1].get("content")[0]["text"] == "Reply 1"
    assert last_input[2].get("content") == "Message 2"


# ---------------------------------------------------------------------------
# Differential: the same random operations on both backends, same answers
# ---------------------------------------------------------------------------

RICH_ITEMS: list[TResponseInputItem] = cast(
    list[TResponseInputItem],
    [
        {"role": "user", "content": "plain"},
        {"role": "developer", "content": "be brief"},
        {"role": "system", "content": ""},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "parts"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x": [1, 2.5, null]}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
        {"role": "assistant", "content": "reply", "id": "msg_1", "status": "completed", "type": "message"},
        {"role": "user", "content": "nested", "extra": {"deep": {"list": [True, False, {"k": "v"}]}}},
    ],
)


@pytest.mark.asyncio
async def test_random_operations_agree_with_sqlite(tmp_path):
    sqlite_session = SQLiteSession("diff", tmp_path / "diff.db")
    store = memoir.Store.open(str(tmp_path / "diff-memoir"))
    memoir_session = MemoirSession("diff", store)
    rng = random.Random(16)
    try:
        for step in range(120):
            op = rng.choice(["add", "add", "add", "pop", "get", "get_limit", "clear"] if step % 40 else ["clear"])
            if op == "add":
                batch = [rng.choice(RICH_ITEMS) for _ in range(rng.randint(0, 4))]
                answers = [await s.add_items(list(batch)) for s in (sqlite_session, memoir_session)]
            elif op == "pop":
                answers = [await s.pop_item() for s in (sqlite_session, memoir_session)]
            elif op == "get":
                answers = [await s.get_items() for s in (sqlite_session, memoir_session)]
            elif op == "get_limit":
                n = rng.randint(0, 8)
                answers = [await s.get_items(limit=n) for s in (sqlite_session, memoir_session)]
            else:
                answers = [await s.clear_session() for s in (sqlite_session, memoir_session)]
            assert answers[0] == answers[1], f"step {step} ({op})"
        assert await sqlite_session.get_items() == await memoir_session.get_items()
    finally:
        sqlite_session.close()
        memoir_session.close()


# ---------------------------------------------------------------------------
# What only memoir does
# ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_items_survive_reopening_the_store(tmp_path):
    items = list(RICH_ITEMS)
    first = MemoirSession("durable", memoir.Store.open(str(tmp_path / "s")))
    await first.add_items(items)
    await first.pop_item()
    first.close()
    again = MemoirSession("durable", memoir.Store.open(str(tmp_path / "s")))
    assert await again.get_items() == items[:-1]
    again.close()


@pytest.mark.asyncio
async def test_pop_and_clear_are_rewrites_and_undo_is_a_fork(tmp_path):
    store = memoir.Store.open(str(tmp_path / "s"))
    session = MemoirSession("undo", store)
    items: list[TResponseInputItem] = [{"role": "user", "content": f"m{i}"} for i in range(4)]
    await session.add_items(items)
    assert await session.pop_item() == items[-1]
    await session.clear_session()
    assert await session.get_items() == []

    # Nothing was destroyed: the log still holds every item, and each
    # rewrite is a point the session can be forked back to.
    revisions = await session.revisions()
    assert [r.messages for r in revisions] == [4, 3]
    before_clear = await session.fork("undo-clear", revision=-1)
    assert await before_clear.get_items() == items[:3]
    before_pop = await session.fork("undo-pop", revision=0)
    assert await before_pop.get_items() == items
    # Forks are independent sessions: writing to one leaves the others alone.
    await before_pop.add_items([{"role": "user", "content": "after undo"}])
    assert await session.get_items() == []
    assert [i["content"] for i in await before_clear.get_items()] == ["m0", "m1", "m2"]
    assert [i["content"] for i in await before_pop.get_items()] == ["m0", "m1", "m2", "m3", "after undo"]


@pytest.mark.asyncio
async def test_session_ids_that_are_not_memoir_ids_are_kept_apart(tmp_path):
    store = memoir.Store.open(str(tmp_path / "s"))
    ids = ["a/b", "a b", "../etc/passwd", "ü" * 200, "a_b", "A_B"]
    sessions = [MemoirSession(sid, store) for sid in ids]
    for n, s in enumerate(sessions):
        await s.add_items([{"role": "user", "content": str(n)}])
    for n, s in enumerate(sessions):
        assert await s.get_items() == [{"role": "user", "content": str(n)}]
    # Nothing escaped the store directory.
    assert not (tmp_path / "etc").exists()


class TenantContext:
    def __init__(self, tenant_id: str) -> None:
        self.tenant_id = tenant_id


@pytest.mark.asyncio
async def test_wrapper_scopes_sessions_per_context(tmp_path):
    store = memoir.Store.open(str(tmp_path / "s"))
    session = MemoirSession("shared", store, scope=lambda wrapper: wrapper.context.tenant_id)
    assert _session_accepts_wrapper(session)
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([get_text_message("hello a")])
    await Runner.run(agent, "I am tenant a", session=session, context=TenantContext("a"))
    model.enqueue([get_text_message("hello b")])
    await Runner.run(agent, "I am tenant b", session=session, context=TenantContext("b"))
    model.enqueue([get_text_message("again a")])
    await Runner.run(agent, "who am I?", session=session, context=TenantContext("a"))
    seen = [i.get("content") for i in model.calls[-1].input if i.get("role") == "user"]
    assert seen == ["I am tenant a", "who am I?"]

    wrapper_b = RunContextWrapper(context=TenantContext("b"))
    assert [i.get("role") for i in await session.get_items(wrapper=wrapper_b)] == ["user", "assistant"]
    # Without a wrapper the unscoped session is used, and it is empty.
    assert await session.get_items() == []


@pytest.mark.asyncio
async def test_run_compaction_is_one_rewrite_and_keeps_history(tmp_path):
    store = memoir.Store.open(str(tmp_path / "s"))
    seen_args: list[Any] = []

    async def summarise(items, args):
        seen_args.append(args)
        return [{"role": "user", "content": f"summary of {len(items)} items"}] + items[-1:]

    session = MemoirCompactionSession("compact", store, compactor=summarise)
    assert is_openai_responses_compaction_aware_session(session)
    items: list[TResponseInputItem] = [{"role": "user", "content": f"m{i}"} for i in range(6)]
    await session.add_items(items)
    await session.run_compaction({"force": True, "response_id": "resp_1"})
    assert await session.get_items() == [{"role": "user", "content": "summary of 6 items"}, items[-1]]
    assert seen_args == [{"force": True, "response_id": "resp_1"}]
    revisions = await session.revisions()
    assert [r.messages for r in revisions] == [6]
    restored = await session.fork("compact-undo", revision=0)
    assert await restored.get_items() == items


@pytest.mark.asyncio
async def test_compaction_runs_only_when_forced_or_due(tmp_path):
    store = memoir.Store.open(str(tmp_path / "s"))
    calls: list[int] = []

    def keep_last_two(items, _args):
        calls.append(len(items))
        return items[-2:]

    session = MemoirCompactionSession(
        "due", store, compactor=keep_last_two, should_compact=lambda items, _args: len(items) >= 5
    )
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(4)])
    await session.run_compaction({"response_id": "r1"})
    assert calls == [] and len(await session.get_items()) == 4
    await session.add_items([{"role": "user", "content": "m4"}])
    await session.run_compaction({"response_id": "r2"})
    assert calls == [5]
    assert [i["content"] for i in await session.get_items()] == ["m3", "m4"]
    assert [r.messages for r in await session.revisions()] == [5]


def test_plain_session_is_not_compaction_aware(tmp_path):
    """The Runner calls run_compaction on any session that has it: a plain MemoirSession must not."""
    session = MemoirSession("plain", memoir.Store.open(str(tmp_path / "s")))
    assert not is_openai_responses_compaction_aware_session(session)
    assert _session_accepts_wrapper(session)


class _FakeCompacted:
    def __init__(self, output: list[dict[str, Any]]) -> None:
        self.output = output
        self.usage = None


class _FakeResponses:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def compact(self, **kwargs: Any) -> _FakeCompacted:
        self.calls.append(kwargs)
        return _FakeCompacted([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "compacted"}]}])


class _FakeClient:
    def __init__(self) -> None:
        self.responses = _FakeResponses()


@pytest.mark.asyncio
async def test_sdk_compaction_session_over_memoir_replaces_atomically(tmp_path):
    """The SDK's OpenAIResponsesCompactionSession over MemoirSession: one rewrite, no clear-then-add."""
    store = memoir.Store.open(str(tmp_path / "s"))
    underlying = MemoirSession("sdk-compact", store)
    client = _FakeClient()
    session = OpenAIResponsesCompactionSession(
        "sdk-compact", underlying, client=cast(Any, client), compaction_mode="input"
    )
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(3)])
    await session.run_compaction({"force": True})
    assert len(client.responses.calls) == 1
    after = await underlying.get_items()
    assert len(after) == 1 and after[0]["content"][0]["text"] == "compacted"
    # One rewrite (not a clear to zero then an add): the only revision is the 3-item state.
    assert [r.messages for r in await underlying.revisions()] == [3]


def _pop_in_another_process(store_dir: str, n: int) -> list[str]:
    async def pops() -> list[str]:
        session = MemoirSession("shared-across-processes", memoir.Store.open(store_dir))
        got = []
        for _ in range(n):
            item = await session.pop_item()
            if item is not None:
                got.append(item["content"])
        return got

    return asyncio.run(pops())


@pytest.mark.asyncio
async def test_pops_from_several_processes_hand_out_each_item_once(tmp_path):
    """pop_item is a read-then-rewrite: across processes only the log's expected-seq check keeps it exact."""
    import multiprocessing

    store_dir = str(tmp_path / "s")
    session = MemoirSession("shared-across-processes", memoir.Store.open(store_dir))
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(24)])
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.starmap(_pop_in_another_process, [(store_dir, 8)] * 3)
    popped = [c for r in results for c in r]
    assert sorted(popped) == sorted(f"m{i}" for i in range(24))
    assert await session.get_items() == []
    # Every pop is one rewrite, none lost or doubled.
    assert len(await session.revisions()) == 24
