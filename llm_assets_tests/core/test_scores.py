"""Scores apart from decisions: the measures every filtered unit stores for every document decide any other
thresholds exactly as a rebuild does, with no text read and no block run."""

import polars as pl
import pytest

from llm_assets.core import filtered
from llm_assets.core.documents import extract_documents
from llm_assets.core.filtered import FilteredSettings, FilterUnit, filter_documents, scores_key
from llm_assets.core.lake import Lake, part_key
from llm_assets.core.partition import PartitionOutput, commit
from llm_assets.core.scores import read_scores, redecide, threshold_only
from llm_assets.core.units import UnitResult, unit_id
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.test_units import CC_2020, extract_unit, upload

# en, ru, zh, de, fr, nl …, and an Aragonese page (a language the default chain does not keep): 81 documents
SOURCES = (CC_2020, "dolma__sample-0001.warc.gz", "pywb__iana.warc.gz", "whirlwind__CC-MAIN-2024-22.warc.gz")
# thresholds only: Gopher's minimum words for every language, FineWeb's punctuation share for English, and
# the language score German needs
CHANGED = FilteredSettings.default_with(gopher_quality={"min_doc_words": 25}).model_copy(
    update={"overrides": {"en": {"fineweb_quality.line_punct_thr": 0.3}, "de": {"language.threshold": 0.9}}})


def filter_unit(store, crawl: str, docs: UnitResult, settings: FilteredSettings, tag: str) -> FilterUnit:
    unit = unit_id("filtered", filtered.STAGE_VERSION, docs.unit, tag)
    shard = docs.part.split("shard=")[1][:4]
    return FilterUnit(store=store, settings=settings, source=docs.part, unit=unit,
                      part=part_key("filtered", crawl, shard, unit),
                      rejected_part=part_key("filtered", crawl, shard, unit, zone="rejected"))


def decisions(lake: Lake, r: UnitResult) -> pl.DataFrame:
    """What a unit decided, from its parts: doc_id, filter, reason (null: kept)."""
    kept = lake.scan([r.part]).select("doc_id").collect()
    dropped = lake.scan([r.rejected_part]).select("doc_id", "filter", "reason").collect()
    return pl.concat([kept.with_columns(filter=pl.lit(None, pl.String), reason=pl.lit(None, pl.String)), dropped]
                     ).sort("doc_id")


@pytest.fixture(scope="module")
def units(store_config) -> list[tuple[UnitResult, UnitResult]]:
    """(documents, filtered) of each source, filtered with the default chain."""
    lake, crawl = Lake(store_config), "TEST-scores"
    out = []
    for name in SOURCES:
        shared("warc", name)
        docs = extract_documents(extract_unit(store_config, crawl, *upload(lake, crawl, name)))
        out.append((docs, filter_documents(filter_unit(store_config, crawl, docs, FilteredSettings(), "before"))))
    return out


def test_stored_scores_decide_exactly_what_the_chain_decided(units, lake):
    """Every document that entered the chain has one row of scores, with the chain's decision; deciding again
    from the scores under the same settings gives the same block, reason and measured value."""
    for _, r in units:
        assert r.side_parts == {"scores": scores_key(r.part)}
        scores = lake.scan([r.side_parts["scores"]]).collect()
        assert scores.height == r.rows_in and scores["doc_id"].n_unique() == r.rows_in
        assert {"normalize.bytes", "language_score"} <= set(scores.columns)
        chain = decisions(lake, r)
        assert scores.select("doc_id", "filter", "reason").sort("doc_id").equals(chain)
        again = redecide(scores, FilteredSettings())
        assert again.select("doc_id", "filter", "reason").sort("doc_id").equals(chain)
        # the value and threshold as the rejected part's detail words them
        detail = lake.scan([r.rejected_part]).select("doc_id", "detail").collect()
        worded = again.join(detail, on="doc_id").filter(pl.col("detail").str.contains('"threshold"'))
        assert worded.height and worded.select(
            pl.col("threshold") == pl.col("detail").str.json_path_match("$.threshold")).to_series().all()
    assert sum(r.counts.get(f"fails:{b}", 0) for _, r in units for b in ("gopher_quality", "fineweb_quality")) > 0


