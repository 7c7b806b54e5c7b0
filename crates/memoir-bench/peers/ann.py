#!/usr/bin/env python3
"""ANN peer yardsticks for memoir's vector index benchmarks.

Reads the vectors memoir's `view` bench wrote (`cargo run --release -p memoir-bench --
view`), so every engine searches exactly the same data:

    <dir>/meta.json           {"dims": 384, "k": 10, "sizes": [1000, ...]}
    <dir>/base_<N>.f32        N x dims float32, row-major, unit vectors
    <dir>/queries_<N>.f32     Q x dims float32
    <dir>/gt_<N>.i32          Q x k int32: exact top-k row ids (by dot product)

and prints one JSON object per line: engine, size, parameters, recall@k,
per-query latency p50/p99 and QPS, all from the same loop of one call per
query on one thread (memoir's bench loop is the same: one `search` call per
query), plus `qps_batch`, the QPS of all queries in one call, for reference
(no per-call overhead). `call_overhead_us` is the cost of one empty
`knn_query`-shaped round trip into the extension measured on a 1-row index,
so a reader can see how much of the per-query time is Python.

Engines: hnswlib (HNSW, inner product), faiss IndexHNSWFlat (inner product),
faiss IndexFlatIP (exact). Everything runs on one thread.

    pip install hnswlib==0.8.0 faiss-cpu numpy
    python3 crates/memoir-bench/peers/ann.py --dir target/bench-view --m 16 --efc 128
"""

import argparse
import json
import os
import sys
import time

import numpy as np


def load(dir_, n, dims, k):
    base = np.fromfile(os.path.join(dir_, f"base_{n}.f32"), dtype=np.float32).reshape(-1, dims)
    queries = np.fromfile(os.path.join(dir_, f"queries_{n}.f32"), dtype=np.float32).reshape(-1, dims)
    gt = np.fromfile(os.path.join(dir_, f"gt_{n}.i32"), dtype=np.int32).reshape(-1, k)
    return base, queries, gt


def recall(found, gt):
    k = gt.shape[1]
    hits = 0
    for f, g in zip(found, gt):
        hits += len(set(int(x) for x in f[:k]) & set(int(x) for x in g))
    return hits / (k * len(gt))


def timed_single(search, queries, k):
    """One call per query: (results, p50 ms, p99 ms, QPS of the whole loop)."""
    lat = []
    out = []
    rows = [queries[i : i + 1] for i in range(len(queries))]
    start = time.perf_counter()
    for q in rows:
        t = time.perf_counter()
        ids = search(q, k)
        lat.append((time.perf_counter() - t) * 1e3)
        out.append(ids[0])
    total = time.perf_counter() - start
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(np.ceil(q * (len(lat) - 1))))]
    return out, p(0.5), p(0.99), len(queries) / total


def rss_mb():
    """Resident memory of this process (VmRSS), MB; 0 where /proc is missing."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def call_overhead(hnswlib, dims, queries, k):
    """Microseconds of one single-query call on a k-row index (nearly no search work)."""
    tiny = hnswlib.Index(space="ip", dim=dims)
    tiny.init_index(max_elements=k, ef_construction=k, M=4, random_seed=100)
    tiny.set_num_threads(1)
    tiny.add_items(queries[:k], np.arange(k))
    tiny.set_ef(k)
    rows = [queries[i : i + 1] for i in range(min(len(queries), 1000))]
    t = time.perf_counter()
    for q in rows:
        tiny.knn_query(q, k=k)
    return (time.perf_counter() - t) / len(rows) * 1e6


def timed_batch(search, queries, k):
    t = time.perf_counter()
    ids = search(queries, k)
    dt = time.perf_counter() - t
    return ids, len(queries) / dt


def emit(**row):
    print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="target/bench-view")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--efc", type=int, default=128)
    ap.add_argument("--efs", default="10,16,24,32,48,64,96,128,192,256")
    ap.add_argument("--sizes", default=None, help="comma list; default: all in meta.json")
    ap.add_argument("--engines", default="hnswlib,faiss-hnsw,faiss-flat")
    args = ap.parse_args()

    meta = json.load(open(os.path.join(args.dir, "meta.json")))
    dims, k = meta["dims"], meta["k"]
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else meta["sizes"]
    efs = [int(e) for e in args.efs.split(",")]
    engines = args.engines.split(",")

    versions = {"numpy": np.__version__, "python": sys.version.split()[0]}
    try:
        import hnswlib  # noqa: F401

        versions["hnswlib"] = getattr(hnswlib, "__version__", "0.8.0")
    except ImportError:
        engines = [e for e in engines if e != "hnswlib"]
    try:
        import faiss

        faiss.omp_set_num_threads(1)
        versions["faiss"] = faiss.__version__
    except ImportError:
        engines = [e for e in engines if not e.startswith("faiss")]
    emit(engine="versions", **versions)

    for n in sizes:
        base, queries, gt = load(args.dir, n, dims, k)
        if "hnswlib" in engines:
            import hnswlib

            before = rss_mb()
            idx = hnswlib.Index(space="ip", dim=dims)
            idx.init_index(max_elements=n, ef_construction=args.efc, M=args.m, random_seed=100)
            idx.set_num_threads(1)
            t = time.perf_counter()
            idx.add_items(base, np.arange(n))
            build = time.perf_counter() - t
            index_mb = rss_mb() - before
            overhead_us = call_overhead(hnswlib, dims, queries, k)
            for ef in efs:
                if ef < k:
                    continue
                idx.set_ef(ef)
                search = lambda q, kk: idx.knn_query(q, k=kk)[0]
                found, p50, p99, qps = timed_single(search, queries, k)
                _, qps_batch = timed_batch(search, queries, k)
                emit(engine="hnswlib", n=n, m=args.m, efc=args.efc, ef=ef, build_s=round(build, 3),
                     recall=round(recall(found, gt), 4), p50_ms=round(p50, 4), p99_ms=round(p99, 4),
                     qps=round(qps, 1), qps_batch=round(qps_batch, 1),
                     call_overhead_us=round(overhead_us, 2), index_mb=round(index_mb, 1))
        if "faiss-hnsw" in engines:
            import faiss

            idx = faiss.IndexHNSWFlat(dims, args.m, faiss.METRIC_INNER_PRODUCT)
            idx.hnsw.efConstruction = args.efc
            t = time.perf_counter()
            idx.add(base)
            build = time.perf_counter() - t
            for ef in efs:
                if ef < k:
                    continue
                idx.hnsw.efSearch = ef
                search = lambda q, kk: idx.search(q, kk)[1]
                found, p50, p99, qps = timed_single(search, queries, k)
                _, qps_batch = timed_batch(search, queries, k)
                emit(engine="faiss-hnsw", n=n, m=args.m, efc=args.efc, ef=ef, build_s=round(build, 3),
                     recall=round(recall(found, gt), 4), p50_ms=round(p50, 4), p99_ms=round(p99, 4),
                     qps=round(qps, 1), qps_batch=round(qps_batch, 1))
        if "faiss-flat" in engines:
            import faiss

            idx = faiss.IndexFlatIP(dims)
            idx.add(base)
            search = lambda q, kk: idx.search(q, kk)[1]
            found, p50, p99, qps = timed_single(search, queries, k)
            _, qps_batch = timed_batch(search, queries, k)
            emit(engine="faiss-flat", n=n, recall=round(recall(found, gt), 4), p50_ms=round(p50, 4),
                 p99_ms=round(p99, 4), qps=round(qps, 1), qps_batch=round(qps_batch, 1))


if __name__ == "__main__":
    main()
