"""crawl × shard: every dataset stage is partitioned by both.

`crawl` is dynamic (the raw-drop sensor adds one when files land under raw/<crawl>/); `shard` is a fixed set of
hash buckets (settings: `shards`), the same for every crawl, so the product has no phantom partitions.
"""

from functools import cache

import dagster as dg

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
