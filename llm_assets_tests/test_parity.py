"""Parity with the reference implementations: on the real documents of ../shared/data, each filter block drops
exactly the documents datatrove 0.10.1's block with the same settings drops (the issue asks for >= 99%; every
mismatch must be listed and explained in EXPLAINED below), and with the same reason code. datatrove is a test
dependency only (see datatrove_oracle.py for how it runs offline)."""

from __future__ import annotations

import polars as pl
import pytest

from llm_assets.core.filters import (
    C4BadWords,
    C4Quality,
    FineWebQuality,
    GopherQuality,
    GopherRepetition,
    LanguageFilter,
    URLFilter,
)
from llm_assets.core.filters.profanity import BUILTIN
from llm_assets_support import datatrove_oracle as oracle
from llm_assets_support.shared_data import shared

pytestmark = pytest.mark.corpus  # datatrove's blocks and ours over the real documents
pytest.importorskip("datatrove")
pytest.importorskip("spacy")

# doc_id -> why our decision differs from datatrove's. Empty: on the shared documents every decision matches.
# The word-based rules count spaCy's English tokens; `core/filters/text.py` reproduces its splitting rules, and
# the differences left (unit suffixes such as "9pm", rare abbreviations) move no document across a threshold.
EXPLAINED: dict[str, str] = {}

CASES = {
    "url": (URLFilter(blocked_domains=("archive.org",), banned_words=("iana",)), oracle.url),
    "language": (LanguageFilter(), oracle.language),
    "language_multi": (LanguageFilter(languages=("en", "de", "zh"), threshold=0.5), oracle.language),
    "gopher_repetition": (GopherRepetition(), oracle.gopher_repetition),
    "gopher_quality": (GopherQuality(), oracle.gopher_quality),
    "c4_quality": (C4Quality(), oracle.c4_quality),
    "c4_quality_fineweb": (C4Quality(filter_no_terminal_punct=False), oracle.c4_quality),
    "fineweb_quality": (FineWebQuality(), oracle.fineweb_quality),
}


@pytest.fixture(scope="module")
def docs() -> pl.DataFrame:
    shared("warc")
    from llm_assets_support.corpus import shared_documents

    return shared_documents()


@pytest.mark.parametrize("case", list(CASES))
def test_decisions_match_datatrove(case, docs):
    block, reference = CASES[case]
    _, ours = block.apply(docs)
    theirs = reference(block, docs)
    mismatched = [doc for doc, a, b in zip(docs["doc_id"], ours.to_list(), theirs, strict=True)
                  if (a is None) != (b is None)]
    assert 1 - len(mismatched) / docs.height >= 0.99
    assert set(mismatched) <= set(EXPLAINED), f"unexplained mismatches: {mismatched}"
    assert sum(r is not None for r in theirs) > 0 or case == "language_multi"  # the rule is exercised
    if case != "language_multi":  # datatrove's language block has one reason code for everything
        same_reason = [a == b for a, b in zip(ours.to_list(), theirs, strict=True)]
        assert all(same_reason), [(d, a, b)
                                  for d, a, b, s in zip(docs["doc_id"], ours, theirs, same_reason, strict=True)
                                  if not s]


def test_c4_cleanup_leaves_the_same_text(docs):
    """C4's line cleanup rewrites kept documents: the text equals datatrove's, character for character."""
    block = C4Quality(filter_no_terminal_punct=False)
    out, reasons = block.apply(docs)
    theirs = oracle.c4_quality_text(block, docs)
    ours = [t if r is None else None for t, r in zip(out["text"].to_list(), reasons.to_list(), strict=True)]
    assert ours == theirs


def test_c4_badwords_match_datatrove(docs):
    """Same list (datatrove would download LDNOOBW's; both get the built-in one), same pages dropped."""
    block = C4BadWords(enabled=True)
    _, ours = block.apply(docs)
    theirs = oracle.c4_badwords(block, docs, BUILTIN)
    assert [r is None for r in ours.to_list()] == [r is None for r in theirs]


def test_hand_made_cases_match_datatrove():
    """The edge cases of core/test_filters.py get datatrove's verdict too."""
    from llm_assets_tests.core import test_filters as t

    texts = [t.PROSE, t.ENGLISH, "", "\n \n"] + [c[0] for c in t.test_gopher_quality_rules.pytestmark[0].args[1]] \
        + [c[0] for c in t.test_gopher_repetition_rules.pytestmark[0].args[1]] \
        + [c[0] for c in t.test_fineweb_rules.pytestmark[0].args[1]] \
        + ["\n".join(c[0]) for c in t.test_c4_page_rules.pytestmark[0].args[1]]
    df = pl.DataFrame({"text": texts})
    for block, reference in [(GopherQuality(), oracle.gopher_quality), (GopherRepetition(), oracle.gopher_repetition),
                             (FineWebQuality(), oracle.fineweb_quality), (C4Quality(), oracle.c4_quality)]:
        nonempty = df.filter(pl.col("text").str.strip_chars() != "") if block.name == "gopher_quality" else df
        assert block.apply(nonempty)[1].to_list() == reference(block, nonempty), block.name
