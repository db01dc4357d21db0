"""crawl × shard: every dataset stage is partitioned by both.

`crawl` is dynamic (the raw-drop sensor adds one when files land under raw/<crawl>/); `shard` is a fixed set of
hash buckets (settings: `shards`), the same for every crawl, so the product has no phantom partitions.
"""

from collections.abc import Mapping
from functools import cache

import dagster as dg

from llm_assets.core.keys import split_partition
from llm_assets.dagster_private import ASSET_PARTITION_RANGE_END_TAG as RANGE_END
from llm_assets.dagster_private import ASSET_PARTITION_RANGE_START_TAG as RANGE_START

CRAWL_PARTITIONS = "crawl"  # the dynamic partitions the instance holds, one per crawl
crawl_partitions = dg.DynamicPartitionsDefinition(name=CRAWL_PARTITIONS)


def crawl_shard_partitions(settings) -> dg.MultiPartitionsDefinition:
    """The crawl × shard partitions of these settings' shards: one object per shard list, shared by every stage."""
    return _crawl_shard(tuple(settings.shard_keys()))


@cache
def _crawl_shard(shards: tuple[str, ...]) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition({"crawl": crawl_partitions,
                                         "shard": dg.StaticPartitionsDefinition(list(shards))})


def crawl_shard_key(crawl: str, shard: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"crawl": crawl, "shard": shard})


PARTITION_TAG = "dagster/partition"  # what Dagster tags a partition's run with: "<crawl>|<shard>" or "<crawl>"


def range_tags(first: str, last: str) -> dict[str, str]:
    """The tags of a run that builds the partitions from `first` to `last` (crawl × shard keys of one crawl, in
    shard order), as Dagster's backfills tag theirs: what a sensor's run request of many partitions carries."""
    return {RANGE_START: first, RANGE_END: last}


def partitions_label(tags: Mapping[str, str]) -> str | None:
    """The partitions a run builds, as people read them: `crawl|shard`, `crawl`, or `crawl|first..last` for a
    range; None for an unpartitioned run."""
    if PARTITION_TAG in tags:
        return tags[PARTITION_TAG]
    if RANGE_START not in tags:
        return None
    first, last = tags[RANGE_START], tags[RANGE_END]
    if first == last:
        return first
    return f"{first}..{split_partition(last)[1]}" if "|" in first else f"{first}..{last}"


def covers(tags: Mapping[str, str], partition: str) -> bool:
    """Whether a run with these tags builds the partition (a range holds the shards of one crawl in order)."""
    if tags.get(PARTITION_TAG) == partition:
        return True
    if RANGE_START not in tags or "|" not in partition:
        return False
    (crawl, first), (_, last) = split_partition(tags[RANGE_START]), split_partition(tags[RANGE_END])
    mine, shard = split_partition(partition)
    return mine == crawl and first <= shard <= last
