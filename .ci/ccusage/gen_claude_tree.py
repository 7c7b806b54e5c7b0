#!/usr/bin/env python3
"""Generate a Claude Code history tree (CLAUDE_CONFIG_DIR layout) for the
differential usage test against ccusage.

    gen_claude_tree.py OUT_DIR [--seed N] [--sessions N]

Writes OUT_DIR/projects/<project>/<session>.jsonl (and
<session>/subagents/agent-<id>.jsonl) with the shapes real Claude Code
histories have, each response's usage chosen at random (seeded):

- streamed responses: one API message written as several lines (thinking,
  text, one line per tool_use) sharing `message.id` and `requestId`, all with
  the response's final usage;
- parallel tool calls: several tool_use lines in one response, then one
  tool_result user line for each;
- subagents (Task tool): `<session>/subagents/agent-<id>.jsonl`, its lines
  `isSidechain: true` with their own message ids;
- `/btw` sidechain replays: an `isSidechain` line in the main file repeating
  an earlier response's `message.id` (same timestamp and usage) under a new
  `requestId`;
- resumed sessions: a new session file that starts with copies of an earlier
  session's lines (same uuids, message and request ids), then goes on, and
  one of its new responses reuses an earlier `message.id` under its own
  `requestId` (a different request that shares the id);
- cache writes with the 5-minute / 1-hour split
  (`usage.cache_creation.ephemeral_5m_input_tokens` /
  `ephemeral_1h_input_tokens`), cache reads, prompts above 200k tokens;
- several models, several days, several projects.

The file names of resumed sessions sort after the session they resume (see
docs/USAGE.md, "Comparison with ccusage", for why). Standard library only;
the memoir-testkit corpus generator can replace this file: the test only
needs a tree in this layout.
"""

import argparse
import json
import os
import random
import uuid as uuidlib
from datetime import datetime, timedelta, timezone

MODELS = [
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-1-20250805",
    "claude-haiku-4-5-20251001",
    "claude-sonnet-4-20250514",
    "claude-opus-4-6",
]
PROJECTS = ["-home-dev-webapp", "-home-dev-api-server", "-home-dev-infra"]


class Gen:
    def __init__(self, rng):
        self.rng = rng

    def uid(self):
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    def msg_id(self):
        return "msg_01" + "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789") for _ in range(22))

    def req_id(self):
        return "req_011C" + "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789") for _ in range(20))

    def usage(self, long_context=False):
        r = self.rng
        read = r.choice([0, r.randint(5_000, 60_000), r.randint(60_000, 180_000)])
        if long_context:
            read = r.randint(200_001, 420_000)
        write = r.choice([0, r.randint(200, 5_000), r.randint(5_000, 40_000)])
        kind = r.choice(["5m", "1h", "mixed", "none"])
        one_hour = {"5m": 0, "1h": write, "mixed": write // 3, "none": 0}[kind]
        u = {
            "input_tokens": r.choice([3, 4, 6, r.randint(1, 2_000)]),
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "output_tokens": r.randint(1, 4_000),
            "service_tier": "standard",
        }
        if kind != "none":
            u["cache_creation"] = {
                "ephemeral_5m_input_tokens": write - one_hour,
                "ephemeral_1h_input_tokens": one_hour,
            }
        return u


def ts(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def base(g, session, cwd, parent, t, sidechain=False):
    return {
        "parentUuid": parent,
        "isSidechain": sidechain,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session,
        "version": "2.0.14",
        "gitBranch": "main",
        "uuid": g.uid(),
        "timestamp": ts(t),
    }


def user_line(g, session, cwd, parent, t, text, sidechain=False):
    d = base(g, session, cwd, parent, t, sidechain)
    d.update({"type": "user", "message": {"role": "user", "content": text}})
    return d


def response_lines(g, session, cwd, parent, t, model, usage, tools, sidechain=False, agent=None):
    """One API response as Claude Code streams it: thinking, text, tool_use lines."""
    mid, rid = g.msg_id(), g.req_id()
    blocks = [{"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
              {"type": "text", "text": "Looking at the code now."}]
    tool_ids = []
    for name in tools:
        tid = "toolu_01" + g.uid().replace("-", "")[:22]
        tool_ids.append((tid, name))
        blocks.append({"type": "tool_use", "id": tid, "name": name, "input": {"path": "src/main.rs"}})
    lines = []
    for i, block in enumerate(blocks):
        last = i == len(blocks) - 1
        d = base(g, session, cwd, parent, t + timedelta(milliseconds=300 * i), sidechain)
        if agent:
            d["agentId"] = agent
        d.update({
            "type": "assistant",
            "requestId": rid,
            "message": {
                "id": mid, "type": "message", "role": "assistant", "model": model,
                "content": [block],
                "stop_reason": ("tool_use" if tools else "end_turn") if last else None,
                "stop_sequence": None,
                "usage": usage,
            },
        })
        lines.append(d)
        parent = d["uuid"]
    return lines, tool_ids, parent


def tool_results(g, session, cwd, parent, t, tool_ids, sidechain=False, agent=None):
    lines = []
    for tid, name in tool_ids:
        d = base(g, session, cwd, parent, t, sidechain)
        if agent:
            d["agentId"] = agent
        d.update({
            "type": "user",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"{name} output"}]},
            "toolUseResult": {"stdout": f"{name} output", "stderr": "", "interrupted": False},
        })
        lines.append(d)
        parent = d["uuid"]
        t += timedelta(milliseconds=40)
    return lines, parent


