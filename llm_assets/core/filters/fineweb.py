"""FineWeb's own quality rules (Penedo et al. 2024, "The FineWeb Datasets"), with the published thresholds: drop
pages whose lines mostly lack final punctuation, are mostly short, repeat each other, or are lists of words."""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import WORDS, Block, Rule, drop_if, number
from llm_assets.core.filters.gopher import duplicates
from llm_assets.core.filters.text import TERMINAL_PUNCTUATION
from llm_assets.core.segment import CHUNK, segmented, words_by_language


class FineWebQuality(Block):
    """Over the non-blank lines: fewer than `line_punct_thr` ending in terminal punctuation (line_punct_ratio), more
    than `short_line_thr` of at most `short_line_length` characters (short_line_ratio), more than
    `char_duplicates_ratio` of the characters in repeated lines (char_dup_ratio), more than `new_line_ratio`
    newlines per word (list_ratio). An all-blank text is `empty`."""

    name = "fineweb_quality"
    block: Literal["fineweb_quality"] = Field(default="fineweb_quality", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    line_punct_thr: float = Field(default=0.12, description=(
        "Share of non-blank lines ending in terminal punctuation below which a document is dropped "
        "(`line_punct_ratio`; FineWeb)."))
    line_punct_exclude_zero: bool = Field(default=False, description=(
        "Spare a document none of whose lines end in punctuation from `line_punct_thr` (datatrove's option; off in "
        "FineWeb)."))
    short_line_thr: float = Field(default=0.67, description=(
        "Share of short lines above which a document is dropped (`short_line_ratio`; FineWeb)."))
    short_line_length: int = Field(default=30, description=(
        "Characters: a line this long or shorter is short (FineWeb)."))
    char_duplicates_ratio: float = Field(default=0.01, description=(
        "Share of characters in repeated lines above which a document is dropped (`char_dup_ratio`; FineWeb)."))
    new_line_ratio: float = Field(default=0.3, description=(
        "Newlines per word above which a document is dropped (`list_ratio`; FineWeb)."))

    measured_by = ("short_line_length",)

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        lines = (df.select(pl.col("text").str.split("\n").alias("line")).with_row_index("doc").explode("line")
                 .filter(pl.col("line").str.strip_chars() != ""))
        per_doc = lines.group_by("doc").agg(
            n=pl.len(),
            punct=pl.col("line").str.contains(TERMINAL_PUNCTUATION + "$").sum(),
            short=(pl.col("line").str.len_chars() <= self.short_line_length).sum(),
        )
        dup_chars = duplicates(df, pl.col("text").str.split("\n").list.eval(
            pl.element().filter(pl.element().str.strip_chars() != "")))[1]
        stats = (pl.DataFrame({"doc": pl.int_range(df.height, eager=True).cast(pl.UInt32)})
                 .join(per_doc, on="doc", how="left")
                 .with_columns(
                     dup_chars=dup_chars,
                     chars=df["text"].str.replace_all("\n", "", literal=True).str.len_chars(),
                     newlines=df["text"].str.count_matches("\n", literal=True),
                     n_words=_word_counts(df, self.new_line_ratio),
                 ).drop("doc"))
        return df, stats

    def rules(self) -> list[Rule]:
        n = pl.col("n").fill_null(0).alias("non_blank_lines")
        punct = (pl.col("punct") / n).alias("line_punct_ratio")
        if self.line_punct_exclude_zero:
            no_punct = Rule((punct < self.line_punct_thr) & (punct != 0), "line_punct_ratio", punct,
                            f"0 < line_punct_ratio < {number(self.line_punct_thr)}")
        else:
            no_punct = drop_if(punct, "<", self.line_punct_thr, "line_punct_ratio")
        return [
            drop_if(n, "==", 0, "empty"),
            no_punct,
            drop_if((pl.col("short") / n).alias("short_line_ratio"), ">", self.short_line_thr, "short_line_ratio"),
            drop_if((pl.col("dup_chars") / pl.col("chars")).alias("char_dup_ratio"), ">", self.char_duplicates_ratio,
                    "char_dup_ratio"),
            drop_if((pl.col("newlines") / pl.col("n_words")).alias("list_ratio"), ">", self.new_line_ratio,
                    "list_ratio"),
        ]


def _word_counts(df: pl.DataFrame, new_line_ratio: float) -> pl.Series:
    """Words per document, exact where the list rule can drop it. A run of non-whitespace holds at least one word,
    so a text with at most `new_line_ratio` newlines per run cannot fail the rule with its real, larger, word count;
    only the other rows (few: lists of short lines) are split, unless an earlier block left the words."""
    if WORDS in df.columns:
        return df[WORDS].list.len()
    text = df["text"]
    counts = text.str.count_matches(CHUNK).fill_null(0)
    todo = (text.str.count_matches("\n", literal=True) > new_line_ratio * counts).fill_null(False)
    # the bound holds only where words are separated by spaces: a segmenter's rows are always split
    languages = df["language"] if "language" in df.columns else None
    todo = (todo | segmented(text, languages)).arg_true()
    if todo.len():
        counts = counts.scatter(todo, words_by_language(
            text.gather(todo), None if languages is None else languages.gather(todo)).list.len())
    return counts
