"""Word segmentation per language: the one split every block that counts words goes through, FineWeb-2's.

Each language is split by the word tokenizer datatrove assigns it (the language table's `word_tokenizer`): spaCy's
tokenizer for that language (its prefix, suffix and infix rules, exceptions, URLs), run on a batch's distinct
whitespace-free chunks at once (`_spacy_words`), which gives each text exactly the words spaCy gives it alone;
jieba, Sudachi (core dictionary, split mode A), Kiwi (skip-bigram model) and PyThaiNLP's newmm for Chinese,
Japanese, Korean and Thai; IndicNLP's punctuation rules, reproduced here, for the languages of India and Pakistan
(measured against datatrove in `llm_assets_tests/core/test_segment.py`, costs in `benchmarks/segmenters.py`). Text
the identifier labels `und` is split by its dominant script: Han by jieba, kana by Sudachi, Thai by newmm, Lao,
Khmer, Myanmar and Tibetan into grapheme clusters, the rest by spaCy's multi-language tokenizer. Text without a
language (None) is split as English, as FineWeb (v1) does.

Segmenters load on first use, once per process (a pool's fork server loads them before forking: `warm`), and every
package ships its dictionary or rules: nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Callable, Iterable

import numpy as np
import polars as pl

from llm_assets.core.languages import language_table

# Imported by `minhash`, whose workers load NumPy, Polars and PyArrow only: the pattern's module (`filters.text`,
# and with it the filters package) loads when a text needs it.
_SYMBOL_WORD = r"^[\p{P}\p{S}\p{Cc}]+$"  # filters.text.SYMBOL_WORD: a word of punctuation or symbols only

# datatrove's word tokenizers (the language table's `word_tokenizer`) that a segmenter of this module stands in for;
# any other "spacy:<code>" is spaCy's tokenizer for <code>, as datatrove's. Stanza's models and pyvi are not
# installed (Stanza downloads its models at run time): those languages get spaCy's multi-language tokenizer, the one
# datatrove falls back on ("whitespace"), and the parity test leaves them out.
_STAND_INS = {"spacy:zh": "jieba", "spacy:ja": "sudachi", "kiwi": "kiwi", "thai": "newmm", "indicnlp:ur": "urdu",
              "khmer": "graphemes", "lao": "graphemes", "tibetan": "graphemes", "burmese": "graphemes",
              "whitespace": "spacy:xx", "spacy:vi": "spacy:xx"}
_BY_KIND = {"indicnlp": "indic", "stanza": "spacy:xx"}
ENGLISH = "spacy:en"  # a text without a language: FineWeb's (v1) English tokenizer
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
    """What splits a language's words: "spacy:<code>" (spaCy's tokenizer for that language), a dedicated segmenter
    (jieba, sudachi, kiwi, newmm, indic, urdu, graphemes) or "script" (each text by its dominant script: `und`)."""
    if language is None:
        return ENGLISH
    row = language_table().get(language)
    if row is None:
        return "script"
    tokenizer = row.word_tokenizer
    return _STAND_INS.get(tokenizer) or _BY_KIND.get(tokenizer.partition(":")[0], tokenizer)


def _dedicated_segmenter(name: str) -> bool:
    return not name.startswith("spacy:") and name != "script"


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


@functools.cache
def _spacy(code: str):
    """A blank spaCy pipeline for the language: datatrove's `SpaCyTokenizer(code)` (its sentencizer moves no word)."""
    import spacy

    nlp = spacy.blank(code)
    # A new word's lexical attributes (shape, like_num, ...) are computed in Python when it enters the vocabulary,
    # 70% of the tokenizer's time; no split depends on them.
    nlp.vocab.lex_attr_getters = {}  # type: ignore[attr-defined]  # (a public attribute the stubs omit)
    return nlp


def segmenters_for(languages: Iterable[str] | str) -> str:
    """The segmenters a chain that keeps `languages` (or "all") may run, as `warm` takes them: the dedicated ones,
    and spaCy's tokenizers of the listed languages (of English and the multi-language one for "all": loading the
    ~60 languages' rules costs ~0.3 CPU-s each, paid by the first page of a language instead)."""
    if languages == "all":
        names = {segmenter_of(x) for x in language_table()}
        names = {n for n in names if _dedicated_segmenter(n)} | {ENGLISH, "spacy:xx"}
    else:
        names = {segmenter_of(x) for x in languages} | {ENGLISH}
    return ",".join(sorted(names - {"indic", "urdu", "script"}))  # (these load nothing)


def warm(segmenters: str) -> None:
    """Loads the named segmenters ("jieba,sudachi,spacy:fr"): a pool's warm-up (`units.Warmup`)."""
    for name in filter(None, segmenters.split(",")):
        if name.startswith("spacy:"):
            _spacy(name.removeprefix("spacy:")).tokenizer("")
        else:
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


# Python's whitespace (str.isspace, where spaCy's tokenizer splits) as a Rust class: Unicode White_Space plus the
# separators \x1c-\x1f.
CHUNK = r"[^\s\x1c-\x1f]+"
_LETTERS = r"^\p{L}[\p{L}\p{M}]*$"
# spaCy languages with a prefix or suffix rule that matches letters (currency codes), and the languages datatrove
# splits with them; found by tokenizing the 566,000 letter-only words of the UDHR and the handbook in every language
# (`test_segment.py` keeps it true)
_LETTER_AFFIXES = {"id", "ms"}
_BATCH = 200_000  # distinct chunks tokenized in one call: ~60 MB of spaCy tokens at most
# a memory zone is the vocabulary's state: one at a time among the threads of a worker (the tokenizer holds the GIL)
_SPACY_LOCK = threading.Lock()


