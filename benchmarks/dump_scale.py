"""`make bench-dump-scale`: `duplicate_clusters`' work units on synthetic signatures of growing size, written to
benchmarks/results/dump-scale.md, beside datatrove 0.10.1's MinhashDedupBuckets + MinhashDedupCluster on the same
signatures.

    .venv/bin/python -m benchmarks.dump_scale [--sizes 1000000,10000000,30000000] [--datatrove-size 1000000]
                                              [--workers 2]
                                              [--output BENCHMARKS.md] [--json FILE]

The section between `<!-- dump-scale:begin -->` and `<!-- dump-scale:end -->` of benchmarks/results/dump-scale.md
(beside the output) is replaced, and the row of the summary table in the output (BENCHMARKS.md). Per size, in
fresh subprocesses whose environment sets POLARS_MAX_THREADS, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS to 1:

1. synthesize: `synthesize` (random hashes and MinHash values; 5% exact copies, 5% near copies
   of random originals, so planted clusters of 2 or more documents whose sizes are known) in groups of 4 parts of
   `--part-rows` documents, so that a copy and its source are in different parts three times in four; a group is
   made, written and dropped before the next, so no process holds a size's signatures. Each part's band index and
   documents are written as the signatures units write them (that writing timed apart: the index step) to an
   embedded SeaweedFS (the lake's real store, on loopback, in a temporary folder); the signatures part itself, which
   the clustering never reads, is written to local disk only to count its bytes (30M documents' would be 17 GB of
   the store); for datatrove, its 14 sorted `.minhash.sig` files (below). The truth (each document's source) is
   kept on local disk.
2. cluster: `cluster_lake` (edges, components in rounds of units per range of documents, members, keep from the
   band index) with `DedupSettings()` (exact + near, Jaccard confirmation at 0.8, `bucket_rows` 4,000,000,
   `merge_rows` 2,000,000, `keep_rows` 1,000,000) with the process-pool runner (`--workers`, one thread each):
   per step, units, wall seconds, CPU seconds (summed over units, `time.process_time` in the worker), the largest unit's
   peak RSS (`ru_maxrss` of its worker), bytes written; the driver's own peak RSS (it plans the units and merges the
   keep units' summaries). The goal: the largest unit's and the driver's peaks within +10% from the smallest size
   to the largest (1M to 30M by default), i.e. bounded by settings, not by the crawl.
3. recall and precision against the planted truth, by the removed set: a removal is right when the document is
   in a planted cluster that keeps at least one member; recall = right removals / planted copies, precision =
   right removals / removals. For ours also by pair: a copy is found when it ends with its source's kept document;
   a removal is right when it and its kept document have the same planted source.

datatrove reads its own signature format: per band a file `bucket_BBB/RRRRR.minhash.sig` per part (rank) of
(hash, document index) records sorted by hash. Written from the same synthetic signatures with
`hashes_per_bucket=1`, 64-bit: the one "hash" of a band is our band hash shifted right 3 bits (datatrove stops
reading a bucket at a hash ≥ 2^61 − 1). So both sides see the same 14 LSH bands; datatrove has no Jaccard
confirmation and no exact-hash rule (an exact copy shares all 14 bands, so it is found anyway). Its buckets stage
runs one task per band, `--workers` at a time, each task in its own process (`LocalPipelineExecutor(workers=1)`),
then its cluster stage (one task: union-find over every duplicate pair in one process), with its own interpreter
from `.bench/compare/datatrove-venv` (made by `make bench-compare`, or here on first use).

Each run's report line states the conditions measured during that run (`benchmarks.harness.Conditions`): the load
average at its start, its end and the largest sampled, the CPU model and the commit (a + when the tree differed).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.harness import Conditions, conditions_text
from benchmarks.report import MIB, n, table
from benchmarks.summary import Row, publish, verdict

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- dump-scale:begin -->", "<!-- dump-scale:end -->"
THREADS_ENV = {"POLARS_MAX_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "RAYON_NUM_THREADS": "1"}
CRAWL = "BENCH"
GROUP_PARTS = 4
DT_SHIFT = 3  # datatrove's 64-bit hashes are below 2**61 - 1
STEPS = ("edges", "components", "members", "keep")
DT_SCRIPT = """
import json, resource, sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster
from datatrove.utils.hashing import HashConfig
stage, src, dst, logs, rank, tasks = sys.argv[1:7]
config = MinhashConfig(num_buckets=int(sys.argv[7]), hashes_per_bucket=1, hash_config=HashConfig(precision=64))
step = (MinhashDedupBuckets if stage == "buckets" else MinhashDedupCluster)(src, dst, config=config)
t0, c0 = time.perf_counter(), time.process_time()
LocalPipelineExecutor([step], tasks=int(tasks), workers=1, local_tasks=1, local_rank_offset=int(rank),
                      logging_dir=logs, skip_completed=False).run()
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def log(msg: str) -> None:
    print(f"[bench-dump-scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# 1. synthesize ---------------------------------------------------------------------------------------------------


def write_datatrove_sigs(folder: Path, rank: int, bands) -> None:
    import numpy as np

    dtype = np.dtype([("hash", "<u8"), ("doc", "<u4")])
    for b in range(bands.shape[1]):
        records = np.empty(bands.shape[0], dtype)
        records["hash"] = bands[:, b] >> np.uint64(DT_SHIFT)
        records["doc"] = np.arange(bands.shape[0], dtype=np.uint32)
        records.sort(order=["hash", "doc"])
        path = folder / f"bucket_{b:03d}" / f"{rank:05d}.minhash.sig"
        path.parent.mkdir(parents=True, exist_ok=True)
        records.tofile(path)


def synthesize(n_docs: int, seed: int, first: int = 0):
    """N rows of CLUSTER_COLUMNS + crawl + shard, documents `first` .. `first + n_docs - 1`: random hashes, then 5%
    exact copies (text hash, bands and MinHash values of a source row) and 5% near copies (1 band, plus each other
    band with probability 0.2, of a source row; 10 of its 112 MinHash values changed). Sources are never copies, so
    exactly the copies should be removed. -> (frame, stats, source: each row's source row, -1 for an original)."""
    import numpy as np
    import polars as pl

    from llm_assets.core.dedup import CLUSTER_COLUMNS
    from llm_assets.settings import DedupSettings

    bands = DedupSettings().bands
    rng = np.random.default_rng(seed)
    text_hash = rng.integers(1, 2**64 - 1, n_docs, dtype=np.uint64)
    url_hash = rng.integers(1, 2**64 - 1, n_docs, dtype=np.uint64)
    band = rng.integers(1, 2**64 - 1, (n_docs, bands), dtype=np.uint64)
    n_chars = rng.integers(200, 20_000, n_docs)
    order = rng.permutation(n_docs)
    n_copy = n_docs // 20
    exact, near, originals = order[:n_copy], order[n_copy:2 * n_copy], order[2 * n_copy:]
    exact_src = rng.choice(originals, n_copy)
    text_hash[exact], band[exact], n_chars[exact] = text_hash[exact_src], band[exact_src], n_chars[exact_src]
    src = rng.choice(originals, n_copy)
    shared = rng.random((n_copy, bands)) < 0.2
    shared[np.arange(n_copy), rng.integers(0, bands, n_copy)] = True
    band[near] = np.where(shared, band[src], band[near])
    # MinHash values, for the Jaccard confirmation: an exact copy has its source's, a near copy 10 of 112 changed
    k = bands * DedupSettings().rows
    sig = rng.integers(0, 2**32, (n_docs, k), dtype=np.uint64).astype(np.uint32)
    sig[exact] = sig[exact_src]
    changed = rng.random((n_copy, k)) < 10 / k
    sig[near] = np.where(changed, sig[near], sig[src])
    i = pl.int_range(first, first + n_docs, eager=True)
    df = pl.DataFrame({
        "doc_id": "doc-" + i.cast(pl.String).str.zfill(9),
        "source_key": "raw/BENCH/file-" + (i % 64).cast(pl.String).str.zfill(3) + ".warc.gz",
        "url": "https://site" + (i % 50_000).cast(pl.String) + ".example/page/" + i.cast(pl.String),
        "fetch_time": "2024-05-" + (i % 28 + 1).cast(pl.String).str.zfill(2) + "T"
                      + (i % 24).cast(pl.String).str.zfill(2) + ":00:00Z",
        "n_chars": pl.Series(n_chars, dtype=pl.Int64),
        "text_hash": text_hash, "url_hash": url_hash,
        "bands": pl.Series(band).cast(pl.Array(pl.UInt64, bands)),
        "signature": pl.Series(sig).cast(pl.Array(pl.UInt32, k)),
        "crawl": pl.repeat(CRAWL, n_docs, eager=True),
        "shard": (i % 4).cast(pl.String).str.zfill(4),
    }).select(*CLUSTER_COLUMNS, "crawl", "shard")
    source = np.full(n_docs, -1, np.int64)
    source[exact], source[near] = exact_src, src
    stats = {"documents": n_docs, "bands": bands, "columns": df.columns, "exact_copies": n_copy,
             "near_copies": n_copy, "mean_shared_bands": float(shared.sum(axis=1).mean())}
    return df, stats, np.where(source >= 0, source + first, -1)


def child_synthesize(args) -> dict:
    import numpy as np
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    from llm_assets.core.clusters import IndexWriter
    from llm_assets.core.lake import Lake, part_key
    from llm_assets.core.signatures import BATCH_ROWS, signature_schema
    from llm_assets.core.units import unit_id
    from llm_assets.settings import DedupSettings

    store, settings, size = store_config(args), DedupSettings(), args.size
    lake, schema = Lake(store), signature_schema(settings.bands, settings.rows)
    sources, parts, planted, written = [], [], {"exact": 0, "near": 0, "cross_crawl": 0}, 0
    index = {"cpu": 0.0, "peak_rss": 0, "bytes": 0}
    history = json.loads(args.copy_from.read_text()) if args.copy_from else []
    start = time.perf_counter()
    for group, (frame, stats, source) in enumerate(crawl_groups(size, args.part_rows, args.seed, args.first)):
        if history:  # 5% of the group: copies of an earlier crawl's documents
            frame, copied = copy_from_history(frame, history[group % len(history)], group, args, seed=group)
            planted["cross_crawl"] += copied
        sources.append(source)
        planted["exact"] += stats["exact_copies"]
        planted["near"] += stats["near_copies"]
        for offset in range(0, frame.height, args.part_rows):
            part = frame.slice(offset, args.part_rows)
            rank, shard = len(parts), f"{len(parts):04d}"
            key, ix, docs = (part_key("signatures", args.crawl, shard, unit_id("dump-scale", args.crawl, str(size),
                                                                              str(rank), role))
                             for role in ("part", "index", "docs"))
            table = part.select(schema.names).to_arrow().cast(schema)
            local = Path(args.truth).with_suffix(".part.parquet")  # its size only: the clustering never reads it
            pq.write_table(table, local, compression="zstd", use_dictionary=False)
            written += local.stat().st_size
            local.unlink()
            rss, cpu = maxrss(), time.process_time()
            with IndexWriter(lake, ix, docs, settings.bands * settings.rows) as writer:
                for batch in table.to_batches(max_chunksize=BATCH_ROWS):  # as the signatures unit adds them
                    writer.add(pa.Table.from_batches([batch]))
            index["cpu"] += time.process_time() - cpu
            index["peak_rss"] = max(index["peak_rss"], maxrss() - rss)
            index["bytes"] += writer.bytes
            parts.append({"crawl": args.crawl, "shard": shard, "part": key, "rows": part.height, "index": ix,
                          "docs": docs})
            if args.datatrove_sigs:
                write_datatrove_sigs(args.datatrove_sigs, rank, part["bands"].to_numpy())
        log(f"synthesized {sum(p['rows'] for p in parts):,} of {size:,} ({args.crawl})")
    source = np.concatenate(sources)
    np.save(args.truth, source)
    root = np.where(source >= 0, source - args.first, np.arange(size))
    sizes = np.bincount(root, minlength=size)
    histogram = pl.Series(sizes[sizes > 1]).value_counts().sort("")
    return {"documents": size, "crawl": args.crawl, "first": args.first, "parts": parts,
            "seconds": time.perf_counter() - start, "bytes": written, "index": index,
            "planted": planted, "planted_clusters": int((sizes > 1).sum()),
            "planted_sizes": {str(k): int(v) for k, v in histogram.iter_rows()}}


def crawl_groups(size: int, part_rows: int, seed: int, first: int):
    """A synthetic crawl of `size` documents numbered from `first`, group by group (GROUP_PARTS parts each), the
    same every time: (frame, stats, source)."""

    for at in range(0, size, GROUP_PARTS * part_rows):
        rows = min(GROUP_PARTS * part_rows, size - at)
        yield synthesize(rows, seed=seed + first + at, first=first + at)


def copy_from_history(frame, earlier: dict, group: int, args, seed: int):
    """`frame` with 5% of its rows made exact copies (text hash, bands, MinHash values, length) of documents of the
    same group of an earlier synthetic crawl (made again: it is the same every time). -> (frame, copies)"""
    import numpy as np
    import polars as pl

    groups = crawl_groups(earlier["documents"], args.part_rows, args.seed, earlier["first"])
    theirs = next((f for i, (f, _, _) in enumerate(groups) if i == group), None)
    if theirs is None:
        return frame, 0
    rng = np.random.default_rng(seed)
    count = min(frame.height, theirs.height) // 20
    rows, sources = rng.choice(frame.height, count, replace=False), rng.choice(theirs.height, count, replace=False)
    copied = ["n_chars", "text_hash", "bands", "signature"]
    replaced = frame.with_row_index("_i").join(
        theirs.select(copied).with_row_index("_s").join(
            pl.DataFrame({"_s": sources.astype(np.uint32), "_i": rows.astype(np.uint32)}), on="_s"),
        on="_i", how="left", suffix="_copy")
    return replaced.with_columns(
        [pl.coalesce(pl.col(f"{c}_copy"), pl.col(c)).alias(c) for c in copied]).select(frame.columns), count


# 2. cluster ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuTimed:
    """A unit function that also counts its CPU time (module-level, so pool workers unpickle it)."""

    fn: Callable

    def __call__(self, unit):
        start = time.process_time()
        result = self.fn(unit)
        result.counts = {**result.counts, "cpu_ms": round((time.process_time() - start) * 1000)}
        return result


@dataclass(frozen=True)
class FreshWorkerPool:
    """The process-pool runner's pool, except that every unit runs in a fresh worker (and a single unit too), so
    that each unit's `ru_maxrss` is its own: `PoolRunner` reuses workers within a step and runs a lone unit in the
    calling process."""

    workers: int

    def run(self, fn, units, on_done=None):
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        from llm_assets.core.units import POOL_PRELOAD

        ctx = get_context("forkserver")
        ctx.set_forkserver_preload([*POOL_PRELOAD, "llm_assets.core.clusters"])
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, max_tasks_per_child=1) as pool:
            return list(pool.map(fn, units))


