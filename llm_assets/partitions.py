"""crawl × shard: every dataset stage is partitioned by both.

`crawl` is dynamic (the raw-drop sensor adds one when files land under raw/<crawl>/); `shard` is a fixed set of
hash buckets (settings: `shards`), the same for every crawl, so the product has no phantom partitions.
"""

from collections.abc import Collection, Mapping, Sequence
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


def covers(tags: Mapping[str, str], partition: str, crawls: Sequence[str] = ()) -> bool:
    """Whether a run with these tags builds the partition: a range holds the shards of one crawl in order, or crawls
    in the order the instance registered them (`crawls`; without it, a range of crawls is known by its ends)."""
    if tags.get(PARTITION_TAG) == partition:
        return True
    if RANGE_START not in tags:
        return False
    if "|" not in partition:  # a crawl, in a range of crawls
        first, last = tags[RANGE_START], tags[RANGE_END]
        if partition in (first, last):
            return "|" not in first
        return all(c in crawls for c in (first, last, partition)) and (
            crawls.index(first) < crawls.index(partition) < crawls.index(last))
    (crawl, first), (_, last) = split_partition(tags[RANGE_START]), split_partition(tags[RANGE_END])
    mine, shard = split_partition(partition)
    return mine == crawl and first <= shard <= last


def contiguous_ranges(keys: Collection[str], settings, crawls: Sequence[str] = ()) -> list[list[str]]:
    """Partition keys grouped into the runs that build them, at most `partitions_per_run` each (a run builds every
    partition between its first and its last): contiguous shards of one crawl in shard order; crawls contiguous in
    the order the instance registered them (`crawls`; a crawl it does not hold alone); "" (an unpartitioned asset)
    alone."""
    shard_order = {shard: i for i, shard in enumerate(settings.shard_keys())}
    crawl_order = {crawl: i for i, crawl in enumerate(crawls)}

    def place(key: str) -> tuple[str, int]:
        if "|" not in key:
            return "", crawl_order[key]
        crawl, shard = split_partition(key)
        return crawl, shard_order[shard]

    ranges = [[key] for key in sorted(k for k in keys if "|" not in k and k not in crawl_order)]
    run: list[str] = []
    for key in sorted((k for k in keys if "|" in k or k in crawl_order), key=lambda k: ("|" in k, place(k))):
        (group, i), last = place(key), place(run[-1]) if run else None
        if run and (last != (group, i - 1) or len(run) >= settings.partitions_per_run):
            ranges.append(run)
            run = []
        run.append(key)
    return ranges + [run] if run else ranges


def range_request(keys: list[str], **request) -> dg.RunRequest:
    """The run request of one of `contiguous_ranges`: of a partition, of a range (Dagster's range tags), or of an
    unpartitioned asset; `request`: the rest of the RunRequest (run key, job, assets, tags)."""
    first, last = keys[0], keys[-1]
    if not first:
        return dg.RunRequest(**request)
    if first == last:
        return dg.RunRequest(partition_key=_dagster_key(first), **request)
    tags = {**request.pop("tags", {}), **range_tags(str(_dagster_key(first)), str(_dagster_key(last)))}
    return dg.RunRequest(tags=tags, **request)


def _dagster_key(key: str) -> str | dg.MultiPartitionKey:
    return crawl_shard_key(*split_partition(key)) if "|" in key else key
