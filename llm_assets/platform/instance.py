"""The local Dagster instance: DAGSTER_HOME under the state folder, configured by the repository's dagster.yaml.

Every Dagster process (daemon, webserver, code servers, run workers) imports this module to build the run launcher
that dagster.yaml names, so its top level imports nothing of the project but `dagster_private` (Dagster only).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from llm_assets.platform.dagster_private import GRPC_INFO_TAG, USER_TAG, CheckRunHealthResult, WorkerStatus

# A worker's pid is trusted only for a process created before the worker reported that pid (plus this much clock
# slack), so a pid the OS handed out again after the worker died does not look like the worker.
# the local instance's configuration, at the repository's top (the project root, without importing the project)
INSTANCE_YAML = Path(__file__).resolve().parents[2] / "dagster.yaml"
PID_REUSE_SLACK_S = 10.0
# A run whose worker died with its code server is failed once its code server answers again (or after this long), so
# that Dagster's retry of it, launched at once through that code server, finds it: a supervised code server is back
# within seconds (restart, then ~12 s to load the code location on a busy 2-core machine).
CODE_SERVER_WAIT_S = 120.0
# How long the launcher waits for the code server it just launched a run through to say its id. It answered the launch
# a moment ago, so only load makes it slow; a run launched without the id would later look lost with its server
# (and be retried) when its worker is killed. A server that is gone refuses at once, whatever the timeout.
LAUNCH_ID_TIMEOUT_S = 60
# Dagster's run-retries tag: how many times the retry daemon may re-execute a failed run (dagster.yaml: run_retries).
MAX_RETRIES_TAG = "dagster/max_retries"
# What the launcher records on a run as it launches it: the code server's id (one per server process) and how many
# processes the kernel's OOM killer had killed in this cgroup by then.
CODE_SERVER_ID_TAG = "llm-assets/code_server_id"
OOM_KILLS_TAG = "llm-assets/oom_kills_at_launch"
# The concurrency pools the project's assets name (`pool=`; dagster.yaml: concurrency.pools). `fan_in`: the stages
# that read every shard of a crawl, or every crawl.
FAN_IN_POOL = "fan_in"
POOLS = (FAN_IN_POOL,)


class LocalRunLauncher(dg.DefaultRunLauncher):
    """Dagster's DefaultRunLauncher, plus the worker health check its run monitoring needs, and the choice of which
    dead runs Dagster's run retries may launch again.

    The DefaultRunLauncher does not implement `check_run_worker_health`, so Dagster's run monitoring never looks at
    a STARTED run of a local code server. When a worker dies with its code server (`dagster dev` killed, a crash of
    the machine's services, a reboot), nothing is left to report the failure: the run stays STARTED forever and keeps
    its slot in the queue. Here the monitoring daemon checks the worker's pid, which the worker itself recorded in
    the run's event log; a worker that is gone makes Dagster mark the run failed.

    Which of those runs is retried (dagster.yaml's `run_retries` retries none unless a run says so): a worker lost
    with its code server was lost to the platform, and its run is tagged for one retry, unless the kernel's OOM
    killer killed a process of this cgroup while it ran. So is a worker that ended while the instance's PostgreSQL
    server restarted under it (the server started after the run did): a worker that cannot write its events ends.
    Another worker killed while its code server lived was killed by the OOM killer or by a person, and is not
    retried: from the outside both are a SIGKILL. On PostgreSQL (`deploy up`) every run is launched tagged for one
    retry, because the code server may be first to report the worker's end (`exited with code 1`, its events
    unwritable while the database restarted), and the retry is decided as the failure is recorded; the checks above
    take it back where they apply. A step that failed is never retried (`retry_on_asset_or_op_failure: false`).
    """

    def __init__(self, inst_data=None):
        super().__init__(inst_data=inst_data)
        self._gone_since: dict[str, float] = {}  # run id -> when its worker was first found gone

    def launch_run(self, context) -> None:
        super().launch_run(context)
        tags = {}
        if (server := _code_server_id(context.dagster_run.run_id, self._instance, LAUNCH_ID_TIMEOUT_S)) is not None:
            tags[CODE_SERVER_ID_TAG] = server
        if (kills := oom_kills()) is not None:
            tags[OOM_KILLS_TAG] = str(kills)
        if _on_postgres(self._instance) and MAX_RETRIES_TAG not in context.dagster_run.tags:
            tags[MAX_RETRIES_TAG] = "1"  # what ends a worker the code server then reports may be the database
        if tags:
            self._instance.add_run_tags(context.dagster_run.run_id, tags)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        if not _runs_on_this_host(run):
            return CheckRunHealthResult(WorkerStatus.RUNNING, "the run worker is on another host: not checked")
        worker = self._worker_pid(run.run_id)
        if worker is None:  # STARTED only just now, or started by something that records no pid
            return CheckRunHealthResult(WorkerStatus.RUNNING, "the run worker has not reported its pid")
        pid, reported_at = worker
        if _alive(pid, reported_at):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"run worker process {pid} is alive")
        gone = f"run worker process {pid} is gone"
        if GRPC_INFO_TAG not in run.tags:  # executed in-process by a command: no code server, no retry
            return CheckRunHealthResult(WorkerStatus.FAILED, f"{gone} (killed, or it crashed)")
        server = _code_server_id(run.run_id, self._instance)
        if server is not None and server == run.tags.get(CODE_SERVER_ID_TAG):
            if self._database_restarted_under(run):
                return CheckRunHealthResult(WorkerStatus.FAILED, f"{gone}: the instance's database restarted while "
                                            f"it ran, and a worker that cannot write its events ends: "
                                            f"{self._retry(run)}")
            return CheckRunHealthResult(WorkerStatus.FAILED, f"{gone}, killed while its code server lived: "
                                        f"out of memory or stopped on purpose, {self._no_retry(run)}")
        if server is None:
            if run.run_id not in self._gone_since:
                self._gone_since[run.run_id] = time.monotonic()
                self._instance.report_engine_event(
                    f"{gone} and its code server does not answer: the run is failed (and retried) once the code "
                    f"server is back, or in {CODE_SERVER_WAIT_S:.0f} s", run)
            if time.monotonic() - self._gone_since[run.run_id] < CODE_SERVER_WAIT_S:
                return CheckRunHealthResult(WorkerStatus.RUNNING, f"{gone}: waiting for its code server")
        self._gone_since.pop(run.run_id, None)
        return CheckRunHealthResult(WorkerStatus.FAILED, f"{gone} with its code server: {self._retry(run)}")

    def _retry(self, run: dg.DagsterRun) -> str:
        """Tag the run for one retry by Dagster's run retries, unless the OOM killer struck while it ran; say which."""
        at_launch, now = run.tags.get(OOM_KILLS_TAG), oom_kills()
        if at_launch is not None and now is not None and now > int(at_launch):
            return (f"the kernel's OOM killer killed {now - int(at_launch)} process(es) of this cgroup while it ran: "
                    f"{self._no_retry(run)}")
        if MAX_RETRIES_TAG not in run.tags:  # a retry keeps its parent's tag, and Dagster counts the run's group
            self._instance.add_run_tags(run.run_id, {MAX_RETRIES_TAG: "1"})
        return "lost to the platform, retried once"

    def _no_retry(self, run: dg.DagsterRun) -> str:
        """Tag the run for no retry (on PostgreSQL, its launch tagged it for one); say so."""
        if run.tags.get(MAX_RETRIES_TAG, "0") != "0":
            self._instance.add_run_tags(run.run_id, {MAX_RETRIES_TAG: "0"})
        return "not retried"

    def _database_restarted_under(self, run: dg.DagsterRun) -> bool:
        """Whether the instance's PostgreSQL server started after the run did (never, on other storage)."""
        record = self._instance.get_run_record_by_id(run.run_id)
        started = _database_started_at(self._instance)
        return record is not None and record.start_time is not None and started is not None \
            and started > record.start_time

    def _worker_pid(self, run_id: str) -> tuple[int, float] | None:
        """The pid of the first engine event that names one: the run worker ("Started process for run (pid: N)"),
        or for a run executed in-process, the process that executes its steps."""
        records = self._instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=20).records
        for record in records:
            entry = record.event_log_entry
            pid = entry.dagster_event.engine_event_data.metadata.get("pid") if entry.dagster_event else None
            if pid is not None:
                return int(str(pid.value)), entry.timestamp  # Dagster records it as text
        return None


