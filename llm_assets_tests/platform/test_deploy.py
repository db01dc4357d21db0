"""The production topology of `llm-assets deploy up`, started as a user starts it, on free loopback ports: a real
PostgreSQL (Debian's server, run as its `postgres` user), the embedded object store, a Dask cluster, and Dagster's
code server, daemon and webserver, each a separate process kept alive by the supervisor, the instance on
dagster-postgres and the code location loaded through workspace.yaml's gRPC entry.

Through it, one module's worth of work on one crawl (one shard, units run in the run's process): a dropped WARC is
run by the raw-drop sensor; `llm-assets backfill --stale --wait` builds the rest; the UI shows the charts; the code
server SIGKILLed with a run's worker is started again and the run queued behind comes through; `deploy down` leaves
nothing. The UI's charts test runs here, on the deployment's webserver, because the backfill already made its data.

Nothing here asserts a duration: every wait polls a condition until a generous deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psutil
import pytest
import yaml

from llm_assets.platform.deploy import Layout, read_env_file
from llm_assets.platform.embedded_store import free_ports
from llm_assets.platform.partitions import covers
from llm_assets.settings import DEFAULT_SETTINGS
from llm_assets_support.shared_data import shared
from llm_assets_tests.platform.test_instance_run_monitoring import wait_for

pytestmark = pytest.mark.filterwarnings("ignore:Error loading repository location:UserWarning")

BIN = Path(sys.executable).parent
CRAWL = "CC-MAIN-2032-10"
PARTITION = f"{CRAWL}|0000"
SENSOR_TAG = "dagster/sensor_name"
# A whole chain (lake, crawl-level, curated, enriched, release) of one WARC file on a loaded 2-core machine.
RUN_DEADLINE_S = 1200


@dataclass
class Topology:
    home: Path
    env: dict[str, str]
    port: int
    instance: dg.DagsterInstance

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "llm-assets"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def status(self) -> dict:
        done = self.cli("deploy", "status", "--json")
        return json.loads(done.stdout)

    def service(self, name: str) -> dict:
        """What the supervisor says of one service now (its state file: polled, so no process is started)."""
        return next(s for s in json.loads(Layout(self.home).services_file.read_text()) if s["name"] == name)

    def drop(self, file: Path, name: str) -> None:
        done = self.cli("drop", str(file), "--crawl", CRAWL, "--as", name)
        assert done.returncode == 0, done.stderr

    def sensor_runs(self) -> list[dg.DagsterRun]:
        return list(self.instance.get_runs(dg.RunsFilter(tags={SENSOR_TAG: "raw_drop_sensor"})))

    def wait_run(self, run_id: str, status: dg.DagsterRunStatus) -> None:
        def reached():
            current = self.instance.get_run_by_id(run_id).status
            if current != status and current in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE,
                                                 dg.DagsterRunStatus.CANCELED):
                messages = "\n".join(e.message or "" for e in self.instance.all_logs(run_id))
                pytest.fail(f"run {run_id} ended {current.value}, expected {status.value}:\n{messages[-5000:]}")
            return current == status

        wait_for(reached, f"run {run_id} to be {status.value}", RUN_DEADLINE_S)

    def new_sensor_run(self, known: set[str]) -> dg.DagsterRun:
        return wait_for(lambda: next((r for r in self.sensor_runs() if r.run_id not in known), None),
                        "a run requested by the raw-drop sensor", RUN_DEADLINE_S)

    def processes(self) -> list[psutil.Process]:
        """Every process of the deployment: the supervisor, each service's process groups and their children."""
        state = Layout(self.home)
        services = json.loads(state.services_file.read_text())
        groups = {g for s in services for g in s["groups"]}
        found = {p for p in psutil.process_iter() if _pgid(p.pid) in groups}
        supervisor = state.supervisor_pid()
        if supervisor:
            found.add(psutil.Process(supervisor))
        for process in list(found):  # the store's and the cluster's servers run in sessions of their own
            try:
                found |= set(process.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        return sorted(found, key=lambda p: p.pid)


def _weeds(topology) -> list[psutil.Process]:
    """The deployment's running `weed` processes (a process that ends while they are listed is none of them)."""
    def weed(p: psutil.Process) -> bool:
        try:
            return p.name() == "weed" and _alive(p)
        except psutil.NoSuchProcess:
            return False

    return [p for p in topology.processes() if weed(p)]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


@pytest.fixture(scope="module")
def topology():
    # PostgreSQL runs as the `postgres` user: the folders above its data must be traversable by it, which pytest's
    # private temporary folders are not.
    root = Path(tempfile.mkdtemp(prefix="llm-assets-deploy-", dir="/tmp"))
    root.chmod(0o711)
    home = root / "home"
    settings = yaml.safe_load(DEFAULT_SETTINGS.read_text())
    settings["shards"] = 1
    settings["runner"] = {"kind": "inprocess"}
    settings["sensor"]["interval_seconds"] = 5
    (root / "settings.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "DAGSTER_", "LLM_ASSETS_"))}  # the deployment's own store and instance
    env |= {"LLM_ASSETS_HOME": str(home), "LLM_ASSETS_SETTINGS": str(root / "settings.yaml")}
    (port,) = free_ports(1)
    patch = pytest.MonkeyPatch()
    instance = None
    try:
        up = subprocess.run([str(BIN / "llm-assets"), "deploy", "up", "--nodes", "2", "--port", str(port)], env=env,
                            capture_output=True, text=True, timeout=900)
        assert up.returncode == 0, f"{up.stdout}\n{up.stderr}"
        dagster_home = Layout(home).dagster_home
        for key, value in read_env_file(dagster_home / "postgres.env").items():
            patch.setenv(key, value)
        instance = dg.DagsterInstance.from_config(str(dagster_home))
        yield Topology(home, env, port, instance)
    finally:
        if instance is not None:
            instance.dispose()
        patch.undo()
        subprocess.run([str(BIN / "llm-assets"), "deploy", "down"], env=env, timeout=300)
        shutil.rmtree(root, ignore_errors=True)


def test_each_service_is_a_separate_process_on_loopback(topology):
    status = topology.status()
    services = {s["name"]: s for s in status["services"]}
    assert set(services) == {"postgres", "store", "cluster", "code-server", "daemon", "webserver"}
    assert all(s["state"] == "ready" for s in services.values()), services
    pids = [s["pid"] for s in services.values()]
    assert len(set(pids)) == len(pids) and status["supervisor"] not in pids
    assert all(psutil.pid_exists(pid) for pid in pids)
    assert psutil.Process(services["postgres"]["pid"]).username() == ("postgres" if os.geteuid() == 0 else
                                                                     psutil.Process().username())
    # the instance is the deployment's PostgreSQL, on the port the supervisor gave it
    assert type(topology.instance.run_storage).__name__ == "PostgresRunStorage"
    assert os.environ["DAGSTER_PG_PORT"] == str(services["postgres"]["port"])

    listening = set()
    for process in topology.processes():
        try:
            listening |= {c.laddr.ip.removeprefix("::ffff:") for c in process.net_connections(kind="inet")
                          if c.status == psutil.CONN_LISTEN}
        except psutil.NoSuchProcess:
            pass
    assert listening == {"127.0.0.1"}
    # its state is private: the database's password, PostgreSQL's data, the logs
    layout = Layout(topology.home)
    assert (layout.root.stat().st_mode & 0o777) == 0o700
    assert (layout.postgres_env.stat().st_mode & 0o777) == 0o600
    assert ((topology.home / "postgres" / "data").stat().st_mode & 0o777) == 0o700
    assert "DAGSTER_PG_PASSWORD" not in topology.cli("deploy", "status").stdout
    with urllib.request.urlopen(f"http://127.0.0.1:{topology.port}/server_info", timeout=10) as response:
        assert response.status == 200


def test_a_dropped_warc_is_run_by_the_sensor(topology):
    topology.drop(shared("warc", "dolma__sample-0000.warc.gz"), "dolma-0000.warc.gz")
    run = topology.new_sensor_run(set())
    assert run.job_name == "lake_job" and covers(run.tags, PARTITION)  # a new crawl: its shards in one run
    topology.wait_run(run.run_id, dg.DagsterRunStatus.SUCCESS)


def test_a_stale_backfill_completes_though_postgresql_is_lost_under_its_run(topology):
    """The backfill of what the sensor's run left stale (the crawl-level and curated stages, the release), with
    PostgreSQL killed under its first run as `lose_postgresql_under` does: the run lost to the database is retried,
    the backfill waits for the retry before its next job, and it completes with no failure."""
    import re

    from llm_assets.platform.backfills import Status, get_stale_backfill, runs_of

    launched = topology.cli("backfill", "--stale")
    assert launched.returncode == 0, f"{launched.stdout}\n{launched.stderr}"
    backfill_id = re.match(r"backfill (\S+): ", launched.stdout).group(1)
    first = wait_for(lambda: next(iter(topology.instance.get_runs(
        runs_of(backfill_id, [dg.DagsterRunStatus.STARTED]), limit=1)), None), "the backfill's first run to start",
        RUN_DEADLINE_S)
    lose_postgresql_under(topology, first)
    ended = wait_for(lambda: (b := _quietly(lambda: get_stale_backfill(topology.instance, backfill_id))) is not None
                     and not b.in_progress and b, f"backfill {backfill_id} to end", RUN_DEADLINE_S * 2)
    runs = topology.instance.get_runs(runs_of(backfill_id))
    print(f"\nbackfill {backfill_id}: {ended.status}; runs {[(r.job_name, r.status.value) for r in runs]}")
    assert ended.status == Status.SUCCEEDED
    lost = topology.instance.get_run_by_id(first.run_id)
    assert lost.status == dg.DagsterRunStatus.FAILURE and any(
        r.tags.get("dagster/parent_run_id") == first.run_id and r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    done = topology.cli("backfill", "--status", backfill_id)
    assert done.returncode == 0 and "completed" in done.stdout.splitlines()[-1], f"{done.stdout}\n{done.stderr}"
    assert topology.cli("stale").stdout.strip() == "nothing is stale"


def test_the_ui_shows_the_charts_as_images(topology, tmp_path):
    """The deployment's webserver, headless Chromium: a crawl's stats page and a shard partition's page of
    `filtered` show their charts as images of the panel's width."""
    from llm_assets_support.browser import chromium

    crawl, shard = PARTITION.split("|")
    port = topology.port
    with chromium() as page:
        for asset, partition, chart in (("crawl_stats", crawl, "funnel_chart"),
                                        ("filtered", f"{crawl}|{shard}", "filter_funnel_chart")):
            page.goto(f"http://127.0.0.1:{port}/assets/{asset}?view=partitions&partition={partition}")
            width, shown = page.show_chart(chart)
            page.screenshot(tmp_path / f"{asset}.png")
            assert width == 720, asset
            assert any(w >= 400 and h >= 150 for w, h in shown), (asset, shown)  # on screen, not a broken icon


def _location_loaded(port: int) -> bool:
    """The webserver's view of the code location: loaded, without an error."""
    query = b'{"query": "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus ' \
            b'locationOrLoadError { __typename } } } } }"}'
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=query,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        entries = json.loads(response.read())["data"]["workspaceOrError"]["locationEntries"]
    return [(e["name"], e["loadStatus"], e["locationOrLoadError"]["__typename"]) for e in entries] == [
        ("llm_assets", "LOADED", "RepositoryLocation")]


def test_a_code_server_killed_with_a_run_worker_is_started_again_and_the_queue_goes_on(topology):
    """The failure `dg dev` did not survive: a code server killed together with a run's worker, a run of the same
    partition queued behind it. The queued run is dequeued while the code server may still be restarting, waits for
    it (the run coordinator's retries) and succeeds; a run requested afterwards succeeds too, and the UI reloads the
    code location by itself."""
    known = {r.run_id for r in topology.sensor_runs()}
    topology.drop(shared("warc", "dolma__sample-0001.warc.gz"), "dolma-0001.warc.gz")
    running = topology.new_sensor_run(known)
    topology.wait_run(running.run_id, dg.DagsterRunStatus.STARTED)
    worker = wait_for(lambda: topology.instance.run_launcher._worker_pid(running.run_id), "the worker's pid")[0]
    os.kill(worker, signal.SIGSTOP)  # held mid-run, so that the next run of its partition waits in the queue
    try:
        topology.drop(shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz"), "whirlwind.warc.gz")
        queued = topology.new_sensor_run(known | {running.run_id})
        topology.wait_run(queued.run_id, dg.DagsterRunStatus.QUEUED)
        code_server = topology.service("code-server")
        os.kill(code_server["pid"], signal.SIGKILL)
    finally:
        os.kill(worker, signal.SIGKILL)
    killed_at = time.monotonic()
    topology.wait_run(running.run_id, dg.DagsterRunStatus.FAILURE)
    wait_for(lambda: topology.service("code-server")["restarts"] >= 1
             and topology.service("code-server")["state"] == "ready", "the supervisor to restart the code server")
    back_after = time.monotonic() - killed_at
    print(f"\ncode server and run worker SIGKILLed -> code server serving again after {back_after:.1f} s")
    assert topology.service("code-server")["pid"] != code_server["pid"]
    wait_for(lambda: _location_loaded(topology.port), "the webserver to reload the code location")

    topology.wait_run(queued.run_id, dg.DagsterRunStatus.SUCCESS)
    waited = [e.message for e in topology.instance.all_logs(queued.run_id)
              if (e.message or "").startswith("Run dequeue failed to reach the user code server")]
    print(f"the queued run succeeded; what it said while waiting for the code server: {waited}")
    # ... and a run requested after the restart, by the daemon's sensor on the restarted code server
    topology.drop(shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"), "resiliparse.warc.gz")
    after = topology.new_sensor_run(known | {running.run_id, queued.run_id})
    topology.wait_run(after.run_id, dg.DagsterRunStatus.SUCCESS)


def test_a_killed_store_comes_back_under_the_supervisor_alone(topology):
    """`weed` SIGKILLed under `deploy up`: it was a zombie of its wrapper, whose liveness called it alive, so nothing
    restarted it. Now the wrapper ends, the supervisor starts the store again, one `weed` serves, and a drop after
    it is run by the sensor."""
    known = {r.run_id for r in topology.sensor_runs()}
    store = topology.service("store")
    (first,) = _weeds(topology)
    first.kill()
    wait_for(lambda: topology.service("store")["restarts"] > store["restarts"]
             and topology.service("store")["state"] == "ready", "the supervisor to start the store again")
    (again,) = wait_for(lambda: _weeds(topology) or None, "the store's new weed")
    assert again.pid != first.pid and topology.cli("deploy", "status").returncode == 0
    topology.drop(shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz"), "whirlwind-after-kill.warc.gz")
    topology.wait_run(topology.new_sensor_run(known).run_id, dg.DagsterRunStatus.SUCCESS)
    assert [p.pid for p in _weeds(topology)] == [again.pid]  # no second store


def test_a_paused_store_is_named_and_no_command_starts_a_second_one(topology):
    """`weed` SIGSTOPped under `deploy up`: a `drop` fails saying the deployment's store is paused, and starts no
    store of its own (which would move the store's ports and fight over its data); resumed, the same drop goes
    through, its run succeeds, and one `weed` serves."""
    (weed,) = _weeds(topology)
    known = {r.run_id for r in topology.sensor_runs()}
    file = shared("warc", "pywb__iana.warc.gz")
    weed.suspend()
    try:
        paused = topology.cli("drop", str(file), "--crawl", CRAWL, "--as", "iana-while-paused.warc.gz", timeout=120)
    finally:
        weed.resume()
    assert paused.returncode != 0
    assert f"its process {weed.pid} is paused" in paused.stderr and "starts no store of its own" in paused.stderr
    assert [p.pid for p in _weeds(topology)] == [weed.pid]
    topology.drop(file, "iana-after-pause.warc.gz")
    topology.wait_run(topology.new_sensor_run(known).run_id, dg.DagsterRunStatus.SUCCESS)


def test_a_run_that_lost_postgresql_is_retried_and_builds_its_partition(topology):
    """PostgreSQL SIGKILLed under a live run and kept down (its supervisor paused) until the run's worker, which
    cannot write its events, has given up; then the supervisor starts PostgreSQL again. The run lost to the database
    is retried by the daemon, and the retry builds the partition: nothing was lost but time, so nothing is left
    failed. (A restart within a second or two is ridden out by Dagster's own reconnects: no run fails.)"""
    known = {r.run_id for r in topology.sensor_runs()}
    topology.drop(shared("warc", "aut__example.IAH-2008-archive.org.warc.gz"), "archive-org-2008.warc.gz")
    running = topology.new_sensor_run(known)
    topology.wait_run(running.run_id, dg.DagsterRunStatus.STARTED)
    lose_postgresql_under(topology, running)

    def built():
        group = [*(_quietly(lambda: topology.instance.get_runs(dg.RunsFilter(
            tags={"dagster/root_run_id": running.run_id}))) or []), _quietly(
                lambda: topology.instance.get_run_by_id(running.run_id))]
        return next((r for r in group if r is not None and r.status == dg.DagsterRunStatus.SUCCESS), None)

    retry = wait_for(built, "a retry of the run to succeed", RUN_DEADLINE_S)
    first = topology.instance.get_run_by_id(running.run_id)
    messages = [e.message for e in topology.instance.all_logs(running.run_id) if e.message]
    print(f"\nrun {running.run_id} without its database: {first.status.value} "
          f"({first.tags.get('dagster/failure_reason')}); {messages[-3:]}; retried as {retry.run_id}")
    assert first.status == dg.DagsterRunStatus.FAILURE
    assert retry.tags.get("dagster/parent_run_id") == running.run_id and covers(retry.tags, PARTITION)


def lose_postgresql_under(topology, run: dg.DagsterRun) -> None:
    """PostgreSQL SIGKILLed under the started run and kept down (its supervisor paused) until the run's worker, which
    cannot write its events, has given up; then the supervisor starts it again."""
    worker = psutil.Process(wait_for(lambda: topology.instance.run_launcher._worker_pid(run.run_id),
                                     "the worker's pid")[0])
    supervisor = psutil.Process(Layout(topology.home).supervisor_pid())
    postgres = topology.service("postgres")
    worker.suspend()
    supervisor.suspend()
    try:
        os.kill(postgres["pid"], signal.SIGKILL)
        worker.resume()
        wait_for(lambda: not _alive(worker), "the run worker to give up without its database", RUN_DEADLINE_S)
    finally:
        supervisor.resume()
        if _alive(worker):
            worker.resume()
    wait_for(lambda: topology.service("postgres")["restarts"] > postgres["restarts"]
             and topology.service("postgres")["state"] == "ready", "the supervisor to start PostgreSQL again")


def _quietly(read):
    """A read of the instance while its database restarts: None when it refuses."""
    try:
        return read()
    except Exception:  # the database's driver errors, whichever driver
        return None


def test_deploy_down_leaves_no_process(topology):
    processes = topology.processes()
    assert len(processes) > 6
    done = topology.cli("deploy", "down", timeout=300)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: not [p for p in processes if _alive(p)], "every process of the deployment to end", 60)
    assert topology.cli("deploy", "status").stdout.strip() == "stopped"


def test_the_supervisor_starts_a_dead_service_again_and_stop_ends_every_process(tmp_path):
    """The process layer alone (what `ui`, the demo and `deploy up` build on), on two small real services."""
    from llm_assets.platform.deploy import Service, port_open, start_services

    (port,) = free_ports(1)
    server = Service("server", (sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)), port=port)
    # a service with a child of its own, as a code server has run workers
    parent = Service("parent", (sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, "
                                "'-c', 'import time; time.sleep(600)']); time.sleep(600)"))
    supervisor = start_services(tmp_path / "state", [server, parent], timeout_s=60)
    try:
        def state(name):
            return next(s for s in supervisor.status() if s.name == name)

        first = state("server").pid
        assert port_open(port) and state("parent").state == "ready"
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: state("server").restarts == 1 and state("server").state == "ready", "the server again")
        assert state("server").pid != first and port_open(port)
        wait_for(lambda: psutil.Process(state("parent").pid).children(), "the parent's child")
        processes = [psutil.Process(state("server").pid), psutil.Process(state("parent").pid),
                     *psutil.Process(state("parent").pid).children()]
        assert json.loads((tmp_path / "state" / "services.json").read_text())[0]["restarts"] == 1
    finally:
        supervisor.stop()
    assert not [p for p in processes if _alive(p)]
    assert {s.state for s in supervisor.status()} == {"stopped"} and not port_open(port)
    assert ((tmp_path / "state").stat().st_mode & 0o777) == 0o700
