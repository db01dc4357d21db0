"""Gopher's rules (Rae et al. 2021, "Scaling Language Models", appendix A, table A1), with the paper's thresholds.

Quality: word count, mean word length, hash and ellipsis ratios, bullet and ellipsis lines, alphabetic words and
stop words. Repetition: duplicated paragraphs and lines (by count and by characters), the share of text held by the
most frequent 2-, 3- and 4-gram, and the share covered by repeated 5- to 10-grams.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl
from pydantic import Field

from llm_assets.core.filters.base import WORDS, Block, Rule, drop_if, measuring
from llm_assets.core.filters.text import SYMBOL_WORD
from llm_assets.core.segment import with_words

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


class GopherQuality(Block):
    """Keeps documents that read like prose. Words are tokenizer words (punctuation marks are words; "symbol" words,
    all punctuation, do not count towards length). Adds `n_words` (non-symbol words). Reasons, checked in this
    order: gopher_short_doc, gopher_long_doc, gopher_below_avg_threshold, gopher_above_avg_threshold,
    gopher_too_many_hashes, gopher_too_many_ellipsis, gopher_too_many_bullets, gopher_too_many_end_ellipsis,
    gopher_below_alpha_threshold, gopher_enough_stop_words."""

    name = "gopher_quality"
    block: Literal["gopher_quality"] = Field(default="gopher_quality", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    min_doc_words: int = Field(default=50, description=(
        "Non-symbol words: shorter documents are dropped (`gopher_short_doc`; Gopher)."))
    max_doc_words: int = Field(default=100_000, description=(
        "Non-symbol words: longer documents are dropped (`gopher_long_doc`; Gopher)."))
    min_avg_word_length: float = Field(default=3, description=(
        "Characters: a lower mean word length is dropped (`gopher_below_avg_threshold`; Gopher)."))
    max_avg_word_length: float = Field(default=10, description=(
        "Characters: a higher mean word length is dropped (`gopher_above_avg_threshold`; Gopher)."))
    max_symbol_word_ratio: float = Field(default=0.1, description=(
        "Hashes or ellipses per word above which a document is dropped (`gopher_too_many_hashes`, "
        "`gopher_too_many_ellipsis`; Gopher)."))
    max_bullet_lines_ratio: float = Field(default=0.9, description=(
        "Share of lines starting with a bullet above which a document is dropped (Gopher)."))
    max_ellipsis_lines_ratio: float = Field(default=0.3, description=(
        "Share of lines ending with an ellipsis above which a document is dropped (Gopher)."))
    min_alpha_words_ratio: float = Field(default=0.8, description=(
        "Share of words with a letter below which a document is dropped (Gopher)."))
    min_stop_words: int = Field(default=2, description=(
        "Stop words (of `stop_words`) a document needs, or it is dropped (`gopher_enough_stop_words`; Gopher)."))
    stop_words: tuple[str, ...] = Field(default=STOP_WORDS, description=(
        "The stop words `min_stop_words` counts (Gopher's English list)."))

    measured_by = ("stop_words",)

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        text = pl.col("text")
        w = pl.col(WORDS)
        df = with_words(df)
        stats = df.select(
            n_all=w.list.len(),
            n_words=w.list.eval(pl.element().filter(~pl.element().str.contains(SYMBOL_WORD))).list.len(),
            word_chars=w.list.eval(
                pl.element().filter(~pl.element().str.contains(SYMBOL_WORD)).str.len_chars()).list.sum(),
            n_alpha=w.list.eval(pl.element().str.contains(r"\p{L}")).list.sum(),
            n_stop=w.list.eval(pl.element().filter(pl.element().is_in(list(self.stop_words)))).list.n_unique(),
            hashes=text.str.count_matches("#", literal=True),
            ellipses=text.str.count_matches("...", literal=True) + text.str.count_matches("…", literal=True),
            # str.splitlines(): a trailing newline does not start another line
            n_lines=text.str.count_matches("\n", literal=True) + (~text.str.ends_with("\n")).cast(pl.UInt32),
            bullet_lines=text.str.count_matches(r"(?m)^[^\S\n]*[•-]"),
            ellipsis_lines=text.str.count_matches(r"(?m)(?:\.\.\.|…)[^\S\n]*$"),
        )
        return df.with_columns(stats["n_words"].cast(pl.Int32)), stats

    def rules(self) -> list[Rule]:
        n, n_all, lines = pl.col("n_words"), pl.col("n_all"), pl.col("n_lines")
        avg = (pl.col("word_chars") / n).alias("mean_word_length")
        return [
            drop_if(n, "<", self.min_doc_words, "gopher_short_doc"),
            drop_if(n, ">", self.max_doc_words, "gopher_long_doc"),
            drop_if(avg, "<", self.min_avg_word_length, "gopher_below_avg_threshold"),
            drop_if(avg, ">", self.max_avg_word_length, "gopher_above_avg_threshold"),
            drop_if((pl.col("hashes") / n_all).alias("hash_ratio"), ">", self.max_symbol_word_ratio,
                    "gopher_too_many_hashes"),
            drop_if((pl.col("ellipses") / n_all).alias("ellipsis_ratio"), ">", self.max_symbol_word_ratio,
                    "gopher_too_many_ellipsis"),
            drop_if((pl.col("bullet_lines") / lines).alias("bullet_lines_ratio"), ">", self.max_bullet_lines_ratio,
                    "gopher_too_many_bullets"),
            drop_if((pl.col("ellipsis_lines") / lines).alias("end_ellipsis_lines_ratio"), ">",
                    self.max_ellipsis_lines_ratio, "gopher_too_many_end_ellipsis"),
            drop_if((pl.col("n_alpha") / n_all).alias("alpha_words_ratio"), "<", self.min_alpha_words_ratio,
                    "gopher_below_alpha_threshold"),
            drop_if(pl.col("n_stop").alias("stop_words"), "<", self.min_stop_words, "gopher_enough_stop_words"),
        ]


class GopherRepetition(Block):
    """Drops documents made of repeated text. Paragraphs are separated by blank lines, lines by newlines; n-grams are
    over tokenizer words. Reasons, in order: dup_para_frac, dup_para_char_frac, dup_line_frac, dup_line_char_frac,
    top_{n}_gram, duplicated_{n}_n_grams."""

    name = "gopher_repetition"
    block: Literal["gopher_repetition"] = Field(default="gopher_repetition", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    # None: the rule is off (FineWeb-2 turns the paragraph rules and dup_line_char_frac off)
    dup_line_frac: float | None = Field(default=0.3, description=(
        "Share of lines that are duplicates above which a document is dropped (Gopher, Rae et al. 2021, table A1); "
        "null: off."))
    dup_para_frac: float | None = Field(default=0.3, description=(
        "Share of paragraphs that are duplicates above which a document is dropped (Gopher); null: off (FineWeb-2 "
        "turns it off)."))
    dup_line_char_frac: float | None = Field(default=0.2, description=(
        "Share of characters in duplicated lines above which a document is dropped (Gopher); null: off."))
    dup_para_char_frac: float | None = Field(default=0.2, description=(
        "Share of characters in duplicated paragraphs above which a document is dropped (Gopher); null: off."))
    top_n_grams: tuple[tuple[int, float], ...] = Field(default=((2, 0.2), (3, 0.18), (4, 0.16)), description=(
        "Pairs `[n, share]`: dropped when the most frequent word n-gram covers more than `share` of the characters "
        "(Gopher)."))
    dup_n_grams: tuple[tuple[int, float], ...] = Field(
        default=((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)),
        description=(
            "Pairs `[n, share]`: dropped when duplicated word n-grams cover more than `share` of the characters "
            "(Gopher)."))

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Counts and characters, every n-gram rule measured for every non-empty document (`_ngram_chars`); measuring
        `until_dropped` (`measuring`), a document only up to its first failing rule, the n-gram measures after it
        null."""
        text = pl.col("text")
        paragraphs = duplicates(df, text.str.strip_chars().str.replace_all(r"\n{2,}", "\x00").str.split("\x00"))
        lines = duplicates(df, text.str.replace_all(r"\n+", "\n").str.split("\n"))
        chars = df["text"].str.len_chars()
        stats = pl.DataFrame({
            "chars": chars, "para_dup": paragraphs[0], "para_dup_chars": paragraphs[1], "paras": paragraphs[2],
            "line_dup": lines[0], "line_dup_chars": lines[1], "lines": lines[2],
        })
        until_dropped = measuring() == "until_dropped"
        failed = np.zeros(df.height, dtype=bool)
        if until_dropped:
            # the empty and paragraph and line rules come first: a document one of them drops needs no n-gram
            first = self.rules()[:-len(self.top_n_grams) - len(self.dup_n_grams) or None]
            failed = stats.select(pl.any_horizontal(r.condition for r in first).fill_null(False)).to_series().to_numpy()
        ngram = {f"top_{n}_gram_chars": np.zeros(df.height) for n, _ in self.top_n_grams}
        ngram |= {f"dup_{n}_gram_chars": np.zeros(df.height) for n, _ in self.dup_n_grams}
        for measured in ngram.values():
            measured[failed] = np.nan
        todo = np.flatnonzero((chars.fill_null(0) > 0).to_numpy() & ~failed)
        if len(todo):
            # split for every row and kept on the frame: Gopher's quality rules count the same words
            df = with_words(df)
            flat = _FlatWords.of(df[WORDS].gather(todo))
            doc_chars = chars.gather(todo).cast(pl.Float64).to_numpy()
            for name, measured in _ngram_chars(flat, doc_chars, self.top_n_grams, self.dup_n_grams,
                                               until_dropped).items():
                ngram[name.replace("_frac", "_chars")][todo] = measured
        # NaN: not measured (until_dropped, after the document's first failing rule), stored null
        stats = stats.with_columns(pl.Series(k, v, nan_to_null=True).cast(pl.UInt32) for k, v in ngram.items())
        return df, stats

    def rules(self) -> list[Rule]:
        chars = pl.col("chars")
        rules = [drop_if(chars, "==", 0, "empty")]
        rules += [drop_if(measured.alias(name), ">", limit, name) for name, measured, limit in (
            ("dup_para_frac", pl.col("para_dup") / pl.col("paras"), self.dup_para_frac),
            ("dup_para_char_frac", pl.col("para_dup_chars") / chars, self.dup_para_char_frac),
            ("dup_line_frac", pl.col("line_dup") / pl.col("lines"), self.dup_line_frac),
            ("dup_line_char_frac", pl.col("line_dup_chars") / chars, self.dup_line_char_frac),
        ) if limit is not None]
        rules += [drop_if((pl.col(f"top_{n}_gram_chars") / chars).alias(f"top_{n}_gram_frac"), ">", frac,
                          f"top_{n}_gram") for n, frac in self.top_n_grams]
        rules += [drop_if((pl.col(f"dup_{n}_gram_chars") / chars).alias(f"dup_{n}_gram_frac"), ">", frac,
                          f"duplicated_{n}_n_grams") for n, frac in self.dup_n_grams]
        return rules


