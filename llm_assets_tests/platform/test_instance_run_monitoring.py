"""Dead runs do not block the queue, runs lost to the platform are retried once and no other, and a killed run
leaves no process behind: tested on a real deployment, a `dagster-daemon run` and a `dagster api grpc` code server
on 127.0.0.1, configured by the project's dagster.yaml (polling every second instead of every 30 s), running the
tiny jobs of run_monitoring_job.py. Run workers are killed with SIGKILL.

Nothing here asserts a duration: every wait polls a condition until a generous deadline.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest
import yaml

from llm_assets.platform.dagster_private import GRPC_INFO_TAG
from llm_assets.platform.deploy import free_port
from llm_assets.platform.instance import MAX_RETRIES_TAG, _alive, _runs_on_this_host, configure_pools
from llm_assets_tests import run_monitoring_job as job_module

# Killing the code server makes Dagster warn, in this process too, that it cannot load the code location.
pytestmark = pytest.mark.filterwarnings("ignore:Error loading repository location:UserWarning")

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEADLINE_S = 120
LOCATION = "run_monitoring"
# Dagster's run-retries tags: whether the daemon will re-execute a failed run, and the run it launched to do so.
WILL_RETRY_TAG = "dagster/will_retry"
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"


def wait_for(condition, what: str, deadline_s: float = DEADLINE_S, alive=()):
    """Poll `condition` until it returns something truthy; fail after the deadline or when a process in `alive` died."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        for process in alive:
            if process.poll() is not None:
                pytest.fail(f"{process.args[0]} exited ({process.returncode}) while waiting for {what}")
        time.sleep(0.25)
    pytest.fail(f"gave up after {deadline_s} s waiting for {what}")


