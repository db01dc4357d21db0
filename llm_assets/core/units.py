"""Work units and the runner that executes them.

A work unit takes one input (a raw file, or one upstream part) through one stage and writes its own part.
It is a pure function of picklable values, so a runner can execute units in-process, in a process pool or on a
cluster (`core.dask_runner`), and a partition can reuse units whose inputs did not change. Units carry no
credentials: each process that runs one reads its own (see `lake.StoreConfig`).
"""

from __future__ import annotations

import ctypes
import functools
import json
import multiprocessing
import os
import resource
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, TypeVar

from pydantic import Discriminator, Field, Tag, TypeAdapter

from llm_assets.core.config import Section
from llm_assets.core.errors import auth_failure, is_infrastructure, is_transient
from llm_assets.core.versions import digest


class InProcessRunnerSettings(Section):
    """`runner.kind: inprocess`: one unit after the other in the process that runs the partition (tests,
    debugging, tiny partitions)."""

    kind: Literal["inprocess"] = Field(default="inprocess", description="Selects this runner.")

    def slots(self) -> tuple[int, str]:
        """(units at once, description) for a forecast's wall time."""
        return 1, "in-process runner (1 slot)"


class PoolRunnerSettings(Section):
    """`runner.kind: pool`: a process pool on the machine that runs the partition."""

    kind: Literal["pool"] = Field(default="pool", description="Selects this runner.")
    workers: int = Field(default=2, ge=1, description="Processes of the pool: units run at once.")

    def slots(self) -> tuple[int, str]:
        return self.workers, f"pool of {self.workers} workers"


class DaskRunnerSettings(Section):
    """`runner.kind: dask`: every unit of a partition one task on a Dask cluster."""

    kind: Literal["dask"] = Field(default="dask", description="Selects this runner.")
    address: str | None = Field(default=None, description=(
        "The scheduler, e.g. tls://10.0.0.5:8786. Unset: DASK_SCHEDULER_ADDRESS, else the cluster that "
        "`llm-assets cluster start` runs on this machine."))
    num_cpus: float | None = Field(default=None, gt=0, description=(
        "CPUs one unit needs, as the workers' `CPU` resource (workers declare it: `dask worker --resources "
        "\"CPU=4,MEMORY=16e9\"`). Unset: one unit per worker thread."))
    memory_bytes: int | None = Field(default=None, gt=0, description=(
        "Memory one unit needs, as the workers' `MEMORY` resource. Unset: not asked for."))
    max_retries: int = Field(default=3, ge=0, description=(
        "Resubmissions of a unit whose worker died or whose store kept failing."))
    max_in_flight: int = Field(default=64, ge=1, description=(
        "Units submitted and not yet collected: the driver's memory stays flat."))
    connect_timeout_s: float = Field(default=30.0, gt=0, description="Seconds to reach the scheduler.")
    workers: int = Field(default=2, ge=1, description=(
        "Units at once a forecast counts on when the cluster does not answer (it asks the cluster first)."))

    def slots(self) -> tuple[int, str]:
        return self.workers, f"dask runner (cluster not reached: {self.workers} slots, runner.workers)"


# Where a partition's work units run, chosen by `runner.kind`. A runner never changes what a unit computes, so no
# runner setting is part of a code version. A new runner: its settings class here (with its `kind`), in this union,
# and its runner class built from it in `llm_assets.platform.runners.RUNNERS`.
_RUNNERS = (InProcessRunnerSettings, PoolRunnerSettings, DaskRunnerSettings)
_KINDS = [cls.model_fields["kind"].default for cls in _RUNNERS]


def _kind(value: Any) -> str | None:
    """The `kind` a runner section selects; `pool` when it names none (the default before runners had a kind each)."""
    return value.get("kind", "pool") if isinstance(value, dict) else getattr(value, "kind", None)


RunnerSettings = Annotated[
    Annotated[InProcessRunnerSettings, Tag("inprocess")] | Annotated[PoolRunnerSettings, Tag("pool")]
    | Annotated[DaskRunnerSettings, Tag("dask")],
    Discriminator(_kind, custom_error_type="runner_kind",
                  custom_error_message=f"unknown runner.kind: expected one of {', '.join(map(repr, _KINDS))}")]
