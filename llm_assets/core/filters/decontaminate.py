"""Decontamination: documents that share word n-grams with an evaluation set's test text (GPT-3's 13-gram rule).

Runs last in the chain, on the text the curated data holds: then checking a partition's output against a new
eval index says exactly whether rebuilding it would change anything (the stale planner relies on it)."""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.decontamination import CONTAMINATED, contamination, load_index
from llm_assets.core.filters.base import KEEP, Block, reasons_of

CONTAMINATION = pl.Struct({"benchmark": pl.String, "ngrams": pl.UInt32, "match_start": pl.Int32,
                           "match_end": pl.Int32})


class Decontaminate(Block):
    """Adds `contamination` (the benchmark, how many of the document's n-grams are in the eval index, and the
    character span of the first match) to a document sharing at least `min_matches` n-grams with an eval set
    under `evals/`. `mode: drop` removes it (reason `contaminated`), `flag` keeps it with the column set.
    `index_path` is set by the run (the index built from `evals/`); without eval sets the block passes everything."""

    name = "decontaminate"
    block: Literal["decontaminate"] = "decontaminate"  # how the chain names it
    mode: Literal["drop", "flag"] = "drop"
    min_matches: int = Field(default=1, ge=1)
    index_path: str | None = None

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        if not self.index_path:
            return df.with_columns(contamination=pl.lit(None, CONTAMINATION)), reasons_of(df, KEEP)
        found = contamination(load_index(self.index_path), df["text"])
        hit = pl.col("contaminated_ngrams") >= self.min_matches
        flagged = found.select(contamination=pl.when(hit).then(pl.struct(
            "benchmark", pl.col("contaminated_ngrams").alias("ngrams"), "match_start", "match_end"))
            .cast(CONTAMINATION))
        df = df.with_columns(flagged["contamination"],
                             detail=flagged["contamination"].struct.json_encode())
        return df, reasons_of(df, KEEP if self.mode == "flag" else
                              pl.when(pl.col("contamination").is_not_null()).then(pl.lit(CONTAMINATED))
                              .otherwise(KEEP))
