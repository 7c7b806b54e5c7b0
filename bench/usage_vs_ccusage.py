#!/usr/bin/env python3
"""Compare `memoir usage --json` with `ccusage --offline --json` on the same
Claude Code and Codex transcripts (results go to docs/USAGE.md).

    python3 bench/usage_vs_ccusage.py --claude DIR --codex DIR \
        [--memoir target/release/memoir] [--ccusage PATH] [--store DIR] [--import-cmd CMD]

--claude: a directory of Claude Code `*.jsonl` session files (any depth);
--codex: a directory of Codex rollout `*.jsonl` files (any depth).
ccusage reads them from a private CLAUDE_CONFIG_DIR / CODEX_HOME laid out the
way it expects (claude/projects/<dir>/<file>, codex/sessions/YYYY/MM/DD/<file>),
with HOME pointed at an empty directory so no real sessions leak in. Without
--ccusage, `npm install ccusage` runs in a temp dir.

memoir reads --store (a store the trees were imported into), or imports them
into a temp store with --import-cmd, a shell template run once per tree with
{agent} (claude-code|codex), {short} (claude|codex), {src} (the tree),
{files} (every *.jsonl under it, quoted) and {store} substituted, e.g. (the
`memoir import` syntax of the import branch; naming the files also imports
Codex files not called rollout-*, like the branch-history fixtures)
  --import-cmd '{memoir} import {files} --dir {store}'
memoir runs with MEMOIR_HOME set to a temp dir (import cursors, prices).

Prints per-session and per-day totals side by side, and both tools' times.
Everything is UTC (`ccusage --timezone UTC`; memoir groups by UTC day).
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIELDS = ["input", "output", "cache_read", "cache_write", "total", "cost"]


def run(cmd, env=None):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout, dt


def ccusage_binary(explicit):
    if explicit:
        return explicit
    d = Path(tempfile.mkdtemp(prefix="ccusage-"))
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "ccusage"], cwd=d, check=True,
                   capture_output=True)
    return str(d / "node_modules" / ".bin" / "ccusage")


def layout(root, claude, codex, minify):
    """The directory layout ccusage expects, as copies (Claude Code lines
    re-serialised compactly with --minify: ccusage skips lines written with
    spaces after the colons)."""
    home = root / "home"
    home.mkdir()
    cdir = root / "claude" / "projects"
    if claude:
        for f in sorted(Path(claude).rglob("*.jsonl")):
            dest = cdir / (f.parent.name or "project") / f.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if minify:
                with open(f) as src, open(dest, "w") as out:
                    for line in src:
                        try:
                            out.write(json.dumps(json.loads(line), separators=(",", ":"),
                                                 ensure_ascii=False) + "\n")
                        except ValueError:
                            out.write(line)
            else:
                shutil.copy(f, dest)
    xdir = root / "codex" / "sessions"
    if codex:
        for f in sorted(Path(codex).rglob("*.jsonl")):
            if ".malformed" in f.name:
                continue
            m = re.search(r"(\d{4})-(\d{2})-(\d{2})", f.name)
            y, mo, d = m.groups() if m else ("1970", "01", "01")
            dest = xdir / y / mo / d / f.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dest)
    env = dict(os.environ, HOME=str(home), CLAUDE_CONFIG_DIR=str(root / "claude"),
               CODEX_HOME=str(root / "codex"))
    return env


def cc_row(r):
    return {
        "input": r.get("inputTokens", 0),
        "output": r.get("outputTokens", 0),
        "cache_read": r.get("cacheReadTokens", 0),
        "cache_write": r.get("cacheCreationTokens", 0),
        "total": r.get("totalTokens", 0),
        "cost": r.get("totalCost", r.get("costUSD", 0.0)),
    }


def memoir_row(r):
    return {
        "input": r["input_tokens"],
        "output": r["output_tokens"],
        "cache_read": r["cache_read_tokens"],
        "cache_write": r["cache_write_tokens"],
        "total": r["total_tokens"],
        "cost": r["cost_usd"],
        "lower_bound": r["cost_is_lower_bound"],
        "inherited": (r.get("inherited") or {}).get("total_tokens"),
    }


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6f}"
    return str(v)


def table(title, keys, left, right):
    print(f"\n### {title}\n")
    print("| key | " + " | ".join(f"ccusage {f} | memoir {f}" for f in FIELDS) + " | memoir inherited |")
    print("|---|" + "---|" * (2 * len(FIELDS) + 1))
    for k in keys:
        a, b = left.get(k, {}), right.get(k, {})
        cells = []
        for f in FIELDS:
            cells += [fmt(a.get(f)), fmt(b.get(f)) + ("+" if f == "cost" and b.get("lower_bound") else "")]
        print(f"| {k} | " + " | ".join(cells) + f" | {fmt(b.get('inherited'))} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--claude")
    ap.add_argument("--codex")
    ap.add_argument("--memoir", default="target/release/memoir")
    ap.add_argument("--ccusage")
    ap.add_argument("--store")
    ap.add_argument("--import-cmd")
    ap.add_argument("--minify", action="store_true",
                    help="give ccusage compact copies of the Claude Code files")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="usage-cmp-"))
    env = layout(root, args.claude, args.codex, args.minify)
    cc = ccusage_binary(args.ccusage)
    version, _ = run([cc, "--version"], env)
    flags = ["--offline", "--json", "--timezone", "UTC"]
    sessions = {}
    times = {}
    for agent, sub in [("claude-code", "claude"), ("codex", "codex")]:
        out, dt = run([cc, sub, "session", *flags], env)
        times[f"ccusage {sub} session"] = dt
        doc = json.loads(out)
        for r in doc.get("sessions", doc.get("session", [])):
            sid = r.get("sessionId") or r.get("period")
            sessions[f"{agent}:{Path(str(sid)).name}"] = cc_row(r)
    out, dt = run([cc, "daily", *flags], env)
    times["ccusage daily"] = dt
    cc_days = {r.get("period") or r.get("date"): cc_row(r) for r in json.loads(out).get("daily", [])}

    memoir_env = dict(os.environ, MEMOIR_HOME=str(root / "memoir-home"))
    memoir_env.pop("MEMOIR_SESSION_DIR", None)
    store = args.store
    if not store:
        if not args.import_cmd:
            sys.exit("give --store (an imported store) or --import-cmd (see --help)")
        store = str(root / "store")
        for agent, short, src in [("claude-code", "claude", args.claude), ("codex", "codex", args.codex)]:
            if src:
                files = " ".join(shlex.quote(str(f)) for f in sorted(Path(src).rglob("*.jsonl")))
                cmd = args.import_cmd.format(memoir=args.memoir, agent=agent, short=short, src=src,
                                             files=files, store=store)
                t0 = time.perf_counter()
                subprocess.run(cmd, shell=True, check=True, env=memoir_env, stdout=subprocess.DEVNULL)
                times[f"memoir import {agent}"] = time.perf_counter() - t0
    out, dt = run([args.memoir, "usage", "--dir", store, "--by", "session", "--json"], memoir_env)
    times["memoir usage --by session"] = dt
    # Match memoir sessions to ccusage's by the source file's name (ccusage's
    # session key); a source split into several memoir sessions (subagents,
    # rewind branches) gets one row per part, `name/<memoir id>`.
    headers = {}
    for f in Path(store).glob("*.jsonl"):
        with open(f) as fh:
            try:
                h = json.loads(fh.readline())
            except ValueError:
                continue
        headers[h.get("id")] = h
    mem_sessions = {}
    for r in json.loads(out)["rows"]:
        sid = r["group"]["session"]
        src = (headers.get(sid) or {}).get("source") or {}
        stem = Path(src.get("path") or sid).stem
        key = f"{r.get('agent', 'memoir')}:{stem}"
        if src.get("kind") or key in mem_sessions:
            key += f"/{sid}"
        mem_sessions[key] = memoir_row(r)
    out, dt = run([args.memoir, "usage", "--dir", store, "--by", "day", "--json"], memoir_env)
    times["memoir usage --by day"] = dt
    mem = json.loads(out)
    mem_days = {r["group"]["day"]: memoir_row(r) for r in mem["rows"]}

    print(f"ccusage {version.strip()}; memoir {args.memoir}; prices: {mem['prices']['source']} ({mem['prices']['date']})")
    table("Per session", sorted(set(sessions) | set(mem_sessions)), sessions, mem_sessions)
    table("Per day (UTC)", sorted(set(cc_days) | set(mem_days)), cc_days, mem_days)
    print("\n### Totals\n")
    print(f"memoir: {json.dumps(memoir_row(mem['total']))}; duplicate copies skipped: {mem['duplicate_responses']}")
    print("\n### Time (s)\n")
    for k, v in times.items():
        print(f"- {k}: {v:.3f}")


if __name__ == "__main__":
    main()
