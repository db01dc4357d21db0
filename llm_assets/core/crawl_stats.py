"""Crawl-level statistics of the filtered stage: the funnel (documents in, dropped by each block and reason, out),
the language mix and the length distribution, over every shard of a crawl.

Every number is an exact count, so a crawl's statistics are the sum of its parts': one work unit per filtered
part reads that part's few columns (as Arrow, straight from the object store) and counts them with DuckDB SQL
(DuckDB has no S3 access offline here, so it queries the Arrow table in memory); the counts are added up and the
tables made from the sum. Memory is one part's columns, whatever the crawl's size. The length distribution is a
histogram of fixed buckets for the same reason: bucket counts add up, quantiles would not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from llm_assets.core.lake import Lake
from llm_assets.core.partition import Manifest
from llm_assets.core.units import InProcessRunner, Runner, UnitResult, WorkUnit, run_units, timed_unit

# The language of a document lid.176 never saw: a block before `language` in the chain dropped it (the URL filter,
# a takedown), so it has none. Named, rather than shown as a bare "?" in the chart.
NOT_IDENTIFIED = "not identified (dropped before the language block)"
NO_LABEL = "no label (lid.176 gave none)"

# Word-count buckets of the length histogram (lower bounds).
LENGTH_BUCKETS = (0, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000)
KEPT_COLUMNS = ["language", "n_words"]
LANGUAGE_FUNNEL = pl.Schema({"language": pl.String, "step": pl.String, "block": pl.String, "reason": pl.String,
                             "documents": pl.Int64, "remaining": pl.Int64})
REJECTED_COLUMNS = ["language", "filter", "reason"]


@dataclass
class CrawlStats:
    funnel: pl.DataFrame  # step, block, reason, documents, remaining
    languages: pl.DataFrame  # language, kept, dropped, share, kept_words, kept_words_share
    lengths: pl.DataFrame  # bucket, lower, documents
    # per language: what each block dropped (chain order), then what was kept
    language_funnel: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=LANGUAGE_FUNNEL))
    units: list[UnitResult] = field(default_factory=list)  # the counting units' results: what the stats cost

    def frame(self) -> pl.DataFrame:
        """All three as one long table (section, key, value), the form the lake stores."""
        return pl.concat([
            self.funnel.select(section=pl.lit("funnel"), key=pl.format("{}/{}", "block", "reason"),
                               value=pl.col("documents")),
            self.languages.select(section=pl.lit("language_kept"), key="language", value="kept"),
            self.languages.select(section=pl.lit("language_dropped"), key="language", value="dropped"),
            self.lengths.select(section=pl.lit("length_words"), key="bucket", value="documents"),
            self.languages.select(section=pl.lit("language_kept_words"), key="language", value="kept_words"),
            self.language_funnel.select(section=pl.lit("language_funnel"),
                                        key=pl.format("{}/{}/{}", "language", "block", "reason"), value="documents"),
        ]).with_columns(pl.col("value").cast(pl.Int64))


@dataclass
class PartialStats:
    """Exact counts over some of a crawl's filtered documents. They add up: the statistics of a crawl are those of
    the sum of its parts' counts, in any order and grouping."""

    rows_in: int = 0
    kept: int = 0
    drops: Counter[tuple[str, str]] = field(default_factory=Counter)  # (block, reason) -> documents
    kept_languages: Counter[str] = field(default_factory=Counter)
    dropped_languages: Counter[str] = field(default_factory=Counter)
    lengths: Counter[int] = field(default_factory=Counter)  # index in LENGTH_BUCKETS -> kept documents
    language_drops: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (language, block, reason) -> docs
    kept_words: Counter[str] = field(default_factory=Counter)  # language -> words of its kept documents

    def __add__(self, other: PartialStats) -> PartialStats:
        return PartialStats(self.rows_in + other.rows_in, self.kept + other.kept, self.drops + other.drops,
                            self.kept_languages + other.kept_languages,
                            self.dropped_languages + other.dropped_languages, self.lengths + other.lengths,
                            self.language_drops + other.language_drops, self.kept_words + other.kept_words)