def test_changed_thresholds_decided_from_the_scores_are_what_a_rebuild_decides(units, lake, store_config):
    assert threshold_only(FilteredSettings(), CHANGED) is None
    changed = 0
    for docs, r in units:
        rebuilt = filter_documents(filter_unit(store_config, "TEST-scores", docs, CHANGED, "after"))
        expected = decisions(lake, rebuilt)
        again = redecide(lake.scan([r.side_parts["scores"]]), CHANGED).select("doc_id", "filter", "reason")
        assert again.sort("doc_id").equals(expected)
        changed += expected.join(decisions(lake, r), on="doc_id").filter(
            ~pl.col("reason").eq_missing(pl.col("reason_right"))).height
    assert changed >= 3  # the change moves documents, not a no-op


def test_a_unit_measured_until_dropped_keeps_and_rejects_the_same_and_counts_what_reached_each_block(
        units, lake, store_config):
    """`filtered.measure: until_dropped`: the same kept and rejected parts, scores with nulls for the blocks a
    dropped document never reached, and per block the documents that reached it beside those that failed it."""
    cascade = FilteredSettings(measure="until_dropped")
    unmeasured = 0
    for docs, r in units:
        c = filter_documents(filter_unit(store_config, "TEST-scores", docs, cascade, "cascade"))
        assert decisions(lake, c).equals(decisions(lake, r))
        assert lake.scan([c.rejected_part]).collect().sort("doc_id").equals(
            lake.scan([r.rejected_part]).collect().sort("doc_id"))
        scores = lake.scan([c.side_parts["scores"]]).collect()
        assert scores.height == c.rows_in
        assert not any(k.startswith("reached:") for k in r.counts)
        for key, n in c.counts.items():
            if key.startswith("fails:"):
                assert n <= c.counts["reached:" + key.removeprefix("fails:")] <= c.rows_in
        assert c.counts["reached:normalize"] == c.rows_in
        if "pii.found" in scores.columns and scores["filter"].is_in(["gopher_quality", "c4_quality"]).any():
            dropped_early = scores.filter(pl.col("filter").is_in(["gopher_quality", "c4_quality"]))
            assert dropped_early["pii.found"].is_null().all()
            unmeasured += dropped_early.height
    assert unmeasured  # PII masking never ran on the pages Gopher or C4 dropped


def test_the_committed_partitions_scores_are_read_per_crawl(units, lake):
    """Committed, a unit's scores are a live part of its partition (listed with it), read by crawl and shard."""
    shards: dict[str, list[UnitResult]] = {}
    for _, r in units:
        shards.setdefault(r.part.split("shard=")[1][:4], []).append(r)
    for shard, results in shards.items():
        manifest = commit(lake, "filtered", "TEST-scores", shard, PartitionOutput(results))
        assert {r.side_parts["scores"] for r in results} <= manifest.part_keys()
    every = read_scores(lake, "TEST-scores").collect()
    assert every.height == sum(r.rows_in for _, r in units)
    assert set(every["shard"]) == set(shards)
    one = next(iter(shards))
    assert read_scores(lake, "TEST-scores", [one]).collect().height == sum(r.rows_in for r in shards[one])


def test_what_scores_cannot_decide_again_is_named():
    s = FilteredSettings()
    assert threshold_only(s, FilteredSettings.default_with(c4_quality={"filter_javascript": False})) == \
        "c4_quality rewrites text"
    assert "gopher_quality.stop_words" in threshold_only(s, FilteredSettings.default_with(
        gopher_quality={"stop_words": ("the",)}))
    assert "lowered" in threshold_only(s, FilteredSettings.default_with(
        gopher_repetition={"dup_n_grams": ((5, 0.1),) + FilteredSettings().block("gopher_repetition").dup_n_grams[1:]}))
    assert "blocks" in threshold_only(s, FilteredSettings.default_with(profanity={"enabled": True}))
    assert threshold_only(s, s.model_copy(update={"overrides": {"fr": {"gopher_quality.max_doc_words": 9000}}})) is None


def test_a_language_the_chain_does_not_keep_is_not_scored_past_the_language_block(units, lake):
    scores = pl.concat([lake.scan([r.side_parts["scores"]]).collect() for _, r in units], how="diagonal_relaxed")
    unkept = scores.filter(~pl.col("language").is_in(FilteredSettings().block("language").languages))
    assert unkept.height and unkept["gopher_quality.n_words"].null_count() == unkept.height
    assert (unkept["filter"].is_in(["language", "normalize", "url"])).all()
    more = FilteredSettings.default_with(language={"languages": ("en", "sv")})
    assert "adds sv" in threshold_only(FilteredSettings(), more)
    fewer = FilteredSettings.default_with(language={"languages": ("en",)})
    assert threshold_only(FilteredSettings(), fewer) is None  # keeping fewer is a threshold
