"""What every stage asset does once its work units have run: report and check the partition.

Metadata on each materialization: rows in/out, dropped by reason (table and chart), bytes, seconds, docs/s,
peak RSS, errors naming their files. Checks: row accounting (in = out + dropped) and the output schema; a gated
stage's quality gate holds a partition back from downstream when it departs from its crawl's distribution.
"""

from __future__ import annotations

import functools
import inspect
import time
import warnings
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from llm_assets.core.gates import GateResult
from llm_assets.core.inventory import shards_with_files
from llm_assets.core.lake import Lake
from llm_assets.core.partition import (
    HeldBack,
    LakeInput,
    MissingPartition,
    PartitionOutput,
    RangeOutput,
    data_version,
    read_manifest,
    reusable_units,
)
from llm_assets.core.units import Progress, Runner, RunnerSettings, UnitFailed, UnitResult, WorkUnit, run_units
from llm_assets.core.versions import digest
from llm_assets.dagster_private import CODE_VERSION_TAG, DATA_VERSION_TAG
from llm_assets.instance import FAN_IN_POOL
from llm_assets.metadata import partition_funnel, partition_funnel_chart, units_table
from llm_assets.partitions import crawl_partitions, crawl_shard_partitions
from llm_assets.registry import StageSpec
from llm_assets.settings import Settings
from resources.io_manager import ALLOW_MISSING_PARTITIONS, crawl_shard

# Partition data versions are what the stale planner compares; the parameter is stable in practice.
warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*data_version.*")
warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*MultiToSingleDimensionPartitionMapping.*")
warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*backfill_policy.*")
BY_CRAWL = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="crawl")


# A partition whose units failed on the store for longer than its retry budget (`store.retry_budget_s`) is tried
# once more by Dagster (a step retry, in the same run) after this pause, then the run fails. Step failures are not
# retried as runs (dagster.yaml: run_retries), so that bad input and bugs fail once.
STORE_STEP_RETRIES = 1
STORE_STEP_RETRY_WAIT_S = 60

ROW_ACCOUNTING = "row_accounting"
SCHEMA = "schema"
QUALITY_GATE = "quality_gate"


def stage_check_specs(asset: str, row_accounting: bool = True, gated: bool = False) -> list[dg.AssetCheckSpec]:
    specs = [dg.AssetCheckSpec(SCHEMA, asset=asset, description="every part has the stage's columns", blocking=True)]
    if row_accounting:
        specs.insert(0, dg.AssetCheckSpec(ROW_ACCOUNTING, asset=asset, blocking=True,
                                          description="rows in = rows out + rows dropped, per unit"))
    if gated:
        specs.append(dg.AssetCheckSpec(
            QUALITY_GATE, asset=asset, blocking=True,
            description="each block's drop rate and the language mix stay within the `gates:` bounds of the other "
                        "partitions of the crawl; a partition outside them is held back from downstream"))
    return specs


def observed_source(spec: StageSpec, settings: Settings) -> dg.AssetSpec:
    """The observed source of a stage's spec: a crawl × shard external asset whose per-partition versions the stale
    planner and `raw_drop_sensor` report (`llm_assets.stale.source_versions`,
    `llm_assets.backfills.new_observations`)."""
    assert spec.observed is not None
    return dg.AssetSpec(spec.observed.name, description=spec.observed.description, group_name=spec.group,
                        partitions_def=crawl_shard_partitions(settings),
                        deps=[dg.AssetKey(d) for d in spec.observed.deps],
                        kinds={"s3"})


# What an asset function receives besides its inputs: Dagster's context, the run's config, the store resource.
NOT_INPUTS = frozenset({"context", "config", "store"})


def _check_inputs(spec: StageSpec, fn: Callable) -> None:
    """The asset function takes exactly its spec's inputs: the edges are the spec's, the parameters only name them."""
    params = [p for p in inspect.signature(fn).parameters if p not in NOT_INPUTS]
    if sorted(params) != sorted(spec.inputs):
        raise TypeError(f"stage {spec.name}: the asset function {fn.__name__} takes {params}, its spec's inputs are "
                        f"{list(spec.inputs)}; declare inputs in the StageSpec and take each as a parameter")


