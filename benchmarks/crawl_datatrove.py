"""The anchor of `make bench-crawl`: datatrove 0.10.1's FineWeb pipeline over the same WARC files as the product, in
its own environment (`.bench/compare/datatrove-venv`, made by `benchmarks.compare.anchor_python` on first use).

    from benchmarks.crawl_datatrove import run_anchor
    result = run_anchor(Path(".bench/corpus/warc"), Path(".bench/crawl/anchor"), workers=2)
    result.stages["filter"].cpu_s, result.total.docs_out, result.kept_dedup

    .venv/bin/python -m benchmarks.crawl_datatrove --input DIR --work DIR [--workers 2] [--json FILE]

The pipeline, its stages and how each is measured: the docstring of `benchmarks/crawl_anchor.py`, the script this
runs with the anchor's interpreter. In short: every `*.warc.gz` under the input, its first sub-folder naming the
crawl; each stage (filter, signatures, buckets, clusters, dedup, tokenize) once per crawl with
`LocalPipelineExecutor(workers=...)`, deduplication within a crawl as the product's and FineWeb's per dump; each stage
a fresh process whose whole tree is measured by wait4.

The result (`AnchorResult`): per stage and in total, cpu_s (user + system of every process of the stage), wall_s,
peak_rss_mib (the largest single process), docs_in and docs_out (None for buckets and clusters, which handle
signatures and pairs, not documents), bytes_out (its output files); tokens (GPT-2, with one <|endoftext|> per
document); extract_timeouts, the pages Trafilatura's wall-clock limit dropped; kept_filtered and kept_dedup, JSON
Lines of {"crawl", "warc_file", "record_id", "url"}, one row per document kept after filtering and after
deduplication; dropped, the same with "block" for each document a filter or deduplication removed; the anchor's
package versions and settings; `raw`, the script's whole JSON (each block's own counters per stage, e.g.
Trafilatura's timeouts).

Trafilatura's limit is wall time (1 s, datatrove's default, which FineWeb kept): measured here at a load average of
about 10 on 2 cores, it dropped 169 of the 205 HTML pages of the shared WARC files and the anchor kept one document
(with `extract_timeout=60`: no timeouts, 36 kept). Compare kept documents with a limit that does not bind (e.g. the
product's own 30 s, `extract_timeout=30`), or on an idle machine, and report `extract_timeouts` beside them.

Fixed costs per task weigh on small inputs: every filter task loads URLFilter's block list (4.6 M domains: about
6 CPU-s and a peak of about 800 MiB per worker process, the stage's peak RSS), and the MinHash signature tasks load
spaCy. One task per WARC file, so the corpus's file size sets how often they are paid.

Its lid.176 is the project's (`benchmarks.compare.lid_model`), its tokenizer ../shared/data/tokenizers/gpt2; no
network at run time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "crawl_anchor.py"
STAGES = ("filter", "signatures", "buckets", "clusters", "dedup", "tokenize")


def shared_data() -> Path:
    return Path(os.environ.get("LLM_ASSETS_SHARED_DATA", ROOT.parent / "shared" / "data"))


@dataclass(frozen=True)
class StageFigures:
    """One stage's (or the whole run's) figures; see the module docstring."""

    cpu_s: float
    wall_s: float
    peak_rss_mib: float
    docs_in: int | None
    docs_out: int | None
    bytes_out: int


@dataclass(frozen=True)
class AnchorResult:
    """datatrove's run over one input: figures per stage in pipeline order, the total, what it kept."""

    stages: dict[str, StageFigures]
    total: StageFigures
    tokens: int
    extract_timeouts: int
    kept_filtered: Path
    kept_dedup: Path
    dropped: Path
    versions: dict[str, str]
    settings: dict
    raw: dict

    def summary(self) -> dict:
        """The documented shape: {"stages": {name: figures}, "total": figures, "kept_filtered", "kept_dedup",
        "tokens", "extract_timeouts", "versions"}."""
        return {"stages": {k: asdict(v) for k, v in self.stages.items()}, "total": asdict(self.total),
                "tokens": self.tokens, "extract_timeouts": self.extract_timeouts,
                "kept_filtered": str(self.kept_filtered), "kept_dedup": str(self.kept_dedup), "versions": self.versions}