def count(kept: pa.Table, rejected: pa.Table, rows_in: int = 0) -> PartialStats:
    """The counts of kept (language, n_words) and rejected (language, filter, reason) documents."""
    import duckdb  # here, not at the top: building the code location (every run worker) imports this module

    con = duckdb.connect()
    con.register("kept", kept)
    con.register("rejected", rejected)
    label = f"CASE WHEN language IS NULL THEN '{NOT_IDENTIFIED}' WHEN language = '' THEN '{NO_LABEL}' ELSE language END"
    # a NULL or negative word count falls in no bucket
    buckets = " ".join(f"WHEN n_words >= {b} THEN {i}" for i, b in reversed(list(enumerate(LENGTH_BUCKETS))))
    return PartialStats(
        rows_in=rows_in,
        kept=kept.num_rows,
        drops=Counter({(b, r): n for b, r, n in con.sql("SELECT filter, reason, count(*) FROM rejected GROUP BY ALL")
                       .fetchall()}),
        kept_languages=Counter(dict(con.sql(f"SELECT {label}, count(*) FROM kept GROUP BY ALL").fetchall())),
        dropped_languages=Counter(dict(con.sql(f"SELECT {label}, count(*) FROM rejected GROUP BY ALL").fetchall())),
        lengths=Counter({b: n for b, n in con.sql(f"SELECT CASE {buckets} END AS b, count(*) FROM kept GROUP BY ALL")
                         .fetchall() if b is not None}),
        language_drops=Counter({(lang, b, r): n for lang, b, r, n in con.sql(
            f"SELECT {label}, filter, reason, count(*) FROM rejected GROUP BY ALL").fetchall()}),
        kept_words=Counter({lang: int(n) for lang, n in con.sql(
            f"SELECT {label}, coalesce(sum(n_words), 0) FROM kept GROUP BY ALL").fetchall()}),
    )


@dataclass(frozen=True, kw_only=True)
class StatsUnit(WorkUnit):
    """One filtered work unit's output: its kept part and its rejected part (either may be absent)."""

    part: str | None
    rejected_part: str | None
    rows_in: int


@dataclass
class StatsResult(UnitResult):
    stats: PartialStats = field(default_factory=PartialStats)


def _read(lake: Lake, part: str | None, columns: list[str]) -> pa.Table:
    if part is None:
        return pa.table({c: pa.array([], pa.int32() if c == "n_words" else pa.string()) for c in columns})
    return lake.scan([part]).select(columns).collect().to_arrow()


@timed_unit
def stats_unit(unit: StatsUnit) -> StatsResult:
    """The counts of one filtered part and what it set aside."""
    lake = Lake(unit.store)
    kept, rejected = _read(lake, unit.part, KEPT_COLUMNS), _read(lake, unit.rejected_part, REJECTED_COLUMNS)
    return StatsResult(unit=unit.unit, source=unit.source, rows_in=kept.num_rows + rejected.num_rows,
                       rows_out=kept.num_rows, stats=count(kept, rejected, unit.rows_in))


def stats_units(store, manifests: Sequence[Manifest]) -> list[StatsUnit]:
    """One unit per filtered work unit that read anything."""
    return [StatsUnit(store=store, source=u.part or u.rejected_part or u.source, part=u.part,
                      rejected_part=u.rejected_part, rows_in=u.rows_in)
            for m in manifests for u in m.units if u.part or u.rejected_part or u.rows_in]


def crawl_stats(store, manifests: Sequence[Manifest], block_order: list[str],
                runner: Runner = InProcessRunner()) -> CrawlStats:
    """Statistics over the committed `filtered` partitions of one crawl (their manifests): each part counted by a
    work unit on `runner`, the counts summed."""
    results = run_units(stats_unit, stats_units(store, manifests), runner)
    stats = finish(sum((r.stats for r in results if isinstance(r, StatsResult)), PartialStats()), block_order)
    stats.units = results
    return stats


