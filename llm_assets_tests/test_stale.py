"""The stale planner on a real store and instance: after a full build nothing is stale; a threshold change, a new
raw file, an identical re-upload and a removed file each plan exactly the partitions they should."""

import json

import pytest

from llm_assets import cli
from llm_assets.definitions import build_defs
from llm_assets.partitions import crawl_shard_key
from llm_assets.settings import load_settings
from llm_assets.stale import CODE, MISSING, RAW, plan_stale, stale_partitions
from llm_assets_tests.conftest import shared
from llm_assets_tests.test_dedup import curated, dedup_defs, name_in_shard, run  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
CHAIN = ["documents", "image_text_pairs", "filtered", "signatures", "deduplicated", "tokenized"]


def plan(instance, lake, crawl, code=None) -> dict[tuple[str, str], str]:
    """The plan for `crawl` (the release, made of every crawl the instance knows, and the enrichment, which these
    builds leave out, are left out)."""
    return {(p.asset, p.partition): p.cause for p in stale_partitions(instance, lake, load_settings(), code)
            if p.asset not in ("release", "enriched") and p.partition.split("|")[0] == crawl}


def test_nothing_is_stale_after_a_build_and_an_identical_reupload_changes_nothing(curated, instance, crawl):  # noqa: F811
    lake = curated
    assert plan(instance, lake, crawl) == {}
    key = next(o.key for o in lake.list(f"raw/{crawl}/"))
    lake.put_bytes(key, lake.get_bytes(key))  # the same bytes again: same ETag and size
    assert plan(instance, lake, crawl) == {}


def test_a_changed_threshold_plans_the_filtered_stage_and_what_follows_not_the_documents(
        curated, instance, crawl):  # noqa: F811
    from llm_assets.pipeline import code_versions

    planned = plan(instance, curated, crawl, code_versions(load_settings()) | {"filtered": "2-changed"})
    shards = ("0000", "0001")
    assert {(a, p) for a, p in planned} == (
        {(a, f"{crawl}|{s}") for a in ("filtered", "signatures", "deduplicated", "tokenized") for s in shards}
        | {("crawl_stats", crawl), ("duplicate_clusters", crawl)})
    assert planned[("filtered", f"{crawl}|0000")] == CODE


