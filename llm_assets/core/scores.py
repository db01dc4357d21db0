"""Scores apart from decisions: what every filter block measured for every document that entered the chain, kept or
dropped, stored beside each `filtered` part (`filtered.scores_key`), so that a change of thresholds only is decided
again over a whole crawl as a query, with no text read and no block re-run.

A scores part holds, per document: `doc_id`, `url`, `language`, `language_score`, `filter` and `reason` (null: kept;
else the block and the rule that dropped it, as the chain decided), and one column per measure, `<block>.<measure>`
(the columns of the block's `measure` stats its `rules` read). Counts are stored as integers and the ratios the rules
compare are computed from them when deciding, so a decision taken again is bit for bit the chain's.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, cast

import polars as pl

from llm_assets.core.filters import FineWebQuality, GopherRepetition, PIIMasker
from llm_assets.core.filters.base import Block, measure_names
from llm_assets.core.lake import Lake, partition_prefix
from llm_assets.core.languages import UNKNOWN, language_table
from llm_assets.core.partition import read_manifest

if TYPE_CHECKING:
    from llm_assets.core.filtered import FilteredSettings

# What `redecide` returns, per document: the block and rule that drop it under the settings (null: kept), the value
# the rule measured (JSON, as `why` prints it) and the threshold it failed.
DECISION_SCHEMA = pl.Schema({"doc_id": pl.String, "language": pl.String, "filter": pl.String, "reason": pl.String,
                             "measured": pl.String, "threshold": pl.String})


def threshold_only(old: FilteredSettings, new: FilteredSettings) -> str | None:
    """None when going from `old` to `new` settings changes only values a query over the stored scores decides
    again (the same blocks in the same order for every language, no change to what a block measures, which for a
    text-rewriting block is its rewrite); else why not, e.g. "c4_quality rewrites text"."""
    if old.measure == "until_dropped":
        # no change is proven exact: a tighter threshold of an earlier block is, but a loosening one (or a change
        # that is neither) meets documents whose later measures were never taken
        return ("filtered.measure is until_dropped: a dropped document was not measured by the blocks after the one "
                "that dropped it")
    for language in sorted({*language_table(), UNKNOWN}):
        if new.keeps(language) and not old.keeps(language) and _has_language(old):
            return f"language.languages adds {language}: its documents were measured only by the language block"
        before, after = old.chain_for(language), new.chain_for(language)
        if [b.name for b in before] != [b.name for b in after]:
            return (f"the blocks {language} documents go through change: {', '.join(b.name for b in before)} -> "
                    f"{', '.join(b.name for b in after)}")
        for a, b in zip(before, after, strict=True):
            if a != b and (why := _not_a_threshold(a, b)):
                return why if language == "en" or not _per_language(new, b.name) else f"{why} (for {language})"
    return None


def _has_language(settings: FilteredSettings) -> bool:
    return any(b.name == "language" for b in settings.blocks())


def _per_language(settings: FilteredSettings, name: str) -> bool:
    names = [b.name for b in settings.chain]
    return "language" in names and name in names[names.index("language"):]


def _not_a_threshold(a: Block, b: Block) -> str | None:
    changed = [f for f in type(a).model_fields if getattr(a, f) != getattr(b, f)]
    measured = [f for f in changed if f in a.measured_by]
    if measured:
        return f"{a.name} rewrites text" if a.rewrites_text else f"{a.name}.{measured[0]} changes what it measures"
    # measured only up to where the old thresholds decide: below them, a bound is stored
    if isinstance(a, GopherRepetition) and isinstance(b, GopherRepetition):
        if [n for n, _ in a.top_n_grams] != [n for n, _ in b.top_n_grams] or \
                [n for n, _ in a.dup_n_grams] != [n for n, _ in b.dup_n_grams]:
            return "gopher_repetition's n-grams change what it measures"
        if any(y < x for (_, x), (_, y) in zip(a.dup_n_grams, b.dup_n_grams, strict=True)):
            return ("gopher_repetition.dup_n_grams lowered: the covered characters are stored exactly only above "
                    "the old thresholds")
    if isinstance(a, FineWebQuality) and isinstance(b, FineWebQuality) and b.new_line_ratio < a.new_line_ratio:
        return "fineweb_quality.new_line_ratio lowered: words are counted exactly only above the old ratio"
    if isinstance(a, PIIMasker) and isinstance(b, PIIMasker) and a.max_density is None and b.max_density is not None:
        return "pii.max_density set: the words it divides by were not counted"
    return None


def redecide(scores: pl.DataFrame | pl.LazyFrame, settings: FilteredSettings) -> pl.DataFrame:
    """Per document of `scores`: `doc_id, language, filter, reason, measured, threshold` (`DECISION_SCHEMA`), what
    the chain of `settings` decides from the stored measures: the first failing rule of the first failing block,
    each language through its own blocks (`FilteredSettings.chain_for`). The documents come back in their order."""
    df = scores.collect() if isinstance(scores, pl.LazyFrame) else scores
    df = df.with_row_index(_ROW)
    has_language = _has_language(settings)
    out = []
    for (language,), rows in df.group_by("language"):
        chain = settings.chain_for(language) if has_language and language is not None else settings.blocks()
        out.append(_decide(rows, chain, cast(str | None, language)))
    if not out:
        return pl.DataFrame(schema=DECISION_SCHEMA)
    return pl.concat(out).sort(_ROW).drop(_ROW)


_ROW = "_row"
_BASE = ("url", "language", "language_score")


def _decide(rows: pl.DataFrame, chain: list[Block], language: str | None) -> pl.DataFrame:
    failed = pl.repeat(None, rows.height, dtype=pl.String, eager=True)
    reason, detail = failed, failed
    for block, prefix in zip(chain, measure_names(chain), strict=True):
        if failed.null_count() == 0:
            break  # every document dropped: a language not kept is not measured past the language block
        stored = [c for c in rows.columns if c.startswith(prefix + ".")]
        stats = block.restore(rows.select(*[c for c in _BASE if c in rows.columns],
                                          *(pl.col(c).alias(c.removeprefix(prefix + ".")) for c in stored)))
        reasons, details = block.decide(stats)
        first = reasons.is_not_null() & failed.is_null()
        if first.any():
            failed = failed.zip_with(~first, pl.repeat(block.name, rows.height, dtype=pl.String, eager=True))
            reason = reason.zip_with(~first, reasons)
            detail = detail.zip_with(~first, details.cast(pl.String))
    decided = pl.DataFrame({"filter": failed, "reason": reason, "detail": detail})
    parsed = decided.select(
        "filter", "reason",
        measured=pl.when(pl.col("detail").str.contains('"threshold"', literal=True))
        .then(pl.col("detail").str.json_path_match("$.measured")).otherwise(pl.col("detail")),
        threshold=pl.col("detail").str.json_path_match("$.threshold"),
    )
    return pl.concat([rows.select(_ROW, "doc_id", pl.col("language").cast(pl.String)), parsed], how="horizontal")


def read_scores(lake: Lake, crawl: str, shards: Collection[str] | None = None) -> pl.LazyFrame:
    """The scores of the committed `filtered` partitions of a crawl (all shards, or those named), with `shard`."""
    if shards is None:
        prefix = partition_prefix("lake", "filtered", crawl, "0000").rsplit("shard=", 1)[0]
        shards = sorted({o.key.removeprefix(prefix).split("/")[0].removeprefix("shard=")
                         for o in lake.list(prefix) if o.key.endswith("/_manifest.json")})
    frames = []
    for shard in sorted(shards):
        manifest = read_manifest(lake, "filtered", crawl, shard)
        keys = [u.side_parts["scores"] for u in manifest.units if "scores" in u.side_parts] if manifest else []
        if keys:
            frames.append(pl.concat([lake.scan([k]) for k in keys], how="diagonal_relaxed")
                          .with_columns(shard=pl.lit(shard)))
    if not frames:
        return pl.LazyFrame(schema={"doc_id": pl.String, "url": pl.String, "language": pl.String,
                                    "language_score": pl.Float32, "filter": pl.String, "reason": pl.String,
                                    "shard": pl.String})
    return pl.concat(frames, how="diagonal_relaxed")
