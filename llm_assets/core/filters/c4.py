"""C4's rules (Raffel et al. 2020, section 2.2, and the c4_utils reference code), with the published defaults.

Line level, which rewrites the text: drop lines with a word over 1000 characters, lines not ending in terminal
punctuation (or ending in an ellipsis), lines of fewer than 3 words, lines mentioning javascript, and cookie or
terms-of-use notices; strip Wikipedia citation marks. Document level: drop pages with "lorem ipsum" or a curly
bracket in a kept line, and pages left with fewer than 5 sentences. FineWeb runs it without the terminal
punctuation rule (`filter_no_terminal_punct: false` in its settings); the block's default is the paper's.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import Block, Rule, drop_if
from llm_assets.core.filters.profanity import bad_words
from llm_assets.core.filters.text import sentence_count
from llm_assets.core.segment import word_counts

CITATION = r"\[\d*]|\[edit]|\[citation needed]"
END_PUNCTUATION = r"""[.?!"']$"""
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
                     "use cookies")


class C4Quality(Block):
    """C4's line cleanup and page rules. Rewrites `text` to its kept lines. Reasons: lorem_ipsum, curly_bracket
    (checked line by line, the first one met wins), too_few_sentences."""

    name = "c4_quality"
    block: Literal["c4_quality"] = Field(default="c4_quality", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    rewrites_text = True
    split_paragraph: bool = Field(default=True, description=(
        "Judge the text line by line (C4's mode; the only one implemented)."))
    remove_citations: bool = Field(default=True, description=(
        "Remove Wikipedia-style citation marks (`[1]`, `[edit]`, `[citation needed]`) from lines."))
    filter_no_terminal_punct: bool = Field(default=True, description=(
        "Drop lines not ending in terminal punctuation (C4's rule; FineWeb sets it false in `settings.yaml`)."))
    min_num_sentences: int = Field(default=5, description=(
        "Sentences the kept lines need, or the page is dropped (`too_few_sentences`; C4)."))
    min_words_per_line: int = Field(default=3, description="Words: shorter lines are removed (C4).")
    max_word_length: int = Field(default=1000, description=(
        "Characters: lines with a longer word are removed (C4); -1: off."))
    filter_lorem_ipsum: bool = Field(default=True, description=(
        "Drop a page containing \"lorem ipsum\" (`lorem_ipsum`; C4)."))
    filter_javascript: bool = Field(default=True, description='Remove lines mentioning "javascript" (C4).')
    filter_curly_bracket: bool = Field(default=True, description="Drop a page containing `{` (`curly_bracket`; C4).")
    filter_policy: bool = Field(default=True, description=(
        "Remove lines about terms of use, privacy or cookie policies (C4)."))

    measured_by = ("split_paragraph", "remove_citations", "filter_no_terminal_punct", "min_words_per_line",
                   "max_word_length", "filter_lorem_ipsum", "filter_javascript", "filter_curly_bracket",
                   "filter_policy")
    context = ("text",)

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        if not self.split_paragraph:
            raise ValueError("c4_quality: only split_paragraph=true (C4's line mode) is implemented")
        raw = pl.col("raw")
        line = pl.col("line")
        lower = line.str.to_lowercase()
        lines = (df.select(pl.col("text").str.replace_all(r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]", "\n")
                           .str.split("\n").alias("raw"))
                 .with_row_index("doc").explode("raw").with_row_index("pos")
                 .with_columns(raw.str.strip_chars()))
        # str.splitlines() yields no last empty line after a final newline, split() does; empty lines never count
        languages = df["language"].gather(lines["doc"]) if "language" in df.columns else None
        lines = lines.with_columns(
            n_words=word_counts(lines["raw"], languages),
            long_word=raw.str.contains(r"\S{%d}" % (self.max_word_length + 1)) if self.max_word_length != -1
            else pl.lit(False),
            line=raw.str.replace_all(CITATION, "") if self.remove_citations else raw,
        )
        no_punct = ~line.str.contains(END_PUNCTUATION) | line.str.ends_with("...")
        candidate = ~pl.col("long_word")
        if self.filter_no_terminal_punct:
            candidate &= ~no_punct
        candidate &= pl.col("n_words") >= self.min_words_per_line
        lorem = (candidate & lower.str.contains("lorem ipsum", literal=True) if self.filter_lorem_ipsum
                 else pl.lit(False))
        candidate &= ~lorem
        if self.filter_javascript:
            candidate &= ~lower.str.contains("javascript", literal=True)
        curly = candidate & line.str.contains("{", literal=True) if self.filter_curly_bracket else pl.lit(False)
        candidate &= ~curly
        if self.filter_policy:
            candidate &= ~pl.any_horizontal([lower.str.contains(p, literal=True) for p in POLICY_SUBSTRINGS])
        lines = lines.with_columns(kept=candidate, lorem=lorem, curly=curly, sentences=sentence_count(line))
        per_doc = lines.group_by("doc", maintain_order=True).agg(
            text=line.filter(pl.col("kept")).str.join("\n").str.strip_chars(),
            sentences=pl.col("sentences").filter(pl.col("kept")).sum(),
            first_lorem=pl.col("pos").filter(pl.col("lorem")).min(),
            first_curly=pl.col("pos").filter(pl.col("curly")).min(),
            lorem_line=line.filter(pl.col("lorem")).first(),
            curly_line=line.filter(pl.col("curly")).first(),
        ).sort("doc").drop("doc")
        return df.with_columns(text=per_doc["text"]), per_doc

    def rules(self) -> list[Rule]:
        lorem_pos, curly_pos = pl.col("first_lorem"), pl.col("first_curly")
        return [
            Rule(lorem_pos.is_not_null() & (curly_pos.is_null() | (lorem_pos < curly_pos)), "lorem_ipsum",
                 _shown(pl.col("lorem_line")), 'a kept line contains "lorem ipsum"'),
            Rule(curly_pos.is_not_null(), "curly_bracket", _shown(pl.col("curly_line")), 'a kept line contains "{"'),
            drop_if(pl.col("sentences"), "<", self.min_num_sentences, "too_few_sentences"),
        ]


class C4BadWords(Block):
    """C4's bad-words rule: drop a page containing any listed word or phrase, matched in the lower-cased text between
    non-word characters (C4 used the LDNOOBW list; point `words_file` at it, the built-in list is small). Only
    documents labelled with one of `languages` are checked when a `language` column exists. Reason: badwords."""

    name = "c4_badwords"
    block: Literal["c4_badwords"] = Field(default="c4_badwords", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    enabled: bool = Field(default=False, description=(
        "Off by default (FineWeb does not run it); on, a page with a listed word is dropped (`badwords`)."))
    words_file: str | None = Field(default=None, description=(
        "A file of words or phrases, one per line (C4 used the LDNOOBW list)."))
    words: tuple[str, ...] = Field(default=(), description="Words or phrases listed inline, added to the others.")
    use_builtin: bool = Field(default=True, description="Start from the small built-in list.")
    languages: tuple[str, ...] = Field(default=("en",), description=(
        "Only documents labelled with one of these languages are checked (when the chain labels languages)."))

    measured_by = ("words_file", "words", "use_builtin")
    context = ("language",)

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The first listed word each document contains (null: none), and its language, which the rule checks."""
        pattern = _badwords_pattern(self.words_file, self.words, self.use_builtin)
        word = (pl.col("text").str.to_lowercase().str.extract(pattern, 1) if pattern is not None
                else pl.repeat(None, pl.len(), dtype=pl.String))
        language = pl.col("language") if "language" in df.columns else pl.repeat(None, pl.len(), dtype=pl.String)
        return df, df.select(badword=word, language=language)

    def rules(self) -> list[Rule]:
        # a document with no language (no language block ran) is checked
        checked = pl.col("language").is_null() | pl.col("language").is_in(list(self.languages))
        return [Rule(pl.col("badword").is_not_null() & checked, "badwords", pl.col("badword"),
                     "contains a listed bad word")]


@cache
def _badwords_pattern(words_file: str | None, words: tuple[str, ...], use_builtin: bool) -> str | None:
    """C4's match: a listed word (group 1) between non-word characters. Built once per process, not once per
    batch."""
    listed = bad_words(words_file, words, use_builtin)
    return r"(?:\W|^)(%s)(?:\W|$)" % "|".join(pl.escape_regex(w) for w in listed) if listed else None


def _shown(line: pl.Expr, chars: int = 100) -> pl.Expr:
    """A line as a detail quotes it: its first `chars` characters."""
    return pl.when(line.str.len_chars() > chars).then(line.str.slice(0, chars) + "…").otherwise(line)