def _spacy_words(texts: pl.Series, code: str) -> pl.Series:
    """The words spaCy's tokenizer for `code` gives each text, whitespace dropped, as datatrove takes them.

    spaCy splits a text at whitespace first and each whitespace-free chunk by itself (prefixes, suffixes, infixes,
    exceptions, URLs), so a chunk's words do not depend on its neighbours. A batch of pages repeats its chunks ~8
    times: only the distinct ones are tokenized, in one call. The exceptions that hold a space ("EE. UU." in
    Spanish, "в н.в." in Russian) do join two chunks: a text holding one is tokenized whole."""
    nlp = _spacy(code)
    chunks = (texts.to_frame("t").with_row_index("doc")
              .select("doc", chunk=pl.col("t").str.extract_all(CHUNK)).explode("chunk").drop_nulls("chunk"))
    distinct = chunks["chunk"].unique(maintain_order=True)
    # Chunks of letters only that are no exception stay whole (no prefix, suffix or infix rule matches letters),
    # except in the languages whose rules split currency codes off ("IDR", "RM"): only the others are tokenized.
    if code not in _LETTER_AFFIXES:
        whole = distinct.str.contains(_LETTERS) & ~distinct.is_in(_exceptions(code).implode())
        plain, distinct = distinct.filter(whole), distinct.filter(~whole)
    else:
        plain = pl.Series([], dtype=pl.String)
    owners, found = [np.arange(len(plain)) + len(distinct)], [plain]
    for start in range(0, len(distinct), _BATCH):
        owner, words = _tokenize_chunks(nlp, distinct.slice(start, _BATCH))
        owners.append(owner + start)
        found.append(words)
    table = pl.DataFrame({"chunk": pl.concat([distinct, plain]).gather(np.concatenate(owners)), "w": pl.concat(found)})
    per_doc = (chunks.join(table, on="chunk", how="inner", maintain_order="left_right")
               .group_by("doc", maintain_order=True).agg("w"))
    every = pl.DataFrame({"doc": pl.int_range(len(texts), eager=True, dtype=pl.UInt32)})
    words = (every.join(per_doc, on="doc", how="left", maintain_order="left")["w"]
             .fill_null(pl.lit([], dtype=pl.List(pl.String))))
    spanning = _spaced_exceptions(code)
    if spanning:
        rows = texts.str.contains_any(spanning).fill_null(False).arg_true()
        if len(rows):
            alone = [_whole(nlp, t) for t in texts.gather(rows).to_list()]
            words = _put(words, rows, pl.Series(alone, dtype=pl.List(pl.String)))
    return words


def _tokenize_chunks(nlp, chunks: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """The words of whitespace-free chunks, with the index of the chunk each comes from. The chunks are joined by
    newlines, which no exception holds, and the newline tokens dropped."""
    from spacy.attrs import IDX, LENGTH

    lengths = chunks.str.len_chars().to_numpy().astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths[:-1] + 1)])
    joined = chunks.str.join("\n").item()
    with _SPACY_LOCK, nlp.memory_zone():  # the strings of these tokens are not kept in the vocabulary
        spans = nlp.tokenizer(joined).to_array([IDX, LENGTH]).astype(np.int64)
    owner = np.searchsorted(starts, spans[:, 0], side="right") - 1
    offset = spans[:, 0] - starts[owner]
    inside = offset < lengths[owner]  # not a separator
    owner, offset, length = owner[inside], offset[inside], spans[inside, 1]
    words = (pl.DataFrame({"c": chunks.gather(owner), "o": offset, "n": length})
             .select(pl.col("c").str.slice(pl.col("o"), pl.col("n")))["c"])
    return owner, words


def _whole(nlp, text: str) -> list[str]:
    with _SPACY_LOCK, nlp.memory_zone():
        return [w for w in (t.text.strip() for t in nlp.tokenizer(text)) if w]


@functools.cache
def _exceptions(code: str) -> pl.Series:
    """spaCy's exceptions for the language (its special cases)."""
    return pl.Series(sorted(_spacy(code).tokenizer.rules or {}), dtype=pl.String)


@functools.cache
def _spaced_exceptions(code: str) -> list[str]:
    """The exceptions that hold whitespace between other characters."""
    return [k for k in _exceptions(code).to_list() if k.strip() and any(c.isspace() for c in k.strip())]


def _put(words: pl.Series, rows: pl.Series, values: pl.Series) -> pl.Series:
    """`words` with the rows at `rows` replaced by `values` (Polars scatters no list column)."""
    frame = pl.DataFrame({"row": pl.Series(range(len(words)), dtype=rows.dtype), "w": words})
    return (pl.concat([frame.filter(~pl.col("row").is_in(rows.implode())), pl.DataFrame({"row": rows, "w": values})])
            .sort("row")["w"].alias(words.name))


def words_column(texts: pl.Series, language: str | None = None) -> pl.Series:
    """The words of each text in `language` (a language identifier's label), as a List[String] series."""
    family = segmenter_of(language)
    if family.startswith("spacy:"):
        return _spacy_words(texts, family.removeprefix("spacy:")).alias(texts.name)
    if family != "script":
        return _dedicated(texts, family).alias(texts.name)
    by_script = _script_segmenters(texts)
    words = pl.Series([[]] * len(texts), dtype=pl.List(pl.String))
    for name in by_script.unique().to_list():
        rows = (by_script.is_null() if name is None else by_script == name).fill_null(False).arg_true()
        words = _put(words, rows, _dedicated(texts.gather(rows), name) if name is not None
                     else _spacy_words(texts.gather(rows), "xx"))
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
        family = segmenter_of(language)
        if family.startswith("spacy:"):
            continue
        rows = (languages == language).fill_null(False)
        if family == "script":
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