RUNNER_SETTINGS: TypeAdapter[RunnerSettings] = TypeAdapter(RunnerSettings)


def runner_settings(**fields: Any) -> RunnerSettings:
    """The runner settings of `kind` with `fields`, validated as the settings file's `runner` section is."""
    return RUNNER_SETTINGS.validate_python(fields)


@dataclass(frozen=True, kw_only=True)
class WorkUnit:
    """What every work unit carries: the store it reads and writes (a `StoreConfig`, never credentials), the input
    it is named by in errors and metadata, and its identity. The same `unit` id means the same output, so a
    committed unit with that id is reused; an empty id is redone on every run (the raw inventory lists again)."""

    store: Any
    source: str
    unit: str = ""


class HasSource(Protocol):
    """What a runner needs of a unit: the input that names it in errors. Structural rather than `WorkUnit`, as tests
    run plain dataclasses with only a `source`; a read-only property, so that frozen dataclasses match it."""

    @property
    def source(self) -> str: ...


U = TypeVar("U", bound=HasSource)


def unit_id(*parts: str) -> str:
    """A stable id from a unit's identity: stage, code version and its input's identity."""
    return digest(*parts, sep="\0")


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
    cpu_seconds: float = 0.0  # of the process that ran it, every thread, while it ran
    requests: int = 0  # S3 requests that process sent through the lake's client while it ran (`s3_requests`)
    worker: int = 0  # the pid of that process
    peak_rss_bytes: int = 0
    errors: list[str] = field(default_factory=list)  # what was wrong with the input (quarantined, counted)
    columns: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # other things a stage counts (PII masked, ...)
    side_parts: dict[str, str] = field(default_factory=dict)  # other parts written with `part`, by role

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UnitResult:
        return cls(**d)


class DropCounter(Counter):
    """Counts dropped rows by reason code."""

    def drop(self, reason: str, n: int = 1) -> None:
        self[reason] += n


_requests = [0]  # S3 requests this process sent through lake clients
_requests_lock = threading.Lock()  # botocore sends from several threads (multipart uploads)


def count_request(**_: Any) -> None:
    """botocore's `before-send` hook on every lake client (`Lake.s3`): one HTTP request, retries and the parts of a
    multipart upload included."""
    with _requests_lock:
        _requests[0] += 1


def s3_requests() -> int:
    """The S3 requests this process has sent through lake clients so far: read before and after a unit, like its
    CPU time (so units running at once in one process's threads are charged each other's)."""
    return _requests[0]


def peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class UnitFailed(Exception):
    """A work unit failed for a reason that is not its input's (the store, the machine, a bug): the partition is
    not committed. Bad input never gets here: readers quarantine it record by record. Plain text only, so it
    crosses process boundaries whatever the original exception was. `infrastructure`: the store or the machine
    failed (a cluster runner tries such a unit again), not the code; `transient`: of those, a failure that may go
    away by itself (the store unreachable past its retry budget, throttling, 5xx), not a full store or disk."""

    def __init__(self, source: str, detail: str, infrastructure: bool = False, transient: bool = False):
        super().__init__(f"work unit {source}: {detail}")
        self.source, self.detail, self.infrastructure = source, detail, infrastructure
        self.transient = transient and infrastructure

    def __reduce__(self):
        return type(self), (self.source, self.detail, self.infrastructure, self.transient)


def timed_unit(fn: Callable[[U], UnitResult]) -> Callable[[U], UnitResult]:
    """Fill in seconds and peak RSS. A failure that escapes the unit fails it, named by its input, with the
    short traceback: whether input damage was quarantined is the unit's business, never guessed here."""

    def wrapper(unit: U) -> UnitResult:
        start, cpu, requests = time.perf_counter(), time.process_time(), s3_requests()
        try:
            result = fn(unit)
        except UnitFailed:
            raise
        except Exception as e:  # noqa: BLE001 - re-raised as UnitFailed, with the input's name
            raise UnitFailed(unit.source, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}",
                             # refused credentials stay refused: no cluster worker tries the unit again
                             infrastructure=is_infrastructure(e) and not auth_failure(e),
                             transient=is_transient(e)) from e
        result.seconds = time.perf_counter() - start
        result.cpu_seconds, result.worker = time.process_time() - cpu, os.getpid()
        result.requests = s3_requests() - requests
        result.peak_rss_bytes = peak_rss_bytes()
        return result

    # Same module and name as the decorated function, so process-pool workers can unpickle it.
    return functools.update_wrapper(wrapper, fn)


