"""`make bench-enrich`: the enriched stage's parts (spaCy entities, YAKE keywords, TextRank summary) on real English
text, per CPU-second, with peak memory, the entity batch path, 1 and 2 workers, and the cost per million documents.

    .venv/bin/python -m benchmarks.enrich [--manuals 2000] [--output BENCHMARKS.md] [--json FILE]

Input, read at run time from ../shared/data and never copied:
- manuals: MANUALS distinct texts sampled (seeded) from the 16,216 of `bench/seed003_input.jsonl.gz` (English
  software manuals, shaped like WikiText-2 rows);
- wikitext: the articles of `text/pytorch-examples__wikitext-2-v1.test.txt`, split at its ` = Title = ` headings;
- ccnet: the 10 documents of `text/dolma__cc_en_head-0091.ccnet.jsonl.gz`.
Every document is given language `en`.

Each measurement runs in its own fresh process (`--child SPEC`), so its peak RSS (`ru_maxrss`) is its own:
1. per part and corpus: `entities(texts, EntitySettings())`, `keywords(text, "en", KeywordSettings())` per text,
   `summary(text, SummarySettings())` per text, and all three through `enrich_batch` in the unit's batches of
   `BATCH_ROWS` rows, with the default settings. The first call (imports, the spaCy pipeline's load, YAKE's stop
   words) is timed apart as the load; the timed block then runs over the corpus (again until it has taken 3
   CPU-seconds). Rates are per CPU-second of the process (user + system, all threads).
2. the batch path, on the first BATCH_DOCS manuals and on the WikiText articles: `entities` with spaCy `batch_size` 1,
   16 and 64; the product's pipeline with `nlp.pipe(n_process=2)` (CPU of its worker processes included; manuals only);
   and the pipeline without its `tok2vec` component (the small English NER has its own embedding layer; `tok2vec` only
   feeds the tagger and the parser, which are excluded), with its entities compared to `entities()`'s.
3. workers: `PoolRunner(workers=k).run` with k tasks, each `enrich_batch` over its share of all three corpora (the
   documents dealt longest first, alternately, so the shares are even), k = 1 (in process, as the runner does) and
   2 (spawned processes: interpreter start, imports and the model load in each are in the wall time).
4. a profile (cProfile) of each part on a subset: the functions with the most own time.
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

from benchmarks.report import n, table  # noqa: E402
from benchmarks.stages import Meter, cpu_seconds, machine_busy_seconds, maxrss_bytes  # noqa: E402
from benchmarks.summary import Row, publish  # noqa: E402

BEGIN, END = "<!-- enrich:begin -->", "<!-- enrich:end -->"
ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
MANUALS = SHARED_DATA / "bench" / "seed003_input.jsonl.gz"
WIKITEXT = SHARED_DATA / "text" / "pytorch-examples__wikitext-2-v1.test.txt"
CCNET = SHARED_DATA / "text" / "dolma__cc_en_head-0091.ccnet.jsonl.gz"
CORPORA = ("manuals", "wikitext", "ccnet")
PARTS = ("entities", "keywords", "summary", "all")
BATCH_SIZES = (1, 16, 64)
BATCH_DOCS = 600
BATCH_CORPORA = ("manuals", "wikitext")
MIN_CPU_SECONDS = 3.0
SEED = 7
MIB = 2**20
_HEADING = re.compile(r"(?m)^ = ([^=\n].*?) = *$")  # an article's title; sections are ` = = Section = = `


# -- input -----------------------------------------------------------------------------------------------------


def corpus(name: str, manuals: int) -> list[str]:
    if not SHARED_DATA.is_dir():
        raise SystemExit(f"bench-enrich needs the shared data at {SHARED_DATA}")
    if name == "manuals":
        with gzip.open(MANUALS, "rt") as fh:
            distinct = list(dict.fromkeys(json.loads(line)["text"] for line in fh))
        return random.Random(SEED).sample(distinct, min(manuals, len(distinct)))
    if name == "wikitext":
        parts = _HEADING.split(WIKITEXT.read_text())
        return [f"{parts[i]}\n{parts[i + 1].strip()}" for i in range(1, len(parts), 2)]
    if name == "ccnet":
        with gzip.open(CCNET, "rt") as fh:
            return [json.loads(line)["text"] for line in fh]
    raise ValueError(name)


def frame(texts: list[str], crawl: str = "BENCH"):
    import polars as pl

    return pl.DataFrame({"doc_id": [f"{i:032x}" for i in range(len(texts))],
                         "url": [f"https://bench.example/{i}" for i in range(len(texts))],
                         "crawl": [crawl] * len(texts), "language": ["en"] * len(texts), "text": texts})


def product_pipeline(model: str):
    """The spaCy pipeline object `entities()` runs (loaded once per process by the product's own loader)."""
    from llm_assets.core.ner import spacy_pipeline

    return spacy_pipeline(model)


def _rusage_cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


# -- children: one measurement each ----------------------------------------------------------------------------


def _load(part: str) -> dict:
    """The first call of a part: imports, the spaCy pipeline, YAKE's stop words."""
    from llm_assets.core.enriched import EntitySettings, KeywordSettings, entities, keywords

    t0, c0 = time.perf_counter(), cpu_seconds()
    if part in ("entities", "all"):
        entities(["Warm-up text about Paris."], EntitySettings())
    if part in ("keywords", "all"):
        keywords("Warm-up text about Paris.", "en", KeywordSettings())
    return {"load_seconds": time.perf_counter() - t0, "load_cpu_seconds": cpu_seconds() - c0}


def _run_part(part: str, texts: list[str]) -> None:
    from llm_assets.core.enriched import (
        BATCH_ROWS,
        EnrichedSettings,
        EntitySettings,
        KeywordSettings,
        SummarySettings,
        enrich_batch,
        entities,
        keywords,
        summary,
    )

    if part == "entities":
        entities(texts, EntitySettings())
    elif part == "keywords":
        settings = KeywordSettings()
        for t in texts:
            keywords(t, "en", settings)
    elif part == "summary":
        s = SummarySettings()
        for t in texts:
            summary(t, s)
    else:
        df, settings = frame(texts), EnrichedSettings()
        for start in range(0, df.height, BATCH_ROWS):
            enrich_batch(df.slice(start, BATCH_ROWS), settings)


def child_part(spec: dict) -> dict:
    import numpy  # noqa: F401  (imported by the module under test anyway; not part of the load)
    import polars  # noqa: F401

    import llm_assets.core.enriched  # noqa: F401

    texts = corpus(spec["corpus"], spec["manuals"])
    rss_imports = maxrss_bytes()
    out = {**spec, "docs": len(texts), "chars": sum(map(len, texts)), **_load(spec["part"])}
    out["rss_before_bytes"] = maxrss_bytes()
    passes = 0
    with Meter() as m:
        while passes == 0 or cpu_seconds() - m.cpu0 < MIN_CPU_SECONDS:
            _run_part(spec["part"], texts)
            passes += 1
    return {**out, **m.dict(), "passes": passes, "rss_imports_bytes": rss_imports, "peak_rss_bytes": maxrss_bytes()}


def _spans(docs, wanted: set[str]) -> list[list[tuple[int, int, str]]]:
    return [[(e.start_char, e.end_char, e.label_) for e in d.ents if e.label_ in wanted] for d in docs]


def child_batch(spec: dict) -> dict:
    import importlib

    from llm_assets.core.enriched import EntitySettings, entities

    texts = corpus(spec["corpus"], spec["manuals"])[:BATCH_DOCS]
    settings = EntitySettings(batch_size=spec.get("batch_size", EntitySettings().batch_size))
    heads = [t[: settings.max_chars] for t in texts]
    wanted = set(settings.labels)
    variant = spec["variant"]
    out = {**spec, "batch_size": settings.batch_size, "docs": len(texts), "chars": sum(map(len, heads))}
    if variant == "no-tok2vec":  # loaded alone: the product's pipeline is loaded after the timed block
        t0, c0 = time.perf_counter(), cpu_seconds()
        nlp = importlib.import_module(settings.model).load(
            exclude=["tok2vec", "parser", "tagger", "lemmatizer", "attribute_ruler", "senter"])
        out.update(load_seconds=time.perf_counter() - t0, load_cpu_seconds=cpu_seconds() - c0)
    else:
        out.update(_load("entities"))
        nlp = product_pipeline(settings.model)
    out["pipes"] = nlp.pipe_names
    children0 = _rusage_cpu(resource.RUSAGE_CHILDREN)
    with Meter() as m:
        if variant == "entities":
            entities(texts, settings)
        elif variant == "n_process=2":
            spans = _spans(nlp.pipe(heads, batch_size=settings.batch_size, n_process=2), wanted)
        else:
            spans = _spans(nlp.pipe(heads, batch_size=settings.batch_size), wanted)
    out.update(m.dict())
    out["children_cpu_seconds"] = _rusage_cpu(resource.RUSAGE_CHILDREN) - children0  # n_process workers
    out["cpu_seconds"] += out["children_cpu_seconds"]
    out["other_cpu_seconds"] = max(0.0, out["other_cpu_seconds"] - out["children_cpu_seconds"])
    out["peak_rss_bytes"] = maxrss_bytes()
    if variant != "entities":  # the same entities as the product's `entities()`?
        product = product_pipeline(settings.model) if variant == "no-tok2vec" else nlp
        out["same_entities"] = spans == _spans(product.pipe(heads, batch_size=settings.batch_size), wanted)
    return out


def _work(texts: list[str]) -> dict:
    """One runner task: `enrich_batch` over these texts in the unit's batches (a module-level function, so that
    spawned pool workers can unpickle it)."""
    from llm_assets.core.enriched import BATCH_ROWS, EnrichedSettings, enrich_batch

    load = _load("all")
    df, settings = frame(texts), EnrichedSettings()
    with Meter() as m:
        for start in range(0, df.height, BATCH_ROWS):
            enrich_batch(df.slice(start, BATCH_ROWS), settings)
    return {**load, **m.dict(), "docs": len(texts), "pid": os.getpid(), "peak_rss_bytes": maxrss_bytes()}


def child_workers(spec: dict) -> dict:
    from llm_assets.core.units import PoolRunner, stop_pool_server

    k = spec["workers"]
    texts = [t for name in CORPORA for t in corpus(name, spec["manuals"])]
    longest_first = sorted(texts, key=len, reverse=True)
    shares = [longest_first[i::k] for i in range(k)]
    busy0, self0, children0 = machine_busy_seconds(), cpu_seconds(), _rusage_cpu(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    tasks = PoolRunner(workers=k).run(_work, shares)  # type: ignore[arg-type]  # any picklable task runs
    wall = time.perf_counter() - t0
    stop_pool_server()  # the workers are the fork server's children: waited for, their CPU time becomes ours
    cpu = cpu_seconds() - self0 + _rusage_cpu(resource.RUSAGE_CHILDREN) - children0
    return {**spec, "docs": len(texts), "chars": sum(map(len, texts)), "seconds": wall, "cpu_seconds": cpu,
            "other_cpu_seconds": max(0.0, machine_busy_seconds() - busy0 - cpu), "tasks": tasks}


def child_profile(spec: dict) -> dict:
    import cProfile
    import pstats

    texts = corpus("manuals", spec["manuals"])[:300] + corpus("wikitext", 0)[:10]
    _load(spec["part"])
    profile = cProfile.Profile()
    profile.enable()
    _run_part(spec["part"], texts)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values())  # own time
    top = sorted(((v[2], f"{Path(k[0]).name}:{k[1]}({k[2]})") for k, v in stats.items()), reverse=True)[:5]
    return {**spec, "docs": len(texts), "total_seconds": total,
            "top": [{"function": name, "own_seconds": s, "share": s / total if total else 0.0} for s, name in top]}


CHILDREN = {"part": child_part, "batch": child_batch, "workers": child_workers, "profile": child_profile}


def run_child(spec: dict) -> dict:
    print(f"  {json.dumps(spec)}", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "benchmarks.enrich", "--child", json.dumps(spec)], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{spec} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- report ----------------------------------------------------------------------------------------------------


def _per_cpu(r: dict, what: str = "docs") -> float:
    return r[what] * r.get("passes", 1) / r["cpu_seconds"] if r["cpu_seconds"] else 0.0


def _others(r: dict) -> str:
    return f"{r['other_cpu_seconds'] / r['seconds']:.2f}" if r["seconds"] else "–"


def render(r: dict) -> str:
    parts = {(x["corpus"], x["part"]): x for x in r["parts"]}
    rows = []
    for c in CORPORA:
        for p in PARTS:
            x = parts[(c, p)]
            rows.append([f"{c}" if p == "entities" else "", "**all** (`enrich_batch`)" if p == "all" else p,
                         n(x["docs"]), n(x["chars"] / x["docs"]), n(_per_cpu(x), 1), n(_per_cpu(x, "chars") / 1000, 1),
                         n(1000 / _per_cpu(x), 2), n(x["docs"] * x["passes"] / x["seconds"], 1), _others(x),
                         n(x["load_seconds"], 2), n(x["rss_before_bytes"] / MIB), n(x["peak_rss_bytes"] / MIB)])
    batch = r["batch"]
    brows = []
    for b in batch:
        base = next(x for x in batch if x["corpus"] == b["corpus"] and x["variant"] == "entities"
                    and x["batch_size"] == 64)
        name = {"entities": f"`entities()`, `batch_size` {b.get('batch_size')}",
                "n_process=2": "product pipeline, `nlp.pipe(batch_size=64, n_process=2)`",
                "no-tok2vec": "pipeline without `tok2vec` (`ner` only), `batch_size` 64"}[b["variant"]]
        wall_rate = b["docs"] / b["seconds"]
        brows.append([b["corpus"] if b["variant"] == "entities" and b["batch_size"] == 1 else "", name,
                      ", ".join(b["pipes"]), n(_per_cpu(b), 1), n(_per_cpu(b, "chars") / 1000, 1),
                      f"{_per_cpu(b) / _per_cpu(base):.2f}×", n(wall_rate, 1),
                      f"{wall_rate / (base['docs'] / base['seconds']):.2f}×", _others(b), n(b["peak_rss_bytes"] / MIB),
                      {True: "yes", False: "**no**"}.get(b.get("same_entities"), "(reference)")])
    w1, w2 = (next(w for w in r["workers"] if w["workers"] == k) for k in (1, 2))

    def enrich_wall(w: dict) -> float:
        return max(t["seconds"] for t in w["tasks"])

    def enrich_cpu(w: dict) -> float:
        return sum(t["cpu_seconds"] for t in w["tasks"])

    wrows = [[str(w["workers"]), n(w["docs"]), n(w["seconds"], 1), n(enrich_wall(w), 1),
              n(w["docs"] / w["seconds"], 1), n(w["docs"] / enrich_cpu(w), 1),
              ", ".join(n(t["load_seconds"], 1) for t in w["tasks"]), _others(w),
              n(max(t["peak_rss_bytes"] for t in w["tasks"]) / MIB)] for w in (w1, w2)]
    speedup, speedup_enrich = w1["seconds"] / w2["seconds"], enrich_wall(w1) / enrich_wall(w2)
    cpu_efficiency = (w2["docs"] / enrich_cpu(w2)) / (w1["docs"] / enrich_cpu(w1))
    crows = []
    for c in CORPORA:
        hours = {p: 1e6 / _per_cpu(parts[(c, p)]) / 3600 for p in PARTS}
        crows.append([c, n(parts[(c, "all")]["chars"] / parts[(c, "all")]["docs"]),
                      *(n(hours[p], 1 if hours[p] >= 10 else 2) for p in PARTS),
                      n(hours["all"] / 2, 1), n(hours["all"] / (2 * cpu_efficiency), 1),
                      n(hours["all"] / speedup_enrich, 1)])
    prows = [[p["part"] if i == 0 else "", f"`{t['function']}`", n(t["own_seconds"], 2), f"{100 * t['share']:.0f}%"]
             for p in r["profile"] for i, t in enumerate(p["top"][:4])]
    m = r["machine"]
    return "\n".join([
        "## Enrichment (`make bench-enrich`; not part of `make bench`)",
        "",
        f"Generated {r['date']} UTC by `make bench-enrich` (`benchmarks/enrich.py`; its docstring says exactly what "
        f"runs) in {n(r['runtime_seconds'])} s, on {m['nproc']} CPUs ({m['cpu_model']}), spaCy {m['spacy']} with "
        f"`{m['model']}` {m['model_version']} (loaded with `{', '.join(batch[0]['pipes'])}`), YAKE "
        f"{m['yake']}. Other work may have been running on this 2-core machine (\"others\": the CPUs it kept busy "
        "on average, from /proc/stat): read the per-CPU-second figures, wall-clock ones are slowed by it. Default "
        "`EnrichedSettings` (entities and keywords read the first 20,000 characters, the summary ranks the first "
        "200 sentences); every document is English. Corpora, read from `../shared/data`: manuals = "
        f"{n(parts[('manuals', 'all')]['docs'])} distinct texts sampled from `bench/seed003_input.jsonl.gz`, "
        "wikitext = the articles of `text/pytorch-examples__wikitext-2-v1.test.txt` split at their ` = Title = ` "
        "headings, ccnet = `text/dolma__cc_en_head-0091.ccnet.jsonl.gz`.",
        "",
        "Per part, each in a fresh process (one core; load = the first call: imports, the spaCy pipeline, YAKE's stop "
        "words; RSS before = after imports, input and load; chars = characters of the documents, whatever the part "
        "reads of them):",
        "",
        table(["corpus", "part", "docs", "mean chars", "docs per CPU-s", "k chars per CPU-s", "CPU ms per doc",
               "docs/s (wall)", "others (CPUs)", "load s", "RSS before MiB", "peak RSS MiB"], rows),
        "",
        f"The entity batch path on the first {n(BATCH_DOCS)} manuals and on the WikiText articles (one process each; "
        "`n_process=2`'s CPU includes its worker processes; same entities = the same (start, end, label) spans of the "
        "kept labels as the product's pipeline; peak RSS includes the load):",
        "",
        table(["corpus", "entities", "pipeline components", "docs per CPU-s", "k chars per CPU-s", "× batch 64 (CPU)",
               "docs/s (wall)", "× batch 64 (wall)", "others (CPUs)", "peak RSS MiB", "same entities"], brows),
        "",
        f"The runner's workers: `PoolRunner(workers=k).run` over all three corpora ({n(w1['docs'])} documents, "
        f"{n(w1['chars'] / 1e6, 1)} M characters), each task `enrich_batch` over its share in {r['batch_rows']}-row "
        "batches; 1 worker runs in process, 2 in spawned processes (their start, imports and model load are in the "
        "total wall time, not in the enrich phase):",
        "",
        table(["workers", "docs", "wall s (total)", "wall s (enrich phase)", "docs/s (wall, total)",
               "docs per CPU-s (enrich)", "load s per worker", "others (CPUs)", "peak RSS MiB per worker"], wrows),
        "",
        f"Speedup 1 → 2 workers: {speedup:.2f}× in total wall time, {speedup_enrich:.2f}× in the enrich phase; per "
        f"CPU-second a worker of two does {cpu_efficiency:.2f}× the work of a single one (below 1: the two cores "
        "share caches and memory bandwidth).",
        "",
        "Cost per million documents of each corpus's mean length (CPU-hours = 10⁶ ÷ docs per CPU-s ÷ 3,600, "
        "load excluded); wall hours on 2 cores: ideal (÷ 2), from the CPU-second rates of two workers (÷ 2 × "
        f"{cpu_efficiency:.2f}), and at the enrich-phase wall speedup measured here ({speedup_enrich:.2f}×, "
        "slowed by any other work):",
        "",
        table(["corpus", "mean chars", "entities CPU-h", "keywords CPU-h", "summary CPU-h", "**all** CPU-h",
               "all, 2 cores ideal, h", "all, 2 workers (CPU rates), h", "all, 2 workers (measured wall), h"], crows),
        "",
        "Where the time goes (cProfile, own time of the top functions, on 300 manuals and 10 WikiText articles):",
        "",
        table(["part", "function", "own s", "share"], prows, "llrr"),
    ])


def machine() -> dict:
    import importlib.metadata as md

    from llm_assets.core.enriched import EntitySettings

    model = EntitySettings().model
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "unknown CPU")
    return {"nproc": os.cpu_count(), "cpu_model": cpu_model, "spacy": md.version("spacy"), "yake": md.version("yake"),
            "model": model, "model_version": md.version(model)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manuals", type=int, default=2000, help="distinct manual texts sampled (default 2000)")
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(CHILDREN[spec["kind"]](spec)))
        return
    from llm_assets.core.enriched import BATCH_ROWS

    t0 = time.perf_counter()
    common = {"manuals": args.manuals}
    r: dict = {"date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}", "machine": machine(), "batch_rows": BATCH_ROWS}
    r["parts"] = [run_child({"kind": "part", "part": p, "corpus": c, **common}) for c in CORPORA for p in PARTS]
    r["batch"] = []
    for c in BATCH_CORPORA:
        r["batch"] += [run_child({"kind": "batch", "corpus": c, "variant": "entities", "batch_size": b, **common})
                       for b in BATCH_SIZES]
        r["batch"] += [run_child({"kind": "batch", "corpus": c, "variant": v, **common})
                       for v in (("n_process=2", "no-tok2vec") if c == "manuals" else ("no-tok2vec",))]
    r["workers"] = [run_child({"kind": "workers", "workers": k, **common}) for k in (1, 2)]
    r["profile"] = [run_child({"kind": "profile", "part": p, **common}) for p in PARTS]
    r["runtime_seconds"] = time.perf_counter() - t0
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    body = render(r)
    print(body)
    publish(args.output, "enrich", BEGIN, END, body, summary(r))


def summary(r: dict) -> list[Row]:
    """The row of BENCHMARKS.md's summary table: `enrich_batch` on the manuals."""
    x = next(x for x in r["parts"] if x["part"] == "all" and x["corpus"] == "manuals")
    return [Row("enrich:all", "enrichment `enrich_batch` on seed manuals (docs per CPU-s; peak RSS)",
                f"{n(_per_cpu(x), 1)}; {n(x['peak_rss_bytes'] / MIB)} MiB", "make bench-enrich", "enrich.md")]


if __name__ == "__main__":
    main()
