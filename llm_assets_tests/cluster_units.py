"""Work-unit functions the cluster tests run on Dask workers (shipped by value: workers need not import tests)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from llm_assets.core.documents import ExtractUnit, extract_documents
from llm_assets.core.errors import StoreUnavailable
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.core.units import UnitResult, timed_unit


@dataclass(frozen=True)
class Announced:
    """An extraction unit that says where it runs."""

    unit: ExtractUnit
    folder: str

    @property
    def source(self) -> str:
        return self.unit.source


def announced_extract(announced: Announced) -> UnitResult:
    """extract_documents, after leaving `<folder>/<pid>-<n>` behind so the test knows which worker runs what."""
    Path(announced.folder, f"{os.getpid()}-{len(os.listdir(announced.folder))}").touch()
    return extract_documents(announced.unit)


@dataclass(frozen=True)
class Probe:
    source: str  # a file the unit counts its attempts in


def _attempt(probe: Probe) -> int:
    counter = Path(probe.source)
    attempt = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(attempt))
    return attempt


@timed_unit
def store_fails_once(probe: Probe) -> UnitResult:
    """Fails like a store outage past the retry budget on its first attempt, then succeeds."""
    if _attempt(probe) == 1:
        raise StoreUnavailable("object store http://127.0.0.1:1 (bucket b) unreachable for 300 s")
    return UnitResult(unit=probe.source, source=probe.source, rows_in=1, rows_out=1)


@timed_unit
def buggy(probe: Probe) -> UnitResult:
    """A unit with a bug: the code's fault, so no retry helps."""
    _attempt(probe)
    raise ValueError(f"a bug while processing {probe.source}")


@timed_unit
def one_row(probe: Probe) -> UnitResult:
    """A unit that reads one record and keeps it."""
    return UnitResult(unit=probe.source, source=probe.source, rows_in=1, rows_out=1)


@dataclass(frozen=True)
class ReadKey:
    """A unit that reads one object of the lake `config` names, with the credentials its own process finds."""

    config: StoreConfig
    key: str

    @property
    def source(self) -> str:
        return self.key


@timed_unit
def read_key(unit: ReadKey) -> UnitResult:
    """Reads the object; counts its bytes, the worker's pid and whether the worker's environment holds a secret."""
    data = Lake(unit.config).get_bytes(unit.key)
    environ = Path("/proc/self/environ").read_bytes().split(b"\0")
    secret = any(v.startswith(b"AWS_SECRET_ACCESS_KEY=") for v in environ)
    return UnitResult(unit=unit.key, source=unit.key, rows_in=1, rows_out=1,
                      counts={"bytes": len(data), "pid": os.getpid(), "secret_in_environ": int(secret)})
