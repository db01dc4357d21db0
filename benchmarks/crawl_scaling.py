"""Two pool workers against one on the bench-crawl corpus: the documents and tokenized stages' real units.

    .venv/bin/python -m benchmarks.crawl_scaling [--corpus .bench/corpus] [--files 6] [--pairs 2]

- `documents`: the first `--files` WARC files of the corpus's first crawl, dropped into a throwaway embedded store
  and extracted by their units (`benchmarks.scaling --stage documents`: a large file is several units).
- `tokenized`: the gold main texts of those files' pages (`gold.parquet`, the text the corpus placed into each
  page: real documentation prose in the corpus's languages) as JSON Lines, split into 8 files, then documents and
  filtered (normalize only) unmeasured and the tokenized units (GPT-2) measured (`--stage tokenized`).

Each stage alternates 1 and 2 workers (1, 2 then 2, 1, ...), each side a fresh process (`benchmarks.compare.
run_side`), the 1-worker side pinned to one core. The ratio is wall(1) / wall(2). The fork server's start cost is
what the pool's processes spent outside their units: the fork server's own CPU (a fresh interpreter, its preload
and warm-ups) plus its workers' CPU beyond their units' (each forked worker's own start), set beside the units' CPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.summary import Row, publish

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.8
STAGES = ("documents", "tokenized")


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} crawl-scaling: {msg}", file=sys.stderr, flush=True)


def inputs(corpus: Path, files: int, scratch: Path) -> tuple[Path, Path, dict]:
    """A folder of the first `files` WARC files of the first crawl (links) and their pages' gold texts as gzip JSON
    Lines."""
    import polars as pl

    manifest = json.loads((corpus / "manifest.json").read_text())
    first = sorted((corpus / "crawls").iterdir())[0]
    chosen = sorted(first.glob("*.warc.gz"))[:files]
    if not chosen:
        raise SystemExit(f"{first}: no WARC files (make corpus first)")
    warc_dir = scratch / "warc"
    warc_dir.mkdir()
    for path in chosen:
        (warc_dir / path.name).symlink_to(path.resolve())
    gold = (pl.scan_parquet(corpus / "gold.parquet")
            .filter(pl.col("crawl") == first.name, pl.col("file").is_in([p.name for p in chosen]),
                    pl.col("text").str.len_chars() > 0)
            .select("text", "language").collect())
    texts = scratch / "texts.jsonl.gz"
    with gzip.open(texts, "wt", encoding="utf-8") as out:
        for i, text in enumerate(gold["text"]):
            out.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    return warc_dir, texts, {"crawl": first.name, "files": [p.name for p in chosen],
                             "bytes": sum(p.stat().st_size for p in chosen), "texts": gold.height,
                             "languages": gold["language"].n_unique(), "corpus_sha256": manifest.get("sha256")}


def start_cost(side: dict) -> float:
    """CPU seconds the pool spent outside its units: the fork server's and its workers' beyond their units'."""
    by = side.get("cpu_by_process", {})
    if not by.get("workers"):  # one worker: the units ran in the driver's process, no pool was started
        return 0.0
    return by.get("fork_server", 0.0) + by.get("workers", 0.0) - side.get("unit_cpu_seconds", 0.0)


def measure(corpus: Path, files: int, pairs: int, stages: tuple[str, ...] = STAGES) -> dict:
    from benchmarks.compare import normalise_scaling
    from benchmarks.harness import run_side

    with tempfile.TemporaryDirectory(prefix="crawl-scaling-") as tmp:
        warc_dir, texts, about = inputs(corpus, files, Path(tmp))
        log(f"{about['files']}: {about['bytes'] / 1e6:,.0f} MB; {about['texts']:,} texts")
        extra = {"documents": ["--warc-dir", str(warc_dir)], "tokenized": ["--input", str(texts), "--files", "8"]}
        out: dict = {"input": about, "stages": {}}
        for stage in stages:
            rounds = []
            for k in range(pairs):
                got = {}
                for workers in ([1, 2] if k % 2 == 0 else [2, 1]):
                    log(f"{stage}, round {k + 1}/{pairs}: {workers} worker(s)")
                    cmd = [sys.executable, "-m", "benchmarks.scaling", "--stage", stage, "--workers", str(workers),
                           *extra[stage]]
                    got[str(workers)] = normalise_scaling(run_side(cmd, "0" if workers == 1 else None,
                                                                   {"RAYON_NUM_THREADS": "1"}))
                rounds.append(got)
            out["stages"][stage] = {"rounds": rounds,
                                    "ratios": [r["1"]["timed_wall_s"] / r["2"]["timed_wall_s"] for r in rounds]}
    return out


