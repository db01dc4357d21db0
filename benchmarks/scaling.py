"""How a partition's work scales from one pool worker to two: the documents stage on the shared WARC corpus, the
tokenized stage on the seed paper's rows, and the GPT-2 tokenizer alone on those rows (the reference ceiling).

    .venv/bin/python -m benchmarks.scaling --stage documents|tokenized|tokenizer --workers 1|2
                                           [--warc-dir DIR] [--input FILE] [--files K]

prints one JSON line:

    {"stage": "documents", "workers": 2, "units": 10, "items": 164, "wall_seconds": 14.2, "cpu_seconds": 27.9,
     "store_cpu_seconds": 0.4, "others_cpus": 0.1, "loadavg": [...]}

- `documents`: every `*.warc.gz` of `--warc-dir` (default ../shared/data/warc) dropped under `raw/` of a throwaway
  embedded store, its units planned as the documents asset plans them (`documents.extract_units`: a large WARC is
  several shares) and run by `PoolRunner(workers)`. `items`: records read.
- `tokenized`: the seed paper's rows (`--input`, default ../shared/data/bench/seed003_input.jsonl.gz) as `--files`
  gzip JSON Lines files (default 4: a crawl arrives in many files), through documents and filtered (`normalize`
  alone) in this process, unmeasured; then the tokenized units (GPT-2, `min_tokens: 10`), one per filtered part,
  run by `PoolRunner(workers)` and measured. `items`: documents tokenized.
- `tokenizer`: `encode_batch_fast` on the same rows' texts held in memory, batches of 1,024, the tokenizer's own
  thread pool (all cores) with `--workers 2`, one thread (`TOKENIZERS_PARALLELISM=false`) with `--workers 1`.

`unit_seconds`: each unit's seconds, longest first; `two_worker_bound`: the 1 -> 2 worker wall ratio the units
allow at best (their total over the larger of the longest and half the total), for loaded machines;
`per_worker`: each worker process's units, busy (wall) and CPU seconds inside units, busiest first (how even the
work was); `unit_cpu_seconds`: the units' CPU seconds, and `cpu_by_process`: this process (`driver`), the fork
server's own (`fork_server`) and its workers' (`workers`) CPU seconds: the workers' beyond their units' is their
start-up. The 2-worker run's `cpu_seconds` over the 1-worker run's is what a second worker costs in CPU: near 1.0,
two workers can reach about 2x on an idle machine.
`wall_seconds` and `cpu_seconds` cover the measured step only: `cpu_seconds` is this process's and every pool
worker's (the fork server is stopped and reaped at the end, so its workers count), not the object store's
(`store_cpu_seconds`). `others_cpus`: how many CPUs other processes kept busy meanwhile, on average: wall-clock
ratios mean something only when it is near 0. The 1 -> 2 worker ratio of a stage is wall(1) / wall(2); compare
runs interleaved (1, 2, 1, 2, ...). The seed paper's whole path against the tokenizer alone: `make bench-seed-paper`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

# the core's, not llm_assets.settings: a pool worker started from `python -m benchmarks.scaling` runs this module
# again as its main (multiprocessing does), and the settings would cost it ~0.25 CPU-s
from llm_assets.core.config import PROJECT_ROOT

WARC_DIR = PROJECT_ROOT.parent / "shared" / "data" / "warc"
SEED_INPUT = PROJECT_ROOT.parent / "shared" / "data" / "bench" / "seed003_input.jsonl.gz"
SHARD = "0000"


def _cpu() -> float:
    """CPU seconds of this process, of the children it reaped and of the live fork server's tree."""
    from llm_assets.core.units import pool_cpu_seconds

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + pool_cpu_seconds()


