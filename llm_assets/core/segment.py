"""Word segmentation per language: the one split every block that counts words goes through.

Languages written with spaces use the pattern of `filters.text` (spaCy's rules, which datatrove's blank pipelines
apply to them), with the language's own rules where they matter: English contractions only in English, elided
articles split off in French, Italian and Catalan ("l'|homme"). Chinese, Japanese, Korean and Thai have
segmenters of their own, the ones FineWeb-2's tokenizers run (measured against them in
`llm_assets_tests/core/test_segment.py`, costs in `benchmarks/segmenters.py`): jieba, Sudachi (core dictionary, split
mode A), Kiwi (skip-bigram model) and PyThaiNLP's newmm; the languages of India and Pakistan (Hindi, Bengali,
Tamil, Urdu, ...) IndicNLP's punctuation rules, reproduced here. Any other language whose text is mostly in a script
written without spaces (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan: Cantonese, Wu, Lao labelled pages, a page the
identifier labels `und`) is split by its script: Han by jieba, kana by Sudachi, Thai by newmm, the others into
grapheme clusters. Text without a language (None) keeps the English rules.

Segmenters load on first use, once per process (a pool's fork server loads them before forking: `warm`), and every
package ships its dictionary: nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from typing import Callable, Iterable

import polars as pl

# Imported by `minhash`, whose workers load NumPy, Polars and PyArrow only: the pattern's module (`filters.text`,
# and with it the filters package) loads when a text needs it.
_SYMBOL_WORD = r"^[\p{P}\p{S}\p{Cc}]+$"  # filters.text.SYMBOL_WORD: a word of punctuation or symbols only

# The segmenter of each language written without spaces (lid.176 labels), and of the languages FineWeb-2 splits with
# IndicNLP's punctuation rules (Brahmic scripts; Urdu, Pashto and Sindhi with Urdu's marks).
DEDICATED = {"zh": "jieba", "ja": "sudachi", "ko": "kiwi", "th": "newmm"} | {
    code: "indic" for code in ("as", "bn", "gu", "hi", "kn", "ml", "mr", "ne", "or", "pa", "sa", "si", "ta", "te")
} | {code: "urdu" for code in ("ur", "ps", "sd")}
# Languages whose spaCy tokenizer splits elided articles and prepositions off the next word.
_ELISION = {
    "fr": r"(?i)^((?:qu|jusqu|lorsqu|puisqu|quoiqu|presqu|[cdjlmnst])['’])(\w.*)$",
    "it": r"(?i)^(\w+['’])(\w.*)$",
    "ca": r"(?i)^((?:[dlmnst])['’])(\w.*)$",
}
# Languages whose spaCy tokenizer takes a word's final periods off one at a time ("tak..." -> "tak", ".", ".", "."),
# where the others keep an ellipsis whole.
_FINAL_PERIODS = {"pl"}
_PERIODS_AFTER_WORD = re.compile(r"(?<=[^\s.])\.{2,}(?=[)\]\"'»”]*(?:\s|$))")
# Languages whose spaCy tokenizer keeps a hyphen between letters inside the word ("Kategorie-Übersicht",
# "niet-zelfbesturend"), where the others split it off as English does. The pattern splits there, so such a hyphen
# is hidden behind a private-use character while the text is split, and put back in the words.
_JOINED_HYPHENS = {"de", "nl", "sv", "es", "pt", "el"}
_HIDDEN_HYPHEN = "\ue000"
_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"
# A dominant script without spaces and what splits it; the first that holds more than half a text's letters wins
# (kana with Han: Japanese writes both, so any kana sends a Han text to Sudachi).
_SCRIPT_SEGMENTERS = (
    (r"\p{Hiragana}\p{Katakana}", "sudachi"),
    (r"\p{Han}\p{Hiragana}\p{Katakana}", "jieba"),
    (r"\p{Thai}", "newmm"),
    (r"\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}", "graphemes"),
)
_SUDACHI_BYTES = 40_000  # Sudachi refuses inputs above 49,149 bytes; datatrove cuts Japanese at 40,000


def segmenter_of(language: str | None) -> str:
    """The segmenter family of a language: "spaced" (the pattern), "script" (by each text's dominant script) or
    a dedicated one."""
    if language is None:
        return "spaced"
    return DEDICATED.get(language, "script")


@functools.cache
def _jieba() -> Callable[[str], list[str]]:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return lambda text: list(tokenizer.cut(text, HMM=True))


@functools.cache
def _sudachi() -> Callable[[str], list[str]]:
    from sudachipy import Dictionary, SplitMode

    tokenizer = Dictionary(dict="core").tokenizer(mode=SplitMode.A)  # the shortest units, as spaCy's Japanese

    def split(text: str) -> list[str]:
        return [m.surface() for part in _byte_chunks(text, _SUDACHI_BYTES) for m in tokenizer.tokenize(part)]

    return split


@functools.cache
def _kiwi() -> Callable[[str], list[str]]:
    import warnings

    from kiwipiepy import Kiwi

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the skip-bigram model, datatrove's: every word equal on the UDHR, where the default (knlm) model, 2.4x
        # cheaper, agrees on 0.996 (benchmarks/segmenters.py); one thread, as the rest of a worker
        kiwi = Kiwi(model_type="sbg", num_workers=1)
    # A morpheme's span in the text, as datatrove takes it (a contracted ending such as 날 = 나 + ㄹ covers the
    # same characters twice).
    return lambda text: [text[t.start:t.end] for t in kiwi.tokenize(text)]


@functools.cache
def _newmm() -> Callable[[str], list[str]]:
    from pythainlp.tokenize import word_tokenize

    return lambda text: word_tokenize(text, engine="newmm-safe", keep_whitespace=False)


@functools.cache
def _graphemes() -> Callable[[str], list[str]]:
    import regex

    # Runs of the script become their grapheme clusters (a consonant with its vowel signs), the rest its words.
    scripts = r"\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"
    cluster = regex.compile(rf"[{scripts}]\p{{M}}*|[^\s{scripts}]+")
    return cluster.findall


def _punctuation_split(marks: str) -> Callable[[str], list[str]]:
    """IndicNLP's trivial tokenizer (datatrove's for these languages): every ASCII punctuation mark and the
    script's own marks are words of their own, except inside numbers ("1,000", "12:30"); words are separated by
    spaces only, so, as there, words on either side of a newline stay one word."""
    import re
    import string

    mark = re.compile(f"([{re.escape(string.punctuation)}{marks}])")
    spaces = re.compile(" +")
    number = re.compile(r"(?:[0-9]+ [,.:/] )+[0-9]+") if marks != _URDU_MARKS else None

    def split(text: str) -> list[str]:
        s = spaces.sub(" ", mark.sub(r" \1 ", text.replace("\t", " "))).strip(" ")
        if number is not None:
            # (IndicNLP leaves a number that starts the text split)
            s = number.sub(lambda m: m.group(0).replace(" ", "") if m.start() else m.group(0), s)
        return s.split(" ")

    return split


_INDIC_MARKS = "\u0964\u0965\uaaf1\uaaf0\uabeb\uabec\uabed\uabee\uabef\u1c7e\u1c7f"  # dandas and others
_URDU_MARKS = "\u0609\u060a\u060c\u061e\u066a\u066b\u066c\u066d\u06d4"
_LOADERS = {"jieba": _jieba, "sudachi": _sudachi, "kiwi": _kiwi, "newmm": _newmm, "graphemes": _graphemes,
            "indic": functools.cache(lambda: _punctuation_split(_INDIC_MARKS)),
            "urdu": functools.cache(lambda: _punctuation_split(_URDU_MARKS))}


def segmenters_for(languages: Iterable[str] | str) -> str:
    """The dedicated segmenters a chain that keeps `languages` (or "all") may run, as `warm` takes them."""
    names = set(DEDICATED.values()) if languages == "all" else {DEDICATED[x] for x in languages if x in DEDICATED}
    return ",".join(sorted(names - {"indic", "urdu"}))  # (these two load nothing)


def warm(segmenters: str) -> None:
    """Loads the named segmenters ("jieba,sudachi,kiwi,newmm"): a pool's warm-up (`units.Warmup`)."""
    for name in filter(None, segmenters.split(",")):
        _LOADERS[name]()("")