def summarize(kept: pa.Table, rejected: pa.Table, rows_in: int, block_order: list[str]) -> CrawlStats:
    """The statistics of kept (language, n_words) and rejected (language, filter, reason) documents."""
    return finish(count(kept, rejected, rows_in), block_order)


def finish(stats: PartialStats, block_order: list[str]) -> CrawlStats:
    """The funnel, language and length tables of the summed counts."""
    order = {name: i for i, name in enumerate(block_order)}
    # chain order, then the most documents first; ties by reason, so the table does not depend on the parts' order
    drops = sorted(stats.drops.items(), key=lambda kv: (order.get(kv[0][0], len(order)), -kv[1], kv[0][1] or ""))
    rows_in, kept = stats.rows_in, stats.kept
    funnel = pl.DataFrame({
        "step": ["in", *["dropped"] * len(drops), "out"],
        "block": ["", *[b for (b, _), _ in drops], ""],
        "reason": ["", *[r for (_, r), _ in drops], ""],
        "documents": [rows_in, *[n for _, n in drops], kept],
    }, schema={"step": pl.String, "block": pl.String, "reason": pl.String, "documents": pl.Int64})
    remaining = [rows_in]
    for _, n in drops:
        remaining.append(remaining[-1] - n)
    funnel = funnel.with_columns(remaining=pl.Series([*remaining, kept], dtype=pl.Int64))
    names = sorted(set(stats.kept_languages) | set(stats.dropped_languages),
                   key=lambda lang: (-(stats.kept_languages[lang] + stats.dropped_languages[lang]), lang))
    total = sum(stats.kept_languages.values()) + sum(stats.dropped_languages.values())
    words = sum(stats.kept_words.values()) or 1
    languages = pl.DataFrame({
        "language": names,
        "kept": [stats.kept_languages[lang] for lang in names],
        "dropped": [stats.dropped_languages[lang] for lang in names],
        "share": [(stats.kept_languages[lang] + stats.dropped_languages[lang]) / total for lang in names],
        "kept_words": [stats.kept_words[lang] for lang in names],
        "kept_words_share": [stats.kept_words[lang] / words for lang in names],
    }, schema={"language": pl.String, "kept": pl.Int64, "dropped": pl.Int64, "share": pl.Float64,
               "kept_words": pl.Int64, "kept_words_share": pl.Float64})
    rows = []
    for lang in names:  # in: its documents; then each block's drops in chain order; out: kept
        dropped = sorted(((b, r, n) for (lg, b, r), n in stats.language_drops.items() if lg == lang),
                         key=lambda d: (order.get(d[0], len(order)), -d[2], d[1] or ""))
        left = stats.kept_languages[lang] + stats.dropped_languages[lang]
        rows.append((lang, "in", "", "", left, left))
        for b, r, n in dropped:
            left -= n
            rows.append((lang, "dropped", b, r or "", n, left))
        rows.append((lang, "out", "", "", stats.kept_languages[lang], stats.kept_languages[lang]))
    language_funnel = pl.DataFrame(rows, schema=LANGUAGE_FUNNEL, orient="row")
    lengths = pl.DataFrame({
        "bucket": [f"{lo:,}–{hi - 1:,}" if hi else f"{lo:,}+"
                   for lo, hi in zip(LENGTH_BUCKETS, list(LENGTH_BUCKETS[1:]) + [None], strict=True)],
        "lower": list(LENGTH_BUCKETS),
        "documents": [stats.lengths.get(i, 0) for i in range(len(LENGTH_BUCKETS))],
    })
    return CrawlStats(funnel=funnel, languages=languages, lengths=lengths, language_funnel=language_funnel)