def _own_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def measured(fn, store_pid: int | None = None) -> tuple[object, dict]:
    """Run `fn()`: its value and wall, CPU (this process and its pool workers), the store's CPU and others' load,
    and where the CPU went: this process (`driver`), the pool's fork server itself (`fork_server`: a fresh
    interpreter, its preload and warm-ups), its workers (`workers`), and of that the units themselves (`units`)."""
    from benchmarks.stages import machine_busy_seconds, process_cpu_seconds
    from llm_assets.core.units import pool_cpu_breakdown, stop_pool_server

    stop_pool_server()  # a server started before (unmeasured steps) would hide its workers' CPU until reaped
    store0, busy0, cpu0, t0 = process_cpu_seconds(store_pid), machine_busy_seconds(), _cpu(), time.perf_counter()
    own0 = _own_cpu()
    value = fn()
    wall = time.perf_counter() - t0
    server, workers = pool_cpu_breakdown()  # the workers ended with their pool, and their server reaped them
    driver = _own_cpu() - own0
    stop_pool_server()
    cpu = _cpu() - cpu0
    store = process_cpu_seconds(store_pid) - store0
    others = max(0.0, machine_busy_seconds() - busy0 - cpu - store) / wall if wall else 0.0
    return value, {"wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "store_cpu_seconds": round(store, 3),
                   "others_cpus": round(others, 2),
                   "cpu_by_process": {"driver": round(driver, 2), "fork_server": round(server, 2),
                                      "workers": round(workers, 2)}}


def balance(results) -> dict:
    """The units' own seconds, longest first, and the 1 -> 2 worker ratio they allow at best: the total over the
    larger of the longest unit and half the total (a bound that the machine's load does not move much); the units'
    CPU seconds; and per worker process its units, busy (wall) and CPU seconds, busiest first."""
    seconds = sorted((r.seconds for r in results), reverse=True)
    total = sum(seconds)
    workers: dict[int, dict] = {}
    for r in results:
        w = workers.setdefault(r.worker, {"units": 0, "busy_seconds": 0.0, "cpu_seconds": 0.0})
        w["units"] += 1
        w["busy_seconds"] += r.seconds
        w["cpu_seconds"] += r.cpu_seconds
    return {"unit_seconds": [round(x, 2) for x in seconds],
            "two_worker_bound": round(total / max(seconds[0], total / 2), 2) if seconds else None,
            "unit_cpu_seconds": round(sum(r.cpu_seconds for r in results), 2),
            "per_worker": [{k: round(v, 2) if isinstance(v, float) else v for k, v in w.items()}
                           for w in sorted(workers.values(), key=lambda w: -w["busy_seconds"])]}


def _drop(lake, crawl: str, paths: list[Path]) -> list[tuple[str, int, str]]:
    for path in paths:
        lake.put_file(f"raw/{crawl}/{path.name}", path)
    return [(o.key, o.size, o.etag) for o in lake.list(f"raw/{crawl}/")]


def documents(store, store_pid: int | None, workers: int, warc_dir: Path) -> dict:
    from llm_assets.core.documents import extract_documents, extract_units
    from llm_assets.core.lake import Lake
    from llm_assets.core.units import PoolRunner, run_units
    from llm_assets.settings import load_settings

    lake, crawl, settings = Lake(store), f"SCALING-docs-{workers}w", load_settings().documents
    raw = _drop(lake, crawl, sorted(warc_dir.glob("*.warc.gz")))
    units = [u for key, size, etag in raw
             for u in extract_units(store, settings, crawl, SHARD, key, size, etag, "scaling", settings.extractor)]
    results, m = measured(lambda: run_units(extract_documents, units, PoolRunner(workers)), store_pid)
    return {"units": len(units), "files": len(raw), "items": sum(r.rows_in for r in results),
            "documents": sum(r.rows_out for r in results), **m, **balance(results)}


