"""Rebuilding from the UI, on a real deployment: a code server of the llm-assets code location, a `dagster-daemon
run` (sensors, the run queue) and a bucket of its own on the test store. `stale_sensor`, turned on as the UI's
toggle does, launches a stale backfill that `stale_backfill_sensor` runs to the end, job by job, its runs under
their jobs; a partition whose run failed is planned by `llm-assets stale`, rebuilt by `llm-assets backfill --stale`,
and, with the sensor on, rebuilt with no other action.

Nothing here asserts a duration: every wait polls a condition until a generous deadline.
"""

import json
import re
import subprocess
import uuid

import dagster as dg
import pytest
import yaml

from llm_assets import cli
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.definitions import build_defs
from llm_assets.platform.backfills import (
    Status,
    get_stale_backfill,
    runs_of,
    stale_backfills,
    stale_backfills_in_progress,
)
from llm_assets.platform.dagster_private import TickStatus
from llm_assets.platform.deploy import free_port
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import DEFAULT_SETTINGS, Settings
from llm_assets.tools.stale import stale_partitions
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import point_at
from llm_assets_tests.platform.test_instance_run_monitoring import Deployment, wait_for

pytestmark = pytest.mark.filterwarnings("ignore:Error loading repository location:UserWarning")

CRAWL = "CC-MAIN-2031-05"
# The whole chain (lake, crawl-level, curated, enriched, release) of one WARC file, run by the daemon's sensors
# on a loaded 2-core machine: minutes, not seconds.
BACKFILL_DEADLINE_S = 1200


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
    data["sensor"] = {**data.get("sensor", {}), "interval_seconds": 5}  # a backfill's next job waits on a tick
    good = tmp_path / "settings.yaml"
    good.write_text(yaml.safe_dump(data, sort_keys=False))
    # a free port is closed again when free_port returns: nothing listens there
    data["runner"] = {"kind": "dask", "address": f"tcp://127.0.0.1:{free_port()}", "connect_timeout_s": 1}
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
        # The raw-drop sensor (on by default) would build the drop itself: here only the stale sensor builds.
        deployment.start_daemon(wanted=("SENSOR", "QUEUED_RUN_COORDINATOR"), stopped=("raw_drop_sensor",))
        lake.put_file(f"raw/{CRAWL}/dolma-0000.warc.gz", shared("warc", "dolma__sample-0000.warc.gz"))
        yield deployment, lake, Settings.from_file(good), Settings.from_file(broken)
    finally:
        deployment.close()


def known_backfills(deployment: Deployment) -> set[str]:
    return {b.backfill_id for b in stale_backfills(deployment.instance)}


def sensor_failed(deployment: Deployment, name: str) -> None:
    """A tick that fails says why at once, rather than at the deadline."""
    sensor = deployment.remote_sensor(name)
    ticks = deployment.instance.get_ticks(sensor.get_remote_origin_id(), sensor.selector_id, limit=1)
    if ticks and ticks[0].status == TickStatus.FAILURE:
        pytest.fail(f"{name}'s tick failed: {ticks[0].error.to_string() if ticks[0].error else ''}")


def wait_backfill(deployment: Deployment, known: set[str], trigger: str):
    """The stale backfill launched from `trigger` ("sensor" or "cli") that is not in `known`, once it ended; it
    must have succeeded, every run under an asset job."""
    def launched():
        if trigger == "sensor":
            sensor_failed(deployment, "stale_sensor")
        return next((b for b in stale_backfills(deployment.instance)
                     if b.backfill_id not in known and b.trigger == trigger), None)

    backfill = wait_for(launched, f"a stale backfill from the {trigger}", BACKFILL_DEADLINE_S,
                        alive=[deployment.daemon])

    def ended():
        sensor_failed(deployment, "stale_backfill_sensor")
        current = get_stale_backfill(deployment.instance, backfill.backfill_id)
        return current if not current.in_progress else None

    done = wait_for(ended, f"backfill {backfill.backfill_id} to end", BACKFILL_DEADLINE_S, alive=[deployment.daemon])
    assert done.status == Status.SUCCEEDED, done
    runs = deployment.instance.get_runs(runs_of(done.backfill_id))
    assert runs and not [r.job_name for r in runs if r.job_name.startswith("__")]  # none is a "jobless" run
    return done, runs


