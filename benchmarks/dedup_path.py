"""`make bench-dedup-path`: the whole near-duplicate path per document, signatures → clusters → removal, against
datatrove 0.10.1's four MinHash stages as FineWeb runs them, on the same documents, one core, interleaved pairs.

    .venv/bin/python -m benchmarks.dedup_path [--documents 100000] [--pairs 2] [--core 1] [--seed 27]
                                              [--output BENCHMARKS.md] [--json FILE]

The section between `<!-- dedup-path:begin -->` and `<!-- dedup-path:end -->` of benchmarks/results/dedup-path.md
(beside the output) is replaced, and the row of the summary table in the output (BENCHMARKS.md).

Input (`make_input`, deterministic in `--seed`): real text of ../shared/data (`$LLM_ASSETS_SHARED_DATA`): the
16,216 distinct rows of `bench/seed003_input.jsonl.gz`, the paragraphs of WikiText-2's validation and test splits
and every document of the shared WARC, WET and JSON Lines files as the documents stage extracts them; those of at
least 10 words are the originals (the first half of `--documents` of them when there are more). Composites (two
originals joined: each overlaps a real document without being a copy of it) bring the distinct documents to 50% of
`--documents`; the other half are planted copies of a random original or composite: 30% exact, 70% near (one word
in every 20 to 100, drawn per copy, replaced by another word: a 5-gram Jaccard similarity of about 0.6 to 0.9).
`check_input` fails the run when the input written is not that.
Rows are shuffled and numbered in that order (`doc-0000000` ...), all with the same fetch time, so both sides'
documents are in the same order and the keep rule's ties fall to that order. One Parquet file shaped as a
`filtered` part (zstd, a row group per 2,048 rows); each document's planted source and kind are kept apart.

Each step of each side is a fresh process pinned with `taskset` to `--core`, one thread for Polars, Rayon, OpenMP and
BLAS (`benchmarks.harness.run_side`), its files in a folder of its own round; within a round the sides alternate step
by step (the order flipped every other round). A step's figure is the CPU seconds (user + system, with its waited
children) of its timed block: imports, the word tokenizer's load and process start are outside it; its peak RSS is
the process's `ru_maxrss`.

- ours, the stages' own code on local files (the object store's transport left out, as datatrove's is):
  signatures: `benchmarks.minhash_stage.run_ours` (`signatures.signature_table` per batch of the part, written as
  the stage writes a part); clusters: the signatures read back, `clusters.cluster_frames` (the duplicate_clusters
  stage's steps, one unit each, then the keep rule, with `DedupSettings()`: exact + near, Jaccard confirmation at
  0.8, earliest then doc_id), the removed rows written; removal: `dedup.split_removed` per batch of the part (what
  the deduplicated stage does), kept and rejected rows written.
- datatrove (`benchmarks/compare_anchor.py dedup-path`, in `.bench/compare/datatrove-venv`, made by `make
  bench-compare` or here on first use): ParquetReader → MinhashDedupSignature; MinhashDedupBuckets (its 14 tasks one
  after the other in the process); MinhashDedupCluster; ParquetReader → MinhashDedupFilter → ParquetWriter (the
  removed documents to their own ParquetWriter), with FineWeb's MinhashConfig (sha1 64-bit, 14 × 8, 5-grams).

The removed sets are compared by doc_id; where they differ, each document is explained from both sides' clusters
(datatrove's union of the duplicate pairs its buckets stage wrote, rebuilt here; ours from the removed rows) and
from the planted truth: a cluster only one side found (with the planted kind, and the exact Jaccard similarity of
our word 5-gram sets between the document and its nearest planted relative), or the same cluster with another
document kept (datatrove keeps its union-find root, ours the earliest document).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.report import MIB, n, table
from benchmarks.summary import Row, publish, verdict

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / ".bench" / "dedup-path"
BEGIN, END = "<!-- dedup-path:begin -->", "<!-- dedup-path:end -->"
CRAWL, SHARD = "BENCH", "0000"
STEPS = ("signatures", "clusters", "removal")  # ours
DT_STEPS = ("signatures", "buckets", "clusters", "removal")  # datatrove's four stages
PHASES = {"signatures": ("signatures",), "clusters": ("buckets", "clusters"), "removal": ("removal",)}
MIN_WORDS = 10
EXACT_SHARE, DISTINCT_SHARE = 0.3, 0.5
REPLACEMENTS = ("indeed", "perhaps", "quickly", "also", "moreover", "still", "often", "rarely")


def log(msg: str) -> None:
    print(f"[bench-dedup-path {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# The input -------------------------------------------------------------------------------------------------------


def originals(data: Path) -> list[str]:
    """Real texts of the shared data, distinct, in a fixed order."""
    import polars as pl

    from llm_assets_support.corpus import shared_documents

    texts = pl.read_ndjson(data / "bench" / "seed003_input.jsonl.gz")["text"].to_list()
    for split in ("valid", "test"):
        path = data / "text" / f"pytorch-examples__wikitext-2-v1.{split}.txt"
        texts += [line.strip() for line in path.read_text().splitlines()
                  if line.strip() and not line.strip().startswith("=")]
    texts += shared_documents(data)["text"].to_list()
    return [t for t in dict.fromkeys(texts) if len(t.split()) >= MIN_WORDS]


def near_copy(text: str, rng: random.Random) -> str:
    """One word in every `every` (20 to 100: the copy's 5-gram Jaccard similarity about (every - 5) / (every + 5),
    0.6 to 0.9, around FineWeb's 0.8) replaced, from a random offset."""
    words, every = text.split(" "), rng.randint(20, 100)
    for i in range(rng.randrange(every), len(words), every):
        words[i] = rng.choice(REPLACEMENTS)
    return " ".join(words)


def make_input(path: Path, truth: Path, documents: int, seed: int, data: Path) -> dict:
    """Write the input (see the module docstring) to `path` and the planted truth to `truth`."""
    import polars as pl
    import pyarrow.parquet as pq

    from llm_assets.core import filtered

    rng = random.Random(seed)
    distinct = int(documents * DISTINCT_SHARE)
    base = originals(data)[:distinct]  # a small input takes the first originals: still half of it planted copies
    texts = base + [base[rng.randrange(len(base))] + "\n" + base[rng.randrange(len(base))]
                    for _ in range(distinct - len(base))]
    kinds = ["original"] * len(base) + ["composite"] * (distinct - len(base))
    sources = [-1] * distinct
    for _ in range(documents - distinct):
        src = rng.randrange(distinct)
        exact = rng.random() < EXACT_SHARE
        texts.append(texts[src] if exact else near_copy(texts[src], rng))
        kinds.append("exact" if exact else "near")
        sources.append(src)
    order = list(range(documents))
    rng.shuffle(order)
    position = {old: new for new, old in enumerate(order)}
    df = pl.DataFrame({"text": [texts[i] for i in order], "kind": [kinds[i] for i in order],
                       "source": [position[sources[i]] if sources[i] >= 0 else -1 for i in order]})
    df = df.with_row_index("row").with_columns(
        doc_id=pl.format("doc-{}", pl.col("row").cast(pl.String).str.zfill(7)),
        url=pl.format("https://dedup-path.example/{}", pl.col("row")), source_key=pl.lit("raw/BENCH/dedup-path"),
        crawl=pl.lit(CRAWL), fetch_time=pl.lit("2024-01-01T00:00:00Z"),
        n_words=pl.col("text").str.split(" ").list.len().cast(pl.Int32))
    table_ = filtered.conform(df, filtered.SCHEMA).to_arrow().cast(filtered.SCHEMA)
    pq.write_table(table_, path, compression="zstd", row_group_size=filtered.BATCH_ROWS)
    df.select("row", "kind", "source").write_parquet(truth)
    counts = dict(df.group_by("kind").len().iter_rows())
    made = {"documents": documents, "originals": len(base), "kinds": counts,
            "text_bytes": int(df["text"].str.len_bytes().sum()), "mean_words": float(df["n_words"].mean())}
    check_input(made)
    return made


def check_input(made: dict) -> None:
    """Fail unless the input is what the report says it is: `documents` rows, DISTINCT_SHARE of them distinct
    (originals and composites), the rest planted copies, exact and near."""
    kinds, documents = made["kinds"], made["documents"]
    copies = kinds.get("exact", 0) + kinds.get("near", 0)
    planned = documents - int(documents * DISTINCT_SHARE)
    if sum(kinds.values()) != documents or copies != planned or not (kinds.get("exact") and kinds.get("near")):
        raise ValueError(f"the dedup-path input is not what its report describes: {kinds} in {documents:,} documents, "
                         f"where {planned:,} planted copies (exact and near) were meant")


# Our side: one step in this process ------------------------------------------------------------------------------


def ours_step(step: str, src: Path, work: Path) -> dict:
    """Run one of our steps on `src` with its files in `work`; -> its JSON line (timed block only)."""
    import resource

    import polars as pl
    import pyarrow.parquet as pq

    from benchmarks import minhash_stage
    from llm_assets.core import filtered
    from llm_assets.core.clusters import cluster_frames
    from llm_assets.core.dedup import CLUSTER_COLUMNS, REJECTED_SCHEMA, REMOVED_SCHEMA, DedupSettings, split_removed

    def cpu() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    sigs, removed_path = work / "signatures.parquet", work / "removed.parquet"
    settings = DedupSettings()
    cpu0, t0 = cpu(), time.perf_counter()
    out: dict = {}
    if step == "signatures":
        out["rows"] = minhash_stage.run_ours(src, sigs)
    elif step == "clusters":
        frame = pl.read_parquet(sigs, columns=CLUSTER_COLUMNS).with_columns(crawl=pl.lit(CRAWL), shard=pl.lit(SHARD))
        clusters = cluster_frames([frame], settings, CRAWL, REMOVED_SCHEMA)
        pq.write_table(clusters.removed.to_arrow().cast(REMOVED_SCHEMA), removed_path, compression="zstd")
        out.update(rows=frame.height, removed=clusters.removed.height, candidates=clusters.candidates,
                   rejected=clusters.rejected, reasons=dict(clusters.removed.group_by("reason").len().iter_rows()))
    else:
        removed = pl.read_parquet(removed_path).filter(pl.col("shard") == SHARD) \
            .select("doc_id", "source_key", "reason", "duplicate_of")
        rows = kept = 0
        with pq.ParquetWriter(work / "deduplicated.parquet", filtered.SCHEMA, compression="zstd") as dedup, \
                pq.ParquetWriter(work / "rejected.parquet", REJECTED_SCHEMA, compression="zstd") as rejected:
            for batch in pq.ParquetFile(src).iter_batches(batch_size=filtered.BATCH_ROWS):
                k, dup = split_removed(batch, removed)
                dedup.write_table(k)
                rejected.write_table(dup.to_arrow().cast(REJECTED_SCHEMA))
                rows, kept = rows + batch.num_rows, kept + k.num_rows
        out.update(rows=rows, kept=kept)
    return {"side": "ours", "step": step, **out, "timed_cpu_s": cpu() - cpu0,
            "timed_wall_s": time.perf_counter() - t0, "vm_hwm_bytes": vm_hwm()}


def vm_hwm() -> int:
    """This process's peak RSS since its exec (`ru_maxrss` of a forked child keeps its parent's peak)."""
    line = next(ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


# The comparison --------------------------------------------------------------------------------------------------


def measure(args) -> dict:
    from benchmarks.compare import anchor_python
    from benchmarks.harness import run_side

    anchor = anchor_python()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    src, truth = SCRATCH / "input.parquet", SCRATCH / "truth.parquet"
    log(f"writing {n(args.documents)} documents to {src.relative_to(ROOT)}")
    made = make_input(src, truth, args.documents, args.seed, args.shared_data)
    log(f"input: {made}")
    rounds = []
    for k in range(args.pairs):
        work = {side: SCRATCH / f"round{k}-{side}" for side in ("ours", "datatrove")}
        for folder in work.values():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
        got: dict = {"ours": {}, "datatrove": {}}
        sides = ["datatrove", "ours"] if k % 2 == 0 else ["ours", "datatrove"]
        for phase, dt_steps in PHASES.items():
            for side in sides:
                log(f"round {k + 1}/{args.pairs}, {phase}: {side}")
                if side == "ours":
                    cmd = [sys.executable, "-m", "benchmarks.dedup_path", "--step", phase, "--input", str(src),
                           "--work", str(work["ours"])]
                    got["ours"][phase] = run_side(cmd, str(args.core))
                else:
                    for step in dt_steps:
                        cmd = [anchor, str(ROOT / "benchmarks" / "compare_anchor.py"), "dedup-path", "--docs",
                               str(src), "--work", str(work["datatrove"]), "--step", step]
                        got["datatrove"][step] = run_side(cmd, str(args.core))
        rounds.append(got)
    agreement = compare_removed(truth, src, work["ours"], work["datatrove"], made["documents"])
    return {"input": made, "rounds": rounds, "agreement": agreement}


def datatrove_removed(work: Path) -> set[int]:
    import numpy as np

    files = sorted((work / "remove_ids").glob("*.remove"))
    return set(np.concatenate([np.fromfile(f, "<u4") for f in files]).tolist()) if files else set()


def datatrove_clusters(work: Path, documents: int):
    """Each document's cluster (its smallest member) from the duplicate pairs of datatrove's buckets stage."""
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    pairs = [np.fromfile(f, "<u4").reshape(-1, 4) for f in sorted((work / "buckets").glob("*.dups"))]
    pairs = np.concatenate(pairs) if pairs else np.zeros((0, 4), np.uint32)
    a, b = pairs[:, 1].astype(np.int64), pairs[:, 3].astype(np.int64)  # one signatures file: file numbers are 0
    graph = coo_matrix((np.ones(a.size), (a, b)), shape=(documents, documents))
    _, label = connected_components(graph, directed=False)
    first = np.full(label.max() + 1, documents)
    np.minimum.at(first, label, np.arange(documents))
    return first[label]


def compare_removed(truth_path: Path, src: Path, ours: Path, dt: Path, documents: int) -> dict:
    """How many removed documents differ, and why (see the module docstring)."""
    import numpy as np
    import polars as pl

    from llm_assets.core.dedup import DedupSettings
    from llm_assets.core.minhash import words

    threshold = DedupSettings().jaccard_threshold

    removed = pl.read_parquet(ours / "removed.parquet")
    number = removed["doc_id"].str.slice(4).cast(pl.Int64).to_numpy()
    kept_of = removed["duplicate_of"].str.slice(4).cast(pl.Int64).to_numpy()
    ours_cluster = np.arange(documents)
    ours_cluster[number] = kept_of
    ours_root = np.arange(documents)
    np.minimum.at(ours_root, ours_cluster, np.arange(documents))  # the smallest member, as for datatrove's
    ours_root = ours_root[ours_cluster]
    dt_root = datatrove_clusters(dt, documents)
    ours_set, dt_set = set(number.tolist()), datatrove_removed(dt)
    truth = pl.read_parquet(truth_path)
    kind, source = truth["kind"].to_numpy(), truth["source"].to_numpy()
    tokens = words(pl.read_parquet(src, columns=["text"])["text"])

    def shingles(x: int) -> set:
        w = tokens[x].to_list()
        return set(zip(*[w[i:] for i in range(5)], strict=False)) or {tuple(w)}

    def jaccard(x: int, y: int) -> float:
        a, b = shingles(x), shingles(y)
        return len(a & b) / len(a | b) if a | b else 1.0

    def relative(x: int) -> int:
        """The planted relative of x: its source, or a copy of it."""
        if source[x] >= 0:
            return int(source[x])
        copies = np.flatnonzero(source == x)
        return int(copies[0]) if copies.size else -1

    out: dict = {"ours_removed": len(ours_set), "datatrove_removed": len(dt_set), "both": len(ours_set & dt_set),
                 "only_ours": {}, "only_datatrove": {}}
    for name, only in (("only_ours", ours_set - dt_set), ("only_datatrove", dt_set - ours_set)):
        why: dict[str, list[float]] = {}
        other = dt_root if name == "only_ours" else ours_root
        size = np.bincount(other, minlength=documents)
        for x in sorted(only):
            if size[other[x]] > 1:
                key = "in a cluster on both sides, kept by the other"
            else:
                key = f"in a cluster on this side only: planted {kind[x]}"
            rel = relative(x)
            why.setdefault(key, []).append(jaccard(x, rel) if rel >= 0 else float("nan"))
        out[name] = {k: {"documents": len(v), "below": int((np.array(v) < threshold).sum()),
                         "jaccard_median": float(np.nanmedian(v)) if v else None,
                         "jaccard_min": float(np.nanmin(v)) if v else None,
                         "jaccard_max": float(np.nanmax(v)) if v else None} for k, v in why.items()}
    clustered_ours, clustered_dt = np.bincount(ours_root, minlength=documents), np.bincount(dt_root,
                                                                                          minlength=documents)
    out["clusters_ours"], out["clusters_datatrove"] = int((clustered_ours > 1).sum()), int((clustered_dt > 1).sum())
    out["same_partition"] = bool((np.unique(np.stack([ours_root, dt_root]), axis=1).shape[1]
                                  == np.unique(ours_root).size == np.unique(dt_root).size))
    return out


# The report ------------------------------------------------------------------------------------------------------


def side_figures(rounds: list[dict], side: str, steps) -> dict:
    return {step: {"cpu": [r[side][step]["timed_cpu_s"] for r in rounds],
                   "rss": max(r[side][step]["vm_hwm_bytes"] for r in rounds)} for step in steps}


def summary(r: dict) -> list[Row]:
    """The row of BENCHMARKS.md's summary table: the whole path against datatrove."""
    docs = r["input"]["documents"]
    ours = side_figures(r["rounds"], "ours", STEPS)
    dt = side_figures(r["rounds"], "datatrove", DT_STEPS)
    o_all = [sum(ours[s]["cpu"][k] for s in STEPS) for k in range(len(r["rounds"]))]
    d_all = [sum(dt[s]["cpu"][k] for s in DT_STEPS) for k in range(len(r["rounds"]))]
    ratios = sorted(d / o for d, o in zip(d_all, o_all, strict=True))
    median = statistics.median(ratios)
    return [Row("dedup-path:whole",
                "whole dedup path (signatures → clusters → removal) vs datatrove (docs per CPU-s)",
                f"{'/'.join(f'{x:.1f}' for x in ratios)}× ({n(docs / statistics.median(o_all))} vs "
                f"{n(docs / statistics.median(d_all))})", r["run"]["command"], "dedup-path.md", "≥ 10×",
                verdict(median >= 10), f"{r['run']['date'][:10]}, {r['run'].get('git', '?')}")]


def render(r: dict) -> str:
    docs = r["input"]["documents"]
    ours = side_figures(r["rounds"], "ours", STEPS)
    dt = side_figures(r["rounds"], "datatrove", DT_STEPS)

    def rate(cpus: list[float]) -> str:
        return n(round(docs / statistics.median(cpus)))

    def phase_cpu(fig: dict, steps, k: int) -> float:
        return sum(fig[s]["cpu"][k] for s in steps)

    pairs = len(r["rounds"])
    rows = []
    for phase, dt_steps in PHASES.items():
        o = [ours[phase]["cpu"][k] for k in range(pairs)]
        d = [phase_cpu(dt, dt_steps, k) for k in range(pairs)]
        ratios = sorted(d[k] / o[k] for k in range(pairs))
        rows.append([phase, rate(o), " + ".join(dt_steps), rate(d),
                     "/".join(f"{x:.1f}" for x in ratios) + "×", mib(ours[phase]["rss"]),
                     mib(max(dt[s]["rss"] for s in dt_steps))])
    o_all = [sum(ours[s]["cpu"][k] for s in STEPS) for k in range(pairs)]
    d_all = [sum(dt[s]["cpu"][k] for s in DT_STEPS) for k in range(pairs)]
    ratios = sorted(d_all[k] / o_all[k] for k in range(pairs))
    rows.append(["**whole path**", rate(o_all), "all four", rate(d_all), "/".join(f"{x:.1f}" for x in ratios) + "×",
                 mib(max(v["rss"] for v in ours.values())), mib(max(v["rss"] for v in dt.values()))])
    per_step = [[side, step, " / ".join(f"{c:.2f}" for c in fig[step]["cpu"]), rate(fig[step]["cpu"]),
                 mib(fig[step]["rss"])]
                for side, fig, steps in (("ours", ours, STEPS), ("datatrove", dt, DT_STEPS)) for step in steps]
    a, run, made = r["agreement"], r["run"], r["input"]
    clusters = r["rounds"][-1]["ours"]["clusters"]
    median = statistics.median(d_all[k] / o_all[k] for k in range(pairs))

    def below(part: dict) -> int:
        return sum(v["below"] for k, v in part.items() if "this side only" in k)

    def alone(part: dict) -> int:
        return sum(v["documents"] for k, v in part.items() if "this side only" in k)

    def why(part: dict) -> str:
        if not part:
            return "none"
        return "; ".join(f"{n(v['documents'])} {k} (the exact Jaccard similarity of our 5-gram sets with its "
                         f"planted relative: median {v['jaccard_median']:.2f}, {v['jaccard_min']:.2f}–"
                         f"{v['jaccard_max']:.2f}; {n(v['below'])} below 0.8)"
                         for k, v in sorted(part.items(), key=lambda kv: -kv[1]["documents"]))

    out = [
        "## The whole dedup path per document, beside datatrove (`make bench-dedup-path`)", "",
        "What `make bench-dedup-path` (exactly: `.venv/bin/python -m benchmarks.dedup_path`; `--documents`, "
        "`--pairs`, `--json FILE`) measures: signatures → duplicate clusters → removal, the stages' own code on "
        "local files, against datatrove 0.10.1's MinhashDedupSignature → MinhashDedupBuckets → MinhashDedupCluster "
        "→ MinhashDedupFilter with FineWeb's config (sha1 64-bit hashes, 14 buckets × 8, word 5-grams), on the same "
        "documents. The method in full: the docstring of `benchmarks/dedup_path.py`.", "",
        f"- Run: {run['date']}, git {run['git']}; command: `{run['command']}`; {run['seconds']:.0f} s in all; load "
        f"average {run['loadavg'][0]:.2f} at the start, {run['loadavg_end'][0]:.2f} at the end; {run['machine']}.",
        *([f"- This section was written from that run's results by `{r['assembled']}`."] if "assembled" in r
          else []),
        f"- Input: {n(docs)} documents, {made['text_bytes'] / 1e6:.1f} MB of text, {made['mean_words']:.0f} words on "
        f"average: {n(made['originals'])} real texts of ../shared/data (seed003's rows, WikiText-2's paragraphs, the "
        f"shared web documents; ≥ {MIN_WORDS} words), "
        f"{n(made['kinds'].get('composite', 0))} composites of two of them, "
        f"{n(made['kinds'].get('exact', 0))} planted exact copies and {n(made['kinds'].get('near', 0))} near copies "
        "(one word in every 20 to 100 replaced: 5-gram Jaccard similarity about 0.6 to 0.9).",
        f"- Each step of each side: a fresh process pinned to one core, one thread; {pairs} rounds, the sides "
        "alternating step by step. Rates: documents per CPU-second of the timed block (imports and the word "
        "tokenizer's load outside it), the median over the rounds; ratio: datatrove's CPU-s over ours, per round "
        "(min/…/max); peak RSS: the largest over the rounds of the step's process (of a phase: its largest step). "
        "The machine is shared with other work (the load averages above, on 2 cores): contention inflates CPU "
        "seconds too, less than wall time, and the alternating order spreads it over both sides.",
        "",
        table(["phase", "ours docs/CPU-s", "datatrove stages", "datatrove docs/CPU-s", "ratio (datatrove ÷ ours)",
               "ours peak RSS MiB", "datatrove peak RSS MiB"], rows), "",
        f"- **Whole path: {median:.1f}× datatrove's documents per CPU-second** (compass goal ≥ 10×: "
        f"{'met' if median >= 10 else 'not met'}).",
        "",
        "Per step, CPU seconds of each round:", "",
        table(["side", "step", "CPU s per round", "docs/CPU-s (median)", "peak RSS MiB"], per_step), "",
        "### Do the removed sets agree?", "",
        f"- Removed: ours {n(a['ours_removed'])}, datatrove {n(a['datatrove_removed'])}, both {n(a['both'])}; "
        f"clusters of 2 or more: ours {n(a['clusters_ours'])}, datatrove {n(a['clusters_datatrove'])}; the same "
        f"partition into clusters: {'yes' if a['same_partition'] else 'no'}.",
        f"- Removed by ours only ({n(sum(v['documents'] for v in a['only_ours'].values()))}): {why(a['only_ours'])}.",
        f"- Removed by datatrove only ({n(sum(v['documents'] for v in a['only_datatrove'].values()))}): "
        f"{why(a['only_datatrove'])}.",
        f"- Ours confirmed {n(clusters.get('candidates', 0))} LSH candidate pairs by their Jaccard estimate and "
        f"rejected {n(clusters.get('rejected', 0))}; reasons of our removals: "
        + ", ".join(f"{k} {n(v)}" for k, v in sorted(clusters.get("reasons", {}).items())) + ". "
        "datatrove has neither the confirmation nor the exact-text rule (an exact copy shares all 14 bands and is "
        "found anyway); its words are spaCy's English tokens of its simplified text, ours runs of letters and "
        "digits, so borderline near copies fall on different sides of the band collisions.",
        "- Where both find a cluster they may keep different members: ours the earliest (then the first doc_id), "
        "datatrove its union-find root (union by size), so removed sets differ by the kept documents even where the "
        "clusters agree.",
        f"- Why the sides differ: {n(docs - made['originals'] - made['kinds'].get('composite', 0))} copies were "
        f"planted; datatrove removed {n(a['datatrove_removed'])}, ours {n(a['ours_removed'])}. Of the "
        f"{n(alone(a['only_datatrove']))} documents only datatrove put in a cluster, {n(below(a['only_datatrove']))} "
        "are below FineWeb's own 0.8 against their planted relative (the originals and composites among them are the "
        "other end of such a pair: their relative is their near copy): 14 bands of 8 rows let a pair at Jaccard 0.7 "
        "collide in some band with probability 1 − (1 − 0.7⁸)¹⁴ = 0.56 (0.21 at 0.6, 0.92 at 0.8), and datatrove makes "
        "every collision an edge. Ours makes a collision an edge only when the pair's b-bit estimate reaches 0.8; its "
        "standard error (0.04 at 0.8) and the two sides' different words are why pairs near 0.8 fall differently each "
        f"way: {n(alone(a['only_datatrove']) - below(a['only_datatrove']))} documents only datatrove clustered and "
        f"{n(alone(a['only_ours']) - below(a['only_ours']))} only ours clustered are at 0.8 or above (a pair at 0.82 "
        "has an estimate below 0.8 about 30% of the time): the recall ours gives up just above the threshold is what "
        "keeps it from merging the pairs below.",
        f"- Memory: our clusters step here is `cluster_frames`, every signature of the {n(docs)} documents in one "
        "process (the duplicate_clusters stage runs the same steps as units bounded by `bucket_rows`: the "
        "dump-scale section above); datatrove's cluster stage holds only the duplicate pairs, its buckets tasks one "
        "band each.",
    ]
    return "\n".join(out)


def mib(b: float) -> str:
    return f"{b / MIB:,.0f}"


def machine() -> str:
    from benchmarks.dump_scale import machine as dump_scale_machine

    return dump_scale_machine()


# main ------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dedup_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000, help="documents of the input (default 100000)")
    parser.add_argument("--pairs", type=int, default=2, help="rounds of interleaved pairs (default 2)")
    parser.add_argument("--core", type=int, default=1, help="the CPU every step is pinned to (default 1)")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--shared-data", type=Path,
                        default=Path(os.environ.get("LLM_ASSETS_SHARED_DATA", ROOT.parent / "shared" / "data")))
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md",
                        help="the summary whose row is replaced (default BENCHMARKS.md); the section goes to "
                             "benchmarks/results/dedup-path.md beside it")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    parser.add_argument("--from-json", type=Path, default=None, help="write the section from earlier results")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # internal: one of our steps
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.step:
        print(json.dumps(ours_step(args.step, args.input, args.work)), flush=True)
        return 0
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        given = sys.argv[1:] if argv is None else argv
        results["assembled"] = " ".join([".venv/bin/python -m benchmarks.dedup_path", *given])
    else:
        given = sys.argv[1:] if argv is None else argv
        started, loadavg = time.perf_counter(), os.getloadavg()
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        results = measure(args)
        results["run"] = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                          "command": " ".join([".venv/bin/python -m benchmarks.dedup_path", *given]),
                          "git": git.stdout.strip() or "?", "seconds": time.perf_counter() - started,
                          "loadavg": loadavg, "loadavg_end": os.getloadavg(), "machine": machine()}
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=1))
    section = render(results)
    print(section)
    publish(args.output, "dedup-path", BEGIN, END, section, summary(results))
    log(f"wrote benchmarks/results/dedup-path.md and the summary table of {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