def render(r: dict, stage: str, command: str) -> str:
    """One stage's section of the details file (each stage has its own, so that one can be measured again alone)."""
    from benchmarks.harness import cpu_model, git_commit

    about, s = r["input"], r["stages"][stage]
    lines = [f"## Two workers at size: {stage} (`benchmarks.crawl_scaling`)", "",
             f"Command: `{command}`, at commit {r.get('commit') or git_commit()} on {cpu_model()}, load average at "
             f"the end {r['loadavg_end']}. Input: the first {len(about['files'])} files of {about['crawl']} "
             f"({about['bytes'] / 1e6:,.0f} MB of WARC) and their {about['texts']:,} pages' gold texts "
             f"({about['languages']} languages). 1 worker pinned to one core, 2 on both, alternating; each side a "
             "fresh process. `others` is how many CPUs other processes kept busy meanwhile: a ratio means something "
             "only where it is near 0.", "",
             "| round | workers | units | items | wall s | CPU s | unit CPU s | pool start CPU s | balance bound | "
             "others |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k, rnd in enumerate(s["rounds"], 1):
        for w in ("1", "2"):
            x = rnd[w]
            lines.append(f"| {k} | {w} | {x['units']} | {x['items']:,} | {x['timed_wall_s']:.1f} | "
                         f"{x['timed_cpu_s']:.1f} | {x['unit_cpu_seconds']:.1f} | {start_cost(x):.2f} | "
                         f"{x['two_worker_bound']} | {x['others_cpus']} |")
    lines += ["", "2 workers vs 1: " + ", ".join(f"{x:.2f}×" for x in s["ratios"])
              + f" (median {statistics.median(s['ratios']):.2f}×, goal ≥ {GOAL}×); the pool's start, 2 workers: "
              f"{statistics.median(start_cost(x['2']) for x in s['rounds']):.2f} CPU-s against "
              f"{statistics.median(x['2']['unit_cpu_seconds'] for x in s['rounds']):.1f} CPU-s of units."]
    return "\n".join(lines)


def rows(r: dict, command: str) -> list[Row]:
    out = []
    for stage, s in r["stages"].items():
        median = statistics.median(s["ratios"])
        start = statistics.median(start_cost(x["2"]) for x in s["rounds"])
        units = statistics.median(x["2"]["unit_cpu_seconds"] for x in s["rounds"])
        out.append(Row(f"crawl-scaling:{stage}", f"2 workers vs 1 at size, {stage} (wall; bench-crawl corpus)",
                       f"{median:.2f}× (" + "/".join(f"{x:.2f}" for x in s["ratios"]) + f"); pool start "
                       f"{start:.1f} of {units:,.0f} CPU-s", command, "crawl-scaling.md", f"≥ {GOAL}×",
                       "yes" if median >= GOAL else "no"))
    return out


def main() -> None:
    from benchmarks.harness import git_commit, loadavg

    parser = argparse.ArgumentParser(prog="python -m benchmarks.crawl_scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / ".bench" / "corpus")
    parser.add_argument("--files", type=int, default=6, help="WARC files of the first crawl (default 6)")
    parser.add_argument("--pairs", type=int, default=2, help="rounds of (1 worker, 2 workers) per stage")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--json", type=Path, help="everything measured, as JSON")
    parser.add_argument("--from-json", type=Path, help="no run: publish a run's --json file again")
    args = parser.parse_args()
    if args.from_json:
        result = json.loads(args.from_json.read_text())
    else:
        command = " ".join([".venv/bin/python -m benchmarks.crawl_scaling", *sys.argv[1:]])
        result = measure(args.corpus.resolve(), args.files, args.pairs, tuple(args.stages)) | {
            "loadavg_end": loadavg(), "commit": git_commit(), "command": command,
            "date": time.strftime("%Y-%m-%d", time.gmtime())}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    command = result.get("command", "make bench-crawl-scaling")
    for stage in result["stages"]:
        body = render(result, stage, command)
        print(body)
        mine = [r for r in rows(result, command) if r.key.endswith(f":{stage}")]
        publish(args.output, "crawl-scaling", f"<!-- crawl-scaling:{stage}:begin -->",
                f"<!-- crawl-scaling:{stage}:end -->", body, mine,
                f"{result['date']}, {result['commit']}" if result.get("commit") and result.get("date") else None)


if __name__ == "__main__":
    main()
