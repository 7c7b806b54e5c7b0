"""memoir mcp through the official MCP Python client: tool listing, every tool
with valid and invalid arguments, result shapes against the declared output
schemas, resources, protocol negotiation and project scoping."""

import json
import subprocess

import anyio
import jsonschema
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

READ_TOOLS = {
    "search_sessions", "recall", "list_sessions", "get_session",
    "resume_command", "list_notes", "remember", "promote", "usage", "blame",
}
WRITE_TOOLS = {"forget", "fork_session"}


def client(store, project, *extra, mode="auto"):
    params = StdioServerParameters(
        command=store.binary,
        args=store.server_args(project, *extra),
        env=store.env(),
        cwd=str(project),
    )
    return Client(params, mode=mode, cache=None, read_timeout_seconds=60)


def run(coro_fn):
    return anyio.run(coro_fn)


def structured(result):
    """The structured result of a successful call (checked to match its text)."""
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    assert json.loads(result.content[0].text) == data
    return data


async def tool_map(c):
    tools = (await c.list_tools()).tools
    return {t.name: t for t in tools}


async def call_checked(c, tools, name, args):
    result = await c.call_tool(name, args)
    data = structured(result)
    jsonschema.validate(data, tools[name].output_schema)
    return data


async def expect_tool_error(c, name, args):
    """Invalid arguments: a tool error result or a JSON-RPC error, never a crash."""
    try:
        result = await c.call_tool(name, args)
    except MCPError as e:
        return str(e)
    assert result.is_error, (name, args, result)
    return result.content[0].text


def test_tools_are_listed_with_valid_schemas(store):
    async def main():
        async with client(store, store.a) as c:
            tools = await tool_map(c)
            assert set(tools) == READ_TOOLS
            for t in tools.values():
                assert t.description and len(t.description) > 40, t.name
                jsonschema.Draft202012Validator.check_schema(t.input_schema)
                jsonschema.Draft202012Validator.check_schema(t.output_schema)
                assert t.input_schema["type"] == "object"
                assert t.input_schema.get("additionalProperties") is False
        async with client(store, store.a, "--allow-writes") as c:
            assert set(await tool_map(c)) == READ_TOOLS | WRITE_TOOLS
    run(main)


def test_every_tool_with_valid_arguments(store):
    sid = store.new_session(store.a, "the deploy key lives in the vault under ops/deploy", title="deploy notes")
    store.new_session(store.a, "lunch is at noon on fridays")

    async def main():
        async with client(store, store.a, "--allow-writes") as c:
            tools = await tool_map(c)
            hits = await call_checked(c, tools, "search_sessions", {"query": "deploy key vault"})
            assert hits["hits"] and hits["hits"][0]["session"] == sid
            assert "[[" in hits["hits"][0]["snippet"]
            listed = await call_checked(c, tools, "list_sessions", {"limit": 1})
            assert len(listed["sessions"]) == 1 and listed["truncated"] is True
            rest = await call_checked(c, tools, "list_sessions", {"cursor": listed["next_cursor"]})
            assert {s["id"] for s in listed["sessions"] + rest["sessions"]} >= {sid}
            assert rest["truncated"] is False
            got = await call_checked(c, tools, "get_session", {"id": sid[:-4], "around_seq": hits["hits"][0]["seq"]})
            assert got["session"] == sid and "ops/deploy" in got["messages"][0]["text"]
            res = await call_checked(c, tools, "resume_command", {"id": sid})
            assert res["program"] == "memoir" and sid in res["shell"]
            rec = await call_checked(c, tools, "recall", {"query": "where is the deploy key", "session": sid})
            assert "ops/deploy" in rec["text"] and rec["tokens"] <= 1500
            assert rec["items"][0]["session"] == sid and "[chain_seq" in rec["text"]
            note = await call_checked(c, tools, "remember", {"text": "staging db password rotates monthly", "tags": ["ops"]})
            notes = await call_checked(c, tools, "list_notes", {})
            assert [n["id"] for n in notes["notes"]] == [note["id"]]
            found = await call_checked(c, tools, "search_sessions", {"query": "staging password rotates"})
            assert found["hits"][0]["session"] == note["notes_session"]
            usage = await call_checked(c, tools, "usage", {"by": "session", "period": "30d"})
            assert "totals" in usage
            fork = await call_checked(c, tools, "fork_session", {"id": sid})
            assert fork["parent"] == sid and fork["id"] != sid
            gone = await call_checked(c, tools, "forget", {"id": note["id"]})
            assert gone == {"id": note["id"], "forgotten": True}
            assert (await call_checked(c, tools, "list_notes", {}))["notes"] == []
            after = await call_checked(c, tools, "search_sessions", {"query": "staging password rotates"})
            assert all(h["session"] != note["notes_session"] for h in after["hits"]), "a forgotten note is not found"
    run(main)


INVALID = [
    ("search_sessions", {}),
    ("search_sessions", {"query": ""}),
    ("search_sessions", {"query": 5}),
    ("search_sessions", {"query": "x", "limit": 0}),
    ("search_sessions", {"query": "x", "limit": 10_000}),
    ("search_sessions", {"query": "x", "cursor": "garbage"}),
    ("search_sessions", {"query": "x", "since": "yesterday-ish"}),
    ("search_sessions", {"query": "x", "bogus": 1}),
    ("recall", {}),
    ("recall", {"query": "x", "token_budget": 10}),
    ("recall", {"query": "x", "session": "../../etc/passwd"}),
    ("recall", {"query": "x", "session": "no-such-session"}),
    ("list_sessions", {"limit": -1}),
    ("list_sessions", {"cursor": "o-3"}),
    ("get_session", {}),
    ("get_session", {"id": ""}),
    ("get_session", {"id": "x", "before": 1000}),
    ("get_session", {"id": "no-such-session"}),
    ("resume_command", {"id": "../x"}),
    ("resume_command", {"id": None}),
    ("list_notes", {"limit": "ten"}),
    ("remember", {}),
    ("remember", {"text": "   "}),
    ("remember", {"text": "x" * 20000}),
    ("remember", {"text": "ok", "tags": ["bad\ntag"]}),
    ("remember", {"text": "ok", "tags": "notalist"}),
    ("usage", {"by": "planet"}),
    ("usage", {"period": "forever"}),
    ("forget", {"id": "not-a-note"}),
    ("forget", {"id": "note_" + "0" * 32}),
    ("fork_session", {"id": "no-such"}),
    ("fork_session", {"id": "x", "at_seq": -1}),
    ("fork_session", {"id": "x", "upto": 2}),
    ("no_such_tool", {}),
]


