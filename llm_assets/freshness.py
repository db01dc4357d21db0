"""Rebuilding what is stale: ONE Dagster backfill holding exactly the partitions the stale planner lists, launched
from the CLI (`llm-assets backfill --stale`) or by `stale_sensor` (start it in the UI to rebuild on demand, or leave
it running to keep the lake fresh after every new drop without a person)."""

from __future__ import annotations

import time

import dagster as dg

from llm_assets.dagster_private import (AssetGraphSubset, AssetKeyPartitionKey, BulkActionStatus, PartitionBackfill,
                                        make_new_backfill_id)
from llm_assets.partitions import crawl_partitions
from llm_assets.stale import Planned, stale_partitions
from resources import SENSOR_RETRY_BUDGET_S, ObjectStore

STALE_TAG = "llm_assets/stale_backfill"


def stale_subset(planned: list[Planned], asset_graph) -> AssetGraphSubset:
    return AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(dg.AssetKey(p.asset), p.partition or None) for p in planned}, asset_graph)


def register_crawls(instance: dg.DagsterInstance, planned: list[Planned]) -> None:
    """Crawls dropped under raw/ that the sensor has not registered yet become partitions first."""
    crawls = {p.partition.split("|")[0] for p in planned if p.partition}
    new = sorted(crawls - set(instance.get_dynamic_partitions(crawl_partitions.name)))
    if new:
        instance.add_dynamic_partitions(crawl_partitions.name, new)


def launch_stale_backfill(instance: dg.DagsterInstance, planned: list[Planned], asset_graph) -> str | None:
    """-> the backfill id, or None when nothing is stale."""
    if not planned:
        return None
    register_crawls(instance, planned)
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=make_new_backfill_id(), backfill_timestamp=time.time(), tags={STALE_TAG: "cli"},
        dynamic_partitions_store=instance, asset_graph_subset=stale_subset(planned, asset_graph),
        title=f"stale: {len(planned)} partitions", run_config=None,
        description="; ".join(sorted({f"{p.asset}: {p.cause}" for p in planned}))[:2000])
    instance.add_backfill(backfill)
    return backfill.backfill_id


def stale_backfill_in_progress(instance: dg.DagsterInstance) -> bool:
    return any(STALE_TAG in b.tags for b in instance.get_backfills(status=BulkActionStatus.REQUESTED, limit=50))


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED)
def stale_sensor(context: dg.SensorEvaluationContext, store: ObjectStore):
    """Plans every stale or missing partition (`llm-assets stale`) and requests ONE backfill of exactly those,
    unless the previous one is still running. Stopped by default: run it once from the UI to rebuild what is
    stale, or leave it running as the automation mode that keeps the lake fresh after new drops."""
    if stale_backfill_in_progress(context.instance):
        return dg.SkipReason("the previous stale backfill is still running")
    planned = stale_partitions(context.instance, store.lake(retry_budget_s=SENSOR_RETRY_BUDGET_S))
    if not planned:
        return dg.SkipReason("nothing is stale")
    register_crawls(context.instance, planned)
    return dg.RunRequest.for_asset_graph_subset(stale_subset(planned, context.repository_def.asset_graph),
                                                tags={STALE_TAG: "sensor"})
