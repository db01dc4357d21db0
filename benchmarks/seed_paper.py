"""`make bench-seed-paper` (also part of `make bench`): the seed paper's workload through the product, beside the
GPT-2 tokenizer alone and the paper's own code, in one run; the figures go into
benchmarks/results/seed-paper.md and a row of BENCHMARKS.md's summary table.

    .venv/bin/python -m benchmarks.seed_paper [--workers 1,2] [--files 1,4] [--dagster 2] [--repeat R]
                                              [--output BENCHMARKS.md] [--json PATH]
    SEED_PAPER_DIR=<checkout> SEED_PAPER_PYTHON=<python with transformers> .venv/bin/python -m benchmarks.seed_paper

The workload ("Scalable Big Data Pipelines for LLM Fine-Tuning"): ../shared/data/bench/seed003_input.jsonl.gz,
32,432 JSON Lines rows: normalize, GPT-2-tokenize, drop the documents under 10 tokens, write JSON Lines.

- **product**: an embedded SeaweedFS of its own (free loopback ports, a temporary folder, always stopped); the file
  is dropped under `raw/<crawl>/` (or, with `--files K`, the same rows as K files, as a crawl arrives in many
  files); then the stages' work units, run by the product's runner (`PoolRunner(workers)`: a process pool, or in
  this process when a stage has one unit) and committed as the product commits a partition: `documents` (the JSON
  Lines reader, provenance), `filtered` with a chain of the `normalize` block alone, `tokenized` (GPT-2,
  `min_tokens: 10`), and `export` of the tokenized partition to JSON Lines. Deduplication is not run (the workload
  has none; the product's dedup stages cannot be switched off: they compute MinHash signatures of every document
  even with `exact` and `near` off), so the tokenized units read the filtered parts, as `benchmarks.run` does.
- **tokenizer alone**: the GPT-2 tokenizer (`tokenizers`, ../shared/data/tokenizers/gpt2) on the same rows' texts
  held in memory, batches of 1,024: `encode_batch_fast` (what the tokenized stage calls) with both cores (its thread
  pool) and with one thread, and `encode_batch` (offsets too) with both cores; the ceiling of any pipeline that
  tokenizes these rows.
- **the paper's code**: when `SEED_PAPER_DIR` names a checkout of jdirgha/Scalable-Big-Data-Pipelines-for-LLM-
  Fine-Tuning, its `src/single_process.py` and `src/multi_process.py --workers 2`, unchanged, run from a scratch
  folder under the system's temporary folder (deleted after; nothing of it enters this repository), on the same
  rows decompressed, with `gpt2/` there holding the same vocab and merges so that `from_pretrained('gpt2')` loads
  offline. `SEED_PAPER_PYTHON` is an interpreter with its requirements (transformers, tqdm, psutil).

Every measurement runs in a fresh process, and its CPU seconds are user + system of that process and everything
it waited for (pool workers, the paper's worker processes), from launch to exit: interpreter start-up, imports
and model loading included, for the product and the paper alike; the product's also include the object store's
CPU over the run. The tokenizer's figure is the encoding alone (a ceiling). With `--repeat R` every configuration
runs once per round, rounds interleaved, and reports its least contended round. rows/CPU-s is robust
to other processes' load (contention still adds some CPU time); wall-clock rates are not, and "others (CPUs)" says
how busy the rest of the machine was.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.report import n, table
from benchmarks.summary import Row, publish, verdict
from llm_assets.settings import PROJECT_ROOT

INPUT = PROJECT_ROOT.parent / "shared" / "data" / "bench" / "seed003_input.jsonl.gz"
GPT2 = PROJECT_ROOT.parent / "shared" / "data" / "tokenizers" / "gpt2"
BEGIN, END = "<!-- seed-paper:begin -->", "<!-- seed-paper:end -->"
MIN_TOKENS = 10
SHARD = "0000"
PAPER_ROWS_PER_CPU_S = 898  # what the issue measured for the paper's single-process code on these machines


def log(msg: str) -> None:
    print(f"[seed-paper {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_tree() -> float:
    """CPU seconds of this process, of every child it waited for and of the pool's fork server with the workers
    it waited for (they are not this process's children: see `units.pool_cpu_seconds`)."""
    from llm_assets.core.units import pool_cpu_seconds

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + pool_cpu_seconds()


def machine_busy() -> float:
    from benchmarks.stages import machine_busy_seconds

    return machine_busy_seconds()


def run_measured(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, also: int | None = None,
                 timeout: float = 1800) -> dict:
    """Run `cmd` to its end: wall seconds, CPU seconds of it and of every descendant it waited for (the growth of
    this process's RUSAGE_CHILDREN: pool workers included), the CPU of the process `also` (the object store)
    meanwhile, and how many CPUs other processes kept busy on average."""
    from benchmarks.stages import process_cpu_seconds

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    also0, busy0, t0 = process_cpu_seconds(also), machine_busy(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    helper = process_cpu_seconds(also) - also0 if also else 0.0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:5])}… failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {"stdout": proc.stdout, "seconds": wall, "cpu_seconds": cpu, "helper_cpu_seconds": helper,
            "others_cpus": max(0.0, machine_busy() - busy0 - cpu - helper) / wall}


