"""Preview a change of settings before running it: what the new settings would keep and drop, against what the lake
holds now.

Two ways, chosen by what changed. A change of `filtered` thresholds only is re-decided over the scores `filtered`
stored for every document of the crawl (`core.scores`): the whole crawl, no sample, no run. Any other change runs
the stale shard stages' work units (`documents`, then `filtered` on the parts it wrote) on a deterministic sample of
their inputs, into a scratch prefix (`scratch/preview/<id>/`: no manifest, nothing under `lake/` or `rejected/`,
removed after, even when the preview fails), and compares the outcome with the committed partitions' for the same
inputs. Crawl-level stages read every shard: a sample tells nothing of them, the forecast gives their cost.

The report: documents and tokens kept per stage and language, each block's drop rate, before and after; examples of
documents newly dropped and newly kept with the block, reason, measured value and threshold that decided (as `why`
prints them); the sample; and the sample's figures scaled to the crawl (÷ the sampled fraction of input bytes).
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from llm_assets.core.lake import Lake, scratch_prefix
from llm_assets.core.partition import read_manifest
from llm_assets.core.units import Runner, UnitResult, WorkUnit, run_units

DEFAULT_SAMPLE = 0.01
EXAMPLES = 5  # newly dropped and newly kept documents shown, each
ALL = "(all)"  # the language of a stage that has none (documents)
# What a crawl-level stage reads: every shard of its crawl, so a sample of units says nothing of it.
CRAWL_LEVEL_NOTE = "forecast only: reads every shard"
# One row per document that entered `filtered`, as both ways see it: kept (filter null) or dropped by a block.
DECISIONS = {"source": pl.String, "doc_id": pl.String, "url": pl.String, "language": pl.String, "filter": pl.String,
             "reason": pl.String, "measured": pl.String, "threshold": pl.String, "tokens": pl.Int64}
Encoder = Callable[[list[str]], list[list[int]]]


def parse_sample(text: str | float) -> float:
    """`--sample`: "1%", "0.5%" or a fraction such as 0.01, in (0, 1]."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"--sample {text!r}: expected a percentage such as 1% or a fraction such as 0.01") from None
    if not 0 < value <= 1:
        raise ValueError(f"--sample {text!r}: must be above 0 and at most 100%")
    return value


def sample_order(source: str) -> str:
    """Where an input falls in every sample: a hash of its name, so a sample is the same on every machine and
    run, and a larger fraction holds a smaller one."""
    return hashlib.sha256(source.encode()).hexdigest()


def take_sample(sources: Sequence[str], fraction: float) -> list[str]:
    """The first ceil(fraction × n) inputs in `sample_order` (at least one, when there are any)."""
    if not sources:
        return []
    return sorted(sources, key=sample_order)[:max(1, math.ceil(fraction * len(sources)))]


def new_preview_id() -> str:
    return secrets.token_hex(8)


@contextmanager
def scratch(lake: Lake, preview_id: str | None = None) -> Iterator[str]:
    """A scratch prefix for one preview, emptied when the block ends, whatever happened in it."""
    prefix = scratch_prefix(preview_id or new_preview_id())
    try:
        yield prefix
    finally:
        lake.delete([o.key for o in lake.list(prefix)])


# -- the report --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeptRow:
    """A stage's documents (and tokens, when counted) kept for one language, before and after the change."""

    stage: str
    language: str
    documents_before: int
    documents_after: int
    tokens_before: int | None = None
    tokens_after: int | None = None


@dataclass(frozen=True)
class BlockRow:
    """One block's drops, before and after: documents and the share of the documents that entered the stage."""

    block: str
    dropped_before: int
    dropped_after: int
    rate_before: float
    rate_after: float


@dataclass(frozen=True)
class Example:
    """A document whose fate changes: the block, reason, measured value and threshold that decided (after the change
    for a newly dropped one, before it for a newly kept one)."""

    change: Literal["newly dropped", "newly kept"]
    doc_id: str
    url: str
    block: str
    reason: str
    measured: str | None
    threshold: str | None


@dataclass(frozen=True)
class SampleInfo:
    """The units a sample ran: their inputs, and the share of the stale inputs' bytes they hold."""

    units: tuple[str, ...]
    units_total: int
    bytes_sampled: int
    bytes_total: int

    @property
    def fraction(self) -> float:
        return self.bytes_sampled / self.bytes_total if self.bytes_total else 1.0


