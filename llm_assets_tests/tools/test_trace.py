"""`why` and `trace` print a document's language and the thresholds that applied to it: a German document's are the
chain's values replaced by FineWeb-2's German row and by the settings' overrides for German, each said where it
comes from; an English document (no FineWeb-2 row) has the chain's."""

import json

import pytest

from llm_assets.core.filtered import FilteredSettings
from llm_assets.settings import Settings
from llm_assets.tools import trace
from llm_assets_support.shared_data import shared


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
    assert stop["thresholds_from"] == "settings" and "today" not in stop  # a synthetic stop: no build recorded any
    assert "language: de (score 0.9312)" in said
    assert "gopher_quality thresholds for de (as today's settings give them; this build recorded none):" in said
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


# --- the thresholds as built: a real lake, the filtered stage in-process --------------------------------------------

def _build(object_store, instance, crawl: str, shard: str) -> None:
    import dagster as dg

    from llm_assets.platform.partitions import crawl_shard_key
    from llm_assets.settings import load_settings
    from llm_assets_tests.conftest import built
    from resources import LakeIOManager

    result = dg.materialize(built("raw_files", "documents", "filtered", settings=load_settings()),
                            partition_key=crawl_shard_key(crawl, shard), instance=instance,
                            resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)})
    assert result.success