def child_cluster(args) -> dict:
    import numpy as np
    import polars as pl

    from llm_assets.core.clusters import SignaturePart, cluster_lake
    from llm_assets.core.dedup import REMOVED_SCHEMA
    from llm_assets.core.keys import CRAWL_LEVEL_SHARD
    from llm_assets.core.lake import Lake, part_key
    from llm_assets.core.units import run_units, unit_id
    from llm_assets.settings import DedupSettings

    synthesized = json.loads(args.parts.read_text())
    history = [json.loads(Path(f).read_text()) for f in json.loads(args.history.read_text())] \
        if args.history else []
    parts = [SignaturePart(**p) for p in synthesized["parts"] + [p for h in history for p in h["parts"]]]
    settings, pool, walls = DedupSettings(cross_crawl=bool(history)), FreshWorkerPool(args.workers), {}
    step_of = {"write_edges": "edges", "write_star": "components", "write_jump": "components",
               "write_members": "members", "write_kept": "keep"}

    def run(fn, units):
        t0 = time.perf_counter()
        results = run_units(CpuTimed(fn), units, pool)
        step = step_of[fn.__name__]
        walls[step] = walls.get(step, 0.0) + time.perf_counter() - t0
        return results

    rss_before = maxrss()
    start, cpu = time.perf_counter(), time.process_time()
    clusters, done = cluster_lake(
        store_config(args), parts, settings, args.crawl, run,
        lambda step, identity: part_key("duplicate_clusters", args.crawl, CRAWL_LEVEL_SHARD,
                                        unit_id("dump-scale", str(args.size), step, identity)), REMOVED_SCHEMA)
    seconds, driver_cpu, driver_peak = time.perf_counter() - start, time.process_time() - cpu, maxrss()
    steps = {step: {"units": len(rs), "wall": walls.get(step, 0.0),
                    "cpu": sum(r.counts.get("cpu_ms", 0) for r in rs) / 1000,
                    "peak_rss": max((r.peak_rss_bytes for r in rs), default=0),
                    "bytes_in": sum(r.bytes_in for r in rs),
                    "bytes_out": sum(r.bytes_out for r in rs), "rows_in": sum(r.rows_in for r in rs)}
             for step, rs in done.steps.items()}
    removed = Lake(store_config(args)).scan([r.part for r in done.steps["keep"]]).select(
        "doc_id", "duplicate_of", "reason").collect()
    common = {"documents": synthesized["documents"], "buckets": done.buckets, "ranges": len(done.starts),
              "rounds": done.rounds, "keeps": len(done.steps["keep"]), "seconds": seconds,
              "driver_cpu": driver_cpu, "driver_rss_before": rss_before, "driver_peak_rss": driver_peak,
              "steps": steps, "unit_peak_rss": done.peak_rss_bytes(), "candidates": clusters.candidates,
              "rejected": clusters.rejected, "reasons": dict(removed.group_by("reason").len().iter_rows()),
              "removed": removed.height}
    if history:  # what the earlier crawls cost this one
        return {**common, "history_crawls": len(history), "history_documents": clusters.index_documents,
                "history_index_bytes": sum(h["index"]["bytes"] for h in history),
                "history_signature_bytes": sum(h["bytes"] for h in history),
                "history_bytes_read": done.count("history_bytes_read"),
                "history_rows_matched": done.count("history_rows_matched"),
                "planted_cross_crawl": synthesized["planted"]["cross_crawl"]}
    doc = removed["doc_id"].str.slice(4).cast(pl.Int64).to_numpy() - args.first
    kept_doc = removed["duplicate_of"].str.slice(4).cast(pl.Int64).to_numpy() - args.first
    source = np.load(args.truth)
    quality = score(source, doc)
    kept = np.arange(source.size)
    kept[doc] = kept_doc
    root = np.where(source >= 0, source, np.arange(source.size))
    copies = np.flatnonzero(source >= 0)
    quality["pair_recall"] = float((kept[copies] == kept[source[copies]]).mean()) if copies.size else 1.0
    quality["pair_precision"] = float((root[doc] == root[kept_doc]).mean()) if doc.size else 1.0
    return {**common, **quality}