def duplicates(df: pl.DataFrame, parts: pl.Expr) -> tuple[pl.Series, pl.Series, pl.Series]:
    """Per document: how many parts repeat an earlier one, their characters, and the number of parts."""
    exploded = df.select(parts.alias("p")).with_row_index("doc").explode("p").drop_nulls("p")
    per_doc = exploded.group_by("doc").agg(
        dup=(~pl.col("p").is_first_distinct()).sum(),
        dup_chars=pl.when(~pl.col("p").is_first_distinct()).then(pl.col("p").str.len_chars()).otherwise(0).sum(),
        n=pl.len(),
    )
    # a document with no parts has no rows after the explode
    every = pl.DataFrame({"doc": pl.int_range(df.height, eager=True, dtype=pl.UInt32)})
    per_doc = every.join(per_doc, on="doc", how="left").fill_null(0)
    return per_doc["dup"], per_doc["dup_chars"], per_doc["n"]


@dataclass(frozen=True)
class _FlatWords:
    """The words of a batch end to end, hashed once for every n: document index, 64-bit hash, characters, how many
    words are left in the document from each one (itself included), and the characters of the words before each
    one (`cum[p + n] - cum[p]`: the characters of the n words from p)."""

    docs: int
    doc: np.ndarray
    h: np.ndarray
    length: np.ndarray
    left: np.ndarray
    cum: np.ndarray

    @classmethod
    def of(cls, ws: pl.Series) -> _FlatWords:
        counts = ws.list.len().fill_null(0).cast(pl.Int64).to_numpy()
        flat = ws.explode().drop_nulls()  # an empty list explodes to a null
        doc = np.repeat(np.arange(len(ws), dtype=np.int64), counts)
        left = np.cumsum(counts)[doc] - np.arange(len(doc), dtype=np.int64)
        length = flat.str.len_chars().cast(pl.Int64).to_numpy()
        return cls(len(ws), doc, flat.hash(seed=0).to_numpy(), length, left, np.r_[0, np.cumsum(length)])


