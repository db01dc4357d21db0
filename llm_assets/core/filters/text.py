"""Lines, sentences and symbol words, the way the published filters count them (words: `segment`)."""

from __future__ import annotations

import re

import polars as pl

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