def figures(d: dict) -> StageFigures:
    return StageFigures(cpu_s=d["cpu_s"], wall_s=d["wall_s"], peak_rss_mib=d["peak_rss_mib"], docs_in=d["docs_in"],
                        docs_out=d["docs_out"], bytes_out=d["bytes_out"])


def parse(raw: dict) -> AnchorResult:
    """The script's JSON as an AnchorResult."""
    return AnchorResult(stages={name: figures(raw["stages"][name]) for name in STAGES}, total=figures(raw["total"]),
                        tokens=raw["tokens"], extract_timeouts=raw["extract_timeouts"],
                        kept_filtered=Path(raw["kept_filtered"]), kept_dedup=Path(raw["kept_dedup"]),
                        dropped=Path(raw["dropped"]), versions=raw["versions"], settings=raw["settings"], raw=raw)


def run_anchor(input_dir: Path, work_dir: Path, workers: int = 2, python: str | None = None,
               extract_timeout: float | None = None, lid: str | None = None,
               tokenizer: Path | None = None) -> AnchorResult:
    """datatrove's FineWeb pipeline over every WARC file under `input_dir`, its files in `work_dir` (cleared of the
    stages' earlier outputs). `python`: the anchor's interpreter (default: the anchor environment, installed on first
    use); `extract_timeout`: Trafilatura's per-page wall-clock limit (default datatrove's, 1 s, which drops more
    pages the more loaded the machine is); `lid`, `tokenizer`: the project's lid.176 and the shared GPT-2."""
    from benchmarks.compare import anchor_python, lid_model

    work_dir.mkdir(parents=True, exist_ok=True)
    out = work_dir / "result.json"
    cmd = [python or anchor_python(), str(SCRIPT), "--input", str(input_dir), "--work", str(work_dir),
           "--workers", str(workers), "--lid", lid or lid_model(),
           "--tokenizer", str(tokenizer or shared_data() / "tokenizers" / "gpt2"), "--out", str(out)]
    if extract_timeout:
        cmd += ["--extract-timeout", str(extract_timeout)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the anchor failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return parse(json.loads(out.read_text()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.crawl_datatrove", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, required=True, help="WARC files, one sub-folder per crawl")
    parser.add_argument("--work", type=Path, required=True, help="the anchor's files")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--extract-timeout", type=float, default=None,
                        help="Trafilatura's per-page limit in seconds (default datatrove's)")
    parser.add_argument("--json", type=Path, help="write the summary here too")
    args = parser.parse_args(argv)
    result = run_anchor(args.input, args.work, args.workers, extract_timeout=args.extract_timeout)
    text = json.dumps(result.summary(), indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    sys.stdout.flush()


if __name__ == "__main__":
    main()


def intact_members(data: bytes) -> tuple[bytes, int]:
    """A gzip-per-record file without its damaged members, and how many there were. datatrove's WARC reader (warcio)
    ends its task with a `zlib.error` at the first damaged member, losing the file's other records and, through the
    executor, the stage; the product quarantines such a member and goes on. Given the file without them, datatrove
    reads every intact record the product reads, so the two sides compare on the same pages."""
    out, damaged, at = bytearray(), 0, 0
    while at < len(data):
        end = _member_end(data, at)
        if end is not None:
            out += data[at:end]
            at = end
            continue
        damaged += 1
        nxt = data.find(b"\x1f\x8b\x08", at + 1)
        while nxt != -1 and _member_end(data, nxt) is None:
            nxt = data.find(b"\x1f\x8b\x08", nxt + 1)
        at = len(data) if nxt == -1 else nxt
    return bytes(out), damaged


def _member_end(data: bytes, at: int) -> int | None:
    """Where the gzip member starting at `at` ends, or None when it does not decompress to its end."""
    import zlib

    d = zlib.decompressobj(31)
    try:
        d.decompress(data[at:at + 64 * 1024 * 1024])
    except zlib.error:
        return None
    return len(data) - len(d.unused_data) if d.eof else None

