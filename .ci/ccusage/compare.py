#!/usr/bin/env python3
"""Compare memoir's usage reports with ccusage's on the same Claude Code tree.

    compare.py --memoir-session M.json --memoir-day M.json \
               --ccusage-session C.json --ccusage-day C.json

Inputs are `memoir usage --by session --json`, `memoir usage --by day --json`,
`ccusage claude session --offline --json` and `ccusage claude daily --offline
--json` (both with `--timezone UTC`). Sessions are matched by Claude Code's
session file (memoir's session id `cc-<stem>`; ccusage's `sessionId`, the
file's stem); ccusage files a subagent's usage under its parent session, so
memoir's subagent rows are added to their parent's. Every session and day
must have the same input, output, cache-read and cache-write tokens, and
costs equal within 1e-6 relative (float sums in another order).

Known ccusage differences (docs/USAGE.md, "Comparison with ccusage") are
listed in KNOWN; this tree generator avoids producing them, so any
difference fails. Exit status 1 on a difference, with a table of them.
"""

import argparse
import json
import sys

TOKENS = [
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("cache_read_tokens", "cacheReadTokens"),
    ("cache_write_tokens", "cacheCreationTokens"),
]

# Documented ccusage differences; none is produced by gen_claude_tree.py.
KNOWN = {}


def load(path):
    with open(path) as f:
        return json.load(f)


def claude_session_of(memoir_id):
    """`cc-<session>` and its subagents `cc-<session>-agent-<id>` -> `<session>`
    (the file's stem, as ccusage names sessions)."""
    stem = memoir_id.removeprefix("cc-")
    return stem.split("-agent-", 1)[0]


def memoir_sessions(report):
    """memoir rows by Claude Code session file, subagents folded into their parent."""
    out = {}
    for row in report["rows"]:
        key = claude_session_of(row["group"]["session"])
        acc = out.setdefault(key, {m: 0 for m, _ in TOKENS} | {"cost": 0.0})
        for m, _ in TOKENS:
            acc[m] += row[m]
        acc["cost"] += row["cost_usd"]
    return out


def ccusage_rows(rows, key):
    out = {}
    for r in rows:
        acc = out.setdefault(r[key], {m: 0 for m, _ in TOKENS} | {"cost": 0.0})
        for m, c in TOKENS:
            acc[m] += r[c]
        acc["cost"] += r["totalCost"]
    return out


def diff(kind, mine, theirs):
    problems = []
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key), theirs.get(key)
        if a is None or b is None:
            # A row with no tokens at all is the same as no row.
            present = a or b
            if any(present[m] for m, _ in TOKENS) or present["cost"]:
                problems.append(f"{kind} {key}: only in {'memoir' if b is None else 'ccusage'}: {present}")
            continue
        for m, _ in TOKENS:
            if a[m] != b[m]:
                problems.append(f"{kind} {key}: {m} memoir {a[m]} ccusage {b[m]}")
        if abs(a["cost"] - b["cost"]) > 1e-6 * max(1.0, abs(b["cost"])):
            problems.append(f"{kind} {key}: cost memoir {a['cost']:.10f} ccusage {b['cost']:.10f}")
    return [p for p in problems if not any(k in p for k in KNOWN)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memoir-session", required=True)
    ap.add_argument("--memoir-day", required=True)
    ap.add_argument("--ccusage-session", required=True)
    ap.add_argument("--ccusage-day", required=True)
    a = ap.parse_args()

    ms = memoir_sessions(load(a.memoir_session))
    cs = ccusage_rows(load(a.ccusage_session)["sessions"], "sessionId")
    md = {}
    for row in load(a.memoir_day)["rows"]:
        md[row["group"]["day"]] = {m: row[m] for m, _ in TOKENS} | {"cost": row["cost_usd"]}
    cd = ccusage_rows(load(a.ccusage_day)["daily"], "date")

    problems = diff("session", ms, cs) + diff("day", md, cd)
    total = lambda rows: sum(r["cost"] for r in rows.values())
    print(f"sessions: memoir {len(ms)} ccusage {len(cs)}; days: memoir {len(md)} ccusage {len(cd)}")
    print(f"total cost: memoir {total(md):.6f} ccusage {total(cd):.6f}")
    if problems:
        print("DIFFERENCES (not documented as ccusage bugs):")
        for p in problems:
            print("  " + p)
        return 1
    print("memoir and ccusage agree on every session and day")
    return 0


if __name__ == "__main__":
    sys.exit(main())