def segment(texts: list[str], segmenter: str) -> list[list[str]]:
    """The words of each text by one dedicated segmenter, whitespace dropped. A text the slow segmenters split
    before is not split again (`_Memo`): the same words, from memory."""
    split = _LOADERS[segmenter]()

    def words(text: str) -> list[str]:
        return [w for w in (w.strip() for w in split(text)) if w]

    if segmenter not in _MEMOIZED:
        return [words(t) if t else [] for t in texts]
    return [_MEMO.words(segmenter, t, words) if t else [] for t in texts]


class _Memo:
    """The words of the texts a segmenter split last, up to `chars` characters of text, the oldest forgotten first.

    The stage asks again for the words of every page the chain kept (`n_words`), after the chain's blocks split it,
    and a dedicated segmenter costs 1 to 60 ms a page (`benchmarks/segmenters.py`). Words are held joined by NUL,
    not as a list of Python strings (~60 bytes a word); a text with a NUL is not held."""

    def __init__(self, chars: int):
        self.limit, self.chars = chars, 0
        self.held: dict[tuple[str, str], str] = {}
        self.lock = threading.Lock()  # the threads of a worker share it

    def clear(self) -> None:
        with self.lock:
            self.held.clear()
            self.chars = 0

    def words(self, segmenter: str, text: str, split: Callable[[str], list[str]]) -> list[str]:
        key = (segmenter, text)
        joined = self.held.get(key)
        if joined is not None:
            return joined.split("\0") if joined else []
        found = split(text)
        if "\0" not in text and 2 * len(text) <= self.limit:
            with self.lock:
                if key not in self.held:
                    self.held[key] = "\0".join(found)
                    self.chars += len(text)
                while self.chars > self.limit:
                    oldest = next(iter(self.held))
                    self.chars -= len(oldest[1])
                    del self.held[oldest]
        return found


