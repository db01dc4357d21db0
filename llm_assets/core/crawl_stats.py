"""Crawl-level statistics of the filtered stage: the funnel (documents in, dropped by each block and reason, out),
the language mix and the length distribution, over every shard of a crawl.

The kept and rejected documents are read as Arrow (only the few columns needed, straight from the object store)
and summarised with DuckDB SQL; DuckDB has no S3 access offline here, so it queries the Arrow tables in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from llm_assets.core.lake import Lake
from llm_assets.core.partition import Manifest

# The language of a document lid.176 never saw: a block before `language` in the chain dropped it (the URL filter,
# a takedown), so it has none. Named, rather than shown as a bare "?" in the chart.
NOT_IDENTIFIED = "not identified (dropped before the language block)"
NO_LABEL = "no label (lid.176 gave none)"

# Word-count buckets of the length histogram (lower bounds).
LENGTH_BUCKETS = (0, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000)


@dataclass
class CrawlStats:
    funnel: pl.DataFrame  # step, block, reason, documents, remaining
    languages: pl.DataFrame  # language, kept, dropped, share
    lengths: pl.DataFrame  # bucket, lower, documents

    def frame(self) -> pl.DataFrame:
        """All three as one long table (section, key, value), the form the lake stores."""
        return pl.concat([
            self.funnel.select(section=pl.lit("funnel"), key=pl.format("{}/{}", "block", "reason"),
                               value=pl.col("documents")),
            self.languages.select(section=pl.lit("language_kept"), key="language", value="kept"),
            self.languages.select(section=pl.lit("language_dropped"), key="language", value="dropped"),
            self.lengths.select(section=pl.lit("length_words"), key="bucket", value="documents"),
        ]).with_columns(pl.col("value").cast(pl.Int64))


def _read(lake: Lake, parts: list[str], columns: list[str]) -> pa.Table:
    if not parts:
        return pa.table({c: pa.array([], pa.string() if c != "n_words" else pa.int32()) for c in columns})
    return lake.scan(parts).select(columns).collect().to_arrow()


def crawl_stats(lake: Lake, manifests: list[Manifest], block_order: list[str]) -> CrawlStats:
    """Statistics over the committed `filtered` partitions of one crawl (their manifests)."""
    kept = _read(lake, [p for m in manifests for p in m.parts], ["language", "n_words"])
    rejected = _read(lake, [p for m in manifests for p in m.rejected_parts], ["language", "filter", "reason"])
    return summarize(kept, rejected, sum(u.rows_in for m in manifests for u in m.units), block_order)


def summarize(kept: pa.Table, rejected: pa.Table, rows_in: int, block_order: list[str]) -> CrawlStats:
    """The statistics of kept (language, n_words) and rejected (language, filter, reason) documents."""
    import duckdb  # here, not at the top: building the code location (every run worker) imports this module

    con = duckdb.connect()
    con.register("kept", kept)
    con.register("rejected", rejected)
    order = {name: i for i, name in enumerate(block_order)}
    # .pl(), not from_arrow(.arrow()): an empty result has no record batch (a crawl whose filters dropped nothing)
    drops = con.sql("SELECT filter AS block, reason, count(*) AS documents FROM rejected GROUP BY ALL").pl()
    drops = drops.with_columns(pl.col("block").replace_strict(order, default=len(order)).alias("_o")) \
                 .sort("_o", pl.col("documents"), descending=[False, True]).drop("_o")
    funnel = pl.concat([
        pl.DataFrame({"step": ["in"], "block": [""], "reason": [""], "documents": [rows_in]}),
        drops.select(step=pl.lit("dropped"), block="block", reason="reason", documents="documents"),
        pl.DataFrame({"step": ["out"], "block": [""], "reason": [""], "documents": [kept.num_rows]}),
    ], how="vertical_relaxed").with_columns(pl.col("documents").cast(pl.Int64))
    remaining = rows_in - funnel["documents"].filter(funnel["step"] == "dropped").cum_sum()
    funnel = funnel.with_columns(remaining=pl.concat([pl.Series([rows_in]), remaining, pl.Series([kept.num_rows])])
                                 .cast(pl.Int64))
    label = f"CASE WHEN language IS NULL THEN '{NOT_IDENTIFIED}' WHEN language = '' THEN '{NO_LABEL}' ELSE language END"
    languages = con.sql(f"""
        WITH k AS (SELECT {label} AS language, count(*) AS n FROM kept GROUP BY ALL),
             d AS (SELECT {label} AS language, count(*) AS n FROM rejected GROUP BY ALL)
        SELECT language, coalesce(k.n, 0) AS kept, coalesce(d.n, 0) AS dropped,
               (coalesce(k.n, 0) + coalesce(d.n, 0)) / sum(coalesce(k.n, 0) + coalesce(d.n, 0)) OVER () AS share
        FROM k FULL OUTER JOIN d USING (language) ORDER BY kept + dropped DESC, language
    """).pl()
    buckets = " ".join(f"WHEN n_words >= {b} THEN {i}" for i, b in reversed(list(enumerate(LENGTH_BUCKETS))))
    counts = dict(con.sql(f"SELECT CASE {buckets} END AS b, count(*) FROM kept GROUP BY ALL").fetchall())
    lengths = pl.DataFrame({
        "bucket": [f"{lo:,}–{hi - 1:,}" if hi else f"{lo:,}+"
                   for lo, hi in zip(LENGTH_BUCKETS, list(LENGTH_BUCKETS[1:]) + [None])],
        "lower": list(LENGTH_BUCKETS),
        "documents": [counts.get(i, 0) for i in range(len(LENGTH_BUCKETS))],
    })
    return CrawlStats(funnel=funnel, languages=languages, lengths=lengths)
