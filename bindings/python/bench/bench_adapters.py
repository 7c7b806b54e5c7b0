"""Throughput and load latency of the OpenAI Agents and LangGraph adapters vs the SDKs' own backends.

Same workload for every backend, measured in one run on one machine:

- OpenAI Agents `Session`: `--sessions` sessions x `--items` items, written
  as turns of two items (`add_items([user, assistant])`), then every
  session loaded back (`get_items()`) by a fresh session object on a freshly
  opened store. Peers: `SQLiteSession` (file, its default WAL journal).
- LangGraph checkpointer: `--sessions` threads x `--items` checkpoints, each
  a `put` (two channels changed) plus a `put_writes` (one write), as a
  graph step does; then per thread the latest `get_tuple` and a full
  `list`, by a fresh saver. Peers: `SqliteSaver` (file), `InMemorySaver`
  (no durability, as a floor).

memoir runs at its default durability (fsync per batch); each peer at its
default, and the table prints the durability it actually had (SQLite's
`journal_mode` and `synchronous`, read back from the connection).

    python bindings/python/bench/bench_adapters.py            # 100 x 100 = 10,000 items
    python bindings/python/bench/bench_adapters.py --quick    # 10 x 20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memoir
from memoir.langgraph import MemoirSaver
from memoir.openai_agents import MemoirSession


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _sqlite_durability(path: Path) -> str:
    conn = sqlite3.connect(str(path))
    try:
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[conn.execute("PRAGMA synchronous").fetchone()[0]]
    finally:
        conn.close()
    return f"journal_mode={journal}, synchronous={sync} (fresh connection default)"


class Row:
    def __init__(self, name: str, durability: str, items: int, write_s: float, loads: list[float]) -> None:
        self.name, self.durability, self.items, self.write_s, self.loads = name, durability, items, write_s, loads

    def line(self, base: Row | None) -> str:
        rate = self.items / self.write_s
        p50, p95 = _pct(self.loads, 0.5) * 1e3, _pct(self.loads, 0.95) * 1e3
        ratio = "" if base is None else f"{rate / (base.items / base.write_s):.2f}x"
        return f"| {self.name} | {rate:,.0f} | {ratio} | {p50:.2f} | {p95:.2f} | {self.durability} |"


def _item(session: int, i: int, role: str) -> dict[str, Any]:
    if role == "user":
        return {"role": "user", "content": f"session {session} question {i}: what about item {i * 7 % 13}?"}
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{session}_{i}",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"answer {i} for session {session}", "annotations": []}],
    }


async def bench_openai(root: Path, sessions: int, items: int) -> list[Row]:
    from agents import SQLiteSession

    async def run(name: str, make: Callable[[str], Any], reopen: Callable[[], Callable[[str], Any]], durability: str) -> Row:
        started = time.perf_counter()
        for s in range(sessions):
            session = make(f"bench-{s}")
            for i in range(0, items, 2):
                await session.add_items([_item(s, i, "user"), _item(s, i + 1, "assistant")])
            session.close()
        write_s = time.perf_counter() - started
        fresh = reopen()
        loads = []
        for s in range(sessions):
            t = time.perf_counter()
            session = fresh(f"bench-{s}")
            got = await session.get_items()
            loads.append(time.perf_counter() - t)
            assert len(got) == items, (name, len(got))
            session.close()
        return Row(name, durability, sessions * items, write_s, loads)

    db = root / "agents.db"
    sqlite_row = await run(
        "SQLiteSession (file)",
        lambda sid: SQLiteSession(sid, db),
        lambda: (lambda sid: SQLiteSession(sid, db)),
        _sqlite_durability_after(db, lambda: SQLiteSession("probe", db)),
    )
    store_dir = root / "agents-memoir"
    store = memoir.Store.open(str(store_dir))
    memoir_row = await run(
        "memoir MemoirSession",
        lambda sid: MemoirSession(sid, store),
        lambda: (lambda sid: MemoirSession(sid, str(store_dir))),  # opens the store, as SQLiteSession connects
        "fsync per add_items batch (default)",
    )
    return [sqlite_row, memoir_row]


def _sqlite_durability_after(db: Path, create: Callable[[], Any]) -> str:
    probe = create()
    probe.close()
    return _sqlite_durability(db)


def bench_langgraph(root: Path, threads: int, steps: int) -> list[Row]:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    def run(name: str, saver: Any, fresh: Callable[[], Any], durability: str) -> Row:
        started = time.perf_counter()
        for t in range(threads):
            config: dict[str, Any] = {"configurable": {"thread_id": f"thread-{t}", "checkpoint_ns": ""}}
            versions: dict[str, Any] = {}
            for i in range(steps):
                cp = empty_checkpoint()
                for ch in ("count", "last"):
                    versions[ch] = saver.get_next_version(versions.get(ch), None)
                cp["channel_versions"] = dict(versions)
                cp["channel_values"] = {"count": i, "last": f"thread {t} step {i} output text"}
                config = saver.put(config, cp, {"source": "loop", "step": i, "parents": {}}, dict(versions))
                saver.put_writes(config, [("count", i + 1)], task_id=f"task-{i}")
        write_s = time.perf_counter() - started
        reader = fresh()
        loads = []
        for t in range(threads):
            begin = time.perf_counter()
            cfg = {"configurable": {"thread_id": f"thread-{t}", "checkpoint_ns": ""}}
            latest = reader.get_tuple(cfg)
            listed = list(reader.list(cfg))
            loads.append(time.perf_counter() - begin)
            assert latest is not None and latest.checkpoint["channel_values"]["count"] == steps - 1, name
            assert len(listed) == steps, (name, len(listed))
        return Row(name, durability, threads * steps, write_s, loads)

    rows = []
    memory = InMemorySaver()
    rows.append(run("InMemorySaver", memory, lambda: memory, "none (process memory)"))
    db = root / "lg.db"
    conn = sqlite3.connect(str(db), check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[conn.execute("PRAGMA synchronous").fetchone()[0]]
    rows.append(
        run(
            "SqliteSaver (file)",
            saver,
            lambda: SqliteSaver(sqlite3.connect(str(db), check_same_thread=False)),
            f"journal_mode={journal}, synchronous={sync}",
        )
    )
    store_dir = root / "lg-memoir"
    rows.append(
        run(
            "memoir MemoirSaver",
            MemoirSaver(memoir.Store.open(str(store_dir))),
            lambda: MemoirSaver(memoir.Store.open(str(store_dir))),
            "fsync per put / put_writes (default)",
        )
    )
    return rows


def _machine() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"commit {commit}, {platform.machine()} {os.cpu_count()} cores, load average {load}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--items", type=int, default=100, help="items (checkpoints) per session (thread); even")
    parser.add_argument("--quick", action="store_true", help="10 sessions x 20 items")
    parser.add_argument("--only", choices=["openai", "langgraph"], default=None)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the stores (default: a temp dir)")
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.items = 10, 20
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        print(f"# {_machine()}; {args.sessions} sessions x {args.items} items, dir {root}")
        header = "| backend | items/s written | vs SDK default | load p50 ms | load p95 ms | durability |\n|---|---|---|---|---|---|"
        if args.only in (None, "openai"):
            rows = asyncio.run(bench_openai(root, args.sessions, args.items))
            print("\n## OpenAI Agents SDK Session (load = get_items() of one session)\n" + header)
            for row in rows:
                print(row.line(rows[0]))
        if args.only in (None, "langgraph"):
            rows = bench_langgraph(root, args.sessions, args.items)
            print("\n## LangGraph checkpointer (item = put + put_writes; load = get_tuple + list of one thread)\n" + header)
            base = next(r for r in rows if r.name.startswith("SqliteSaver"))
            for row in rows:
                print(row.line(base))
        print("\nload: a fresh session/saver on a freshly opened store (warm page cache).")


if __name__ == "__main__":
    main()
