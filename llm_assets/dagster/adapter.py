"""The Dagster adapter: the only maker of the stages' assets (`stage_definitions`), from the stage objects of
`llm_assets.stage`, and what a stage asset does around its stage.

A shard stage's partition: its work units run (those of every partition of a run together), then metadata on
each materialization (rows in/out, dropped by reason (table and chart), bytes, seconds, docs/s, peak RSS, errors
naming their files) and checks: row accounting (in = out + dropped) and the output schema; a gated stage's quality
gate holds a partition back from downstream when it departs from its crawl's distribution.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
import warnings
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import polars as pl
import pydantic

from llm_assets.core.gates import GateResult
from llm_assets.core.keys import CRAWL_LEVEL_SHARD
from llm_assets.core.partition import (
    HeldBack,
    LakeInput,
    MissingPartition,
    PartitionOutput,
    RangeOutput,
    data_version,
    reusable_units,
)
from llm_assets.core.units import Progress, Runner, UnitFailed, UnitResult, WorkUnit, run_units
from llm_assets.core.versions import digest
from llm_assets.dagster.metadata import partition_funnel_chart, table, units_table
from llm_assets.platform.dagster_private import CODE_VERSION_TAG, DATA_VERSION_TAG
from llm_assets.platform.instance import FAN_IN_POOL
from llm_assets.platform.partitions import CRAWL_PARTITIONS as CRAWL
from llm_assets.platform.partitions import crawl_partitions, crawl_shard_partitions
from llm_assets.registry import StageSpec
from llm_assets.report import Markdown, Report, Url, partition_funnel
from llm_assets.settings import Settings
from llm_assets.stage import AssetStage, CrawlStage, Partition, ShardStage, Stage, StageFailure
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
    planner and `raw_drop_sensor` report (`llm_assets.tools.stale.source_versions`,
    `llm_assets.platform.backfills.new_observations`)."""
    assert spec.observed is not None
    return dg.AssetSpec(spec.observed.name, description=spec.observed.description, group_name=spec.group,
                        partitions_def=crawl_shard_partitions(settings),
                        deps=[dg.AssetKey(d) for d in spec.observed.deps],
                        kinds={"s3"})


def runs_of_many_partitions(settings: Settings) -> dg.BackfillPolicy:
    """Backfills build up to `partitions_per_run` partitions of an asset per run (`build_partitions`)."""
    return dg.BackfillPolicy.multi_run(settings.partitions_per_run)


class PartitionContext:
    """What a stage's function reads of Dagster's context while it builds one partition of its run: the partition's
    key, the log, the asset, the instance, the run. A run may build many partitions (`settings.partitions_per_run`),
    each as a run of that partition alone would, their units run together (`build_partitions`)."""

    def __init__(self, context: dg.AssetExecutionContext, partition_key: str):
        self.partition_key = partition_key
        self.log, self.asset_key, self.instance = context.log, context.asset_key, context.instance
        self.resources = context.resources
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


def _reusable_units(p: Partition, asset: str, units: Sequence[WorkUnit]) -> dict[str, UnitResult]:
    """Units of the committed manifest this run would redo identically, whose parts are still in the store."""
    wanted = {u.unit for u in units if u.unit}
    return reusable_units(p.lake, asset, p.crawl, p.shard, wanted) if wanted else {}


