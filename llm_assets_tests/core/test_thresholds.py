"""The thresholds a filtered build applied to each language, kept once per (language, fingerprint) in the lake, so
that `why` prints those of the build and not today's settings'."""

from __future__ import annotations

import pytest

from llm_assets.core.filtered import FilteredSettings
from llm_assets.core.keys import InvalidKey, thresholds_key
from llm_assets.core.thresholds import AppliedThresholds, record_thresholds, recorded_thresholds


def test_the_record_holds_each_blocks_values_and_sources_and_not_the_keep_list():
    settings = FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3}})
    german = AppliedThresholds.of(settings, "de")
    assert german.fingerprint == settings.language_fingerprint("de") and german.keeps == settings.keeps("de")
    values, sources = german.block("gopher_quality")
    assert (values["min_stop_words"], sources["min_stop_words"]) == (3, "override")
    assert sources["stop_words"] == "fineweb2" and sources["min_doc_words"] == "chain"
    # German's language score is FineWeb-2's re-derived for lid.176 (`LanguageFilter.thresholds`)
    assert "languages" not in german.values["language"] and german.block("language")[1]["threshold"] == "lid176"
    assert german.values["language"]["threshold"] == 0.523
    assert "c4_quality" not in german.values and "c4_quality" not in german.sources  # off for FineWeb-2's languages
    assert AppliedThresholds.from_json(german.to_json()) == german
    assert list(AppliedThresholds.from_json(german.to_json()).values["gopher_quality"]) == list(values)  # in order
    assert german.changed(AppliedThresholds.of(FilteredSettings(), "de")) == [("gopher_quality", "min_stop_words")]
    assert german.changed(german) == []


def test_a_languages_thresholds_are_recorded_once_per_fingerprint(lake, crawl):
    # the test server is shared: a language of this test's own, through an override nobody else sets
    settings = FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": int(crawl[-6:], 16) + 100}})
    key = thresholds_key("de", settings.language_fingerprint("de"))
    assert record_thresholds(lake, settings, ["de"]) == [key]
    etag = lake.get_json_versioned(key)[1]
    assert record_thresholds(lake, settings, ["de"]) == []  # written once: the second build finds it
    assert lake.get_json_versioned(key)[1] == etag
    assert recorded_thresholds(lake, "de", settings.language_fingerprint("de")) == AppliedThresholds.of(settings, "de")
    assert recorded_thresholds(lake, "de", "0" * 20) is None  # a build that recorded none


@pytest.mark.parametrize("language", ["../x", "DE", "de/x", "", "deutsch", "de_latn"])
def test_a_language_no_key_can_hold_is_refused(lake, language):
    with pytest.raises(InvalidKey, match="invalid language"):
        recorded_thresholds(lake, language, "ea017cb25e5cfbce2cc6")
