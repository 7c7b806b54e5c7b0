"""Several agents at once: 8 `memoir mcp` processes each remember 200 notes
in the same project; every one of the 1,600 notes is there exactly once, and
a process sees the others' notes on its next search."""

import anyio

from test_tools import client, structured

PROCESSES = 8
NOTES_EACH = 200


def test_concurrent_processes_never_lose_or_duplicate_notes(store):
    ids: list[list[str]] = [[] for _ in range(PROCESSES)]

    async def writer(i):
        async with client(store, store.a) as c:
            for j in range(NOTES_EACH):
                r = structured(await c.call_tool("remember", {"text": f"note {i}-{j} from process {i}", "tags": [f"p{i}"]}))
                ids[i].append(r["id"])

    async def main():
        async with anyio.create_task_group() as tg:
            for i in range(PROCESSES):
                tg.start_soon(writer, i)
        async with client(store, store.a) as c:
            notes = []
            cursor = None
            while True:
                args = {"limit": 200} | ({"cursor": cursor} if cursor else {})
                page = structured(await c.call_tool("list_notes", args))
                notes += page["notes"]
                cursor = page["next_cursor"]
                if not page["truncated"]:
                    break
            texts = [n["text"] for n in notes]
            assert len(notes) == PROCESSES * NOTES_EACH
            assert len(set(texts)) == len(texts), "no duplicates"
            assert {n["id"] for n in notes} == {x for l in ids for x in l}
            assert set(texts) == {f"note {i}-{j} from process {i}" for i in range(PROCESSES) for j in range(NOTES_EACH)}

    anyio.run(main)


def test_a_second_process_sees_the_first_ones_note_on_its_next_search(store):
    async def main():
        async with client(store, store.a) as reader, client(store, store.a) as writer:
            before = structured(await reader.call_tool("search_sessions", {"query": "quokka"}))
            assert before["hits"] == []
            structured(await writer.call_tool("remember", {"text": "the quokka mascot is named Pip"}))
            after = structured(await reader.call_tool("search_sessions", {"query": "quokka"}))
            assert len(after["hits"]) == 1 and "Pip" in after["hits"][0]["snippet"]

    anyio.run(main)
