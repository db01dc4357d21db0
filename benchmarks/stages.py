"""The measurements. Each function runs in its own fresh subprocess (`python -m benchmarks.run --stage NAME`),
so its peak RSS (ru_maxrss of that process) is its own, and returns a JSON-able dict.

Core stages call the processing core directly, one worker, in-process, on local files: warc (read_records) and
extract (read_records + extract_html, as the documents unit does) over the corpus; extractor-* (extract_html with
each extractor) and image-pairs (extract_image_pairs) over every HTML page of the shared WARC files held in
memory; filter and tokenize over the extracted documents. The e2e-* stages run the real work units with
`run_units(..., InProcessRunner())` against the SeaweedFS started by the parent.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

# The stage under test is timed; everything else (imports, loading inputs, writing outputs) is not.
MIN_TIMED_SECONDS = 3.0  # fast stages are repeated until at least this much time is measured


def cpu_seconds() -> float:
    """User + system CPU time of this process, all threads."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


_TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds spent busy by the whole machine, all CPUs (first line of /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    except OSError:
        return 0.0
    return (sum(v) - v[3] - v[4]) / _TICK


def process_cpu_seconds(pid: int | None) -> float:
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


class Meter:
    """Wall-clock and CPU seconds of a block, and the CPU seconds other processes used meanwhile (contention:
    on a 2-core machine another busy process slows a single-threaded stage's wall clock, not its CPU time).
    `also_ours`: pids whose CPU counts as part of the measurement (the object store), not as contention."""

    def __init__(self, also_ours: list[int] | None = None):
        self.also_ours = also_ours or []

    def __enter__(self) -> Meter:
        self.ours0 = [process_cpu_seconds(p) for p in self.also_ours]
        self.busy0, self.cpu0, self.t0 = machine_busy_seconds(), cpu_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = cpu_seconds() - self.cpu0
        self.helpers_cpu = sum(process_cpu_seconds(p) - c for p, c in zip(self.also_ours, self.ours0, strict=True))
        self.other_cpu = max(0.0, machine_busy_seconds() - self.busy0 - self.cpu - self.helpers_cpu)

    def dict(self) -> dict:
        return {"seconds": self.wall, "cpu_seconds": self.cpu, "other_cpu_seconds": self.other_cpu,
                "helpers_cpu_seconds": self.helpers_cpu}


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


def _percentiles_ms(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {}
    ms = sorted(s * 1000 for s in seconds)

    def pct(p: float) -> float:
        return ms[min(len(ms) - 1, int(round(p / 100 * (len(ms) - 1))))]

    return {"mean": statistics.fmean(ms), "p50": pct(50), "p90": pct(90), "p99": pct(99), "max": ms[-1]}


def _summarise_passes(passes: list[dict]) -> dict:
    """Median pass (robust to another process stealing the CPU for a moment) and the first (cold) one."""
    return {
        "passes": len(passes),
        "median_seconds": statistics.median(p["seconds"] for p in passes),
        "median_cpu_seconds": statistics.median(p["cpu_seconds"] for p in passes),
        "first_pass_seconds": passes[0]["seconds"],
        "seconds": sum(p["seconds"] for p in passes),
        "cpu_seconds": sum(p["cpu_seconds"] for p in passes),
        "other_cpu_seconds": sum(p["other_cpu_seconds"] for p in passes),
    }


def _enough(passes: list[dict], min_passes: int = 3) -> bool:
    total = sum(p["seconds"] for p in passes)
    return len(passes) >= 50 or (len(passes) >= min_passes and total >= MIN_TIMED_SECONDS)


# 1. documents core --------------------------------------------------------------------------------------------


def stage_warc(workdir: Path) -> dict:
    """WARC read only: read_records (format sniffing, gzip members, WARC/HTTP headers, HTML payload read and
    charset decode) with the documents unit's reader settings, over the whole corpus, repeated until the time is
    measurable."""
    from llm_assets.core.documents import reader_settings
    from llm_assets.core.readers import ReadReport, read_records
    from llm_assets.settings import DocumentsSettings

    reader = reader_settings(DocumentsSettings())
    corpus = load_json(workdir / "corpus.json")
    paths = [Path(f["path"]) for _ in range(corpus["repeat"]) for f in corpus["files"]]
    gz_bytes = sum(p.stat().st_size for p in paths)
    rss_before = maxrss_bytes()
    passes = []
    while not _enough(passes):
        report = ReadReport()
        yielded = pages = html_bytes = 0
        with Meter() as m:
            for path in paths:
                with open(path, "rb") as f:
                    for rec in read_records(f, path.name, reader, report):
                        yielded += 1
                        if rec.html is not None:
                            pages += 1
                            html_bytes += rec.payload_bytes
        passes.append(m.dict())
    return {
        "files": len(paths), "records": yielded + sum(report.drops.values()), "yielded": yielded,
        "html_pages": pages, "dropped": dict(report.drops), "quarantined": len(report.quarantined),
        "gz_bytes": gz_bytes, "html_bytes": html_bytes, **_summarise_passes(passes),
        "rss_before_bytes": rss_before, "peak_rss_bytes": maxrss_bytes(),
    }


def stage_extract(workdir: Path) -> dict:
    """read_records + extract_html, record by record, as extract_documents does (the settings' extractor, its
    per-page timeout and HTML cap; a timeout is quarantined as `extraction_timeout`); writes the extracted
    documents (documents.SCHEMA) to documents.parquet for the filter and tokenize stages."""
    from urllib.parse import urlsplit

    import pyarrow as pa
    import pyarrow.parquet as pq

    from llm_assets.core import documents
    from llm_assets.core.extract import ExtractionTimeout
    from llm_assets.core.readers import ReadReport, read_records
    from llm_assets.settings import DocumentsSettings

    settings = DocumentsSettings()
    reader = documents.reader_settings(settings)
    extractor = settings.extractor
    corpus = load_json(workdir / "corpus.json")
    files = [Path(f["path"]) for f in corpus["files"]]
    rss_before = maxrss_bytes()
    report = ReadReport()
    rows: list[dict] = []
    page_seconds: list[float] = []
    passes: list[dict] = []
    slow: list[tuple[float, str, int, str]] = []  # (seconds, url, payload bytes, file)
    timed_out: list[str] = []
    pages = html_bytes = gz_bytes = 0
    read_s = extract_s = 0.0
    for rep in range(corpus["repeat"]):
        pass_pages, pass_timeouts = pages, len(timed_out)
        with Meter() as m:
            for path in files:
                gz_bytes += path.stat().st_size
                source = f"raw/BENCH/rep{rep:02d}/{path.name}"
                extract = documents.PageExtractor(settings, extractor)  # a file is a unit (routing's host history)
                with open(path, "rb") as f:
                    it = read_records(f, source, reader, report)
                    t0 = time.perf_counter()
                    for rec in it:
                        t1 = time.perf_counter()
                        read_s += t1 - t0
                        if rec.html is None:  # text a WET/JSON source holds: none in the shared WARC files
                            t0 = time.perf_counter()
                            continue
                        try:
                            routed = extract(rec.html, rec.url)
                            extracted, version, timeout = routed.result, routed.label, False
                        except ExtractionTimeout:
                            extracted, timeout = None, True
                        t0 = time.perf_counter()
                        dt = t0 - t1
                        extract_s += dt
                        page_seconds.append(dt)
                        pages += 1
                        html_bytes += rec.payload_bytes
                        if rep == 0:
                            slow.append((dt, rec.url, rec.payload_bytes, path.name))
                        if timeout:
                            timed_out.append(rec.url)
                            report.quarantine("extraction_timeout", rec.offset, rec.skip, rec.url,
                                              f"over {settings.extract_timeout_s}s")
                        elif extracted is None or len(extracted.text) < settings.min_text_chars:
                            report.skip("no_text")
                        else:
                            rows.append({
                                "doc_id": documents.doc_id(source, rec.record_id, rec.offset, rec.skip),
                                "url": rec.url, "domain": (urlsplit(rec.url).hostname or "").lower(),
                                "crawl": "BENCH", "source_key": source, "source_format": rec.fmt,
                                "record_offset": rec.offset, "record_skip": rec.skip,
                                "warc_record_id": rec.record_id, "fetch_time": rec.fetch_time,
                                "content_type": rec.content_type, "charset": rec.charset, "title": extracted.title,
                                "date": extracted.date, "text": extracted.text, "extractor": version,
                            })
                        t0 = time.perf_counter()  # building the row is not WARC reading
        passes.append({"pass": rep, "pages": pages - pass_pages, "timeouts": len(timed_out) - pass_timeouts,
                       **m.dict()})
    peak = maxrss_bytes()
    pq.write_table(pa.Table.from_pylist(rows, documents.SCHEMA), workdir / "documents.parquet", compression="zstd")
    slow.sort(reverse=True)
    return {
        "files": len(files) * corpus["repeat"], "html_pages": pages, "docs_out": len(rows),
        "dropped": dict(report.drops), "quarantined": len(report.quarantined), "extractor": extractor,
        "timeout_s": settings.extract_timeout_s, "max_html_chars": settings.max_html_chars,
        "timeouts": len(timed_out), "timed_out_pages": sorted(set(timed_out)),
        "gz_bytes": gz_bytes, "html_bytes": html_bytes, "text_chars": sum(len(r["text"]) for r in rows),
        "seconds": sum(p["seconds"] for p in passes), "cpu_seconds": sum(p["cpu_seconds"] for p in passes),
        "other_cpu_seconds": sum(p["other_cpu_seconds"] for p in passes),
        "read_seconds": read_s, "extract_seconds": extract_s, "ms_per_page": _percentiles_ms(page_seconds),
        "per_pass": passes,
        "slowest_pages": [{"ms": s * 1000, "url": u, "payload_bytes": b, "file": f} for s, u, b, f in slow[:8]],
        "rss_before_bytes": rss_before, "peak_rss_bytes": peak,
    }


# 2. extractor comparison and 3. image-text pairs: core functions over the same HTML pages in memory -------------


def _shared_pages(workdir: Path) -> list[dict]:
    """Every HTML page of the shared WARC files (one pass, file by file), as read_records yields it, with the
    doc_id the documents unit gives it. Loaded before the timed block."""
    from llm_assets.core.documents import doc_id, reader_settings
    from llm_assets.core.readers import ReadReport, read_records
    from llm_assets.settings import DocumentsSettings

    reader = reader_settings(DocumentsSettings())
    pages = []
    for f in load_json(workdir / "corpus.json")["files"]:
        source = f"raw/BENCH/{f['name']}"
        with open(f["path"], "rb") as fh:
            for rec in read_records(fh, source, reader, ReadReport()):
                if rec.html is not None:
                    pages.append({"url": rec.url, "html": rec.html, "payload_bytes": rec.payload_bytes,
                                  "file": f["name"], "doc_id": doc_id(source, rec.record_id, rec.offset, rec.skip)})
    return pages


def _page_passes(pages: list[dict], fn, min_passes: int) -> tuple[list[dict], list[list]]:
    """Run fn(page) -> outcome over all pages, pass after pass, each page timed; at least `min_passes` passes
    and until enough time is measured. Returns the passes and, per page, its (seconds, outcome) per pass."""
    per_page: list[list] = [[] for _ in pages]
    passes: list[dict] = []
    while not _enough(passes, min_passes):
        with Meter() as m:
            for i, page in enumerate(pages):
                t0 = time.perf_counter()
                outcome = fn(page)
                per_page[i].append((time.perf_counter() - t0, outcome))
        passes.append(m.dict())
    return passes, per_page


# The extractor comparison's time-limited trafilatura variant: the 1 s limit the comparison was asked for, fixed
# here whatever documents.extract_timeout_s is (sections 1 and 6 run with the settings' limit).
COMPARISON_TIMEOUT_S = 1.0


def _extractor_stage(workdir: Path, extractor: str, timeout_s: float | None) -> dict:
    """extract_html(html, url, extractor) over every HTML page of the shared WARC files, one core, pass after pass
    (as many passes as the corpus repeats the files, more if under the minimum timed time). With `timeout_s`, as
    the documents unit calls it with that limit (and max_chars from DocumentsSettings); timeouts counted."""
    from llm_assets.core.extract import ExtractionTimeout, extract_html, extractor_version
    from llm_assets.settings import DocumentsSettings

    settings = DocumentsSettings()
    corpus = load_json(workdir / "corpus.json")
    pages = _shared_pages(workdir)
    kwargs = {"timeout_s": timeout_s, "max_chars": settings.max_html_chars} if timeout_s else {}
    with Meter() as warm:  # imports and caches a first call loads (resiliparse is imported on first use)
        extract_html(pages[0]["html"], pages[0]["url"], extractor=extractor)
    rss_before = maxrss_bytes()

    def one(page: dict):
        try:
            got = extract_html(page["html"], page["url"], extractor=extractor, **kwargs)
        except ExtractionTimeout:
            return "timeout"
        if got is None or len(got.text) < settings.min_text_chars:
            return None
        return len(got.text)

    passes, per_page = _page_passes(pages, one, corpus["repeat"])
    peak = maxrss_bytes()
    seconds = [s for runs in per_page for s, _ in runs]
    outcomes_first = [runs[0][1] for runs in per_page]
    timeouts_per_pass = [sum(1 for runs in per_page if runs[k][1] == "timeout") for k in range(len(passes))]
    timed_out = sorted({(p["url"], p["payload_bytes"]) for p, runs in zip(pages, per_page, strict=True)
                        if any(o == "timeout" for _, o in runs)})
    slow = sorted(((statistics.median(s for s, _ in runs), p["url"], p["payload_bytes"], p["file"])
                   for p, runs in zip(pages, per_page, strict=True)), reverse=True)[:5]
    return {
        "extractor": extractor_version(extractor), "timeout_s": kwargs.get("timeout_s"),
        "max_chars": kwargs.get("max_chars"), "settings_timeout_s": settings.extract_timeout_s, "pages": len(pages),
        "html_bytes": sum(p["payload_bytes"] for p in pages),
        "pages_with_text": sum(1 for o in outcomes_first if isinstance(o, int)),
        "text_chars": sum(o for o in outcomes_first if isinstance(o, int)),
        "timeouts": sum(timeouts_per_pass), "timeouts_per_pass": timeouts_per_pass,
        "timed_out_pages": [{"url": u, "payload_bytes": b} for u, b in timed_out],
        "ms_per_page": _percentiles_ms(seconds), "warmup_seconds": warm.wall,
        **_summarise_passes(passes), "per_pass": passes,
        "slowest_pages": [{"ms": s * 1000, "url": u, "payload_bytes": b, "file": f} for s, u, b, f in slow],
        "rss_before_bytes": rss_before, "peak_rss_bytes": peak,
    }


def stage_extractor_trafilatura(workdir: Path) -> dict:
    return _extractor_stage(workdir, "trafilatura", timeout_s=None)


def stage_extractor_trafilatura_timeout(workdir: Path) -> dict:
    return _extractor_stage(workdir, "trafilatura", timeout_s=COMPARISON_TIMEOUT_S)


def stage_extractor_resiliparse(workdir: Path) -> dict:
    return _extractor_stage(workdir, "resiliparse", timeout_s=None)


def stage_image_pairs(workdir: Path) -> dict:
    """extract_image_pairs(html, url, doc_id, settings from ImagePairsSettings) over every HTML page of the
    shared WARC files, one core, as the image_text_pairs unit calls it (the unit also reads the raw file)."""
    from llm_assets.core.images import ImagePairSettings, extract_image_pairs
    from llm_assets.settings import ImagePairsSettings

    rules = ImagePairSettings(**ImagePairsSettings().model_dump())
    corpus = load_json(workdir / "corpus.json")
    pages = _shared_pages(workdir)
    with Meter() as warm:
        extract_image_pairs(pages[0]["html"], pages[0]["url"], pages[0]["doc_id"], rules)
    rss_before = maxrss_bytes()
    passes, per_page = _page_passes(
        pages, lambda p: len(extract_image_pairs(p["html"], p["url"], p["doc_id"], rules)), corpus["repeat"])
    peak = maxrss_bytes()
    pairs = [runs[0][1] for runs in per_page]
    return {
        "pages": len(pages), "html_bytes": sum(p["payload_bytes"] for p in pages),
        "pairs_per_pass": sum(pairs), "pages_with_pairs": sum(1 for x in pairs if x),
        "ms_per_page": _percentiles_ms([s for runs in per_page for s, _ in runs]), "warmup_seconds": warm.wall,
        **_summarise_passes(passes), "rss_before_bytes": rss_before, "peak_rss_bytes": peak,
    }


# 4. filtered core ---------------------------------------------------------------------------------------------


class _TimedFilter:
    """Wraps a filter to time its apply() inside apply_filters."""

    def __init__(self, f, seconds: dict[str, float]):
        self.f, self.seconds = f, seconds
        self.name, self.enabled, self.rewrites_text = f.name, f.enabled, f.rewrites_text
        self.reads_extracted_text = f.reads_extracted_text

    def apply(self, df):
        t0 = time.perf_counter()
        out = self.f.apply(df)
        self.seconds[self.name] = self.seconds.get(self.name, 0.0) + time.perf_counter() - t0
        return out


def _datatrove_seconds(batches, settings) -> dict[str, float]:
    """datatrove 0.10.1's blocks for the same rules, one after the other on what the previous kept, as the
    filtered stage chains them: seconds per block over all documents (one pass after a warm-up; it is slow)."""
    import polars as pl

    from llm_assets_support import datatrove_oracle as oracle

    steps = [("url", oracle.url), ("language", oracle.language), ("gopher_repetition", oracle.gopher_repetition),
             ("gopher_quality", oracle.gopher_quality), ("c4_quality", oracle.c4_quality),
             ("fineweb_quality", oracle.fineweb_quality)]
    blocks = {f.name: f for f in settings.blocks()}  # each oracle takes the settings of our block of that name
    for name, reference in steps:  # first use loads spaCy, lid.176 and the suffix list: not in the rate, as for ours
        reference(blocks[name], batches[0].head(8))
    seconds: dict[str, float] = {}
    for df in batches:
        for name, reference in steps:
            t0 = time.perf_counter()
            verdict = reference(blocks[name], df)
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
            df = df.filter(pl.Series([v is None for v in verdict]))
    return seconds


def stage_filter(workdir: Path) -> dict:
    """build_filters(FilteredSettings()) + apply_filters over the extracted documents, in the batches the filtered
    unit uses; writes the kept documents to filtered.parquet."""
    import polars as pl
    import pyarrow.parquet as pq

    from llm_assets.core import filtered
    from llm_assets.core.filters import apply_filters, language_model
    from llm_assets.settings import FilteredSettings

    batches = [pl.from_arrow(b) for b
               in pq.ParquetFile(workdir / "documents.parquet").iter_batches(filtered.BATCH_ROWS)]
    docs = sum(b.height for b in batches)
    text_bytes = int(sum(b["text"].str.len_bytes().sum() for b in batches))
    rss_before = maxrss_bytes()
    with Meter() as load:
        # FineWeb's chain keeping English, as datatrove's blocks below run it
        settings = FilteredSettings.default_with(language={"languages": ("en",)})
        filters = settings.blocks()
        language_model()  # fastText lid.176 load, cached for the process
    kept_parts, dropped_parts, passes = [], [], []
    while not _enough(passes):
        with Meter() as m:
            for df in batches:
                kept, dropped = apply_filters(df, filters, settings.chain_for)  # as the stage runs it
                if not passes:  # the first pass also produces the outputs
                    kept_parts.append(kept)
                    dropped_parts.append(dropped)
        passes.append(m.dict())
    # Breakdown by filter: each filter's apply() timed inside apply_filters, over three more passes.
    per_filter: list[dict[str, float]] = []
    for _ in range(3):
        seconds: dict[str, float] = {}
        for df in batches:
            apply_filters(df, [_TimedFilter(f, seconds) for f in filters])
        per_filter.append(seconds)
    peak = maxrss_bytes()
    kept_all = pl.concat(kept_parts) if kept_parts else pl.DataFrame()
    dropped_all = pl.concat(dropped_parts, how="diagonal_relaxed") if dropped_parts else pl.DataFrame()
    kept_all.write_parquet(workdir / "filtered.parquet", compression="zstd")
    reasons = dict(dropped_all["reason"].value_counts().iter_rows()) if dropped_all.height else {}
    both = pl.concat([kept_all.select("language"), dropped_all.select("language")])
    return {
        "docs_in": docs, "docs_kept": kept_all.height, "dropped": reasons,
        "top_languages": dict(both.get_column("language").value_counts(sort=True).head(8).iter_rows()),
        "text_bytes": text_bytes, "batch_rows": filtered.BATCH_ROWS, **_summarise_passes(passes),
        "load_seconds": load.wall,
        "per_filter_seconds": {k: statistics.median(p.get(k, 0.0) for p in per_filter) for k in per_filter[0]},
        "datatrove_seconds": _datatrove_seconds(batches, settings),
        "polars_threads": pl.thread_pool_size(), "rss_before_bytes": rss_before, "peak_rss_bytes": peak,
    }


# 5. tokenized core --------------------------------------------------------------------------------------------


def stage_tokenize(workdir: Path) -> dict:
    """load_tokenizer(GPT-2) + encode_batch over the filtered texts, in the unit's batch size. Variants, run
    round-robin so that a burst of contention hits them alike: encode only; encode plus what tokenize_documents
    does with the result (encode_batch_fast, ids + EOS lists, Arrow list array); encode_batch_fast alone; and, as a
    reference outside the pipeline, tiktoken on the same GPT-2 ranks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from llm_assets.core import tokenized
    from llm_assets.core.tokenize import load_tokenizer
    from llm_assets.settings import TokenizedSettings

    settings = TokenizedSettings()
    texts = pq.read_table(workdir / "filtered.parquet", columns=["text"]).column("text").to_pylist()
    batches = [texts[i : i + tokenized.BATCH_ROWS] for i in range(0, len(texts), tokenized.BATCH_ROWS)]
    text_bytes = sum(len(t.encode()) for t in texts)
    rss_before = maxrss_bytes()
    with Meter() as load:
        tok = load_tokenizer(str(settings.resolved_path()))
    eos = tok.token_to_id(settings.eos_token)
    token_type = tokenized.schema(tok.get_vocab_size()).field("tokens").type

    def encode() -> int:
        return sum(len(e) for b in batches for e in tok.encode_batch(b, add_special_tokens=False))

    def encode_and_convert() -> int:  # what tokenize_documents does
        n = 0
        for b in batches:
            ids = [e.ids + [eos] for e in tok.encode_batch_fast(b, add_special_tokens=False)]
            n += len(pa.array(ids, token_type).values) - len(ids)  # tokens without the EOS
        return n

    def encode_batch_fast() -> int:
        return sum(len(e) for b in batches for e in tok.encode_batch_fast(b, add_special_tokens=False))

    variants = {"encode": encode, "encode_and_convert": encode_and_convert}
    if hasattr(tok, "encode_batch_fast"):
        variants["encode_batch_fast"] = encode_batch_fast
    # A reference, not the pipeline: tiktoken (a dev dependency) on the same GPT-2 ranks, where available.
    tik = _tiktoken_gpt2(settings.resolved_path())
    if tik is not None:
        threads = int(os.environ.get("RAYON_NUM_THREADS") or os.cpu_count() or 1)

        def tiktoken_reference() -> int:
            return sum(len(x) for b in batches for x in tik.encode_ordinary_batch(b, num_threads=threads))

        variants["tiktoken_reference"] = tiktoken_reference
    passes: dict[str, list[dict]] = {k: [] for k in variants}
    tokens: dict[str, int] = {}
    while not _enough(passes["encode"]):
        for name, fn in variants.items():
            with Meter() as m:
                tokens[name] = fn()
            passes[name].append(m.dict())
    peak = maxrss_bytes()
    # Same ids as encode_batch? Checked on the first batch after the timed passes and the peak RSS reading.
    same_ids: dict[str, bool] = {}
    if batches:
        want = [e.ids for e in tok.encode_batch(batches[0], add_special_tokens=False)]
        if "encode_batch_fast" in variants:
            same_ids["encode_batch_fast"] = want == [e.ids for e
                                                     in tok.encode_batch_fast(batches[0], add_special_tokens=False)]
        if tik is not None:
            same_ids["tiktoken_reference"] = want == tik.encode_ordinary_batch(batches[0])
    return {
        "docs": len(texts), "text_bytes": text_bytes, "batch_rows": tokenized.BATCH_ROWS,
        "rayon_threads": os.environ.get("RAYON_NUM_THREADS", "default"), "load_seconds": load.wall,
        "same_ids_as_encode_batch": same_ids,
        **{name: {"tokens_per_pass": tokens[name], **_summarise_passes(p)} for name, p in passes.items()},
        "rss_before_bytes": rss_before, "peak_rss_bytes": peak,
    }


def _tiktoken_gpt2(folder: Path):
    """tiktoken's GPT-2 (r50k) encoding from the local gpt2.tiktoken rank file, or None (no download, ever)."""
    ranks = folder / "gpt2.tiktoken"
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
        from tiktoken_ext.openai_public import r50k_pat_str
    except ImportError:
        return None
    if not ranks.exists():
        return None
    return tiktoken.Encoding("gpt2-local", pat_str=r50k_pat_str, mergeable_ranks=load_tiktoken_bpe(str(ranks)),
                             special_tokens={"<|endoftext|>": 50256})


# 6. end to end through the work units -------------------------------------------------------------------------


def _store_config(spec: dict):
    from llm_assets.core.lake import StoreConfig

    return StoreConfig(**spec["store"])


def _run(fn, units, spec: dict) -> dict:
    from llm_assets.core.units import InProcessRunner, run_units

    rss_before = maxrss_bytes()
    with Meter(also_ours=[spec["store_pid"]]) as m:
        results = run_units(fn, units, InProcessRunner())
    return {
        "units": len(units), "results": [r.to_dict() for r in results], **m.dict(),
        "store_cpu_seconds": m.helpers_cpu, "rss_before_bytes": rss_before, "peak_rss_bytes": maxrss_bytes(),
        "unit_peak_rss_bytes": max((r.peak_rss_bytes for r in results), default=0),
    }


def documents_units(spec: dict) -> list:
    """One extraction unit per raw file of the spec, as the documents asset makes them."""
    from llm_assets.core.documents import ExtractUnit
    from llm_assets.core.lake import part_key
    from llm_assets.core.units import unit_id
    from llm_assets.settings import load_settings

    store, settings = _store_config(spec), load_settings().documents
    units = []
    for raw in spec["raw"]:
        unit = unit_id("documents", "bench", settings.extractor, raw["key"], raw["etag"])
        units.append(ExtractUnit(store=store, settings=settings, crawl=spec["crawl"], source=raw["key"],
                                 size=raw["size"], unit=unit,
                                 part=part_key("documents", spec["crawl"], spec["shard"], unit),
                                 rejected_part=part_key("documents", spec["crawl"], spec["shard"], unit,
                                                        zone="rejected"),
                                 extractor=settings.extractor))
    return units


def filtered_units(spec: dict) -> list:
    from llm_assets.core.filtered import FilterUnit
    from llm_assets.core.lake import part_key
    from llm_assets.core.units import unit_id
    from llm_assets.settings import load_settings

    store, settings = _store_config(spec), load_settings().filtered
    crawl, shard = spec["crawl"], spec["shard"]
    units = []
    for source in spec["documents_parts"]:
        unit = unit_id("filtered", "bench", source)
        units.append(FilterUnit(store=store, settings=settings, source=source, unit=unit,
                                part=part_key("filtered", crawl, shard, unit),
                                rejected_part=part_key("filtered", crawl, shard, unit, zone="rejected")))
    return units


def tokenized_units(spec: dict) -> list:
    from llm_assets.core.lake import part_key
    from llm_assets.core.tokenized import TokenizeUnit
    from llm_assets.core.units import unit_id
    from llm_assets.settings import load_settings

    store, settings = _store_config(spec), load_settings().tokenized
    units = []
    for source in spec["filtered_parts"]:
        unit = unit_id("tokenized", "bench", source)
        units.append(TokenizeUnit(store=store, settings=settings, source=source, unit=unit,
                                  part=part_key("tokenized", spec["crawl"], spec["shard"], unit)))
    return units


def stage_e2e_documents(workdir: Path) -> dict:
    from llm_assets.core.documents import extract_documents

    spec = load_json(workdir / "e2e.json")
    return _run(extract_documents, documents_units(spec), spec)


def stage_e2e_image_pairs(workdir: Path) -> dict:
    from llm_assets.core.image_text_pairs import ImagePairsUnit, extract_image_text_pairs
    from llm_assets.core.lake import part_key
    from llm_assets.core.units import unit_id
    from llm_assets.settings import load_settings

    spec = load_json(workdir / "e2e.json")
    store, settings = _store_config(spec), load_settings()
    units = []
    for raw in spec["raw"]:
        unit = unit_id("image_text_pairs", "bench", raw["key"], raw["etag"])
        units.append(ImagePairsUnit(store=store, reader=settings.documents, settings=settings.image_text_pairs,
                                    crawl=spec["crawl"], source=raw["key"], size=raw["size"], unit=unit,
                                    part=part_key("image_text_pairs", spec["crawl"], spec["shard"], unit)))
    return _run(extract_image_text_pairs, units, spec)


def stage_e2e_filtered(workdir: Path) -> dict:
    from llm_assets.core.filtered import filter_documents

    spec = load_json(workdir / "e2e.json")
    return _run(filter_documents, filtered_units(spec), spec)


def stage_e2e_tokenized(workdir: Path) -> dict:
    from llm_assets.core.tokenized import tokenize_documents

    spec = load_json(workdir / "e2e.json")
    return _run(tokenize_documents, tokenized_units(spec), spec)


STAGES = {
    "warc": stage_warc,
    "extract": stage_extract,
    "extractor-trafilatura": stage_extractor_trafilatura,
    "extractor-trafilatura-timeout": stage_extractor_trafilatura_timeout,
    "extractor-resiliparse": stage_extractor_resiliparse,
    "image-pairs": stage_image_pairs,
    "filter": stage_filter,
    "tokenize": stage_tokenize,
    "e2e-documents": stage_e2e_documents,
    "e2e-image-pairs": stage_e2e_image_pairs,
    "e2e-filtered": stage_e2e_filtered,
    "e2e-tokenized": stage_e2e_tokenized,
}
