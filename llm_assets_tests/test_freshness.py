"""Rebuilding from the UI, on a real deployment: a code server of the llm-assets code location, a `dagster-daemon
run` (sensors, backfills, the run queue) and a bucket of its own on the test store. `stale_sensor`, turned on as
the UI's toggle does, requests a backfill that the daemon runs to the end; a partition whose run failed is planned
by `llm-assets stale`, rebuilt by `llm-assets backfill --stale`, and, with the sensor on, rebuilt with no other
action.

Nothing here asserts a duration: every wait polls a condition until a generous deadline.
"""

import json
import re
import socket
import subprocess
import uuid

import dagster as dg
import pytest
import yaml

from llm_assets import cli
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.dagster_private import BulkActionStatus, TickStatus
from llm_assets.definitions import build_defs
from llm_assets.freshness import STALE_TAG
from llm_assets.partitions import crawl_shard_key
from llm_assets.settings import DEFAULT_SETTINGS, Settings
from llm_assets.stale import stale_partitions
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import point_at
from llm_assets_tests.test_instance_run_monitoring import Deployment, wait_for

pytestmark = pytest.mark.filterwarnings("ignore:Error loading repository location:UserWarning")

CRAWL = "CC-MAIN-2031-05"
# The whole chain (lake, crawl-level, curated, enriched, release) of one WARC file, run by the daemon's backfills
# on a loaded 2-core machine: minutes, not seconds.
BACKFILL_DEADLINE_S = 1200


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: nothing listens there


@pytest.fixture
def setup(tmp_path, seaweed, monkeypatch):
    """A bucket of its own (the sensor plans every crawl of its bucket), settings with one shard and units run in
    the run's process, and the same settings with a runner that cannot be reached: a run under them fails at its
    first stage, while every code version stays the same (the runner is part of none)."""
    bucket = f"stale-sensor-{uuid.uuid4().hex[:8]}"
    config = StoreConfig(endpoint=seaweed.endpoint, bucket=bucket, region="us-east-1",
                         credentials_file=str(seaweed.credentials_file))
    lake = Lake(config)
    lake.s3.create_bucket(Bucket=bucket)
    data = yaml.safe_load(DEFAULT_SETTINGS.read_text())
    data["shards"] = 1
    data["runner"] = {"kind": "inprocess"}
    good = tmp_path / "settings.yaml"
    good.write_text(yaml.safe_dump(data, sort_keys=False))
    data["runner"] = {"kind": "dask", "address": f"tcp://127.0.0.1:{closed_port()}", "connect_timeout_s": 1}
    broken = tmp_path / "unreachable-runner.yaml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False))

    point_at(monkeypatch, seaweed, tmp_path / "home")
    monkeypatch.setenv("LLM_ASSETS_BUCKET", bucket)
    monkeypatch.setenv("LLM_ASSETS_SETTINGS", str(good))
    (tmp_path / "deployment").mkdir()
    deployment = Deployment(tmp_path / "deployment", module="llm_assets.definitions", location="llm_assets")
    monkeypatch.setenv("DAGSTER_HOME", str(deployment.home))  # the CLI's instance is the deployment's
    try:
        deployment.start_code_server()
        deployment.start_daemon(wanted=("SENSOR", "BACKFILL", "QUEUED_RUN_COORDINATOR"))
        # The raw-drop sensor (on by default) would build the drop itself: here only the stale sensor builds.
        deployment.stop_sensor("raw_drop_sensor")
        lake.put_file(f"raw/{CRAWL}/dolma-0000.warc.gz", shared("warc", "dolma__sample-0000.warc.gz"))
        yield deployment, lake, Settings.from_file(good), Settings.from_file(broken)
    finally:
        deployment.close()


def wait_backfill(deployment: Deployment, known: set[str], source: str):
    """The stale backfill launched from `source` ("sensor" or "cli") that is not in `known`, once it ended; it
    must have succeeded."""
    def launched():
        if source == "sensor":  # a tick that fails says why at once, rather than at the deadline
            sensor = deployment.remote_sensor("stale_sensor")
            ticks = deployment.instance.get_ticks(sensor.get_remote_origin_id(), sensor.selector_id, limit=1)
            if ticks and ticks[0].status == TickStatus.FAILURE:
                pytest.fail(f"stale_sensor's tick failed: {ticks[0].error.to_string() if ticks[0].error else ''}")
        return next((b for b in deployment.instance.get_backfills(limit=20)
                     if b.backfill_id not in known and b.tags.get(STALE_TAG) == source), None)

    backfill = wait_for(launched, f"a stale backfill from the {source}", BACKFILL_DEADLINE_S, alive=[deployment.daemon])

    def ended():
        current = deployment.instance.get_backfill(backfill.backfill_id)
        return current if current.status != BulkActionStatus.REQUESTED else None

    done = wait_for(ended, f"backfill {backfill.backfill_id} to end", BACKFILL_DEADLINE_S, alive=[deployment.daemon])
    assert done.status == BulkActionStatus.COMPLETED_SUCCESS, (done.status, done.error)
    return done


def fail_lake_run(deployment: Deployment, broken: Settings) -> str:
    """A real run of lake_job for the crawl's partition that fails (its runner cannot be reached); -> its id."""
    result = build_defs(broken).resolve_job_def("lake_job").execute_in_process(
        partition_key=crawl_shard_key(CRAWL, "0000"), instance=deployment.instance, raise_on_error=False)
    assert not result.success
    return result.run_id