OnDone = Callable[[UnitResult], None]


class Runner(Protocol):
    """Executes a partition's units and returns their results in input order, calling `on_done` with each result as
    its unit ends (in any order). The first unit that fails for good ends the run: units not started are cancelled
    and its `UnitFailed` (naming its input) is raised."""

    def run(self, fn: Callable[[U], UnitResult], units: Sequence[U], on_done: OnDone | None = None
            ) -> list[UnitResult]: ...


def _done(on_done: OnDone | None, result: UnitResult) -> UnitResult:
    if on_done is not None:
        on_done(result)
    return result


@dataclass(frozen=True)
class InProcessRunner:
    """One unit after the other in this process (tests, debugging, tiny partitions)."""

    def run(self, fn: Callable[[U], UnitResult], units: Sequence[U], on_done: OnDone | None = None
            ) -> list[UnitResult]:
        return [_done(on_done, fn(u)) for u in units]


# What every pool worker needs whatever its stage: imported once in the fork server, not in each worker.
POOL_PRELOAD = ("numpy", "pyarrow", "pyarrow.parquet", "polars", "llm_assets.core.lake", "llm_assets.core.units")


@dataclass(frozen=True, order=True)
class Warmup:
    """A load the pool's fork server does before it forks workers, so that every worker starts with its result
    instead of loading it again (a tokenizer: ~0.5 CPU-s a worker): `function` ("module:name", a cached loader)
    called with `argument`. A unit names its own as its `warmup` attribute. One that fails in the server fails
    every unit of the pool, naming it (`WarmupFailed`): a warm-up that names what no worker can load is a bug, and
    each worker loading it again on its first unit would hide it."""

    function: str
    argument: str

    def __call__(self) -> None:
        import importlib

        module, name = self.function.split(":")
        getattr(importlib.import_module(module), name)(self.argument)


class WarmupFailed(RuntimeError):
    """A warm-up of the pool's fork server failed: every unit of the pool fails with it."""


# What every pool's server loads for its workers, whatever the stage: each unit opens the object store.
POOL_WARMUPS = (Warmup("llm_assets.core.lake:warm_client", "s3"),)
WARMUP_ENV = "LLM_ASSETS_POOL_WARMUP"  # the warm-ups, read by `pool_server` in the fork server as it starts
# In the fork server and the workers it forks: the warm-ups it made, and why each that failed did.
_made: tuple[Warmup, ...] = ()
_failed: dict[Warmup, str] = {}
_served: tuple[Warmup, ...] = ()  # the running fork server's
_served_environ: frozenset[tuple[str, str]] = frozenset()  # the environment the running fork server started with