def stage_asset(spec: StageSpec, settings: Settings, specs: Sequence[StageSpec], row_accounting: bool = True,
                gated: bool = False, **kwargs):
    """A lake stage: a crawl × shard asset committed by the lake IO manager, with the stage checks, named, grouped,
    versioned and wired by its spec under these settings (its inputs from `spec.inputs`: a crawl-level input maps
    to the partition's crawl), depending on its observed source if it has one. `row_accounting=False` for stages
    whose rows are not their inputs' (one page gives many image pairs); `gated` adds the quality gate
    (`run_stage(gate=...)`)."""
    levels = {s.name: s.level for s in specs}
    ins = {name: dg.AssetIn(partition_mapping=BY_CRAWL if levels[name] == "crawl" else None) for name in spec.inputs}
    deps = [*kwargs.pop("deps", []), *([dg.AssetKey(spec.observed.name)] if spec.observed else [])]

    def decorate(fn):
        _check_inputs(spec, fn)
        return dg.asset(
            name=spec.name,
            partitions_def=crawl_shard_partitions(settings),
            backfill_policy=runs_of_many_partitions(settings),
            code_version=spec.version(settings),
            io_manager_key="lake_io_manager",
            check_specs=stage_check_specs(spec.name, row_accounting, gated),
            group_name=spec.group,
            kinds={"s3", "parquet"},
            ins=ins,
            deps=deps or None,
            **kwargs,
        )(each_partition(fn))

    return decorate


def runs_of_many_partitions(settings: Settings) -> dg.BackfillPolicy:
    """Backfills build up to `partitions_per_run` partitions of an asset per run (`build_partitions`)."""
    return dg.BackfillPolicy.multi_run(settings.partitions_per_run)


def each_partition(fn: Callable) -> Callable:
    """The asset function of a stage whose function builds one partition: a run of many partitions calls it for each
    (`build_partitions`). Dagster reads the inputs, config and resources from fn's signature."""

    @functools.wraps(fn)
    def build(context: dg.AssetExecutionContext, **inputs):
        yield from build_partitions(context, fn, inputs)

    return build


class PartitionContext:
    """What a stage's function reads of Dagster's context while it builds one partition of its run: the partition's
    key, the log, the asset, the instance, the run. A run may build many partitions (`settings.partitions_per_run`),
    each as a run of that partition alone would, their units run together (`build_partitions`)."""

    def __init__(self, context: dg.AssetExecutionContext, partition_key: str):
        self.partition_key = partition_key
        self.log, self.asset_key, self.instance = context.log, context.asset_key, context.instance
        self.run = context.run


class PartitionsFailed(RuntimeError):
    """Partitions of a multi-partition run failed; the others were committed."""


@dataclass
class UnitsToRun:
    """What a partition's stage function asks its step to run (`run_stage` yields it and is sent the results, in
    order): the units it does not reuse, the function that runs each, and the runner."""

    fn: Callable
    units: Sequence[WorkUnit]
    runner: Runner


class _Partition:
    """One partition's stage function as its step drives it: the events it yielded so far, and the units it waits
    for."""

    def __init__(self, key: str, events: Generator[Any, Any, None] | dg.Output):
        self.key, self.events = key, [] if not isinstance(events, dg.Output) else [events]
        self.gen = events if not isinstance(events, dg.Output) else None
        self.waiting: UnitsToRun | None = None

    def advance(self, sent: list[UnitResult] | None = None, error: BaseException | None = None) -> None:
        """Run the function on to its next request for units, or to its end."""
        self.waiting = None
        while self.gen is not None:
            try:
                item = self.gen.throw(error) if error is not None else self.gen.send(sent)
            except StopIteration:
                self.gen = None
                return
            sent = error = None
            if isinstance(item, UnitsToRun):
                self.waiting = item
                return
            self.events.append(item)


