"""Rebuilding what is stale: ONE Dagster backfill holding exactly the partitions the stale planner lists, launched
from the CLI (`llm-assets backfill --stale`) or by `stale_sensor` (start it in the UI to rebuild on demand, or leave
it running to keep the lake fresh after every new drop without a person)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import dagster as dg

from llm_assets.backfills import (
    NOT_STALE,
    STALE_TAG,
    carried_forward,
    checked_assets,
    failed_partitions,
    new_observations,
    report_stale_checks,
    stale_backfills_in_progress,
    stale_check,
)
from llm_assets.core.forecast import Forecast, forecast
from llm_assets.core.keys import split_partition
from llm_assets.core.lake import Lake
from llm_assets.dagster_private import (
    SENSOR_NAME_TAG,
    AssetGraphSubset,
    AssetKeyPartitionKey,
    BulkActionStatus,
    PartitionBackfill,
    make_new_backfill_id,
)
from llm_assets.partitions import CRAWL_PARTITIONS
from llm_assets.settings import Settings
from llm_assets.stages import SPECS, code_versions
from llm_assets.stale import Planned, known_crawls, planned_of, planning, source_versions, stale_partitions
from resources import SENSOR_RETRY_BUDGET_S, ObjectStore


def stale_subset(planned: list[Planned], asset_graph) -> AssetGraphSubset:
    return AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(dg.AssetKey(p.asset), p.partition or None) for p in planned}, asset_graph)


def register_crawls(instance: dg.DagsterInstance, planned: list[Planned]) -> None:
    """Crawls dropped under raw/ that the sensor has not registered yet become partitions first."""
    crawls = {split_partition(p.partition)[0] for p in planned if p.partition}
    new = sorted(crawls - set(instance.get_dynamic_partitions(CRAWL_PARTITIONS)))
    if new:
        instance.add_dynamic_partitions(CRAWL_PARTITIONS, new)


def plan_forecast(lake: Lake, settings: Settings, planned: Sequence[Planned],
                  extra_raw_bytes: Mapping[str, int] | None = None) -> Forecast:
    """The forecast of a plan on the runner the settings choose (a Dask cluster's threads counted when it answers)."""
    # Here, not at the top: the runners' module is not imported when the code location is built (every run worker)
    from llm_assets.runners import runner_slots

    slots, runner = runner_slots(settings.runner)
    return forecast(lake, settings, planned, extra_raw_bytes, stages=SPECS, slots=slots, runner=runner)


def launch_stale_backfill(instance: dg.DagsterInstance, planned: list[Planned], asset_graph,
                          tags: dict[str, str] | None = None, forecast: Forecast | None = None) -> str | None:
    """-> the backfill id, or None when nothing is stale. `tags`: the backfill's own (its runs carry them too);
    `forecast`: the plan's, whose figures join them (`llm_assets/forecast_*`)."""
    if not planned:
        return None
    register_crawls(instance, planned)
    tags = {STALE_TAG: "cli", **(forecast.to_tags() if forecast else {}), **(tags or {})}
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=make_new_backfill_id(), backfill_timestamp=time.time(), tags=tags,
        dynamic_partitions_store=instance, asset_graph_subset=stale_subset(planned, asset_graph),
        title=f"stale: {len(planned)} partitions", run_config=None,
        description="; ".join(sorted({f"{p.asset}: {p.cause}" for p in planned}))[:2000])
    instance.add_backfill(backfill)
    return backfill.backfill_id


RUNNING = {BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING}


def stale_backfill(instance: dg.DagsterInstance, backfill_id: str | None = None) -> PartitionBackfill | None:
    """The backfill of this id, or the latest stale backfill (from the CLI or the sensor)."""
    if backfill_id:
        return instance.get_backfill(backfill_id)
    return next((b for b in instance.get_backfills(limit=50) if STALE_TAG in b.tags), None)


def wait_backfill(instance: dg.DagsterInstance, backfill_id: str, poll_s: float = 2.0) -> PartitionBackfill:
    """The backfill once it has ended. The daemon runs it, this only watches: without a daemon running backfills
    it would never end, so that is an error rather than a wait for ever."""
    while (backfill := instance.get_backfill(backfill_id)) is not None and backfill.status in RUNNING:
        if not instance.get_daemon_statuses(["BACKFILL"])["BACKFILL"].healthy:
            raise RuntimeError(f"backfill {backfill_id} is {backfill.status.value.lower()} and no dagster-daemon "
                               "runs backfills for this instance: `make ui` starts one; then `llm-assets backfill "
                               f"--status {backfill_id}` says how it went")
        time.sleep(poll_s)
    if backfill is None:
        raise LookupError(f"no backfill {backfill_id} in this Dagster instance")
    return backfill


def stale_backfill_in_progress(instance: dg.DagsterInstance) -> bool:
    return bool(stale_backfills_in_progress(instance))


IN_FLIGHT = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED]


def raw_drop_runs_in_flight(instance: dg.DagsterInstance) -> bool:
    """Whether a run the raw-drop sensor requested is queued or running: what it rebuilds is its to rebuild."""
    return bool(instance.get_run_records(dg.RunsFilter(statuses=IN_FLIGHT, tags={SENSOR_NAME_TAG: "raw_drop_sensor"}),
                                         limit=1))





