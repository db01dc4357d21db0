"""The local Dagster instance: DAGSTER_HOME under the state folder, configured by the repository's deploy/local/dagster.yaml.

Every Dagster process (daemon, webserver, code servers, run workers) imports this module to build the run launcher
that dagster.yaml names, so its top level imports nothing of the project but `dagster_private` (Dagster only).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from pathlib import Path

import dagster as dg
import psutil

from llm_assets.dagster_private import GRPC_INFO_TAG, USER_TAG, CheckRunHealthResult, WorkerStatus

# A worker's pid is trusted only for a process created before the worker reported that pid (plus this much clock
# slack), so a pid the OS handed out again after the worker died does not look like the worker.
PID_REUSE_SLACK_S = 10.0


class LocalRunLauncher(dg.DefaultRunLauncher):
    """Dagster's DefaultRunLauncher, plus the worker health check its run monitoring needs.

    The DefaultRunLauncher does not implement `check_run_worker_health`, so Dagster's run monitoring never looks at
    a STARTED run of a local code server. When a worker dies with its code server (`dagster dev` killed, the OOM
    killer, a reboot), nothing is left to report the failure: the run stays STARTED forever and keeps its slot in
    the queue. Here the monitoring daemon checks the worker's pid, which the worker itself recorded in the run's
    event log; a worker that is gone makes Dagster mark the run failed.
    """

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
        return CheckRunHealthResult(WorkerStatus.FAILED, f"run worker process {pid} is gone (killed, or it crashed)")

    def _worker_pid(self, run_id: str) -> tuple[int, float] | None:
        """The pid of the first engine event that names one: the run worker ("Started process for run (pid: N)"),
        or for a run executed in-process, the process that executes its steps."""
        records = self._instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=20).records
        for record in records:
            entry = record.event_log_entry
            pid = entry.dagster_event.engine_event_data.metadata.get("pid") if entry.dagster_event else None
            if pid is not None:
                return int(pid.value), entry.timestamp
        return None


def _runs_on_this_host(run: dg.DagsterRun) -> bool:
    """Runs launched through a code server on a unix socket or a loopback address (all of this project's) run here;
    a pid from another host would say nothing."""
    grpc_info = json.loads(run.tags.get(GRPC_INFO_TAG) or "{}")
    return "socket" in grpc_info or grpc_info.get("host", "localhost") in {
        "localhost", "127.0.0.1", "::1", socket.gethostname()}


def _alive(pid: int, reported_at: float) -> bool:
    try:
        process = psutil.Process(pid)
        return process.create_time() <= reported_at + PID_REUSE_SLACK_S and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # cannot tell: never fail a run on a guess
        return True


def dagster_home() -> Path:
    """Point DAGSTER_HOME (unless already set) at the instance of this state home: while `llm-assets deploy up`
    runs, the deployment's (PostgreSQL); else the embedded SQLite one, with deploy/local/dagster.yaml linked in it.
    The deployment's database connection is loaded from its file (DAGSTER_HOME/postgres.env) when present."""
    from llm_assets import environment
    from llm_assets.deploy import Layout
    from llm_assets.settings import PROJECT_ROOT

    deployment = Layout(environment.home())
    if os.environ.get("DAGSTER_HOME"):
        home = Path(os.environ["DAGSTER_HOME"])
    elif deployment.supervisor_pid() is not None:
        home = deployment.dagster_home
    else:
        home = environment.home() / "dagster"
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        config = home / "dagster.yaml"
        source = PROJECT_ROOT / "deploy" / "local" / "dagster.yaml"
        if config.is_symlink() and not config.exists():  # a link to where the file used to be
            config.unlink()
        if not config.exists() and source.exists():
            config.symlink_to(source)
    os.environ["DAGSTER_HOME"] = str(home)
    from llm_assets.deploy import read_env_file

    for key, value in read_env_file(home / "postgres.env").items():
        os.environ.setdefault(key, value)
    return home


def get_instance():
    dagster_home()
    return dg.DagsterInstance.get()


def launched_by(command: str) -> dict[str, str]:
    """The tag that makes the UI's "Launched by" name who launched a run or backfill from the command line (the
    `user` tag; a sensor's runs carry the sensor's name instead, a backfill's runs the backfill's tags)."""
    return {USER_TAG: f"{getpass.getuser()} (llm-assets {command})"}
