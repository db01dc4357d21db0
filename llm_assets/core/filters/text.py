"""Words, lines and sentences, the way the published filters count them.

Gopher's and FineWeb's word rules are defined over the words of a tokenizer that splits punctuation, quotes and
English clitics off as tokens of their own (datatrove uses spaCy's English tokenizer): "don't." is three words,
"do", "n't" and ".", and the alpha-word and symbol ratios depend on that. spaCy costs ~20 ms per web page, so this
module reproduces its main rules with one compiled regular expression run per document (C code, no per-token
Python): prefix and suffix punctuation, hyphens and slashes between words, clitics, URLs, numbers with inner
punctuation ("3.5", "12:30", "1,000", "9/11") and common abbreviations ("U.S.", "e.g.", "Mr."). Where the two
still differ (rare abbreviations, emoticons), the parity test names the documents and the effect.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata

import numpy as np
import polars as pl

from llm_assets.core.filters.base import WORDS

# Abbreviations spaCy's English exceptions keep whole with their final period (the frequent ones).
_ABBREVIATIONS = (
    "Mr. Mrs. Ms. Dr. St. Mt. Jr. Sr. Inc. Ltd. Co. Corp. vs. etc. e.g. i.e. a.m. p.m. U.S. U.K. Jan. Feb. Mar. "
    "Apr. Jun. Jul. Aug. Sep. Sept. Oct. Nov. Dec. Gov. Gen. Rev. Prof. Sen. Rep. Ph.D. No. Nos. Fig. Dept. "
    "approx. est. Ave. Blvd. Bros. Capt. Col. Ariz. Calif. Colo. Conn. Fla. Ga. Ill. Ind. Kan. Ky. La. Md. "
    "Mich. Minn. Miss. Mo. Mont. Neb. Nev. Okla. Ore. Pa. Tenn. Va. Wash. Wis. D.C. N.Y. N.C. S.C. M.D. v. "
    "cont'd"
).split()
# Rust regex for polars: an abbreviation (at a word start) and its final period, the period dropped by "${1}".
_ABBREVIATION_PERIOD = r"\b(" + "|".join(re.escape(a[:-1]) for a in _ABBREVIATIONS if a.endswith(".")) + r")\."
_EMOTICONS = "): :) (: :( ;) :-) :-( :D :P".split()


_CATEGORIES = ("So", "Sc", "Ll", "Lo", "Mn", "Mc")  # the general categories the word pattern's classes are made of


@functools.cache
def _category_ranges() -> dict[str, list[tuple[int, int]]]:
    """The code point ranges of each category of `_CATEGORIES`, from one walk over every code point (0.3 s): the
    classes of every variant of the pattern are cut from it."""
    ranges: dict[str, list[list[int]]] = {c: [] for c in _CATEGORIES}
    for cp in range(sys.maxunicode + 1):
        if (found := ranges.get(unicodedata.category(chr(cp)))) is not None:
            if found and found[-1][1] == cp - 1:
                found[-1][1] = cp
            else:
                found.append([cp, cp])
    return {c: [(a, b) for a, b in r] for c, r in ranges.items()}


def _category_class(*categories: str, astral: bool = True) -> str:
    """The characters of some Unicode general categories (of `_CATEGORIES`), as ranges for a character class
    (Python's `re` has no \\p{...}); without `astral`, only those of the Basic Multilingual Plane."""
    top = sys.maxunicode if astral else 0xFFFF
    merged: list[list[int]] = []
    for a, b in sorted(r for c in categories for r in _category_ranges()[c]):
        if a > top:
            break
        b = min(b, top)
        if merged and merged[-1][1] == a - 1:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in merged)