def test_a_new_file_plans_its_shard_chain_and_the_crawl_level_assets_then_a_rebuild_clears_it(
        curated, instance, crawl, dedup_defs):  # noqa: F811
    lake = curated
    new = f"raw/{crawl}/{name_in_shard(crawl, '0001', 'new')}"
    lake.put_file(new, shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"))
    planned = plan(instance, lake, crawl)
    assert planned[("raw_files", f"{crawl}|0001")] == RAW
    assert {(a, f"{crawl}|0001") for a in CHAIN} <= set(planned)
    assert not any(p.endswith("|0000") for a, p in planned if a in ("raw_files", "documents", "filtered"))
    assert ("duplicate_clusters", crawl) in planned and ("crawl_stats", crawl) in planned

    run(dedup_defs, "lake_job", crawl_shard_key(crawl, "0001"), instance)
    run(dedup_defs, "crawl_job", crawl, instance)
    for shard in ("0000", "0001"):
        run(dedup_defs, "curated_job", crawl_shard_key(crawl, shard), instance)
    assert plan(instance, lake, crawl) == {}

    lake.delete([new])  # removed again: its documents must go
    planned = plan(instance, lake, crawl)
    assert planned[("raw_files", f"{crawl}|0001")] == RAW and ("tokenized", f"{crawl}|0001") in planned


def test_a_crawl_dropped_but_never_built_is_missing(curated, instance, capsys):  # noqa: F811
    lake = curated
    lake.put_file("raw/NEW-CRAWL-1/a.warc.gz", shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz"))
    try:
        assert cli.main(["stale", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        rows = [p for p in out["partitions"] if p["partition"].startswith("NEW-CRAWL-1")]
        assert [r["asset"] for r in rows][:1] == ["raw_files"] and rows[0]["cause"] == MISSING
    finally:
        lake.delete(["raw/NEW-CRAWL-1/a.warc.gz"])


def test_backfill_stale_launches_one_backfill_of_exactly_the_stale_partitions(curated, instance, crawl,
                                                                              object_store):  # noqa: F811
    import dagster as dg

    from llm_assets.freshness import launch_stale_backfill

    defs = build_defs(load_settings())
    stale_sensor = defs.resolve_sensor_def("stale_sensor")
    lake = curated
    graph = defs.resolve_asset_graph()
    assert launch_stale_backfill(instance, [], graph) is None and not instance.get_backfills()
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', 'more')}", shared("warc", "pywb__iana.warc.gz"))
    planned = stale_partitions(instance, lake, load_settings())
    backfill_id = launch_stale_backfill(instance, planned, graph)
    (backfill,) = instance.get_backfills()
    assert backfill.backfill_id == backfill_id
    target = {(k.asset_key.path[-1], k.partition_key or "")
              for k in backfill.asset_backfill_data.target_subset.iterate_asset_partitions()}
    assert target == {(p.asset, p.partition) for p in planned}
    assert ("raw_files", f"{crawl}|0000") in target and ("documents", f"{crawl}|0001") not in target
    # while that backfill is pending, the sensor requests no second one
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        assert isinstance(stale_sensor(ctx), dg.SkipReason)


def test_the_stale_sensor_requests_a_backfill_only_when_something_is_stale(curated, instance, crawl,
                                                                           object_store):  # noqa: F811
    import dagster as dg

    from llm_assets.freshness import STALE_TAG

    defs = build_defs(load_settings())
    stale_sensor = defs.resolve_sensor_def("stale_sensor")
    lake = curated

    def mine(result) -> set:
        """What the sensor requests for this test's crawl (other tests' crawls share the bucket), but the
        enrichment, which this build leaves out."""
        return {(k.asset_key.path[-1], k.partition_key) for r in result.run_requests or []
                for k in r.asset_graph_subset.iterate_asset_partitions()
                if k.partition_key and k.partition_key.split("|")[0] == crawl and k.asset_key.path[-1] != "enriched"}

    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        assert mine(stale_sensor(ctx)) == set()
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0001', 'late')}", shared("warc", "pywb__iana.warc.gz"))
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        result = stale_sensor(ctx)
    (request,) = result.run_requests
    assert request.tags[STALE_TAG] == "sensor"
    target = mine(result)
    assert ("raw_files", f"{crawl}|0001") in target and ("raw_files", f"{crawl}|0000") not in target
    # the new files' version goes to Dagster with the request: the UI marks that raw_files partition stale too
    reported = {(e.asset_key.path[-1], e.partition) for e in result.asset_events}
    assert ("raw_drop", f"{crawl}|0001") in reported and ("raw_drop", f"{crawl}|0000") not in reported


def test_a_rebuild_reuses_unchanged_units_and_equals_a_full_rebuild(curated, instance, crawl, dedup_defs):  # noqa: F811
    from llm_assets.core.lake import manifest_key

    lake = curated
    key = crawl_shard_key(crawl, "0000")
    before = {a: lake.get_json(manifest_key(a, crawl, "0000")) for a in ("documents", "filtered")}
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', 'added')}", shared("warc", "pywb__iana.warc.gz"))
    meta = run(dedup_defs, "lake_job", key, instance)
    # the file that was there is not extracted or filtered again: its units are reused, the new one runs
    assert meta["documents"]["reused_units"] == len(before["documents"]["units"]) == 1
    # the added WARC (787 KB) is extracted as two shares of its HTML records: two new documents parts to filter
    assert meta["filtered"]["reused_units"] == 1 and len(lake.get_json(manifest_key("filtered", crawl, "0000"))["units"]) == 3

    def rows(asset):
        m = lake.get_json(manifest_key(asset, crawl, "0000"))
        return lake.scan([u["part"] for u in m["units"] if u.get("part")]).collect().drop("extractor", strict=False) \
            .sort("doc_id")

    incremental = {a: rows(a) for a in ("documents", "filtered", "signatures")}
    for asset in ("documents", "filtered", "signatures"):
        lake.delete([manifest_key(asset, crawl, "0000")])  # forget what was built: a full rebuild
    full = run(dedup_defs, "lake_job", key, instance)
    assert full["documents"]["reused_units"] == 0
    for asset, frame in incremental.items():
        assert rows(asset).equals(frame), asset


def test_a_late_drop_has_one_owner(curated, instance, crawl, object_store):  # noqa: F811
    """A raw partition a stale backfill rebuilds is not requested again by the raw-drop sensor; while a run of the
    raw-drop sensor is in flight, the stale sensor requests nothing."""
    import uuid

    import dagster as dg

    from llm_assets.dagster_private import SENSOR_NAME_TAG, BulkActionStatus
    from llm_assets.freshness import launch_stale_backfill

    defs = build_defs(load_settings())
    lake = curated
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0001', 'owned')}", shared("warc", "pywb__iana.warc.gz"))
    planned = stale_partitions(instance, lake, load_settings())
    assert ("raw_files", f"{crawl}|0001") in {(p.asset, p.partition) for p in planned}
    launch_stale_backfill(instance, planned, defs.resolve_asset_graph())
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        result = defs.resolve_sensor_def("raw_drop_sensor")(ctx)
    # a sensor without a cursor sees every partition as new: it requests shard 0000, leaves 0001 to the backfill
    shards = {r.partition_key.keys_by_dimension["shard"] for r in result.run_requests
              if r.partition_key.keys_by_dimension["crawl"] == crawl}
    assert shards == {"0000"}

    for backfill in instance.get_backfills():  # done: the stale sensor would wait for it otherwise
        instance.update_backfill(backfill.with_status(BulkActionStatus.COMPLETED_SUCCESS))
    instance.add_run(dg.DagsterRun(job_name="lake_job", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
                                   tags={SENSOR_NAME_TAG: "raw_drop_sensor"}))
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        skipped = defs.resolve_sensor_def("stale_sensor")(ctx)
    assert isinstance(skipped, dg.SkipReason) and "raw_drop_sensor" in skipped.skip_message


def test_a_failed_partition_is_planned_first_and_a_held_one_plans_nothing_for_its_sake(lake, crawl):
    """The failures the instance reports are planned with their run, whatever the lake says; a partition the stale
    sensor holds (it failed in the sensor's own backfill) is not planned, nor what follows it."""
    from llm_assets.pipeline import SPECS, code_versions

    settings = load_settings()
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', 'f')}", shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz"))
    code = code_versions(settings)
    p = f"{crawl}|0000"
    planned = {(x.asset, x.partition): x.cause for x in plan_stale(
        lake, settings, [crawl], code, SPECS, failed={("raw_files", p): "0123456789abcdef"})}
    assert planned[("raw_files", p)] == "failed (run 01234567)"  # never committed: the failure says more
    assert planned[("documents", p)] == "upstream data changed (raw_files is rebuilt)"
    assert not plan_stale(lake, settings, [crawl], code, SPECS, failed={("raw_files", p): "0123456789abcdef"},
                          hold={("raw_files", p)})
