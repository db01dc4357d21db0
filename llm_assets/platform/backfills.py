"""What the stale planner, the sensors and the stale backfill read from or report to Dagster's instance: the tag of
a stale backfill and the partitions one in progress holds, the partitions whose latest run failed, and the observed
sources' versions as Dagster's observations of them."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import dagster as dg

from llm_assets.core.keys import PartitionRef
from llm_assets.platform.dagster_private import DATA_VERSION_TAG, instance_values, set_instance_values
from llm_assets.platform.failures import replaced
from llm_assets.platform.partitions import (
    CRAWL_PARTITIONS,
    PARTITION_TAG,
    RANGE_START,
    covers,
    crawl_partitions,
    crawl_shard_partitions,
)
from llm_assets.registry import SourceVersion, StageSpec
from llm_assets.settings import Settings

STALE_TAG = "llm_assets/stale_backfill"  # a stale backfill's runs carry its id


class Status:
    REQUESTED, RUNNING, SUCCEEDED, FAILED = "requested", "running", "succeeded", "failed"


@dataclass(frozen=True)
class StaleBackfill:
    """A rebuild of the partitions a stale plan listed, job by job (lake_job, crawl_job, curated_job, then
    release_job and enrich_job together, cost_job): `stale_backfill_sensor` requests the runs of the next jobs once
    the runs of the last ones ended, so every run shows under its job. Kept in the instance's key-value store."""

    backfill_id: str
    trigger: str  # "cli" or "sensor"
    planned: tuple[tuple[str, str], ...]  # (asset, partition) of the plan it was launched for
    tags: Mapping[str, str] = field(default_factory=dict)  # its runs' own: who launched it, the plan's forecast
    created: float = field(default_factory=time.time)
    jobs: tuple[str, ...] = ()  # the jobs whose runs it requested so far
    status: str = Status.REQUESTED
    ended: float | None = None

    @property
    def in_progress(self) -> bool:
        return self.status in (Status.REQUESTED, Status.RUNNING)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "planned": [list(p) for p in self.planned]}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> StaleBackfill:
        data = json.loads(text)
        return cls(**{**data, "planned": tuple(tuple(p) for p in data["planned"]), "jobs": tuple(data["jobs"])})


_KEY = "llm_assets/stale_backfill/"
_STATUS = "llm_assets/stale_backfill_status/"  # its status alone: what the sensors read every tick
_INDEX = "llm_assets/stale_backfills"  # their ids, oldest first
KEPT = 200  # stale backfills the index remembers


def save_stale_backfill(instance: dg.DagsterInstance, backfill: StaleBackfill, new: bool = False) -> None:
    pairs = {_KEY + backfill.backfill_id: backfill.to_json(), _STATUS + backfill.backfill_id: backfill.status}
    if new:
        pairs[_INDEX] = json.dumps([*_stale_backfill_ids(instance), backfill.backfill_id][-KEPT:])
    set_instance_values(instance, pairs)


def update_stale_backfill(instance: dg.DagsterInstance, backfill: StaleBackfill, **changes) -> StaleBackfill:
    save_stale_backfill(instance, changed := replace(backfill, **changes))
    return changed


def _stale_backfill_ids(instance: dg.DagsterInstance) -> list[str]:
    return json.loads(instance_values(instance, {_INDEX}).get(_INDEX, "[]"))


def get_stale_backfill(instance: dg.DagsterInstance, backfill_id: str) -> StaleBackfill | None:
    text = instance_values(instance, {_KEY + backfill_id}).get(_KEY + backfill_id)
    return StaleBackfill.from_json(text) if text else None


def stale_backfills(instance: dg.DagsterInstance, in_progress: bool = False) -> list[StaleBackfill]:
    """Every stale backfill the instance remembers (or those in progress), oldest first. Only their statuses are
    read for all of them: a record holds its whole plan."""
    ids = _stale_backfill_ids(instance)
    if in_progress:
        statuses = instance_values(instance, {_STATUS + i for i in ids})
        ids = [i for i in ids if statuses.get(_STATUS + i) in (Status.REQUESTED, Status.RUNNING)]
    values = instance_values(instance, {_KEY + i for i in ids}) if ids else {}
    return [StaleBackfill.from_json(values[_KEY + i]) for i in ids if _KEY + i in values]


