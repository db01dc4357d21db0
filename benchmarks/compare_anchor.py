"""The anchor's side of `make bench-compare`: datatrove 0.10.1 as FineWeb runs it, on the comparison's inputs.

Runs with the anchor's own interpreter (`.bench/compare/datatrove-venv/bin/python benchmarks/compare_anchor.py
TASK ...`): it imports datatrove and the standard library only, never the project. Prints one JSON line: the
items processed, the CPU seconds of the timed block and of the whole process (user + system, this process and
the children it waited for: datatrove's extractor runs trafilatura in a child process), wall seconds, peak RSS.

Tasks:
  extract   WarcReader + Trafilatura(favour_precision=True) over the WARC files of --corpus
  fineweb   FineWeb's pipeline over --corpus: WarcReader, URLFilter, Trafilatura, LanguageFilter,
            GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter(filter_no_terminal_punct=False),
            FineWebQualityFilter
  filters   the six filter blocks of that pipeline over the documents of --docs (JSON Lines), --repeat times
  filters-lang  per language of --config (anchor-config.json of benchmarks.languages), FineWeb-2's three blocks
            (GopherRepetitionFilter, FineWebQualityFilter, GopherQualityFilter with language=<lang_script>, their
            thresholds from the config) over --docs-dir/docs-<lang>.jsonl, --repeat times; CPU seconds per language
  minhash   MinhashDedupSignature (its default MinhashConfig, FineWeb's) over the documents of --docs
  dedup-path  one --step of FineWeb's MinHash deduplication over the documents of --docs (Parquet), its files
            under --work (`make bench-dedup-path`): signatures, buckets, clusters or removal

Offline: the language model is the local lid.176 given by --lid (datatrove would download lid.176.bin), the
Public Suffix List is tldextract's snapshot, the URL block lists are those inside datatrove's wheel.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sys
import tempfile
import time


def cpu_seconds() -> float:
    """User + system CPU of this process and of the children it has waited for."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def quiet() -> None:
    import datatrove.utils.logging  # noqa: F401 - it adds its handler on import: removed after
    from loguru import logger

    logger.remove()  # datatrove logs a line per timeout and per block; the comparison wants none of it


def offline(lid_path: str | None) -> None:
    import datatrove.utils.lid as lid
    import tldextract

    original = tldextract.TLDExtract
    tldextract.TLDExtract = functools.partial(original, suffix_list_urls=())  # the snapshot, no download
    if lid_path:
        lid.cached_asset_path_or_download = lambda *a, **k: lid_path


def fineweb_filters(lid_path: str | None) -> list:
    """The filter blocks of datatrove's FineWeb example, in its order (the URL block runs before extraction
    there), with their defaults, ready to run: models and lists loaded before any timing."""
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
        URLFilter,
    )

    offline(lid_path)
    blocks = [URLFilter(), LanguageFilter(), GopherRepetitionFilter(), GopherQualityFilter(),
              C4QualityFilter(filter_no_terminal_punct=False), FineWebQualityFilter()]
    warm(blocks)
    return blocks


def warm(blocks: list) -> None:
    """Loads what each block loads on its first document (URL lists, lid.176, spaCy's tokenizer)."""
    from datatrove.data import Document

    text = "This is a warm-up sentence with enough ordinary words in it. " * 20
    for block in blocks:
        if hasattr(block, "download_data"):
            block.download_data()
        block.filter(Document(text=text, id="warm", metadata={"url": "https://example.org/warm"}))


def chain(data, steps: list):
    for step in steps:
        data = step(data, 0, 1)
    return data


def task_extract(args) -> dict:
    import trafilatura  # imported here so that the extractor's forked child starts with it loaded
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader

    trafilatura.extract("<html><body><p>" + "Warm words here. " * 40 + "</p></body></html>")
    steps = [WarcReader(args.corpus, glob_pattern="*.warc.gz"), Trafilatura(favour_precision=True)]
    return timed(lambda: chain(None, steps), steps)


def task_fineweb(args) -> dict:
    import trafilatura
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader

    trafilatura.extract("<html><body><p>" + "Warm words here. " * 40 + "</p></body></html>")
    url, *rest = fineweb_filters(args.lid)
    steps = [WarcReader(args.corpus, glob_pattern="*.warc.gz"), url, Trafilatura(favour_precision=True), *rest]
    return timed(lambda: chain(None, steps), steps)