def test_invalid_arguments_are_errors_not_crashes(store):
    store.new_session(store.a, "something to find")

    async def main():
        async with client(store, store.a, "--allow-writes") as c:
            tools = await tool_map(c)
            for name, args in INVALID:
                msg = await expect_tool_error(c, name, args)
                assert msg, (name, args)
                # The server is still there and answers.
                ok = await call_checked(c, tools, "list_sessions", {})
                assert ok["sessions"], (name, args)
    run(main)


def test_destructive_tools_need_allow_writes(store):
    async def main():
        async with client(store, store.a) as c:
            note = structured(await c.call_tool("remember", {"text": "keep me"}))
            msg = await expect_tool_error(c, "forget", {"id": note["id"]})
            assert "allow-writes" in msg
            assert len(structured(await c.call_tool("list_notes", {}))["notes"]) == 1
    run(main)


def test_resources(store):
    sid = store.new_session(store.a, "resource body text")

    async def main():
        async with client(store, store.a) as c:
            uris = {str(r.uri) for r in (await c.list_resources()).resources}
            assert f"memoir://session/{sid}" in uris
            notes_uri = next(u for u in uris if u.startswith("memoir://notes/"))
            structured(await c.call_tool("remember", {"text": "a resource note"}))
            md = (await c.read_resource(notes_uri)).contents[0].text
            assert "a resource note" in md
            md = (await c.read_resource(f"memoir://session/{sid}")).contents[0].text
            assert "resource body text" in md
            templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
            assert templates == {"memoir://session/{id}", "memoir://notes/{project}"}
            for bad in ["memoir://session/../x", "memoir://nothing/1", "memoir://notes/%2Fother"]:
                with pytest.raises(MCPError):
                    await c.read_resource(bad)
    run(main)


def test_project_scoping(store):
    a = store.new_session(store.a, "alpha secret word marmalade")
    b = store.new_session(store.b, "beta secret word marmalade")

    async def main():
        async with client(store, store.a) as c:
            hits = structured(await c.call_tool("search_sessions", {"query": "marmalade"}))["hits"]
            assert {h["session"] for h in hits} == {a}
            listed = structured(await c.call_tool("list_sessions", {}))["sessions"]
            assert {s["id"] for s in listed} == {a}
            for name, args in [("get_session", {"id": b}), ("resume_command", {"id": b}),
                               ("recall", {"query": "marmalade", "session": b})]:
                assert "not_found" in await expect_tool_error(c, name, args)
            msg = await expect_tool_error(c, "search_sessions", {"query": "marmalade", "project": str(store.b)})
            assert "all_projects" in msg
            with pytest.raises(MCPError):
                await c.read_resource(f"memoir://session/{b}")
            wide = structured(await c.call_tool("search_sessions", {"query": "marmalade", "all_projects": True}))
            assert {h["session"] for h in wide["hits"]} == {a, b}
        async with client(store, store.b) as c:
            listed = structured(await c.call_tool("list_sessions", {}))["sessions"]
            assert {s["id"] for s in listed} == {b}
    run(main)


@pytest.mark.parametrize("mode,expected", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_protocol_negotiation_with_the_sdk(store, mode, expected):
    async def main():
        async with client(store, store.a, mode=mode) as c:
            assert c.protocol_version == expected
            assert READ_TOOLS <= set(await tool_map(c))
    run(main)


def raw_exchange(store, messages):
    """Send JSON-RPC lines to a fresh `memoir mcp` and read one answer per request."""
    proc = subprocess.Popen(
        [store.binary, *store.server_args(store.a)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=store.env(), text=True,
    )
    answers = []
    try:
        for m in messages:
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            if "id" in m:
                answers.append(json.loads(proc.stdout.readline()))
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return answers, proc.returncode


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_initialize_negotiates_older_revisions(store, version):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    answers, code = raw_exchange(store, [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, listing])
    assert answers[0]["result"]["protocolVersion"] == version
    assert answers[0]["result"]["serverInfo"]["name"] == "memoir"
    assert {t["name"] for t in answers[1]["result"]["tools"]} == READ_TOOLS
    assert code == 0, "the server exits cleanly when stdin closes"


def test_garbage_on_stdin_is_an_error_not_a_crash(store):
    proc = subprocess.run(
        [store.binary, *store.server_args(store.a)], input="this is not json\n{\"jsonrpc\":\"2.0\"}\n",
        capture_output=True, env=store.env(), text=True, timeout=30,
    )
    assert "panicked" not in proc.stderr
    assert proc.returncode in (0, 1), proc.stderr


def test_print_config(store):
    for agent, needle in [("claude", "claude mcp add memoir -- memoir mcp"), ("codex", "[mcp_servers.memoir]")]:
        out = subprocess.run([store.binary, "mcp", "--print-config", agent], capture_output=True, text=True,
                             env=store.env(), check=True).stdout
        assert needle in out
