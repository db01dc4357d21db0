"""Rebuilding what is stale: a stale backfill holds exactly the partitions the stale planner lists, launched from
the CLI (`llm-assets backfill --stale`) or by `stale_sensor` (start it in the UI to rebuild on demand, or leave it
running to keep the lake fresh after every new drop without a person), and run job by job by
`stale_backfill_sensor`, so that its runs show under their jobs."""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Mapping, Sequence

import dagster as dg

from llm_assets.core.forecast import Forecast, forecast
from llm_assets.core.keys import split_partition
from llm_assets.core.lake import Lake
from llm_assets.platform.backfills import (
    IN_FLIGHT,
    NOT_STALE,
    STALE_TAG,
    StaleBackfill,
    Status,
    carried_forward,
    checked_assets,
    failed_partitions,
    get_stale_backfill,
    new_observations,
    report_stale_checks,
    runs_failed,
    runs_in_flight,
    save_stale_backfill,
    stale_backfills,
    stale_backfills_in_progress,
    stale_check,
    update_stale_backfill,
)
from llm_assets.platform.dagster_private import SENSOR_NAME_TAG
from llm_assets.platform.partitions import CRAWL_PARTITIONS, contiguous_ranges, range_request
from llm_assets.settings import Settings
from llm_assets.stages import SPECS, code_versions
from llm_assets.tools.stale import Planned, known_crawls, planned_of, planning, source_versions, stale_partitions
from resources import SENSOR_RETRY_BUDGET_S, ObjectStore


def register_crawls(instance: dg.DagsterInstance, planned: Sequence[Planned]) -> None:
    """Crawls dropped under raw/ that the sensor has not registered yet become partitions first."""
    crawls = {split_partition(p.partition)[0] for p in planned if p.partition}
    new = sorted(crawls - set(instance.get_dynamic_partitions(CRAWL_PARTITIONS)))
    if new:
        instance.add_dynamic_partitions(CRAWL_PARTITIONS, new)


def plan_forecast(lake: Lake, settings: Settings, planned: Sequence[Planned],
                  extra_raw_bytes: Mapping[str, int] | None = None) -> Forecast:
    """The forecast of a plan on the runner the settings choose (a Dask cluster's threads counted when it answers)."""
    # Here, not at the top: the runners' module is not imported when the code location is built (every run worker)
    from llm_assets.platform.runners import runner_slots

    slots, runner = runner_slots(settings.runner)
    return forecast(lake, settings, planned, extra_raw_bytes, stages=SPECS, slots=slots, runner=runner)


def launch_stale_backfill(instance: dg.DagsterInstance, planned: Sequence[Planned],
                          tags: dict[str, str] | None = None, forecast: Forecast | None = None,
                          trigger: str = "cli") -> str | None:
    """-> the id of a new stale backfill of the planned partitions (`stale_backfill_sensor` requests its runs), or
    None when nothing is stale. `tags`: its runs' own (who launched it); `forecast`: the plan's, one tag on each."""
    if not planned:
        return None
    register_crawls(instance, planned)
    backfill = StaleBackfill(_new_id(), trigger, tuple((p.asset, p.partition) for p in planned),
                             {**(forecast.to_tags() if forecast else {}), **(tags or {})})
    save_stale_backfill(instance, backfill, new=True)
    return backfill.backfill_id


def _new_id() -> str:
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(8))  # as Dagster's backfill ids read


def stale_backfill(instance: dg.DagsterInstance, backfill_id: str | None = None) -> StaleBackfill | None:
    """The stale backfill of this id, or the latest one (from the CLI or the sensor)."""
    if backfill_id:
        return get_stale_backfill(instance, backfill_id)
    return next(reversed(stale_backfills(instance)), None)


