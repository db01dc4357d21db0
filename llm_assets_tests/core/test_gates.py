"""The quality gate's judgement, on its own: drop rates and language mix against the crawl's other partitions."""

import pytest

from llm_assets.core.gates import GateSettings, Profile, evaluate

pytestmark = pytest.mark.core
BLOCKS = ["language", "gopher_quality"]


def profile(name: str, rows: int = 1000, language: int = 100, gopher: int = 300, en: int = 580, de: int = 20):
    return Profile.of(name, rows, {"language/wrong_language": language, "gopher_quality/gopher_short_doc": gopher},
                      {"language:en": en, "language:de": de, "pii_email": 3})


SIBLINGS = [profile("0000"), profile("0001", gopher=340), profile("0002", gopher=280, language=120)]


def test_a_partition_like_its_siblings_passes():
    result = evaluate(profile("0003", gopher=320), SIBLINGS, BLOCKS, GateSettings())
    assert result.judged and result.passed and result.held_back() == ""
    assert result.reference == ("0000", "0001", "0002")
    drop = next(f for f in result.findings if f.measure == "drop rate: gopher_quality")
    assert (drop.value, drop.reference) == (0.32, 0.3)


def test_a_shard_whose_extraction_broke_is_held_back_by_its_drop_rate():
    result = evaluate(profile("0003", gopher=900, en=0, de=0), SIBLINGS, BLOCKS, GateSettings())
    assert result.judged and not result.passed
    assert [f.measure for f in result.failures] == ["drop rate: gopher_quality"]
    assert "drop rate: gopher_quality 0.900 vs the crawl's 0.300" in result.held_back()


def test_a_shard_of_another_language_is_held_back_by_its_language_mix():
    result = evaluate(profile("0003", en=100, de=480), SIBLINGS, BLOCKS, GateSettings())
    (failure,) = result.failures
    assert failure.measure == "language mix (share of en)"
    # total variation distance from the siblings' pooled mix (1,740 en, 60 de)
    assert failure.shift == pytest.approx((abs(100 / 580 - 1740 / 1800) + abs(480 / 580 - 60 / 1800)) / 2)
    assert (failure.value, failure.reference) == (pytest.approx(100 / 580), pytest.approx(1740 / 1800))


def test_a_bound_per_block_and_the_bounds_are_settings():
    bad = profile("0003", gopher=600)
    assert not evaluate(bad, SIBLINGS, BLOCKS, GateSettings()).passed
    assert evaluate(bad, SIBLINGS, BLOCKS, GateSettings(drop_rate_shifts={"gopher_quality": 0.4})).passed
    assert evaluate(bad, SIBLINGS, BLOCKS, GateSettings(max_drop_rate_shift=0.5)).passed


def test_small_partitions_and_thin_references_are_not_judged():
    small = evaluate(profile("0003", rows=50, gopher=50), SIBLINGS, BLOCKS, GateSettings())
    assert not small.judged and small.passed and "min_documents" in small.note
    thin = evaluate(profile("0003", gopher=900), SIBLINGS[:2], BLOCKS, GateSettings())
    assert not thin.judged and thin.passed and "min_reference" in thin.note
    # a small sibling is no reference either
    tiny = [*SIBLINGS[:2], profile("0002", rows=10, gopher=1)]
    assert not evaluate(profile("0003", gopher=900), tiny, BLOCKS, GateSettings()).judged


def test_with_scores_a_block_is_judged_by_the_documents_it_fails_not_by_what_it_dropped():
    """A unit's `fails:<block>` counts (every document measured, whatever an earlier block dropped) are the rates;
    a partition from before the scores is no reference for one with them."""
    def scored(name: str, gopher_fails: int, language_drops: int = 100):
        return Profile.of(name, 1000, {"language/language": language_drops, "gopher_quality/gopher_short_doc": 10},
                          {"fails:language": language_drops, "fails:gopher_quality": gopher_fails, "language:en": 500})

    siblings = [scored("0000", 300), scored("0001", 320), scored("0002", 280)]
    # the cascade dropped the same 10 documents in each; the scores say this one fails Gopher's rules far more often
    result = evaluate(scored("0003", 700), siblings, BLOCKS, GateSettings())
    assert result.judged and [f.measure for f in result.failures] == ["fail rate: gopher_quality"]
    assert result.failures[0].value == 0.7 and result.failures[0].reference == 0.3
    assert evaluate(scored("0003", 310), siblings, BLOCKS, GateSettings()).passed
    assert not evaluate(scored("0003", 700), SIBLINGS, BLOCKS, GateSettings()).judged  # drop counts: not alike


def test_measured_until_dropped_a_block_is_judged_by_the_documents_that_reached_it():
    """`filtered.measure: until_dropped`: `fails:<block>` counts only the documents that reached the block
    (`reached:<block>`), so the rate is over those; partitions measured on every document are no reference."""
    def cascade(name: str, gopher_fails: int, gopher_reached: int = 500):
        return Profile.of(name, 1000, {"language/language": 100, "gopher_quality/gopher_short_doc": gopher_fails},
                          {"fails:language": 100, "reached:language": 1000, "fails:gopher_quality": gopher_fails,
                           "reached:gopher_quality": gopher_reached, "language:en": 500})

    siblings = [cascade("0000", 150), cascade("0001", 160), cascade("0002", 140)]
    # 150 of 1000 in, but 150 of the 500 Gopher measured: 0.3, like its siblings (0.3)
    assert evaluate(cascade("0003", 150), siblings, BLOCKS, GateSettings()).passed
    result = evaluate(cascade("0003", 150, gopher_reached=200), siblings, BLOCKS, GateSettings())
    assert [f.measure for f in result.failures] == ["fail rate of the documents that reached it: gopher_quality"]
    assert result.failures[0].value == 0.75 and result.failures[0].reference == 0.3
    every = [Profile.of(f"000{i}", 1000, {}, {"fails:language": 100, "fails:gopher_quality": 300}) for i in range(3)]
    assert not evaluate(cascade("0003", 150), every, BLOCKS, GateSettings()).judged  # not alike