@functools.cache
def _word_pattern(astral: bool = True, clitics: bool = True) -> re.Pattern:
    """The word pattern, built on first use: its symbol classes walk every code point (0.3 s), which a process that
    only imports the settings should not pay.

    Without `astral`, the symbol classes hold only their characters of the Basic Multilingual Plane: the pattern
    then splits a text without astral characters (emoji, historic scripts) exactly as the full one does, several
    times faster, since `re` tests the astral ranges of a class one by one on every character. Without `clitics`,
    English contractions stay whole ("geht's", as spaCy's other languages keep them)."""
    icons = _category_class("So", astral=astral)  # ©, ®, °, emoji: split off wherever they stand
    symbols = _category_class("Sc", astral=astral) + icons  # currency signs split off at the edges only
    # Marks split off the start and end of a whitespace-separated chunk, one at a time. Inside a chunk they stay
    # ("SC(803", "a;b", CJK runs with full-width commas), as in spaCy.
    edge = (r""",:;!?¿¡()\[\]{}<>_#*&%=§+。？！，、；：～·"“”`‘´’‚„»«「」『』（）〔〕【】《》〈〉؟،۔؛٪।"""
            + "'—–" + symbols)
    clitic = r"(?:n['’]t|['’](?:[sSmMdD]|ll|LL|re|RE|ve|VE))" if clitics else r"(?!)"
    letter, alnum = r"[^\W\d_]", r"[^\W_]"
    # Points inside a chunk where it splits: hyphens after a letter or digit and before a letter, hyphens and operators
    # between digits, a period between a lower-case and an upper-case letter, a comma between letters, : < > = /
    # between a letter or digit and a letter, and ellipses.
    infix = (rf"(?<={alnum})[-–—](?={letter})|(?<=\d)[-+*^](?=[\d-])|(?<=[a-z])\.(?=[A-Z])"
              rf"|(?<={letter}),(?={letter})|(?<={alnum})[:<>=/](?={letter})|\.\.+|…|[{icons}]")
    # What may end a chunk: an optional clitic, then edge marks, ellipses and final periods. Possessive, so a long run
    # of dots costs linear time, not exponential backtracking.
    # A final period splits off after a lower-case or uncased letter (Cyrillic, Arabic, Devanagari too) or a digit,
    # as spaCy's suffix rule; the period is matched before the look-behind, whose class is long.
    lower = "a-z" + _category_class("Ll", "Lo", "Mn", "Mc", astral=astral)
    end = rf"(?:{clitic}?(?:[{edge}]|\.\.+|…|\.(?<=[{lower}\d{edge}]\.)|(?<=[A-Z]{{2}})\.)*+(?=\s|$))"

    # Characters that can start an infix or a chunk's end; runs of any other characters are taken in one step.
    special = edge + r".\-/:<>=+*^'’…"

    return re.compile(
        rf"""
          (?<!\S)[^\s{special}]++(?!\S)                          # a plain chunk, the common case, in one step
        | https?://[^\s<>"]+?(?={end})                          # URLs stay whole
        | (?=[A-Za-z][A-Za-z.']{{0,6}}[.d]|[():;])                # (a cheap guard before the list)
          (?:{"|".join(re.escape(a) for a in sorted(_ABBREVIATIONS + _EMOTICONS, key=len, reverse=True))})
          (?=[{edge}]*(?:\s|$))                                  # exceptions: U.S., e.g., :)
        | (?:{infix})                                            # an infix is a word of its own
        | (?<={alnum}){clitic}(?={end})                        # do|n't, it|'s
        | [{edge}]                                               # a mark at the edge of a chunk
        | (?:[^\s{special}n]++|n(?!['’]t)|(?!{infix}|{end})\S)+  # the rest of the chunk, up to an infix or its end
        | \S
        """,
        re.VERBOSE,
    )


def words(text: str) -> list[str]:
    """The words of one text, spaCy-English style (punctuation marks are words of their own)."""
    return _word_pattern(_has_astral(text)).findall(text)


def _has_astral(text: str) -> bool:
    return bool(text) and max(text) > "\uffff"


# Python's whitespace (str.split, `re`'s \s) as a Rust class: Unicode White_Space plus the separators \x1c-\x1f.
CHUNK = r"[^\s\x1c-\x1f]+"
_ONE_WORD = r"^(?:[A-Za-z0-9]+|[0-9]+(?:[:.,][0-9]+)+[A-Za-z]*)$"  # ASCII chunks the pattern keeps whole
_WORD_AND_MARK = r"^[A-Za-z0-9]+[,;!?)]$"  # ASCII chunks the pattern splits in two, before the mark
_SEPARATOR = "\x00"  # between chunks split in one call; a chunk that holds it is split alone