def _pool_context(fn: Callable, warmups: tuple[Warmup, ...] = ()) -> Any:
    """Workers are forked from a fork server: a fresh single-threaded interpreter (safe when the caller is a
    threaded Dagster process, as spawn is) that has imported `POOL_PRELOAD` and the module of the first stage it
    served, and made that stage's warm-ups, so a worker starts in milliseconds instead of importing the project
    again (~1.5-2 CPU-s a worker with spawn, every stage). The server lives as long as this process and serves every
    later pool, unless a pool needs warm-ups it did not make, or the caller's environment changed since the server
    started (a worker's process image carries the server's environment, whatever `_init_worker` sets: a secret
    removed from the caller's environment must not stay in the workers'): then another server starts (once per stage
    and process, against once per worker). `pool_server`, imported first, makes it die with this process, and each
    worker dies with the server (`_init_worker`)."""
    global _served, _served_environ
    from multiprocessing import forkserver

    ctx = get_context("forkserver")
    running = getattr(forkserver._forkserver, "_forkserver_pid", None) is not None
    environ = frozenset(unit_environ().items())
    if running and (not set(warmups) <= set(_served) or environ != _served_environ):
        stop_pool_server()
        running = False
    if not running:
        # A worker runs the caller's main module again when it was started with `python -m NAME` (multiprocessing
        # does, as `__mp_main__`): imported here, what it imports is loaded once. Not a package's `__main__` (a
        # CLI such as Dagster's), which workers skip.
        main = getattr(sys.modules.get("__main__"), "__spec__", None)
        modules = [*POOL_PRELOAD, fn.__module__,
                   *([main.name] if main is not None and not main.name.endswith("__main__") else [])]
        ctx.set_forkserver_preload(["llm_assets.core.pool_server", "__main__", *modules])
        # the server's process image is made from this environment: the units' own (the instance's variables held
        # back meanwhile, the rest left in place for the caller's other threads), and what it is to warm
        held = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(INSTANCE_ONLY_PREFIX)}
        previous = os.environ.get(WARMUP_ENV)
        os.environ[WARMUP_ENV] = json.dumps({"modules": modules,
                                             "warmups": [[w.function, w.argument] for w in warmups]})
        try:
            forkserver.ensure_running()
        finally:
            if previous is None:
                os.environ.pop(WARMUP_ENV, None)
            else:
                os.environ[WARMUP_ENV] = previous
            os.environ.update(held)
        _served, _served_environ = warmups, environ
    return ctx


def pool_warmups() -> None:
    """In the fork server, as it starts: import the modules and make the warm-ups its starter asked for (one that
    fails is recorded: its workers fail their units with it), then move every object made so far out of the garbage
    collector's sight (`gc.freeze`), so that a worker's collections do not write to, and so copy, the pages it
    shares with the server."""
    import gc
    import importlib
    global _made

    spec = json.loads(os.environ.pop(WARMUP_ENV, "{}"))
    for module in spec.get("modules", []):
        try:
            importlib.import_module(module)
        except ImportError:  # as multiprocessing's own preload: the worker imports it and fails there
            pass
    for function, argument in spec.get("warmups", []):
        warmup = Warmup(function, argument)
        try:
            warmup()
            _made += (warmup,)
        except Exception as e:  # noqa: BLE001 - each unit of the pool fails with it (`_unit`)
            _failed[warmup] = f"{type(e).__name__}: {e}"
    gc.freeze()


def served_warmups() -> tuple[Warmup, ...]:
    """In a pool worker: the warm-ups its fork server made."""
    return _made


def _unit(fn: Callable[[U], UnitResult], unit: U) -> UnitResult:
    """A unit in a pool worker, unless a warm-up of its fork server failed."""
    if _failed:
        raise WarmupFailed("the process pool's warm-up failed in its fork server: " + "; ".join(
            f"{w.function}({w.argument!r}): {error}" for w, error in _failed.items()))
    return fn(unit)


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies, so that a run worker killed with SIGKILL (the OOM
    killer, `kill -9`) does not leave its pool's fork server and workers (hundreds of MB) alive for good, as it did
    (measured: a fork server and two workers still alive minutes after their run worker). Linux only (`prctl`);
    on other systems nothing is done and such a pool may outlive its parent.
    The kernel sends the signal when the parent *thread* that started the process exits: a fork server killed so
    while its process lives is started again by the next pool (CPython's forkserver checks before each use)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


# The pool's workers are the parallelism: in a worker, a library that would start a thread per core (the
# tokenizer's encoder) runs on one, unless the caller's environment says otherwise. Two workers with two encoder
# threads each would contend for two cores.
POOL_WORKER_ENVIRON = {"TOKENIZERS_PARALLELISM": "false"}

# What only the Dagster instance's processes (daemon, code server, run workers) need: a unit never talks to
# Dagster's database, so its password stays out of the pool's processes.
INSTANCE_ONLY_PREFIX = "DAGSTER_PG_"


def unit_environ() -> dict[str, str]:
    """The caller's environment as its units get it: without the instance's database settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(INSTANCE_ONLY_PREFIX) and k != WARMUP_ENV}


def _init_worker(environ: dict[str, str]) -> None:
    """A worker dies with its fork server, and its environment is the caller's when the pool starts (as with
    spawn), not the fork server's."""
    die_with_parent()
    # Armed too late when the server died while this worker started (its caller killed in the meantime): the
    # caller's end of the pipe this worker was forked through tells.
    if (caller := multiprocessing.parent_process()) is not None and not caller.is_alive():
        os._exit(1)
    os.environ.clear()
    os.environ.update({**POOL_WORKER_ENVIRON, **environ})


