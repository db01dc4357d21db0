"""Partition keys grouped into runs, and the run requests of those groups."""

import dagster as dg

from llm_assets.partitions import RANGE_END, RANGE_START, contiguous_ranges, covers, range_request
from llm_assets.settings import load_settings


def test_contiguous_shards_of_one_crawl_share_a_run_of_at_most_partitions_per_run():
    settings = load_settings().model_copy(update={"shards": 8, "partitions_per_run": 3})
    keys = ["B|0001", "A|0000", "A|0001", "A|0002", "A|0003", "A|0005", "B|0002", "A", ""]
    assert contiguous_ranges(keys, settings) == [
        [""], ["A"],  # unpartitioned and crawl-level keys alone
        ["A|0000", "A|0001", "A|0002"], ["A|0003"],  # at most 3 a run
        ["A|0005"],  # 0004 is not planned: a gap ends a range
        ["B|0001", "B|0002"]]  # another crawl, another run
    assert contiguous_ranges([], settings) == []


def test_a_range_is_requested_with_dagsters_range_tags_and_covers_what_it_holds():
    one = range_request(["A|0003"], run_key="k", tags={"t": "v"})
    assert one.partition_key == dg.MultiPartitionKey({"crawl": "A", "shard": "0003"}) and one.tags == {"t": "v"}
    many = range_request(["A|0000", "A|0001", "A|0002"], run_key="k", tags={"t": "v"})
    assert many.partition_key is None
    assert (many.tags[RANGE_START], many.tags[RANGE_END], many.tags["t"]) == ("A|0000", "A|0002", "v")
    assert covers(many.tags, "A|0001") and not covers(many.tags, "A|0003") and not covers(many.tags, "B|0001")
    assert range_request(["A"], run_key="k").partition_key == "A"
    assert range_request([""], run_key="k").partition_key is None


def test_crawls_the_instance_registered_one_after_the_other_share_a_run():
    settings = load_settings().model_copy(update={"partitions_per_run": 2})
    crawls = ["C1", "C2", "C3", "C4"]
    assert contiguous_ranges(["C4", "C1", "C2", "C3", "C9"], settings, crawls) == [
        ["C9"], ["C1", "C2"], ["C3", "C4"]]  # one it does not hold alone; at most 2 a run
    assert contiguous_ranges(["C1", "C3"], settings, crawls) == [["C1"], ["C3"]]  # a gap ends a range
    assert contiguous_ranges(["C1", "C2"], settings) == [["C1"], ["C2"]]  # no order known: each alone
    tags = range_request(["C1", "C3"], run_key="k").tags
    assert covers(tags, "C1") and covers(tags, "C3") and not covers(tags, "C2")  # known by its ends alone
    assert covers(tags, "C2", crawls) and not covers(tags, "C4", crawls) and not covers(tags, "C1|0000", crawls)
