"""Failed runs, told to a person: one line per run with its first error and where to read the rest, then one line
of summary. The demo (runs in its own process) and `backfill --stale --wait` / `--status` (runs the daemon
launched) say the same thing the same way."""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import dagster as dg

from llm_assets.platform.dagster_private import AUTO_RETRY_RUN_ID_TAG
from llm_assets.platform.partitions import partitions_label

WHERE = "its steps' errors and logs in the UI (`make ui`, then Runs)"
_DAGSTER_WRAPPERS = {"DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError",
                     "DagsterResourceFunctionError", "DagsterExecutionInterruptedError"}


@dataclass(frozen=True)
class FailedRun:
    job: str
    partition: str | None
    run_id: str
    error: str

    @property
    def name(self) -> str:
        return f"{self.job} {self.partition}" if self.partition else self.job

    def describe(self) -> str:
        return f"  FAILED {self.name}: {self.error}\n    run {self.run_id}: {WHERE}"


def first_error(events: Iterable[dg.DagsterEvent]) -> str:
    """The first error of a failed run, one line: the user code's exception, not Dagster's wrapper around it."""
    for event in events:
        error = getattr(event.event_specific_data, "error", None) if event.is_failure else None
        if error is None:
            continue
        while error.cause is not None and error.cls_name in _DAGSTER_WRAPPERS:
            error = error.cause
        text = error.message.strip().splitlines()[0] if error.message.strip() else error.cls_name
        text = re.sub(rf"^[\w.]*\.{re.escape(error.cls_name)}:", f"{error.cls_name}:", text)  # no module path
        where = f"{event.step_key}: " if event.step_key else ""
        return where + (text if len(text) <= 400 else text[:400] + "…")
    return "the run failed without an error (see its event log)"


def report(failed: FailedRun) -> None:
    print(failed.describe(), file=sys.stderr, flush=True)


def replaced(run: dg.DagsterRun) -> bool:
    """Whether Dagster's run retries launched a run in this failed run's place."""
    return AUTO_RETRY_RUN_ID_TAG in run.tags


def summary(what: str, failed: list[FailedRun]) -> str:
    """One line for the end of a command whose runs failed: how many, of which jobs."""
    jobs = Counter(f.job for f in failed)
    return (f"{what} failed: {len(failed)} run{'s' if len(failed) != 1 else ''} failed "
            f"({', '.join(f'{job} ×{n}' for job, n in jobs.items())}); each is marked FAILED above with its first "
            "error and run id")


def failed_runs(instance: dg.DagsterInstance, tags: dict[str, str]) -> list[FailedRun]:
    """Every failed run with these tags (a stale backfill's) that no retry replaced (Dagster's run retries), oldest
    first, with its first error read from its event log."""
    records = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], tags=tags),
                                       ascending=True)
    out = []
    for record in records:
        run = record.dagster_run
        if replaced(run):
            continue
        events = [e.dagster_event for e in instance.all_logs(run.run_id) if e.dagster_event is not None]
        out.append(FailedRun(run.job_name, partitions_label(run.tags), run.run_id, first_error(events)))
    return out