def session_lines(g, session, cwd, start, turns, model, sidechain=False, agent=None, parent=None):
    """A conversation: user prompt, then responses with (parallel) tool calls."""
    r = g.rng
    t = start
    lines = []
    first = user_line(g, session, cwd, parent, t, "Please fix the failing test.", sidechain)
    if agent:
        first["agentId"] = agent
    lines.append(first)
    parent = first["uuid"]
    responses = []
    subagent_calls = []
    for turn in range(turns):
        t += timedelta(seconds=r.randint(2, 90))
        tools = r.choice([[], ["Read"], ["Read", "Grep"], ["Read", "Grep", "Bash"]])
        if not sidechain and turn == 1:
            tools = ["Task"]
        if turn == turns - 1:
            tools = []
        m = model if r.random() < 0.8 else r.choice(MODELS)
        usage = g.usage(long_context=r.random() < 0.12)
        out, tool_ids, parent = response_lines(g, session, cwd, parent, t, m, usage, tools, sidechain, agent)
        lines.extend(out)
        responses.append(out)
        if "Task" in tools:
            subagent_calls.append(t)
        t += timedelta(seconds=1)
        res, parent = tool_results(g, session, cwd, parent, t, tool_ids, sidechain, agent)
        lines.extend(res)
    return lines, responses, subagent_calls, t


def write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for d in lines:
            f.write(json.dumps(d, separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sessions", type=int, default=12)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    g = Gen(rng)
    day0 = datetime(2026, 5, 4, 8, 0, tzinfo=timezone.utc)
    # Session ids in increasing order, so a resumed session sorts after its origin.
    ids = sorted(g.uid() for _ in range(a.sessions * 2))
    next_id = iter(ids)
    for n in range(a.sessions):
        project = PROJECTS[n % len(PROJECTS)]
        cwd = "/" + project.strip("-").replace("-", "/", 2)
        sid = next(next_id)
        start = day0 + timedelta(days=n // 3, hours=rng.randint(0, 20), minutes=rng.randint(0, 59))
        model = rng.choice(MODELS)
        lines, responses, tasks, end = session_lines(g, sid, cwd, start, rng.randint(3, 8), model)
        # /btw sidechain replay of an earlier response, under a new request id.
        if n % 3 == 0 and responses:
            original = responses[0][0]
            replay = json.loads(json.dumps(original))
            replay.update({"isSidechain": True, "uuid": g.uid(), "requestId": g.req_id(), "parentUuid": lines[-1]["uuid"]})
            lines.append(replay)
            extra, _, _, _ = session_lines(g, sid, cwd, end + timedelta(seconds=5), 1, "claude-haiku-4-5-20251001", sidechain=True, parent=replay["uuid"])
            lines.extend(extra)
        write(os.path.join(a.out, "projects", project, f"{sid}.jsonl"), lines)
        # Subagents started by the Task calls.
        for i, t in enumerate(tasks):
            agent = f"{rng.getrandbits(32):08x}"
            sub, _, _, _ = session_lines(g, sid, cwd, t + timedelta(seconds=1), rng.randint(2, 4), "claude-haiku-4-5-20251001", sidechain=True, agent=agent)
            write(os.path.join(a.out, "projects", project, sid, "subagents", f"agent-{agent}.jsonl"), sub)
        # A resumed session: copies of the start of this one, then new turns.
        if n % 4 == 1:
            rid = next(next_id)
            cut = max(2, len(lines) // 2)
            copied = [json.loads(json.dumps(d)) for d in lines[:cut]]
            more, _, _, _ = session_lines(g, rid, cwd, end + timedelta(hours=2), rng.randint(2, 4), model, parent=copied[-1]["uuid"])
            # A different response that reuses an earlier message id under its
            # own request id, model, usage and content: a separate request.
            fresh = more[1]["message"]["id"]
            reused = responses[0][0]["message"]["id"]
            for d in more:
                if d["type"] == "assistant" and d["message"]["id"] == fresh:
                    d["message"]["id"] = reused
            write(os.path.join(a.out, "projects", project, f"{rid}.jsonl"), copied + more)
    # One synthetic (no-API) assistant line, as Claude Code writes for errors.
    sid = next(next_id)
    t = day0 + timedelta(days=5)
    u = user_line(g, sid, "/home/dev/webapp", None, t, "hello")
    d = base(g, sid, "/home/dev/webapp", u["uuid"], t + timedelta(seconds=1))
    d.update({"type": "assistant", "isApiErrorMessage": True, "message": {
        "id": g.uid(), "type": "message", "role": "assistant", "model": "<synthetic>",
        "content": [{"type": "text", "text": "API Error"}], "stop_reason": "stop_sequence",
        "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
    write(os.path.join(a.out, "projects", PROJECTS[0], f"{sid}.jsonl"), [u, d])


if __name__ == "__main__":
    main()
