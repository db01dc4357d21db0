"""crawl × shard: every dataset stage is partitioned by both.

`crawl` is dynamic (the raw-drop sensor adds one when files land under raw/<crawl>/); `shard` is a fixed set of
hash buckets (settings: `shards`), the same for every crawl, so the product has no phantom partitions.
"""

import dagster as dg

from llm_assets.settings import load_settings

crawl_partitions = dg.DynamicPartitionsDefinition(name="crawl")
shard_partitions = dg.StaticPartitionsDefinition(load_settings().shard_keys())
crawl_shard_partitions = dg.MultiPartitionsDefinition({"crawl": crawl_partitions, "shard": shard_partitions})


def crawl_shard_key(crawl: str, shard: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"crawl": crawl, "shard": shard})