def restart_code_server(deployment: Deployment, **env: str) -> None:
    """The code server again, on the same port, with `env` for it and the runs it launches. One that has not
    stopped a minute after SIGTERM is killed: what follows is about the server that replaces it (once in CI, the
    gRPC server was still draining after 60 s)."""
    deployment.code_server.terminate()
    try:
        deployment.code_server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        deployment.code_server.kill()
        deployment.code_server.wait(timeout=60)
    deployment.env.update(env)
    deployment.start_code_server()


def test_the_stale_sensor_turned_on_runs_its_backfill_and_failed_partitions_are_rebuilt(setup, capsys, tmp_path):
    deployment, lake, settings, broken = setup
    partition = f"{CRAWL}|0000"

    # Turned on as in the UI: its tick requests ONE backfill of everything missing, the daemon runs it to the end.
    deployment.start_sensor("stale_sensor")
    first = wait_backfill(deployment, set(), "sensor")
    assert ("tokenized", partition) in {(k.asset_key.path[-1], k.partition_key) for k in
                                        first.asset_backfill_data.target_subset.iterate_asset_partitions()}
    assert lake.exists(f"lake/tokenized/crawl={CRAWL}/shard=0000/_manifest.json")
    assert stale_partitions(deployment.instance, lake, settings) == []
    deployment.stop_sensor("stale_sensor")

    # A run of the committed partition fails: the lake still holds the earlier commit and looks fresh, but the
    # partition is planned, first as failed, with what follows it.
    run_id = fail_lake_run(deployment, broken)
    assert cli.main(["stale", "--json"]) == 0
    planned = {(p["asset"], p["partition"]): p["cause"] for p in json.loads(capsys.readouterr().out)["partitions"]}
    assert planned[("raw_files", partition)] == f"failed (run {run_id[:8]})"
    assert planned[("documents", partition)] == f"failed (run {run_id[:8]})"
    assert ("tokenized", partition) in planned and ("release", "") in planned

    # the dry run lists what the backfill would hold, as `stale` does
    assert cli.main(["backfill", "--stale", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split() for line in out if line.startswith("raw_files")] == [
        ["raw_files", partition, "failed", "(run", f"{run_id[:8]})"]]
    assert out[-1].startswith(f"{len(planned)} stale partitions")
    assert not deployment.instance.get_backfills(status=BulkActionStatus.REQUESTED)  # nothing launched

    # `backfill --stale` rebuilds it
    known = {b.backfill_id for b in deployment.instance.get_backfills(limit=20)}
    assert cli.main(["backfill", "--stale"]) == 0
    capsys.readouterr()
    wait_backfill(deployment, known, "cli")
    assert stale_partitions(deployment.instance, lake, settings) == []

    # With the sensor on, a failed partition is rebuilt with no other action.
    run_id = fail_lake_run(deployment, broken)
    assert (("raw_files", partition), f"failed (run {run_id[:8]})") in {
        ((p.asset, p.partition), p.cause) for p in stale_partitions(deployment.instance, lake, settings)}
    known = {b.backfill_id for b in deployment.instance.get_backfills(limit=20)}
    deployment.start_sensor("stale_sensor")
    wait_backfill(deployment, known, "sensor")
    assert stale_partitions(deployment.instance, lake, settings) == []
    status = deployment.instance.get_status_by_partition(
        dg.AssetKey("raw_files"), [partition], build_defs(settings).resolve_assets_def("raw_files").partitions_def)
    assert status == {partition: dg.AssetPartitionStatus.MATERIALIZED}

    # A backfill whose runs fail says so: with the code server's runs unable to reach their runner, `backfill
    # --stale --wait` waits for the daemon to run it, prints each failed run with its first error and where to read
    # more, and exits 1 with one line; `backfill --status` says the same afterwards.
    deployment.stop_sensor("stale_sensor")
    fail_lake_run(deployment, broken)
    restart_code_server(deployment, LLM_ASSETS_SETTINGS=str(tmp_path / "unreachable-runner.yaml"))
    capsys.readouterr()
    assert cli.main(["backfill", "--stale", "--wait"]) == 1
    out, err = capsys.readouterr()
    backfill_id = re.match(r"backfill (\S+): \d+ partitions", out).group(1)
    failed = re.findall(rf"^  FAILED \S+ {re.escape(partition)}: raw_files: ClusterUnavailable: cannot reach the Dask "
                        r"scheduler at tcp://127\.0\.0\.1:\d+.*\n"
                        r"    run ([0-9a-f-]{36}): its steps' errors and logs in "
                        r"the UI", err, re.MULTILINE)
    runs = deployment.instance.get_runs(dg.RunsFilter.for_backfill(backfill_id))
    assert failed and set(failed) == {r.run_id for r in runs if r.status == dg.DagsterRunStatus.FAILURE}, err
    assert re.fullmatch(rf"backfill {backfill_id} failed: {len(failed)} runs? failed \(.+\); each is marked FAILED "
                        "above with its first error and run id", err.strip().splitlines()[-1]), err
    assert cli.main(["backfill", "--status"]) == 1
    assert capsys.readouterr().err == err
