"""memoir mcp --http: streamable HTTP with memoir serve's bearer tokens; each
token sees only its own project's sessions and notes."""

import socket
import subprocess
import time

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from test_tools import READ_TOOLS, structured

TOKEN_A = "token-for-project-a-0123456789"
TOKEN_B = "token-for-project-b-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def http_server(store):
    port = free_port()
    proc = subprocess.Popen(
        [store.binary, "mcp", "--http", f"127.0.0.1:{port}", "--store", str(store.dir),
         "--token", f"alpha={TOKEN_A}", "--token", f"beta={TOKEN_B}"],
        env=store.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=30)


def http_client(url, token, mode="auto"):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_tokens_scope_projects_over_http(store, http_server, mode):
    async def main():
        async with http_client(http_server, TOKEN_A, mode) as a:
            assert READ_TOOLS <= {t.name for t in (await a.list_tools()).tools}
            note = structured(await a.call_tool("remember", {"text": "alpha only: the wombat protocol"}))
            hits = structured(await a.call_tool("search_sessions", {"query": "wombat protocol"}))["hits"]
            assert [h["session"] for h in hits] == [note["notes_session"]]
            wide = await a.call_tool("search_sessions", {"query": "wombat", "all_projects": True})
            assert wide.is_error and "scoped to project" in wide.content[0].text
        async with http_client(http_server, TOKEN_B, mode) as b:
            assert structured(await b.call_tool("search_sessions", {"query": "wombat protocol"}))["hits"] == []
            assert structured(await b.call_tool("list_notes", {}))["notes"] == []

    anyio.run(main)


def test_bad_tokens_are_refused(http_server):
    for headers in [{}, {"Authorization": "Bearer nope-nope-nope-nope"}, {"Authorization": "Basic abc"}]:
        r = httpx2.post(http_server, headers=headers | {"Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"},
                        content='{"jsonrpc":"2.0","id":1,"method":"server/discover"}')
        assert r.status_code == 401
        assert r.json()["error"] == "unauthorized"
