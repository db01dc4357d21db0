"""A tiny, store-free code location for test_run_monitoring: one job partitioned like the lake (crawl × shard).

Its only op records the pid of the run worker it runs in, then blocks until the test writes a release file, so the
test decides when a run may end and can kill the worker while it runs. Both files live in RUN_MONITORING_DIR.
"""

import os
import time
from pathlib import Path

import dagster as dg

partitions = dg.MultiPartitionsDefinition({
    "crawl": dg.StaticPartitionsDefinition(["crawl-a"]),
    "shard": dg.StaticPartitionsDefinition(["0", "1"]),
})


def pid_file(folder: Path, run_id: str) -> Path:
    return folder / f"{run_id}.pid"


def release_file(folder: Path, run_id: str) -> Path:
    return folder / f"{run_id}.release"


@dg.op
def wait_for_release(context: dg.OpExecutionContext) -> None:
    folder = Path(os.environ["RUN_MONITORING_DIR"])
    pid_file(folder, context.run_id).write_text(str(os.getpid()))
    deadline = time.monotonic() + 300  # never outlive a broken test
    while not release_file(folder, context.run_id).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("no release file")
        time.sleep(0.2)


@dg.job(partitions_def=partitions, executor_def=dg.in_process_executor)
def blocking_job():
    wait_for_release()


defs = dg.Definitions(jobs=[blocking_job])
