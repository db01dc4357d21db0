"""Runs that build many partitions (`partitions_per_run`): each partition of the run is committed as a run of it
alone would commit it, with its own manifest and metadata; one that fails is named and is the only one not
committed."""

import uuid

import dagster as dg
import pytest

from llm_assets.core.inventory import shard_of
from llm_assets.core.partition import read_manifest
from llm_assets.dagster.jobs import jobs_of
from llm_assets.platform.partitions import crawl_shard_key, range_tags
from llm_assets.settings import load_settings
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import built, object_store_on, point_at
from resources import LakeIOManager

LAKE = ("raw_files", "documents", "filtered", "signatures")
FILES = ("resiliparse__warcfile.CC-MAIN-2020-34.warc.gz", "dolma__sample-0000.warc.gz",
         "dolma__sample-0001.warc.gz", "whirlwind__CC-MAIN-2024-22.warc.gz")


@pytest.fixture(scope="module")
def lake_of_four_shards(seaweed, store_config, tmp_path_factory):
    """A crawl of four shards, each holding one real WARC file, and a Dagster instance."""
    home = tmp_path_factory.mktemp("multi-partition")
    with pytest.MonkeyPatch.context() as mp:
        point_at(mp, seaweed, home / "home")
        (home / "dagster").mkdir()
        with dg.instance_for_test(temp_dir=str(home / "dagster")) as instance:
            store = object_store_on(store_config, seaweed)
            settings = load_settings()
            crawl = f"TEST-{uuid.uuid4().hex[:10]}"
            instance.add_dynamic_partitions("crawl", [crawl])
            lake = store.lake()
            for shard, name in zip(settings.shard_keys(), FILES, strict=True):
                key = next(k for i in range(10_000)
                           if shard_of(k := f"raw/{crawl}/{i}-{name}", settings.shards) == shard)
                lake.put_file(key, shared("warc", name))
            defs = dg.Definitions(assets=built(*LAKE), jobs=jobs_of(LAKE),
                                  resources={"store": store, "lake_io_manager": LakeIOManager(store=store)})
            yield defs, instance, lake, crawl, settings.shard_keys()


def key(crawl: str, shard: str) -> str:
    return str(crawl_shard_key(crawl, shard))


def test_one_run_builds_each_partition_of_its_range_as_a_run_of_it_alone(lake_of_four_shards):
    defs, instance, lake, crawl, shards = lake_of_four_shards
    result = defs.resolve_job_def("lake_job").execute_in_process(
        instance=instance, tags=range_tags(key(crawl, shards[0]), key(crawl, shards[-1])))
    assert result.success
    events = [e.materialization for e in result.get_asset_materialization_events()]
    for asset in LAKE:
        mine = {e.partition: {k: v.value for k, v in e.metadata.items()} for e in events
                if e.asset_key == dg.AssetKey(asset)}
        assert sorted(mine) == [key(crawl, s) for s in shards]
        for shard in shards:
            manifest = read_manifest(lake, asset, crawl, shard)
            metadata = mine[key(crawl, shard)]
            assert manifest is not None and metadata["rows_out"] == manifest.rows
            assert metadata["partition_data_version"] == manifest.data_version
            assert metadata["lake_manifest"].endswith(f"lake/{asset}/crawl={crawl}/shard={shard}/_manifest.json")
    docs = {e.partition: e.metadata["rows_out"].value for e in events if e.asset_key == dg.AssetKey("documents")}
    assert len(set(docs.values())) > 1  # each partition's own figures, not the run's
    assert all(c.passed for c in result.get_asset_check_evaluations())

    # A run of one partition alone builds what the range built: every unit is reused, the data version is the same.
    before = read_manifest(lake, "filtered", crawl, shards[1])
    alone = defs.resolve_job_def("lake_job").execute_in_process(instance=instance, partition_key=key(crawl, shards[1]))
    after = read_manifest(lake, "filtered", crawl, shards[1])
    assert alone.success and before and after
    assert (after.data_version, after.parts) == (before.data_version, before.parts)


