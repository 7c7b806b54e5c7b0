"""The native API (memoir._memoir): sessions end to end, the error mapping,
threads, and crash/corruption cases on real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import memoir
from memoir import (
    ConflictError,
    CorruptError,
    InvalidInputError,
    MemoirError,
    NotFoundError,
    Store,
    UnavailableError,
    UnsupportedError,
)


def text(role, t):
    return {"role": role, "content": [{"type": "text", "text": t}]}


def test_session_lifecycle(store):
    sid = store.create(title="deploy", meta={"kind": "chat", "my_app": {"k": [1, 2]}})
    assert store.header(sid)["my_app"] == {"k": [1, 2]}
    assert store.append(sid, [text("user", "where is the deploy key?"), text("assistant", "in vault")]) == (1, 2)
    assert store.append(sid, []) is None
    msgs, report = store.load(sid)
    assert [m["content"][0]["text"] for m in msgs] == ["where is the deploy key?", "in vault"]
    assert report["clean"] and report["title"] == "deploy" and report["message_seqs"] == [1, 2]

    child = store.fork(sid, messages=1, title="branch")
    store.append(child, [text("assistant", "in the safe")])
    cmsgs, creport = store.load(child)
    assert [m["content"][0]["text"] for m in cmsgs] == ["where is the deploy key?", "in the safe"]
    assert creport["inherited"] == 1 and creport["meta"]["parent"]["session"] == sid

    store.rewrite(sid, [text("user", "summary: key in vault")])
    assert [m["content"][0]["text"] for m in store.load(sid)[0]] == ["summary: key in vault"]
    # The fork still reads the history it was cut from.
    assert len(store.load(child)[0]) == 2

    seq = store.checkpoint(sid, {"cutoff": 3})
    assert store.load(sid)[1]["checkpoint"] == {"cutoff": 3} and seq > 0
    store.rename(sid, "renamed")
    ids = {e["id"]: e for e in store.list()}
    assert set(ids) == {sid, child} and ids[sid]["title"] == "renamed"
    assert store.find(child[:-3]) == child

    block = store.recall(sid, "vault", token_budget=200)
    assert "vault" in block["text"] and block["tokens"] <= 200

    assert store.delete(child) is True
    assert store.delete(child) is False
    with pytest.raises(NotFoundError):
        store.load(child)
    assert [e["id"] for e in store.list(trash=True)] == [child]
    store.restore(child)
    assert len(store.load(child)[0]) == 2
    store.delete(child)
    with pytest.raises(ConflictError):
        store.create(id=child)  # the trash holds it: restore or purge first
    store.purge(child)
    with pytest.raises(NotFoundError):
        store.restore(child)
    assert store.create(id=child) == child


def test_raw_records_round_trip(store):
    sid = store.create()
    store.append_records(sid, [{"record": "my_kind", "payload": {"a": [1, None, 2.5]}}, {"record": "title", "title": "x"}])
    records, report = store.records(sid)
    assert records == [
        {"record": "my_kind", "payload": {"a": [1, None, 2.5]}, "seq": 1},
        {"record": "title", "title": "x", "seq": 2},
    ]
    assert store.records(sid, kinds=["my_kind"])[0][0]["payload"]["a"][2] == 2.5
    assert report["last_seq"] == 2 and report["header"]["id"] == sid


def test_errors_map_to_the_hierarchy(store, store_dir):
    for cls in (InvalidInputError, NotFoundError, ConflictError, UnavailableError, UnsupportedError, CorruptError):
        assert issubclass(cls, MemoirError)
    with pytest.raises(NotFoundError):
        store.load("20260101T000000-000000000000")
    with pytest.raises(InvalidInputError):
        store.load("../../etc/passwd")
    with pytest.raises(InvalidInputError):
        store.create(meta={"parent": {"session": "x", "seq": 1, "messages": 1}})
    sid = store.create(id="fixed-id")
    with pytest.raises(ConflictError):
        store.create(id="fixed-id")
    store.append(sid, [text("user", "a")])
    with pytest.raises(ConflictError):
        store.append(sid, [text("user", "b")], expected_seq=1)  # seq 1 is taken
    assert store.append(sid, [text("user", "b")], expected_seq=2) == (2, 2)
    with pytest.raises(InvalidInputError):
        store.append(sid, [{"role": "nobody", "content": []}])
    with pytest.raises(InvalidInputError):
        store.append_records(sid, [{"record": "meta", "id": "x", "created_at": "2026-01-01T00:00:00Z"}])
    with pytest.raises(InvalidInputError):
        store.fork(sid, at_seq=99)
    with pytest.raises(UnsupportedError):
        Store.open("postgres://localhost/db")
    with pytest.raises(InvalidInputError):
        Store.open(str(store_dir / "fixed-id.jsonl"))  # a file, not a directory
    with pytest.raises(UnavailableError):
        Store.open("http://127.0.0.1:9", token="t").list()
    # A transcript whose first line is not a header does not verify.
    (store_dir / "broken.jsonl").write_text('{"not": "a memoir line"}\n')
    with pytest.raises(CorruptError):
        store.load("broken")


def test_torn_tail_is_reported_then_repaired(store, store_dir):
    sid = store.create()
    store.append(sid, [text("user", "one"), text("assistant", "two")])
    path = store_dir / f"{sid}.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"seq":3,"record":"message","role":"user","con')  # a crash mid-write
    msgs, report = store.load(sid)
    assert len(msgs) == 2
    assert not report["clean"] and [i["kind"] for i in report["issues"]] == ["torn_tail"]
    # The next append cuts the torn bytes aside and continues the chain.
    assert store.append(sid, [text("user", "three")]) == (3, 3)
    msgs, report = Store.open(str(store_dir)).load(sid)
    assert [m["content"][0]["text"] for m in msgs] == ["one", "two", "three"] and report["clean"]
    assert any(p.name.startswith(f"{sid}.jsonl.torn-") for p in store_dir.iterdir())


WRITER = r"""
import sys, memoir
s = memoir.Store.open(sys.argv[1])
sid = sys.argv[2]
i = 0
print("ready", flush=True)
while True:
    s.append(sid, [{"role": "user", "content": [{"type": "text", "text": f"m{i}"}]}] * 3)
    i += 1
