"""A tiny, store-free code location for test_run_monitoring: jobs partitioned like the lake (crawl × shard).

`blocking_job`'s only op records the pid of the run worker it runs in, then blocks until the test writes a release
file, so the test decides when a run may end and can kill the worker while it runs. `pool_job` does the same with
its waiting done by work units on the project's process pool, `fan_in_job` with its op in the `fan_in` concurrency
pool; `bad_input_job` fails its op as bad input would.
The files live in RUN_MONITORING_DIR.
"""

import os
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from llm_assets.core.units import PoolRunner, UnitResult

partitions = dg.MultiPartitionsDefinition({
    "crawl": dg.StaticPartitionsDefinition(["crawl-a"]),
    "shard": dg.StaticPartitionsDefinition(["0", "1", "2"]),
})


def pid_file(folder: Path, run_id: str) -> Path:
    return folder / f"{run_id}.pid"


def release_file(folder: Path, run_id: str) -> Path:
    return folder / f"{run_id}.release"


def _wait(release: Path) -> None:
    deadline = time.monotonic() + 300  # never outlive a broken test
    while not release.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("no release file")
        time.sleep(0.2)


def _record_pid_and_wait(run_id: str) -> None:
    folder = Path(os.environ["RUN_MONITORING_DIR"])
    pid_file(folder, run_id).write_text(str(os.getpid()))
    _wait(release_file(folder, run_id))


@dg.op
def wait_for_release(context: dg.OpExecutionContext) -> None:
    _record_pid_and_wait(context.run_id)


@dataclass(frozen=True)
class WaitingUnit:
    source: str
    release: str


def running_units(folder: Path, run_id: str) -> list[Path]:
    """The files the pool's workers write as each starts a unit."""
    return list(folder.glob(f"{run_id}.unit-*"))


def wait_in_unit(unit: WaitingUnit) -> UnitResult:
    Path(f"{unit.release.removesuffix('.release')}.unit-{os.getpid()}").touch()
    _wait(Path(unit.release))
    return UnitResult(unit="", source=unit.source)


@dg.op
def wait_in_pool(context: dg.OpExecutionContext) -> None:
    folder = Path(os.environ["RUN_MONITORING_DIR"])
    pid_file(folder, context.run_id).write_text(str(os.getpid()))
    release = str(release_file(folder, context.run_id))
    PoolRunner(workers=2).run(wait_in_unit, [WaitingUnit(source=f"unit {i}", release=release) for i in range(4)])


@dg.op(pool="fan_in")  # the pool of the project's crawl-level stages
def wait_for_release_in_pool(context: dg.OpExecutionContext) -> None:
    _record_pid_and_wait(context.run_id)


@dg.op
def read_bad_input() -> None:
    raise ValueError("line 3 of takedowns/requests.jsonl is not JSON")  # what a step failing on its input raises


@dg.job(partitions_def=partitions, executor_def=dg.in_process_executor)
def blocking_job():
    wait_for_release()


@dg.job(partitions_def=partitions, executor_def=dg.in_process_executor)
def pool_job():
    wait_in_pool()


@dg.job(partitions_def=partitions, executor_def=dg.in_process_executor)
def fan_in_job():
    wait_for_release_in_pool()


@dg.job(partitions_def=partitions, executor_def=dg.in_process_executor)
def bad_input_job():
    read_bad_input()


defs = dg.Definitions(jobs=[blocking_job, pool_job, fan_in_job, bad_input_job])