def stop_group(process: subprocess.Popen) -> None:
    """Stop a process started in its own session, with everything it spawned (run workers, log tailers)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):  # politely, then whatever is left of the group
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            pass


class Deployment:
    """DAGSTER_HOME, code server and daemon of one test module; every process it starts is stopped in close().
    The code location is `module` (this module's tiny job by default), its processes' environment this one's and
    `env`."""

    def __init__(self, root: Path, module: str = job_module.__name__, location: str = LOCATION,
                 env: dict[str, str] | None = None):
        self.module, self.location = module, location
        self.home = root / "dagster_home"
        self.files = root / "files"  # the job's pid and release files
        self.home.mkdir()
        self.files.mkdir()
        self.port = free_port()
        self.processes: list[subprocess.Popen] = []
        self.env = dict(os.environ, **(env or {}), DAGSTER_HOME=str(self.home), RUN_MONITORING_DIR=str(self.files),
                        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))

        config = yaml.safe_load((REPO / "dagster.yaml").read_text())
        # The project's settings, polled faster so the test is short. Dagster waits in 0.5 s steps between
        # monitoring iterations and the setting is an int: 1 s is the shortest poll that is not a busy loop.
        config["run_monitoring"]["poll_interval_seconds"] = 1
        config["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
        (self.home / "dagster.yaml").write_text(yaml.safe_dump(config))
        self.workspace_file = self.home / "workspace.yaml"
        self.workspace_file.write_text(yaml.safe_dump({"load_from": [
            {"grpc_server": {"host": "127.0.0.1", "port": self.port, "location_name": location}}]}))

        # Create the SQLite storage before any other process opens it: concurrent first opens race on the schema.
        self.instance = dg.DagsterInstance.from_config(str(self.home))
        self.instance.get_runs(limit=1)
        configure_pools(self.instance)  # as every llm-assets command does on its instance
        self.context = None

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen:
        with open(self.home / log, "ab") as out:
            process = subprocess.Popen(args, env=self.env, cwd=self.home, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.processes.append(process)
        return process

    def start_code_server(self) -> None:
        from llm_assets.platform.dagster_private import DagsterGrpcClient

        self.code_server = self._spawn(
            [str(BIN / "dagster"), "api", "grpc", "--host", "127.0.0.1", "--port", str(self.port),
             "--module-name", self.module, "--working-directory", str(REPO), "--location-name", self.location],
            "code_server.log")
        client = DagsterGrpcClient(host="127.0.0.1", port=self.port)

        def serving():
            try:
                return client.ping("up")
            except Exception:
                return False

        wait_for(serving, "the code server", alive=[self.code_server])

    def start_daemon(self, wanted=("QUEUED_RUN_COORDINATOR", "MONITORING", "EVENT_LOG_CONSUMER"),
                     stopped: tuple[str, ...] = ()) -> None:
        """The daemon, the sensors named `stopped` turned off before it starts (its first pass over the sensors
        could otherwise evaluate one turned off while it runs)."""
        from llm_assets.platform.dagster_private import WorkspaceFileTarget, WorkspaceProcessContext

        self.context = WorkspaceProcessContext(self.instance, WorkspaceFileTarget(paths=[str(self.workspace_file)]))
        for name in stopped:
            self.stop_sensor(name)
        self.daemon = self._spawn([sys.executable, "-m", "llm_assets.platform.deploy", "run-daemon", "--workspace",
                                   str(self.workspace_file)], "daemon.log")
        wait_for(lambda: set(wanted) <= set(self.instance.get_daemon_heartbeats()), "the daemon's first heartbeats",
                 alive=[self.daemon])

    def listening_addresses(self) -> set[str]:
        addresses = set()
        for process in self.processes:
            try:
                family = [process.pid] + [c.pid for c in psutil.Process(process.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for pid in family:
                try:
                    connections = psutil.Process(pid).net_connections(kind="inet")
                except psutil.NoSuchProcess:
                    continue
                addresses |= {c.laddr.ip.removeprefix("::ffff:") for c in connections  # IPv4 on an IPv6 socket
                              if c.status == psutil.CONN_LISTEN}
        return addresses

    def submit(self, shard: str, job_def: dg.JobDefinition = job_module.blocking_job, tags: dict | None = None) -> str:
        """Queue one run of the job for partition crawl-a|<shard>, with the tags Dagster gives a partition's run."""
        request = self.context.create_request_context()
        location = request.get_code_location(self.location)
        repo = location.get_repository(next(iter(location.get_repositories())))
        job = repo.get_full_job(job_def.name)
        key = dg.MultiPartitionKey({"crawl": "crawl-a", "shard": shard})
        tags = {**job_def.get_tags_for_partition_key(key, None), **(tags or {})}
        plan = location.get_execution_plan(job, {}, step_keys_to_execute=None, known_state=None,
                                           instance=self.instance)
        run = self.instance.create_run(
            job_name=job.name, run_id=None, run_config={}, resolved_op_selection=None, step_keys_to_execute=None,
            op_selection=None, status=None, root_run_id=None, parent_run_id=None, tags=tags,
            job_snapshot=job.job_snapshot, execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=None, remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(), asset_selection=None, asset_check_selection=None,
            asset_graph=repo.asset_graph)
        return self.instance.submit_run(run.run_id, request).run_id

    def remote_sensor(self, name: str):
        """The sensor as the daemon and the UI see it (from the code server)."""
        location = self.context.create_request_context().get_code_location(self.location)
        return location.get_repository(next(iter(location.get_repositories()))).get_sensor(name)

    def start_sensor(self, name: str) -> None:
        """Turn a sensor on, as its toggle in the UI does."""
        self.instance.start_sensor(self.remote_sensor(name))

    def stop_sensor(self, name: str) -> None:
        sensor = self.remote_sensor(name)
        self.instance.stop_sensor(sensor.get_remote_origin_id(), sensor.selector_id, sensor)

    def status(self, run_id: str) -> dg.DagsterRunStatus:
        return self.instance.get_run_by_id(run_id).status

    def wait_status(self, run_id: str, status: dg.DagsterRunStatus) -> None:
        def reached():
            current = self.status(run_id)
            if current != status and current in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE,
                                                 dg.DagsterRunStatus.CANCELED):
                pytest.fail(f"run {run_id} ended {current.value}, expected {status.value}:\n{self.messages(run_id)}")
            return current == status

        wait_for(reached, f"run {run_id} to be {status.value}", alive=[self.daemon])

    def wait_running(self, run_id: str) -> int:
        """Wait until the run's op runs; return its run worker's pid, checked against what Dagster recorded."""
        pid_file = job_module.pid_file(self.files, run_id)
        wait_for(pid_file.exists, f"run {run_id} to run its op", alive=[self.daemon])
        self.wait_status(run_id, dg.DagsterRunStatus.STARTED)
        pid = int(pid_file.read_text())
        assert f"Started process for run (pid: {pid})." in self.messages(run_id)
        assert psutil.Process(pid) in psutil.Process(self.code_server.pid).children(recursive=True)
        return pid

    def tag(self, run_id: str, key: str) -> str:
        """A tag the run gets when it fails (Dagster's `dagster/will_retry`, ...): polled for, as Dagster writes it
        just after the run's status."""
        return wait_for(lambda: self.instance.get_run_by_id(run_id).tags.get(key), f"tag {key} on run {run_id}")

    def release(self, run_id: str) -> None:
        job_module.release_file(self.files, run_id).touch()

    def messages(self, run_id: str) -> str:
        return "\n".join(entry.message or "" for entry in self.instance.all_logs(run_id))

    def close(self) -> None:
        if self.context is not None:
            self.context.__exit__(None, None, None)
        for process in reversed(self.processes):
            stop_group(process)
        self.instance.dispose()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    deployment = Deployment(tmp_path_factory.mktemp("run_monitoring"))
    try:
        deployment.start_code_server()
        deployment.start_daemon()
        assert deployment.listening_addresses() == {"127.0.0.1"}
        yield deployment
    finally:
        deployment.close()