def build_partitions(context: dg.AssetExecutionContext, fn: Callable, inputs: dict
                     ) -> Iterator[dg.Output | dg.AssetCheckResult | dg.AssetMaterialization]:
    """Build each partition of the run with the stage's function, as a run of that partition alone would: its own
    units, manifest, ledger rows, metadata (Dagster's per-partition metadata), checks and gate.

    A partition whose input is held back by a quality gate keeps what it was built from. One that fails does not
    stop the others: they are committed (and recorded as materialized), then the step fails naming the ones that
    failed, which alone the planner plans again. Dagster gives a run of many partitions one data version, one
    result per check and one retry: the data version is the digest of the partitions' own (each is in its
    metadata as `partition_data_version`), a check passes when it passes for every partition (its metadata names
    those it failed for), and a store failure retries the whole step, whose committed partitions reuse their
    units."""
    keys = list(context.partition_keys)
    started: list[_Partition] = []
    kept: dict[str, str] = {}
    failed: dict[str, Exception] = {}
    for key in keys:
        crawl, shard = crawl_shard(key)
        try:
            mine = {n: v.of_partition(crawl, shard) if isinstance(v, LakeInput) else v for n, v in inputs.items()}
        except HeldBack as e:
            kept[key] = str(e)
            continue
        except MissingPartition as e:
            failed[key] = e
            continue
        try:  # a function that returns its output (no units to run together) builds it here
            started.append(_Partition(key, fn(context if context.has_partition_key else
                                              PartitionContext(context, key), **mine)))
        except Exception as e:  # noqa: BLE001 - named below, and the step fails with it
            failed[key] = e
    built: dict[str, list] = {}
    for partition in _run_together(context, started, failed):
        built[partition.key] = partition.events
    if len(keys) > 1:
        for key, error in failed.items():
            context.log.error(f"partition {key} failed: {type(error).__name__}: {error}")
    if len(keys) == 1 and not kept:  # one partition: its events as they are
        if failed:
            raise failed[keys[0]]
        yield from built[keys[0]]
        return
    outputs = {key: next(e for e in events if isinstance(e, dg.Output)) for key, events in built.items()}
    if failed:
        yield from _commit_and_record(context, outputs)
        first = next(iter(failed.values()))
        if all(isinstance(e, dg.RetryRequested) for e in failed.values()) or (
                len(failed) == len(keys) and len({f"{type(e).__name__}: {e}" for e in failed.values()}) == 1):
            raise first  # the store's retry, or one error for every partition: that error is the step's
        raise PartitionsFailed(
            f"{len(failed)} of {len(keys)} partitions failed: " + "; ".join(
                f"{key}: {type(e).__name__}: {e}" for key, e in failed.items())
            + (f". The other {len(outputs)} are committed" if outputs else "")) from first
    io = context.resources.lake_io_manager
    for key, output in outputs.items():
        context.add_asset_metadata({**output.metadata, "lake_manifest": dg.MetadataValue.text(
            io.manifest_url(context.asset_key.path[-1], *crawl_shard(key))),
            "partition_data_version": output.data_version.value if output.data_version else ""}, partition_key=key)
    for key, reason in kept.items():
        context.add_asset_metadata({"kept": reason}, partition_key=key)
    versions = sorted(o.data_version.value for o in outputs.values() if o.data_version)
    yield dg.Output(RangeOutput({crawl_shard(k): o.value for k, o in outputs.items()} | {crawl_shard(k): None
                                                                                         for k in kept}),
                    metadata={"partitions_in_run": len(keys)},
                    data_version=dg.DataVersion(versions[0] if len(versions) == 1 else digest(*versions)))
    yield from _combined_checks({key: [e for e in events if isinstance(e, dg.AssetCheckResult)]
                                 for key, events in built.items()})


def run_alone(context: dg.AssetExecutionContext, events: Generator[Any, Any, None]) -> Iterator:
    """The events of one partition's stage function (`run_stage`) driven outside a stage asset (an asset of its own,
    unpartitioned or not): its units run, its errors raised."""
    partition, failed = _Partition("", events), dict[str, Exception]()
    _run_together(context, [partition], failed)
    if failed:
        raise failed[""]
    yield from partition.events


def _run_together(context: dg.AssetExecutionContext, partitions: list[_Partition], failed: dict[str, Exception]
                  ) -> list[_Partition]:
    """Drive each partition's stage function, running the units they all wait for at once (a run of many
    partitions keeps the runner as busy as their separate runs would), until each has ended; -> those that ended
    well, the errors of the others in `failed`. When a unit fails among many partitions' units, each partition's
    units run again on their own, so that only the partition whose unit fails is failed."""

    def step(partition: _Partition, sent: list[UnitResult] | None = None, error: BaseException | None = None):
        try:
            partition.advance(sent, error)
        except Exception as e:  # noqa: BLE001 - the partition fails with it, named by the caller
            failed[partition.key] = e

    for partition in partitions:
        step(partition)
    while waiting := [p for p in partitions if p.waiting is not None and p.key not in failed]:
        first = waiting[0].waiting
        assert first is not None
        together = [u for p in waiting for u in p.waiting.units]  # type: ignore[union-attr]
        try:
            results = run_units(first.fn, together, first.runner, Progress(len(together), context.log.info))
        except UnitFailed as e:
            if len(waiting) == 1:
                step(waiting[0], error=e)
                continue
            context.log.warning(f"{e}: running each partition's units on their own, to fail only its partition")
            for p in waiting:
                try:
                    mine = run_units(first.fn, p.waiting.units, first.runner)  # type: ignore[union-attr]
                except UnitFailed as own:
                    step(p, error=own)
                else:
                    step(p, sent=mine)
            continue
        offset = 0
        for p in waiting:
            n = len(p.waiting.units)  # type: ignore[union-attr]
            step(p, sent=results[offset:offset + n])
            offset += n
    return [p for p in partitions if p.key not in failed]


