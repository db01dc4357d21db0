"""crawl × shard: every dataset stage is partitioned by both.

`crawl` is dynamic (the raw-drop sensor adds one when files land under raw/<crawl>/); `shard` is a fixed set of
hash buckets (settings: `shards`), the same for every crawl, so the product has no phantom partitions.
"""

from collections.abc import Collection, Mapping, Sequence
from functools import cache

import dagster as dg

from llm_assets.core.keys import split_partition
from llm_assets.platform.dagster_private import ASSET_PARTITION_RANGE_END_TAG as RANGE_END
from llm_assets.platform.dagster_private import ASSET_PARTITION_RANGE_START_TAG as RANGE_START

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
    """The tags of a run that builds the partitions from `first` to `last`, as Dagster's backfills tag theirs: what
    a sensor's run request of many partitions carries. Dagster reads a range of crawl × shard keys per dimension:
    the crawls from the first's to the last's (as the instance registered them) × the shards from the first's to
    the last's."""
    return {RANGE_START: first, RANGE_END: last}


def partitions_label(tags: Mapping[str, str]) -> str | None:
    """The partitions a run builds, as people read them: `crawl|shard`, `crawl`, `crawl|first..last` for a range
    of one crawl's shards, `crawl..crawl|first..last` for those shards of several crawls, `crawl..crawl` for a
    range of crawls; None for an unpartitioned run."""
    if PARTITION_TAG in tags:
        return tags[PARTITION_TAG]
    if RANGE_START not in tags:
        return None
    first, last = tags[RANGE_START], tags[RANGE_END]
    if first == last or "|" not in first:
        return first if first == last else f"{first}..{last}"
    (crawl, shard), (end, shard_end) = split_partition(first), split_partition(last)
    return f"{crawl if crawl == end else f'{crawl}..{end}'}|{shard}..{shard_end}"


def covers(tags: Mapping[str, str], partition: str, crawls: Sequence[str] = ()) -> bool:
    """Whether a run with these tags builds the partition: a range holds the crawls between its ends' crawls, in
    the order the instance registered them (`crawls`; without it, a range of crawls is known by its ends), each
    with the shards between its ends' shards."""
    if tags.get(PARTITION_TAG) == partition:
        return True
    if RANGE_START not in tags:
        return False
    first, last = tags[RANGE_START], tags[RANGE_END]
    if ("|" in partition) != ("|" in first):
        return False
    if "|" in partition:
        (first, shard), (last, shard_end) = split_partition(first), split_partition(last)
        partition, mine = split_partition(partition)
        if not shard <= mine <= shard_end:
            return False
    if partition in (first, last):
        return True
    return all(c in crawls for c in (first, last, partition)) and (
        crawls.index(first) < crawls.index(partition) < crawls.index(last))


def contiguous_ranges(keys: Collection[str], settings, crawls: Sequence[str] = ()) -> list[list[str]]:
    """Partition keys grouped into the runs that build them, at most `partitions_per_run` each (a run builds every
    partition its range holds, `covers`): contiguous shards of one crawl in shard order; the same shards of crawls
    the instance registered one after the other (`crawls`, in its order), so that crawls dropped together share
    runs, each run paying Dagster's start-up and its workers' warm-up once; crawls contiguous in that order (a crawl
    it does not hold alone); "" (an unpartitioned asset) alone."""
    shard_order = {shard: i for i, shard in enumerate(settings.shard_keys())}
    crawl_order = {crawl: i for i, crawl in enumerate(crawls)}
    most = settings.partitions_per_run

    def place(key: str) -> tuple[str, int]:
        if "|" not in key:
            return "", crawl_order[key]
        crawl, shard = split_partition(key)
        return crawl, shard_order[shard]

    ranges = [[key] for key in sorted(k for k in keys if "|" not in k and k not in crawl_order)]
    run: list[str] = []
    for key in sorted((k for k in keys if "|" in k or k in crawl_order), key=lambda k: (
            "|" in k, crawl_order.get(split_partition(k)[0], len(crawl_order)), place(k))):
        (group, i), last = place(key), place(run[-1]) if run else None
        if run and (last != (group, i - 1) or len(run) >= most):
            ranges.append(run)
            run = []
        run.append(key)
    ranges += [run] if run else []
    # the same shards of the next crawl join the run of the crawl before, while the run holds at most `most`
    merged: list[list[str]] = []
    for one in ranges:
        if merged and "|" in one[0] and "|" in merged[-1][0] and len(merged[-1]) + len(one) <= most \
                and _next_crawl(merged[-1], one, crawl_order):
            merged[-1] += one
        else:
            merged.append(one)
    return merged


def _next_crawl(before: list[str], after: list[str], crawl_order: Mapping[str, int]) -> bool:
    """Whether `after` (one crawl's shards) holds the shards `before` holds of its last crawl, in the crawl the
    instance registered next."""
    (crawl, _), (next_crawl, _) = split_partition(before[-1]), split_partition(after[0])
    if crawl not in crawl_order or crawl_order.get(next_crawl) != crawl_order[crawl] + 1:
        return False
    return [split_partition(k)[1] for k in before if split_partition(k)[0] == crawl] == [
        split_partition(k)[1] for k in after]


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
