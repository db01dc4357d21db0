"""Decontamination: documents that share word n-grams with an evaluation set's test text (GPT-3's 13-gram rule).

A document is checked twice: on its text as extracted (before normalization, C4's line cleanup or PII masks rewrote
it: the line cleanup deletes the short lines of quoted code and breaks every n-gram across them) and on its final
text; either match counts. Runs last in the chain, on the documents the other blocks keep: then checking a
partition's documents against a new eval index says exactly whether rebuilding it would change anything (the stale
planner relies on it)."""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.decontamination import CONTAMINATED, contamination, load_index
from llm_assets.core.filters.base import DETAIL, EXTRACTED, Block, Rule, first_reason, reasons_of

# text: where the match is, and so what match_start/match_end index: "final" (the curated text) or "extracted"
CONTAMINATION = pl.Struct({"benchmark": pl.String, "ngrams": pl.UInt32, "match_start": pl.Int32,
                           "match_end": pl.Int32, "text": pl.String})
FINAL, AS_EXTRACTED = "final", "extracted"


class Decontaminate(Block):
    """Adds `contamination` (the benchmark, how many of the document's n-grams are in the eval index, the character
    span of the first match and the text it is in, `final` or `extracted`) to a document sharing at least
    `min_matches` n-grams with an eval set under `evals/`, in its final text or in its text as extracted (the final
    text is reported when both match). `mode: drop` removes it (reason `contaminated`), `flag` keeps it with the
    column set. `index_path` is set by the run (the index built from `evals/`); without eval sets the block passes
    everything."""

    name = "decontaminate"
    block: Literal["decontaminate"] = Field(default="decontaminate", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    reads_extracted_text = True
    mode: Literal["drop", "flag"] = Field(default="drop", description=(
        "`drop`: a contaminated document is removed (`contaminated`); `flag`: kept with its `contamination` column "
        "set."))
    min_matches: int = Field(default=1, ge=1, description=(
        "N-grams shared with an eval set that make a document contaminated."))
    index_path: str | None = Field(default=None, description=(
        "Set by the run (the index the `eval_index` asset built from `evals/`), not in a settings file."))

    measured_by = ("min_matches", "index_path")
    context = ("match",)

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Adds `contamination`; measures whether a document is contaminated (the match is the detail)."""
        if not self.index_path:
            df = df.with_columns(contamination=pl.lit(None, CONTAMINATION))
            return df, pl.DataFrame({"contaminated": pl.repeat(False, df.height, eager=True),
                                     "match": pl.repeat(None, df.height, dtype=pl.String, eager=True)})
        index = load_index(self.index_path)
        found = self._matches(contamination(index, df["text"]), FINAL)
        if EXTRACTED in df.columns:
            # only where a block rewrote the text, and the final text does not match already
            again = (df[EXTRACTED] != df["text"]).fill_null(False) & found.is_null()
            if again.any():
                rows = again.arg_true().cast(pl.UInt32)
                extracted = pl.DataFrame({"row": rows, "found": self._matches(
                    contamination(index, df[EXTRACTED].gather(rows)), AS_EXTRACTED)})
                found = (pl.DataFrame({"row": pl.int_range(df.height, dtype=pl.UInt32, eager=True), "final": found})
                         .join(extracted, on="row", how="left", maintain_order="left")
                         .select(pl.coalesce("final", "found"))).to_series().alias("contamination")
        df = df.with_columns(found.alias("contamination"))
        return df, df.select(contaminated=found.is_not_null(), match=found.struct.json_encode())

    def rules(self) -> list[Rule]:
        return [Rule(pl.col("contaminated"), CONTAMINATED)] if self.mode == "drop" else []

    def decide(self, stats: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
        """The match is the detail of a dropped document."""
        reasons = reasons_of(stats, first_reason(*self.rules()))
        match = stats["match"] if "match" in stats.columns else pl.repeat(None, stats.height, dtype=pl.String,
                                                                            eager=True)
        both = pl.DataFrame({"reason": reasons, "match": match})
        return reasons, both.select(pl.when(pl.col("reason").is_not_null()).then("match").alias(DETAIL)).to_series()

    def _matches(self, found: pl.DataFrame, text: str) -> pl.Series:
        """The `contamination` value of each scored text: null below `min_matches`."""
        return found.select(contamination=pl.when(pl.col("contaminated_ngrams") >= self.min_matches).then(pl.struct(
            "benchmark", pl.col("contaminated_ngrams").alias("ngrams"), "match_start", "match_end",
            text=pl.lit(text))).cast(CONTAMINATION))["contamination"]
