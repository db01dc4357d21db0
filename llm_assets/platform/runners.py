"""The runner a deployment's settings choose for work units: in-process, a local process pool, or a Dask cluster.

`RUNNERS` builds each runner from its settings class (`core.units.RunnerSettings`, a union discriminated by
`runner.kind`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llm_assets.core.units import InProcessRunner, PoolRunner, Runner
from llm_assets.platform import environment
from llm_assets.settings import DaskRunnerSettings, InProcessRunnerSettings, PoolRunnerSettings, RunnerSettings

if TYPE_CHECKING:
    from llm_assets.core.dask_runner import DaskRunner
    from llm_assets.platform.local_cluster import LocalCluster


def local_cluster() -> LocalCluster:
    """The cluster `llm-assets cluster start` runs on this machine."""
    # here: it imports the embedded store's client and the cryptography of its TLS, which a pool run never needs
    from llm_assets.platform.local_cluster import LocalCluster

    return LocalCluster(environment.home() / "cluster")


def runner_slots(settings: RunnerSettings) -> tuple[int, str]:
    """(units the runner runs at once, its name) for a forecast's wall time: the pool's workers, or the Dask
    cluster's threads when it answers within a few seconds (else `runner.workers`, said so)."""
    from llm_assets.core.errors import ClusterUnavailable

    if not isinstance(settings, DaskRunnerSettings):  # only a cluster is asked: the others are their settings
        return settings.slots()
    try:
        runner = dask_runner(settings.model_copy(update={"connect_timeout_s": 5.0}))
        with runner.connect() as client:
            threads = sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())
    except (ClusterUnavailable, RuntimeError, OSError, TimeoutError):  # not started or unreachable: the settings' count
        return settings.slots()
    return (threads, f"dask cluster of {threads} threads") if threads else settings.slots()


def dask_runner(settings: DaskRunnerSettings) -> DaskRunner:
    from llm_assets.core.dask_runner import DaskRunner  # distributed costs ~1 s to import: only when used

    address, security = settings.address or os.environ.get("DASK_SCHEDULER_ADDRESS"), None
    local = local_cluster()
    if (state := local.state()) is not None and address in (None, state.address):
        address, security = state.address, local.security()
    if address is None:
        raise RuntimeError("runner.kind is dask but no scheduler is known: set runner.address (or "
                           "DASK_SCHEDULER_ADDRESS), or start a local cluster with `llm-assets cluster start`")
    # For another cluster, security=None lets Dask take TLS settings from its own configuration
    # (distributed.comm.tls.* in ~/.config/dask or DASK_DISTRIBUTED__COMM__TLS__* variables).
    return DaskRunner(address=address, security=security, num_cpus=settings.num_cpus,
                      memory_bytes=settings.memory_bytes, max_retries=settings.max_retries,
                      max_in_flight=settings.max_in_flight, connect_timeout_s=settings.connect_timeout_s)


# Each runner settings class -> its runner. A new runner: its settings class in `core.units.RunnerSettings` and its
# entry here (see docs/extending.md, "Add a runner").
RUNNERS: dict[type, Callable[[Any], Runner]] = {
    InProcessRunnerSettings: lambda settings: InProcessRunner(),
    PoolRunnerSettings: lambda settings: PoolRunner(settings.workers),
    DaskRunnerSettings: dask_runner,
}


def runner_for(settings: RunnerSettings) -> Runner:
    return RUNNERS[type(settings)](settings)
