"""Every use of Dagster's private API (`dagster._core`, `dagster._grpc`), in one place.

Dagster has no public way yet to keep a value in the instance (a stale backfill's state, in the key-value table its
daemons keep their cursors in), to run `dagster-daemon` in a prepared process, to report a run worker's health from
a custom run launcher, to tell a failed run that Dagster's run retries replaced, to tag a run as a sensor's run the
way the daemon does, to read the data version an event carries, to request a run of a range of partitions from a
sensor (its tags), to launch a run of a code location's job (or of a subset of its assets) through the run
coordinator from outside the webserver, to say who launched a run (the `user` tag the UI's "Launched by" shows), or
(tests) to read how a sensor's tick ended. These names may move in any Dagster release:
`llm_assets_tests/platform/test_dagster_private.py` uses each of them as this project does and fails on an upgrade that
changes one, naming it. Import them from here, never from `dagster._*` directly.
"""

from typing import TYPE_CHECKING

from dagster._core.definitions.data_version import CODE_VERSION_TAG, DATA_VERSION_TAG
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus
from dagster._core.scheduler.instigation import TickStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    AUTO_RETRY_RUN_ID_TAG,
    GRPC_INFO_TAG,
    RUN_KEY_TAG,
    SENSOR_NAME_TAG,
    TICK_ID_TAG,
    USER_TAG,
)

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


def instance_values(instance, keys: set[str]) -> dict[str, str]:
    """Values the instance's key-value store holds (the table Dagster's daemons keep their cursors in)."""
    return dict(instance.run_storage.get_cursor_values(keys))


def set_instance_values(instance, pairs: dict[str, str]) -> None:
    # One key a call: Dagster's SQL storage inserts them all or, when one exists, updates them all, and so drops
    # the new keys of a call that also holds an existing one.
    for key, value in pairs.items():
        instance.run_storage.set_cursor_values({key: value})


def run_daemon(argv: list[str]) -> None:
    """`dagster-daemon <argv>` in this process (after the caller prepared the instance)."""
    from dagster._daemon.cli import cli

    cli.main(args=argv, obj={}, prog_name="dagster-daemon")


# The Dagster release these names were checked against (the lock file's); the test compares it with the installed one.
CHECKED_WITH = "1.13.27"

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG", "ASSET_PARTITION_RANGE_START_TAG", "CODE_VERSION_TAG", "DATA_VERSION_TAG",
    "AUTO_RETRY_RUN_ID_TAG", "CHECKED_WITH", "CheckRunHealthResult", "ConfigurableClassData", "DagsterGrpcClient",
    "GRPC_INFO_TAG", "JobSubsetSelector", "RUN_KEY_TAG", "SENSOR_NAME_TAG", "TICK_ID_TAG", "TickStatus", "USER_TAG",
    "WorkerStatus", "WorkspaceFileTarget", "WorkspaceProcessContext", "dagster_instance_config", "instance_values",
    "location_origins_from_yaml_paths", "run_daemon", "set_instance_values", "validate_config",
]
