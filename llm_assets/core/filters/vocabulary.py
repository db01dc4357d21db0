"""Domain-vocabulary selectors: keep the documents of one domain (medical, code, or a user vocabulary), the way
domain corpora are cut from a web crawl by term density before any model is trained."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import Block, Rule, drop_if
from llm_assets.core.filters.profanity import read_words, word_pattern
from llm_assets.core.segment import word_counts

ASSETS = Path(__file__).parent / "assets"


class DomainVocabulary(Block):
    """Keeps documents with at least `min_density` vocabulary hits per word and at least `min_distinct` different
    terms (one repeated word is not a domain). Adds `domain_density`. Reason: off_domain."""

    name = "vocabulary"
    block: Literal["vocabulary"] = Field(default="vocabulary", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    enabled: bool = Field(default=False, description=(
        "Off by default; on, it keeps only the documents of one domain (`off_domain` for the others)."))
    vocabulary: Literal["medical", "code", "custom"] = Field(default="medical", description=(
        "The built-in vocabulary (`medical`, `code`), or `custom` (only `terms` and `terms_file`)."))
    terms: tuple[str, ...] = Field(default=(), description="Terms listed inline, added to the vocabulary.")
    terms_file: str | None = Field(default=None, description="A file of terms, one per line.")
    min_density: float = Field(default=0.01, description="Vocabulary hits per word a document needs.")
    min_distinct: int = Field(default=3, description=(
        "Different vocabulary terms a document needs (one repeated word is not a domain)."))

    def lexicon(self) -> tuple[str, ...]:
        words = list(self.terms)
        if self.vocabulary != "custom":
            words += read_words(ASSETS / f"vocabulary_{self.vocabulary}.txt")
        if self.terms_file:
            path = Path(self.terms_file)
            if not path.is_file():
                raise ValueError(f"vocabulary terms file {self.terms_file} does not exist")
            words += read_words(path)
        return tuple(sorted({" ".join(w.lower().split()) for w in words} - {""}))

    measured_by = ("vocabulary", "terms", "terms_file")

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        pattern = word_pattern(self.lexicon())
        if pattern is None:
            raise ValueError("vocabulary selector: no terms (set vocabulary, terms or terms_file)")
        text = pl.col("text")
        hits = text.str.extract_all(pattern).list.eval(pl.element().str.to_lowercase())
        stats = df.select(
            hits=hits.list.len(),
            words=word_counts(df["text"], df["language"] if "language" in df.columns else None),
            distinct=hits.list.n_unique(),
        )
        density = stats.select(_density()).to_series()
        return df.with_columns(density.cast(pl.Float32).alias("domain_density")), stats

    def rules(self) -> list[Rule]:
        return [
            drop_if(_density(), "<", self.min_density, "off_domain"),
            drop_if(pl.col("distinct").alias("distinct_terms"), "<", self.min_distinct, "off_domain"),
        ]


def _density() -> pl.Expr:
    return (pl.col("hits") / pl.col("words")).fill_nan(0.0).alias("domain_density")