def test_a_partition_that_fails_in_a_run_is_named_and_the_only_one_not_committed(lake_of_four_shards):
    defs, instance, lake, _, shards = lake_of_four_shards
    crawl = f"TEST-{uuid.uuid4().hex[:10]}"
    instance.add_dynamic_partitions("crawl", [crawl])
    for shard, name in zip(shards, FILES, strict=True):
        lake.put_file(next(k for i in range(10_000) if shard_of(k := f"raw/{crawl}/{i}-{name}", len(shards)) == shard),
                      shared("warc", name))
    job = defs.resolve_job_def("lake_job")
    # raw_files of every shard but the third: that shard's documents cannot be built
    for shard in (shards[0], shards[1], shards[3]):
        job.execute_in_process(instance=instance, partition_key=key(crawl, shard),
                               asset_selection=[dg.AssetKey("raw_files")])
    result = job.execute_in_process(instance=instance, asset_selection=[dg.AssetKey("documents")],
                                    tags=range_tags(key(crawl, shards[0]), key(crawl, shards[-1])),
                                    raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.cause.message if failure.step_failure_data.error.cause else ""
    text = failure.step_failure_data.error.message + message
    assert f"1 of 4 partitions failed: {key(crawl, shards[2])}" in text and "no committed partition" in text
    committed = {s for s in shards if read_manifest(lake, "documents", crawl, s) is not None}
    assert committed == {shards[0], shards[1], shards[3]}
    recorded = {e.materialization.partition for e in result.get_asset_materialization_events()}
    assert recorded == {key(crawl, s) for s in committed}
    status = instance.get_status_by_partition(dg.AssetKey("documents"), [key(crawl, s) for s in shards],
                                              defs.resolve_asset_graph().get(dg.AssetKey("documents")).partitions_def)
    assert status[key(crawl, shards[2])] == dg.AssetPartitionStatus.FAILED
    assert {status[key(crawl, s)] for s in committed} == {dg.AssetPartitionStatus.MATERIALIZED}


def test_a_range_over_two_crawls_builds_the_same_shards_of_each(lake_of_four_shards):
    """Dagster reads a range of crawl × shard keys per dimension: a run of crawls dropped together builds the
    shards between its ends' shards of each crawl between its ends' crawls, and no other."""
    defs, instance, lake, _, shards = lake_of_four_shards
    first, second = (f"TEST-{uuid.uuid4().hex[:10]}" for _ in range(2))
    instance.add_dynamic_partitions("crawl", [first, second])
    for crawl in (first, second):
        for shard, name in zip(shards, FILES, strict=True):
            lake.put_file(next(k for i in range(10_000) if shard_of(k := f"raw/{crawl}/{i}-{name}", len(shards))
                               == shard), shared("warc", name))
    result = defs.resolve_job_def("lake_job").execute_in_process(
        instance=instance, asset_selection=[dg.AssetKey("raw_files")],
        tags=range_tags(key(first, shards[1]), key(second, shards[2])))
    assert result.success
    built = {e.materialization.partition for e in result.get_asset_materialization_events()}
    assert built == {key(c, s) for c in (first, second) for s in shards[1:3]}
    assert {(c, s) for c in (first, second) for s in shards if read_manifest(lake, "raw_files", c, s)} == {
        (c, s) for c in (first, second) for s in shards[1:3]}


def test_a_runs_partitions_are_named_and_a_range_covers_its_shards_of_its_crawl():
    from llm_assets.platform.partitions import PARTITION_TAG, covers, partitions_label

    shards = range_tags("CC-A|0004", "CC-A|0007")
    assert partitions_label(shards) == "CC-A|0004..0007"
    assert partitions_label(range_tags("CC-A", "CC-B")) == "CC-A..CC-B"
    assert partitions_label(range_tags("CC-A|0000", "CC-B|0003")) == "CC-A..CC-B|0000..0003"
    assert partitions_label({PARTITION_TAG: "CC-A|0001"}) == "CC-A|0001" and partitions_label({}) is None
    assert [covers(shards, f"CC-A|{s:04d}") for s in (3, 4, 7, 8)] == [False, True, True, False]
    assert not covers(shards, "CC-B|0005") and covers({PARTITION_TAG: "CC-A|0001"}, "CC-A|0001")