def wait_backfill(instance: dg.DagsterInstance, backfill_id: str, poll_s: float = 2.0) -> StaleBackfill:
    """The stale backfill once it has ended. The daemon's sensors run it, this only watches: without a daemon it
    would never end, so that is an error rather than a wait for ever."""
    while (backfill := get_stale_backfill(instance, backfill_id)) is not None and backfill.in_progress:
        if not instance.get_daemon_statuses(["SENSOR"])["SENSOR"].healthy:
            raise RuntimeError(f"backfill {backfill_id} is {backfill.status} and no dagster-daemon runs sensors for "
                               "this instance: `make ui` starts one; then `llm-assets backfill --status "
                               f"{backfill_id}` says how it went")
        time.sleep(poll_s)
    if backfill is None:
        raise LookupError(f"no stale backfill {backfill_id} in this Dagster instance")
    return backfill


def stale_backfill_in_progress(instance: dg.DagsterInstance) -> bool:
    return bool(stale_backfills_in_progress(instance))


def raw_drop_runs_in_flight(instance: dg.DagsterInstance) -> bool:
    """Whether a run the raw-drop sensor requested is queued or running: what it rebuilds is its to rebuild."""
    return bool(instance.get_run_records(dg.RunsFilter(statuses=IN_FLIGHT, tags={SENSOR_NAME_TAG: "raw_drop_sensor"}),
                                         limit=1))


def _launched_by_the_sensor(instance: dg.DagsterInstance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id) if run_id != "unknown" else None
    backfill = get_stale_backfill(instance, run.tags[STALE_TAG]) if run and STALE_TAG in run.tags else None
    return backfill is not None and backfill.trigger == "sensor"


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
    @dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED)
    def stale_sensor(context: dg.SensorEvaluationContext, store: ObjectStore):
        """Plans every stale or missing partition (`llm-assets stale`) and launches ONE stale backfill of exactly
        those (`stale_backfill_sensor` runs it), unless the previous one is still in progress; reports the observed
        sources' versions it read (`raw_drop`, `curation_scope`), so what the UI marks stale is what it plans.
        Stopped by default: run it once from the UI to rebuild what is stale, or leave it running as the automation
        mode that keeps the lake fresh after new drops.

        A partition whose latest run failed is rebuilt, unless that run was one of this sensor's own backfill: a
        failure that repeats is not retried every minute; it is held, with what depends on it, until a person
        retries it (`llm-assets stale` lists it, `backfill --stale` retries it).

        A raw drop has one owner: while a run of `raw_drop_sensor` is queued or running, this sensor waits for it
        (and the raw-drop sensor requests nothing for a partition a stale backfill in progress rebuilds).

        The backfill's runs carry the plan's forecast (`llm_assets/forecast`), and this sensor's log its table."""
        if stale_backfill_in_progress(context.instance):
            return dg.SkipReason("the previous stale backfill is still in progress")
        if raw_drop_runs_in_flight(context.instance):
            return dg.SkipReason("raw_drop_sensor's runs are in flight: what they rebuild is theirs")
        lake = store.lake(retry_budget_s=SENSOR_RETRY_BUDGET_S)
        crawls = known_crawls(lake, context.instance)
        failed = failed_partitions(context.instance, settings, crawls, SPECS)
        # each failed run read once: a run of a range failed every partition it held
        ours = {run for run in set(failed.values()) if _launched_by_the_sensor(context.instance, run)}
        own = {p for p, run in failed.items() if run in ours}
        if own:
            context.log.warning(f"{len(own)} partitions failed in this sensor's backfill and are not retried on their "
                                f"own (first: {' '.join(min(own))}): `llm-assets backfill --stale` retries them")
        planner = planning(lake, settings, crawls, code_versions(settings), SPECS, failed=failed, hold=own)
        planned, observed = planned_of(planner), new_observations(context.instance, source_versions(planner))
        report_stale_checks(context.instance, [(p.asset, p.partition, p.cause) for p in planned], SPECS)
        if not planned:
            return dg.SensorResult(asset_events=observed, skip_reason="nothing is stale" + (
                f" but the {len(own)} partitions that failed in this sensor's backfill" if own else ""))
        figures = plan_forecast(lake, settings, planned)
        backfill_id = launch_stale_backfill(context.instance, planned, forecast=figures, trigger="sensor")
        context.log.info(f"stale backfill {backfill_id} of {len(planned)} partitions:\n{figures.render()}")
        return dg.SensorResult(asset_events=observed)

    return stale_sensor


