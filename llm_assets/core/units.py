"""Work units and the runner that executes them.

A work unit takes one input (a raw file, or one upstream part) through one stage and writes its own part.
It is a pure function of picklable values, so a runner can execute units in-process, in a process pool,
or (later) on a distributed engine, and a partition can reuse units whose inputs did not change.
"""

from __future__ import annotations

import functools
import hashlib
import resource
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from typing import Any, TypeVar

from llm_assets.settings import RunnerSettings

U = TypeVar("U")


def unit_id(*parts: str) -> str:
    """A stable id from a unit's identity: stage, code version and its input's identity."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


@dataclass
class UnitResult:
    """What one work unit did. Row accounting: rows_in == rows_out + sum(dropped.values())."""

    unit: str
    source: str
    part: str | None = None  # lake key of the written part; None when the unit kept nothing
    rejected_part: str | None = None
    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    peak_rss_bytes: int = 0
    errors: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # other things a stage counts (PII masked, ...)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UnitResult:
        return cls(**d)


class DropCounter(Counter):
    """Counts dropped rows by reason code."""

    def drop(self, reason: str, n: int = 1) -> None:
        self[reason] += n


def peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def timed_unit(fn: Callable[[U], UnitResult]) -> Callable[[U], UnitResult]:
    """Fill in seconds and peak RSS, and turn an unexpected failure into a reported error, not a crash:
    one unreadable input must not cost the other units of the partition."""

    def wrapper(unit: U) -> UnitResult:
        start = time.perf_counter()
        try:
            result = fn(unit)
        except Exception as e:  # noqa: BLE001 - reported with the input's name, never swallowed silently
            result = UnitResult(
                unit=getattr(unit, "unit", "?"),
                source=getattr(unit, "source", "?"),
                errors=[f"{getattr(unit, 'source', '?')}: {type(e).__name__}: {e}"],
            )
            result.errors.append(traceback.format_exc(limit=3))
        result.seconds = time.perf_counter() - start
        result.peak_rss_bytes = peak_rss_bytes()
        return result

    # Same module and name as the decorated function, so process-pool workers can unpickle it.
    return functools.update_wrapper(wrapper, fn)


def run_units(fn: Callable[[U], UnitResult], units: Sequence[U], runner: RunnerSettings) -> list[UnitResult]:
    """Execute units and return their results in input order."""
    if runner.kind == "inprocess" or len(units) <= 1 or runner.workers == 1:
        return [fn(u) for u in units]
    # spawn, not fork: the caller may be a threaded Dagster process.
    with ProcessPoolExecutor(max_workers=min(runner.workers, len(units)), mp_context=get_context("spawn")) as pool:
        return list(pool.map(fn, units))
