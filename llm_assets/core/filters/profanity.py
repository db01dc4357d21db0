"""Profanity filter: drops documents in which profane words or slurs are more than `max_density` of the words.

One swear word in a long article is ordinary language and worth keeping; pages dense with them (abuse, spam,
adult sites) teach a model the wrong register. Off by default, because a word list is a blunt tool whose
right threshold depends on the corpus. Adds `profanity_density` to every document. Reason:
`profanity_density`.

Words match whole and case-insensitively ("class" never counts as "ass", "Scunthorpe" never as "cunt"); an
entry may be a phrase. `bad_words` loads the built-in list and a user list, and the C4 bad-words rule reuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import polars as pl
from pydantic import Field, PrivateAttr

from ..segment import word_counts
from .base import Block, Rule, drop_if

BUILTIN = Path(__file__).parent / "assets" / "bad_words_en.txt"


def read_words(path: Path) -> list[str]:
    """One word or phrase per line; `#` starts a comment."""
    return [line.split("#", 1)[0] for line in path.read_text(encoding="utf-8").splitlines()]


def bad_words(words_file: str | None, extra: tuple[str, ...] = (), use_builtin: bool = True) -> tuple[str, ...]:
    """The built-in list (if `use_builtin`), `words_file` and `extra`: lower case, sorted, without duplicates."""
    words = list(extra)
    if use_builtin:
        words += read_words(BUILTIN)
    if words_file is not None:
        path = Path(words_file)
        if not path.is_file():
            raise ValueError(f"bad words file {words_file} does not exist")
        words += read_words(path)
    return tuple(sorted({" ".join(w.lower().split()) for w in words} - {""}))


def word_pattern(words: tuple[str, ...]) -> str | None:
    """One case-insensitive alternation of whole words; the spaces in a phrase match any whitespace."""
    if not words:
        return None
    # Longest first, so a phrase wins over a word it starts with.
    phrases = sorted(words, key=len, reverse=True)
    alternatives = (r"\s+".join(pl.escape_regex(part) for part in w.split()) for w in phrases)
    return rf"(?i)\b(?:{'|'.join(alternatives)})\b"


class ProfanityFilter(Block):
    name = "profanity"
    block: Literal["profanity"] = Field(default="profanity", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))

    enabled: bool = Field(default=False, description="Off by default; on, pages above `max_density` are dropped.")
    words: tuple[str, ...] = Field(default=(), description=(
        "Profane words or phrases listed inline, added to the others."))
    words_file: str | None = Field(default=None, description="A file of words or phrases, one per line.")
    use_builtin: bool = Field(default=True, description="Start from the built-in list.")
    max_density: float = Field(default=0.02, description="Listed words per word above which a page is dropped.")

    _pattern: str | None = PrivateAttr(default=None)

    def model_post_init(self, context) -> None:
        # Built once per block, so a missing words_file fails when the settings load, not mid-run.
        self._pattern = word_pattern(bad_words(self.words_file, self.words, self.use_builtin))

    measured_by = ("words", "words_file", "use_builtin")

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        if self._pattern is None:
            stats = pl.DataFrame({"hits": pl.repeat(0, df.height, dtype=pl.UInt32, eager=True),
                                  "words": pl.repeat(0, df.height, dtype=pl.UInt32, eager=True)})
        else:
            words = word_counts(df["text"], df["language"] if "language" in df.columns else None)
            stats = df.select(hits=pl.col("text").str.count_matches(self._pattern), words=words)
        density = stats.select(_density()).to_series()
        return df.with_columns(density.cast(pl.Float32).alias("profanity_density")), stats

    def rules(self) -> list[Rule]:
        # The threshold is compared in full precision, so a density exactly at max_density is kept.
        return [drop_if(_density(), ">", self.max_density, "profanity_density")]


def _density() -> pl.Expr:
    return (pl.col("hits") / pl.col("words")).fill_nan(0.0).alias("profanity_density")
