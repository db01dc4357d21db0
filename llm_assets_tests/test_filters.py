"""Document filters on hand-made frames: word-count thresholds, fastText language ID, and apply_filters'
split into kept and rejected rows with reasons."""

from __future__ import annotations

import polars as pl
import pytest

from llm_assets.core.filters import LanguageFilter, WordCountFilter, apply_filters

ENGLISH = ("The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden porch, "
           "wondering whether the rain will come before the harvest is finished this year.")
FRENCH = ("Le renard brun rapide saute par-dessus le chien paresseux pendant que le fermier regarde depuis le "
          "vieux porche en bois, en se demandant si la pluie viendra avant la fin de la récolte.")
GERMAN = ("Der schnelle braune Fuchs springt über den faulen Hund, während der Bauer von der alten hölzernen "
          "Veranda aus zusieht und sich fragt, ob der Regen vor dem Ende der Ernte kommt.")
CHINESE = "敏捷的棕色狐狸跳过了懒惰的狗，农夫在旧木门廊上看着，想知道雨是否会在收获结束之前到来。"


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


# WordCountFilter

@pytest.mark.parametrize(("n", "reason"), [(0, "too_few_words"), (2, "too_few_words"), (3, None), (4, None),
                                           (5, None), (6, "too_many_words"), (1000, "too_many_words")])
def test_word_count_thresholds_are_inclusive(n, reason):
    """min_words <= words <= max_words is kept; one word fewer or more is dropped with its reason."""
    df, reasons = WordCountFilter(min_words=3, max_words=5).apply(pl.DataFrame({"text": [words(n)]}))
    assert df["n_words"].to_list() == [n]
    assert reasons.to_list() == [reason]


def test_words_are_runs_of_non_whitespace():
    """Tabs, newlines, repeated and Unicode spaces separate words; punctuation glued to a word does not."""
    texts = ["a\tb\nc  d", "  padded  ", "", "one,two;three", "a\u00a0b\u2003c", "end.\r\n"]
    df, _ = WordCountFilter(min_words=0).apply(pl.DataFrame({"text": texts}))
    assert df["n_words"].to_list() == [4, 1, 0, 1, 3, 1]
    assert df.schema["n_words"] == pl.Int32


def test_word_count_keeps_columns_and_order():
    """The filter adds `n_words` to every row and leaves the other columns and row order untouched."""
    src = pl.DataFrame({"doc_id": ["a", "b", "c"], "text": [words(1), words(60), words(10)]})
    df, reasons = WordCountFilter(min_words=5, max_words=50).apply(src)
    assert df.drop("n_words").equals(src)
    assert reasons.to_list() == ["too_few_words", "too_many_words", None]
    assert len(reasons) == src.height


def test_min_words_zero_keeps_empty_text():
    """With min_words=0 even an empty document passes the length rule."""
    _, reasons = WordCountFilter(min_words=0, max_words=1).apply(pl.DataFrame({"text": ["", "x", "x y"]}))
    assert reasons.to_list() == [None, None, "too_many_words"]


# LanguageFilter

def test_language_filter_keeps_english_and_drops_the_rest():
    """Only the configured language is kept; the others get reason `language`; scores are added to all."""
    src = pl.DataFrame({"text": [ENGLISH, FRENCH, GERMAN, CHINESE]})
    df, reasons = LanguageFilter(languages=("en",), threshold=0.65).apply(src)
    assert df["language"].to_list() == ["en", "fr", "de", "zh"]
    assert reasons.to_list() == [None, "language", "language", "language"]
    assert df.schema["language_score"] == pl.Float32
    assert df["language_score"].null_count() == 0
    assert (df["language_score"] > 0.65).all()  # confident labels, so `language` here means "not English"


def test_language_filter_accepts_several_languages():
    """languages=('en', 'fr') keeps English and French and still drops German."""
    src = pl.DataFrame({"text": [ENGLISH, FRENCH, GERMAN]})
    _, reasons = LanguageFilter(languages=("en", "fr"), threshold=0.5).apply(src)
    assert reasons.to_list() == [None, None, "language"]


def test_language_threshold_is_inclusive():
    """A document scoring exactly the threshold is kept; raise the threshold above its score and it is dropped."""
    src = pl.DataFrame({"text": [ENGLISH]})
    df, _ = LanguageFilter().apply(src)
    score = df["language_score"][0]
    assert LanguageFilter(threshold=score).apply(src)[1].to_list() == [None]
    assert LanguageFilter(threshold=min(1.0, score + 1e-4)).apply(src)[1].to_list() == ["language"]