def assert_one_job_at_a_time(deployment: Deployment, backfill_id: str, order: list[str]) -> None:
    """Every job in `order` ran in the backfill, each of its runs created once every run of the job before ended."""
    records = deployment.instance.get_run_records(runs_of(backfill_id))
    assert set(order) <= {r.dagster_run.job_name for r in records}, [r.dagster_run.job_name for r in records]
    for before, after in zip(order, order[1:], strict=False):
        assert max(r.end_time for r in records if r.dagster_run.job_name == before) <= min(
            r.create_timestamp.timestamp() for r in records if r.dagster_run.job_name == after), (before, after)


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
    first, runs = wait_backfill(deployment, set(), "sensor")
    assert ("tokenized", partition) in first.planned
    assert_one_job_at_a_time(deployment, first.backfill_id,
                             ["lake_job", "crawl_job", "curated_job", "release_job", "cost_job"])
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
    assert not stale_backfills_in_progress(deployment.instance)  # nothing launched

    # `backfill --stale` rebuilds it
    known = known_backfills(deployment)
    assert cli.main(["backfill", "--stale"]) == 0
    capsys.readouterr()
    retried, _ = wait_backfill(deployment, known, "cli")
    # planned with everything after it, but each next job is planned anew once the one before ended: the rebuilt
    # partition holds what it held, so nothing after it changes but the cost its rebuild added to the ledger
    assert_one_job_at_a_time(deployment, retried.backfill_id, ["lake_job", "cost_job"])
    assert {r.dagster_run.job_name for r in deployment.instance.get_run_records(runs_of(retried.backfill_id))} == {
        "lake_job", "cost_job"}
    assert stale_partitions(deployment.instance, lake, settings) == []

    # With the sensor on, a failed partition is rebuilt with no other action.
    run_id = fail_lake_run(deployment, broken)
    assert (("raw_files", partition), f"failed (run {run_id[:8]})") in {
        ((p.asset, p.partition), p.cause) for p in stale_partitions(deployment.instance, lake, settings)}
    known = known_backfills(deployment)
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
    runs = deployment.instance.get_runs(runs_of(backfill_id))
    assert failed and set(failed) == {r.run_id for r in runs if r.status == dg.DagsterRunStatus.FAILURE}, err
    assert re.fullmatch(rf"backfill {backfill_id} failed: {len(failed)} runs? failed \(.+\); each is marked FAILED "
                        "above with its first error and run id", err.strip().splitlines()[-1]), err
    assert cli.main(["backfill", "--status"]) == 1
    assert capsys.readouterr().err == err


def test_a_backfill_runs_the_jobs_that_wait_on_no_other_job_still_to_run():
    from llm_assets.dagster.freshness import next_jobs, parents_of
    from llm_assets.definitions import build_defs

    order = ["curation_job", "lake_job", "crawl_job", "curated_job", "release_job", "enrich_job", "cost_job"]
    parents = parents_of(build_defs(Settings.from_file(DEFAULT_SETTINGS)).resolve_asset_graph())
    plan = [("release", ""), ("tokenized", "C|0000"), ("enriched", "C|0000"), ("filtered", "C|0000"),
            ("duplicate_clusters", "C"), ("cost", "C")]
    assert next_jobs(plan, order, (), parents) == {"lake_job": [("filtered", "C|0000")]}
    assert next_jobs(plan, order, ("lake_job",), parents) == {"crawl_job": [("duplicate_clusters", "C")]}
    # the release and the enrichment wait on the curated stages alone: they run together; the cost waits on both
    assert next_jobs(plan, order, ("lake_job", "crawl_job", "curated_job"), parents) == {
        "release_job": [("release", "")], "enrich_job": [("enriched", "C|0000")]}
    assert next_jobs(plan, order, ("lake_job", "crawl_job", "curated_job", "release_job", "enrich_job"),
                     parents) == {"cost_job": [("cost", "C")]}
    assert next_jobs(plan, order, order, parents) == {}
    # a job whose planned assets wait on nothing planned runs at once, beside the first
    assert next_jobs([("filtered", "C|0000"), ("release", "")], order, (), parents) == {
        "lake_job": [("filtered", "C|0000")]}
    assert next_jobs([("tokenized", "C|0000"), ("enriched", "C|0001")], order, (), parents) == {
        "curated_job": [("tokenized", "C|0000")], "enrich_job": [("enriched", "C|0001")]}