JOB_OF = {s.name: s.job for s in SPECS}
STALE_BACKFILL_TICK_S = 4


def build_stale_backfill_sensor(settings: Settings, jobs: Sequence) -> dg.SensorDefinition:
    """`jobs`: the asset jobs, in the order a stale backfill runs them (the stage list's)."""
    order = [job.name for job in jobs]

    # Every pass of the daemon's sensor loop (5 s): a backfill's next jobs wait on this tick, and a tick with nothing
    # in progress reads one key of the instance (`sensor.interval_seconds` is sized for listing a bucket of millions
    # of raw files). At 5 s, ticks fell on every other pass.
    @dg.sensor(jobs=list(jobs), minimum_interval_seconds=STALE_BACKFILL_TICK_S,
               default_status=dg.DefaultSensorStatus.RUNNING)
    def stale_backfill_sensor(context: dg.SensorEvaluationContext, store: ObjectStore):
        """Runs each stale backfill (`llm-assets backfill --stale`, `stale_sensor`) job by job, oldest backfill
        first: the runs of the jobs whose planned assets wait on no other job's (lake_job first), then, once they
        all ended, a new plan and the runs of the jobs it makes ready, and so on until nothing is left for a job
        that has not run. Each job's runs build ranges of at most `partitions_per_run` partitions, tagged with the
        backfill's id (`llm_assets/stale_backfill`), and show under their jobs.

        A partition that failed in the backfill is held with what depends on it, and the backfill goes on with
        the rest; it ends `failed` if any of its runs failed (`llm-assets backfill --status` lists them, `backfill
        --stale` retries them). It waits while the raw-drop sensor's runs are in flight: a new plan then would
        miss what they build."""
        waiting = stale_backfills_in_progress(context.instance)
        if not waiting:
            return dg.SkipReason("no stale backfill in progress")
        backfill = waiting[0]  # one at a time: a later one's plan was made on what this one rebuilds
        if runs_in_flight(context.instance, backfill.backfill_id):
            return dg.SkipReason(f"backfill {backfill.backfill_id}: runs of {', '.join(backfill.jobs)} are in flight")
        if raw_drop_runs_in_flight(context.instance):
            return dg.SkipReason("raw_drop_sensor's runs are in flight: the next plan waits for what they build")
        observed: list[dg.AssetObservation] = []
        if backfill.jobs:
            planner = replan(store.lake(retry_budget_s=SENSOR_RETRY_BUDGET_S), context.instance, settings,
                             done=backfill.jobs)
            plan = planned_of(planner)
            observed = new_observations(context.instance, source_versions(planner))
            report_stale_checks(context.instance, [(p.asset, p.partition, p.cause) for p in plan], SPECS)
            targets = [(p.asset, p.partition) for p in plan]
        else:
            targets = list(backfill.planned)
        repository = context.repository_def
        assert repository is not None  # a sensor is always evaluated in its code location
        ready = next_jobs(targets, order, backfill.jobs, parents_of(repository.asset_graph))
        if not ready:
            failed = runs_failed(context.instance, backfill.backfill_id)
            ended = update_stale_backfill(context.instance, backfill, status=Status.FAILED if failed else
                                          Status.SUCCEEDED, ended=time.time())
            return dg.SensorResult(asset_events=observed,
                                   skip_reason=f"backfill {ended.backfill_id} ended: {ended.status}")
        crawls = context.instance.get_dynamic_partitions(CRAWL_PARTITIONS)
        requests = [r for job, level in ready.items() for r in level_requests(backfill, job, level, settings, crawls)]
        update_stale_backfill(context.instance, backfill, jobs=(*backfill.jobs, *ready), status=Status.RUNNING)
        context.log.info(f"backfill {backfill.backfill_id}: {len(requests)} runs of {', '.join(ready)} for "
                         f"{sum(len(level) for level in ready.values())} planned partitions")
        return dg.SensorResult(run_requests=requests, asset_events=observed)

    return stale_backfill_sensor