def _combined_checks(results: dict[str, list[dg.AssetCheckResult]]) -> Iterator[dg.AssetCheckResult]:
    """One result per check for a run of many partitions: passed when it passed for every partition. A failed
    quality gate is a warning there, not a block: downstream steps keep the held-back partitions and build the
    others."""
    by_check: dict[str, dict[str, dg.AssetCheckResult]] = {}
    for key, checks in results.items():
        for check in checks:
            by_check.setdefault(check.check_name or "", {})[key] = check
    for name, of_check in by_check.items():
        failing = sorted(key for key, c in of_check.items() if not c.passed)
        yield dg.AssetCheckResult(
            check_name=name, passed=not failing,
            severity=dg.AssetCheckSeverity.WARN if name == QUALITY_GATE else dg.AssetCheckSeverity.ERROR,
            metadata={"partitions": len(of_check), "failed_partitions": dg.MetadataValue.json(failing),
                      **({"first_failure": dg.MetadataValue.json({k: str(v.value) for k, v in
                                                                  (of_check[failing[0]].metadata or {}).items()})}
                         if failing else {})})


def _commit_and_record(context: dg.AssetExecutionContext, outputs: dict[str, dg.Output]
                       ) -> Iterator[dg.AssetMaterialization]:
    """Commit the partitions that were built and record each as materialized, with its own metadata and data
    version: the step is about to fail for the others, and Dagster commits nothing of a failed step."""
    io = context.resources.lake_io_manager
    code_version = context.assets_def.code_versions_by_key[context.asset_key] or ""
    for key, output in outputs.items():
        io.commit(context.asset_key.path[-1], *crawl_shard(key), output.value)
        version = output.data_version.value if output.data_version else ""
        yield dg.AssetMaterialization(
            asset_key=context.asset_key, partition=key, metadata={**output.metadata, "partition_data_version": version},
            tags={DATA_VERSION_TAG: version, CODE_VERSION_TAG: code_version})


def crawl_asset(spec: StageSpec, settings: Settings, kinds: set[str]):
    """A crawl-level stage: one partition per crawl, reading every committed shard of the crawl of each input its
    spec names (a shard without files has none), committed by the lake IO manager."""
    ins = {name: dg.AssetIn(partition_mapping=BY_CRAWL, metadata={ALLOW_MISSING_PARTITIONS: True})
           for name in spec.inputs}
    # In the `fan_in` concurrency pool: these stages hold the most memory per unit and move the most lake bytes, and
    # two at once would compete for both.
    asset = dg.asset(name=spec.name, partitions_def=crawl_partitions, ins=ins, io_manager_key="lake_io_manager",
                     group_name=spec.group, kinds=kinds, code_version=spec.version(settings), pool=FAN_IN_POOL,
                     backfill_policy=runs_of_many_partitions(settings))

    def decorate(fn):
        _check_inputs(spec, fn)
        return asset(each_partition(fn))

    return decorate


def require_every_shard(spec: StageSpec, crawl: str, settings: Settings, read: LakeInput,
                        specs: Sequence[StageSpec]) -> None:
    """A crawl-level stage is built over every shard of its crawl, or not at all: a shard that has raw files but
    no committed partition of the input `read` (its run failed, or never ran) fails the stage before anything is
    committed, naming those shards. A shard without raw files has nothing to build (one the sensor built empty is
    committed, so present), and one a quality gate holds back, on this input or upstream, keeps what downstream
    was built from: neither is missing."""
    present = {m.shard for m in read.manifests if m.crawl == crawl}
    missing = [s for s in sorted(shards_with_files(read.lake, crawl, settings.shards) - present)
               if not _held_back(read.lake, read.asset, crawl, s, specs)]
    if missing:
        raise MissingPartition(
            f"{spec.name} {crawl}: {read.asset} has no committed partition for shard{'s' * (len(missing) > 1)} "
            f"{', '.join(missing)} of crawl {crawl}, which {'have' if len(missing) > 1 else 'has'} raw files; "
            f"{spec.name} reads every shard, so nothing is committed until each is built (`llm-assets stale` lists "
            "them, `llm-assets backfill --stale` builds them)")