def run_stage(context: dg.AssetExecutionContext, stage: ShardStage, p: Partition, code_version: str
              ) -> Generator[dg.Output | dg.AssetCheckResult | UnitsToRun, list[UnitResult], None]:
    """Run the partition's work units, then emit the output (committed by the lake IO manager), its metadata and
    its checks. The stage's gate, when it has one, judges the partition against its crawl: one that fails is
    committed held back (the check fails, downstream steps of the run skip)."""
    start = time.perf_counter()
    units = stage.units(p)
    reused = _reusable_units(p, stage.spec.name, units)
    todo = [u for u in units if u.unit not in reused]
    # Imported here, like the runner itself is made when the partition runs: the Dask runner's local cluster module
    # brings boto3 and cryptography, which building the definitions (every run worker) need not import.
    from llm_assets.platform.runners import runner_for

    # when the partition runs: a cluster need not be up for the definitions to load
    runner = runner_for(p.settings.runner)
    context.log.info(f"{len(todo)} work units on {runner} ({len(reused)} reused from the last commit)")
    try:  # the step runs them, with those of the other partitions of its run (`build_partitions`)
        fresh = iter((yield UnitsToRun(type(stage).work, todo, runner)))
    except UnitFailed as e:
        if e.transient:  # the store kept failing for its whole retry budget: once more, after a pause
            raise dg.RetryRequested(max_retries=STORE_STEP_RETRIES, seconds_to_wait=STORE_STEP_RETRY_WAIT_S) from e
        raise
    results = [reused[u.unit] if u.unit in reused else next(fresh) for u in units]
    out = PartitionOutput(units=results, code_version=code_version, data_version=data_version(results),
                          inputs=stage.recorded_inputs(p), runner=str(runner), reused=frozenset(reused))
    out.inputs |= stage.outcome_inputs(p, out)
    for error in out.errors():
        context.log.error(error)
    metadata = {**to_dagster(stage.metadata(p)),
                **partition_report(stage.spec.name, out, time.perf_counter() - start),
                **to_dagster(stage.report(p, out))}
    if out.errors():
        metadata["error_messages"] = dg.MetadataValue.md("\n".join(f"- {e}" for e in out.errors()))
    judged = stage.gate(p, out) if stage.gated(p.settings) else None
    if judged is not None:
        out.held_back = judged.held_back()
        metadata["quality_gate"] = "held back" if out.held_back else "passed"
        if out.held_back:
            context.log.error(f"held back by the quality gate: {out.held_back}")
    kept = _kept_version(context) if out.held_back else None
    yield dg.Output(out, metadata=metadata, data_version=dg.DataVersion(kept or out.data_version))
    yield from partition_checks(out, stage.columns(p), stage.row_accounting, judged)


def partition_report(asset: str, out: PartitionOutput, seconds: float) -> dict:
    """What every shard stage reports of a partition: rows in and out, drops by reason (table and chart), bytes,
    seconds, CPU, docs/s, peak memory, errors, reused units, the runner, where the rejected rows are."""
    results, dropped = out.units, out.dropped()
    ran = [r for r in results if r.unit not in out.reused]
    metadata = {
        "dagster/row_count": out.rows_out,
        "rows_in": out.rows_in,
        "rows_out": out.rows_out,
        "rows_dropped": sum(dropped.values()),
        "dropped_by_reason": dg.MetadataValue.json(dropped),
        "funnel": dg.MetadataValue.md(partition_funnel(out)),
        "funnel_chart": partition_funnel_chart(asset, out),
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
        "reused_units": len(out.reused),
        "runner": out.runner,
    }
    if rejected := [u.rejected_part for u in results if u.rejected_part and u.rows_in != u.rows_out]:
        # where the audit trail of this partition's drops is: `llm-assets show rejected` reads it
        metadata["rejected_parts"] = dg.MetadataValue.md("\n".join(f"- `{key}`" for key in rejected))
    return metadata


def partition_checks(out: PartitionOutput, columns: Sequence[str], row_accounting: bool,
                     judged: GateResult | None) -> Iterator[dg.AssetCheckResult]:
    """Row accounting (in = out + dropped, per unit), the quality gate's verdict, and the schema of every part."""
    if row_accounting:
        unbalanced = [u.source for u in out.units if u.rows_in != u.rows_out + sum(u.dropped.values())]
        yield dg.AssetCheckResult(
            check_name=ROW_ACCOUNTING,
            passed=not unbalanced,
            metadata={"rows_in": out.rows_in, "rows_out": out.rows_out, "rows_dropped": sum(out.dropped().values()),
                      "unbalanced_units": dg.MetadataValue.json(unbalanced)},
        )
    if judged is not None:
        yield dg.AssetCheckResult(check_name=QUALITY_GATE, passed=judged.passed, metadata=gate_metadata(judged))
    bad_schema = [u.source for u in out.units if u.part and list(u.columns) != list(columns)]
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


