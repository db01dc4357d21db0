"""A document's dominant script, by Unicode script over its letters, to tell the texts the language identifier can
name from those in a script none of its languages is written in (it would still answer with some label)."""

from __future__ import annotations

from functools import cache

import polars as pl

from llm_assets.core.languages import known_scripts

# ISO 15924 -> the Unicode scripts its letters are in. Jpan and Hang include Han: Japanese and Korean text mixes it in.
SCRIPTS: dict[str, tuple[str, ...]] = {
    "Latn": ("Latin",), "Cyrl": ("Cyrillic",), "Arab": ("Arabic",), "Hani": ("Han",),
    "Jpan": ("Hiragana", "Katakana", "Han"), "Hang": ("Hangul", "Han"), "Thai": ("Thai",), "Deva": ("Devanagari",),
    "Beng": ("Bengali",), "Grek": ("Greek",), "Hebr": ("Hebrew",), "Armn": ("Armenian",), "Geor": ("Georgian",),
    "Ethi": ("Ethiopic",), "Tibt": ("Tibetan",), "Thaa": ("Thaana",), "Gujr": ("Gujarati",), "Guru": ("Gurmukhi",),
    "Knda": ("Kannada",), "Khmr": ("Khmer",), "Laoo": ("Lao",), "Mlym": ("Malayalam",), "Mymr": ("Myanmar",),
    "Orya": ("Oriya",), "Sinh": ("Sinhala",), "Taml": ("Tamil",), "Telu": ("Telugu",),
    # scripts no lid.176 language is written in, to name them
    "Syrc": ("Syriac",), "Nkoo": ("Nko",), "Tfng": ("Tifinagh",), "Cher": ("Cherokee",),
    "Cans": ("Canadian_Aboriginal",), "Mong": ("Mongolian",), "Olck": ("Ol_Chiki",), "Java": ("Javanese",),
    "Bali": ("Balinese",), "Sund": ("Sundanese",), "Bugi": ("Buginese",), "Vaii": ("Vai",), "Bopo": ("Bopomofo",),
    "Yiii": ("Yi",), "Copt": ("Coptic",), "Goth": ("Gothic",), "Runr": ("Runic",), "Ogam": ("Ogham",),
    "Glag": ("Glagolitic",), "Tale": ("Tai_Le",), "Talu": ("New_Tai_Lue",), "Lana": ("Tai_Tham",), "Cham": ("Cham",),
    "Adlm": ("Adlam",), "Bamu": ("Bamum",), "Limb": ("Limbu",), "Lepc": ("Lepcha",), "Mtei": ("Meetei_Mayek",),
    "Saur": ("Saurashtra",), "Samr": ("Samaritan",), "Osge": ("Osage",), "Dsrt": ("Deseret",), "Shaw": ("Shavian",),
    "Egyp": ("Egyptian_Hieroglyphs",), "Xsux": ("Cuneiform",), "Linb": ("Linear_B",), "Phag": ("Phags_Pa",),
    "Kali": ("Kayah_Li",), "Tavt": ("Tai_Viet",), "Batk": ("Batak",), "Tglg": ("Tagalog",), "Hano": ("Hanunoo",),
    "Buhd": ("Buhid",), "Tagb": ("Tagbanwa",), "Kana": ("Katakana",), "Hira": ("Hiragana",),
}
UNNAMED = "Zzzz"  # ISO 15924's "uncoded script"


def _letters_of(unicode_scripts: tuple[str, ...] | list[str]) -> str:
    return "[\\p{L}&&[" + "".join(f"\\p{{{s}}}" for s in unicode_scripts) + "]]"


@cache
def _known_scripts() -> list[str]:
    return sorted({s for code in known_scripts() for s in SCRIPTS[code]})


def unknown_scripts(texts: pl.Series) -> pl.Series:
    """Per text: null when its dominant script (the one most of its letters are in) is one the identifier knows, or
    it has no letters; else that script's ISO 15924 code ("Zzzz" when it is none of `SCRIPTS`)."""
    out = pl.Series("script", [None] * len(texts), pl.String)
    # one scan of every text for a letter outside the known scripts (modifier letters such as ʻ are in none: Common);
    # most texts have none
    other = "[\\p{L}--[" + "".join(f"\\p{{{s}}}" for s in [*_known_scripts(), "Common", "Inherited"]) + "]]"
    suspects = texts.str.contains(other).fill_null(False).arg_true()
    if not suspects.len():
        return out
    sub = texts.gather(suspects)
    letters = sub.str.count_matches(r"\p{L}").to_list()
    known = sub.str.count_matches(_letters_of(_known_scripts())).to_list()
    counts = {code: sub.str.count_matches(_letters_of(SCRIPTS[code])).to_list() for code in SCRIPTS}
    listed = sub.str.count_matches(_letters_of(sorted({s for ss in SCRIPTS.values() for s in ss}))).to_list()
    named: list[str | None] = []
    for i, n_letters in enumerate(letters):
        code = max(counts, key=lambda c: counts[c][i])
        if known[i] >= n_letters - known[i]:  # most letters are in the known scripts
            named.append(None)
            continue
        if n_letters - listed[i] > counts[code][i]:  # most letters are in a script of no name here
            code = UNNAMED
        named.append(None if code in known_scripts() else code)
    return out.scatter(suspects, pl.Series(named, dtype=pl.String))