def test_a_jobs_runs_group_the_partitions_that_need_the_same_assets():
    from llm_assets.dagster.freshness import level_requests
    from llm_assets.platform.backfills import STALE_TAG, StaleBackfill

    settings = Settings.from_file(DEFAULT_SETTINGS).model_copy(update={"shards": 4, "partitions_per_run": 2})
    backfill = StaleBackfill("abcdefgh", "cli", (), {"user": "me"})
    level = [("documents", "C|0000"), ("filtered", "C|0000"), ("filtered", "C|0001"), ("filtered", "C|0002"),
             ("documents", "C|0003"), ("filtered", "C|0003")]
    requests = level_requests(backfill, "lake_job", level, settings)
    got = [(sorted(k.path[-1] for k in r.asset_selection), str(r.partition_key) if r.partition_key else
            (r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"]))
           for r in requests]
    assert got == [(["documents", "filtered"], "C|0000"), (["documents", "filtered"], "C|0003"),
                   (["filtered"], ("C|0001", "C|0002"))]
    assert all(r.job_name == "lake_job" and r.tags[STALE_TAG] == "abcdefgh" and r.tags["user"] == "me"
               for r in requests)
    assert len({r.run_key for r in requests}) == 3  # a repeated tick launches none twice


def test_a_run_waiting_for_its_retry_is_in_flight_and_one_a_retry_replaced_did_not_fail():
    """A run that lost the instance's database fails and is retried (Dagster's run retries): until the retry is
    launched the backfill waits for it, and once a retry replaced it, it is not one of the backfill's failures."""
    import uuid

    from llm_assets.platform.backfills import STALE_TAG, runs_failed, runs_in_flight
    from llm_assets.platform.dagster_private import AUTO_RETRY_RUN_ID_TAG

    instance = dg.DagsterInstance.ephemeral()

    def add(status: dg.DagsterRunStatus, **tags: str) -> str:
        run_id = str(uuid.uuid4())
        instance.add_run(dg.DagsterRun(job_name="lake_job", run_id=run_id, status=status,
                                       tags={STALE_TAG: "b", **tags}))
        return run_id

    add(dg.DagsterRunStatus.SUCCESS)
    assert not runs_in_flight(instance, "b") and runs_failed(instance, "b") == 0
    lost = add(dg.DagsterRunStatus.FAILURE, **{"dagster/will_retry": "true"})
    assert runs_in_flight(instance, "b") and runs_failed(instance, "b") == 1
    retry = add(dg.DagsterRunStatus.STARTED)
    instance.add_run_tags(lost, {AUTO_RETRY_RUN_ID_TAG: retry})
    assert runs_in_flight(instance, "b")  # the retry runs
    instance.handle_run_event(retry, dg.DagsterEvent(event_type_value="PIPELINE_SUCCESS", job_name="lake_job"))
    assert not runs_in_flight(instance, "b") and runs_failed(instance, "b") == 0
    add(dg.DagsterRunStatus.FAILURE)  # no retry: a failure of the backfill
    assert not runs_in_flight(instance, "b") and runs_failed(instance, "b") == 1
