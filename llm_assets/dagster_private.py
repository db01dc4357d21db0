"""Every use of Dagster's private API (`dagster._core`, `dagster._grpc`), in one place.

Dagster has no public way yet to create a partition backfill from a set of asset partitions outside the webserver
(GraphQL's `launchPartitionBackfill` needs a running webserver), to report a run worker's health from a custom run
launcher, to tag a run as a sensor's run the way the daemon does, to read the data version an event carries, to
request a run of a range of partitions from a sensor (its tags), to launch a run of a code location's job (or of a
subset of its assets) through the run coordinator from outside the webserver, to say who launched a run (the `user`
tag the UI's "Launched by" shows), or (tests) to read how a sensor's tick ended. These names may move in any Dagster
release: `llm_assets_tests/test_dagster_private.py` uses each of them as this project does and fails on an upgrade
that changes one, naming it. Import them from here, never from `dagster._*` directly.
"""

from typing import TYPE_CHECKING

from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.data_version import CODE_VERSION_TAG, DATA_VERSION_TAG
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus
from dagster._core.scheduler.instigation import TickStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    GRPC_INFO_TAG,
    RUN_KEY_TAG,
    SENSOR_NAME_TAG,
    TICK_ID_TAG,
    USER_TAG,
)
from dagster._core.utils import make_new_backfill_id

if TYPE_CHECKING:
    from dagster._config import validate_config
    from dagster._core.definitions.selector import JobSubsetSelector
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load import location_origins_from_yaml_paths
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster._grpc.client import DagsterGrpcClient
    from dagster._serdes.config_class import ConfigurableClassData

# Tests and benchmarks talk to a code server, load a workspace or check an instance file against Dagster's config
# schema (test_deploy_files.py), and the run launcher asks a code server its id: imported on first use, because gRPC's
# client and the workspace context cost a process that builds the code location 0.3-0.5 s it never needs.
_ON_FIRST_USE = {
    "DagsterGrpcClient": "dagster._grpc.client",
    "ConfigurableClassData": "dagster._serdes.config_class",
    "dagster_instance_config": "dagster._core.instance.config",
    "location_origins_from_yaml_paths": "dagster._core.workspace.load",
    "validate_config": "dagster._config",
    "JobSubsetSelector": "dagster._core.definitions.selector",
    "WorkspaceFileTarget": "dagster._core.workspace.load_target",
    "WorkspaceProcessContext": "dagster._core.workspace.context",
}


def __getattr__(name: str):
    if name in _ON_FIRST_USE:
        import importlib

        return getattr(importlib.import_module(_ON_FIRST_USE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backfill_targets(backfill: PartitionBackfill) -> set[tuple[str, str]]:
    """(asset name, partition key) of every asset partition an asset backfill targets ("" when unpartitioned)."""
    data = backfill.asset_backfill_data
    if data is None:  # a job backfill targets partitions of a job, not assets
        return set()
    return {(k.asset_key.path[-1], str(k.partition_key or "")) for k in data.target_subset.iterate_asset_partitions()}


def run_daemon(argv: list[str], backfill_interval_s: int | None = None) -> None:
    """`dagster-daemon <argv>` in this process, its backfill daemon iterating every `backfill_interval_s` when given.
    Dagster's backfill loop waits a fixed 30 s between iterations (no instance setting) and an asset backfill
    requests one level of the chain per iteration: the demo's chain of ~8 levels waited minutes on that loop alone.
    Its daemons run as threads of this process, so the interval set here is the one they read."""
    if backfill_interval_s is not None:
        import dagster._daemon.controller as controller

        controller.DEFAULT_DAEMON_INTERVAL_SECONDS = backfill_interval_s  # read by the backfill loop when it starts
    from dagster._daemon.cli import cli

    cli.main(args=argv, obj={}, prog_name="dagster-daemon")


# The Dagster release these names were checked against (the lock file's); the test compares it with the installed one.
CHECKED_WITH = "1.13.27"

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG", "ASSET_PARTITION_RANGE_START_TAG", "CODE_VERSION_TAG", "DATA_VERSION_TAG",
    "AssetGraphSubset", "AssetKeyPartitionKey", "BulkActionStatus", "backfill_targets", "CHECKED_WITH",
    "CheckRunHealthResult",
    "ConfigurableClassData", "DagsterGrpcClient", "GRPC_INFO_TAG", "JobSubsetSelector", "PartitionBackfill",
    "RUN_KEY_TAG", "SENSOR_NAME_TAG", "TICK_ID_TAG", "TickStatus", "USER_TAG", "WorkerStatus", "WorkspaceFileTarget",
    "WorkspaceProcessContext", "dagster_instance_config", "location_origins_from_yaml_paths", "make_new_backfill_id",
    "run_daemon", "validate_config",
]
