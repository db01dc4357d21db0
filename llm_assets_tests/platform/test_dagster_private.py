"""Dagster's private API, used as this project uses it (llm_assets/platform/dagster_private.py). A Dagster upgrade
that moves or changes one of these names fails here, by name, before it fails a run."""

from __future__ import annotations

import inspect

import dagster as dg

from llm_assets.dagster.freshness import launch_stale_backfill, stale_backfill, stale_backfill_in_progress
from llm_assets.platform import dagster_private as private
from llm_assets.tools.stale import Planned


def test_the_installed_dagster_is_the_one_the_private_names_were_checked_with():
    assert dg.__version__ == private.CHECKED_WITH, (
        f"Dagster {dg.__version__} is installed, llm_assets/platform/dagster_private.py was checked with "
        f"{private.CHECKED_WITH}: run this file's tests, fix what fails, then update CHECKED_WITH")


def test_a_stale_backfill_is_kept_in_the_instances_key_value_store_and_seen_in_progress():
    instance = dg.DagsterInstance.ephemeral()
    assert private.instance_values(instance, {"llm-assets/test"}) == {}
    private.set_instance_values(instance, {"llm-assets/test": "1"})
    private.set_instance_values(instance, {"llm-assets/test": "2", "llm-assets/new": "3"})  # replaced, and added
    assert private.instance_values(instance, {"llm-assets/test", "llm-assets/new", "absent"}) == {
        "llm-assets/test": "2", "llm-assets/new": "3"}

    planned = [Planned("documents", "CC-TEST|0001", "missing"), Planned("duplicate_clusters", "CC-TEST", "missing")]
    backfill_id = launch_stale_backfill(instance, planned)
    assert stale_backfill(instance, backfill_id).planned == (("documents", "CC-TEST|0001"),
                                                              ("duplicate_clusters", "CC-TEST"))
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
    assert private.AUTO_RETRY_RUN_ID_TAG == "dagster/auto_retry_run_id"  # on a failed run: its retry
    failed = dg.DagsterRun(job_name="j", run_id="r", status=dg.DagsterRunStatus.FAILURE,
                           tags={"dagster/will_retry": "true"})
    assert failed.is_complete_and_waiting_to_retry  # (public, but reads the two tags above)
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


def test_the_daemons_command_line_still_has_run():
    from dagster._daemon.cli import cli

    assert "run" in cli.commands and {"workspace"} <= {p.name for p in cli.commands["run"].params}