_MEMOIZED = {"jieba", "sudachi", "kiwi", "newmm"}  # the others cost less than a look-up
# a batch of pages of a language written without spaces; measured: 20 MB held as 3,000-character pages, at most
# 48 MB as 35-character lines (C4's, each entry's own overhead)
_MEMO = _Memo(4_000_000)


def forget() -> None:
    """Forgets the texts segmented so far (a benchmark's next pass over the same documents starts cold)."""
    _MEMO.clear()


def _byte_chunks(text: str, limit: int) -> list[str]:
    """`text` cut into pieces of at most `limit` UTF-8 bytes, at line ends where there are some."""
    if len(text) * 4 <= limit or len(text.encode()) <= limit:
        return [text]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        n = len(line.encode())
        if size + n > limit and current:
            pieces.append("".join(current))
            current, size = [], 0
        while n > limit:  # a single line longer than the limit: cut by characters
            cut = limit // 4
            pieces.append(line[:cut])
            line = line[cut:]
            n = len(line.encode())
        current.append(line)
        size += n
    if current:
        pieces.append("".join(current))
    return pieces


def _dedicated(texts: pl.Series, segmenter: str) -> pl.Series:
    return pl.Series(segment(texts.fill_null("").to_list(), segmenter), dtype=pl.List(pl.String))


def _elide(words: pl.Series, pattern: str) -> pl.Series:
    """Elided words split in two ("l'homme" -> "l'", "homme"), as spaCy's French and Italian tokenizers do."""
    if not words.explode().str.contains(pattern).any():
        return words
    w = pl.col("w")
    split = (words.to_frame("w").with_row_index("doc").explode("w", empty_as_null=True)
             .with_columns(parts=pl.when(w.str.contains(pattern))
                           .then(pl.concat_list(w.str.extract(pattern, 1), w.str.extract(pattern, 2)))
                           .otherwise(pl.concat_list("w")))
             .explode("parts")
             .group_by("doc", maintain_order=True).agg(pl.col("parts").drop_nulls()))
    return split["parts"].alias(words.name)


def _script_segmenters(texts: pl.Series) -> pl.Series:
    """Per text, the segmenter of its dominant script when that script is written without spaces, else null."""
    out = pl.Series([None] * len(texts), dtype=pl.String)
    candidates = texts.str.contains(f"[{_UNSPACED}]").fill_null(False)  # stops at the first: cheap on most texts
    if not candidates.any():
        return out
    if not candidates.all():
        where = candidates.arg_true()
        return out.scatter(where, _script_segmenters(texts.gather(where)))
    letters = texts.str.count_matches(r"\p{L}").fill_null(0)
    unspaced = texts.str.count_matches(f"[{_UNSPACED}]").fill_null(0)
    if not (2 * unspaced > letters).any():
        return out
    for chars, name in reversed(_SCRIPT_SEGMENTERS):  # the first listed wins: applied last
        share = texts.str.count_matches(f"[{chars}]").fill_null(0)
        hit = 2 * share > letters if name != "sudachi" else (share > 0) & (2 * unspaced > letters)
        out = pl.select(pl.when(hit).then(pl.lit(name)).otherwise(out)).to_series()
    return out


def _spaced(texts: pl.Series, language: str | None) -> pl.Series:
    from llm_assets.core.filters.text import spaced_words_column

    return spaced_words_column(texts, clitics=language in (None, "en"))  # English contractions only in English


