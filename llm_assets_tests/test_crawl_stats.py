"""The crawl statistics on their own: a crawl whose filters dropped nothing (no rejected rows) still has its funnel."""

import pytest

from llm_assets.core.crawl_stats import crawl_stats

pytestmark = pytest.mark.core


def test_a_crawl_with_nothing_dropped_and_nothing_kept_has_an_empty_funnel():
    stats = crawl_stats(None, [], ["language", "gopher_quality"])  # no parts: the lake is not read
    assert stats.funnel["step"].to_list() == ["in", "out"] and stats.funnel["documents"].to_list() == [0, 0]
    assert stats.languages.is_empty() and sum(stats.lengths["documents"]) == 0
