"""Masking people's names and places: precision and recall on the hand-labelled set of real shared passages
(llm_assets_support/pii_names.py), the regular expressions alone against the named-entity model, and what the model
costs per document (one core, CPU-seconds).

    .venv/bin/python -m benchmarks.pii_names [--no-write]   # make bench-pii-names

The tables go below the notes of benchmarks/results/pii-names.md, the NER masks' recall to a row of BENCHMARKS.md's
summary table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import time
from pathlib import Path

import polars as pl

from benchmarks.summary import ROOT, Row, publish
from llm_assets.core.filters.pii import PIIMasker
from llm_assets.core.ner import spacy_pipeline
from llm_assets_support.pii_names import name_masks, score
from llm_assets_support.shared_data import SHARED_DATA

DOCS = 2_000


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md",
                        help="the summary whose row is replaced (default BENCHMARKS.md); the tables go to "
                             "benchmarks/results/pii-names.md beside it, below the notes there")
    parser.add_argument("--no-write", action="store_true", help="print the tables only")
    args = parser.parse_args()
    lines = ["| masks | person P | person R | location P | location R | name characters left readable |",
             "|---|--:|--:|--:|--:|--:|"]
    for label, block in (("regular expressions only (default)", PIIMasker()),
                         ("+ NER (person, location)", PIIMasker(person=True, location=True))):
        s = score(name_masks(block))
        lines.append(f"| {label} | {s.person.precision:.3f} | {s.person.recall:.3f} | {s.location.precision:.3f} | "
                     f"{s.location.recall:.3f} | {s.any.unmasked_chars:,} of {s.any.gold_chars:,} |")
    texts = list(dict.fromkeys(json.loads(line)["text"] for line in gzip.open(
        SHARED_DATA / "bench" / "seed003_input.jsonl.gz", "rt")))[:DOCS]
    df = pl.DataFrame({"text": texts, "language": ["en"] * len(texts)})
    start = time.perf_counter()
    spacy_pipeline(PIIMasker().ner_model)
    load = time.perf_counter() - start
    lines += ["", f"throughput over {len(texts):,} seed-paper manuals ({df['text'].str.len_chars().mean():,.0f} "
              f"characters on average), one core; model load {load:.1f} s:", "",
              "| masks | docs per CPU-second | MB of text per CPU-second | peak RSS MiB |", "|---|--:|--:|--:|"]
    rates = []
    for label, block in (("regular expressions only", PIIMasker()),
                         ("+ NER (person, location)", PIIMasker(person=True, location=True))):
        before = cpu()
        block.apply(df)
        spent = cpu() - before
        rates.append(len(texts) / spent)
        lines.append(f"| {label} | {len(texts) / spent:,.0f} | {df['text'].str.len_bytes().sum() / spent / 1e6:.2f} | "
                     f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} |")
    print("\n".join(lines))
    if not args.no_write:
        body = f"## The latest run\n\n`make bench-pii-names`, {time.strftime('%Y-%m-%d', time.gmtime())}:\n\n" + \
            "\n".join(lines)
        publish(args.output, "pii-names", "<!-- pii-names-run:begin -->", "<!-- pii-names-run:end -->", body, [Row(
            "pii-names:ner", "PII names: NER masks, person / location recall (cost vs regular expressions)",
            f"{s.person.recall:.3f} / {s.location.recall:.3f} ({rates[1]:,.0f} vs {rates[0]:,.0f} docs per CPU-s)",
            "make bench-pii-names", "pii-names.md")])


if __name__ == "__main__":
    main()