def test_language_filter_handles_newlines_and_empty_text():
    """Multi-line text (fastText rejects raw newlines) and empty text are labelled, not an error."""
    src = pl.DataFrame({"text": [ENGLISH.replace(", ", ",\n"), "", "\n\n"]})
    df, reasons = LanguageFilter().apply(src)
    assert df["language"].to_list()[0] == "en"
    assert reasons.to_list() == [None, "language", "language"]
    assert df["text"].to_list() == src["text"].to_list()


def test_language_filter_on_an_empty_frame():
    """An empty batch gives empty columns of the right types."""
    df, reasons = LanguageFilter().apply(pl.DataFrame({"text": []}, schema={"text": pl.String}))
    assert df.height == 0 and len(reasons) == 0
    assert df.schema["language"] == pl.String and df.schema["language_score"] == pl.Float32


# apply_filters

def _batch() -> pl.DataFrame:
    return pl.DataFrame({
        "doc_id": ["en-ok", "en-short", "fr", "de-short", "en-long", "zh"],
        "text": [ENGLISH, "Hello there.", FRENCH, "Guten Tag, wie geht es Ihnen heute?", ENGLISH + " " + words(40),
                 CHINESE],
    })


def test_apply_filters_splits_into_kept_and_rejected_with_reasons():
    """Every input row ends up in exactly one of kept or rejected; rejected rows carry the first failing reason."""
    src = _batch()
    kept, rejected = apply_filters(src, [LanguageFilter(), WordCountFilter(min_words=10, max_words=40)])

    assert kept.height + rejected.height == src.height
    assert sorted(kept["doc_id"].to_list() + rejected["doc_id"].to_list()) == sorted(src["doc_id"].to_list())
    assert kept["doc_id"].to_list() == ["en-ok"]
    assert dict(rejected.select("doc_id", "reason").iter_rows()) == {
        "en-short": "too_few_words", "fr": "language", "de-short": "language", "en-long": "too_many_words",
        "zh": "language",
    }
    assert "reason" not in kept.columns
    assert rejected["reason"].null_count() == 0
    assert {"language", "language_score", "n_words"} <= set(kept.columns)


def test_later_filters_only_see_what_earlier_ones_kept():
    """A document dropped for its language is not word-counted: its n_words stays null."""
    kept, rejected = apply_filters(_batch(), [LanguageFilter(), WordCountFilter(min_words=10, max_words=40)])
    by_id = {row["doc_id"]: row for row in rejected.iter_rows(named=True)}
    assert by_id["de-short"]["n_words"] is None and by_id["de-short"]["language"] == "de"
    assert by_id["en-short"]["n_words"] == 2 and by_id["en-short"]["language"] == "en"
    assert kept["n_words"].null_count() == 0


def test_filter_order_decides_the_reason():
    """Word count first: the short German text is dropped as too_few_words, never reaching language ID."""
    _, rejected = apply_filters(_batch(), [WordCountFilter(min_words=10, max_words=40), LanguageFilter()])
    reasons = dict(rejected.select("doc_id", "reason").iter_rows())
    assert reasons["de-short"] == "too_few_words"
    assert reasons["fr"] == "language"


def test_apply_filters_keeps_everything_that_passes():
    """Nothing dropped: kept equals the input plus the added columns, rejected is empty but has `reason`."""
    src = pl.DataFrame({"doc_id": ["a", "b"], "text": [ENGLISH, ENGLISH.upper().lower()]})
    kept, rejected = apply_filters(src, [LanguageFilter(), WordCountFilter(min_words=1)])
    assert kept.select("doc_id", "text").equals(src)
    assert rejected.height == 0 and "reason" in rejected.columns


def test_apply_filters_with_no_filters():
    """No filters: everything is kept and the rejected frame is empty with a `reason` column."""
    src = _batch()
    kept, rejected = apply_filters(src, [])
    assert kept.equals(src)
    assert rejected.height == 0 and rejected.columns == [*src.columns, "reason"]


def test_apply_filters_on_an_empty_batch():
    """An empty batch gives two empty frames, not an error."""
    kept, rejected = apply_filters(_batch().clear(), [LanguageFilter(), WordCountFilter()])
    assert kept.height == 0 and rejected.height == 0