def stale_backfills_in_progress(instance: dg.DagsterInstance) -> list[StaleBackfill]:
    return stale_backfills(instance, in_progress=True)


def stale_backfill_targets(instance: dg.DagsterInstance) -> set[tuple[str, str]]:
    """(asset, partition) of every stale backfill still in progress: the raw-drop sensor leaves those to it."""
    return {t for b in stale_backfills_in_progress(instance) for t in b.planned}


def runs_of(backfill_id: str, statuses: Sequence[dg.DagsterRunStatus] | None = None) -> dg.RunsFilter:
    return dg.RunsFilter(tags={STALE_TAG: backfill_id}, statuses=list(statuses) if statuses else [])


IN_FLIGHT = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def runs_in_flight(instance: dg.DagsterInstance, backfill_id: str) -> bool:
    """Whether a run of the backfill is queued or running, or failed with a retry Dagster has yet to launch (a run
    that lost the instance's database is retried: `LocalRunLauncher`)."""
    return bool(instance.get_run_records(runs_of(backfill_id, IN_FLIGHT), limit=1)) or any(
        run.is_complete_and_waiting_to_retry
        for run in instance.get_runs(runs_of(backfill_id, [dg.DagsterRunStatus.FAILURE])))


def runs_failed(instance: dg.DagsterInstance, backfill_id: str) -> int:
    """Runs of the backfill that failed and that no retry replaced."""
    return sum(not replaced(run) for run in instance.get_runs(runs_of(backfill_id, [dg.DagsterRunStatus.FAILURE])))


def observation(version: SourceVersion) -> dg.AssetObservation:
    return dg.AssetObservation(dg.AssetKey(version.source), partition=version.partition,
                               tags={DATA_VERSION_TAG: version.version})


def failed_partitions(instance: dg.DagsterInstance, settings: Settings, crawls: list[str],
                      specs: Sequence[StageSpec]) -> dict[tuple[str, str], str]:
    """(asset, partition) -> the failed run, for every partition whose latest materialization attempt failed (the
    UI's red "Failed"): the lake still holds what an earlier run committed, or nothing, so only the instance knows."""
    known = set(instance.get_dynamic_partitions(CRAWL_PARTITIONS))
    crawls = [c for c in crawls if c in known]
    if not crawls:
        return {}
    failed: dict[tuple[str, str], str] = {}
    recent: Sequence[dg.RunRecord] | None = None
    for spec in specs:
        if spec.level == "shard":
            partitions_def: dg.PartitionsDefinition = crawl_shard_partitions(settings)
            keys = [PartitionRef(c, s).key for c in crawls for s in settings.shard_keys()]
        elif spec.level == "crawl":
            partitions_def, keys = crawl_partitions, crawls
        else:
            continue  # the release is stale until a version for the current inputs exists, failed or not
        status = instance.get_status_by_partition(dg.AssetKey(spec.name), keys, partitions_def) or {}
        for key, state in status.items():
            if state == dg.AssetPartitionStatus.FAILED:
                if recent is None:  # the latest failed runs, read once for every failed partition
                    recent = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]),
                                                      limit=FAILED_RUNS_SCANNED)
                failed[(spec.name, key)] = _latest_failed_run(instance, key, recent)
    return failed


def _latest_failed_run(instance: dg.DagsterInstance, partition: str, recent: Sequence[dg.RunRecord]) -> str:
    """The latest failed run of the partition: of it alone, or (among the `recent` failed runs) of a range of
    partitions that holds it."""
    alone = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE],
                                                   tags={PARTITION_TAG: partition}), limit=1)
    crawls = instance.get_dynamic_partitions(CRAWL_PARTITIONS) if "|" not in partition else ()
    ranges = [r for r in recent if covers(r.dagster_run.tags, partition, crawls)]
    latest = max([*alone, *ranges], key=lambda r: r.create_timestamp, default=None)
    return latest.dagster_run.run_id if latest else "unknown"


FAILED_RUNS_SCANNED = 200  # the latest failed runs searched for a range that holds a failed partition


def last_observed(instance: dg.DagsterInstance, source: str, partition: str) -> str | None:
    records = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(source),
                                                                asset_partitions=[partition]), limit=1).records
    event = records[0].asset_observation if records else None
    return event.tags.get(DATA_VERSION_TAG) if event is not None and event.tags else None


