"""The optional model-based quality filter: a fastText classifier's probability of the positive ("high quality")
label, kept at or above a threshold, as DCLM and FineWeb-Edu filter with a trained classifier."""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import Block, Rule, number
from llm_assets.core.quality_model import load_model, positive_scores


class QualityModelFilter(Block):
    """Adds `quality_score`, P(`label`) under the model, to every document it sees. Keeps a document scoring at
    least `threshold`. `model_path` is a fastText .bin/.ftz file; left empty, the run uses the model the
    `quality_classifier` asset trained last. Reason: `low_quality`."""

    name = "quality_model"
    block: Literal["quality_model"] = Field(default="quality_model", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    enabled: bool = Field(default=False, description=(
        "Off by default; on, documents scoring below `threshold` are dropped (DCLM-style)."))
    model_path: str | None = Field(default=None, description=(
        "A fastText .bin/.ftz file; null: the model the `quality_classifier` asset trained."))
    label: str = Field(default="hq", description="The label whose probability is the document's `quality_score`.")
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="Minimum P(`label`), 0..1, a document needs.")

    measured_by = ("model_path", "label")

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        if not self.model_path:
            raise ValueError("quality_model: no model; materialize quality_classifier or set model_path")
        scores = positive_scores(load_model(self.model_path), df["text"].to_list(), self.label)
        # fastText's probabilities are float32: the column holds them exactly
        df = df.with_columns(pl.Series("quality_score", scores, pl.Float32))
        return df, df.select("quality_score")

    def rules(self) -> list[Rule]:
        score = pl.col("quality_score")
        return [Rule(~(score >= self.threshold), "low_quality", score, f"quality_score < {number(self.threshold)}")]