def spaced_words_column(texts: pl.Series, clitics: bool = True) -> pl.Series:
    """`words` for a whole column, as a List[String] series.

    The pattern never looks across whitespace, so a text's words are its whitespace-separated chunks' words in
    order. Chunks repeat a lot (a batch of web pages has ~8 chunks per distinct one), so only the distinct chunks
    are split, all in one `findall` call (a call costs microseconds), and chunks of letters and digits only, words
    as they stand, skip the pattern."""
    chunks = (texts.to_frame("t").with_row_index("doc")
              .select("doc", chunk=pl.col("t").str.extract_all(CHUNK)).explode("chunk").drop_nulls("chunk"))
    distinct = chunks["chunk"].unique(maintain_order=True)
    owner, flat = _split_distinct(distinct, clitics)
    table = pl.DataFrame({"chunk": distinct.gather(owner), "w": flat})
    per_doc = (chunks.join(table, on="chunk", how="inner", maintain_order="left_right")
               .group_by("doc", maintain_order=True).agg(pl.col("w").alias(WORDS)))
    every = pl.DataFrame({"doc": pl.int_range(len(texts), eager=True, dtype=pl.UInt32)})
    return (every.join(per_doc, on="doc", how="left", maintain_order="left")[WORDS]
            .fill_null(pl.lit([], dtype=pl.List(pl.String))))


def _split_distinct(chunks: pl.Series, clitics: bool) -> tuple[np.ndarray, pl.Series]:
    """The words of distinct whitespace-free chunks, with the index of the chunk each comes from; a chunk's words
    are consecutive and in order."""
    # one word: no infix, edge mark or clitic can occur in letters and digits (str.isalnum, which for ASCII is
    # [A-Za-z0-9]: only the chunks with other characters are asked in Python), nor in a number with inner
    # punctuation and a unit ("12:30pm", "1,000", "3.5")
    plain = chunks.str.contains(_ONE_WORD).to_numpy()
    other = np.flatnonzero(chunks.str.contains(r"[^\x00-\x7f]").to_numpy())
    plain[other] = [c.isalnum() for c in chunks.gather(other).to_list()]
    # two words: ASCII letters and digits, then a closing mark ("word," "it)")
    marked = chunks.str.contains(_WORD_AND_MARK).to_numpy() & ~plain
    ends = chunks.filter(pl.Series(marked))
    # the few chunks with astral characters apart: the full pattern is slower
    astral = chunks.str.contains(r"[^\x00-\x{ffff}]").to_numpy()
    owners = [np.flatnonzero(plain), np.repeat(np.flatnonzero(marked), 2)]
    words = [chunks.filter(pl.Series(plain)),
             pl.DataFrame({"w": ends.str.head(-1), "m": ends.str.tail(1)}).select(pl.concat_list("w", "m"))
             .to_series().explode()]
    for with_astral in (False, True):
        rows = np.flatnonzero(~plain & ~marked & (astral == with_astral))
        if len(rows):
            found, local = _split_joined(chunks.gather(rows).to_list(), with_astral, clitics)
            owners.append(rows[local])
            words.append(found)
    return np.concatenate(owners), pl.concat(words)


def _split_joined(chunks: list[str], astral: bool, clitics: bool) -> tuple[pl.Series, np.ndarray]:
    """The words of the chunks, with the index of the chunk each comes from, from one `findall` over the chunks
    joined by a separator that is a word of its own."""
    pattern = _word_pattern(astral, clitics)
    if _SEPARATOR in "".join(chunks):
        parts = [pattern.findall(c) for c in chunks]
        return (pl.Series([w for p in parts for w in p], dtype=pl.String),
                np.repeat(np.arange(len(chunks)), [len(p) for p in parts]))
    found = pl.Series(pattern.findall(f" {_SEPARATOR} ".join(chunks)), dtype=pl.String)
    separator = (found == _SEPARATOR).to_numpy()
    return found.filter(pl.Series(~separator)), np.cumsum(separator)[~separator]