@dataclass(frozen=True)
class PreviewReport:
    mode: Literal["thresholds", "sample", "nothing"]
    crawls: tuple[str, ...]
    planned: tuple[tuple[str, int], ...]  # stale asset -> partitions, in build order
    kept: tuple[KeptRow, ...] = ()
    blocks: tuple[BlockRow, ...] = ()
    examples: tuple[Example, ...] = ()
    sample: SampleInfo | None = None
    not_thresholds: str = ""  # why the change is not previewed over the stored scores
    crawl_level: tuple[str, ...] = ()  # stale crawl-level stages: forecast only
    forecast: str = ""  # the forecast of the planned partitions, rendered
    forecast_json: dict | None = None
    notes: tuple[str, ...] = ()
    # per document of the sample (or crawl) after the change: source, doc_id, filter, reason (not rendered)
    decisions: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=DECISIONS), compare=False)

    @property
    def scale(self) -> float:
        """What multiplies the sample's figures to the crawl's: 1 / the sampled fraction of input bytes."""
        return 1 / self.sample.fraction if self.sample is not None and self.sample.fraction else 1.0

    def to_json(self) -> dict:
        return {
            "mode": self.mode, "crawls": list(self.crawls),
            "planned": {asset: n for asset, n in self.planned},
            "kept": [vars(r) for r in self.kept], "blocks": [vars(r) for r in self.blocks],
            "examples": [vars(e) for e in self.examples],
            "sample": None if self.sample is None else {
                "units": list(self.sample.units), "units_total": self.sample.units_total,
                "bytes_sampled": self.sample.bytes_sampled, "bytes_total": self.sample.bytes_total,
                "fraction_of_input_bytes": round(self.sample.fraction, 6)},
            "scaled_to_crawl": self.scaled(),
            "not_thresholds": self.not_thresholds or None,
            "crawl_level": {asset: CRAWL_LEVEL_NOTE for asset in self.crawl_level},
            "forecast": self.forecast_json, "notes": list(self.notes),
        }

    def scaled(self) -> list[dict[str, Any]]:
        """Each stage's documents and tokens kept before and after, scaled to the crawl."""
        out = []
        for stage in dict.fromkeys(r.stage for r in self.kept):
            rows = [r for r in self.kept if r.stage == stage]
            total = {k: sum(getattr(r, k) or 0 for r in rows) for k in
                     ("documents_before", "documents_after", "tokens_before", "tokens_after")}
            out.append({"stage": stage, **{k: round(v * self.scale) for k, v in total.items()}})
        return out

    def kept_table(self) -> str:
        rows = [f"| {r.stage} | {r.language} | {r.documents_before:,} | {r.documents_after:,} | "
                f"{_delta(r.documents_before, r.documents_after)} | {_n(r.tokens_before)} | {_n(r.tokens_after)} |"
                for r in self.kept]
        return ("| stage | language | documents before | after | change | tokens before | after |\n"
                "|---|---|--:|--:|--:|--:|--:|\n" + "\n".join(rows)) if rows else "nothing kept either way"

    def blocks_table(self) -> str:
        rows = [f"| {b.block} | {b.dropped_before:,} | {b.dropped_after:,} | {b.rate_before:.2%} | {b.rate_after:.2%} |"
                for b in self.blocks]
        return ("| block | dropped before | after | drop rate before | after |\n|---|--:|--:|--:|--:|\n"
                + "\n".join(rows)) if rows else "no block drops anything either way"

    def examples_table(self) -> str:
        rows = [f"| {e.change} | `{e.doc_id}` | {e.url} | {e.block} | {e.reason} | {e.measured or ''} | "
                f"{e.threshold or ''} |" for e in self.examples]
        return ("| | doc_id | url | block | reason | measured | threshold |\n|---|---|---|---|---|---|---|\n"
                + "\n".join(rows)) if rows else "no document changes fate"

    def scaled_table(self) -> str:
        rows = [f"| {s['stage']} | {s['documents_before']:,} | {s['documents_after']:,} | "
                f"{_n(s['tokens_before'] or None)} | {_n(s['tokens_after'] or None)} |" for s in self.scaled()]
        return ("| stage | documents before | after | tokens before | after |\n|---|--:|--:|--:|--:|\n"
                + "\n".join(rows)) if rows else ""

    def render(self) -> str:
        """The report as people read it in a terminal."""
        lines = [f"preview of crawl{'s' * (len(self.crawls) != 1)} {', '.join(self.crawls) or '(none)'}: "
                 + {"thresholds": "a change of thresholds only, re-decided over the stored scores of every document "
                                  "(no sample, no run)",
                    "sample": "the stale stages run on a sample, into a scratch prefix (removed)",
                    "nothing": "nothing the change makes stale"}[self.mode]]
        if self.not_thresholds:
            lines.append(f"not a change of thresholds only: {self.not_thresholds}")
        if self.planned:
            lines.append("stale: " + ", ".join(f"{a} ({n} partition{'s' * (n != 1)})" for a, n in self.planned))
        if self.sample is not None:
            lines.append(f"sample: {len(self.sample.units)} of {self.sample.units_total} units, "
                         f"{self.sample.bytes_sampled:,} of {self.sample.bytes_total:,} input bytes "
                         f"({self.sample.fraction:.2%}); figures below are the sample's")
        lines += ["", _text_table(["stage", "language", "docs before", "after", "change", "tokens before", "after"],
                                  [[r.stage, r.language, f"{r.documents_before:,}", f"{r.documents_after:,}",
                                    _delta(r.documents_before, r.documents_after), _n(r.tokens_before),
                                    _n(r.tokens_after)] for r in self.kept])]
        lines += ["", _text_table(["block", "dropped before", "after", "rate before", "after"],
                                  [[b.block, f"{b.dropped_before:,}", f"{b.dropped_after:,}", f"{b.rate_before:.2%}",
                                    f"{b.rate_after:.2%}"] for b in self.blocks], names=1)]
        if self.examples:
            lines.append("")
            for e in self.examples:
                decided = f"measured: {e.measured} (dropped when {e.threshold})" if e.threshold else ""
                lines.append(f"{e.change}: {e.doc_id} {e.url}\n  {e.block}: {e.reason}"
                             + (f"\n  {decided}" if decided else ""))
        if self.sample is not None:
            lines += ["", f"scaled to the crawl (× {self.scale:,.1f}):",
                      _text_table(["stage", "docs before", "after", "tokens before", "after"],
                                  [[s["stage"], f"{s['documents_before']:,}", f"{s['documents_after']:,}",
                                    _n(s["tokens_before"] or None), _n(s["tokens_after"] or None)]
                                   for s in self.scaled()], names=1)]
        for asset in self.crawl_level:
            lines.append(f"{asset}: {CRAWL_LEVEL_NOTE}")
        if self.forecast:
            lines += ["", "forecast of the rebuild:", self.forecast]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _n(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def _delta(before: int, after: int) -> str:
    return f"{after - before:+,}" + (f" ({(after - before) / before:+.1%})" if before else "")


def _text_table(header: list[str], rows: list[list[str]], names: int = 2) -> str:
    """A fixed-width table: the first `names` columns left-aligned, the figures right-aligned."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    return "\n".join("  ".join(str(c).ljust(w) if i < names else str(c).rjust(w) for i, (c, w) in
                               enumerate(zip(row, widths, strict=True))) for row in [header, *rows])


# -- comparing two outcomes --------------------------------------------------------------------------------------


def compare(before: pl.DataFrame, after: pl.DataFrame, chain: Sequence[str], examples: int = EXAMPLES
            ) -> tuple[list[KeptRow], list[BlockRow], list[Example]]:
    """`filtered`'s kept documents per language, drops per block and the documents whose fate changes, from two
    frames of `DECISIONS` over the same documents."""
    kept = []
    k_before, k_after = (f.filter(pl.col("filter").is_null()) for f in (before, after))
    languages = sorted(set(k_before["language"].fill_null("?")) | set(k_after["language"].fill_null("?")))
    for language in languages:
        b, a = (f.filter(pl.col("language").fill_null("?") == language) for f in (k_before, k_after))
        kept.append(KeptRow("filtered", language, b.height, a.height, _tokens(b), _tokens(a)))
    blocks = []
    order = {name: i for i, name in enumerate(["takedown", *chain])}
    counts_b, counts_a = (dict(f.filter(pl.col("filter").is_not_null()).group_by("filter").len().iter_rows())
                          for f in (before, after))
    for block in sorted(set(counts_b) | set(counts_a), key=lambda b: (order.get(b, len(order)), b)):
        nb, na = counts_b.get(block, 0), counts_a.get(block, 0)
        blocks.append(BlockRow(block, nb, na, nb / before.height if before.height else 0.0,
                               na / after.height if after.height else 0.0))
    joined = before.select("doc_id", "url", *(pl.col(c).alias(f"{c}_before") for c in
                                              ("filter", "reason", "measured", "threshold"))) \
        .join(after.select("doc_id", "filter", "reason", "measured", "threshold"), on="doc_id", how="inner")
    dropped = joined.filter(pl.col("filter_before").is_null() & pl.col("filter").is_not_null()).sort("doc_id")
    regained = joined.filter(pl.col("filter_before").is_not_null() & pl.col("filter").is_null()).sort("doc_id")
    found = [Example("newly dropped", r["doc_id"], r["url"] or "", r["filter"], r["reason"] or "", r["measured"],
                     r["threshold"]) for r in dropped.head(examples).iter_rows(named=True)]
    found += [Example("newly kept", r["doc_id"], r["url"] or "", r["filter_before"], r["reason_before"] or "",
                      r["measured_before"], r["threshold_before"])
              for r in regained.head(examples).iter_rows(named=True)]
    return kept, blocks, found


def _tokens(kept: pl.DataFrame) -> int | None:
    return None if kept["tokens"].null_count() == kept.height and kept.height else int(kept["tokens"].sum() or 0)


def decisions_of(lake: Lake, source: str, kept_parts: Sequence[str], rejected_parts: Sequence[str],
                 encoder: Encoder | None = None) -> pl.DataFrame:
    """`DECISIONS` of one input from `filtered`'s parts: its kept documents (tokens counted with `encoder`, when
    given) and its rejected ones, with the measured value and threshold of the rule that dropped each."""
    frames = []
    if kept_parts:
        kept = lake.scan(list(kept_parts)).select("doc_id", "url", "language", "text").collect()
        tokens = [len(ids) for ids in encoder(kept["text"].to_list())] if encoder is not None and kept.height else None
        frames.append(kept.drop("text").with_columns(
            pl.Series("tokens", tokens, pl.Int64) if tokens is not None else pl.lit(None, pl.Int64).alias("tokens")))
    if rejected_parts:
        rejected = lake.scan(list(rejected_parts)).select("doc_id", "url", "language", "filter", "reason",
                                                           "detail").collect()
        details = [_rule(d) for d in rejected["detail"].to_list()]
        frames.append(rejected.drop("detail").with_columns(
            pl.Series("measured", [d[0] for d in details], pl.String),
            pl.Series("threshold", [d[1] for d in details], pl.String)))
    frame = pl.concat(frames, how="diagonal") if frames else pl.DataFrame()
    return frame.with_columns(pl.lit(source).alias("source")).pipe(_conform)


def _rule(detail: str | None) -> tuple[str | None, str | None]:
    """A rejected row's measured value and threshold, when a filter rule dropped it (as `why` reads them)."""
    try:
        value = json.loads(detail) if detail else None
    except ValueError:
        return None, None
    if isinstance(value, dict) and "threshold" in value:
        return json.dumps(value.get("measured"), ensure_ascii=False), str(value["threshold"])
    return None, None