@dataclass(frozen=True)
class _Grams:
    """The n-grams that occur more than once in their document, grouped by n-gram (NumPy sorts uint64 several times
    faster than a hash table finds duplicates): start word and 64-bit id (the document mixed in) of each occurrence,
    and the number of occurrences of each n-gram, group after group."""

    pos: np.ndarray
    g: np.ndarray
    counts: np.ndarray

    def firsts(self) -> np.ndarray:
        """Per n-gram: the word where it first occurs."""
        return np.minimum.reduceat(self.pos, np.cumsum(self.counts) - self.counts) if len(self.pos) else self.pos


_MULTIPLIER = np.uint64(0x100000001B3)  # wrapping multiply-add: an order-sensitive combination of the word hashes
_DOC_MIX = np.uint64(0x9E3779B97F4A7C15)


def _ngram_chars(flat: _FlatWords, doc_chars: np.ndarray, top: tuple[tuple[int, float], ...],
                 dup: tuple[tuple[int, float], ...], until_dropped: bool = False) -> dict[str, np.ndarray]:
    """The characters each n-gram rule measures, per document, by rule (`top_{n}_gram_frac`, `dup_{n}_gram_frac`:
    a fraction once divided by the document's characters), for every document (the scores
    keep them all, whatever an earlier rule decided): the most frequent n-gram's exactly; those the repeated
    n-grams cover exactly where their bound (every repeat counted, overlaps too) exceeds the rule's threshold,
    elsewhere the bound, at most the threshold: the rule keeps the document either way, and the scan is Python.

    `until_dropped`: a document only up to the first rule it fails, in the rules' order (the top n-grams', then
    the duplicated ones'), which is not the order of n the measures are computed in (a top 6-gram rule comes
    before a duplicated 5-gram one); the measures after that rule NaN."""
    rules = [(f"top_{n}_gram_frac", n, frac) for n, frac in top] + [(f"dup_{n}_gram_frac", n, frac) for n, frac in dup]
    out: dict[str, np.ndarray] = {}
    # until_dropped: the position of the first rule each document fails, of those measured so far
    failed_at = np.full(flat.docs, len(rules))
    needed = np.ones(flat.docs, dtype=bool)
    for n, grams in _repeated_ngrams(flat, {n for _, n, _ in rules}, needed):
        for i, (name, rule_n, frac) in enumerate(rules):
            if rule_n != n:
                continue
            reached = failed_at > i
            if name.startswith("top_"):
                measured = _top_ngram_chars(flat, grams, n)
            else:
                measured = _duplicate_ngram_chars(flat, grams, n, _above(doc_chars, frac, reached))
            if until_dropped:
                measured[~reached] = np.nan
                failed_at[measured / doc_chars > frac] = i  # NaN compares false
            out[name] = measured
        later = [i for i, (_, rule_n, _) in enumerate(rules) if rule_n > n]
        if until_dropped and later:
            needed &= failed_at > min(later)  # read by `_repeated_ngrams` for the next n
    if until_dropped:
        # a rule measured before an earlier one failed (a duplicated 5-gram before a top 6-gram): not kept either
        for i, (name, _, _) in enumerate(rules):
            out[name][failed_at < i] = np.nan
    return out