def score(source, removed) -> dict:
    """Recall and precision of a removed set (document numbers) against the planted sources."""
    import numpy as np

    root = np.where(source >= 0, source, np.arange(source.size))
    size = np.bincount(root, minlength=source.size)
    gone = np.bincount(root[removed], minlength=source.size)
    right = int(np.minimum(gone, np.maximum(size - 1, 0)).sum())
    planted = int((source >= 0).sum())
    return {"removed": int(removed.size), "right": right, "planted_copies": planted,
            "recall": right / planted if planted else 1.0,
            "precision": right / removed.size if removed.size else 1.0}


# datatrove -------------------------------------------------------------------------------------------------------


def run_datatrove(workdir: Path, synthesized: dict, truth: Path, workers: int) -> dict:
    import numpy as np

    from benchmarks.compare import anchor_python

    python = anchor_python()
    bands = len(list((workdir / "dt-sigs").glob("bucket_*")))
    env = {**os.environ, **THREADS_ENV, "DATATROVE_COLORIZE_LOGS": "0"}

    def task(stage: str, src: str, dst: str, rank: int, tasks: int) -> dict:
        cmd = [python, "-c", DT_SCRIPT, stage, str(workdir / src), str(workdir / dst),
               str(workdir / f"dt-logs-{stage}-{rank}"), str(rank), str(tasks), str(bands)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"datatrove {stage} task {rank} failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    out = {}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        tasks = list(ex.map(lambda r: task("buckets", "dt-sigs", "dt-buckets", r, bands), range(bands)))
    out["buckets"] = {"units": bands, "wall": time.perf_counter() - t0, "cpu": sum(t["cpu_seconds"] for t in tasks),
                      "peak_rss": max(t["peak_rss"] for t in tasks)}
    t0 = time.perf_counter()
    cluster = task("cluster", "dt-buckets", "dt-remove", 0, 1)
    out["cluster"] = {"units": 1, "wall": time.perf_counter() - t0, "cpu": cluster["cpu_seconds"],
                      "peak_rss": cluster["peak_rss"]}
    firsts = np.cumsum([0] + [p["rows"] for p in synthesized["parts"]])
    removed = [firsts[int(f.name.split(".")[0])] + np.fromfile(f, "<u4").astype(np.int64)
               for f in sorted((workdir / "dt-remove").glob("*.remove"))]
    doc = np.concatenate(removed) if removed else np.zeros(0, np.int64)
    out["sig_bytes"] = sum(f.stat().st_size for f in (workdir / "dt-sigs").rglob("*.sig"))
    out.update(score(np.load(truth), doc))
    return out


# orchestration ---------------------------------------------------------------------------------------------------


def store_config(args):
    from llm_assets.core.lake import StoreConfig

    endpoint, bucket, credentials = args.store.split(",")
    return StoreConfig(endpoint=endpoint, bucket=bucket, region="us-east-1", credentials_file=credentials)


def child(name: str, workdir: Path, store: str, size: int, args, *extra: str, tag: str = "") -> dict:
    result = workdir / f"{name}-{tag}{size}.json"
    cmd = [sys.executable, "-m", "benchmarks.dump_scale", "--child", name, "--store", store, "--size", str(size),
           "--result", str(result), "--truth", str(workdir / f"truth-{tag}{size}.npy"),
           "--parts", str(workdir / f"synthesize-{tag}{size}.json"), "--workers", str(args.workers),
           "--part-rows", str(args.part_rows), "--seed", str(args.seed), *extra]
    log(f"{name} {tag}{size:,}: running in a fresh subprocess")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **THREADS_ENV})
    if proc.returncode != 0 or not result.exists():
        raise RuntimeError(f"{name} at {size:,} failed with exit code {proc.returncode}")
    log(f"{name} {size:,}: done in {time.perf_counter() - t0:.1f}s")
    return json.loads(result.read_text())


