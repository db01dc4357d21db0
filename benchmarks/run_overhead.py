"""`make bench-run-overhead`: what Dagster adds to a partition's work, from the runs the demo made.

    make demo && .venv/bin/python -m benchmarks.run_overhead

For each successful run of the local Dagster instance ($LLM_ASSETS_HOME/dagster): its wall time (Dagster's run
start to end) against the seconds its stages measured themselves (the `seconds` of each materialization: from the
first work unit submitted to the output). The difference is Dagster's per-run and per-step cost (run start, step
launch, input loading through the IO manager, event writes) plus the stages' own planning; medians per job.
"""

from __future__ import annotations

import argparse
import statistics
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from benchmarks.report import table
from benchmarks.summary import Row, publish
from llm_assets.platform.instance import get_instance

BEGIN, END = "<!-- run-overhead:begin -->", "<!-- run-overhead:end -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "BENCHMARKS.md")
    args = parser.parse_args()
    instance = get_instance()
    by_job: dict[str, list[tuple[float, float, int]]] = {}
    for record in instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS])):
        stats = instance.get_run_stats(record.dagster_run.run_id)
        if not (stats.start_time and stats.end_time):
            continue
        wall = stats.end_time - stats.start_time
        events = instance.get_records_for_run(record.dagster_run.run_id,
                                              of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        work = [e.event_log_entry.dagster_event.materialization.metadata.get("seconds") for e in events]
        seconds = sum(float(m.value) for m in work if m is not None)
        by_job.setdefault(record.dagster_run.job_name, []).append((wall, seconds, len(events)))
    rows = []
    for job, runs in sorted(by_job.items()):
        wall = statistics.median(r[0] for r in runs)
        work = statistics.median(r[1] for r in runs)
        steps = statistics.median(r[2] for r in runs)
        rows.append([job, str(len(runs)), f"{steps:.0f}", f"{wall:.2f}", f"{work:.2f}", f"{wall - work:.2f}",
                     f"{(wall - work) / steps:.2f}" if steps else "–"])
    body = "\n".join([
        "## Dagster's cost per run (`make bench-run-overhead`, after `make demo`; not part of `make bench`)", "",
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from the demo's runs (in-process executor: one "
        "process per run, steps in it). Wall: Dagster's run start to end; work: the stages' own `seconds` summed. "
        "Medians per job.", "",
        table(["job", "runs", "steps", "wall s", "work s", "Dagster s", "Dagster s per step"], rows), "",
        "Every job runs its steps in the run's process (`in_process_executor`): a process per step would add an "
        "interpreter start and the code location's import (about 5 s on this machine, see \"Process start-up\") to "
        "every step.",
    ])
    print(body)
    per_step = [(wall - work) / steps for wall, work, steps in
                ((statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
                  statistics.median(r[2] for r in runs)) for runs in by_job.values()) if steps]
    current = f"{min(per_step):.2f}–{max(per_step):.2f} s per step" if per_step else "no successful runs"
    publish(args.output, "run-overhead", BEGIN, END, body, [Row(
        "run-overhead:per-step", "Dagster's cost per run step (median per job, s)", current,
        "make bench-run-overhead", "run-overhead.md")])


if __name__ == "__main__":
    main()
