"""`why` and `trace` print a document's language and the thresholds that applied to it: a German document's are the
chain's values replaced by FineWeb-2's German row and by the settings' overrides for German, each said where it
comes from; an English document (no FineWeb-2 row) has the chain's."""

import json

import pytest

from llm_assets import trace
from llm_assets.core.filtered import FilteredSettings
from llm_assets.settings import Settings


def stopped(language: str | None, block: str = "gopher_quality", reason: str = "gopher_enough_stop_words"
            ) -> trace.Trace:
    facts = {"doc_id": "d1", "filter": block, "reason": reason,
             "detail": json.dumps({"measured": 1, "threshold": "stop_words < 3"})}
    if language:
        facts |= {"language": language, "language_score": 0.9312}
    return trace.Trace("https://example.de/seite", [
        trace.Step("documents", "C", "0000", "kept", "d1"),
        trace.Step("filtered", "C", "0000", "dropped", "d1", facts)])


@pytest.mark.core
def test_why_prints_the_german_thresholds_of_a_german_document_and_where_each_comes_from():
    settings = Settings(filtered=FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3}}))
    german = settings.filtered.applied_thresholds("de")["gopher_quality"]
    assert german != settings.filtered.block("gopher_quality").model_dump(mode="json")  # FineWeb-2's German row
    record = trace.why_record(stopped("de"), settings)
    (stop,) = record["stops"]
    assert (stop["language"], stop["language_score"]) == ("de", 0.9312)
    assert stop["thresholds"]["min_stop_words"] == 3 and stop["threshold_sources"]["min_stop_words"] == "override"
    assert stop["thresholds"]["stop_words"] == german["stop_words"] and "und" in german["stop_words"]
    assert stop["threshold_sources"]["stop_words"] == "fineweb2"
    assert stop["threshold_sources"]["min_doc_words"] == "chain"  # FineWeb-2 keeps Gopher's document length
    said = trace.why(stopped("de"), settings)
    assert "language: de (score 0.9312)" in said and "gopher_quality thresholds for de:" in said
    assert "min_stop_words=3 (override)" in said and "(fineweb2)" in said and "min_doc_words=50 (chain)" in said


@pytest.mark.core
def test_an_english_document_has_the_chains_thresholds_and_one_without_language_too():
    settings = Settings()
    for language in ("en", None):
        (stop,) = trace.why_record(stopped(language), settings)["stops"]
        chain = settings.filtered.block("gopher_quality").model_dump(mode="json", exclude=trace.EXCLUDE)
        assert stop["thresholds"] == chain and set(stop["threshold_sources"].values()) == {"chain"}
        assert stop.get("language") == language


@pytest.mark.core
def test_trace_prints_the_language_of_each_stage_that_kept_the_document():
    t = trace.Trace("d1", [trace.Step("documents", "C", "0000", "kept", "d1"),
                           trace.Step("filtered", "C", "0000", "kept", "d1", {"language": "ja",
                                                                               "language_score": 0.97})])
    assert "kept     d1  language ja (0.97)" in trace.format_trace(t)
    assert "language ja (0.97)" in trace.why(t, Settings())