def new_observations(instance: dg.DagsterInstance, versions: list[SourceVersion]) -> list[dg.AssetObservation]:
    """Observations of the versions Dagster does not hold yet: a source partition is stale for Dagster when an
    observation after its dependent's build differs from the one before, so the same version is never reported
    twice (only versions that differ from what a partition recorded reach this: few, one query each). An anchor is
    reported only while its source has no observation: a build then has one to compare later ones with."""
    unobserved = {v.source for v in versions if v.anchor
                  and not instance.fetch_observations(dg.AssetKey(v.source), limit=1).records}
    return [observation(v) for v in versions if (v.source in unobserved if v.anchor else
                                                 last_observed(instance, v.source, v.partition) != v.version)]


def report_sources(instance: dg.DagsterInstance, versions: list[SourceVersion]) -> int:
    """Report the observed sources' new versions to the instance; -> how many."""
    events = new_observations(instance, versions)
    for event in events:
        instance.report_runless_asset_event(event)
    return len(events)


# The check each planned asset carries: what `llm-assets stale` plans of it, so the catalog's asset list marks the
# assets that have stale or missing partitions (the partition list alone shows only what Dagster itself knows).
NOT_STALE = "not_stale"
STALE_SHOWN = 50  # partitions listed with their cause in the check's metadata; `partitions_stale` counts them all


def checked_assets(specs: Sequence[StageSpec]) -> list[str]:
    """The assets the planner plans and that carry the `not_stale` check (an observed source is not built)."""
    return [s.name for s in specs]


def stale_check(asset: str, planned: Sequence[tuple[str, str, str]]) -> dg.AssetCheckEvaluation:
    """The `not_stale` check of an asset, from a plan's (asset, partition, cause): failed (a warning: nothing is
    wrong with what is committed) with the asset's planned partitions and their causes, or passed."""
    mine = [(partition, cause) for a, partition, cause in planned if a == asset]
    causes = Counter(cause.split(" (")[0] for _, cause in mine)
    rows = "\n".join(f"| {partition or '(unpartitioned)'} | {cause} |" for partition, cause in mine[:STALE_SHOWN])
    summary = ", ".join(f"{cause} ×{n}" for cause, n in causes.most_common())
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(asset), check_name=NOT_STALE, passed=not mine, severity=dg.AssetCheckSeverity.WARN,
        description=f"{len(mine)} partitions stale or missing: {summary}" if mine else "nothing stale or missing",
        metadata={"partitions_stale": len(mine), "causes": dg.MetadataValue.json(dict(causes.most_common())),
                  "stale_partitions": dg.MetadataValue.md(
                      "| partition | why it is planned |\n|---|---|\n" + rows if rows else "none"),
                  "rebuild": "llm-assets backfill --stale (or turn on stale_sensor)",
                  # what a build run carries forward (`carried_forward`)
                  PLANNED_KEY: dg.MetadataValue.json([[p, c] for p, c in mine[:PLANNED_KEPT]])})


PLANNED_KEY = "planned"
PLANNED_KEPT = 5000


def carried_forward(instance: dg.DagsterInstance, asset: str, run: dg.DagsterRun) -> dg.AssetCheckEvaluation:
    """The `not_stale` check in a run that builds the asset (a backfill runs every check of the assets it builds):
    the last plan's partitions of the asset but those this run built, not a new plan of the whole lake per run."""
    record = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(asset), NOT_STALE))
    event = record.event.dagster_event if record and record.event else None
    evaluation = event.event_specific_data if event else None
    last = evaluation.metadata.get(PLANNED_KEY) if isinstance(evaluation, dg.AssetCheckEvaluation) else None
    planned: list = last.value if last is not None and isinstance(last.value, list) else []
    partitioned = bool(run.tags.get(PARTITION_TAG) or RANGE_START in run.tags)
    crawls = instance.get_dynamic_partitions(CRAWL_PARTITIONS)
    return stale_check(asset, [(asset, p, c) for p, c in planned
                               if not (covers(run.tags, p, crawls) if partitioned else not p)])


def report_stale_checks(instance: dg.DagsterInstance, planned: Sequence[tuple[str, str, str]],
                        specs: Sequence[StageSpec]) -> None:
    """Report every planned asset's `not_stale` check from a plan's (asset, partition, cause) to the instance."""
    for asset in checked_assets(specs):
        instance.report_runless_asset_event(stale_check(asset, planned))