def _held_back(lake: Lake, asset: str, crawl: str, shard: str, registry: Sequence[StageSpec]) -> bool:
    specs = {s.name: s for s in registry}
    chain, seen = [asset], set()
    while chain:
        name = chain.pop()
        if name in seen or specs[name].level != "shard":
            continue
        seen.add(name)
        if (m := read_manifest(lake, name, crawl, shard)) is not None and m.held_back:
            return True
        chain += specs[name].inputs
    return False


def partition_of(context: dg.AssetExecutionContext) -> tuple[str, str]:
    return crawl_shard(context.partition_key)


def _reusable_units(context: dg.AssetExecutionContext, units: Sequence[WorkUnit]) -> dict[str, UnitResult]:
    """Units of the committed manifest this run would redo identically, whose parts are still in the store."""
    wanted = {u.unit for u in units if u.unit}
    if not wanted:
        return {}
    crawl, shard = partition_of(context)
    return reusable_units(Lake(units[0].store), context.asset_key.path[-1], crawl, shard, wanted)


def run_stage(
    context: dg.AssetExecutionContext,
    fn: Callable,
    units: Sequence[WorkUnit],
    code_version: str,
    columns: Sequence[str],
    runner_settings: RunnerSettings,
    metadata: dict | None = None,
    row_accounting: bool = True,
    report: Callable[[PartitionOutput], dict] | None = None,
    inputs: dict[str, str] | None = None,
    gate: Callable[[PartitionOutput], GateResult] | None = None,
    outcome_inputs: Callable[[PartitionOutput], dict[str, str]] | None = None,
) -> Generator[dg.Output | dg.AssetCheckResult | UnitsToRun, list[UnitResult], None]:
    """Run the partition's work units, then emit the output (committed by the lake IO manager), its
    metadata and its checks. `report(output)` adds a stage's own metadata to the common one; `inputs` records
    what else the partition was built from (for the stale planner), and `outcome_inputs(output)` what only its
    units' outcome tells (filtered: the thresholds of the languages it held); `gate(output)` judges the partition
    against its crawl, and one that fails is committed held back (the check fails, downstream steps of the run
    skip)."""
    start = time.perf_counter()
    reused = _reusable_units(context, units)
    todo = [u for u in units if u.unit not in reused]
    # Imported here, like the runner itself is made when the partition runs: the Dask runner's local cluster module
    # brings boto3 and cryptography, which building the definitions (every run worker) need not import.
    from llm_assets.runners import runner_for

    # when the partition runs: a cluster need not be up for the definitions to load
    runner = runner_for(runner_settings)
    context.log.info(f"{len(todo)} work units on {runner} ({len(reused)} reused from the last commit)")
    try:  # the step runs them, with those of the other partitions of its run (`build_partitions`)
        fresh = iter((yield UnitsToRun(fn, todo, runner)))
    except UnitFailed as e:
        if e.transient:  # the store kept failing for its whole retry budget: once more, after a pause
            raise dg.RetryRequested(max_retries=STORE_STEP_RETRIES, seconds_to_wait=STORE_STEP_RETRY_WAIT_S) from e
        raise
    results = [reused[u.unit] if u.unit in reused else next(fresh) for u in units]
    seconds = time.perf_counter() - start
    out = PartitionOutput(
        units=results,
        code_version=code_version,
        data_version=data_version(results),
        inputs=inputs or {},
        runner=str(runner),
        reused=frozenset(reused),
    )
    ran = [r for r in results if r.unit not in reused]
    if outcome_inputs is not None:
        out.inputs |= outcome_inputs(out)
    for error in out.errors():
        context.log.error(error)
    dropped = out.dropped()
    metadata = {
        **(metadata or {}),
        "dagster/row_count": out.rows_out,
        "rows_in": out.rows_in,
        "rows_out": out.rows_out,
        "rows_dropped": sum(dropped.values()),
        "dropped_by_reason": dg.MetadataValue.json(dropped),
        "funnel": dg.MetadataValue.md(partition_funnel(out)),
        "funnel_chart": partition_funnel_chart(context.asset_key.path[-1], out),
        "units": units_table(results),
        "bytes_in": sum(u.bytes_in for u in results),
        "bytes_out": sum(u.bytes_out for u in results),
        "seconds": round(seconds, 3),
        # what the units that ran cost, as the cost ledger records them (reused units were charged before)
        "cpu_seconds": round(sum(r.cpu_seconds for r in ran), 3),
        "requests": sum(r.requests for r in ran),
        # rates, not sizes, are what Dagster's plots compare across partitions: over the units this run did
        "keep_rate": round(out.rows_out / out.rows_in, 4) if out.rows_in else 1.0,
        **({"docs_per_s": round(read / seconds, 1)} if (read := sum(r.rows_in for r in ran)) and seconds > 0 else {}),
        "peak_rss_mib": round(max((u.peak_rss_bytes for u in results), default=0) / 2**20, 1),
        "errors": len(out.errors()),
        "reused_units": len(reused),
        "runner": str(runner),
    }
    if rejected := [u.rejected_part for u in results if u.rejected_part and u.rows_in != u.rows_out]:
        # where the audit trail of this partition's drops is: `llm-assets show rejected` reads it
        metadata["rejected_parts"] = dg.MetadataValue.md("\n".join(f"- `{key}`" for key in rejected))
    if report is not None:
        metadata.update(report(out))
    if out.errors():
        metadata["error_messages"] = dg.MetadataValue.md("\n".join(f"- {e}" for e in out.errors()))
    judged = gate(out) if gate is not None else None
    if judged is not None:
        out.held_back = judged.held_back()
        metadata["quality_gate"] = "held back" if out.held_back else "passed"
        if out.held_back:
            context.log.error(f"held back by the quality gate: {out.held_back}")
    kept = _kept_version(context) if out.held_back else None
    yield dg.Output(out, metadata=metadata, data_version=dg.DataVersion(kept or out.data_version))

    if row_accounting:
        unbalanced = [u.source for u in results if u.rows_in != u.rows_out + sum(u.dropped.values())]
        yield dg.AssetCheckResult(
            check_name=ROW_ACCOUNTING,
            passed=not unbalanced,
            metadata={"rows_in": out.rows_in, "rows_out": out.rows_out, "rows_dropped": sum(dropped.values()),
                      "unbalanced_units": dg.MetadataValue.json(unbalanced)},
        )
    if judged is not None:
        yield dg.AssetCheckResult(check_name=QUALITY_GATE, passed=judged.passed, metadata=gate_metadata(judged))
    bad_schema = [u.source for u in results if u.part and list(u.columns) != list(columns)]
    yield dg.AssetCheckResult(
        check_name=SCHEMA,
        passed=not bad_schema,
        metadata={"columns": dg.MetadataValue.json(list(columns)),
                  "mismatched_units": dg.MetadataValue.json(bad_schema)},
    )


def _kept_version(context: dg.AssetExecutionContext) -> str | None:
    """The data version Dagster holds for this partition, which a held-back build reports again: downstream keeps
    what it was built from, so the UI marks nothing downstream stale, as the planner plans nothing for its sake
    (None: never built, nothing downstream to keep)."""
    records = context.instance.fetch_materializations(dg.AssetRecordsFilter(
        asset_key=context.asset_key, asset_partitions=[context.partition_key]), limit=1).records
    event = records[0].asset_materialization if records else None
    return event.tags.get(DATA_VERSION_TAG) if event is not None and event.tags else None


def gate_metadata(judged: GateResult) -> dict:
    rows = "\n".join(f"| {f.measure} | {f.value:.3f} | {f.reference:.3f} | {f.shift:.3f} | {f.bound:g} | "
                     f"{'**held back**' if f.failed else 'ok'} |" for f in judged.findings)
    table = ("| measure | this partition | crawl reference | shift | bound | |\n|---|--:|--:|--:|--:|---|\n" + rows
             if rows else "")
    return {"judged": judged.judged, "note": judged.note, "held_back": judged.held_back() or "no",
            "findings": dg.MetadataValue.md(table or judged.note)}