def read_docs(path: str, repeat: int, sample: int = 0) -> list:
    """Fresh Document objects, `repeat` copies of each (blocks rewrite a document's text and metadata), from JSON
    Lines (id, url, text) or Parquet (doc_id, url, text)."""
    from datatrove.data import Document

    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = [{"id": r["doc_id"], "url": r["url"], "text": r["text"]}
                for r in pq.read_table(path, columns=["doc_id", "url", "text"]).to_pylist()]
    else:
        with open(path) as f:
            rows = [json.loads(line) for line in f]
    if sample and sample < len(rows):  # evenly spaced rows: the mix of the whole input
        rows = [rows[i * len(rows) // sample] for i in range(sample)]
    return [Document(text=r["text"], id=f"{r['id']}/{k}", metadata={"url": r["url"] or ""})
            for k in range(repeat) for r in rows]


def task_filters(args) -> dict:
    blocks = fineweb_filters(args.lid)
    docs = read_docs(args.docs, args.repeat)
    return {**timed(lambda: chain(iter(docs), blocks), blocks), "docs_in": len(docs)}


FINEWEB2 = (("gopher_repetition", "GopherRepetitionFilter"), ("fineweb_quality", "FineWebQualityFilter"),
            ("gopher_quality", "GopherQualityFilter"))


def fineweb2_blocks(config: dict) -> tuple[list, dict]:
    """FineWeb-2's blocks for one language, as its pipeline builds them; -> (blocks, the fields of our blocks that
    datatrove's constructors do not take)."""
    import inspect

    from datatrove.pipeline import filters

    blocks, unused = [], {}
    for name, cls_name in FINEWEB2:
        cls = getattr(filters, cls_name)
        accepted = inspect.signature(cls.__init__).parameters
        kwargs = {k: v for k, v in config["blocks"][name].items() if k in accepted}
        if unused_fields := sorted(set(config["blocks"][name]) - set(kwargs)):
            unused[name] = unused_fields
        blocks.append(cls(**kwargs, language=config["language"]))
    return blocks, unused


def task_filters_lang(args) -> dict:
    from datatrove.data import Document

    configs = json.load(open(args.config))
    out, total_cpu, total_items = {}, 0.0, 0
    for lang, config in configs.items():
        with open(os.path.join(args.docs_dir, f"docs-{lang}.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        blocks, unused = fineweb2_blocks(config)
        for block in blocks:  # the word tokenizer loads on the first document
            block.filter(Document(text=rows[0]["text"], id="warm"))
        docs = [Document(text=r["text"], id=r["id"], metadata={"url": r["url"]})
                for k in range(args.repeat) for r in rows]
        kept: list[str] = []

        def run(docs=docs, blocks=blocks, kept=kept):
            for doc in chain(iter(docs), blocks):
                kept.append(doc.id)
                yield doc

        result = timed(run, blocks)
        out[lang] = {**result, "items": len(docs), "kept": len(kept), "tokenizer": config["language"],
                     "kept_ids": sorted(set(kept)), "unused_fields": unused}
        total_cpu += result["timed_cpu_s"]
        total_items += len(docs)
    return {"items": total_items, "timed_cpu_s": total_cpu,
            "timed_wall_s": sum(o["timed_wall_s"] for o in out.values()), "languages": out}


def task_minhash(args) -> dict:
    from datatrove.pipeline.dedup import MinhashDedupSignature

    docs = read_docs(args.docs, args.repeat, args.sample)
    with tempfile.TemporaryDirectory() as out:
        step = MinhashDedupSignature(output_folder=out)
        result = timed(lambda: chain(iter(docs), [step]), [step])
    return {**result, "items": len(docs), "config": str(step.config)}


def fineweb_minhash_config():
    """FineWeb's MinhashConfig: 64-bit sha1 hashes (its `use_64bit_hashes=True`, from before datatrove's default
    became xxhash), 14 buckets of 8 hashes, word 5-grams."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    return MinhashConfig(hash_config=HashConfig(hash_fc="sha1", precision=64), num_buckets=14, hashes_per_bucket=8,
                         n_grams=5)


def task_dedup_path(args) -> dict:
    """One stage of FineWeb's MinHash deduplication, as its example `fineweb.py` configures it (sha1 64-bit hashes,
    14 buckets of 8 hashes, word 5-grams): MinhashDedupSignature after a ParquetReader, MinhashDedupBuckets (one task
    per bucket, run one after the other in this process), MinhashDedupCluster, or MinhashDedupFilter between a
    ParquetReader and a ParquetWriter (the removed documents to their own ParquetWriter)."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter

    config = fineweb_minhash_config()
    work = args.work.rstrip("/")
    folder, name = os.path.split(os.path.abspath(args.docs))

    def reader():
        return ParquetReader(folder, glob_pattern=name, text_key="text", id_key="doc_id")

    pipeline, tasks = {
        "signatures": ([reader(), MinhashDedupSignature(f"{work}/signatures", config=config)], 1),
        "buckets": ([MinhashDedupBuckets(f"{work}/signatures", f"{work}/buckets", config=config)],
                    config.num_buckets),
        "clusters": ([MinhashDedupCluster(f"{work}/buckets", f"{work}/remove_ids", config=config)], 1),
        "removal": ([reader(), MinhashDedupFilter(f"{work}/remove_ids",
                                                  exclusion_writer=ParquetWriter(f"{work}/removed")),
                     ParquetWriter(f"{work}/deduplicated")], 1),
    }[args.step]
    if args.step == "signatures":  # its word tokenizer (spaCy) loads on first use
        pipeline[1].get_shingles("These words warm up the word tokenizer before the timing starts.")
    executor = LocalPipelineExecutor(pipeline, tasks=tasks, workers=1, logging_dir=f"{work}/logs/{args.step}",
                                     skip_completed=False)
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    stats = executor.run()
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    hwm = next(ln for ln in open("/proc/self/status").read().splitlines() if ln.startswith("VmHWM:"))
    return {"step": args.step, "timed_cpu_s": cpu, "timed_wall_s": wall, "tasks": tasks,
            "vm_hwm_bytes": int(hwm.split()[1]) * 1024,  # ru_maxrss keeps the peak of the process it forked from
            "stats": {s.name: {k: (v if isinstance(v, (int, float)) else v.get("total", 0))
                               for k, v in s.stats.to_dict().items() if isinstance(v, (int, float, dict))}
                      for s in stats.stats}}


def timed(make, steps: list) -> dict:
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    items = sum(1 for _ in make() or ())
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    # Each block's counters (total, forwarded, dropped, timeout, ...), and its own time where it tracks one.
    steps_out = {}
    for step in steps:
        counters = {k: (v if isinstance(v, (int, float)) else v.get("total", 0))
                    for k, v in step.stats.stats.to_dict().items() if isinstance(v, (int, float, dict))}
        steps_out[step.name] = {**counters, "seconds": step.stats.time_stats.total}
    return {"items": items, "timed_cpu_s": cpu, "timed_wall_s": wall, "steps": steps_out}


TASKS = {"extract": task_extract, "fineweb": task_fineweb, "filters": task_filters, "minhash": task_minhash,
         "dedup-path": task_dedup_path, "filters-lang": task_filters_lang}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("--corpus", help="a folder of .warc.gz files")
    parser.add_argument("--docs", help="documents as JSON Lines: id, url, text")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--sample", type=int, default=0, help="minhash: this many evenly spaced rows")
    parser.add_argument("--lid", help="a local fastText lid.176 model (.bin or .ftz)")
    parser.add_argument("--docs-dir", help="filters-lang: the folder of docs-<lang>.jsonl")
    parser.add_argument("--config", help="filters-lang: the thresholds per language (anchor-config.json)")
    parser.add_argument("--work", help="dedup-path: the folder of its stages' files")
    parser.add_argument("--step", choices=["signatures", "buckets", "clusters", "removal"], help="dedup-path")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    quiet()
    result = TASKS[args.task](args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"side": "anchor", "task": args.task, **result, "process_cpu_s": cpu_seconds(),
                      "peak_rss_bytes": peak}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