def _on_postgres(instance: dg.DagsterInstance) -> bool:
    try:
        from dagster_postgres import PostgresRunStorage
    except ImportError:
        return False
    return isinstance(instance.run_storage, PostgresRunStorage)


def _database_started_at(instance: dg.DagsterInstance) -> float | None:
    """When the instance's PostgreSQL server last started, in epoch seconds; None on other storage."""
    if not _on_postgres(instance):
        return None
    import sqlalchemy as db

    with instance.run_storage.connect() as connection:  # type: ignore[attr-defined]
        return float(connection.execute(db.text("SELECT EXTRACT(EPOCH FROM pg_postmaster_start_time())")).scalar())


def _code_server_id(run_id: str, instance: dg.DagsterInstance, timeout_s: int = 5) -> str | None:
    """The id of the code server at the address the run was launched through (one per server process), or None when
    nothing answers there."""
    from llm_assets.platform.dagster_private import DagsterGrpcClient

    run = instance.get_run_by_id(run_id)
    info = json.loads((run.tags.get(GRPC_INFO_TAG) if run else None) or "{}")
    if "port" not in info and "socket" not in info:
        return None
    try:
        client = DagsterGrpcClient(port=info.get("port"), socket=info.get("socket"), host=info.get("host", "localhost"),
                                   use_ssl=bool(info.get("use_ssl")))
        return client.get_server_id(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - unreachable, restarting, or gone: all mean "no server there now"
        return None


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed in this process's memory cgroup (cgroup v2
    `memory.events`, v1 `memory.oom_control`), or None where the kernel does not say (not Linux, no memory
    controller). The count covers the whole cgroup: another service's kill in it also counts."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidates += [Path(f"/sys/fs/cgroup{path}") / "memory.events", Path("/sys/fs/cgroup/memory.events")]
        elif "memory" in controllers.split(","):
            candidates += [Path(f"/sys/fs/cgroup/memory{path}") / "memory.oom_control",
                           Path("/sys/fs/cgroup/memory/memory.oom_control")]
    for candidate in candidates:
        try:
            if match := re.search(r"^oom_kill (\d+)$", candidate.read_text(), re.MULTILINE):
                return int(match.group(1))
        except OSError:
            continue
    return None


