"""Profanity filter (llm_assets.core.filters.profanity): whole-word density, word lists, and the real documents
of ../shared/data."""

from __future__ import annotations

import polars as pl
import pytest

from llm_assets.core.filters.profanity import BUILTIN, ProfanityFilter, bad_words
from llm_assets_support.shared_data import shared


def run(texts: list[str | None], **config) -> tuple[list[float | None], list[str | None]]:
    df = pl.DataFrame({"text": texts}, schema={"text": pl.String})
    out, reasons = ProfanityFilter(enabled=True, **config).apply(df)
    assert out.schema["profanity_density"] == pl.Float32
    return [None if d is None else round(d, 4) for d in out["profanity_density"]], reasons.to_list()


def test_off_by_default():
    assert ProfanityFilter().enabled is False
    assert ProfanityFilter.name == "profanity"


def test_density_and_drop():
    clean = "A long and perfectly polite sentence about gardening and the weather today."
    one_in_fifty = "shit " + "word " * 49
    rant = "What the FUCK is this shit, you absolute wanker."
    density, reasons = run([clean, one_in_fifty, rant, "", None])
    assert density == [0.0, 0.02, 0.3333, 0.0, None]
    # Strictly above max_density is dropped; exactly at it is kept.
    assert reasons == [None, None, "profanity_density", None, None]
    assert run([one_in_fifty], max_density=0.01)[1] == ["profanity_density"]


def test_whole_words_only():
    text = ("The class assessed Scunthorpe's passage; Essex cocktails at the Shitake bar, a therapist, "
            "Dickens and Cockburn, assassin, title, analysis.")
    assert run([text])[0] == [0.0]
    assert run(["Ass. ASS! ass-kicking (ass)"])[0] == [1.0]


def test_phrases_and_extra_words():
    density, _ = run(["you son of a\nbitch", "son of a gun", "Frak this, FRAK that"], words=("frak", "Son of a  GUN"))
    # A phrase counts once; the whitespace inside it may be any whitespace.
    assert density == [round(1 / 5, 4), round(1 / 4, 4), round(2 / 4, 4)]


def test_user_words_file(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("# team list\nFrak\n\n  gorram  # Firefly\nfrak\nfrak off\n", encoding="utf-8")
    assert bad_words(str(path), (), use_builtin=False) == ("frak", "frak off", "gorram")
    density, reasons = run(["frak off you gorram fool", "what the fuck"], words_file=str(path), use_builtin=False)
    assert density == [0.4, 0.0]
    assert reasons == ["profanity_density", None]


def test_missing_words_file(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(ValueError, match="nope.txt"):
        ProfanityFilter(words_file=str(missing))
    with pytest.raises(ValueError, match="nope.txt"):
        bad_words(str(missing), (), True)


def test_builtin_list():
    words = bad_words(None, (), True)
    assert 40 <= len(words) <= 80
    assert words == tuple(sorted(set(words))) and all(w == w.lower().strip() for w in words)
    assert {"fuck", "shit", "cunt"} <= set(words) and "class" not in words
    assert BUILTIN.read_text(encoding="utf-8").startswith("#")
    assert bad_words(None, ("Zzz", "fuck"), True) == tuple(sorted({*words, "zzz"}))
    assert bad_words(None, (), False) == ()
    density, reasons = run(["fuck fuck fuck"], use_builtin=False)
    assert density == [0.0] and reasons == [None]


@pytest.mark.corpus
def test_real_documents():
    shared()
    from llm_assets_support.corpus import shared_documents

    docs = shared_documents()
    out, reasons = ProfanityFilter(enabled=True).apply(docs)
    assert out.height == docs.height and out["profanity_density"].null_count() == 0
    assert out["profanity_density"].min() >= 0
    dropped = out.filter(reasons.is_not_null())
    # The threshold drops some pages, never most of a real crawl.
    assert 0 < dropped.height < docs.height / 4
    assert (dropped["profanity_density"] > 0.02).all()