def measure(args, keep) -> dict:
    from llm_assets.platform.embedded_store import EmbeddedStore

    results: dict = {"sizes": {}}
    with tempfile.TemporaryDirectory(prefix="llm-assets-bench-dump-scale-") as tmp:
        workdir = Path(tmp)
        store = EmbeddedStore.throwaway(workdir / "store", "bench-dump-scale")
        store.start()
        try:
            spec = f"{store.endpoint},{store.bucket},{store.credentials_file}"
            for size in args.sizes:
                with_dt = size == args.datatrove_size
                extra = ["--datatrove-sigs", str(workdir / "dt-sigs")] if with_dt else []
                synthesized = child("synthesize", workdir, spec, size, args, *extra)
                (workdir / f"synthesize-{size}.json").write_text(json.dumps(synthesized))
                clustered = child("cluster", workdir, spec, size, args)
                results["sizes"][size] = {"synthesize": {k: v for k, v in synthesized.items() if k != "parts"},
                                          "parts": len(synthesized["parts"]), "cluster": clustered}
                if with_dt:
                    log(f"datatrove {size:,}: buckets then cluster")
                    results["datatrove"] = {"documents": size, **run_datatrove(
                        workdir, synthesized, workdir / f"truth-{size}.npy", args.workers)}
                    shutil.rmtree(workdir / "dt-sigs", ignore_errors=True)
                keep(results)  # each size as it ends: a later size that does not finish loses only itself
            if args.history_crawls:
                results["history"] = against_history(args, workdir, spec)
                keep(results)
        finally:
            store.stop()
    return results