def _runs_on_this_host(run: dg.DagsterRun) -> bool:
    """Runs launched through a code server on a unix socket or a loopback address (all of this project's) run here;
    a pid from another host would say nothing."""
    grpc_info = json.loads(run.tags.get(GRPC_INFO_TAG) or "{}")
    return "socket" in grpc_info or grpc_info.get("host", "localhost") in {
        "localhost", "127.0.0.1", "::1", socket.gethostname()}


def _alive(pid: int, reported_at: float) -> bool:
    import psutil  # only the monitoring daemon asks; every process that loads the code location imports this module

    try:
        process = psutil.Process(pid)
        return process.create_time() <= reported_at + PID_REUSE_SLACK_S and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # cannot tell: never fail a run on a guess
        return True


def dagster_home() -> Path:
    """Point DAGSTER_HOME (unless already set) at the instance of this state home: while `llm-assets deploy up`
    runs, the deployment's (PostgreSQL); else the embedded SQLite one, with the repository's dagster.yaml linked in it.
    The deployment's database connection is loaded from its file (DAGSTER_HOME/postgres.env) when present. The
    project's concurrency pools get their limits there."""
    home = _home()
    with dg.DagsterInstance.get() as instance:
        configure_pools(instance)
    return home


def _home() -> Path:
    from llm_assets.platform import environment

    deployment = Layout(environment.home())
    if os.environ.get("DAGSTER_HOME"):
        home = Path(os.environ["DAGSTER_HOME"])
    elif deployment.supervisor_pid() is not None:
        home = deployment.dagster_home
    else:
        home = environment.home() / "dagster"
    # private, and private what Dagster writes into it (run storage, event logs, compute logs): see private_dir
    environment.private_dir(home)
    config = home / "dagster.yaml"
    source = INSTANCE_YAML
    if config.is_symlink() and not config.exists():  # a link to where the file used to be
        config.unlink()
    if not config.exists() and source.exists():
        config.symlink_to(source)
    os.environ["DAGSTER_HOME"] = str(home)
    for key, value in read_env_file(home / "postgres.env").items():
        os.environ.setdefault(key, value)
    return home


def read_env_file(path: Path) -> dict[str, str]:
    """The file's `NAME=value` lines, or nothing when it is absent."""
    from llm_assets.core.lake import read_env_file as read  # the lake's reader (polars and boto3: not at start-up)

    try:
        return read(path)
    except OSError:
        return {}


@dataclass(frozen=True)
class Layout:
    """Where a deployment keeps its state, under the state home."""

    home: Path

    @property
    def root(self) -> Path:
        return self.home / "deploy"

    @property
    def pid_file(self) -> Path:
        return self.root / "supervisor.pid"

    @property
    def log(self) -> Path:
        return self.root / "supervisor.log"

    @property
    def ports_file(self) -> Path:
        return self.root / "ports.json"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    @property
    def postgres_env(self) -> Path:
        return self.dagster_home / "postgres.env"

    @property
    def services_file(self) -> Path:
        return self.root / "services.json"

    def supervisor_pid(self) -> int | None:
        import psutil  # here: every Dagster process imports this module, and not psutil at start-up

        try:
            pid = int(self.pid_file.read_text())
            return pid if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
        except (OSError, ValueError, psutil.NoSuchProcess):
            return None


def configure_pools(instance: dg.DagsterInstance) -> None:
    """Give each of the project's pools the instance's default limit before any run is queued in it. Dagster does so
    itself only when its run queue first meets a run of a pool, and in that same pass it treats the pool as
    unlimited: two runs of a new pool queued together would both start. A limit set by hand is kept."""
    known = {pool.name for pool in instance.event_log_storage.get_pool_limits()}
    for pool in POOLS:
        if pool not in known:
            instance.event_log_storage.initialize_concurrency_limit_to_default(pool)


def get_instance() -> dg.DagsterInstance:
    """The instance of DAGSTER_HOME (see `dagster_home`), its pools configured."""
    _home()
    instance = dg.DagsterInstance.get()
    configure_pools(instance)
    return instance


def launched_by(command: str) -> dict[str, str]:
    """The tag that makes the UI's "Launched by" name who launched a run or backfill from the command line (the
    `user` tag; a sensor's runs carry the sensor's name instead, a backfill's runs the backfill's tags)."""
    return {USER_TAG: f"{getpass.getuser()} (llm-assets {command})"}