# the product path (a child process) -------------------------------------------------------------------------------


def split_input(workdir: Path, files: int, input_file: Path = INPUT) -> list[Path]:
    """The workload as `files` gzip JSON Lines files of consecutive rows (one: the file itself)."""
    if files == 1:
        return [input_file]
    with gzip.open(input_file, "rb") as f:
        lines = f.readlines()
    folder = workdir / f"split-{files}"
    folder.mkdir(exist_ok=True)
    paths, per = [], -(-len(lines) // files)
    for i in range(files):
        path = folder / f"{input_file.name.split('.')[0]}-{i:02d}.jsonl.gz"
        with gzip.open(path, "wb", compresslevel=6) as f:
            f.writelines(lines[i * per:(i + 1) * per])
        paths.append(path)
    return paths


def seed_settings(workers: int):
    """The product's settings for the workload: one shard, a chain of the normalize block alone, GPT-2 with
    min_tokens 10; deduplication (run by the Dagster jobs only) removes nothing: exact and near off."""
    from llm_assets.core.filters import Normalize
    from llm_assets.settings import DedupSettings, FilteredSettings, PoolRunnerSettings, Settings, TokenizedSettings

    return Settings(shards=1, runner=PoolRunnerSettings(workers=workers),
                    filtered=FilteredSettings(chain=(Normalize(),)), dedup=DedupSettings(exact=False, near=False),
                    tokenized=TokenizedSettings(tokenizer_path=GPT2, min_tokens=MIN_TOKENS))


def product_child(spec: dict) -> dict:
    """documents → filtered (normalize) → tokenized (min_tokens 10) → export, through the work units, the runner and
    the commits of the product; per stage: wall and CPU seconds (this process and its pool workers)."""
    from llm_assets.core.documents import extract_documents, extract_units
    from llm_assets.core.filtered import FilterUnit, filter_documents
    from llm_assets.core.lake import Lake, StoreConfig, part_key
    from llm_assets.core.partition import PartitionOutput, commit, data_version
    from llm_assets.core.tokenized import TokenizeUnit, tokenize_documents
    from llm_assets.core.units import PoolRunner, run_units, stop_pool_server, unit_id

    store = StoreConfig(**spec["store"])
    lake = Lake(store)
    crawl, runner, settings = spec["crawl"], PoolRunner(workers=spec["workers"]), seed_settings(spec["workers"])
    stages, timed = _stages()
    drop = _dropper(lake, crawl, spec["files"])

    def stage(asset: str, fn, units) -> list:
        results = run_units(fn, units, runner)
        commit(lake, asset, crawl, SHARD, PartitionOutput(results, "seed-paper", data_version(results)))
        return results

    raw = timed("drop the file(s) under raw/", drop)
    docs_settings = settings.documents
    docs = timed("documents", lambda: stage("documents", extract_documents, [  # as the documents asset plans them
        u for r in raw for u in extract_units(store, docs_settings, crawl, SHARD, r["key"], r["size"], r["etag"],
                                              "seed-paper", docs_settings.extractor)]))
    chain = settings.filtered
    filtered = timed("filtered (normalize)", lambda: stage("filtered", filter_documents, [
        FilterUnit(store=store, settings=chain, source=d.part, unit=(u := unit_id("filtered", "seed-paper", d.part)),
                   part=part_key("filtered", crawl, SHARD, u),
                   rejected_part=part_key("filtered", crawl, SHARD, u, zone="rejected")) for d in docs]))
    tokenization = settings.tokenized
    tokenized = timed(f"tokenized (min_tokens {MIN_TOKENS})", lambda: stage("tokenized", tokenize_documents, [
        TokenizeUnit(store=store, settings=tokenization, source=f.part,
                     unit=(u := unit_id("tokenized", "seed-paper", f.part)),
                     part=part_key("tokenized", crawl, SHARD, u),
                     rejected_part=part_key("tokenized", crawl, SHARD, u, zone="rejected")) for f in filtered]))
    exported = _export(lake, crawl, spec["out"], timed)
    stop_pool_server()  # reaped, its CPU and its workers' reach the parent's RUSAGE_CHILDREN
    return {
        "stages": stages,
        "units": {"documents": len(docs), "filtered": len(filtered), "tokenized": len(tokenized)},
        "rows_in": sum(r.rows_in for r in docs), "documents_out": sum(r.rows_out for r in docs),
        "filtered_out": sum(r.rows_out for r in filtered), "tokenized_out": sum(r.rows_out for r in tokenized),
        "dropped": {k: v for r in [*docs, *filtered, *tokenized] for k, v in r.dropped.items()},
        "exported_rows": exported.rows, "exported_bytes": exported.bytes,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "children_peak_rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }


def _stages():
    """-> (the steps measured so far, `timed(name, fn)`): wall and CPU seconds (this process and the pool workers it
    waited for) of each step. The first step is everything before: interpreter start-up and imports."""
    stages: dict[str, dict] = {"start-up (interpreter, imports)": {"seconds": None, "cpu_seconds": cpu_tree()}}

    def timed(name: str, fn):
        cpu0, t0 = cpu_tree(), time.perf_counter()
        value = fn()
        stages[name] = {"seconds": time.perf_counter() - t0, "cpu_seconds": cpu_tree() - cpu0}
        return value

    return stages, timed


def _dropper(lake, crawl: str, files: list[str]):
    def drop() -> list[dict]:
        for path in files:
            lake.put_file(f"raw/{crawl}/{Path(path).name}", Path(path))
        return [{"key": o.key, "size": o.size, "etag": o.etag} for o in lake.list(f"raw/{crawl}/")]

    return drop


def _export(lake, crawl: str, out: str, timed):
    from llm_assets.tools.export import export

    exported = timed("export (JSON Lines)", lambda: export(lake, "tokenized", crawl, [SHARD], out=out))
    with open(out, "rb") as f:
        first = json.loads(f.readline())
    assert set(first) == {"doc_id", "url", "crawl", "n_tokens", "tokens"} and len(first["tokens"]) == first["n_tokens"]
    return exported


def dagster_child(spec: dict) -> dict:
    """The same through the product's Dagster jobs, as `make demo` runs them (in-process executor, the settings'
    pool runner): lake_job (raw_files, documents, image_text_pairs, filtered, signatures), crawl_job
    (duplicate_clusters), curated_job (deduplicated, tokenized); then the same export."""
    import dagster as dg

    from llm_assets.core.lake import Credentials, Lake, StoreConfig
    from llm_assets.core.partition import read_manifest
    from llm_assets.core.units import stop_pool_server
    from llm_assets.dagster.jobs import jobs_of
    from llm_assets.definitions import build_assets
    from llm_assets.platform.partitions import crawl_shard_key
    from resources import LakeIOManager, ObjectStore, S3Endpoint

    config = StoreConfig(**spec["store"])
    lake, crawl, settings = Lake(config), spec["crawl"], seed_settings(spec["workers"])
    stages, timed = _stages()
    creds = Credentials.from_file(config.credentials_file or "")
    store = ObjectStore(s3=S3Endpoint(endpoint_url=config.endpoint, region_name=config.region,
                                      aws_access_key_id=creds.access_key, aws_secret_access_key=creds.secret_key),
                        bucket=config.bucket, credentials_file=config.credentials_file)
    # not crawl_stats: a report beside the path, and it fails on a crawl whose filter chain dropped nothing
    # (DuckDB's empty result of its funnel query has no record batch for pl.from_arrow)
    names = {"raw_files", "documents", "image_text_pairs", "filtered", "signatures", "duplicate_clusters",
             "deduplicated", "tokenized"}
    defs = timed("build the definitions", lambda: dg.Definitions(
        assets=[a for a in build_assets(settings) if a.key.path[-1] in names], jobs=jobs_of(names),
        resources={"store": store, "lake_io_manager": LakeIOManager(store=store)}))
    timed("drop the file(s) under raw/", _dropper(lake, crawl, spec["files"]))
    key = crawl_shard_key(crawl, SHARD)
    with tempfile.TemporaryDirectory(prefix="seed-paper-dagster-") as home, \
            dg.instance_for_test(temp_dir=home) as instance:
        instance.add_dynamic_partitions("crawl", [crawl])
        for job, partition in (("lake_job", key), ("crawl_job", crawl), ("curated_job", key)):
            selection = ", ".join(sorted(a.key.path[-1] for a in defs.resolve_job_def(job).asset_layer.asset_graph
                                         .asset_nodes if a.is_executable and a.key.path[-1] in names))
            result = timed(f"{job} ({selection})", lambda job=job, partition=partition: defs.resolve_job_def(job)
                           .execute_in_process(partition_key=partition, instance=instance))
            assert result.success, f"{job} failed"
    exported = _export(lake, crawl, spec["out"], timed)
    stop_pool_server()  # reaped, its CPU and its workers' reach the parent's RUSAGE_CHILDREN
    manifests = {a: read_manifest(lake, a, crawl, SHARD) for a in ("documents", "filtered", "deduplicated",
                                                                   "tokenized")}
    units = {a: list(m.units) if m else [] for a, m in manifests.items()}
    return {
        "stages": stages,
        "units": {a: len(u) for a, u in units.items()},
        "rows_in": sum(r.rows_in for r in units["documents"]), "documents_out": manifests["documents"].rows,
        "filtered_out": manifests["filtered"].rows, "tokenized_out": manifests["tokenized"].rows,
        "dropped": {k: v for u in units.values() for r in u for k, v in r.dropped.items()},
        "exported_rows": exported.rows, "exported_bytes": exported.bytes,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "children_peak_rss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }


def run_product(workdir: Path, store, workers: int, files: list[Path], label: str, dagster: bool = False) -> dict:
    spec = {"store": {"endpoint": store.endpoint, "bucket": store.bucket, "region": "us-east-1",
                      "credentials_file": str(store.credentials_file)},
            "crawl": f"SEED-{label}", "workers": workers, "files": [str(p) for p in files],
            "out": str(workdir / f"export-{label}.jsonl")}
    spec_path = workdir / f"spec-{label}.json"
    spec_path.write_text(json.dumps(spec))
    log(f"product{' through Dagster' if dagster else ''}, {len(files)} file(s), {workers} worker(s)")
    run = run_measured([sys.executable, "-m", "benchmarks.seed_paper", "--child", "dagster" if dagster else "product",
                        "--spec", str(spec_path)], PROJECT_ROOT, also=store.pid())
    result = json.loads(run["stdout"])
    (workdir / f"export-{label}.jsonl").unlink(missing_ok=True)
    return {**result, "workers": workers, "files": len(files), "dagster": dagster, "seconds": run["seconds"],
            "cpu_seconds": run["cpu_seconds"], "store_cpu_seconds": run["helper_cpu_seconds"],
            "others_cpus": run["others_cpus"]}


# the tokenizer alone (a child process) ----------------------------------------------------------------------------


def tokenizer_child(passes: int, method: str = "encode_batch_fast") -> dict:
    from llm_assets.core.tokenize import load_tokenizer

    with gzip.open(INPUT, "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    tok = load_tokenizer(str(GPT2))
    encode = getattr(tok, method)
    encode(texts[:256], add_special_tokens=False)  # the thread pool started, caches warm
    runs = []
    for _ in range(passes):
        busy0, cpu0, t0 = machine_busy(), cpu_tree(), time.perf_counter()
        tokens = 0
        for i in range(0, len(texts), 1024):
            tokens += sum(len(e.ids) for e in encode(texts[i:i + 1024], add_special_tokens=False))
        wall, cpu = time.perf_counter() - t0, cpu_tree() - cpu0
        runs.append({"seconds": wall, "cpu_seconds": cpu, "tokens": tokens,
                     "others_cpus": max(0.0, machine_busy() - busy0 - cpu) / wall})
    least = min(runs, key=lambda r: (round(r["others_cpus"], 1), r["cpu_seconds"]))
    return {**least, "rows": len(texts), "passes": runs}


def run_tokenizer(threads: int | None, passes: int, method: str = "encode_batch_fast") -> dict:
    log(f"tokenizer alone, {method}, {threads or 'all'} thread(s)")
    env = {"RAYON_NUM_THREADS": str(threads)} if threads else {}
    run = run_measured([sys.executable, "-m", "benchmarks.seed_paper", "--child", "tokenizer", "--passes", str(passes),
                        "--method", method], PROJECT_ROOT, env)
    return {**json.loads(run["stdout"]), "threads": threads or os.cpu_count(), "method": method}


# the paper's code ------------------------------------------------------------------------------------------------


def paper_python() -> str | None:
    """The interpreter for the paper's code, or None (with the reason logged) when it cannot run."""
    python = os.environ.get("SEED_PAPER_PYTHON", sys.executable)
    probe = subprocess.run([python, "-c", "import transformers, tqdm, psutil"], capture_output=True, text=True)
    if probe.returncode != 0:
        log(f"skipping the paper's code: {python} lacks its requirements (transformers, tqdm, psutil); set "
            "SEED_PAPER_PYTHON to an interpreter that has them (python3 -m venv /tmp/v && /tmp/v/bin/pip install "
            "transformers tqdm psutil)")
        return None
    return python


def run_paper(checkout: Path, python: str, workdir: Path) -> dict:
    """Both of the paper's runners on the same rows, from a scratch folder that is deleted afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="seed-paper-scratch-"))
    try:
        shutil.copytree(checkout / "src", scratch / "src")
        (scratch / "gpt2").mkdir()
        shutil.copy(GPT2 / "encoder.json", scratch / "gpt2" / "vocab.json")
        shutil.copy(GPT2 / "vocab.bpe", scratch / "gpt2" / "merges.txt")
        with gzip.open(INPUT, "rb") as src, open(scratch / "input.jsonl", "wb") as dst:
            shutil.copyfileobj(src, dst)
        out = {}
        for name, args in (("single process", ["src/single_process.py"]),
                           ("multiprocessing, 2 workers", ["src/multi_process.py", "--workers", "2"])):
            log(f"the paper's code: {name}")
            run = run_measured([python, *args, "--input", "input.jsonl", "--output", "results/out.jsonl"], scratch,
                               {"HF_HUB_OFFLINE": "1"})
            with open(scratch / "results" / "metrics.csv") as f:
                metrics = f.read().strip().splitlines()
            header, last = metrics[0].split(","), metrics[-1].split(",")
            own = dict(zip(header, last, strict=True))
            with open(scratch / "results" / "out.jsonl", "rb") as f:
                written = sum(1 for _ in f)
            out[name] = {"seconds": run["seconds"], "cpu_seconds": run["cpu_seconds"],
                         "others_cpus": run["others_cpus"],
                         "rows": int(own["rows"]), "rows_written": written, "own_seconds": float(own["secs"]),
                         "own_rows_per_s": float(own["rows_per_sec"]), "own_peak_mb": float(own["peak_mb"])}
        commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        return {"commit": commit, "runs": out}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# report ------------------------------------------------------------------------------------------------------------


def least_contended(rounds: list[dict]) -> dict:
    """Per configuration, the round in which other processes kept the fewest CPUs busy (then: the fewest CPU
    seconds): its wall and CPU seconds are the closest to a quiet machine's. Contention slows the wall clock and
    also adds CPU time (caches, memory bandwidth, the tokenizer's threads waiting for a core)."""
    def cpu(run: dict) -> tuple[float, float]:
        return round(run["others_cpus"], 1), run["cpu_seconds"] + run.get("store_cpu_seconds", 0.0)

    out: dict = {"tokenizer": {k: min((r["tokenizer"][k] for r in rounds), key=cpu) for k in rounds[0]["tokenizer"]},
                 "product": [min(runs, key=cpu) for runs in zip(*(r["product"] for r in rounds), strict=True)]}
    if "paper" in rounds[0]:
        out["paper"] = {"commit": rounds[0]["paper"]["commit"],
                        "runs": {name: min((r["paper"]["runs"][name] for r in rounds), key=cpu)
                                 for name in rounds[0]["paper"]["runs"]}}
    return out


def label(p: dict) -> str:
    files = f"{p['files']} file{'s' if p['files'] > 1 else ''}, {p['workers']} worker{'s' if p['workers'] > 1 else ''}"
    return f"product through the Dagster jobs: {files}" if p.get("dagster") else f"product (work units): {files}"


def summary(results: dict) -> list[Row]:
    """The row of BENCHMARKS.md's summary table: the best product run against the tokenizer alone."""
    rows_in, tok = results["rows"], results["tokenizer"]["all"]
    best = max(results["product"], key=lambda p: rows_in / (p["cpu_seconds"] + p["store_cpu_seconds"]))
    best_rate = rows_in / (best["cpu_seconds"] + best["store_cpu_seconds"])
    share = best_rate / (rows_in / tok["cpu_seconds"])
    return [Row("seed-paper:product", "seed paper's workload: best product run vs the GPT-2 tokenizer alone "
                "(per CPU-s)", f"{share:.2f} ({n(best_rate)} rows per CPU-s)", results["command"], "seed-paper.md",
                "≥ 0.8", verdict(share >= 0.8), results["date"][:10])]


def write(output: Path, results: dict, body: str) -> None:
    publish(output, "seed-paper", BEGIN, END, body, summary(results))


def render(results: dict) -> str:
    rows_in = results["rows"]
    tok2, tok1 = results["tokenizer"]["all"], results["tokenizer"]["1"]
    tok_rate, tok_cpu_rate = rows_in / tok2["seconds"], rows_in / tok2["cpu_seconds"]
    paper = results.get("paper")
    single = paper["runs"]["single process"] if paper else None
    paper_cpu_rate = single["rows"] / single["cpu_seconds"] if single else PAPER_ROWS_PER_CPU_S

    def line(name: str, rows_out: int, r: dict, cpu: float) -> list[str]:
        return [name, n(rows_out), f"{r['seconds']:.1f}", f"{cpu:.1f}", n(rows_in / cpu), n(rows_in / r["seconds"]),
                f"{rows_in / cpu / paper_cpu_rate:.1f}×", f"{rows_in / cpu / tok_cpu_rate:.2f}",
                f"{rows_in / r['seconds'] / tok_rate:.2f}", f"{r['others_cpus']:.2f}"]

    slow = results["tokenizer"]["encode_batch"]
    lines = [line(f"GPT-2 tokenizer alone: encode_batch_fast, {tok2['threads']} threads", rows_in, tok2,
                  tok2["cpu_seconds"]),
             line("GPT-2 tokenizer alone: encode_batch_fast, 1 thread", rows_in, tok1, tok1["cpu_seconds"]),
             line(f"GPT-2 tokenizer alone: encode_batch (offsets too), {slow['threads']} threads", rows_in, slow,
                  slow["cpu_seconds"])]
    for p in results["product"]:
        cpu = p["cpu_seconds"] + p["store_cpu_seconds"]
        lines.append(line(label(p), p["exported_rows"], p, cpu))
    if paper:
        for name, r in paper["runs"].items():
            lines.append(line(f"paper's code, {name}", r["rows_written"], r, r["cpu_seconds"]))
    headers = ["path", "rows out", "wall s", "CPU s", "rows/CPU-s", "rows/s (wall)", "× paper (CPU)",
               "÷ tokenizer (CPU)", "÷ tokenizer (wall)", "others (CPUs)"]
    breakdown = []
    for p in results["product"]:
        for name, s in p["stages"].items():
            breakdown.append([label(p), name, "–" if s["seconds"] is None else f"{s['seconds']:.2f}",
                              f"{s['cpu_seconds']:.2f}"])
        breakdown.append([label(p), "object store (SeaweedFS), over the run", "–", f"{p['store_cpu_seconds']:.2f}"])
    first = results["product"][0]
    dropped = ", ".join(f"{k} {n(v)}" for k, v in first["dropped"].items()) or "nothing"
    best = max(results["product"], key=lambda p: rows_in / (p["cpu_seconds"] + p["store_cpu_seconds"]))
    goal_wall = rows_in / best["seconds"] / tok_rate
    goal_cpu = rows_in / (best["cpu_seconds"] + best["store_cpu_seconds"]) / tok_cpu_rate
    busiest = max([tok2["others_cpus"], *(p["others_cpus"] for p in results["product"])])
    paper_text = (f"The paper's code: commit `{paper['commit']}` of jdirgha/Scalable-Big-Data-Pipelines-for-LLM-"
                  "Fine-Tuning (a clone in a scratch folder, never in this repository; its requirements in a "
                  "virtualenv of their own: `python3 -m venv V && V/bin/pip install transformers tqdm psutil`), run "
                  f"unchanged (its own timer said {single['own_rows_per_s']:,.0f} rows/s single-process, "
                  f"peak {single['own_peak_mb']:,.0f} MB). It keeps every row (it computes token counts but drops "
                  "none) and tokenizes each row twice (`tokenize()` and `encode()`), writing three intermediate "
                  "files besides its output.") if paper else \
        (f"The paper's code was not run ({results.get('paper_skipped', 'SEED_PAPER_DIR unset')}): the × paper "
         f"column divides by {PAPER_ROWS_PER_CPU_S} rows/CPU-s, its single-process rate measured here before.")
    return "\n".join([
        "## The seed paper's workload (`make bench-seed-paper`, also run by `make bench`)", "",
        f"Generated {results['date']} by `{results['command']}` (`benchmarks/seed_paper.py`; its docstring says "
        f"exactly what runs). Input: `../shared/data/bench/seed003_input.jsonl.gz`, {n(rows_in)} JSON Lines rows. "
        f"Product path: the file dropped under `raw/<crawl>/` of a throwaway SeaweedFS, then the work units of "
        f"`documents` → `filtered` (chain: `normalize` only) → `tokenized` (GPT-2, `min_tokens: {MIN_TOKENS}`) run "
        "by the product's runner (`PoolRunner`) and committed, then `export` of the tokenized partition to JSON "
        "Lines (doc_id, url, crawl, n_tokens, token ids). Deduplication is skipped (the workload has none, and the "
        "product's dedup stages cannot be switched off). With one file every stage has one work unit, so a second "
        "worker changes nothing; the same rows dropped as several files spread over the workers. "
        f"{n(first['tokenized_out'])} of {n(first['rows_in'])} documents kept (dropped: {dropped}).", "",
        f"Each configuration ran once in each of {len(results['rounds'])} interleaved round(s); the table shows, "
        "for each, the round in which other processes kept the fewest CPUs busy (the least contended). "
        "CPU s: user + system seconds of the whole process tree from launch to exit (interpreter start-up, imports, "
        "the tokenizer's load, pool workers), plus, for the product, the object store's; the tokenizer alone is "
        "its encoding only (texts in memory, batches of 1,024, the least contended of 3 passes), the ceiling of any "
        "pipeline tokenizing these rows. ÷ tokenizer compares with `encode_batch_fast` (the call the tokenized stage "
        "makes) on all cores; `encode_batch` also computes offsets and is the lower bar. others (CPUs): how busy "
        "other processes kept the "
        f"machine meanwhile (it had {os.cpu_count()} CPUs), which slows wall-clock rates, not CPU-second ones.", "",
        table(headers, lines), "",
        f"Goal: ≥ 0.8 of the tokenizer alone on both cores. Best product run ({label(best)}): {goal_cpu:.2f} of its "
        f"rate per CPU-second, {goal_wall:.2f} of its wall-clock rate"
        + (f" (the wall-clock ratio is unreliable in this run: other processes kept up to {busiest:.1f} of the "
           f"{os.cpu_count()} CPUs busy)." if busiest > 0.3 else "."), "",
        paper_text, "",
        "Where the product's time goes (wall and CPU seconds per step, pool workers included; the tokenizer's "
        "thread pool runs on both cores whatever the workers):", "",
        table(["run", "step", "wall s", "CPU s"], breakdown, "llrr"), "",
    ])


# main --------------------------------------------------------------------------------------------------------------


def command(argv: list[str] | None) -> str:
    """The command as run, with the environment that brings in the paper's code."""
    args = sys.argv[1:] if argv is None else argv
    env = " ".join(f"{k}={os.environ[k]}" for k in ("SEED_PAPER_DIR", "SEED_PAPER_PYTHON") if os.environ.get(k))
    run = "make bench-seed-paper" if argv is None and not args else ".venv/bin/python -m benchmarks.seed_paper " + \
        " ".join(args)
    return f"{env} {run}".strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.seed_paper", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2", help="pool workers of the product runs (default 1,2)")
    parser.add_argument("--files", default="1,4", help="the workload dropped as this many files (default 1,4)")
    parser.add_argument("--passes", type=int, default=3, help="passes of the tokenizer alone in each round (the least "
                                                               "contended one counts)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every measurement, interleaved; each "
                                                              "configuration reports its least contended round "
                                                              "(default 1)")
    parser.add_argument("--output", type=Path, default=PROJECT_ROOT / "BENCHMARKS.md")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--dagster", default="2", help="pool workers of the runs through the Dagster jobs, one file "
                                                        "(default 2; empty: none)")
    parser.add_argument("--render", type=Path, help="write the report from the results a --json run saved, without "
                                                     "measuring")
    parser.add_argument("--child", choices=["product", "dagster", "tokenizer"], help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--method", default="encode_batch_fast", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child == "product":
        print(json.dumps(product_child(json.loads(args.spec.read_text()))))
        return 0
    if args.child == "dagster":
        print(json.dumps(dagster_child(json.loads(args.spec.read_text()))))
        return 0
    if args.child == "tokenizer":
        print(json.dumps(tokenizer_child(args.passes, args.method)))
        return 0
    if args.render:
        saved = json.loads(args.render.read_text())
        write(args.output, saved, render(saved))
        return 0
    if not INPUT.exists():
        log(f"{INPUT} is absent (../shared/data holds the workload): nothing to measure")
        return 1

    from llm_assets.platform.embedded_store import EmbeddedStore

    workers = [int(w) for w in args.workers.split(",")]
    files = [int(k) for k in args.files.split(",")]
    with gzip.open(INPUT, "rb") as f:
        rows = sum(1 for _ in f)
    results: dict = {"rows": rows, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                     "command": command(argv),
                     "loadavg_start": os.getloadavg()}
    checkout = os.environ.get("SEED_PAPER_DIR")
    python = None
    if not checkout:
        results["paper_skipped"] = "SEED_PAPER_DIR unset"
        log("skipping the paper's code: SEED_PAPER_DIR is unset (a checkout of jdirgha/Scalable-Big-Data-"
            "Pipelines-for-LLM-Fine-Tuning)")
    elif not (Path(checkout) / "src" / "single_process.py").exists():
        results["paper_skipped"] = f"no src/single_process.py in {checkout}"
        log(f"skipping the paper's code: {checkout} holds no src/single_process.py")
    elif (python := paper_python()) is None:
        results["paper_skipped"] = "SEED_PAPER_PYTHON lacks transformers, tqdm or psutil"
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="llm-assets-seed-paper-") as tmp:
        workdir = Path(tmp)
        store = EmbeddedStore.throwaway(workdir / "seaweedfs", "seed-paper")
        store.state_dir.mkdir(parents=True, exist_ok=True)
        store.start()
        try:
            for r in range(args.repeat):  # interleaved: a change of load hits every configuration alike
                log(f"round {r + 1} of {args.repeat}")
                one: dict = {"tokenizer": {"all": run_tokenizer(None, args.passes), "1": run_tokenizer(1, args.passes),
                                           "encode_batch": run_tokenizer(None, args.passes, "encode_batch")}}
                one["product"] = [run_product(workdir, store, w, split_input(workdir, k), f"{k}f{w}w{r}")
                                  for k in files for w in workers]
                one["product"] += [run_product(workdir, store, int(w), [INPUT], f"dagster{w}w{r}", dagster=True)
                                   for w in args.dagster.split(",") if w]
                if python is not None and checkout:
                    one["paper"] = run_paper(Path(checkout), python, workdir)
                rounds.append(one)
        finally:
            store.stop()
    results["rounds"] = rounds
    results |= least_contended(rounds)
    results["loadavg_end"] = os.getloadavg()
    body = render(results)
    print(body)
    write(args.output, results, body)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
