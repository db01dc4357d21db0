"""Work units on a Dask distributed cluster.

Each unit is one task. Only the unit (a few hundred bytes: its input's key, the stage's settings, where the lake
is) and its `UnitResult` travel through the scheduler; the data goes between the workers and the object store,
as it does for the other runners. At most `max_in_flight` units are outstanding, so the driver's memory does not
grow with the partition's size (only the results it returns do).

Failures are told apart the same way as everywhere else: a unit whose worker died (a node lost, a process killed
for memory) or that failed on the store is the infrastructure's fault and is submitted again, up to
`max_retries` times; a unit that fails on its own (a bug) ends the run at once, named by its input. Bad input
never fails a unit: readers quarantine it record by record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Generic, TypeVar, cast

from dask.typing import Key
from distributed import Client, Future, as_completed
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker
from distributed.security import Security

from llm_assets.core.errors import ClusterUnavailable
from llm_assets.core.units import HasSource, OnDone, UnitFailed, UnitResult

U = TypeVar("U", bound=HasSource)


@dataclass(frozen=True)
class DaskRunner:
    address: str
    security: Security | None = field(default=None, repr=False)
    num_cpus: float | None = None  # per unit, as the workers' "CPU" resource
    memory_bytes: int | None = None  # per unit, as the workers' "MEMORY" resource
    max_retries: int = 3
    max_in_flight: int = 64
    connect_timeout_s: float = 30.0

    @property
    def resources(self) -> dict[str, float]:
        wanted = {"CPU": self.num_cpus, "MEMORY": self.memory_bytes}
        return {name: amount for name, amount in wanted.items() if amount is not None}

    def connect(self) -> Client:
        security = self.security or Security()  # for another cluster: Dask's own configuration
        # Security sets its tls_* slots from Dask's configuration in __init__; distributed declares no types for them
        if self.address.startswith("tls://") and not security.tls_ca_file:  # type: ignore[attr-defined]
            raise ClusterUnavailable(
                f"the Dask scheduler at {self.address} speaks TLS, but no certificates are configured: set "
                "distributed.comm.tls.ca-file and .client.cert/.key in Dask's configuration (or the "
                "DASK_DISTRIBUTED__COMM__TLS__* variables)")
        try:
            return Client(self.address, security=security, timeout=self.connect_timeout_s, set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise ClusterUnavailable(f"cannot reach the Dask scheduler at {self.address} within "
                                     f"{self.connect_timeout_s:.0f} s: {type(e).__name__}: {e}") from e

    def run(self, fn: Callable[[U], UnitResult], units: Sequence[U], on_done: OnDone | None = None
            ) -> list[UnitResult]:
        if not units:
            return []
        with self.connect() as client:
            self._check_resources(client)
            try:
                return _Submission(self, client, fn, units, on_done).run()
            except (CommClosedError, OSError) as e:
                raise ClusterUnavailable(f"lost the Dask scheduler at {self.address} during the run: "
                                         f"{type(e).__name__}: {e}") from e

    def _check_resources(self, client: Client) -> None:
        """Dask holds a task until a worker offers its resources: a cluster that offers none would wait forever."""
        if not (wanted := self.resources):
            return
        workers = client.scheduler_info(n_workers=-1)["workers"].values()
        if not any(all(w.get("resources", {}).get(k, 0) >= v for k, v in wanted.items()) for w in workers):
            raise ClusterUnavailable(
                f"no worker of the Dask cluster at {self.address} offers {wanted} per unit (runner.num_cpus, "
                f"runner.memory_bytes): start workers with --resources, e.g. \"CPU=4,MEMORY=16e9\"")


class _Submission(Generic[U]):
    """One partition's units on the cluster: submit up to the in-flight limit, collect, resubmit what was lost."""

    def __init__(self, runner: DaskRunner, client: Client, fn: Callable[[U], UnitResult], units: Sequence[U],
                 on_done: OnDone | None = None):
        self.runner, self.client, self.fn, self.units, self.on_done = runner, client, fn, units, on_done
        self.results: list[UnitResult | None] = [None] * len(units)
        self.attempts: dict[int, int] = {}  # only units that were retried
        self.index: dict[Key, int] = {}  # key of an outstanding future -> its unit
        self.completed = as_completed(loop=client.loop)
        # Keys are the scheduler's identity for a task: unique per run, so concurrent runs never share one.
        self.prefix = f"{getattr(fn, '__name__', 'unit')}-{uuid.uuid4().hex[:8]}"

    def submit(self, i: int) -> None:
        attempt = self.attempts.get(i, 0)
        future = self.client.submit(self.fn, self.units[i], key=f"{self.prefix}-{i}-{attempt}", pure=False,
                                    resources=self.runner.resources or None)
        self.index[future.key] = i
        self.completed.add(future)

    def run(self) -> list[UnitResult]:
        pending = iter(range(len(self.units)))
        for i in islice(pending, self.runner.max_in_flight):
            self.submit(i)
        try:
            for future in self.completed:
                i = self.index.pop(future.key)
                self.collect(i, future)
                if (j := next(pending, None)) is not None:
                    self.submit(j)
        finally:
            if self.index:  # failed: nothing of this run may keep the cluster busy
                self.client.cancel(list(self.completed.futures), force=True, reason="the partition failed")
        return cast(list[UnitResult], self.results)  # every slot is filled once the loop ends

    def collect(self, i: int, future: Future) -> None:
        if future.status == "finished":
            self.results[i] = result = future.result()
            future.release()
            if self.on_done is not None:
                self.on_done(result)
            return
        error = future.exception() if future.status == "error" else None
        lost = isinstance(error, KilledWorker) or future.status == "cancelled" or (
            isinstance(error, UnitFailed) and error.infrastructure)
        future.release()
        if lost and self.attempts.get(i, 0) < self.runner.max_retries:
            self.attempts[i] = self.attempts.get(i, 0) + 1
            self.submit(i)
            return
        source = self.units[i].source
        tries = self.attempts.get(i, 0) + 1
        if isinstance(error, UnitFailed):
            if not error.infrastructure:  # the code's own failure: never tried again
                raise error
            raise UnitFailed(error.source, f"{error.detail} (failed {tries} times)", infrastructure=True,
                             transient=error.transient)
        if isinstance(error, KilledWorker):
            raise UnitFailed(source, f"its worker died {tries} times on the Dask cluster at {self.runner.address} "
                                     f"(a node lost, or a process killed for memory): {error}", infrastructure=True)
        if error is None:
            raise ClusterUnavailable(f"the Dask scheduler at {self.runner.address} cancelled work unit {source} "
                                     f"{tries} times (scheduler restarted or connection lost)")
        raise UnitFailed(source, f"{type(error).__name__}: {error}")