def pool_cpu_seconds() -> float:
    """CPU seconds of the fork server and of the pool workers that ended, which `RUSAGE_CHILDREN` does not see:
    they are the server's children, not this process's. For benchmarks; 0 when no fork server runs."""
    return sum(pool_cpu_breakdown())


def pool_cpu_breakdown() -> tuple[float, float]:
    """(the fork server's own CPU seconds, its workers' that ended): for benchmarks; zeros when no server runs."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0, 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat(5), 12-15 after the command name
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def stop_pool_server() -> None:
    """Stop the fork server and wait for it, so that its CPU time and its workers' join this process's
    `RUSAGE_CHILDREN` (benchmarks measuring a process tree). The next pool starts another."""
    from multiprocessing import forkserver

    if getattr(forkserver._forkserver, "_forkserver_pid", None) is not None:
        forkserver._forkserver._stop()  # type: ignore[attr-defined]  # CPython's, used by its own tests


@dataclass(frozen=True)
class PoolRunner:
    """A process pool on this machine."""

    workers: int = 2

    def run(self, fn: Callable[[U], UnitResult], units: Sequence[U], on_done: OnDone | None = None
            ) -> list[UnitResult]:
        if len(units) <= 1 or self.workers == 1:
            return InProcessRunner().run(fn, units, on_done)
        warmups = tuple(sorted({*POOL_WARMUPS,
                                *(w for u in units if isinstance(w := getattr(u, "warmup", None), Warmup))}))
        with ProcessPoolExecutor(max_workers=min(self.workers, len(units)), mp_context=_pool_context(fn, warmups),
                                 initializer=_init_worker, initargs=(unit_environ(),)) as pool:
            futures = [pool.submit(_unit, fn, u) for u in units]
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                if failed := next((f for f in done if f.exception() is not None), None):
                    for f in futures:
                        f.cancel()
                    error = failed.exception()
                    assert error is not None  # `failed` was picked for having one
                    raise error
                for f in done:
                    _done(on_done, f.result())
            return [f.result() for f in futures]


def run_units(fn: Callable[[U], UnitResult], units: Sequence[U], runner: Runner, on_done: OnDone | None = None
              ) -> list[UnitResult]:
    """Execute units on `runner` and return their results in input order; `on_done(result)` as each ends."""
    return runner.run(fn, units, on_done) if units else []


class Progress:
    """A partition's progress as its units end: units done of total, records read, records per second and an
    estimate of the time left, said (`say(line)`) when a unit ends at least `every_s` after the last line, and for
    the last unit. The clock is a parameter so that tests need no sleeping."""

    def __init__(self, total: int, say: Callable[[str], None], every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.say, self.every_s, self.clock = total, say, every_s, clock
        self.done = self.records = 0
        self.start = self.last = clock()

    def __call__(self, result: UnitResult) -> None:
        self.done += 1
        self.records += result.rows_in
        now = self.clock()
        if now - self.last >= self.every_s or self.done == self.total:
            self.last = now
            self.say(self.line(now))

    def line(self, now: float) -> str:
        elapsed = now - self.start
        rate = f"{self.records / elapsed:,.0f} records/s" if elapsed > 0 else "– records/s"
        left = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        eta = "done" if self.done == self.total else f"ETA {_duration(left)}"
        return f"{self.done}/{self.total} units, {self.records:,} records read, {rate}, {eta}"


def _duration(seconds: float) -> str:
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s" if m else f"{s}s"
