"""`make bench-dedup`: the deduplication core (MinHash signatures, LSH clustering) per core.

    .venv/bin/python -m benchmarks.dedup [--output BENCHMARKS.md] [--json FILE]

The section between `<!-- dedup:begin -->` and `<!-- dedup:end -->` of benchmarks/results/dedup.md (beside the
output) is replaced, the rest of that file left alone, and so are the rows of the summary table in the output
(BENCHMARKS.md). Each measurement runs in its own fresh subprocess (`--child NAME`, internal) whose environment
sets POLARS_MAX_THREADS, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS to 1 before Polars or NumPy are imported: one
core, and a peak RSS (`ru_maxrss`) of its own. Input is read at run time from ../shared/data, never copied into the
repository: a first child extracts the shared documents (`shared_documents()`,
trafilatura, as the tests do) into a temporary folder, which the others read.

1. Signature speed: the shared documents with text, repeated so that a pass takes about 2 s or more. Ours:
   `MinHasher().signatures(texts)` in batches of 2,048 texts (what the signatures stage does). datasketch: per
   document `shingle_set(text)` (the same word 5-gram shingles) then `MinHash(num_perm=112).update_batch(...)`.
   Shingling is inside the timed block for both. Median of 3 passes, each library in its own process.
2. Recall and precision: a deterministic corpus (fixed seed) of bases, the shared documents with at least 100 words
   and WikiText-2 paragraphs joined into ~300-word documents, and one planted variant for most bases: word edits,
   sentence edits, reordered sentences or paragraphs, added boilerplate (a fixed list of headers and footers), or
   boilerplate plus word edits, at a spread of strengths. Beside them, bases of ~300 words from WikiText-2's test
   split, each with a variant of words replaced one at a time until its Jaccard falls to a target drawn in one of
   the J bands 0.5-0.6 ... 0.95-1.0 (in turn), so that every band, the ones around the threshold above all, holds
   about a hundred pairs. True Jaccard is the exact set Jaccard of `shingle_set`. `signature_frame` +
   `find_clusters` with `DedupSettings()` run over bases and variants in one crawl; two documents are predicted
   duplicates when they end in the same cluster. Recall is over planted pairs, per J band, beside the LSH alone
   (`jaccard_threshold: 0`) and the confirmation at the estimate itself (`jaccard_confidence: 0.5`, the rule before
   it); precision over predicted pairs (every removed document against the kept document of its cluster), with the
   true Jaccard of each, planted or not: the shared corpus has real near-duplicates of its own.

The clustering's memory is measured as a crawl runs it, in work units, by `make bench-dump-scale`. The
single-process `find_clusters` (tests, small crawls) is no longer measured at a million signatures (it was 2,579 MiB
there; nothing runs it at that size).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path

from benchmarks.report import MIB, n, table
from benchmarks.stages import Meter, maxrss_bytes
from benchmarks.summary import Row, publish, verdict

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- dedup:begin -->", "<!-- dedup:end -->"
THREADS_ENV = {"POLARS_MAX_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
CHILD_TIMEOUT = 3600
SHARED_FILE = "shared.parquet"
CRAWL, SHARD = "BENCH", "0000"

MIN_PASS_SECONDS = 2.0
PASSES = 3
SEED = 20240522
MIN_BASE_WORDS = 100
WIKI_DOC_WORDS = 300
VARIANT_SHARE = 0.8  # of the bases get a planted variant
# J bands of the targeted variants, and of the recall table (with 0.3-0.5 and below for the edited ones)
BANDS = [(0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.85), (0.85, 0.9), (0.9, 0.95), (0.95, 1.0)]
NEAR_THRESHOLD = (0.8, 0.85)  # where a confirmation noisier than the LSH loses pairs


def log(msg: str) -> None:
    print(f"[bench-dedup {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# 1. signature speed -------------------------------------------------------------------------------------------


def shared_texts(workdir: Path) -> list[str]:
    import polars as pl

    return [t for t in pl.read_parquet(workdir / SHARED_FILE)["text"].to_list() if t]


def timed_passes(prepare, work) -> dict:
    """A warm-up pass over the documents once sizes the repeat count for a pass of at least MIN_PASS_SECONDS;
    then PASSES timed passes of `work(prepare(repeat))` (`prepare` is not timed)."""
    with Meter() as warm:
        work(prepare(1))
    repeat = max(1, math.ceil(1.5 * MIN_PASS_SECONDS / max(warm.wall, 1e-6)))  # the warm-up pass is the slowest
    data = prepare(repeat)
    passes = []
    for _ in range(PASSES):
        with Meter() as m:
            work(data)
        passes.append(m.dict())
    return {"repeat": repeat, "warmup_seconds": warm.wall, "passes": passes,
            "seconds": statistics.median(p["seconds"] for p in passes),
            "cpu_seconds": statistics.median(p["cpu_seconds"] for p in passes),
            "other_cpus": sum(p["other_cpu_seconds"] for p in passes) / sum(p["seconds"] for p in passes)}


def child_signatures_ours(workdir: Path, args) -> dict:
    import polars as pl

    from llm_assets.core.dedup import BATCH_ROWS
    from llm_assets.core.minhash import MinHasher, words

    texts = pl.Series(shared_texts(workdir), dtype=pl.String)

    def prepare(repeat: int) -> list[pl.Series]:
        series = pl.concat([texts] * repeat)
        return [series.slice(o, BATCH_ROWS) for o in range(0, len(series), BATCH_ROWS)]

    def work(batches: list[pl.Series]) -> None:
        for batch in batches:
            MinHasher().signatures(batch)

    result = timed_passes(prepare, work)
    n_words = words(texts).list.len()
    return {**result, "documents": len(texts), "bytes": int(texts.str.len_bytes().sum()),
            "mean_words": float(n_words.mean()), "median_words": float(n_words.median()),
            "mean_shingles": float((n_words - 4).clip(lower_bound=1).mean()),
            "batch_rows": BATCH_ROWS, "polars_threads": pl.thread_pool_size(), "peak_rss": maxrss_bytes()}


def child_signatures_datasketch(workdir: Path, args) -> dict:
    from importlib.metadata import version

    from datasketch import MinHash

    from llm_assets.core.minhash import shingle_set

    texts = shared_texts(workdir)

    def work(docs: list[str]) -> None:
        for text in docs:
            m = MinHash(num_perm=112)
            m.update_batch([s.encode() for s in shingle_set(text)])

    result = timed_passes(lambda repeat: texts * repeat, work)
    return {**result, "documents": len(texts), "bytes": sum(len(t.encode()) for t in texts),
            "version": version("datasketch"), "scheme": MinHash(num_perm=112).scheme, "peak_rss": maxrss_bytes()}


# 2. recall and precision ---------------------------------------------------------------------------------------

BOILERPLATE = [
    "Home | About us | Products | Services | Blog | Careers | Contact | Sign in | Register | Search this site",
    "We use cookies to improve your experience on our website, to personalise content and ads and to analyse our "
    "traffic. By continuing to browse the site you agree to our use of cookies. Accept all cookies or manage your "
    "preferences.",
    "Copyright © 2024 Example Media Group. All rights reserved. Reproduction in whole or in part without written "
    "permission is prohibited.",
    "Subscribe to our newsletter and get the latest news, exclusive offers and updates delivered straight to your "
    "inbox every week. Enter your email address below.",
    "Share this article on Facebook, Twitter, LinkedIn, Pinterest or send it by email to a friend.",
    "Privacy policy | Terms of use | Accessibility statement | Sitemap | Advertise with us | Help centre",
    "Skip to main content. Menu. Toggle navigation. You are here: Home > News > World > Article",
    "Related articles: Ten things you did not know about the history of the city; Why the weather keeps changing; "
    "The best places to visit this summer; How to save money on your energy bills",
    "This page was last edited on 12 March 2024, at 10:41. Text is available under the Creative Commons "
    "Attribution-ShareAlike License; additional terms may apply.",
    "Leave a comment. Your email address will not be published. Required fields are marked. Name, Email, Website. "
    "Post comment.",
    "Download our free app for iPhone and Android to read the latest stories offline, get breaking news alerts and "
    "save articles for later.",
    "Advertisement. Continue reading below. Sponsored content from our partners.",
]
KINDS = ["word edits", "sentence edits", "reordered", "boilerplate", "boilerplate + word edits"]
TO_BAND = "words replaced to a drawn J band"


def split_sentences(text: str) -> list[str]:
    return [s for p in text.split("\n") for s in re.split(r"(?<=[.!?])\s+", p.strip()) if s]


def edit_words(text: str, fraction: float, rng: random.Random, vocab: list[str]) -> str:
    """Each word, with probability `fraction`, is replaced, followed by an inserted word, or deleted."""
    out = []
    for w in text.split():
        if rng.random() >= fraction:
            out.append(w)
            continue
        op = rng.randrange(3)
        if op == 0:
            out.append(rng.choice(vocab))
        elif op == 1:
            out += [w, rng.choice(vocab)]
    return " ".join(out)


def edit_sentences(text: str, fraction: float, rng: random.Random, filler: list[str]) -> str:
    """Each sentence, with probability `fraction`, is replaced, followed by an inserted sentence, or deleted."""
    out = []
    for s in split_sentences(text):
        if rng.random() >= fraction:
            out.append(s)
            continue
        op = rng.randrange(3)
        if op == 0:
            out.append(rng.choice(filler))
        elif op == 1:
            out += [s, rng.choice(filler)]
    return " ".join(out)


def reorder(text: str, fraction: float, rng: random.Random, unit: str) -> str:
    """Swap `fraction` × count random pairs of paragraphs (lines) or sentences."""
    units = [p for p in text.split("\n") if p.strip()] if unit == "paragraphs" else split_sentences(text)
    for _ in range(max(1, round(fraction * len(units)))):
        i, j = rng.randrange(len(units)), rng.randrange(len(units))
        units[i], units[j] = units[j], units[i]
    return ("\n" if unit == "paragraphs" else " ").join(units)


def add_boilerplate(text: str, k: int, rng: random.Random) -> str:
    """k pieces of the fixed boilerplate list, each as a header or a footer."""
    head, tail = [], []
    for piece in rng.sample(BOILERPLATE, k):
        (head if rng.random() < 0.5 else tail).append(piece)
    return "\n".join(head + [text] + tail)


def plant(text: str, kind: str, rng: random.Random, vocab: list[str], filler: list[str]) -> tuple[str, str]:
    """-> (variant, its edit in words)."""
    if kind == "word edits":
        f = rng.uniform(0.0, 0.12)
        return edit_words(text, f, rng, vocab), f"{f:.1%} of words"
    if kind == "sentence edits":
        f = rng.uniform(0.02, 0.5)
        return edit_sentences(text, f, rng, filler), f"{f:.0%} of sentences"
    if kind == "reordered":
        f, unit = rng.uniform(0.05, 1.0), rng.choice(["sentences", "paragraphs"])
        return reorder(text, f, rng, unit), f"{f:.0%} of {unit} swapped"
    if kind == "boilerplate":
        k = rng.randint(1, 8)
        return add_boilerplate(text, k, rng), f"{k} boilerplate pieces"
    k, f = rng.randint(1, 3), rng.uniform(0.0, 0.05)
    return edit_words(add_boilerplate(text, k, rng), f, rng, vocab), f"{k} boilerplate pieces, {f:.1%} of words"


def documents_of(paragraphs: list[str], words: int) -> list[str]:
    """Consecutive paragraphs joined into documents of about `words` words."""
    docs, current = [], []
    for p in paragraphs:
        current.append(p)
        if sum(len(x.split()) for x in current) >= words:
            docs.append("\n".join(current))
            current = []
    return docs


def to_jaccard(text: str, target: float, rng: random.Random, vocab: list[str]) -> str:
    """`text` with words replaced one at a time until the Jaccard of its shingles with `text`'s is at most `target`
    (one replacement past it at most)."""
    from llm_assets.core.minhash import shingle_set

    lines = [line.split() for line in text.split("\n")]
    where = [(i, j) for i, line in enumerate(lines) for j in range(len(line))]
    original = shingle_set(text)
    while True:
        i, j = rng.choice(where)
        lines[i][j] = rng.choice(vocab)
        variant = "\n".join(" ".join(line) for line in lines)
        shingles = shingle_set(variant)
        if len(original & shingles) / len(original | shingles) <= target:
            return variant


def band_pairs(paragraphs: list[str], vocab: list[str]) -> tuple[list[dict], list[dict]]:
    """Bases from `paragraphs` (WikiText-2's test split), each with a variant drawn to a Jaccard in one of `BANDS`,
    in turn: (documents, planted pairs)."""
    rng = random.Random(SEED + 1)
    docs, planted = [], []
    for i, text in enumerate(documents_of(paragraphs, WIKI_DOC_WORDS)):
        lo, hi = BANDS[i % len(BANDS)]
        target = rng.uniform(lo, hi)
        url = f"https://wikitext.example/test/{i:04d}"
        docs += [{"doc_id": f"band-{i:04d}", "source_key": "raw/BENCH/bands", "url": url, "text": text,
                  "fetch_time": "2024-01-01T00:00:00Z"},
                 {"doc_id": f"bvar-{i:04d}", "source_key": "raw/BENCH/band-variants", "url": f"{url}?variant",
                  "text": to_jaccard(text, target, rng, vocab), "fetch_time": "2024-02-01T00:00:00Z"}]
        planted.append({"a": f"band-{i:04d}", "b": f"bvar-{i:04d}", "kind": TO_BAND, "edit": f"J ≤ {target:.3f}"})
    return docs, planted


def build_corpus(shared: list[dict], paragraphs: list[str],
                 test_paragraphs: list[str]) -> tuple[list[dict], list[dict], dict]:
    """-> (documents {doc_id, source_key, url, text, fetch_time}, planted pairs {a, b, kind, edit}, counts).
    The last tenth of the WikiText paragraphs is not used for bases: it is the source of inserted words and
    sentences."""
    rng = random.Random(SEED)
    cut = len(paragraphs) * 9 // 10
    filler = [s for p in paragraphs[cut:] for s in split_sentences(p)]
    vocab = [w for p in paragraphs[cut:] for w in p.split()]
    bases = [(d["url"], d["text"]) for d in shared if len(re.findall(r"\w+", d["text"])) >= MIN_BASE_WORDS]
    n_shared = len(bases)
    bases += [(f"https://wikitext.example/doc/{i:04d}", text)
              for i, text in enumerate(documents_of(paragraphs[:cut], WIKI_DOC_WORDS))]
    docs, planted = [], []
    for i, (url, text) in enumerate(bases):
        docs.append({"doc_id": f"base-{i:04d}", "source_key": "raw/BENCH/bases", "url": url, "text": text,
                     "fetch_time": "2024-01-01T00:00:00Z"})
        if rng.random() < VARIANT_SHARE:
            kind = rng.choice(KINDS)
            variant, edit = plant(text, kind, rng, vocab, filler)
            docs.append({"doc_id": f"var-{i:04d}", "source_key": "raw/BENCH/variants", "url": f"{url}?variant",
                         "text": variant, "fetch_time": "2024-02-01T00:00:00Z"})
            planted.append({"a": f"base-{i:04d}", "b": f"var-{i:04d}", "kind": kind, "edit": edit})
    counts = {"shared_bases": n_shared, "wiki_bases": len(bases) - n_shared, "variants": len(planted)}
    band_docs, band_planted = band_pairs(test_paragraphs, vocab)
    return docs + band_docs, planted + band_planted, {**counts, "band_pairs": len(band_planted)}


def child_quality(workdir: Path, args) -> dict:
    import numpy as np
    import polars as pl

    from llm_assets.core.dedup import BATCH_ROWS, CLUSTER_COLUMNS, find_clusters, signature_frame
    from llm_assets.core.minhash import jaccard_estimate, shingle_set
    from llm_assets.settings import DedupSettings
    from llm_assets_support.quality_labels import wikitext_paragraphs

    shared = pl.read_parquet(workdir / SHARED_FILE).filter(pl.col("text") != "").to_dicts()
    docs, planted, counts = build_corpus(shared, wikitext_paragraphs(40), wikitext_paragraphs(40, split="test"))
    df = pl.DataFrame(docs)
    settings = DedupSettings()
    with Meter() as m:
        sigs = pl.concat([signature_frame(df.slice(o, BATCH_ROWS), settings)
                          for o in range(0, df.height, BATCH_ROWS)])
        docs_frame = sigs.select(CLUSTER_COLUMNS).with_columns(crawl=pl.lit(CRAWL), shard=pl.lit(SHARD))
        clusters = find_clusters(docs_frame, settings, CRAWL)
    removed = clusters.removed.select("doc_id", "duplicate_of", "reason").rows()

    def kept_of(removed_rows) -> dict[str, str]:
        return {d: k for d, k, *_ in removed_rows}

    kept = kept_of(removed)
    # the same signatures clustered by the LSH alone, and by the confirmation at the estimate itself
    others = {name: kept_of(find_clusters(docs_frame, settings.model_copy(update=change), CRAWL)
                            .removed.select("doc_id", "duplicate_of").rows())
              for name, change in {"lsh": {"jaccard_threshold": 0.0}, "at_estimate": {"jaccard_confidence": 0.5}}
              .items()}
    members: dict[str, list[str]] = {}
    for d in df["doc_id"]:
        members.setdefault(kept.get(d, d), []).append(d)

    shingles = {d["doc_id"]: shingle_set(d["text"], settings.ngram) for d in docs}
    signature = dict(zip(sigs["doc_id"], sigs["signature"].to_numpy(), strict=True))

    def jaccard(a: str, b: str) -> float:
        sa, sb = shingles[a], shingles[b]
        return len(sa & sb) / len(sa | sb) if sa or sb else 1.0

    def same(of: dict[str, str], a: str, b: str) -> bool:
        return of.get(a, a) == of.get(b, b)

    pairs = [{**p, "jaccard": jaccard(p["a"], p["b"]),
              "estimate": jaccard_estimate(signature[p["a"]], signature[p["b"]]),
              "found": same(kept, p["a"], p["b"]), **{name: same(of, p["a"], p["b"]) for name, of in others.items()}}
             for p in planted]
    planted_set = {(p["a"], p["b"]) for p in planted} | {(p["b"], p["a"]) for p in planted}
    predicted = [{"a": d, "b": k, "reason": r, "jaccard": jaccard(d, k), "planted": (d, k) in planted_set}
                 for d, k, r in removed]
    within = [{"a": a, "b": b, "jaccard": jaccard(a, b), "planted": (a, b) in planted_set}
              for group in members.values() if len(group) > 1 for a, b in combinations(sorted(group), 2)]
    return {**counts, "documents": df.height, "shingles": int(sum(len(s) for s in shingles.values())),
            "seconds": m.wall, "bands": settings.bands, "rows": settings.rows, "removed": len(removed),
            "threshold": settings.jaccard_threshold, "confidence": settings.jaccard_confidence,
            "clusters": sum(len(g) > 1 for g in members.values()),
            "largest_cluster": max(len(g) for g in members.values()),
            "pairs": pairs, "predicted": predicted, "within": within,
            "estimate_mae": float(np.mean([abs(p["estimate"] - p["jaccard"]) for p in pairs])),
            "peak_rss": maxrss_bytes()}


def child_prepare(workdir: Path, args) -> dict:
    from llm_assets_support.corpus import shared_documents

    t0 = time.perf_counter()
    df = shared_documents()
    df.write_parquet(workdir / SHARED_FILE)
    return {"documents": df.height, "seconds": time.perf_counter() - t0}


CHILDREN = {"prepare": child_prepare, "signatures-ours": child_signatures_ours,
            "signatures-datasketch": child_signatures_datasketch, "quality": child_quality}


def run_child(name: str, workdir: Path) -> dict:
    """One measurement in a fresh interpreter, single-threaded libraries."""
    result_path = workdir / f"result-{name}.json"
    cmd = [sys.executable, "-m", "benchmarks.dedup", "--child", name, "--workdir", str(workdir),
           "--result", str(result_path)]
    log(f"{name}: running in a fresh subprocess")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **THREADS_ENV}, timeout=CHILD_TIMEOUT)
    if proc.returncode != 0 or not result_path.exists():
        raise RuntimeError(f"{name} failed with exit code {proc.returncode}")
    log(f"{name}: done in {time.perf_counter() - t0:.1f}s")
    return json.loads(result_path.read_text())


# report --------------------------------------------------------------------------------------------------------


def in_bucket(j: float, lo: float, hi: float) -> bool:
    return lo <= j < hi or (hi == 1.0 and j == 1.0)


def s_curve(j: float, bands: int, rows: int) -> float:
    """Probability that two documents of Jaccard j share at least one LSH band."""
    return 1 - (1 - j ** rows) ** bands


def share(k: int, total: int) -> str:
    return f"{k / total:.3f}" if total else "–"


def docs_per_second(r: dict, clock: str = "seconds") -> float:
    return r["documents"] * r["repeat"] / r[clock]


def recall(pairs: list[dict]) -> str:
    return share(sum(p["found"] for p in pairs), len(pairs))


def precision(pairs: list[dict], threshold: float) -> str:
    return share(sum(p["jaccard"] >= threshold for p in pairs), len(pairs))


def true_duplicates(pairs: list[dict]) -> str:
    """Share of predicted pairs that are duplicates: a planted pair (one is an edited copy of the other), or a pair
    of true Jaccard ≥ 0.7 (a near-duplicate whatever its origin)."""
    return share(sum(p["planted"] or p["jaccard"] >= 0.7 for p in pairs), len(pairs))


def high_pairs(q: dict) -> list[dict]:
    return [p for p in q["pairs"] if p["jaccard"] >= 0.8]


def near_pairs(q: dict) -> list[dict]:
    return [p for p in q["pairs"] if in_bucket(p["jaccard"], *NEAR_THRESHOLD)]


def found_of(pairs: list[dict]) -> str:
    return f"{recall(pairs)} ({sum(p['found'] for p in pairs)}/{len(pairs)})"


def summary_section(r: dict) -> str:
    ours, ds, q = r["signatures-ours"], r["signatures-datasketch"], r["quality"]
    rows = [
        ["signatures, ours vs datasketch, docs/s/core",
         f"{docs_per_second(ours):,.0f} vs {docs_per_second(ds):,.0f}: "
         f"**{docs_per_second(ours) / docs_per_second(ds):.1f}×** (per CPU-second "
         f"{docs_per_second(ours, 'cpu_seconds') / docs_per_second(ds, 'cpu_seconds'):.1f}×)", "≥ 10×"],
        ["recall, planted pairs of true Jaccard ≥ 0.8 found", f"**{found_of(high_pairs(q))}**", "≥ 0.99"],
        ["recall, planted pairs of true Jaccard 0.80–0.85", f"**{found_of(near_pairs(q))}**", "≥ 0.95"],
        ["precision, predicted pairs that are duplicates (a planted copy, or true Jaccard ≥ 0.7)",
         f"**{true_duplicates(q['predicted'])}** of {len(q['predicted'])} (by true Jaccard alone: "
         f"{precision(q['predicted'], 0.7)} ≥ 0.7, {precision(q['predicted'], 0.5)} ≥ 0.5)", "≥ 0.99"],
    ]
    return table(["measurement", "result", "target"], rows)


def signatures_section(ours: dict, ds: dict) -> str:
    def row(name: str, r: dict) -> list[str]:
        return [name, n(r["documents"] * r["repeat"]), f"{r['seconds']:.2f}", n(docs_per_second(r)),
                n(docs_per_second(r, "cpu_seconds")), f"{r['bytes'] * r['repeat'] / r['seconds'] / 1e6:.2f}",
                f"{r['other_cpus']:.2f}", n(r["peak_rss"] / MIB)]

    speed = docs_per_second(ours) / docs_per_second(ds)
    per_cpu = docs_per_second(ours, "cpu_seconds") / docs_per_second(ds, "cpu_seconds")
    rows = [row(f"ours: `MinHasher().signatures(texts)`, batches of {ours['batch_rows']:,}", ours),
            row(f"datasketch {ds['version']}: `shingle_set` + `MinHash(num_perm=112).update_batch` per doc", ds)]
    return "\n".join([
        "### Signatures: ours against datasketch, same documents and shingles", "",
        table(["implementation", "docs per pass", "seconds (median pass)", "docs/s/core", "docs per CPU-s", "MB/s",
               "others (CPUs)", "peak RSS MiB"], rows), "",
        f"- **Ours is {speed:.1f}× datasketch** in docs/s/core (target ≥ 10×); {per_cpu:.1f}× in docs per "
        "CPU-second, the figure to read when other processes keep the CPUs busy.",
        f"- Documents: the {ours['documents']} shared documents with text, {ours['bytes'] / 1e6:.2f} MB; mean "
        f"{ours['mean_words']:,.0f} words per document (median {ours['median_words']:,.0f}; words as the signature "
        f"sees them, split by whitespace, punctuation and symbols), mean {ours['mean_shingles']:,.0f} shingles. A pass "
        f"repeats them {ours['repeat']}× (ours) and {ds['repeat']}× (datasketch), sized from a warm-up pass to last "
        f"about {MIN_PASS_SECONDS:g} s or more; median of {PASSES} passes "
        f"({sum(p['seconds'] for p in ours['passes']):.1f} and {sum(p['seconds'] for p in ds['passes']):.1f} s timed "
        f"in all). Polars thread pool: {ours['polars_threads']}.",
        f"- datasketch's default `scheme` is `{ds['scheme']}` over the SHA-1 of each shingle; its time per document "
        "includes building the `MinHash` object (its 112 permutations), as a loop over documents does.",
    ])


def recall_table(q: dict) -> str:
    predicted = q["predicted"]

    def row(label: str, within) -> list[str]:
        pairs = [p for p in q["pairs"] if within(p["jaccard"])]
        expected = statistics.fmean(s_curve(p["jaccard"], q["bands"], q["rows"]) for p in pairs) if pairs else None
        acted = [p for p in predicted if within(p["jaccard"])]
        return [label, n(len(pairs)), n(sum(p["found"] for p in pairs)), recall(pairs),
                *(share(sum(p[rule] for p in pairs), len(pairs)) for rule in ("lsh", "at_estimate")),
                "–" if expected is None else f"{expected:.3f}",
                f"{n(len(acted))} ({n(sum(not p['planted'] for p in acted))})"]

    rows = [row("below 0.3", lambda j: j < 0.3), row("0.3–0.5", lambda j: 0.3 <= j < 0.5)]
    rows += [row(f"{lo:g}–{hi:g}", lambda j, lo=lo, hi=hi: in_bucket(j, lo, hi)) for lo, hi in BANDS]
    rows.append(row("**≥ 0.8**", lambda j: j >= 0.8))
    return table(["true Jaccard", "planted pairs", "found", "recall", "LSH alone", "rejected below the estimate",
                  "expected (LSH S-curve)", "predicted pairs (not planted)"], rows)


def kinds_table(q: dict) -> str:
    rows = []
    for kind in [*KINDS, TO_BAND]:
        pairs = [p for p in q["pairs"] if p["kind"] == kind]
        js = sorted(p["jaccard"] for p in pairs) or [0.0]
        high = [p for p in pairs if p["jaccard"] >= 0.8]
        rows.append([kind, n(len(pairs)), f"{js[0]:.2f} / {statistics.median(js):.2f} / {js[-1]:.2f}",
                     f"{sum(p['found'] for p in high)}/{len(high)}", f"{sum(p['found'] for p in pairs)}/{len(pairs)}"])
    return table(["edit", "pairs", "true Jaccard min / median / max", "found, J ≥ 0.8", "found, all"], rows)


def precision_table(q: dict) -> str:
    def row(name: str, pairs: list[dict]) -> list[str]:
        return [name, n(len(pairs)), n(sum(p["planted"] for p in pairs)), n(sum(p["jaccard"] >= 0.7 for p in pairs)),
                precision(pairs, 0.7), n(sum(p["jaccard"] >= 0.5 for p in pairs)), precision(pairs, 0.5),
                true_duplicates(pairs)]

    return table(["predicted pairs", "pairs", "of them planted", "J ≥ 0.7", "precision @0.7", "J ≥ 0.5",
                  "precision @0.5", "duplicates (planted or J ≥ 0.7)"],
                 [row("removed document vs the kept one", q["predicted"]),
                  row("every pair within a cluster", q["within"])])


def quality_section(q: dict) -> str:
    high, pred = high_pairs(q), q["predicted"]
    low = sorted((p for p in pred if p["jaccard"] < 0.7), key=lambda p: p["jaccard"])
    low_planted = sum(p["planted"] for p in low)
    lowest = ", ".join(f"{p['jaccard']:.2f}" for p in low[:8])
    reasons = {r: sum(p["reason"] == r for p in pred) for r in sorted({p["reason"] for p in pred})}
    curve = ", ".join(f"{s_curve(j, q['bands'], q['rows']):.3f} at {j}" for j in (0.5, 0.6, 0.7, 0.8))
    return "\n".join([
        "### Recall and precision on planted near-duplicates", "",
        f"{q['documents']:,} documents: {q['shared_bases'] + q['wiki_bases']:,} bases ({q['shared_bases']} shared "
        f"documents with ≥ {MIN_BASE_WORDS} words, {q['wiki_bases']} WikiText-2 documents of ~{WIKI_DOC_WORDS} "
        f"words from consecutive paragraphs) and {q['variants']:,} planted variants, one each for a random "
        f"{VARIANT_SHARE:.0%} of the bases (seed {SEED}), edit kind and strength drawn at random: word edits (each "
        "word replaced, followed by an inserted word, or deleted, with probability 0–12%), sentence edits (the same "
        "per sentence, 2–50%, new sentences from held-out WikiText paragraphs), reordered sentences or paragraphs "
        "(5–100% of them swapped), 1–8 boilerplate pieces (navigation, cookie banner, copyright line, ... from a "
        f"fixed list of {len(BOILERPLATE)}) as header or footer, 1–3 pieces plus 0–5% word edits. And "
        f"{q['band_pairs']:,} WikiText-2 test-split documents of ~{WIKI_DOC_WORDS} words, each with a variant whose "
        "words were replaced one at a time until its Jaccard fell to a target drawn in one J band after another "
        f"({', '.join(f'{lo:g}–{hi:g}' for lo, hi in BANDS)}). True Jaccard: the exact Jaccard of the "
        "`shingle_set`s. `signature_frame` + `find_clusters` with `DedupSettings()` "
        f"({q['bands']} bands × {q['rows']} rows, exact + near; a candidate pair rejected only when its 4-bit "
        f"sketch puts it below {q['threshold']:g} with confidence {q['confidence']:g}) over all documents as one "
        "crawl took "
        f"{q['seconds']:.2f} s: {q['removed']:,} removed, {q['clusters']:,} clusters of 2 or more (largest "
        f"{q['largest_cluster']}).", "",
        f"**Recall at true Jaccard ≥ 0.8: {recall(high)}** ({sum(p['found'] for p in high)}/{len(high)} planted "
        f"pairs in the same cluster; target ≥ 0.99), **{found_of(near_pairs(q))} at 0.80–0.85** (target ≥ 0.95). "
        "**Precision: {true_duplicates(pred)}** of the predicted pairs "
        "are duplicates: a planted copy of each other, or of true Jaccard ≥ 0.7 (target ≥ 0.99). By true Jaccard "
        f"alone, {precision(pred, 0.7)} have ≥ 0.7 and {precision(pred, 0.5)} ≥ 0.5: the planted copies edited "
        "below 0.7 are still copies, and LSH finds some of them (the curve below).", "",
        "Recall by true Jaccard of the planted pair (found: base and variant end in the same cluster), beside "
        "the same signatures clustered by the LSH alone (`jaccard_threshold: 0`) and with candidates rejected below "
        "their estimate itself (`jaccard_confidence: 0.5`, the rule before); what the LSH alone should find is the "
        f"mean over the band's pairs of 1 − (1 − J^{q['rows']})^{q['bands']}. The last column: the predicted pairs "
        "(removed document, kept one) of true Jaccard in the band, and of them those not planted.", "",
        recall_table(q), "",
        "By edit kind:", "",
        kinds_table(q), "",
        "Precision. A predicted pair is a removed document and the kept document of its cluster "
        "(`removed.duplicate_of`: the pair the deduplication acts on); precision @t is the share of predicted pairs "
        "whose true Jaccard is at least t. Every predicted pair's Jaccard is computed, planted or not, so real "
        "near-duplicates among the bases count as right. The second row takes every pair of documents within a "
        "predicted cluster instead.", "",
        precision_table(q), "",
        f"- Removed by reason: {', '.join(f'{r} {k}' for r, k in reasons.items())}.",
        f"- Predicted pairs below 0.7: {len(low)}, of which {low_planted} planted and {len(low) - low_planted} "
        "others" + (f"; lowest {lowest}" if low else "") + ". "
        f"LSH with {q['bands']} × {q['rows']} joins a pair with probability {curve}: planted pairs just below 0.7 "
        "are found often, so precision @0.7 depends on how many the corpus plants there.",
        f"- Signature quality: mean |estimated − true Jaccard| over the planted pairs {q['estimate_mae']:.3f} "
        "(estimate: the share of equal signature values).",
    ])


def machine() -> str:
    from importlib.metadata import version

    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 "?")
    versions = ", ".join(f"{p} {version(p)}" for p in ("polars", "numpy", "scipy", "datasketch"))
    return f"{os.cpu_count()} CPUs ({model}), Python {sys.version.split()[0]}; {versions}"


def render(r: dict) -> str:
    run = r["run"]
    return "\n".join([
        "## Deduplication (MinHash LSH)", "",
        "What `make bench-dedup` (exactly: `.venv/bin/python -m benchmarks.dedup`; `--json FILE` keeps the raw "
        "results; `make bench` runs it after `benchmarks.run`) "
        "measures, per core, each measurement in its own fresh process with `POLARS_MAX_THREADS`, `OMP_NUM_THREADS` "
        "and `OPENBLAS_NUM_THREADS` at 1, so its peak RSS (`ru_maxrss`) is its own: (1) MinHash signature speed on "
        "the real shared documents, ours against datasketch over the same shingles; (2) recall and precision of "
        "`signature_frame` + `find_clusters` on planted near-duplicates of real text, against the exact Jaccard of "
        "the shingle sets, per J band (the clustering's memory at size is `make bench-dump-scale`'s). The method in "
        "full: the docstring of `benchmarks/dedup.py`. Input is read from "
        "`../shared/data` at run time.", "",
        f"- Run: {run['date']}; command: `{run['command']}`; {run['seconds']:.0f} s in all; load average "
        f"{run['loadavg'][0]:.2f} at the start, {run['loadavg_end'][0]:.2f} at the end (the machine may be shared: "
        "\"others (CPUs)\" is how many CPUs other processes kept busy during a timed block).",
        f"- Machine: {run['machine']}.", "",
        summary_section(r), "",
        signatures_section(r["signatures-ours"], r["signatures-datasketch"]), "",
        quality_section(r["quality"]),
    ])


def summary(r: dict) -> list[Row]:
    """The rows of BENCHMARKS.md's summary table."""
    ours, ds, q = r["signatures-ours"], r["signatures-datasketch"], r["quality"]
    high, near, cmd = high_pairs(q), near_pairs(q), r["run"]["command"]
    # per CPU-second: the wall-clock rate of one core moves with what else the machine runs
    per_cpu = docs_per_second(ours, "cpu_seconds") / docs_per_second(ds, "cpu_seconds")
    right = sum(p["planted"] or p["jaccard"] >= 0.7 for p in q["predicted"]) / max(1, len(q["predicted"]))

    def row(key: str, measure: str, current: str, target: str, met: bool) -> Row:
        return Row(f"dedup:{key}", measure, current, cmd, "dedup.md", target, verdict(met))

    def found(pairs: list[dict]) -> float:
        return sum(p["found"] for p in pairs) / max(1, len(pairs))

    return [
        row("signatures", "MinHash signatures vs datasketch (documents per CPU-second, one core)",
            f"{per_cpu:.1f}× ({docs_per_second(ours, 'cpu_seconds'):,.0f} vs "
            f"{docs_per_second(ds, 'cpu_seconds'):,.0f})", "≥ 10×", per_cpu >= 10),
        row("recall", "dedup recall, planted pairs of true Jaccard ≥ 0.8", found_of(high), "≥ 0.99",
            found(high) >= 0.99),
        row("recall-near", "dedup recall, planted pairs of true Jaccard 0.80–0.85", found_of(near), "≥ 0.95",
            found(near) >= 0.95),
        row("precision", "dedup precision, predicted pairs that are duplicates",
            f"{true_duplicates(q['predicted'])} of {len(q['predicted'])}", "≥ 0.99", right >= 0.99),
    ]


def write_section(path: Path, r: dict, body: str) -> None:
    publish(path, "dedup", BEGIN, END, body, summary(r))


# main ----------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dedup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md",
                        help="the summary whose rows are replaced (default BENCHMARKS.md); the section goes to "
                             "benchmarks/results/dedup.md beside it")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)  # internal: one measurement
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        args.result.write_text(json.dumps(CHILDREN[args.child](args.workdir, args)))
        return 0

    started, loadavg = time.perf_counter(), os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="llm-assets-bench-dedup-"))
    try:
        results = {name: run_child(name, workdir) for name in CHILDREN}
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        log(f"FAILED: {e}")
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    given = sys.argv[1:] if argv is None else argv
    results["run"] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join([".venv/bin/python -m benchmarks.dedup", *given]),
        "seconds": time.perf_counter() - started, "loadavg": loadavg, "loadavg_end": os.getloadavg(),
        "machine": machine(),
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    section = render(results)
    print(section)
    write_section(args.output, results, section)
    log(f"wrote benchmarks/results/dedup.md and the summary table of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
