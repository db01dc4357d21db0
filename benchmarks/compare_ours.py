"""The project's side of `make bench-compare`: its processing core on the comparison's inputs, one process per run.

    .venv/bin/python -m benchmarks.compare_ours TASK [options]

Prints one JSON line, like the anchor's side (benchmarks/compare_anchor.py): the items processed, the CPU seconds
of the timed block and of the whole process (user + system, this process and the children it waited for), wall
seconds, peak RSS. Imports, model loads and input reads are outside the timed block.

Tasks:
  extract     read_records + extract_html, record by record as the documents unit calls them (the settings'
              per-page limit and HTML cap), with --extractor, over the WARC files given
  fineweb     the same extraction with the settings' extractor, then apply_filters with the default chain
              (FilteredSettings) in the filtered unit's batches: WARC to filtered documents
  make-docs   the extracted documents of `fineweb`'s first half, written once as Parquet (ours) and JSON Lines
              (the anchor's input) for `filters` and `minhash`
  filters     apply_filters over those documents, --repeat times: the default chain, or with --shared only the six
              blocks datatrove also has (url, language, Gopher repetition and quality, C4, FineWeb quality), each
              language through its blocks as the filtered stage runs them (FilteredSettings.chain_for: a language
              the chain does not keep stops at the language block); each pass segments the documents afresh;
              --measure until_dropped: a block measures only the documents no earlier block dropped (the cascade
              datatrove runs), every_document (the default) all of them
  filters-lang  per language (docs-<lang>.jsonl of --docs-dir, benchmarks.languages), apply_filters with our
              FineWeb-2 blocks for it (gopher_repetition, fineweb_quality, gopher_quality from
              FilteredSettings.chain_for: the table's thresholds, the language's word segmenter), --repeat times;
              CPU seconds per language
  scale       a stage's work spread over --workers processes by the project's PoolRunner (one unit per input
              file), wall clock: --stage documents (read_records + extract_html per WARC file) or tokenize
              (encode_batch_fast + the Arrow conversion tokenize_documents does, per part of the documents)
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

WARM_ASTRAL = "A warm-up page, with the emoji \U0001F600 and enough words to pass the first rules of the chain. " * 20
SHARED_RULES = ("url", "language", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")


def cpu_seconds() -> float:
    """User + system CPU of this process and of the children it has waited for (pool workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


PROFILE = False  # --profile: after the timed block, run it once more under cProfile and report where time goes


def timed(fn) -> dict:
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    out = fn()
    out = {**out, "timed_cpu_s": cpu_seconds() - cpu0, "timed_wall_s": time.perf_counter() - t0}
    if PROFILE:
        out["profile"] = profile(fn)
    return out


def profile(fn, top: int = 15) -> list[dict]:
    """The functions with the most own time (and their cumulative time) over one more run of fn."""
    import cProfile
    import pstats

    prof = cProfile.Profile(time.process_time)
    prof.runcall(fn)
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return [{"function": f"{Path(file).name}:{line}({name})", "calls": nc, "own_s": round(tt, 3),
             "cumulative_s": round(ct, 3)} for (file, line, name), (_cc, nc, tt, ct, _callers) in rows]


def warm_extractor(extractor: str) -> None:
    """The extractor's imports and lazily built state, before the timed block (the anchor warms up alike)."""
    from llm_assets.core.extract import ROUTED, warm_up
    from llm_assets.settings import DocumentsSettings

    routing = DocumentsSettings().routing
    for name in (routing.primary, routing.fast) if extractor == ROUTED else (extractor,):
        warm_up(name)


def extract_rows(files: list[str], extractor: str, counts: dict) -> list[dict]:
    """What extract_documents does per record (rows reduced to what the filters read), each file as one unit."""
    from llm_assets.core.documents import EXTRACTED_BY, ROUTED_FOR, PageExtractor, reader_settings
    from llm_assets.core.extract import ExtractionTimeout
    from llm_assets.core.readers import ReadReport, read_records
    from llm_assets.settings import DocumentsSettings

    settings = DocumentsSettings()
    reader = reader_settings(settings)
    report = ReadReport()
    rows = []
    for n, path in enumerate(files):
        extract = PageExtractor(settings, extractor)
        with open(path, "rb") as f:
            for rec in read_records(f, Path(path).name, reader, report):
                if rec.html is None:
                    continue
                counts["pages"] = counts.get("pages", 0) + 1
                try:
                    got = extract(rec.html, rec.url).result
                except ExtractionTimeout:
                    counts["timeouts"] = counts.get("timeouts", 0) + 1
                    continue
                if got is None or len(got.text) < settings.min_text_chars:
                    continue
                rows.append({"doc_id": f"{n}/{rec.offset}", "url": rec.url, "text": got.text})
        for key, value in extract.counts.items():  # pages per extractor, routed per reason
            if key.startswith((EXTRACTED_BY, ROUTED_FOR)):
                counts[key] = counts.get(key, 0) + value
    counts["records_dropped"] = sum(report.drops.values())
    return rows


def task_extract(args) -> dict:
    warm_extractor(args.extractor)
    counts: dict = {}

    def run() -> dict:
        rows = extract_rows(args.files, args.extractor, counts)
        return {"docs_out": len(rows)}

    result = timed(run)
    return {**result, "items": counts.get("pages", 0), **counts, "extractor": args.extractor}


def frames(rows: list[dict], batch_rows: int) -> list:
    """Rows as documents parts (documents.SCHEMA; the columns extraction did not fill are null), in batches."""
    import polars as pl
    import pyarrow as pa

    from llm_assets.core.documents import SCHEMA

    df = pl.from_arrow(pa.Table.from_pylist(rows, SCHEMA))
    assert isinstance(df, pl.DataFrame)
    return [df.slice(i, batch_rows) for i in range(0, df.height, batch_rows)]


def chain(shared_only: bool) -> tuple[list, Callable[[str], list]]:
    """FineWeb's chain, English only, as the datatrove blocks it is compared with run it, and its blocks per language
    as the filtered stage runs them (`FilteredSettings.chain_for`): a page in a language the chain does not keep goes
    no further than the language block, as after datatrove's LanguageFilter (measured by every block, a Chinese
    page was segmented by jieba three times, and jieba's dictionary loaded in the timed block)."""
    from llm_assets.core.filters import language_model
    from llm_assets.settings import FilteredSettings

    settings = FilteredSettings.default_with(language={"languages": ("en",)})

    def chosen(blocks: list) -> list:
        return [b for b in blocks if b.name in SHARED_RULES] if shared_only else blocks

    language_model()  # fastText lid.176, loaded once per process
    return chosen(settings.blocks()), lambda code: chosen(settings.chain_for(code))


def task_fineweb(args) -> dict:
    from llm_assets.core import filtered
    from llm_assets.core.filters import apply_filters
    from llm_assets.settings import DocumentsSettings

    extractor = DocumentsSettings().extractor
    warm_extractor(extractor)
    blocks, chain_for = chain(False)
    counts: dict = {}

    def run() -> dict:
        rows = extract_rows(args.files, extractor, counts)
        kept = 0
        for df in frames(rows, filtered.BATCH_ROWS):
            kept += apply_filters(df, blocks, chain_for)[0].height
        return {"docs_extracted": len(rows), "docs_kept": kept}

    return {**timed(run), "items": counts.get("pages", 0), **counts, "extractor": extractor}


def task_make_docs(args) -> dict:
    import polars as pl

    from llm_assets.settings import DocumentsSettings

    extractor = DocumentsSettings().extractor
    rows = extract_rows(args.files, extractor, {})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pl.concat(frames(rows, max(1, len(rows)))).write_parquet(out / "docs.parquet")
    with open(out / "docs.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({"id": r["doc_id"], "url": r["url"], "text": r["text"]}) + "\n")
    return {"items": len(rows), "extractor": extractor}


def task_filters(args) -> dict:
    import polars as pl

    from llm_assets.core import filtered
    from llm_assets.core.filters import apply_filters

    df = pl.read_parquet(Path(args.docs))
    batches = [df.slice(i, filtered.BATCH_ROWS) for i in range(0, df.height, filtered.BATCH_ROWS)]
    blocks, chain_for = chain(args.shared)
    # First-call costs (regex compilation, word lists) outside the timing, the word pattern's variant for characters
    # beyond U+FFFF included: it is built on the first text that has one, 0.3 s of walking the code points.
    apply_filters(pl.concat([df.head(8), df.head(1).with_columns(text=pl.lit(WARM_ASTRAL))]), blocks, chain_for,
                  args.measure)

    def run() -> dict:
        kept = 0
        for _ in range(args.repeat):
            forget_segmented()
            for b in batches:
                kept += apply_filters(b, blocks, chain_for, args.measure)[0].height
        return {"docs_kept": kept}

    result = timed(run)
    # Where the time goes: each block's apply() timed inside apply_filters, one more pass, after the timed block.
    seconds: dict[str, float] = {}
    for _ in range(args.repeat):
        forget_segmented()
        for b in batches:
            apply_filters(b, [_TimedBlock(f, seconds) for f in blocks],
                          lambda code: [_TimedBlock(f, seconds) for f in chain_for(code)], args.measure)
    return {**result, "items": df.height * args.repeat, "measure": args.measure, "blocks": [b.name for b in blocks],
            "block_cpu_s": {k: round(v, 3) for k, v in seconds.items()}}


def task_filters_lang(args) -> dict:
    import polars as pl

    from benchmarks.languages import FINEWEB2_BLOCKS, LANGUAGES
    from llm_assets.core import filtered
    from llm_assets.core.filters import apply_filters
    from llm_assets.settings import FilteredSettings

    settings = FilteredSettings()
    out, total_cpu, total_items = {}, 0.0, 0
    for lang in args.languages or list(LANGUAGES):
        with open(Path(args.docs_dir) / f"docs-{lang}.jsonl") as f:
            rows = [json.loads(line) for line in f]
        docs = [{"doc_id": r["id"], "url": r["url"], "text": r["text"]} for r in rows]
        df = pl.concat(frames(docs, len(docs))).with_columns(language=pl.lit(lang),
                                                                 language_score=pl.lit(1.0, pl.Float32))
        batches = [df.slice(i, filtered.BATCH_ROWS) for i in range(0, df.height, filtered.BATCH_ROWS)]
        blocks = [b for b in settings.chain_for(lang) if b.name in FINEWEB2_BLOCKS]
        apply_filters(df.head(8), blocks)  # the segmenter loads, the patterns compile: outside the timing
        kept: list[str] = []

        def run(batches=batches, blocks=blocks, kept=kept) -> dict:
            for _ in range(args.repeat):
                forget_segmented()
                for b in batches:
                    kept.extend(apply_filters(b, blocks)[0]["doc_id"].to_list())
            return {}

        result = timed(run)
        out[lang] = {**result, "items": df.height * args.repeat, "kept": len(kept), "kept_ids": sorted(set(kept)),
                     "blocks": [b.name for b in blocks]}
        total_cpu += result["timed_cpu_s"]
        total_items += df.height * args.repeat
    return {"items": total_items, "timed_cpu_s": total_cpu,
            "timed_wall_s": sum(o["timed_wall_s"] for o in out.values()), "languages": out}


def forget_segmented() -> None:
    """Each pass over the same documents segments them again, as a crawl's pages are segmented once: the segmenters'
    memory of texts (`core.segment`) would otherwise serve every pass after the first."""
    from llm_assets.core import segment

    segment.forget()


class _TimedBlock:
    """A block whose apply() (the language block's judge(), in a chain per language) adds its CPU seconds to
    `seconds[name]`; anything else the chain reads of a block (`context`, `keeps`, ...) is the block's."""

    def __init__(self, block, seconds: dict[str, float]):
        self.block, self.seconds = block, seconds

    def __getattr__(self, name: str):
        return getattr(self.block, name)

    def _timed(self, method, *args):
        t0 = time.process_time()
        out = method(*args)
        self.seconds[self.block.name] = self.seconds.get(self.block.name, 0.0) + time.process_time() - t0
        return out

    def apply(self, df):
        return self._timed(self.block.apply, df)

    def judge(self, df, threshold_of):
        return self._timed(self.block.judge, df, threshold_of)


# Scaling: the project's PoolRunner over units of real work, 1 worker against 2 --------------------------------


def _documents_unit(path: str):
    from llm_assets.core.units import UnitResult

    t0 = time.perf_counter()
    counts: dict = {}
    rows = extract_rows([path], _extractor(), counts)
    return UnitResult(unit=path, source=path, rows_in=counts.get("pages", 0), rows_out=len(rows),
                      seconds=time.perf_counter() - t0)


def _extractor() -> str:
    from llm_assets.settings import DocumentsSettings

    return DocumentsSettings().extractor


def _tokenize_unit(path: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from llm_assets.core import tokenized
    from llm_assets.core.tokenize import load_tokenizer
    from llm_assets.core.units import UnitResult
    from llm_assets.settings import TokenizedSettings

    t0 = time.perf_counter()
    settings = TokenizedSettings()
    tok = _tokenizer(str(settings.resolved_path()), load_tokenizer)
    eos = tok.token_to_id(settings.eos_token)
    token_type = tokenized.schema(tok.get_vocab_size()).field("tokens").type
    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
    tokens = 0
    for i in range(0, len(texts), tokenized.BATCH_ROWS):
        ids = [e.ids + [eos] for e in tok.encode_batch_fast(texts[i : i + tokenized.BATCH_ROWS],
                                                            add_special_tokens=False)]
        tokens += len(pa.array(ids, token_type).values)
    return UnitResult(unit=path, source=path, rows_in=len(texts), rows_out=tokens, seconds=time.perf_counter() - t0)


_TOKENIZERS: dict = {}


def _tokenizer(path: str, load):
    if path not in _TOKENIZERS:
        _TOKENIZERS[path] = load(path)
    return _TOKENIZERS[path]


def task_scale(args) -> dict:
    from llm_assets.core.units import InProcessRunner, PoolRunner, run_units

    fn = {"documents": _documents_unit, "tokenize": _tokenize_unit}[args.stage]
    runner = InProcessRunner() if args.workers == 1 else PoolRunner(workers=args.workers)
    try:  # pool workers are the fork server's children: their CPU is not in this process's RUSAGE_CHILDREN
        from llm_assets.core.units import pool_cpu_seconds
    except ImportError:
        def pool_cpu_seconds() -> float:
            return 0.0
    pool0 = pool_cpu_seconds()
    results = timed(lambda: {"results": run_units(fn, args.files, runner)})
    results["timed_cpu_s"] += pool_cpu_seconds() - pool0
    done = results.pop("results")
    return {**results, "items": sum(r.rows_in for r in done), "units": len(done), "workers": args.workers,
            "stage": args.stage}


TASKS = {"extract": task_extract, "fineweb": task_fineweb, "make-docs": task_make_docs, "filters": task_filters,
         "scale": task_scale, "filters-lang": task_filters_lang}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("--files", nargs="*", default=[], help="input files (WARC, or Parquet parts for scale)")
    parser.add_argument("--extractor", default="trafilatura")
    parser.add_argument("--docs", help="documents Parquet (filters)")
    parser.add_argument("--out", help="output folder (make-docs)")
    parser.add_argument("--docs-dir", help="filters-lang: the folder of docs-<lang>.jsonl")
    parser.add_argument("--languages", nargs="*", help="filters-lang: these languages only (default: all)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--shared", action="store_true", help="filters: the six blocks datatrove also has")
    parser.add_argument("--measure", choices=("every_document", "until_dropped"), default="every_document",
                        help="filters: what the chain measures (filtered.measure)")
    parser.add_argument("--stage", choices=("documents", "tokenize"), default="documents")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="also profile one more run (cProfile, CPU time)")
    args = parser.parse_args()
    global PROFILE
    PROFILE = args.profile
    result = TASKS[args.task](args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"side": "ours", "task": args.task, **result, "process_cpu_s": cpu_seconds(),
                      "peak_rss_bytes": peak}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
