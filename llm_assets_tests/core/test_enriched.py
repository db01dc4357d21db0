"""Enrichment on real shared text, on its own: spaCy entities, YAKE keywords, TextRank summaries, the off switches,
and what documents of a language without a model get."""

import gzip
import json

import polars as pl
import pytest

from llm_assets.core.enriched import (
    SCHEMA,
    EnrichedSettings,
    EntitySettings,
    KeywordSettings,
    SummarySettings,
    enrich_batch,
    entities,
    keyword_language,
    keywords,
    sentences,
    summary,
)
from llm_assets_support.shared_data import shared

pytestmark = pytest.mark.core


@pytest.fixture(scope="module")
def ccnet() -> list[str]:
    """Ten real CCNet documents (English web pages)."""
    return [json.loads(line)["text"] for line
            in gzip.open(shared("text", "dolma__cc_en_head-0091.ccnet.jsonl.gz"), "rt")]


def frame(texts: list[str], languages: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame({"doc_id": [str(i) for i in range(len(texts))], "url": [f"https://x.example/{i}" for i in
                         range(len(texts))], "crawl": ["C"] * len(texts), "language": languages, "text": texts})


def test_entities_of_real_pages(ccnet):
    found = entities(ccnet, EntitySettings())
    shakespeare, capoeira, nigeria = found[9], found[7], found[1]
    assert ("Shakespeare", "PERSON") in {(e["text"], e["label"]) for e in shakespeare}
    assert ("Brazil", "GPE") in {(e["text"], e["label"]) for e in capoeira}
    assert any(e["label"] == "PERSON" and "Segun" in e["text"] for e in nigeria)
    counts = [e["count"] for e in shakespeare]
    assert counts == sorted(counts, reverse=True) and counts[0] > 1  # merged mentions, the most mentioned first
    assert all(e["label"] not in {"DATE", "CARDINAL", "PERCENT"} for doc in found for e in doc)


def test_entity_labels_and_the_top_are_settings(ccnet):
    (people,) = entities([ccnet[9]], EntitySettings(labels=("PERSON",), top=2))
    assert len(people) == 2 and {e["label"] for e in people} == {"PERSON"}


def test_keywords_are_the_topic_and_follow_the_language(ccnet):
    words = [k["keyword"].lower() for k in keywords(ccnet[0], "en", KeywordSettings(top=5))]
    assert len(words) == 5 and any("factoring" in w or "teleconference" in w for w in words)
    assert keyword_language("de") == "de" and keyword_language("cs") == "cz" and keyword_language("tg") is None
    german = "Die Bundesregierung hat am Montag ein neues Gesetz zur Förderung erneuerbarer Energien beschlossen. " * 3
    assert not any(k["keyword"].lower() in {"die", "hat", "am", "ein"} for k
                   in keywords(german, "de", KeywordSettings()))


def test_the_summary_is_central_sentences_in_their_order(ccnet):
    text = ccnet[7]
    result = summary(text, SummarySettings(sentences=3))
    picked = [s for s in sentences(text) if s in result]
    assert len(picked) == 3 and result == " ".join(picked)  # whole sentences, in document order
    assert sum(map(len, picked)) < len(text) / 5
    short = "One sentence only here. And a second one now."
    assert summary(short, SummarySettings(sentences=3)) == short


def test_a_batch_in_the_schema_with_languages_without_a_model_said_and_counted(ccnet):
    out, counts = enrich_batch(frame(ccnet[:3] + [ccnet[2]], ["en", "en", "en", "tg"]), EnrichedSettings())
    assert out.columns == SCHEMA.names
    other = out.row(3, named=True)
    assert other["entities"] is None and other["keywords"] and other["summary"]
    assert other["skipped"] == ["entities: no model for tg",
                                "keywords: no stop words for tg, language-independent list"]
    assert out.row(0, named=True)["skipped"] == []
    assert counts["skipped:entities: no model for tg"] == 1
    assert counts["entity:PERSON"] >= 1


def test_each_part_has_an_off_switch(ccnet):
    off = EnrichedSettings(entities=EntitySettings(enabled=False), keywords=KeywordSettings(enabled=False),
                           summary=SummarySettings(enabled=False))
    out, counts = enrich_batch(frame(ccnet[:2], ["en", "en"]), off)
    assert out["entities"].null_count() == out["keywords"].null_count() == out["summary"].null_count() == 2
    assert not counts
    only_summary = off.model_copy(update={"summary": SummarySettings()})
    assert enrich_batch(frame(ccnet[:1], ["en"]), only_summary)[0]["summary"][0]