def _conform(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select([(pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c)
                         for c, t in DECISIONS.items()])


# -- the sample run ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """One input of the first stale stage of its partition: a raw file (`documents` is stale) or a committed
    documents part (only `filtered` is), with its size and, for a raw file, its ETag."""

    stage: Literal["documents", "filtered"]
    crawl: str
    shard: str
    key: str
    size: int
    etag: str = ""


@dataclass(frozen=True)
class SampleStages:
    """How the preview builds and runs the stale stages' units: the same functions the assets use, given the
    scratch prefix (`documents(input, prefix)` -> extraction units; `filtered(crawl, shard, parts, prefix)` ->
    filter units), and the functions the units run."""

    documents: Callable[[Input, str], Sequence[WorkUnit]]
    filtered: Callable[[str, str, Sequence[str], str], Sequence[WorkUnit]]
    extract_fn: Callable[[Any], UnitResult]
    filter_fn: Callable[[Any], UnitResult]


@dataclass(frozen=True)
class SampleOutcome:
    before: pl.DataFrame  # DECISIONS of the committed data for the sampled inputs
    after: pl.DataFrame  # DECISIONS of the scratch run
    documents: tuple[KeptRow, ...]  # the documents stage's documents, when it ran
    info: SampleInfo


def run_sample(lake: Lake, inputs: Sequence[Input], fraction: float, stages: SampleStages, runner: Runner, prefix: str,
               encoder: Encoder | None = None) -> SampleOutcome:
    """Run the sampled inputs of each crawl (at least one each) through the stale stages into `prefix`, chained (the
    scratch documents parts feed the scratch filter units), and read the committed outcome of the same inputs. Each
    stage's units of the whole sample go to the runner at once, as a partition's do."""
    by_key = {(i.crawl, i.key): i for i in inputs}
    chosen = [by_key[(crawl, key)] for crawl in sorted({i.crawl for i in inputs})
              for key in take_sample([i.key for i in inputs if i.crawl == crawl], fraction)]
    extracted = _run_each(stages.extract_fn, [stages.documents(i, prefix) if i.stage == "documents" else []
                                              for i in chosen], runner)
    parts = [[u.part for u in ran if u.part] if i.stage == "documents" else [i.key]
             for i, ran in zip(chosen, extracted, strict=True)]
    filtered = _run_each(stages.filter_fn,
                         [stages.filtered(i.crawl, i.shard, p, prefix)
                          for i, p in zip(chosen, parts, strict=True)], runner)
    before, after, docs_before, docs_after = [], [], 0, 0
    for item, ran, results in zip(chosen, extracted, filtered, strict=True):
        old_parts = {item.key}
        if item.stage == "documents":
            built = read_manifest(lake, "documents", item.crawl, item.shard)
            old = [u for u in (built.units if built else ()) if u.source == item.key]
            docs_before += sum(u.rows_out for u in old)
            docs_after += sum(u.rows_out for u in ran)
            old_parts = {u.part for u in old if u.part}
        committed = read_manifest(lake, "filtered", item.crawl, item.shard)
        was = [u for u in (committed.units if committed else ()) if u.source in old_parts]
        before.append(_decisions(lake, item.key, was, encoder))
        after.append(_decisions(lake, item.key, results, encoder))
    info = SampleInfo(tuple(i.key for i in chosen), len(inputs), sum(i.size for i in chosen),
                      sum(i.size for i in inputs))
    documents = ((KeptRow("documents", ALL, docs_before, docs_after),) if any(i.stage == "documents" for i in chosen)
                 else ())
    return SampleOutcome(pl.concat(before) if before else _conform(pl.DataFrame()),
                         pl.concat(after) if after else _conform(pl.DataFrame()), documents, info)


def _run_each(fn: Callable[[Any], UnitResult], groups: Sequence[Sequence[WorkUnit]], runner: Runner
              ) -> list[list[UnitResult]]:
    """Every group's units in one run (a pool's workers share them all), the results given back per group."""
    results = iter(run_units(fn, [u for group in groups for u in group], runner))
    return [[next(results) for _ in group] for group in groups]


def _decisions(lake: Lake, source: str, units: Sequence[UnitResult], encoder: Encoder | None) -> pl.DataFrame:
    return decisions_of(lake, source, [u.part for u in units if u.part and u.rows_out],
                        [u.rejected_part for u in units if u.rejected_part and u.rows_out < u.rows_in], encoder)


def sample_report(outcome: SampleOutcome, crawls: Sequence[str], planned: Mapping[str, int], chain: Sequence[str],
                  crawl_level: Sequence[str], not_thresholds: str, examples: int = EXAMPLES,
                  notes: Sequence[str] = ()) -> PreviewReport:
    kept, blocks, found = compare(outcome.before, outcome.after, chain, examples)
    return PreviewReport("sample", tuple(crawls), tuple(planned.items()), (*outcome.documents, *kept), tuple(blocks),
                         tuple(found), outcome.info, not_thresholds, tuple(crawl_level), notes=tuple(notes),
                         decisions=outcome.after)


def thresholds_report(before: pl.DataFrame, after: pl.DataFrame, crawls: Sequence[str], planned: Mapping[str, int],
                      chain: Sequence[str], crawl_level: Sequence[str], examples: int = EXAMPLES,
                      notes: Sequence[str] = ()) -> PreviewReport:
    """The report of a thresholds-only change: `before` and `after` are the stored scores re-decided under the
    current and the new settings (`DECISIONS` columns; no tokens: the scores hold no text)."""
    before, after = _conform(before), _conform(after)
    kept, blocks, found = compare(before, after, chain, examples)
    return PreviewReport("thresholds", tuple(crawls), tuple(planned.items()), tuple(kept), tuple(blocks),
                         tuple(found), None, "", tuple(crawl_level), notes=tuple(notes), decisions=after)
