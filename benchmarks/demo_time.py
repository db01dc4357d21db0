"""`make bench-demo`: how long `llm-assets demo` takes from a clean state, and how many runs it makes.

    .venv/bin/python -m benchmarks.demo_time [--rounds N]

Each round runs the demo as `make demo` does, in a state home of its own (a new object store, Dagster instance, code
server and daemon), then counts the runs its instance holds per job and the partitions they built, and stops the
store. The wall time includes starting the services; the load average is sampled while it runs (a loaded machine
makes the figure meaningless, and the report says which load it saw).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Conditions, conditions_text
from benchmarks.report import table
from benchmarks.summary import Row, publish

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- demo-time:begin -->", "<!-- demo-time:end -->"
TARGET_S = 120


def one_round(home: Path) -> tuple[float, dict[str, int], int]:
    """(wall seconds, runs per job, partitions built) of one demo in `home`."""
    env = {**os.environ, "LLM_ASSETS_HOME": str(home)}
    env.pop("DAGSTER_HOME", None)
    start = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "llm-assets"), "demo"], env=env, cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the demo failed in {home}: {done.stderr[-2000:]}")
    counted = subprocess.run([sys.executable, "-m", "benchmarks.demo_time", "--count-runs"], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    runs = {job: int(n) for job, n in zip(counted[2::2], counted[3::2], strict=True)}
    subprocess.run([str(Path(sys.executable).parent / "llm-assets"), "store", "stop"], env=env, cwd=ROOT,
                   capture_output=True, check=False)
    return wall, runs, int(counted[1])


def count_runs() -> None:
    """Print `partitions N` then `job runs` pairs for the instance of this environment's state home."""
    import dagster as dg

    from llm_assets.platform.instance import get_instance

    instance = get_instance()
    runs: dict[str, int] = {}
    partitions = 0
    for record in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS])):
        run = record.dagster_run
        runs[run.job_name] = runs.get(run.job_name, 0) + 1
        events = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        partitions += len({(e.event_log_entry.dagster_event.asset_key, e.event_log_entry.dagster_event.partition)
                           for e in events})
    print("partitions", partitions, *(f"{job} {n}" for job, n in sorted(runs.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--count-runs", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count_runs:
        count_runs()
        return
    results = []
    with Conditions() as measured:
        for _ in range(args.rounds):
            home = Path(tempfile.mkdtemp(prefix="bench-demo-"))
            try:
                results.append(one_round(home))
            finally:
                shutil.rmtree(home, ignore_errors=True)
        conditions = measured.now()
    walls = [r[0] for r in results]
    runs, partitions = results[-1][1], results[-1][2]
    median = statistics.median(walls)
    body = "\n".join([
        "## `make demo` from a clean state (`make bench-demo`)", "",
        f"{len(walls)} round(s), each in a new state home (object store, Dagster instance, code server, daemon "
        f"started and stopped); {conditions_text(conditions)}.", "",
        table(["round", "wall s"], [[str(i + 1), f"{w:.1f}"] for i, w in enumerate(walls)]), "",
        f"Runs it made ({sum(runs.values())}, building {partitions} asset partitions; a run builds up to "
        "`partitions_per_run` contiguous partitions of an asset):", "",
        table(["job", "runs"], [[job.replace("__ASSET_JOB", "the stale backfill's (Dagster's asset job)"), str(n)]
                                for job, n in sorted(runs.items())]),
    ])
    print(body)
    idle = conditions["load_start"][0] < 1.0
    publish(args.output, "demo-time", BEGIN, END, body, [Row(
        "demo:wall", "`make demo` from a clean state: wall time, runs", f"{median:.0f} s, {sum(runs.values())} runs",
        "make bench-demo", "demo-time.md", target=f"≤ {TARGET_S} s idle",
        met=("yes" if median <= TARGET_S else "no") + ("" if idle else f" (load {conditions['load_max']:.1f})"))])


if __name__ == "__main__":
    main()
