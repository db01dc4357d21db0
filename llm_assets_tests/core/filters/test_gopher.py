"""gopher_repetition measured until_dropped: a document only up to its first failing rule, in the rules' order, with
the kept and rejected rows of every_document; the n-gram measures after that rule null."""

from __future__ import annotations

import random

import polars as pl
import pytest

from llm_assets.core.filters import GopherRepetition, score_filters
from llm_assets.core.filters.base import measuring
from llm_assets_support.corpus import shared_documents
from llm_assets_support.shared_data import shared

DEFAULT = GopherRepetition()


def prose(seed: int, words: int = 300) -> str:
    """Words that never repeat an n-gram (distinct tokens), in lines of twelve."""
    rng = random.Random(seed)
    ws = [f"w{rng.randrange(10**9)}" for _ in range(words)]
    return "\n".join(" ".join(ws[i:i + 12]) for i in range(0, words, 12))


SYNTHETIC = [
    "",
    prose(1),
    "\n\n".join([prose(2, 40)] * 3 + [prose(3, 40)]),  # a paragraph three times
    "\n".join(["the same line here"] * 8 + [prose(4, 60)]),  # lines repeated
    prose(5, 200) + " " + " ".join(["salt pepper"] * 60),  # a 2-gram everywhere
    prose(6, 200) + " " + " ".join(["one two three four five six seven eight nine ten"] * 6),  # a run of 10
    prose(7, 150) + " " + " ".join(["a b c d e"] * 20) + " " + " ".join(["f g h i j k"] * 12),
]


@pytest.fixture(scope="module")
def batch() -> pl.DataFrame:
    """The shared crawl files' documents (WARC and WET, many languages) and documents built to repeat."""
    shared("warc")
    docs = shared_documents().select("doc_id", "text")
    built = pl.DataFrame({"doc_id": [f"built/{i}" for i in range(len(SYNTHETIC))], "text": SYNTHETIC})
    return pl.concat([docs, built])


RULES = ["dup_para_frac", "dup_line_frac", "top_2_gram", "top_4_gram", "duplicated_5_n_grams",
         "duplicated_10_n_grams"]


def failing_first(code: str) -> GopherRepetition:
    """The default block with `code`'s threshold lowered (0, or 0.02 for a top n-gram share, which any document
    has): most documents that reach that rule fail it, the earlier rules drop what they drop by default."""
    if code.startswith("dup_"):
        return DEFAULT.model_copy(update={code: 0.0})
    field, n = ("top_n_grams", int(code.split("_")[1])) if code.startswith("top_") else \
        ("dup_n_grams", int(code.split("_")[1]))
    low = 0.02 if field == "top_n_grams" else 0.0
    return DEFAULT.model_copy(update={field: tuple((k, low if k == n else f) for k, f in getattr(DEFAULT, field))})


INTERLEAVED = GopherRepetition(top_n_grams=((2, 0.2), (6, 0.02)), dup_n_grams=((5, 0.03), (6, 0.14), (8, 0.12)))
CONFIGS = {"default": DEFAULT, **{f"failing {c} first": failing_first(c) for c in RULES},
           "a top 6-gram rule before a duplicated 5-gram one": INTERLEAVED}


def rule_of(column: str) -> str:
    """The rule code an n-gram measure column is read by."""
    kind, n = column.split(".")[-1].split("_")[:2]
    return f"top_{n}_gram" if kind == "top" else f"duplicated_{n}_n_grams"


@pytest.mark.corpus  # every document of the shared crawl files
@pytest.mark.parametrize("name", list(CONFIGS))
def test_until_dropped_keeps_and_rejects_the_same_and_measures_up_to_the_first_failing_rule(batch, name):
    block = CONFIGS[name]
    every = score_filters(batch, [block])
    cascade = score_filters(batch, [block], measure="until_dropped")
    assert every.kept.equals(cascade.kept)
    assert every.dropped.equals(cascade.dropped)  # filter, reason and detail (the failing rule's measure)
    assert every.kept.height and every.dropped.height
    codes = [r.code for r in block.rules()]
    ngrams = [c for c in every.measures.columns if c.endswith("_gram_chars")]
    # every other measure is taken of every document in both modes
    assert every.measures.drop(ngrams).equals(cascade.measures.drop(ngrams))
    unmeasured = 0
    for i, reason in enumerate(cascade.measures["reason"].to_list()):
        failed = codes.index(reason) if reason else len(codes)
        for column in ngrams:
            value = cascade.measures[column][i]
            if codes.index(rule_of(column)) <= failed:
                assert value == every.measures[column][i] and value is not None, (name, column, i, reason)
            else:
                assert value is None, (name, column, i, reason)
                unmeasured += 1
    assert unmeasured
    if name.startswith("failing"):
        assert name.split()[1] in set(every.dropped["reason"])


@pytest.mark.corpus  # every document of the shared crawl files
def test_interleaved_rules_are_decided_in_the_rules_order_not_by_n(batch):
    """The top 6-gram rule comes before the duplicated 5-gram rule, though its n-grams are counted after: a document
    failing both is dropped by top_6_gram (its 5-gram measure null), one failing only the 5-gram rule keeps its top
    6-gram measure."""
    cascade = score_filters(batch, [INTERLEAVED], measure="until_dropped").measures
    top6 = cascade.filter(pl.col("reason") == "top_6_gram")
    dup5 = cascade.filter(pl.col("reason") == "duplicated_5_n_grams")
    assert top6.height and dup5.height
    assert top6["gopher_repetition.dup_5_gram_chars"].null_count() == top6.height
    assert dup5["gopher_repetition.top_6_gram_chars"].null_count() == 0
    every = score_filters(batch, [INTERLEAVED]).measures
    chars = every["gopher_repetition.chars"]
    both = ((every["gopher_repetition.top_6_gram_chars"] / chars > 0.02)
            & (every["gopher_repetition.dup_5_gram_chars"] / chars > 0.03) & (every["reason"] == "top_6_gram"))
    assert both.any()  # some document fails the duplicated 5-gram rule too, yet top_6_gram drops it


@pytest.mark.corpus  # every document of the shared crawl files
def test_a_document_dropped_before_the_n_grams_has_none_measured(batch):
    cascade = score_filters(batch, [DEFAULT], measure="until_dropped").measures
    early = cascade.filter(pl.col("reason").is_in(["empty", "dup_para_frac", "dup_para_char_frac", "dup_line_frac",
                                                   "dup_line_char_frac"]))
    assert set(early["reason"]) >= {"empty", "dup_para_frac", "dup_line_frac"}
    ngrams = early.select(pl.col("^gopher_repetition\\.(top|dup)_\\d+_gram_chars$"))
    assert ngrams.width == 9 and ngrams.null_count().sum_horizontal().item() == 9 * early.height


def test_outside_a_chain_a_block_measures_every_document():
    assert measuring() == "every_document"
    _, stats = DEFAULT.measure(pl.DataFrame({"text": ["", "\n\n".join([prose(8, 40)] * 3)]}))
    assert stats.select(pl.col("^(top|dup)_\\d+_gram_chars$")).null_count().sum_horizontal().item() == 0