def to_dagster(report: Report) -> dict:
    """A stage's report as Dagster metadata: Markdown and Url as such, a polars frame as a table, the rest as it is
    (Dagster shows dicts and lists as JSON)."""
    def value(v):
        if isinstance(v, Markdown):
            return dg.MetadataValue.md(str(v))
        if isinstance(v, Url):
            return dg.MetadataValue.text(str(v))
        if isinstance(v, pl.DataFrame):
            return table(v)
        if isinstance(v, dict | list):
            return dg.MetadataValue.json(v)
        return v

    return {k: value(v) for k, v in report.items()}


def _partition(context, settings: Settings, specs: Sequence[StageSpec], inputs: dict, options=None,
               crawl: str = "", shard: str = "") -> Partition:
    return Partition(crawl=crawl, shard=shard, settings=settings, lake=context.resources.store.lake(), specs=specs,
                     log=context.log, registered_crawls=lambda: context.instance.get_dynamic_partitions(CRAWL),
                     run_id=context.run.run_id, inputs=inputs, options=options)


@contextlib.contextmanager
def _failing_as_dagster():
    """A stage's `StageFailure` fails the step with its message alone, as Dagster's `Failure`."""
    try:
        yield
    except StageFailure as e:
        raise dg.Failure(str(e)) from e


def _function(name: str, inputs: Sequence[str], config: type | None, body: Callable) -> Callable:
    """An asset function taking the context, the run's config if the stage has options, and exactly its inputs by
    name, as Dagster reads a signature."""
    params = [inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=dg.AssetExecutionContext)]
    if config is not None:
        params.append(inspect.Parameter("config", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=config))
    params += [inspect.Parameter(i, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=LakeInput) for i in inputs]

    def asset_function(context, **kwargs):
        return body(context, **kwargs)

    asset_function.__name__ = asset_function.__qualname__ = name
    asset_function.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    asset_function.__annotations__ = {p.name: p.annotation for p in params}
    return asset_function


def _config_class(stage: ShardStage) -> type | None:
    """The stage's options as Dagster run config."""
    if stage.Options is None:
        return None
    fields: dict[str, Any] = {n: (f.annotation, f) for n, f in stage.Options.model_fields.items()}
    return pydantic.create_model(f"{type(stage).__name__}Config", __base__=dg.Config, __doc__=stage.Options.__doc__,
                                 **fields)


def _dep(name: str, level: str, levels: Mapping[str, str]) -> dg.AssetDep:
    """A dependency on another asset of the graph, mapped by the two levels: a crawl's partition depends on the
    shards of its crawl, an unpartitioned asset on every partition."""
    upstream = levels.get(name, "model")
    if upstream in ("model", "release"):
        return dg.AssetDep(name)
    if level in ("model", "release"):
        return dg.AssetDep(name, partition_mapping=dg.AllPartitionMapping())
    return dg.AssetDep(name, partition_mapping=BY_CRAWL if "shard" in (level, upstream) and level != upstream
                       else None)


def _common(stage: Stage, settings: Settings, specs: Sequence[StageSpec]) -> dict:
    """What every stage's asset declares: name, group, kinds, code version, lineage, the catalog's description."""
    levels = {s.name: s.level for s in specs}
    spec = stage.spec
    deps = [_dep(d, spec.level, levels) for d in stage.deps(settings, specs)]
    deps += [dg.AssetDep(spec.observed.name)] if spec.observed else []
    return dict(name=spec.name, group_name=spec.group, kinds=set(stage.kinds), code_version=spec.version(settings),
                description=inspect.cleandoc(type(stage).__doc__ or ""), deps=deps or None,
                metadata=to_dagster(stage.definition_metadata(settings)) or None)


