"""Masking people's names and places: precision and recall on the hand-labelled set of real shared passages
(llm_assets_tests/pii_names.py), the regular expressions alone against the named-entity model, and what the model
costs per document (one core, CPU-seconds).

    make bench-pii-names
"""

from __future__ import annotations

import gzip
import json
import resource
import time

import polars as pl

from llm_assets.core.filters.pii import PIIMasker
from llm_assets.core.ner import spacy_pipeline
from llm_assets_tests.conftest import SHARED_DATA
from llm_assets_tests.pii_names import score
from llm_assets_tests.test_pii import name_masks

DOCS = 2_000


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    print("| masks | person P | person R | location P | location R | name characters left readable |")
    print("|---|--:|--:|--:|--:|--:|")
    for label, block in (("regular expressions only (default)", PIIMasker()),
                         ("+ NER (person, location)", PIIMasker(person=True, location=True))):
        s = score(name_masks(block))
        print(f"| {label} | {s.person.precision:.3f} | {s.person.recall:.3f} | {s.location.precision:.3f} | "
              f"{s.location.recall:.3f} | {s.any.unmasked_chars:,} of {s.any.gold_chars:,} |")
    texts = list(dict.fromkeys(json.loads(line)["text"] for line in gzip.open(
        SHARED_DATA / "bench" / "seed003_input.jsonl.gz", "rt")))[:DOCS]
    df = pl.DataFrame({"text": texts, "language": ["en"] * len(texts)})
    start = time.perf_counter()
    spacy_pipeline(PIIMasker().ner_model)
    load = time.perf_counter() - start
    print(f"\nthroughput over {len(texts):,} seed-paper manuals ({df['text'].str.len_chars().mean():,.0f} characters "
          f"on average), one core; model load {load:.1f} s:\n")
    print("| masks | docs per CPU-second | MB of text per CPU-second | peak RSS MiB |")
    print("|---|--:|--:|--:|")
    for label, block in (("regular expressions only", PIIMasker()),
                         ("+ NER (person, location)", PIIMasker(person=True, location=True))):
        before = cpu()
        block.apply(df)
        spent = cpu() - before
        print(f"| {label} | {len(texts) / spent:,.0f} | {df['text'].str.len_bytes().sum() / spent / 1e6:.2f} | "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} |")


if __name__ == "__main__":
    main()