def test_killed_worker_fails_its_run_and_frees_its_partition(deployment):
    # Queued in this order, the first run of partition crawl-a|0 starts; the second of crawl-a|0 waits, while the
    # run of crawl-a|1 starts beside the first.
    first = deployment.submit("0")
    same = deployment.submit("0")
    other = deployment.submit("1")
    first_pid = deployment.wait_running(first)
    deployment.wait_running(other)
    assert deployment.status(same) == dg.DagsterRunStatus.QUEUED  # it was passed over when `other` was dequeued
    deployment.release(other)
    deployment.wait_status(other, dg.DagsterRunStatus.SUCCESS)
    assert deployment.status(same) == dg.DagsterRunStatus.QUEUED  # a slot is free, the partition is not

    os.kill(first_pid, signal.SIGKILL)
    killed_at = time.monotonic()
    deployment.wait_status(first, dg.DagsterRunStatus.FAILURE)
    print(f"\nkilled worker -> run FAILURE in {time.monotonic() - killed_at:.1f} s")
    messages = deployment.messages(first)
    assert "SIGKILL" in messages or f"run worker process {first_pid} is gone" in messages, messages

    assert deployment.tag(first, WILL_RETRY_TAG) == "false"  # killed while its code server lived: not retried
    deployment.wait_running(same)  # the dead run no longer holds its partition
    deployment.release(same)
    deployment.wait_status(same, dg.DagsterRunStatus.SUCCESS)


def test_worker_dead_with_its_code_server_is_failed_and_retried_once(deployment):
    # Without a code server to notice, only the monitoring daemon can: this run used to stay STARTED forever. It is
    # failed once the code server is back, so that Dagster's retry, launched through it at once, finds it.
    run = deployment.submit("1")
    pid = deployment.wait_running(run)
    os.kill(deployment.code_server.pid, signal.SIGKILL)  # first, so that it cannot report the worker's death
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: "does not answer" in deployment.messages(run), "the monitoring daemon to find the worker gone")
    assert deployment.status(run) == dg.DagsterRunStatus.STARTED  # waiting for its code server, not failed yet

    deployment.start_code_server()  # as the deployment's supervisor would after a crash
    deployment.context.reload_code_location(LOCATION)  # the test's own view of it; the daemon finds it by itself
    deployment.wait_status(run, dg.DagsterRunStatus.FAILURE)
    print(f"\nkilled worker and code server -> run FAILURE in {time.monotonic() - killed_at:.1f} s")
    assert f"run worker process {pid} is gone with its code server: lost to the platform, retried once" \
        in deployment.messages(run)
    assert deployment.tag(run, WILL_RETRY_TAG) == "true"

    retry = deployment.tag(run, AUTO_RETRY_RUN_ID_TAG)
    assert deployment.instance.get_run_by_id(retry).parent_run_id == run
    deployment.wait_running(retry)  # through the new code server
    deployment.release(retry)
    deployment.wait_status(retry, dg.DagsterRunStatus.SUCCESS)
    # once: a retry that failed the same way would not be retried again (Dagster counts the run's group)
    assert deployment.instance.get_run_by_id(retry).tags[MAX_RETRIES_TAG] == "1"