def against_history(args, workdir: Path, spec: str) -> dict:
    """`--history-crawls` crawls of `--history-size` documents, then one more whose 5% are copies of theirs,
    clustered against them (`cross_crawl`) from their band index."""
    size, files, earlier = args.history_size, [], []
    for j in range(args.history_crawls + 1):
        crawl, tag = f"{CRAWL}-{j + 1:02d}", f"h{j + 1:02d}-"
        extra = ["--crawl", crawl, "--first", str(j * size)]
        if j == args.history_crawls:
            (workdir / "copy-from.json").write_text(json.dumps(earlier))
            extra += ["--copy-from", str(workdir / "copy-from.json")]
        synthesized = child("synthesize", workdir, spec, size, args, *extra, tag=tag)
        (workdir / f"synthesize-{tag}{size}.json").write_text(json.dumps(synthesized))
        if j < args.history_crawls:
            files.append(str(workdir / f"synthesize-{tag}{size}.json"))
            earlier.append({"documents": size, "first": j * size})
    (workdir / "history.json").write_text(json.dumps(files))
    clustered = child("cluster", workdir, spec, size, args, *extra[:4], "--history", str(workdir / "history.json"),
                      tag=tag)
    return {"documents": size, "synthesize": {k: v for k, v in synthesized.items() if k != "parts"},
            "cluster": clustered}


# report ----------------------------------------------------------------------------------------------------------


def mib(b: float) -> str:
    return f"{b / MIB:,.0f}"


def datatrove_runs(r: dict) -> list[dict]:
    runs = r.get("datatrove", [])
    return sorted([runs] if isinstance(runs, dict) else runs, key=lambda d: d["documents"])


def growth(sizes: dict) -> dict:
    """The peaks of the smallest and the largest size measured, and their ratio (the goal: at most 1.10)."""
    ordered = sorted(sizes, key=int)
    lo, hi = sizes[ordered[0]]["cluster"], sizes[ordered[-1]]["cluster"]
    return {"from": int(ordered[0]), "to": int(ordered[-1]),
            "unit": (lo["unit_peak_rss"], hi["unit_peak_rss"], hi["unit_peak_rss"] / lo["unit_peak_rss"]),
            "driver": (lo["driver_peak_rss"], hi["driver_peak_rss"], hi["driver_peak_rss"] / lo["driver_peak_rss"])}


def summary(r: dict) -> list[Row]:
    """The row of BENCHMARKS.md's summary table: the largest size measured, its peaks against the smallest's."""
    size, s = max(r["sizes"].items(), key=lambda kv: int(kv[0]))
    c = s["cluster"]
    cpu = sum(st["cpu"] for st in c["steps"].values())
    g = growth(r["sizes"])
    run = r["runs"][-1]
    return [Row("dump-scale:clusters", f"duplicate clusters as work units, {n(g['from'])} to {n(int(size))} "
                "documents (largest unit's and driver's peak RSS, growth; unit CPU per document; recall / precision "
                "of planted copies)",
                f"unit {mib(g['unit'][0])} → {mib(g['unit'][1])} MiB ({g['unit'][2] - 1:+.1%}), driver "
                f"{mib(g['driver'][0])} → {mib(g['driver'][1])} MiB ({g['driver'][2] - 1:+.1%}); "
                f"{cpu / int(size) * 1e6:.1f} µs; {c['recall']:.4f} / {c['precision']:.4f}", run["command"],
                "dump-scale.md", "both peaks ≤ +10% from 1M to 30M",
                verdict(g["unit"][2] <= 1.10 and g["driver"][2] <= 1.10 and g["from"] <= 1_000_000
                        and g["to"] >= 30_000_000), run["date"][:10])]


def run_line(run: dict) -> str:
    """A run's line: its command and the conditions measured during it (older results: their load averages)."""
    sizes = ", ".join(n(int(k)) for k in run["sizes"])
    head = f"- Run: `{run['command']}`, {run['seconds']:.0f} s in all (sizes {sizes})"
    if "conditions" in run:
        return f"{head}; {conditions_text(run['conditions'])}."
    return (f"{head}; {run['date']}; load average {run['loadavg'][0]:.2f} at the start, "
            f"{run['loadavg_end'][0]:.2f} at the end.")


