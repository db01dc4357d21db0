"""Dagster's private API, used as this project uses it (llm_assets/dagster_private.py). A Dagster upgrade that moves
or changes one of these names fails here, by name, before it fails a run."""

from __future__ import annotations

import inspect

import dagster as dg

from llm_assets import dagster_private as private
from llm_assets.freshness import launch_stale_backfill, stale_backfill_in_progress
from llm_assets.stale import Planned


def test_the_installed_dagster_is_the_one_the_private_names_were_checked_with():
    assert dg.__version__ == private.CHECKED_WITH, (
        f"Dagster {dg.__version__} is installed, llm_assets/dagster_private.py was checked with "
        f"{private.CHECKED_WITH}: run this file's tests, fix what fails, then update CHECKED_WITH")


def test_a_backfill_of_exactly_the_planned_partitions_is_created_and_seen_as_requested():
    from llm_assets.definitions import defs as deployment
    defs = deployment()

    instance = dg.DagsterInstance.ephemeral()
    planned = [Planned("documents", "CC-TEST|0001", "missing"), Planned("duplicate_clusters", "CC-TEST", "missing")]
    backfill_id = launch_stale_backfill(instance, planned, defs.resolve_asset_graph())
    backfill = instance.get_backfill(backfill_id)
    assert backfill.status == private.BulkActionStatus.REQUESTED
    subset = backfill.asset_backfill_data.target_subset
    assert {(k.asset_key.path[-1], str(k.partition_key)) for k in subset.iterate_asset_partitions()} == {
        ("documents", "CC-TEST|0001"), ("duplicate_clusters", "CC-TEST")}
    assert stale_backfill_in_progress(instance)
    assert "CC-TEST" in instance.get_dynamic_partitions("crawl")  # registered before the backfill


def test_run_health_results_and_tags_are_what_the_daemon_reads():
    result = private.CheckRunHealthResult(private.WorkerStatus.FAILED, "gone")
    assert (result.status, result.msg) == (private.WorkerStatus.FAILED, "gone")
    assert {private.WorkerStatus.RUNNING, private.WorkerStatus.FAILED} <= set(private.WorkerStatus)
    assert (private.RUN_KEY_TAG, private.SENSOR_NAME_TAG, private.GRPC_INFO_TAG, private.DATA_VERSION_TAG,
            private.TICK_ID_TAG, private.CODE_VERSION_TAG) == (
        "dagster/run_key", "dagster/sensor_name", ".dagster/grpc_info", "dagster/data_version", "dagster/tick",
        "dagster/code_version")
    assert (private.ASSET_PARTITION_RANGE_START_TAG, private.ASSET_PARTITION_RANGE_END_TAG) == (
        "dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
    assert private.USER_TAG == "user"  # what the UI's "Launched by" shows for a run launched from the CLI
    assert {private.TickStatus.FAILURE, private.TickStatus.SUCCESS, private.TickStatus.SKIPPED} <= set(
        private.TickStatus)


def test_the_workspace_and_grpc_names_take_the_arguments_the_tests_pass():
    assert {"host", "port"} <= set(inspect.signature(private.DagsterGrpcClient.__init__).parameters)
    assert callable(private.DagsterGrpcClient.ping)
    # the run launcher tells a restarted code server from the one that launched a run by its id
    assert "timeout" in inspect.signature(private.DagsterGrpcClient.get_server_id).parameters
    assert {"instance", "workspace_load_target"} <= set(
        inspect.signature(private.WorkspaceProcessContext.__init__).parameters)
    assert private.WorkspaceFileTarget(paths=["workspace.yaml"]).paths == ["workspace.yaml"]
    selector = private.JobSubsetSelector(location_name="llm_assets", repository_name="__repository__",
                                         job_name="release_job", op_selection=None,
                                         asset_selection=[dg.AssetKey("tokenizer")])
    assert selector.asset_selection == {dg.AssetKey("tokenizer")}


def test_the_backfill_loop_reads_the_interval_run_daemon_sets_when_it_starts():
    """run_daemon() shortens the backfill loop by setting the controller's interval before the daemon starts: the
    loop must still read it from there at its start, and `dagster-daemon`'s click group must still have `run`."""
    import dagster._daemon.controller as controller
    from dagster._daemon.backfill import execute_backfill_iteration_loop
    from dagster._daemon.cli import cli

    assert isinstance(controller.DEFAULT_DAEMON_INTERVAL_SECONDS, int | float)
    source = inspect.getsource(execute_backfill_iteration_loop)
    assert "from dagster._daemon.controller import DEFAULT_DAEMON_INTERVAL_SECONDS" in source
    assert "DEFAULT_DAEMON_INTERVAL_SECONDS - loop_duration" in source
    assert "run" in cli.commands and {"workspace"} <= {p.name for p in cli.commands["run"].params}
