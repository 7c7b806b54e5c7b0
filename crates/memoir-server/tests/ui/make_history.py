"""A small realistic agent history for the web view's browser tests.

Writes Claude Code transcripts (one session that edits files with Edit,
MultiEdit and Write, thinks, uses tokens on two models over several days,
and is rewound once) into a directory, to be imported with `memoir import`
next to the repository's real fixtures (testdata/transcripts)."""

import json
import pathlib
import sys

SESSION = "77770000-0000-4000-8000-00000000ed17"
CWD = "/workspace/billing-service"


def line(kind, uuid, parent, ts, message, **extra):
    out = {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": SESSION,
        "version": "2.1.180",
        "timestamp": ts,
        "message": message,
    }
    out.update(extra)
    return out


def assistant(uuid, parent, ts, content, model="claude-sonnet-4-5-20250929", inp=1200, out=300, cache=5000):
    return line(
        "assistant",
        uuid,
        parent,
        ts,
        {
            "id": "msg_" + uuid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "stop_reason": "end_turn",
            "content": content,
            "usage": {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cache},
        },
        requestId="req_" + uuid,
    )


def user(uuid, parent, ts, text):
    return line("user", uuid, parent, ts, {"role": "user", "content": [{"type": "text", "text": text}]})


def result(uuid, parent, ts, tool_id, text, error=False):
    return line(
        "user",
        uuid,
        parent,
        ts,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": error}]},
    )


def tool(tid, name, inp):
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def history():
    big_log = "\n".join(f"2026-03-0{1 + i % 9} worker[{i}] retry invoice INV-{1000 + i} status=pending" for i in range(900))
    rows = [
        user("u1", None, "2026-03-02T09:00:00.000Z", "The invoice rounding is off by a cent for EUR totals. Find the bug and fix it."),
        assistant(
            "a1",
            "u1",
            "2026-03-02T09:00:05.000Z",
            [
                {"type": "thinking", "thinking": "Rounding per line item instead of on the total would explain a one-cent drift.", "signature": "sig"},
                {"type": "text", "text": "Let me look at how totals are computed."},
                tool("toolu_read1", "Read", {"file_path": f"{CWD}/src/invoice.py"}),
            ],
        ),
        result("r1", "a1", "2026-03-02T09:00:06.000Z", "toolu_read1", "def total(lines):\n    return sum(round(l.amount, 2) for l in lines)\n"),
        assistant(
            "a2",
            "r1",
            "2026-03-02T09:00:20.000Z",
            [
                {"type": "text", "text": "Each line is rounded before summing. I will round the sum with banker's rounding instead."},
                tool(
                    "toolu_edit1",
                    "Edit",
                    {
                        "file_path": f"{CWD}/src/invoice.py",
                        "old_string": "def total(lines):\n    return sum(round(l.amount, 2) for l in lines)",
                        "new_string": "def total(lines):\n    exact = sum(l.amount for l in lines)\n    return exact.quantize(CENT, rounding=ROUND_HALF_EVEN)",
                    },
                ),
            ],
        ),
        result("r2", "a2", "2026-03-02T09:00:21.000Z", "toolu_edit1", "The file src/invoice.py has been updated."),
        # A rewind: a second prompt with the same parent as the first answer's follow-up.
        user("u2", "r2", "2026-03-02T09:30:00.000Z", "Actually, keep per-line rounding but document why in the README."),
        assistant(
            "b1",
            "u2",
            "2026-03-02T09:30:10.000Z",
            [tool("toolu_edit_fail", "Edit", {"file_path": f"{CWD}/README.md", "old_string": "## Rounding", "new_string": "## Rounding\n\nLines are rounded one by one (legal requirement)."})],
            inp=900,
            out=120,
            cache=0,
        ),
        result("rb1", "b1", "2026-03-02T09:30:11.000Z", "toolu_edit_fail", "String to replace not found in file.", error=True),
        assistant(
            "a3",
            "r2",
            "2026-03-03T10:15:00.000Z",
            [
                tool(
                    "toolu_multi1",
                    "MultiEdit",
                    {
                        "file_path": f"{CWD}/src/invoice.py",
                        "edits": [
                            {"old_string": "import decimal", "new_string": "from decimal import Decimal, ROUND_HALF_EVEN"},
                            {"old_string": "PRECISION = 2", "new_string": "CENT = Decimal(\"0.01\")"},
                        ],
                    },
                )
            ],
            model="claude-opus-4-1-20250805",
            inp=3000,
            out=800,
            cache=20000,
        ),
        result("r3", "a3", "2026-03-03T10:15:01.000Z", "toolu_multi1", "Applied 2 edits to src/invoice.py"),
        assistant(
            "a4",
            "r3",
            "2026-03-03T10:16:00.000Z",
            [
                {"type": "text", "text": "Now a regression test for the EUR case."},
                tool(
                    "toolu_write1",
                    "Write",
                    {
                        "file_path": f"{CWD}/tests/test_rounding.py",
                        "content": "from decimal import Decimal\nfrom invoice import total, Line\n\n\ndef test_eur_total_rounds_once():\n    lines = [Line(Decimal('0.125'))] * 3\n    assert total(lines) == Decimal('0.38')\n",
                    },
                ),
            ],
        ),
        result("r4", "a4", "2026-03-03T10:16:01.000Z", "toolu_write1", "File created successfully at tests/test_rounding.py"),
        assistant("a5", "r4", "2026-03-04T08:00:00.000Z", [tool("toolu_bash1", "Bash", {"command": "pytest -q tests/test_rounding.py", "description": "Run the new test"})]),
        result("r5", "a5", "2026-03-04T08:00:09.000Z", "toolu_bash1", "1 passed in 0.03s"),
        assistant("a6", "r5", "2026-03-04T08:01:00.000Z", [tool("toolu_bash2", "Bash", {"command": "grep -n retry logs/worker.log", "description": "Check the retry log"})]),
        result("r6", "a6", "2026-03-04T08:01:02.000Z", "toolu_bash2", big_log),
        assistant(
            "a7",
            "r6",
            "2026-03-04T08:02:00.000Z",
            [{"type": "text", "text": "The quantize fix resolves the one-cent EUR drift; the regression test passes."}],
        ),
    ]
    return rows


LONG_SESSION = "77770000-0000-4000-8000-0000000010ad"
LONG_MESSAGES = 10_000


def long_history():
    """A session of LONG_MESSAGES messages (a long-running agent loop)."""
    rows = []
    parent = None
    for i in range(LONG_MESSAGES // 2):
        ts = f"2026-04-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.000Z"
        u = user(f"lu{i}", parent, ts, f"step {i}: poll the build queue")
        a = assistant(f"la{i}", f"lu{i}", ts, [{"type": "text", "text": f"queue depth at step {i} is {i % 17}"}], inp=50, out=10, cache=0)
        for row in (u, a):
            row["sessionId"] = LONG_SESSION
        rows += [u, a]
        parent = f"la{i}"
    return rows


def main(out_dir):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"{SESSION}.jsonl", "w") as f:
        for row in history():
            f.write(json.dumps(row) + "\n")
    with open(out / f"{LONG_SESSION}.jsonl", "w") as f:
        for row in long_history():
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