def render(r: dict) -> str:
    sizes = r["sizes"]
    first = min(sizes, key=int)
    rows = []
    for size, s in sorted(sizes.items(), key=lambda kv: int(kv[0])):
        c = s["cluster"]
        cpu = sum(st["cpu"] for st in c["steps"].values())
        rows.append([n(int(size)), n(s["parts"]), n(c["buckets"]),
                     " / ".join([mib(s["synthesize"]["index"]["peak_rss"])]
                                + [mib(c["steps"][st]["peak_rss"]) for st in STEPS]),
                     f"**{mib(c['unit_peak_rss'])}**", f"{c.get('ranges', 1)} × {c.get('rounds', 1)}",
                     mib(c["driver_peak_rss"]), f"{c['seconds']:.0f}", f"{cpu:.0f}",
                     f"{cpu / int(size) * 1e6:.1f}", f"{c['recall']:.4f}", f"{c['precision']:.4f}",
                     f"{c['pair_recall']:.4f} / {c['pair_precision']:.4f}",
                     f"{n(c['removed'])} ({n(c['planted_copies'])})", n(c["rejected"])])
    steps_rows = []
    for size, s in sorted(sizes.items(), key=lambda kv: int(kv[0])):
        ix = s["synthesize"]["index"]
        steps_rows.append([n(int(size)), "index (in the signatures stage)", n(s["parts"]), "", f"{ix['cpu']:.1f}",
                           mib(ix["peak_rss"]), mib(ix["bytes"])])
        for st in STEPS:
            x = s["cluster"]["steps"][st]
            steps_rows.append([n(int(size)), st, n(x["units"]), f"{x['wall']:.1f}", f"{x['cpu']:.1f}",
                               mib(x["peak_rss"]), mib(x["bytes_out"])])
    out = [
        "## A dump's duplicate clusters: work units at growing size", "",
        "What `make bench-dump-scale` (exactly: `.venv/bin/python -m benchmarks.dump_scale`; `--sizes` sets the sizes, "
        "`--datatrove-size` the one datatrove runs on, `--json FILE` keeps the raw results) measures: "
        "`duplicate_clusters`' work units (`core/clusters.py`: edges, components, members, keep; the driver merges the "
        "keep units' summaries) on synthetic signatures, each part written with its band index as the signatures stage "
        "writes it (timed apart: the index step), to an embedded SeaweedFS on loopback (the lake's own store, not "
        "local files), run by the process-pool runner, and datatrove 0.10.1's MinhashDedupBuckets + "
        "MinhashDedupCluster on the same signatures written in its own format. The method in full: the docstring of "
        "`benchmarks/dump_scale.py`.", "",
        *[run_line(run) for run in r["runs"]],
        *([f"- This section was written from those runs' results by `{r['assembled']}`."] if "assembled" in r
          else []),
        "- The machine is shared with other work: where a run's load average passed its CPUs, wall times are "
        "inflated by it, CPU times less (shared caches and memory bandwidth); peak RSS does not depend on it.",
        f"- Machine: {r['runs'][-1]['machine']}; pool of {r['runs'][0]['workers']} workers, one thread each, a "
        "fresh worker per unit. \"unit CPU\" sums the units' own CPU time; the driver's (starting pools, merging "
        "the keep units' summaries) is counted in the datatrove comparison.",
        "- Signatures: " + ", ".join(f"{n(int(k))} documents in {v['parts']} parts "
                                     f"({mib(v['synthesize']['bytes'])} MiB of Parquet)"
                                     for k, v in sorted(sizes.items(), key=lambda kv: int(kv[0]))) + "; "
        f"5% exact and 5% near copies; planted cluster sizes at {n(int(first))}: "
        + ", ".join(f"{k}: {n(v)}" for k, v in sizes[first]["synthesize"]["planted_sizes"].items()) + ".", "",
        table(["documents", "parts", "buckets (B)",
               "peak RSS per unit MiB: index (growth while writing it) / edges / components / members / keep",
               "largest unit MiB", "components: ranges × rounds", "driver peak MiB", "wall s", "unit CPU s",
               "CPU µs / document",
               "recall", "precision", "pair recall / precision", "removed (planted copies)",
               "candidates rejected (Jaccard)"], rows), "",
        "Per step (wall: the step's pool run; CPU: summed over its units; RSS: its largest unit):", "",
        table(["documents", "step", "units", "wall s", "CPU s", "peak RSS MiB", "written MiB"], steps_rows),
    ]
    for dt in datatrove_runs(r):
        ours = sizes[str(dt["documents"])]["cluster"]
        index = sizes[str(dt["documents"])]["synthesize"]["index"]
        parts = sizes[str(dt["documents"])]["parts"]
        our_cpu = sum(st["cpu"] for st in ours["steps"].values()) + ours["driver_cpu"] + index["cpu"]
        dt_cpu = dt["buckets"]["cpu"] + dt["cluster"]["cpu"]
        back = [st for st in ("components", "members", "keep") if st in ours["steps"]]
        out += [
            "", f"### Beside datatrove 0.10.1 on the same {n(dt['documents'])} signatures", "",
            table(["", "units", "wall s", "CPU s", "largest unit / task peak RSS MiB", "recall", "precision",
                   "removed"],
                  [["ours: index (written by the signatures units) + edges",
                    f"{parts} + {ours['steps']['edges']['units']}", f"– + {ours['steps']['edges']['wall']:.1f}",
                    f"{index['cpu'] + ours['steps']['edges']['cpu']:.1f}",
                    mib(ours['steps']['edges']['peak_rss']), "", "", ""],
                   ["ours: " + " + ".join(back),
                    " + ".join(str(ours['steps'][st]['units']) for st in back),
                    f"{sum(ours['steps'][st]['wall'] for st in back):.1f}",
                    f"{sum(ours['steps'][st]['cpu'] for st in back):.1f}",
                    mib(max(ours['steps'][st]['peak_rss'] for st in back)), "", "", ""],
                   ["ours: the driver (runs the pools, merges the keep units' summaries)", "1",
                    "", f"{ours['driver_cpu']:.1f}", mib(ours["driver_peak_rss"]), "", "", ""],
                   ["**ours, all**", "", f"{ours['seconds']:.1f}", f"{our_cpu:.1f}",
                    mib(max(ours["unit_peak_rss"], ours["driver_peak_rss"])),
                    f"{ours['recall']:.4f}", f"{ours['precision']:.4f}", n(ours["removed"])],
                   ["datatrove MinhashDedupBuckets", n(dt["buckets"]["units"]), f"{dt['buckets']['wall']:.1f}",
                    f"{dt['buckets']['cpu']:.1f}", mib(dt["buckets"]["peak_rss"]), "", "", ""],
                   ["datatrove MinhashDedupCluster", "1", f"{dt['cluster']['wall']:.1f}",
                    f"{dt['cluster']['cpu']:.1f}", mib(dt["cluster"]["peak_rss"]), "", "", ""],
                   ["**datatrove, both**", "", f"{dt['buckets']['wall'] + dt['cluster']['wall']:.1f}",
                    f"{dt_cpu:.1f}", mib(max(dt['buckets']['peak_rss'], dt['cluster']['peak_rss'])),
                    f"{dt['recall']:.4f}", f"{dt['precision']:.4f}", n(dt["removed"])]]), "",
            f"- CPU: ours {our_cpu:.1f} s against datatrove's {dt_cpu:.1f} s ({dt_cpu / our_cpu:.2f}× ours). Not "
            "the same work: ours also reads Parquet from the store and writes every step's parts back to it "
            "(datatrove reads and writes local files), confirms each candidate pair by its b-bit Jaccard estimate, "
            "joins exact copies by text hash, and ends with the keep rule (earliest document) and the removed "
            "documents' rows; datatrove's signature files were written for it by this benchmark (their sort and "
            f"write are not timed: {mib(dt['sig_bytes'])} MiB), and its cluster stage writes only the removed "
            "document numbers.",
            "- Memory: datatrove's buckets tasks stream merge-sorted files (flat); its cluster stage is one "
            "process holding a Python dict entry per duplicated document (it grows with the duplicates of the "
            "whole crawl). Ours: the index is one signatures part's (about 1 KB a document), an edges unit is "
            "bounded by `bucket_rows`, a components unit by `merge_rows`, a keep unit by `keep_rows`, see below.",
        ]
    out += [""] + extrapolation(sizes)
    if "history" in r:
        out += [""] + against_history_report(r["history"])
    return "\n".join(out)


