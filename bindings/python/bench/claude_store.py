"""Benchmark: memoir's Claude Agent SDK SessionStore vs the SDK's own stores.

Workload: ITEMS transcript entries (~0.6 KB each, shaped like
Claude Code's user/assistant lines) in SESSIONS sessions, appended in batches
of BATCH (the SDK mirrors at ~100 ms cadence, a few entries a batch), sessions
interleaved; then every session loaded back by a fresh store object.

Peers, measured in the same run on the same machine:
- memoir, `MemoirSessionStore(dir)` at its default durability (fsync: each
  batch survives power loss when `append` returns), and at `flush`
  (survives a process crash, not power loss);
- the SDK's `InMemorySessionStore` (its only shipped store: no durability);
- `jsonl`: the SDK's default without a store, the CLI's local transcript
  file (one JSON line per entry appended to `<session>.jsonl`, no fsync),
  re-implemented here as a SessionStore so it runs the same workload;
  `jsonl+fsync` adds an fsync per batch, to separate the cost of durability
  from the cost of the format.

    python bindings/python/bench/claude_store.py            # 10,000 items / 100 sessions
    python bindings/python/bench/claude_store.py --quick    # 1,000 / 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from claude_agent_sdk import InMemorySessionStore

from memoir.claude_agent_sdk import MemoirSessionStore


class JsonlStore:
    """The CLI's on-disk transcript, as a store: append lines, read them back."""

    def __init__(self, root: Path, fsync: bool) -> None:
        self.root = root
        self.fsync = fsync
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: dict[str, Any]) -> Path:
        d = self.root / key["project_key"]
        d.mkdir(exist_ok=True)
        return d / f"{key['session_id']}.jsonl"

    async def append(self, key: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
        with open(self._path(key), "a", encoding="utf-8") as f:
            f.write(data)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())

    async def load(self, key: dict[str, Any]) -> list[dict[str, Any]] | None:
        try:
            text = self._path(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return [json.loads(line) for line in text.splitlines() if line]


def make_entries(sessions: int, items: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Per session: its key and entries (user/assistant turns with a parent chain)."""
    out = []
    per = items // sessions
    for s in range(sessions):
        key = {"project_key": "-home-dev-project", "session_id": str(uuid.uuid4())}
        entries, parent = [], None
        for i in range(per):
            u = str(uuid.uuid4())
            role = "user" if i % 2 == 0 else "assistant"
            entries.append(
                {
                    "type": role,
                    "uuid": u,
                    "parentUuid": parent,
                    "sessionId": key["session_id"],
                    "timestamp": f"2026-11-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.000Z",
                    "cwd": "/home/dev/project",
                    "version": "2.1.0",
                    "message": {
                        "role": role,
                        "content": [
                            {"type": "text", "text": f"turn {i} of session {s}: " + "lorem ipsum dolor sit amet " * 12}
                        ],
                    },
                }
            )
            parent = u
        out.append((key, entries))
    return out


async def run(name: str, make, workload, batch: int) -> dict[str, Any]:
    store = make()
    # Interleave sessions batch by batch, as concurrent agents would.
    batches = []
    for key, entries in workload:
        for i in range(0, len(entries), batch):
            batches.append((key, entries[i : i + batch]))
    order = sorted(range(len(batches)), key=lambda j: (j % (len(batches) // len(workload)), j))
    items = sum(len(e) for _, e in workload)
    t0 = time.perf_counter()
    for j in order:
        key, entries = batches[j]
        await store.append(key, entries)
    append_s = time.perf_counter() - t0
    # Load back with a fresh store object where the store persists.
    reader = store if isinstance(store, InMemorySessionStore) else make()
    lat = []
    for key, entries in workload:
        t = time.perf_counter()
        got = await reader.load(key)
        lat.append(time.perf_counter() - t)
        assert got == entries, f"{name}: load returned different entries"
    lat.sort()
    return {
        "name": name,
        "items_per_s": items / append_s,
        "append_s": append_s,
        "batches": len(batches),
        "load_p50_ms": 1000 * statistics.median(lat),
        "load_p95_ms": 1000 * lat[int(0.95 * (len(lat) - 1))],
        "load_all_s": sum(lat),
    }


DURABILITY = {
    "memoir (fsync, default)": "fsync per batch: survives power loss",
    "memoir (flush)": "write(2) per batch: survives a process crash",
    "InMemorySessionStore (SDK)": "none: lost with the process",
    "jsonl (CLI's local file)": "write(2) per batch, no fsync: survives a process crash",
    "jsonl+fsync": "fsync per batch: survives power loss",
}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="1,000 items in 10 sessions")
    ap.add_argument("--dir", help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    if args.quick:
        args.sessions, args.items = 10, 1000
    workload = make_entries(args.sessions, args.items)
    root = Path(args.dir or tempfile.mkdtemp(prefix="memoir-bench-"))
    peers = [
        ("memoir (fsync, default)", lambda: MemoirSessionStore(str(root / "memoir-fsync"))),
        ("memoir (flush)", lambda: MemoirSessionStore(str(root / "memoir-flush"), durability="flush")),
        ("InMemorySessionStore (SDK)", InMemorySessionStore),
        ("jsonl (CLI's local file)", lambda: JsonlStore(root / "jsonl", fsync=False)),
        ("jsonl+fsync", lambda: JsonlStore(root / "jsonl-fsync", fsync=True)),
    ]
    results = [await run(name, make, workload, args.batch) for name, make in peers]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    print(
        f"{args.items} items in {args.sessions} sessions, batches of {args.batch}; "
        f"commit {commit}; {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; dir {root}"
    )
    base = results[0]
    print("| store | durability | append items/s | append total s | load p50 ms | load p95 ms | load all s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['name']} | {DURABILITY[r['name']]} | {r['items_per_s']:,.0f} | {r['append_s']:.2f} | "
            f"{r['load_p50_ms']:.2f} | {r['load_p95_ms']:.2f} | {r['load_all_s']:.2f} |"
        )
    for r in results[1:]:
        print(
            f"memoir (fsync) / {r['name']}: append throughput {base['items_per_s'] / r['items_per_s']:.2f}x, "
            f"load p50 latency {base['load_p50_ms'] / max(r['load_p50_ms'], 1e-6):.2f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