def _why(key: str, crawl: str, capsys, *json_out: str) -> str | dict:
    from llm_assets import cli

    assert cli.main(["why", key, "--crawl", crawl, *json_out]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if json_out else out


@pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
def test_why_prints_the_thresholds_the_build_applied_and_says_when_todays_settings_differ(
        store_env, object_store, instance, crawl, tmp_path, monkeypatch, capsys):
    """German documents dropped for too few stop words under an override of German's `min_stop_words`: after the
    override changes, `why` and `trace` still print the value the build applied (with its source) and say that
    today's differs; once rebuilt, they print the new one and nothing more."""
    from llm_assets.core.keys import thresholds_key
    from llm_assets.core.partition import read_manifest
    from llm_assets.core.thresholds import AppliedThresholds
    from llm_assets.settings import load_settings
    from llm_assets.stages.filtered import LANGUAGE_INPUT
    from llm_assets_tests.core.test_dedup import name_in_shard
    from llm_assets_tests.tools.test_stale import udhr_jsonl, write_settings

    settings_file = tmp_path / "settings.yaml"
    write_settings(settings_file, ["en", "de"], {"de": {"gopher_quality.min_stop_words": 10_000}})
    monkeypatch.setenv("LLM_ASSETS_SETTINGS", str(settings_file))
    lake, shard = object_store.lake(), "0000"
    lake.put_bytes(f"raw/{crawl}/{name_in_shard(crawl, shard, 'deu', '.jsonl')}", udhr_jsonl("deu", documents=2))
    instance.add_dynamic_partitions("crawl", [crawl])
    _build(object_store, instance, crawl, shard)
    url = "https://udhr.example/deu/0"

    # the build recorded German's thresholds under the fingerprint its manifest names
    fingerprint = read_manifest(lake, "filtered", crawl, shard).inputs[LANGUAGE_INPUT + "de"]
    assert fingerprint == load_settings().filtered.language_fingerprint("de")
    recorded = AppliedThresholds.from_json(lake.get_json(thresholds_key("de", fingerprint)))
    assert recorded == AppliedThresholds.of(load_settings().filtered, "de")
    assert recorded.block("gopher_quality")[0]["min_stop_words"] == 10_000
    assert recorded.block("gopher_quality")[1]["min_stop_words"] == "override"
    assert "und" in recorded.values["gopher_quality"]["stop_words"]  # the table's German list, not in a manifest
    assert "languages" not in recorded.values["language"] and recorded.values["language"]["threshold"] > 0

    said = _why(url, crawl, capsys)
    assert "dropped at filtered" in said and "gopher_quality/" in said and "language: de" in said, said
    assert "gopher_quality thresholds for de (as built):" in said and "min_stop_words=10000 (override)" in said
    assert "stop_words=[" in said and "(fineweb2)" in said and "min_doc_words=50 (chain)" in said
    assert said.index("min_doc_words=") < said.index("min_stop_words=")  # in the block's order, as today's print
    assert "today's settings differ" not in said

    # today's settings change German's override, nothing is rebuilt: the build's values print, and what differs
    write_settings(settings_file, ["en", "de"], {"de": {"gopher_quality.min_stop_words": 9_000}})
    said = _why(url, crawl, capsys)
    assert "min_stop_words=10000 (override)" in said, said
    assert ("today's settings differ: min_stop_words=9000 (override) — the partition is stale; llm-assets stale "
            "shows its rebuild") in said
    (stop,) = _why(url, crawl, capsys, "--json")["stops"]
    assert stop["thresholds_from"] == "build" and stop["thresholds"]["min_stop_words"] == 10_000
    assert stop["threshold_sources"]["min_stop_words"] == "override"
    assert stop["today"]["thresholds"]["min_stop_words"] == 9_000
    assert stop["today"]["changed"] == {"min_stop_words": {"value": 9_000, "source": "override"}}
    from llm_assets import cli
    assert cli.main(["trace", url, "--crawl", crawl]) == 0
    traced = capsys.readouterr().out
    assert "gopher_quality thresholds for de (as built):" in traced and "min_stop_words=10000 (override)" in traced
    assert "today's settings differ: min_stop_words=9000 (override)" in traced
    assert cli.main(["trace", url, "--crawl", crawl, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [s.get("thresholds_from") for s in steps] == [None, "build"]
    # what filtered set aside, with the thresholds that dropped it in its partition: once, not per row
    assert cli.main(["show", "rejected", "--stage", "filtered", "--crawl", crawl]) == 0
    shown = capsys.readouterr().out
    assert shown.count("-[ row") == 2 and shown.count(f"{crawl}|{shard}: gopher_quality thresholds for de (as built):"
                                                      ) == 1, shown
    assert "min_stop_words=10000 (override)" in shown and "today's settings differ: min_stop_words=9000" in shown

    # rebuilt: the new value, recorded under its own fingerprint, and nothing differs
    _build(object_store, instance, crawl, shard)
    said = _why(url, crawl, capsys)
    assert "min_stop_words=9000 (override)" in said and "today's settings differ" not in said, said
    assert len(list(lake.list("thresholds/de/"))) >= 2

    # a partition built before builds recorded thresholds: today's settings, said so
    lake.delete([thresholds_key("de", load_settings().filtered.language_fingerprint("de"))])
    said = _why(url, crawl, capsys)
    assert "gopher_quality thresholds for de (as today's settings give them; this build recorded none):" in said
    assert _why(url, crawl, capsys, "--json")["stops"][0]["thresholds_from"] == "settings"


@pytest.mark.core
def test_why_says_what_todays_settings_change_in_other_blocks_and_in_the_keep_list():
    from llm_assets.core.thresholds import AppliedThresholds

    built = Settings(filtered=FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3}}))
    t = stopped("de")
    t.steps[-1].thresholds = AppliedThresholds.of(built.filtered, "de")
    assert "today's settings differ" not in trace.why(t, built)
    today = built.model_copy(update={"filtered": built.filtered.model_copy(update={
        "overrides": {"de": {"gopher_quality.min_stop_words": 3, "gopher_repetition.top_n_grams": [[2, 0.3]]}}})})
    (stop,) = trace.why_record(t, today)["stops"]
    assert stop["thresholds_from"] == "build" and stop["today"]["changed"] == {
        "gopher_repetition.top_n_grams": {"value": [[2, 0.3]], "source": "override"}}
    assert stop["today"]["thresholds"] == stop["thresholds"]  # the stop's own block is unchanged
    assert ("today's settings differ: gopher_repetition.top_n_grams=[[2, 0.3]] (override) — the partition is stale"
            in trace.why(t, today))
    language = built.filtered.block("language")
    english_only = built.model_copy(update={"filtered": built.filtered.replaced(
        "language", language.model_copy(update={"languages": ("en",)}))})
    (stop,) = trace.why_record(t, english_only)["stops"]
    assert stop["today"]["keeps"] is False and "de no longer kept" in trace.why(t, english_only)