def _above(doc_chars: np.ndarray, frac: float, among: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Which documents of `among` have characters (a bound of them) above `frac` of the document."""
    return lambda bound: (bound / doc_chars > frac) & among


def _repeated_ngrams(flat: _FlatWords, ns: set[int], needed: np.ndarray) -> Iterator[tuple[int, _Grams]]:
    """For each n of `ns`, in increasing order, the n-grams repeated within their document. An n-gram can only
    repeat where its first n - 1 words do, so each n looks only at the starts of the repeated (n - 1)-grams of the
    documents still `needed` (read again at every step), not at every word. Wrapping uint64 arithmetic."""
    n = min(ns)
    pos = np.flatnonzero(flat.left >= n)
    g = flat.h[pos] + flat.doc[pos].astype(np.uint64) * _DOC_MIX
    for k in range(1, n):
        g = g * _MULTIPLIER + flat.h[pos + k]
    while True:
        order = np.argsort(g)
        g, pos = g[order], pos[order]
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, dtype=np.int64)
        counts = np.diff(np.r_[starts, len(g)])
        repeated = np.repeat(counts > 1, counts)
        pos, g = pos[repeated], g[repeated]
        if n in ns:
            yield n, _Grams(pos, g, counts[counts > 1])
        if n == max(ns):
            return
        n += 1
        more = flat.left[pos] >= n
        if not needed.all():
            more &= needed[flat.doc[pos]]
        pos, g = pos[more], g[more]
        g = g * _MULTIPLIER + flat.h[pos + n - 1]


def _top_ngram_chars(flat: _FlatWords, grams: _Grams, n: int) -> np.ndarray:
    """Characters of the most frequent n-gram times its count (the n-gram joined by spaces); ties go to the n-gram
    seen first, as a Counter's most_common does. Where no n-gram repeats, that is the document's first one."""
    out = np.zeros(flat.docs)
    starts = np.flatnonzero((flat.left >= n) & np.r_[True, flat.doc[1:] != flat.doc[:-1]])
    if len(starts):
        out[flat.doc[starts]] = flat.cum[starts + n] - flat.cum[starts] + n - 1
    if len(grams.g):
        pos, count = grams.firsts(), grams.counts
        doc, chars = flat.doc[pos], flat.cum[pos + n] - flat.cum[pos]
        order = np.lexsort((pos, -count, doc))  # per document: the highest count, then the first seen
        best = order[np.r_[True, doc[order][1:] != doc[order][:-1]]]
        out[doc[best]] = count[best] * (chars[best] + n - 1)
    return out


def _duplicate_ngram_chars(flat: _FlatWords, grams: _Grams, n: int,
                           exact_for: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Characters covered by repeated n-grams, scanning left to right and jumping over each repeat (so overlapping
    repeats are not counted twice). Every occurrence of an n-gram after its first is an upper bound; the scan, in
    Python, runs only for the documents `exact_for(bound)` selects, the others keep the bound."""
    first = grams.firsts()
    chars = flat.cum[first + n] - flat.cum[first]  # the same for every occurrence of an n-gram
    out = np.bincount(flat.doc[first], weights=(grams.counts - 1) * chars, minlength=flat.docs).astype(np.float64)
    exact = np.flatnonzero(exact_for(out))
    if not len(exact):
        return out
    doc = flat.doc[grams.pos]
    scanned = np.flatnonzero(np.isin(doc, exact))
    scanned = scanned[np.argsort(grams.pos[scanned])]  # in text order, document after document
    ids = np.repeat(np.arange(len(grams.counts)), grams.counts)[scanned]  # small integers for the n-grams
    seen, chars_of = bytearray(len(grams.counts)), chars.tolist()
    positions, doc = grams.pos[scanned], doc[scanned]
    for d in exact:
        lo, hi = np.searchsorted(doc, [d, d + 1])
        next_free = -1
        total = 0
        for pos, g in zip(positions[lo:hi].tolist(), ids[lo:hi].tolist(), strict=True):
            if pos < next_free:
                continue
            if seen[g]:
                total += chars_of[g]
                next_free = pos + n
            else:
                seen[g] = 1
        out[d] = total
    return out