def against_history_report(h: dict) -> list[str]:
    c, size = h["cluster"], h["documents"]
    cpu = sum(st["cpu"] for st in c["steps"].values())
    steps = " / ".join(f"{c['steps'][st]['cpu']:.1f}" for st in STEPS)
    peaks = " / ".join(mib(c["steps"][st]["peak_rss"]) for st in STEPS)
    gib = 2**30
    return [
        f"### A new crawl against {c['history_crawls']} earlier ones", "",
        f"With `--history-crawls {c['history_crawls']} --history-size {size}`: {c['history_crawls']} crawls of "
        f"{n(size)} documents each, then one more of {n(size)} whose 5% are exact copies of theirs "
        f"({n(c['planted_cross_crawl'])}), clustered with `cross_crawl` against all of them: the earlier crawls "
        "are read only through their band index (never their signatures), and of it only the row groups that "
        "hold a key of the new crawl, keeping only the rows of those keys.", "",
        table(["", "value"], [
            ["documents: new crawl / earlier crawls", f"{n(size)} / {n(c['history_documents'])}"],
            ["buckets (B, from the new crawl's size)", n(c["buckets"])],
            [f"unit CPU s: {' / '.join(STEPS)} (all)", f"{steps} ({cpu:.1f})"],
            [f"peak RSS per unit MiB: {' / '.join(STEPS)}; driver", f"{peaks}; {mib(c['driver_peak_rss'])}"],
            ["wall s", f"{c['seconds']:.0f}"],
            ["earlier crawls' signatures (not read)", f"{c['history_signature_bytes'] / gib:.2f} GiB"],
            ["earlier crawls' band index and documents", f"{c['history_index_bytes'] / gib:.2f} GiB"],
            ["of it read by the edges units", f"{c['history_bytes_read'] / gib:.2f} GiB"],
            ["read by the members units (labels, and documents where they are duplicates; this crawl's too)",
             f"{c['steps']['members']['bytes_in'] / gib:.2f} GiB"],
            ["earlier index rows kept (a key of the new crawl's)", n(c["history_rows_matched"])],
            ["removed: cross_crawl / exact / near (planted cross-crawl copies)",
             f"{n(c['reasons'].get('cross_crawl', 0))} / {n(c['reasons'].get('exact', 0))} / "
             f"{n(c['reasons'].get('near', 0))} ({n(c['planted_cross_crawl'])})"],
        ]), "",
        "- A whole new crawl's keys fall in nearly every row group of the earlier crawls' index (random hashes), "
        "so the edges units read about all of it once, and the members units most row groups of the earlier "
        "parts' documents (a copy in nearly every one): lake traffic and CPU grow with the history, at most "
        f"{cpu / c['history_documents'] * 1e6:.1f} µs of unit CPU per earlier document (all of this run's unit CPU "
        "over the earlier documents: the new crawl's own clustering included), where re-reading and re-bucketing "
        "their signatures cost the index, edges and members steps again (the table above: about 30 µs a "
        "document); memory does not (rows are filtered as they are read). A small addition (a new shard) reads "
        "only the row groups its keys hit (`test_a_small_addition_reads_only_the_index_row_groups_its_keys_hit`).",
    ]