# Characters that make a word a "symbol" (Gopher: punctuation-only words are not words): the reference's list, not
# Unicode's categories. It holds ASCII punctuation, controls, the sentence terminals and some CJK marks, but not
# "•", "€", "§", "©" or "°": a bullet or a price is a word there, and a page near 50 words changes side on it.
_PUNCTUATION = (  # datatrove 0.10.1's PUNCTUATION_SET (utils/text.py: PUNCTUATION and TERMINAL_PUNCTUATION)
    r"\x{0}-\x{8}\x{B}-\x{1F}\x{21}-\x{2F}\x{3A}-\x{40}\x{5B}-\x{60}\x{7B}-\x{9F}\x{AB}\x{B4}\x{BB}\x{589}"
    r"\x{61D}-\x{61F}\x{6D4}\x{700}-\x{702}\x{7F9}\x{837}\x{839}\x{83D}-\x{83E}\x{964}-\x{965}\x{104A}-\x{104B}"
    r"\x{1362}\x{1367}-\x{1368}\x{166E}\x{1735}-\x{1736}\x{17D4}-\x{17D6}\x{17D9}-\x{17DA}\x{1803}\x{1809}"
    r"\x{1944}-\x{1945}\x{1AA8}-\x{1AAB}\x{1B5A}-\x{1B5B}\x{1B5E}-\x{1B5F}\x{1B7D}-\x{1B7E}\x{1C3B}-\x{1C3C}"
    r"\x{1C7E}-\x{1C7F}\x{2013}-\x{2014}\x{2019}\x{201C}-\x{201E}\x{2026}\x{203C}-\x{203D}\x{2047}-\x{2049}"
    r"\x{2236}\x{2501}\x{25BA}\x{2E2E}\x{2E3C}\x{2E53}-\x{2E54}\x{3001}-\x{3002}\x{3008}-\x{300D}\x{3010}-\x{3011}"
    r"\x{A4FF}\x{A60E}-\x{A60F}\x{A6F3}\x{A6F7}\x{A876}-\x{A877}\x{A8CE}-\x{A8CF}\x{A92F}\x{A9C8}-\x{A9C9}"
    r"\x{AA5D}-\x{AA5F}\x{AAF0}-\x{AAF1}\x{ABEB}\x{FE52}\x{FE56}-\x{FE57}\x{FF01}\x{FF05}\x{FF08}-\x{FF09}\x{FF0C}"
    r"\x{FF0E}\x{FF11}\x{FF1A}-\x{FF1B}\x{FF1F}\x{FF5E}\x{FF61}\x{10A56}-\x{10A57}\x{10F55}-\x{10F59}"
    r"\x{10F86}-\x{10F89}\x{11047}-\x{11048}\x{110BE}-\x{110C1}\x{11141}-\x{11143}\x{111C5}-\x{111C6}\x{111CD}"
    r"\x{111DE}-\x{111DF}\x{11238}-\x{11239}\x{1123B}-\x{1123C}\x{112A9}\x{1144B}-\x{1144C}\x{115C2}-\x{115C3}"
    r"\x{115C9}-\x{115D7}\x{11641}-\x{11642}\x{1173C}-\x{1173E}\x{11944}\x{11946}\x{11A42}-\x{11A43}"
    r"\x{11A9B}-\x{11A9C}\x{11C41}-\x{11C42}\x{11EF7}-\x{11EF8}\x{11F43}-\x{11F44}\x{16A6E}-\x{16A6F}\x{16AF5}"
    r"\x{16B37}-\x{16B38}\x{16B44}\x{16E98}\x{1BC9F}\x{1DA88}"
)
SYMBOL_WORD = rf"^[{_PUNCTUATION}]+$"
# FineWeb's line-final marks: Unicode's sentence terminals.
TERMINAL_PUNCTUATION = r"\p{Sentence_Terminal}"


def sentence_count(line: pl.Expr) -> pl.Expr:
    """Sentences in a line, as a sentencizer counts them: one, plus one per sentence-final mark ('.', '!', '?' and
    the other Unicode sentence terminals, with any closing quotes or brackets) that stands as a word of its own and
    is followed by more text. "3.5", "e.g." and "U.S." do not end sentences."""
    line = line.str.replace_all(_ABBREVIATION_PERIOD, "${1}")  # "e.g." and "Mr." are words, not sentence ends
    ends = line.str.count_matches(
        r"(?:[\p{Ll}\p{N}\p{P}\p{S}]\.|[\p{Lu}]{2}\.|[!?\p{Sentence_Terminal}&&[^.]])"
        r"[\p{Sentence_Terminal}\"'”’)\]»]*\s+[^\s\p{Sentence_Terminal}\"'”’)\]»]"
    ) + line.str.count_matches(r"[a-z]\.[A-Z]")  # "outbreaks.Crews": the period splits off between the words
    return pl.when(line.str.strip_chars() == "").then(0).otherwise(ends + 1)