def shard_asset(stage: ShardStage, settings: Settings, specs: Sequence[StageSpec]) -> dg.AssetsDefinition:
    """A crawl × shard asset committed by the lake IO manager, with the stage checks; a crawl-level input maps to
    the partition's crawl."""
    spec, code = stage.spec, stage.spec.version(settings)
    levels = {s.name: s.level for s in specs}

    def one(context, options=None, **inputs):  # one partition, as `build_partitions` calls it
        crawl, shard = crawl_shard(context.partition_key)
        p = _partition(context, settings, specs, inputs, options, crawl, shard)
        yield from run_stage(context, stage, p, code)

    def body(context, config=None, **inputs):
        yield from build_partitions(context, functools.partial(one, options=config), inputs)

    return dg.asset(
        partitions_def=crawl_shard_partitions(settings),
        backfill_policy=runs_of_many_partitions(settings),
        io_manager_key="lake_io_manager",
        required_resource_keys={"store"},
        check_specs=stage_check_specs(spec.name, stage.row_accounting, stage.gated(settings)),
        ins={n: dg.AssetIn(partition_mapping=BY_CRAWL if levels[n] == "crawl" else None) for n in spec.inputs},
        **_common(stage, settings, specs),
    )(_function(spec.name, spec.inputs, _config_class(stage), body))


def crawl_asset(stage: CrawlStage, settings: Settings, specs: Sequence[StageSpec]) -> dg.AssetsDefinition:
    """One partition per crawl, reading every committed shard of the crawl of each input (a shard without files
    has none), committed by the lake IO manager."""
    spec = stage.spec

    def one(context, **inputs):
        p = _partition(context, settings, specs, inputs, crawl=context.partition_key, shard=CRAWL_LEVEL_SHARD)
        with _failing_as_dagster():
            built = stage.build(p)
        return dg.Output(built.output, metadata=to_dagster(built.report),
                         data_version=dg.DataVersion(built.output.data_version))

    def body(context, **inputs):
        yield from build_partitions(context, one, inputs)

    return dg.asset(
        partitions_def=crawl_partitions,
        backfill_policy=runs_of_many_partitions(settings),
        io_manager_key="lake_io_manager",
        required_resource_keys={"store"},
        pool=FAN_IN_POOL if stage.fan_in else None,
        ins={n: dg.AssetIn(partition_mapping=BY_CRAWL, metadata={ALLOW_MISSING_PARTITIONS: True})
             for n in spec.inputs},
        **_common(stage, settings, specs),
    )(_function(spec.name, spec.inputs, None, body))


def unpartitioned_asset(stage: AssetStage, settings: Settings, specs: Sequence[StageSpec]) -> dg.AssetsDefinition:
    """One asset, built from every partition of its inputs, whatever crawl."""
    spec = stage.spec

    def body(context, **inputs) -> dg.MaterializeResult:
        with _failing_as_dagster():
            built = stage.build(_partition(context, settings, specs, inputs))
        return dg.MaterializeResult(metadata=to_dagster(built.report), data_version=dg.DataVersion(built.data_version))

    return dg.asset(
        required_resource_keys={"store"},
        pool=FAN_IN_POOL if stage.fan_in else None,
        ins={n: dg.AssetIn(partition_mapping=dg.AllPartitionMapping(), metadata={ALLOW_MISSING_PARTITIONS: True})
             for n in spec.inputs},
        **_common(stage, settings, specs),
    )(_function(spec.name, spec.inputs, None, body))


def stage_definitions(stages: Sequence[Stage], settings: Settings) -> dg.Definitions:
    """Every stage's asset, and the observed source of each stage that has one."""
    specs = [s.spec for s in stages]
    build = {ShardStage: shard_asset, CrawlStage: crawl_asset, AssetStage: unpartitioned_asset}
    assets: list = []
    for stage in stages:
        if stage.spec.observed is not None:
            assets.append(observed_source(stage.spec, settings))
        shape = next(kind for kind in build if isinstance(stage, kind))
        assets.append(build[shape](stage, settings, specs))  # type: ignore[operator]
    return dg.Definitions(assets=assets)
