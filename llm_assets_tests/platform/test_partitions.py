"""Partition keys grouped into runs, and the run requests of those groups."""

import dagster as dg

from llm_assets.platform.partitions import RANGE_END, RANGE_START, contiguous_ranges, covers, range_request
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


def test_the_same_shards_of_crawls_registered_one_after_the_other_share_a_run():
    """Dagster reads a range of crawl × shard keys per dimension: the crawls between its ends' (as the instance
    registered them) × the shards between its ends'. Crawls dropped together share runs that way."""
    settings = load_settings().model_copy(update={"shards": 4, "partitions_per_run": 8})
    crawls = ["A", "B", "C", "D"]
    keys = [f"{c}|{s:04d}" for c in ("A", "B", "D") for s in range(4)] + ["C|0001", "C|0002", "E|0000"]
    assert contiguous_ranges(keys, settings, crawls) == [
        [f"{c}|{s:04d}" for c in ("A", "B") for s in range(4)],  # both crawls' four shards: at most 8 a run
        ["C|0001", "C|0002"],  # other shards: a run of their own
        [f"D|{s:04d}" for s in range(4)],  # C's shards are not all planned: D does not join it
        ["E|0000"]]  # a crawl the instance does not hold: its own runs
    assert contiguous_ranges(["A|0001", "B|0001", "C|0001"], settings, crawls) == [["A|0001", "B|0001", "C|0001"]]
    assert contiguous_ranges(["A|0001", "B|0001"], settings) == [["A|0001"], ["B|0001"]]  # no order known
    tags = range_request(["A|0001", "A|0002", "B|0001", "B|0002", "C|0001", "C|0002"], run_key="k").tags
    assert [covers(tags, k, crawls) for k in ("A|0000", "A|0002", "B|0001", "C|0002", "C|0003", "D|0001")] == [
        False, True, True, True, False, False]
    assert not covers(tags, "B|0001")  # a crawl between the ends is known by the order alone
    assert not covers(tags, "B", crawls) and not covers(range_request(["A", "B"], run_key="k").tags, "A|0001")