def _launched_by_the_sensor(instance: dg.DagsterInstance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id) if run_id != "unknown" else None
    return run is not None and run.tags.get(STALE_TAG) == "sensor"


def build_stale_checks(settings: Settings) -> list[dg.AssetChecksDefinition]:
    """Each planned asset's `not_stale` check: reported whenever a plan is made (`llm-assets stale`, `backfill
    --stale`, the stale sensor, the demo), or run from the asset's page to plan now. A run that builds the asset runs
    it too (Dagster runs an asset's checks with it): there it carries the last plan forward but the partitions the
    run built, one query rather than a plan of the whole lake per run."""

    def stale_check_of(asset: str) -> dg.AssetChecksDefinition:
        @dg.asset_check(asset=asset, name=NOT_STALE, blocking=False, description=(
            "No partition of this asset is stale or missing by the stale planner (`llm-assets stale`): failed (a "
            "warning) with each planned partition and why, when a plan found some. Reported whenever a plan is "
            "made; run it to plan now. `llm-assets backfill --stale` rebuilds them."))
        def not_stale(context, store: ObjectStore) -> dg.AssetCheckResult:  # (a string annotation: Dagster refuses it)
            run = context.run
            if run.asset_selection or not run.job_name.startswith("__"):  # a build: no plan of the lake per run
                found = carried_forward(context.instance, asset, run)
            else:
                planned = stale_partitions(context.instance, store.lake(), settings)
                found = stale_check(asset, [(p.asset, p.partition, p.cause) for p in planned])
            return dg.AssetCheckResult(passed=found.passed, severity=found.severity, description=found.description,
                                       metadata=found.metadata)

        return not_stale

    return [stale_check_of(asset) for asset in checked_assets(SPECS)]


def build_stale_sensor(settings: Settings) -> dg.SensorDefinition:
    # `asset_selection`: a sensor may only request a backfill (a RunRequest of an asset graph subset) of assets it
    # targets; the plan can hold any asset of the code location.
    @dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED,
               asset_selection=dg.AssetSelection.all())
    def stale_sensor(context: dg.SensorEvaluationContext, store: ObjectStore):
        """Plans every stale or missing partition (`llm-assets stale`) and requests ONE backfill of exactly those,
        unless the previous one is still running; reports the observed sources' versions it read (`raw_drop`,
        `curation_scope`), so what the UI marks stale is what it plans. Stopped by default: run it once from the UI
        to rebuild what is stale, or leave it running as the automation mode that keeps the lake fresh after new
        drops.

        A partition whose latest run failed is rebuilt, unless that run was one of this sensor's own backfill: a
        failure that repeats is not retried every minute; it is held, with what depends on it, until a person
        retries it (`llm-assets stale` lists it, `backfill --stale` retries it).

        A raw drop has one owner: while a run of `raw_drop_sensor` is queued or running, this sensor waits for it
        (and the raw-drop sensor requests nothing for a partition a stale backfill in progress rebuilds).

        Its run request carries the plan's forecast as tags (`llm_assets/forecast_cpu_hours`, `..._wall_hours`,
        `..._bytes_out`, `..._requests`, and `..._cost` when priced), and its log the forecast's table."""
        if stale_backfill_in_progress(context.instance):
            return dg.SkipReason("the previous stale backfill is still running")
        if raw_drop_runs_in_flight(context.instance):
            return dg.SkipReason("raw_drop_sensor's runs are in flight: what they rebuild is theirs")
        lake = store.lake(retry_budget_s=SENSOR_RETRY_BUDGET_S)
        crawls = known_crawls(lake, context.instance)
        failed = failed_partitions(context.instance, settings, crawls, SPECS)
        own = {p for p, run in failed.items() if _launched_by_the_sensor(context.instance, run)}
        if own:
            context.log.warning(f"{len(own)} partitions failed in this sensor's backfill and are not retried on their "
                                f"own (first: {' '.join(min(own))}): `llm-assets backfill --stale` retries them")
        planner = planning(lake, settings, crawls, code_versions(settings), SPECS, failed=failed, hold=own)
        planned, observed = planned_of(planner), new_observations(context.instance, source_versions(planner))
        report_stale_checks(context.instance, [(p.asset, p.partition, p.cause) for p in planned], SPECS)
        if not planned:
            return dg.SensorResult(asset_events=observed, skip_reason="nothing is stale" + (
                f" but the {len(own)} partitions that failed in this sensor's backfill" if own else ""))
        register_crawls(context.instance, planned)
        figures = plan_forecast(lake, settings, planned)
        context.log.info(f"stale backfill of {len(planned)} partitions:\n{figures.render()}")
        repository = context.repository_def
        assert repository is not None  # a sensor is always evaluated in its code location
        return dg.SensorResult(asset_events=observed, run_requests=[dg.RunRequest.for_asset_graph_subset(
            stale_subset(planned, repository.asset_graph),
            tags={**figures.to_tags(), STALE_TAG: "sensor"})])

    return stale_sensor
