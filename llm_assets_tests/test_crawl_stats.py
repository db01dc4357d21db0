"""The crawl statistics on their own: a crawl whose filters dropped nothing (no rejected rows) still has its funnel."""

import pytest

import pyarrow as pa

from llm_assets.core.crawl_stats import NOT_IDENTIFIED, crawl_stats, summarize

pytestmark = pytest.mark.core


def test_a_crawl_with_nothing_dropped_and_nothing_kept_has_an_empty_funnel():
    stats = crawl_stats(None, [], ["language", "gopher_quality"])  # no parts: the lake is not read
    assert stats.funnel["step"].to_list() == ["in", "out"] and stats.funnel["documents"].to_list() == [0, 0]
    assert stats.languages.is_empty() and sum(stats.lengths["documents"]) == 0


def test_a_document_dropped_before_language_id_is_named_not_a_question_mark():
    """The URL filter (or a takedown) runs before the language block: what it drops has no language. The chart and
    table name it for what it is."""
    kept = pa.table({"language": ["en", "en"], "n_words": pa.array([120, 80], pa.int32())})
    rejected = pa.table({"language": [None, None, "de"], "filter": ["url", "takedown", "language"],
                         "reason": ["url_blocklist", "takedown", "language"]})
    stats = summarize(kept, rejected, 5, ["url", "language"])
    languages = {r["language"]: (r["kept"], r["dropped"]) for r in stats.languages.iter_rows(named=True)}
    assert languages == {"en": (2, 0), NOT_IDENTIFIED: (0, 2), "de": (0, 1)}