def test_run_failing_on_its_input_is_not_retried(deployment):
    # Even a run that allows a retry: a step that failed (bad input, a bug) would fail again.
    run = deployment.submit("0", job_module.bad_input_job, tags={MAX_RETRIES_TAG: "1"})
    deployment.wait_status(run, dg.DagsterRunStatus.FAILURE)
    assert deployment.tag(run, "dagster/failure_reason") == "STEP_FAILURE"
    assert deployment.tag(run, WILL_RETRY_TAG) == "false"
    assert AUTO_RETRY_RUN_ID_TAG not in deployment.instance.get_run_by_id(run).tags


def test_killed_run_worker_takes_its_process_pool_with_it(deployment):
    # SIGKILL, as the OOM killer sends it, while the worker's pool runs units: the fork server and the pool workers
    # go with it (they used to stay alive for good), and the run is not retried (its code server lived: out of
    # memory or stopped on purpose, both a SIGKILL from the outside).
    run = deployment.submit("0", job_module.pool_job)
    pid = deployment.wait_running(run)
    worker = psutil.Process(pid)

    wait_for(lambda: len(job_module.running_units(deployment.files, run)) >= 2, "both pool workers to run a unit")
    family = worker.children(recursive=True)  # the pool's fork server and workers, its resource tracker, log tailers
    assert sum("multiprocessing.forkserver" in " ".join(p.cmdline()) for p in family) >= 3, family
    worker.send_signal(signal.SIGKILL)

    def gone(process: psutil.Process) -> bool:
        try:
            return process.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_for(lambda: all(gone(p) for p in family), "every process of the killed run worker to end", deadline_s=30)
    deployment.wait_status(run, dg.DagsterRunStatus.FAILURE)
    assert deployment.tag(run, WILL_RETRY_TAG) == "false"


def test_runs_in_one_pool_wait_for_each_other_in_the_queue(deployment):
    # Two runs of the `fan_in` pool (limit 1 by default) in different partitions: the second waits in the queue,
    # holding no run slot, while a run outside the pool submitted after it goes ahead.
    first = deployment.submit("0", job_module.fan_in_job)
    second = deployment.submit("1", job_module.fan_in_job)
    deployment.wait_running(first)
    other = deployment.submit("2")
    deployment.wait_running(other)
    assert deployment.status(second) == dg.DagsterRunStatus.QUEUED  # passed over when `other` was dequeued
    deployment.release(first)
    deployment.wait_status(first, dg.DagsterRunStatus.SUCCESS)
    deployment.wait_running(second)  # the pool's slot is free
    for run in (second, other):
        deployment.release(run)
        deployment.wait_status(run, dg.DagsterRunStatus.SUCCESS)


def test_worker_health_check_on_real_processes():
    me = psutil.Process()
    assert _alive(me.pid, reported_at=me.create_time())
    # the same pid reported long before this process was created: the pid was handed out again
    assert not _alive(me.pid, reported_at=me.create_time() - 3600)
    child = subprocess.Popen(["true"])
    wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, "an exited, unreaped child")
    assert not _alive(child.pid, reported_at=time.time())  # exited: a zombie is no worker
    child.wait()
    assert not _alive(child.pid, reported_at=time.time())

    def run(grpc_info=None):
        tags = {GRPC_INFO_TAG: json.dumps(grpc_info)} if grpc_info else {}
        return dg.DagsterRun(job_name="job", tags=tags)

    assert _runs_on_this_host(run({"host": "localhost", "socket": "/tmp/x"}))
    assert _runs_on_this_host(run({"host": "127.0.0.1", "port": 4000}))
    assert _runs_on_this_host(run())  # executed in-process, here
    assert not _runs_on_this_host(run({"host": "10.0.0.7", "port": 4000}))  # its pid means nothing here