def tokenized(store, store_pid: int | None, workers: int, input_file: Path, files: int, workdir: Path) -> dict:
    from benchmarks.seed_paper import GPT2, MIN_TOKENS, split_input
    from llm_assets.core.documents import extract_documents, extract_units
    from llm_assets.core.filtered import FilterUnit, filter_documents
    from llm_assets.core.filters import Normalize
    from llm_assets.core.lake import Lake, part_key
    from llm_assets.core.tokenized import TokenizeUnit, tokenize_documents
    from llm_assets.core.units import InProcessRunner, PoolRunner, run_units, unit_id
    from llm_assets.settings import FilteredSettings, Settings, TokenizedSettings

    settings = Settings(filtered=FilteredSettings(chain=(Normalize(),)),
                        tokenized=TokenizedSettings(tokenizer_path=GPT2, min_tokens=MIN_TOKENS))
    lake, crawl = Lake(store), f"SCALING-tok-{workers}w"
    raw = _drop(lake, crawl, split_input(workdir, files, input_file))
    docs = run_units(extract_documents, [u for key, size, etag in raw for u in extract_units(
        store, settings.documents, crawl, SHARD, key, size, etag, "scaling", settings.documents.extractor)],
        InProcessRunner())
    kept = run_units(filter_documents, [
        FilterUnit(store=store, settings=settings.filtered, source=d.part, unit=(u := unit_id("filtered", d.part)),
                   part=part_key("filtered", crawl, SHARD, u),
                   rejected_part=part_key("filtered", crawl, SHARD, u, zone="rejected"))
         for d in docs], InProcessRunner())
    units = [TokenizeUnit(store=store, settings=settings.tokenized, source=k.part,
                          unit=(u := unit_id("tokenized", k.part)), part=part_key("tokenized", crawl, SHARD, u),
                          rejected_part=part_key("tokenized", crawl, SHARD, u, zone="rejected")) for k in kept]
    results, m = measured(lambda: run_units(tokenize_documents, units, PoolRunner(workers)), store_pid)
    return {"units": len(units), "files": files, "items": sum(r.rows_in for r in results),
            "documents": sum(r.rows_out for r in results), **m, **balance(results)}


def tokenizer(workers: int, input_file: Path) -> dict:
    """The GPT-2 tokenizer alone on the rows' texts. Its parallelism is read from the environment when it first
    encodes, hence set here before the import."""
    if workers == 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from benchmarks.seed_paper import GPT2
    from llm_assets.core.tokenize import load_tokenizer

    with gzip.open(input_file, "rt", encoding="utf-8") as f:
        texts = [json.loads(line).get("text") or "" for line in f]
    tok = load_tokenizer(str(GPT2))
    tok.encode_batch_fast(texts[:256], add_special_tokens=False)  # the thread pool started, caches warm

    def encode() -> int:
        return sum(len(tok.encode_batch_fast(texts[i:i + 1024], add_special_tokens=False))
                   for i in range(0, len(texts), 1024))

    items, m = measured(encode)
    return {"units": 1, "items": items, **m}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", choices=["documents", "tokenized", "tokenizer"], required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warc-dir", type=Path, default=WARC_DIR, help="the documents stage's input")
    parser.add_argument("--input", type=Path, default=SEED_INPUT, help="the tokenize path's rows (JSON Lines)")
    parser.add_argument("--files", type=int, default=4, help="tokenized: the rows as this many files (default 4)")
    args = parser.parse_args(argv)
    out: dict = {"stage": args.stage, "workers": args.workers}
    if args.stage == "tokenizer":
        out |= tokenizer(args.workers, args.input)
    else:
        from llm_assets.core.lake import StoreConfig
        from llm_assets.platform.embedded_store import EmbeddedStore

        with tempfile.TemporaryDirectory(prefix="llm-assets-scaling-") as tmp:
            workdir = Path(tmp)
            store = EmbeddedStore.throwaway(workdir / "seaweedfs", "scaling")
            store.state_dir.mkdir(parents=True, exist_ok=True)
            store.start()
            try:
                config = StoreConfig(endpoint=store.endpoint, bucket=store.bucket, region="us-east-1",
                                     credentials_file=str(store.credentials_file))
                if args.stage == "documents":
                    out |= documents(config, store.pid(), args.workers, args.warc_dir)
                else:
                    out |= tokenized(config, store.pid(), args.workers, args.input, args.files, workdir)
            finally:
                store.stop()
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
