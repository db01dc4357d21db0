"""Normalization (llm_assets.core.filters.normalize): mojibake, NFC, control characters and whitespace, on
hand-made edge cases and on the real documents of ../shared/data."""

from __future__ import annotations

import re
import unicodedata

import polars as pl
import pytest

from llm_assets.core.filters.normalize import MOJIBAKE, Normalize
from llm_assets_support.shared_data import shared


def normalize(*texts: str | None, **config) -> list[str | None]:
    out, reasons = Normalize(**config).apply(pl.DataFrame({"text": list(texts)}, schema={"text": pl.String}))
    assert reasons.to_list() == [None if t else "empty" for t in out["text"]]
    return out["text"].to_list()


def test_mojibake_is_repaired_without_touching_punctuation():
    broken = ("CafÃ©", "donâ€™t", "Ihr GemÃ¼t", "the dayâ€¦")
    assert normalize(*broken) == ["Café", "don’t", "Ihr Gemüt", "the day…"]
    # Clean text with curly quotes, entities and ellipses is left exactly as it is.
    clean = "He said “no” &amp; left… 'fine' -- ok\nnext line"
    assert normalize(clean) == [clean]
    assert normalize("CafÃ© “ok” &amp; …", fix_mojibake=False) == ["CafÃ© “ok” &amp; …"]


def test_mojibake_precheck_flags_only_suspicious_text():
    flags = pl.Series(["CafÃ©", "donâ€™t", "Re: Â\xa0hi", "Café", "naïve “quote”", "Ça va", "日本語"])
    assert flags.str.contains(MOJIBAKE).to_list() == [True, True, True, False, False, False, False]


def test_nfc_composes():
    assert normalize("Cafe\u0301") == ["Caf\u00e9"]
    assert normalize("Cafe\u0301", nfc=False) == ["Cafe\u0301"]


def test_control_characters_and_line_ends():
    assert normalize("a\x00b\x07c\x1bd\x7fe\x85f\x9fg") == ["abcdefg"]
    assert normalize("\ufeffHello\u200bworld") == ["Helloworld"]
    assert normalize("one\r\ntwo\rthree\n\tfour") == ["one\ntwo\nthree\n\tfour"]
    # Vertical tab and form feed break lines: removing them would glue the words.
    assert normalize("page one\fpage two\vend") == ["page one\npage two\nend"]
    assert normalize("a\x00b\r\nc", strip_control=False, whitespace=False) == ["a\x00b\r\nc"]


def test_whitespace_inside_lines_collapses_but_indentation_survives():
    code = "def f(x):\n    if x:\n\t\treturn  x   +  1\n    return 0\n"
    assert normalize(code) == ["def f(x):\n    if x:\n\t\treturn x + 1\n    return 0"]
    unicode_spaces = "a\u00a0\u00a0b\u2003c\u3000\u3000d\u202fe \t f"
    assert normalize(unicode_spaces) == ["a b c d e f"]
    assert normalize("  indented   text  ") == ["  indented text"]


def test_paragraph_breaks_survive_and_blank_runs_shrink():
    text = "\n\n  \nTitle   \n\n\n\n\nFirst paragraph.\n \t \nSecond paragraph.\n\n\n"
    assert normalize(text) == ["Title\n\nFirst paragraph.\n\nSecond paragraph."]
    assert normalize(text, whitespace=False) == [text]


def test_empty_documents_are_dropped():
    assert normalize(" \n\t\u00a0\n", "\ufeff\u200b", "", None, "x") == ["", "", "", None, "x"]


def test_other_columns_are_kept():
    df = pl.DataFrame({"doc_id": ["a", "b"], "text": ["x  y", " "]})
    out, reasons = Normalize().apply(df)
    assert out.to_dicts() == [{"doc_id": "a", "text": "x y"}, {"doc_id": "b", "text": ""}]
    assert reasons.to_list() == [None, "empty"]
    assert df["text"].to_list() == ["x  y", " "]


REMOVED = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufeff\u200b]")


def lines(text: str) -> list[str]:
    """The lines with visible content, split the way the block splits them."""
    text = re.sub(r"\r\n?|[\v\f]", "\n", REMOVED.sub("", text))
    return [line for line in text.split("\n") if line.strip()]


@pytest.mark.corpus
def test_real_documents():
    shared()
    from llm_assets_support.corpus import shared_documents

    docs = shared_documents()
    once, reasons = Normalize().apply(docs)
    twice, _ = Normalize().apply(once)
    assert once["text"].to_list() == twice["text"].to_list()
    assert reasons.null_count() == docs.height

    flagged = docs["text"].str.contains(MOJIBAKE).to_list()
    assert any(flagged)
    changed = 0
    for before, after, mojibake in zip(docs["text"], once["text"], flagged, strict=True):
        changed += before != after
        assert len(lines(before)) == len(lines(after))
        assert "\r" not in after and "\n\n\n" not in after and after == after.strip("\n")
        if mojibake:
            assert "Ã©" not in after and "â€™" not in after
        else:
            # Only layout changed: the same words, in the same order.
            assert unicodedata.normalize("NFC", REMOVED.sub("", before)).split() == after.split()
    assert changed > 0
