"""The lake IO manager against the real SeaweedFS: commit, lazy reads of one and many partitions, and no
partial output after a failed run."""

import dagster as dg
import polars as pl
import pytest

from llm_assets.core.lake import manifest_key
from llm_assets.core.partition import LakeInput, vacuum
from llm_assets.platform.partitions import crawl_partitions, crawl_shard_partitions
from llm_assets.settings import load_settings
from resources import LakeIOManager

CRAWL_SHARD = crawl_shard_partitions(load_settings())
SHARDS = CRAWL_SHARD.get_partitions_def_for_dimension("shard").get_partition_keys()


@dg.asset(partitions_def=CRAWL_SHARD, io_manager_key="lake_io_manager")
def numbers(context: dg.AssetExecutionContext) -> pl.DataFrame:
    crawl, shard = context.partition_key.keys_by_dimension["crawl"], context.partition_key.keys_by_dimension["shard"]
    return pl.DataFrame({"crawl": [crawl] * 3, "shard": [shard] * 3, "n": [int(shard) * 10 + i for i in range(3)]})


@dg.asset(
    partitions_def=crawl_partitions,
    ins={"numbers": dg.AssetIn(partition_mapping=dg.MultiToSingleDimensionPartitionMapping("crawl"))},
    io_manager_key="mem",
)
def crawl_total(numbers: LakeInput) -> dict:
    """A crawl-level fan-in: every shard of the crawl, read lazily."""
    assert isinstance(numbers.scan(), pl.LazyFrame)
    return {"rows": numbers.rows, "sum": numbers.scan().select(pl.col("n").sum()).collect().item(),
            "parts": len(numbers.parts)}


def _resources(object_store):
    return {"lake_io_manager": LakeIOManager(store=object_store), "mem": dg.InMemoryIOManager()}


def _key(crawl, shard):
    return dg.MultiPartitionKey({"crawl": crawl, "shard": shard})


def test_commit_and_lazy_read_one_partition(object_store, instance, crawl):
    instance.add_dynamic_partitions("crawl", [crawl])
    result = dg.materialize([numbers], partition_key=_key(crawl, "0001"), resources=_resources(object_store),
                            instance=instance)
    assert result.success
    lake = object_store.lake()
    manifest = lake.get_json(manifest_key("numbers", crawl, "0001"))
    assert manifest["rows"] == 3
    (part,) = [u["part"] for u in manifest["units"]]
    assert part.startswith(f"lake/numbers/crawl={crawl}/shard=0001/part-") and part.endswith(".parquet")
    frame = LakeInput.load(lake, "numbers", [(crawl, "0001")]).scan()
    assert isinstance(frame, pl.LazyFrame)
    assert frame.collect()["n"].to_list() == [10, 11, 12]


def test_lazy_read_of_many_partitions(object_store, instance, crawl):
    instance.add_dynamic_partitions("crawl", [crawl])
    for shard in SHARDS:
        assert dg.materialize([numbers], partition_key=_key(crawl, shard), resources=_resources(object_store),
                              instance=instance).success
    result = dg.materialize([numbers, crawl_total], selection=[crawl_total], partition_key=crawl,
                            resources=_resources(object_store), instance=instance)
    total = result.output_for_node("crawl_total")
    assert total == {"rows": 3 * len(SHARDS), "parts": len(SHARDS),
                     "sum": sum(int(s) * 10 * 3 + 3 for s in SHARDS)}


def test_rewrite_replaces_parts_and_vacuum_drops_the_old_ones(object_store, instance, crawl):
    """A recommit lists new parts; the superseded ones stay for readers of the previous manifest until the
    vacuum runs past the retention."""
    instance.add_dynamic_partitions("crawl", [crawl])
    res = _resources(object_store)
    dg.materialize([numbers], partition_key=_key(crawl, "0000"), resources=res, instance=instance)
    lake = object_store.lake()
    first = LakeInput.load(lake, "numbers", [(crawl, "0000")]).parts
    dg.materialize([numbers], partition_key=_key(crawl, "0000"), resources=res, instance=instance)
    second = LakeInput.load(lake, "numbers", [(crawl, "0000")]).parts
    assert first != second
    assert lake.exists(first[0])  # a reader holding the first manifest can still finish
    assert vacuum(lake, retention_s=3600, partitions=[("numbers", crawl, "0000")]) == []
    assert lake.exists(first[0])
    vacuum(lake, retention_s=0, partitions=[("numbers", crawl, "0000")])
    assert not lake.exists(first[0])
    listed = [o.key for o in lake.list(f"lake/numbers/crawl={crawl}/shard=0000/part-")]
    assert listed == second


def test_failed_run_leaves_no_partial_output(object_store, instance, crawl):
    """A run that dies after writing part of its output changes nothing a reader can see."""
    instance.add_dynamic_partitions("crawl", [crawl])
    res = _resources(object_store)
    assert dg.materialize([numbers], partition_key=_key(crawl, "0002"), resources=res, instance=instance).success
    lake = object_store.lake()
    before = lake.get_json(manifest_key("numbers", crawl, "0002"))

    @dg.asset(name="numbers", partitions_def=CRAWL_SHARD, io_manager_key="lake_io_manager")
    def numbers_crashing(context):
        # a work unit writes its part, then the run dies before the partition is committed
        with lake.part_writer(f"lake/numbers/crawl={crawl}/shard=0002/part-{'f' * 20}.parquet",
                              pl.DataFrame({"n": [1]}).to_arrow().schema) as w:
            w.write(pl.DataFrame({"n": [999]}))
        with pytest.raises(RuntimeError), lake.part_writer(
            f"lake/numbers/crawl={crawl}/shard=0002/part-{'e' * 20}.parquet", pl.DataFrame({"n": [1]}).to_arrow().schema
        ) as w:
            w.write(pl.DataFrame({"n": [998]}))
            raise RuntimeError("killed mid-write")
        raise RuntimeError("killed before commit")

    result = dg.materialize([numbers_crashing], partition_key=_key(crawl, "0002"), resources=res, instance=instance,
                            raise_on_error=False)
    assert not result.success
    assert lake.get_json(manifest_key("numbers", crawl, "0002")) == before
    assert not lake.exists(f"lake/numbers/crawl={crawl}/shard=0002/part-{'e' * 20}.parquet")
    assert LakeInput.load(lake, "numbers", [(crawl, "0002")]).scan().collect()["n"].to_list() == [20, 21, 22]


def test_missing_upstream_partition_is_named(object_store, instance, crawl):
    instance.add_dynamic_partitions("crawl", [crawl])
    result = dg.materialize([numbers, crawl_total], selection=[crawl_total], partition_key=crawl,
                            resources=_resources(object_store), instance=instance, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert f"numbers has no committed partition crawl={crawl}" in (error.cause or error).message