def extrapolation(sizes: dict) -> list[str]:
    """The growth of the peaks from the smallest size to the largest against the goal, and 100M from the measured
    sizes: per-document CPU and bytes of the largest (linear, an estimate)."""
    ordered = sorted(int(k) for k in sizes)
    lo, hi = ordered[0], ordered[-1]
    c_lo, c_hi = sizes[str(lo)]["cluster"], sizes[str(hi)]["cluster"]
    cpu = sum(st["cpu"] for st in c_hi["steps"].values()) / hi
    index_bytes = sizes[str(hi)]["synthesize"]["index"]["bytes"] / hi
    target = 100_000_000
    g = growth(sizes)

    def peaks(step: str) -> str:
        return " → ".join(mib(sizes[str(k)]["cluster"]["steps"][step]["peak_rss"]) for k in ordered)

    def met(ratio: float) -> str:
        return "met" if ratio <= 1.10 else "**missed**"

    bs = ", ".join(f"B = {sizes[str(k)]['cluster']['buckets']}, {sizes[str(k)]['cluster'].get('ranges', 1)} ranges"
                   f" × {sizes[str(k)]['cluster'].get('rounds', 1)} rounds and K = "
                   f"{sizes[str(k)]['cluster'].get('keeps', sizes[str(k)]['cluster']['steps']['keep']['units'])} "
                   f"at {n(k)}" for k in ordered)
    cpu_lo = sum(st["cpu"] for st in c_lo["steps"].values())
    return [
        "### Scaling: memory bounded by the settings, not the crawl", "",
        f"- **Peak RSS from {n(lo)} to {n(hi)} documents ({hi / lo:.0f}×)** (goal: each within +10%): the largest "
        f"unit {mib(g['unit'][0])} → {mib(g['unit'][1])} MiB ({g['unit'][2] - 1:+.1%}, {met(g['unit'][2])}), the "
        f"driver {mib(g['driver'][0])} → {mib(g['driver'][1])} MiB ({g['driver'][2] - 1:+.1%}, "
        f"{met(g['driver'][2])}). Per step's largest unit (MiB, {' → '.join(n(k) for k in ordered)}): edges "
        f"{peaks('edges')}; components {peaks('components')}; members {peaks('members')}; keep {peaks('keep')}.",
        f"- How: every step is cut by a setting, and the number of units grows with the crawl instead of their size "
        f"({bs}). An edges unit holds about `bucket_rows` index rows; a components unit the label rows of one range "
        "of documents (whole signatures parts holding about `merge_rows` of them: the buckets' stars, then the rows "
        "the rounds rewrite), never the crawl's; the rounds (star: a node's other parents point at its smallest; "
        "jump: a parent is replaced by its own smallest) grow with the longest chain of joins, not the crawl; a "
        "members unit reads one range's labels and its part's documents that hold a label; a keep unit about "
        "`keep_rows` members. The driver holds the plan (one entry a signatures part), the units' results and "
        "K small summaries.",
        f"- CPU: {cpu * 1e6:.1f} µs a document of unit CPU at {n(hi)} ({cpu * hi / cpu_lo:.1f}× the CPU of "
        f"{n(lo)} for {hi / lo:.0f}× the documents), so about {cpu * target / 3600:.1f} core-hours for 100M if it "
        "stays linear (plus the index, written by the signatures units). Sizes measured in different runs saw "
        "different load (the run lines above): CPU time inflates under contention too, less than wall time.",
        f"- Lake traffic: the band index and documents are {index_bytes:,.0f} bytes a document as written (14 band "
        "rows and the text- and URL-hash rows, each a 2-byte kind, an 8-byte key, a 4-byte row and the document's "
        "56-byte b-bit sketch, random hashes barely compress; then the keep rule's columns), written once by the "
        f"signatures units and kept: about {index_bytes * target / 1e9:,.0f} GB for 100M, read once by the "
        "crawl's own clustering and once by each later crawl clustered against it (below); the signatures "
        "themselves are never read by the clustering.",
    ]


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 "?")
    mem = next((int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0) if Path("/proc/meminfo").exists() else 0
    return f"{os.cpu_count()} CPUs ({model}), {mem / 2**30:.0f} GiB RAM, Python {sys.version.split()[0]}"


def merged(results: list[dict]) -> dict:
    """Several runs' results as one: sizes of later runs replace earlier ones'."""
    out: dict = {"sizes": {}, "runs": []}
    for r in results:
        out["sizes"].update(r["sizes"])
        out["runs"] += r["runs"]
        out["datatrove"] = [*out.get("datatrove", []), *datatrove_runs(r)]
        if "history" in r:
            out["history"] = r["history"]
    return out


# main ------------------------------------------------------------------------------------------------------------

CHILDREN = {"synthesize": child_synthesize, "cluster": child_cluster}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dump_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000,30000000",
                        help="documents, comma-separated (default 1000000,10000000,30000000)")
    parser.add_argument("--datatrove-size", type=int, default=1_000_000,
                        help="the size datatrove runs on too (default 1000000; 0: none)")
    parser.add_argument("--workers", type=int, default=2, help="pool workers, and datatrove tasks at once")
    parser.add_argument("--part-rows", type=int, default=62_500, help="documents a signatures part (default 62500)")
    parser.add_argument("--seed", type=int, default=20240522)
    parser.add_argument("--history-crawls", type=int, default=0,
                        help="also: this many earlier crawls, then one more clustered against them (default 0)")
    parser.add_argument("--history-size", type=int, default=1_000_000, help="documents of each of those crawls")
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md",
                        help="the summary whose row is replaced (default BENCHMARKS.md); the section goes to "
                             "benchmarks/results/dump-scale.md beside it")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results here (after each size)")
    parser.add_argument("--from-json", type=Path, nargs="+", default=None,
                        help="write the section from these results (earlier runs' --json) instead of measuring")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)  # internal
    for internal in ("--store", "--result", "--truth", "--parts", "--datatrove-sigs", "--copy-from", "--history"):
        parser.add_argument(internal, help=argparse.SUPPRESS, type=str if internal == "--store" else Path)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--crawl", default=CRAWL, help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        args.result.write_text(json.dumps(CHILDREN[args.child](args)))
        return 0
    if args.from_json:
        results = merged([json.loads(p.read_text()) for p in args.from_json])
        given = sys.argv[1:] if argv is None else argv
        results["assembled"] = " ".join([".venv/bin/python -m benchmarks.dump_scale", *given])
    else:
        args.sizes = [int(s) for s in args.sizes.split(",")]
        if min(args.sizes) < 1000:
            parser.error("--sizes must be at least 1000 each")
        started = time.perf_counter()
        given = sys.argv[1:] if argv is None else argv
        measured = Conditions()

        def keep(partial: dict) -> dict:
            out = json.loads(json.dumps(partial))  # sizes as strings, as read back from --json
            out["runs"] = [{
                "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "command": " ".join([".venv/bin/python -m benchmarks.dump_scale", *given]),
                "seconds": time.perf_counter() - started, "conditions": measured.now(),
                "machine": machine(), "workers": args.workers, "sizes": sorted(out["sizes"], key=int)}]
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(out, indent=1))
            return out

        try:
            with measured:
                results = keep(measure(args, keep))
        except RuntimeError as e:
            log(f"FAILED: {e}")
            return 1
    section = render(results)
    print(section)
    publish(args.output, "dump-scale", BEGIN, END, section, summary(results))
    log(f"wrote benchmarks/results/dump-scale.md and the summary table of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