def replan(lake: Lake, instance: dg.DagsterInstance, settings: Settings, done: Sequence[str]):
    """The plan of a backfill's next job, once the jobs `done` ran: what they left stale (it failed, or it is new
    since) is not theirs to build any more, so it is held with everything that depends on it."""
    crawls = known_crawls(lake, instance)
    failed = failed_partitions(instance, settings, crawls, SPECS)
    planner = planning(lake, settings, crawls, code_versions(settings), SPECS, failed=failed)
    left = {(p.asset, p.partition) for p in planned_of(planner) if JOB_OF.get(p.asset) in done}
    return planning(lake, settings, crawls, code_versions(settings), SPECS, failed=failed, hold=left) if left \
        else planner


def parents_of(graph) -> dict[str, set[str]]:
    """asset -> the assets it depends on, by name, from the code location's asset graph."""
    return {key.path[-1]: {p.path[-1] for p in graph.get(key).parent_keys} for key in graph.get_all_asset_keys()}


def next_jobs(targets: Sequence[tuple[str, str]], order: Sequence[str], done: Sequence[str],
              parents: Mapping[str, set[str]]) -> dict[str, list[tuple[str, str]]]:
    """job -> the planned (asset, partition) it builds, for the jobs not `done` that wait on no other: no planned
    asset of theirs depends, however far up, on a planned asset of another job still to run. Empty when nothing is
    left to build."""
    pending: dict[str, list[tuple[str, str]]] = {}
    for target in targets:
        if (job := JOB_OF.get(target[0])) and job not in done:
            pending.setdefault(job, []).append(target)
    planned = {asset for level in pending.values() for asset, _ in level}

    def ancestors(asset: str, seen: set[str]) -> set[str]:
        for parent in parents.get(asset, set()) - seen:
            seen.add(parent)
            ancestors(parent, seen)
        return seen

    def waits(job: str) -> bool:
        return any(JOB_OF.get(a) != job for asset in {a for a, _ in pending[job]}
                   for a in ancestors(asset, set()) & planned)

    ready = {job: pending[job] for job in order if job in pending and not waits(job)}
    if pending and not ready:  # jobs waiting on each other would wait for ever: the first in the jobs' order goes
        first = next(job for job in order if job in pending)
        ready = {first: pending[first]}
    return ready


def level_requests(backfill: StaleBackfill, job: str, level: Sequence[tuple[str, str]], settings: Settings,
                   crawls: Sequence[str] = ()) -> list[dg.RunRequest]:
    """The runs of one job of a backfill: partitions that need the same assets of it, in ranges of at most
    `partitions_per_run` (crawls in the order the instance registered them, `crawls`); the run key names the
    backfill, the job, the assets and the range, so a repeated tick never launches a run twice."""
    assets_of: dict[str, set[str]] = {}
    for asset, partition in level:
        assets_of.setdefault(partition, set()).add(asset)
    groups: dict[tuple[str, ...], list[str]] = {}
    for partition, assets in assets_of.items():
        groups.setdefault(tuple(sorted(assets)), []).append(partition)
    tags = {STALE_TAG: backfill.backfill_id, **backfill.tags}
    return [range_request(keys, job_name=job, asset_selection=[dg.AssetKey(a) for a in assets], tags=tags,
                          run_key=f"{backfill.backfill_id}|{job}|{','.join(assets)}|{keys[0]}..{keys[-1]}")
            for assets, partitions in sorted(groups.items())
            for keys in contiguous_ranges(partitions, settings, crawls)]