def _put(words: pl.Series, rows: pl.Series, values: pl.Series) -> pl.Series:
    """`words` with the rows at `rows` replaced by `values` (Polars scatters no list column)."""
    frame = pl.DataFrame({"row": pl.Series(range(len(words)), dtype=rows.dtype), "w": words})
    return (pl.concat([frame.filter(~pl.col("row").is_in(rows.implode())), pl.DataFrame({"row": rows, "w": values})])
            .sort("row")["w"].alias(words.name))


def words_column(texts: pl.Series, language: str | None = None) -> pl.Series:
    """The words of each text in `language` (a language identifier's label), as a List[String] series."""
    family = segmenter_of(language)
    if family != "spaced" and family != "script":
        return _dedicated(texts, family).alias(texts.name)
    if language in _FINAL_PERIODS and texts.str.contains("..", literal=True).any():
        periods = [t if t is None else _PERIODS_AFTER_WORD.sub(lambda m: f" {' '.join(m.group(0))} ", t)
                   for t in texts.to_list()]
        texts = pl.Series(texts.name, periods, pl.String)
    hidden = language in _JOINED_HYPHENS and texts.str.contains(r"\p{L}-\p{L}").any()
    if hidden:  # twice: "a-b-c" overlaps
        for _ in range(2):
            texts = texts.str.replace_all(r"(\p{L})-(\p{L})", f"${{1}}{_HIDDEN_HYPHEN}${{2}}")
    by_script = _script_segmenters(texts) if family == "script" else pl.Series([None] * len(texts), dtype=pl.String)
    if by_script.is_null().all():
        words = _spaced(texts, language)
    else:
        words = pl.Series([[]] * len(texts), dtype=pl.List(pl.String))
        for name in by_script.unique().to_list():
            rows = (by_script.is_null() if name is None else by_script == name).fill_null(False).arg_true()
            words = _put(words, rows, _dedicated(texts.gather(rows), name) if name is not None
                         else _spaced(texts.gather(rows), language))
    if language in _ELISION:
        words = _elide(words, _ELISION[language])
    if hidden:
        words = words.list.eval(pl.element().str.replace_all(_HIDDEN_HYPHEN, "-", literal=True))
    return words.alias(texts.name)


def words_by_language(texts: pl.Series, languages: pl.Series | None) -> pl.Series:
    """`words_column` for a frame that may mix languages: each language's rows by its own segmenter, in the
    frame's order."""
    if languages is None:
        return words_column(texts)
    languages = languages.cast(pl.String)
    groups = languages.unique(maintain_order=True).to_list()
    if len(groups) <= 1:
        return words_column(texts, groups[0] if groups else None)
    parts = []
    for language in groups:
        rows = (languages.is_null() if language is None else languages == language).fill_null(False).arg_true()
        parts.append(pl.DataFrame({"row": rows, "w": words_column(texts.gather(rows), language)}))
    return pl.concat(parts).sort("row")["w"].alias(texts.name)


def with_words(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with the words of its text in a `_words` column, split only if no earlier block did; each row by its
    `language`'s segmenter when the frame has that column."""
    from llm_assets.core.filters.base import WORDS

    if WORDS in df.columns:
        return df
    languages = df["language"] if "language" in df.columns else None
    return df.with_columns(words_by_language(df["text"], languages).alias(WORDS))


def segmented(texts: pl.Series, languages: pl.Series | None) -> pl.Series:
    """Per text, whether a segmenter splits it (its language is written without spaces, or its dominant script
    is) rather than the pattern: there, whitespace-separated runs are not words."""
    out = pl.Series([False] * len(texts), dtype=pl.Boolean)
    if languages is None:
        return out
    languages = languages.cast(pl.String)
    for language in languages.drop_nulls().unique().to_list():
        rows = (languages == language).fill_null(False)
        if segmenter_of(language) == "script":
            rows &= texts.str.contains(f"[{_UNSPACED}]").fill_null(False)
            if rows.any():
                where = rows.arg_true()
                rows = rows.scatter(where, _script_segmenters(texts.gather(where)).is_not_null())
        out |= rows
    return out


def word_counts(texts: pl.Series, languages: pl.Series | None = None) -> pl.Series:
    """Words per text for densities and `n_words`: whitespace-separated runs, except in texts split by a segmenter
    (`segmented`), where they are the segmenter's words that are not only punctuation."""
    counts = texts.str.count_matches(r"\S+").fill_null(0)
    rows = segmented(texts, languages).arg_true()
    if len(rows) and languages is not None:  # (not None when a row is segmented: for mypy)
        words = words_by_language(texts.gather(rows), languages.gather(rows))
        counts = counts.scatter(rows, words.list.eval(pl.element().str.contains(_SYMBOL_WORD).not_()).list.sum()
                                .cast(counts.dtype))
    return counts