"""


def test_sigkill_mid_append_loses_no_acknowledged_batch(store, store_dir):
    sid = store.create()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store_dir), sid], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    msgs, report = Store.open(str(store_dir)).load(sid)
    # Batches are atomic: whole batches of three, never a part of one.
    assert len(msgs) % 3 == 0 and len(msgs) > 0
    assert all(i["kind"] in ("torn_tail", "partial_batch") for i in report["issues"])
    first, last = store.append(sid, [text("user", "after")])
    assert first == len(msgs) + 1
    assert Store.open(str(store_dir)).load(sid)[1]["clean"]


def test_threads_append_concurrently(store_dir):
    store = Store.open(str(store_dir), durability="flush")
    shared = store.create()
    own = [store.create() for _ in range(4)]
    errors = []

    def work(i):
        try:
            for n in range(25):
                store.append(shared, [text("user", f"{i}-{n}")])
                store.append(own[i], [text("user", f"{n}")])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    msgs, report = store.load(shared)
    assert report["clean"] and report["message_seqs"] == list(range(1, 101))
    got = [m["content"][0]["text"] for m in msgs]
    for i in range(4):
        assert [g for g in got if g.startswith(f"{i}-")] == [f"{i}-{n}" for n in range(25)]
        assert len(store.load(own[i])[0]) == 25


def test_the_gil_is_released_during_appends(store_dir):
    # With a long switch interval, a spinning Python thread runs while the
    # main thread is inside a native call only if that call released the GIL.
    store = Store.open(str(store_dir))
    sid = store.create()
    batch = [text("user", "x" * 200)] * 5000
    ticks = 0
    done = threading.Event()

    def spin():
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)  # let the spinner run; we come back with a fresh time slice
        before = ticks
        store.append(sid, batch)
        during = ticks - before
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(old)
    assert during > 0


def test_durability_and_location(store_dir):
    assert Store.open(str(store_dir)).durability == "fsync"
    assert Store.open(str(store_dir), durability="none").durability == "none"
    with pytest.raises(InvalidInputError):
        Store.open(str(store_dir), durability="sometimes")
    assert Store.memory().location == "memory:"


def test_search_across_sessions(store):
    a = store.create(title="deploy")
    store.append(a, [text("user", "the migration fails on the orders table"), text("assistant", "add the missing index")])
    b = store.create(title="other")
    store.append(b, [text("user", "lunch plans for friday")])
    hits = store.search("migration orders")
    assert hits and hits[0]["session"] == a and hits[0]["seq"] == 1
    assert all(h["session"] != b for h in hits)
    # Incremental: a new message is found on the next search.
    store.append(b, [text("user", "the orders migration again")])
    assert {h["session"] for h in store.search("orders migration", mode="lexical")} == {a, b}
    assert [h["session"] for h in store.search("orders", session=b)] == [b]
    with pytest.raises(InvalidInputError):
        store.search("x", mode="psychic")
    with pytest.raises(UnsupportedError):
        Store.memory().search("x")
