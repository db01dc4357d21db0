"""Dagster as a team runs it: each service a separate, supervised process on 127.0.0.1.

`llm-assets deploy up` starts a supervisor (its own process, pid file `$LLM_ASSETS_HOME/deploy/supervisor.pid`) that
starts, in order, and keeps alive:

    postgres     Debian's PostgreSQL server, its data in $LLM_ASSETS_HOME/postgres/, password (scram) auth, TCP on
                 127.0.0.1 only; run, event-log and schedule storage of the Dagster instance (dagster-postgres)
    store        the embedded object store (`llm-assets store`), when the lake is the embedded store
    cluster      the local Dask cluster (`llm-assets cluster`), when nodes > 0
    code-server  `dagster code-server start`: the code location that workspace.yaml names
    daemon       `dagster-daemon run -w workspace.yaml`: sensors, the run queue, backfills, run monitoring
    webserver    `dagster-webserver -w workspace.yaml`: the UI

A service that exits is started again after a backoff (1 s, doubling to 30 s; back to 1 s once it ran a minute),
and the supervisor logs it. `deploy down` stops them all, last started first; `deploy status` prints each one's pid,
port, state and restarts. Logs: $LLM_ASSETS_HOME/deploy/logs/<service>.log.

The process layer is reusable on its own: `start_services(state_dir, [Service(...), ...])` starts services in
order, each once the previous one is ready, supervises them from a thread and returns a `Supervisor` whose
`stop()` ends them all. `dagster_services()` is the code server + daemon (+ webserver) of any Dagster home, so
`llm-assets ui` runs them on the embedded SQLite instance the same way:

    port = free_port()
    services = start_services(home / "ui", dagster_services(port, webserver_port=3000),
                              env={**os.environ, **dagster_env(dagster_home, port)})
    ...
    services.stop()
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil
import yaml

from llm_assets.core.config import PROJECT_ROOT
from llm_assets.platform.instance import Layout, read_env_file
from llm_assets.platform.store_security import write_private

HOST = "127.0.0.1"
WORKSPACE = PROJECT_ROOT / "workspace.yaml"
POSTGRES_YAML = PROJECT_ROOT / "deploy" / "dagster.postgres.yaml"  # the deployment's storage, over dagster.yaml
LOCATION = "llm_assets"
# workspace.yaml reads the code server's address from these.
CODE_SERVER_HOST_VAR, CODE_SERVER_PORT_VAR = "LLM_ASSETS_CODE_SERVER_HOST", "LLM_ASSETS_CODE_SERVER_PORT"
BACKOFF_S = (1, 2, 4, 8, 16, 30)
HEALTHY_AFTER_S = 60.0  # a service that ran this long before exiting starts again after the first backoff step
POLL_S = 0.5
READY = "all services ready"  # what the supervisor logs once it started them all


@dataclass(frozen=True)
class Service:
    """One long-lived process: `argv` with the supervisor's environment plus `env`, in its own session.

    It is ready when `ready()` says so, or (without it) when it accepts TCP connections on 127.0.0.1:`port`, or
    (without a port) as soon as it runs. `user` runs it as another user (PostgreSQL refuses to run as root)."""

    name: str
    argv: tuple[str, ...]
    port: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    ready: Callable[[], bool] | None = None
    user: str | None = None
    cwd: str | None = None
    stop_timeout_s: float = 30.0

    def is_ready(self) -> bool:
        if self.ready is not None:
            return self.ready()
        return self.port is None or port_open(self.port)


@dataclass
class ServiceState:
    name: str
    pid: int | None
    port: int | None
    state: str  # starting | ready | restarting | stopped
    restarts: int
    log: str
    # every process group this service had: a group left behind by a restart (a run worker, a code server's child)
    # is still stopped by `stop()`
    groups: list[int] = field(default_factory=list)


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def free_port() -> int:
    from llm_assets.platform.embedded_store import free_ports

    return free_ports(1)[0]


class Supervisor:
    """Starts services in order and keeps them alive; its state is written to `state_dir/services.json`."""

    def __init__(self, state_dir: Path, services: list[Service], env: Mapping[str, str] | None = None):
        self.state_dir = state_dir
        self.services = services
        self.env = dict(os.environ if env is None else env)
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        state_dir.chmod(0o700)
        self.logs = state_dir / "logs"
        self.logs.mkdir(mode=0o700, exist_ok=True)
        self.states = {s.name: ServiceState(s.name, None, s.port, "stopped", 0, str(self.logs / f"{s.name}.log"))
                       for s in services}
        self._procs: dict[str, subprocess.Popen] = {}
        self._started: dict[str, float] = {}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def state_file(self) -> Path:
        return self.state_dir / "services.json"

    def start(self, timeout_s: float = 300.0) -> None:
        """Start each service once the one before it is ready; then supervise them all from a thread."""
        try:
            for service in self.services:
                self._launch(service)
                self._wait_ready(service, time.monotonic() + timeout_s)
        except BaseException:
            self.stop()
            raise
        self._thread = threading.Thread(target=self._supervise, name="supervisor", daemon=True)
        self._thread.start()

    def status(self) -> list[ServiceState]:
        with self._lock:
            return [ServiceState(**asdict(s)) for s in self.states.values()]

    def stop(self) -> None:
        """Stop every service, the last started first (SIGTERM to its process groups, SIGKILL after its timeout)."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            for service in reversed(self.services):
                state = self.states[service.name]
                stop_groups(state.groups, service.stop_timeout_s, self._procs.get(service.name))
                state.pid, state.state, state.groups = None, "stopped", []
            self._write()

    def _launch(self, service: Service) -> None:
        state = self.states[service.name]
        fd = os.open(state.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with open(fd, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(service.argv)}\n".encode())
            log.flush()
            user = pwd.getpwnam(service.user) if service.user and os.geteuid() == 0 else None
            proc = subprocess.Popen(service.argv, env={**self.env, **service.env}, cwd=service.cwd, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    umask=0o077, user=user.pw_uid if user else None,
                                    group=user.pw_gid if user else None, extra_groups=[] if user else None)
        with self._lock:
            self._procs[service.name] = proc
            state.pid, state.state = proc.pid, "starting"
            self._started[service.name] = time.monotonic()
            state.groups = [*state.groups, proc.pid]
            self._write()

    def _wait_ready(self, service: Service, deadline: float) -> None:
        proc = self._procs[service.name]
        while not _ready(service):
            if proc.poll() is not None:
                raise RuntimeError(f"{service.name} exited with {proc.returncode} while starting; see "
                                   f"{self.states[service.name].log}:\n{tail(Path(self.states[service.name].log))}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{service.name} was not ready in time; see {self.states[service.name].log}")
            time.sleep(POLL_S)
        self._set(service.name, "ready")

    def _set(self, name: str, value: str) -> None:
        with self._lock:
            self.states[name].state = value
            self._write()

    def _supervise(self) -> None:
        failures = dict.fromkeys(self.states, 0)
        restart_at: dict[str, float] = {}
        while not self._stopping.wait(POLL_S):
            try:
                self._check(failures, restart_at)
            except Exception as e:  # noqa: BLE001 - a supervisor that stops supervising is worse than a retry
                self._say(f"supervising failed ({type(e).__name__}: {e}); trying again")

    def _check(self, failures: dict[str, int], restart_at: dict[str, float]) -> None:
        """One look at every service: restart those that exited once their backoff passed; mark those ready again."""
        for service in self.services:
            state, proc = self.states[service.name], self._procs[service.name]
            if self._stopping.is_set():
                return
            if service.name in restart_at:
                if time.monotonic() >= restart_at[service.name]:
                    del restart_at[service.name]
                    with self._lock:
                        state.restarts += 1
                    self._launch(service)
            elif proc.poll() is not None:
                ran_s = time.monotonic() - self._started[service.name]
                failures[service.name] = 1 if ran_s >= HEALTHY_AFTER_S else failures[service.name] + 1
                delay = BACKOFF_S[min(failures[service.name], len(BACKOFF_S)) - 1]
                self._say(f"{service.name} (pid {proc.pid}) exited with {proc.returncode} after {ran_s:.0f} s; "
                          f"starting it again in {delay} s (restart {state.restarts + 1})")
                restart_at[service.name] = time.monotonic() + delay
                self._set(service.name, "restarting")
            elif state.state == "starting" and _ready(service):
                self._say(f"{service.name} (pid {proc.pid}) is ready again")
                self._set(service.name, "ready")

    def _say(self, message: str) -> None:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", file=sys.stderr, flush=True)

    def _write(self) -> None:
        data = [asdict(s) for s in self.states.values()]
        write_private(self.state_file, json.dumps(data, indent=2).encode())


def _ready(service: Service) -> bool:
    try:
        return service.is_ready()
    except Exception:  # noqa: BLE001 - a readiness probe that fails means "not yet"
        return False


def start_services(state_dir: Path, services: list[Service], env: Mapping[str, str] | None = None,
                   timeout_s: float = 300.0) -> Supervisor:
    """Start `services` in order (each once the one before is ready) and supervise them from a thread of this
    process; `env` replaces this process's environment for them. Call `.stop()` on the result to end them all."""
    supervisor = Supervisor(state_dir, services, env)
    supervisor.start(timeout_s)
    return supervisor


def stop_groups(groups: list[int], timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM each process group, then SIGKILL what is left of them after `timeout_s`."""
    for pgid in groups:
        _killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
        if proc is not None:
            proc.poll()  # reap our child: a zombie leader keeps its group "alive"
        time.sleep(0.1)
    for pgid in groups:
        _killpg(pgid, signal.SIGKILL)
    if proc is not None:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return False


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---- Dagster's services


def code_server_ready(port: int) -> Callable[[], bool]:
    """Ready once the code server has loaded the code location (its port opens before that)."""

    def ready() -> bool:
        from llm_assets.platform.dagster_private import DagsterGrpcClient

        if not port_open(port):
            return False
        DagsterGrpcClient(host=HOST, port=port).list_repositories()
        return True

    return ready


def dagster_services(code_port: int, webserver_port: int | None = None, daemon: bool = True,
                     webserver_host: str = HOST) -> list[Service]:
    """The code server of the code location, the daemon and (with a port) the webserver, reading workspace.yaml.
    Their environment needs DAGSTER_HOME (and the instance's own variables); `dagster_env()` gives the rest."""
    bin_dir = Path(sys.executable).parent
    services = [Service("code-server", (
        str(bin_dir / "dagster"), "code-server", "start", "--host", HOST, "--port", str(code_port),
        "--module-name", "llm_assets.definitions", "--working-directory", str(PROJECT_ROOT),
        "--location-name", LOCATION), port=code_port, ready=code_server_ready(code_port), cwd=str(PROJECT_ROOT))]
    if daemon:
        services.append(Service("daemon", (sys.executable, "-m", "llm_assets.platform.deploy", "run-daemon"),
                                cwd=str(PROJECT_ROOT)))
    if webserver_port is not None:
        services.append(Service("webserver", (
            str(bin_dir / "dagster-webserver"), "--host", webserver_host, "--port", str(webserver_port),
            "-w", str(WORKSPACE)), port=webserver_port, ready=lambda: port_open(webserver_port, webserver_host),
            cwd=str(PROJECT_ROOT)))
    return services


def dagster_env(dagster_home: Path, code_port: int) -> dict[str, str]:
    """What Dagster's processes need besides this environment: the instance, and the code server workspace.yaml
    names."""
    return {"DAGSTER_HOME": str(dagster_home), CODE_SERVER_HOST_VAR: HOST, CODE_SERVER_PORT_VAR: str(code_port)}


# ---- PostgreSQL


@dataclass(frozen=True)
class Postgres:
    """Debian's PostgreSQL server with its data folder under the state home. Its connection (and the generated
    password) are written to `env_file` (0600), which the Dagster processes of the deployment load."""

    data_dir: Path
    env_file: Path
    port: int
    user: str = "llm_assets"
    db: str = "dagster"

    @staticmethod
    def bin_dir() -> Path:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
        if not found:
            raise RuntimeError("PostgreSQL's server is not installed: `apt-get install postgresql` "
                               "(`make deploy-up` does it)")
        return found[-1].parent

    def os_user(self) -> str | None:
        """PostgreSQL refuses to run as root: then it runs as Debian's `postgres` user."""
        return "postgres" if os.geteuid() == 0 else None

    def prepare(self) -> None:
        """initdb on first use (scram password auth, the generated password in `env_file`)."""
        password = self.connection().get("DAGSTER_PG_PASSWORD")
        if (self.data_dir / "PG_VERSION").exists():
            if not password:
                raise RuntimeError(f"{self.env_file}, with the password of the database in {self.data_dir}, is "
                                   "gone: restore it, or delete that folder to start with an empty instance")
            self._write_env(password)  # the port may have changed
            return
        import secrets

        password = secrets.token_urlsafe(24)
        owner = self.os_user()
        if self.data_dir.exists():  # an initdb that did not finish
            shutil.rmtree(self.data_dir)
        self.data_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.parent.chmod(0o711 if owner else 0o700)
        self.data_dir.mkdir(mode=0o700)
        if owner:
            # the postgres user must reach its folder: the folders above it are traversable (0711), not readable
            postgres = pwd.getpwnam(owner)
            os.chown(self.data_dir, postgres.pw_uid, postgres.pw_gid)
            for folder in self.data_dir.parents:
                if folder.stat().st_mode & 0o001:
                    continue
                if folder not in self.data_dir.parents[:2]:  # above the state home: not ours to change
                    raise RuntimeError(f"{folder} is not traversable by the {owner} user, so PostgreSQL cannot "
                                       f"reach {self.data_dir}: chmod o+x {folder}, or choose another "
                                       "LLM_ASSETS_HOME")
                folder.chmod(folder.stat().st_mode & 0o777 | 0o711)
        account = pwd.getpwnam(owner) if owner else None
        # initdb reads the password from a file: one only its user can read, removed once read
        pwfile = self.data_dir.parent / "initdb.pw"
        write_private(pwfile, password.encode())
        try:
            if account:
                os.chown(pwfile, account.pw_uid, account.pw_gid)
            done = subprocess.run([str(self.bin_dir() / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                                   "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C.UTF-8"],
                                  capture_output=True, cwd="/", user=account.pw_uid if account else None,
                                  group=account.pw_gid if account else None, extra_groups=[] if account else None)
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode:
            raise RuntimeError(f"initdb failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
        self._write_env(password)

    def _write_env(self, password: str) -> None:
        self.env_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        values = {"DAGSTER_PG_HOST": HOST, "DAGSTER_PG_PORT": str(self.port), "DAGSTER_PG_USER": self.user,
                  "DAGSTER_PG_DB": self.db, "DAGSTER_PG_PASSWORD": password}
        write_private(self.env_file, "".join(f"{k}={v}\n" for k, v in values.items()).encode())

    def connection(self) -> dict[str, str]:
        return read_env_file(self.env_file)

    def service(self) -> Service:
        return Service("postgres", (
            str(self.bin_dir() / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
            "-c", f"listen_addresses={HOST}", "-c", "unix_socket_directories=", "-c", "log_destination=stderr"),
            port=self.port, ready=self._ready, user=self.os_user(), cwd="/", stop_timeout_s=60.0,
            env={"LANG": "C.UTF-8"})

    def _ready(self) -> bool:
        """Accepting connections, with the Dagster database created."""
        import psycopg2

        c = self.connection()
        conn = psycopg2.connect(host=HOST, port=self.port, user=self.user, password=c["DAGSTER_PG_PASSWORD"],
                                dbname="postgres", connect_timeout=3)
        try:
            conn.autocommit = True
            with conn.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.db,))
                if cursor.fetchone() is None:
                    cursor.execute(f'CREATE DATABASE "{self.db}"')
        finally:
            conn.close()
        return True


def reserve_ports(layout: Layout, webserver_port: int | None) -> dict[str, int]:
    """The ports of the last start when free, else free ones (said on stderr); saved for the next start."""
    try:
        ports = {k: int(v) for k, v in json.loads(layout.ports_file.read_text()).items()}
    except (OSError, ValueError):
        ports = {}
    wanted = {"postgres": ports.get("postgres"), "code-server": ports.get("code-server"),
              "webserver": webserver_port or ports.get("webserver") or 3000}
    for name, port in wanted.items():
        if port is None or port_open(port):
            free = free_port()
            if port is not None:
                print(f"{name}: port {port} is taken by another process; using {free}", file=sys.stderr)
            wanted[name] = free
    write_private(layout.ports_file, json.dumps(wanted).encode())
    return {k: int(v) for k, v in wanted.items() if v is not None}


def instance_config() -> dict:
    """The deployment's dagster.yaml: the project's (the repository's dagster.yaml) with the storage of
    deploy/dagster.postgres.yaml."""
    from llm_assets.platform.instance import INSTANCE_YAML

    config = yaml.safe_load(INSTANCE_YAML.read_text())
    config.update(yaml.safe_load(POSTGRES_YAML.read_text()))
    return config


def topology(layout: Layout, nodes: int, webserver_port: int | None) -> tuple[list[Service], dict[str, str]]:
    """The services of a deployment and the environment they share (the Dagster services also get the database's)."""
    from llm_assets.platform import environment

    ports = reserve_ports(layout, webserver_port)
    layout.dagster_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(layout.dagster_home / "dagster.yaml", (
        "# Written by `llm-assets deploy up` from dagster.yaml and deploy/dagster.postgres.yaml\n"
        + yaml.safe_dump(instance_config(), sort_keys=False)).encode())
    postgres = Postgres(data_dir=layout.home / "postgres" / "data", env_file=layout.postgres_env,
                        port=ports["postgres"])
    postgres.prepare()
    python = sys.executable
    services = [postgres.service()]
    if environment.uses_embedded_store():
        services.append(Service("store", (python, "-m", "llm_assets.platform.deploy", "run-store"), ready=_store_ready,
                                stop_timeout_s=40.0))
    if nodes:
        services.append(Service("cluster", (python, "-m", "llm_assets.platform.deploy", "run-cluster", "--nodes",
                                            str(nodes)), stop_timeout_s=40.0))
    dagster = dagster_services(ports["code-server"], ports["webserver"])
    pg = postgres.connection()
    services += [Service(s.name, s.argv, s.port, {**s.env, **pg}, s.ready, s.user, s.cwd, s.stop_timeout_s)
                 for s in dagster]
    env = {**os.environ, **dagster_env(layout.dagster_home, ports["code-server"]),
           "LLM_ASSETS_HOME": str(layout.home)}
    return services, env


def supervise(home: Path, nodes: int, webserver_port: int | None) -> int:
    """The supervisor's process: start the topology, keep it alive until SIGTERM/SIGINT, then stop it."""
    layout = Layout(home)
    write_private(layout.pid_file, str(os.getpid()).encode())
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    supervisor = None
    try:
        services, env = topology(layout, nodes, webserver_port)
        supervisor = Supervisor(layout.root, services, env)
        supervisor.start()
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {READY}", file=sys.stderr, flush=True)
        stop.wait()
        return 0
    finally:
        if supervisor is not None:
            supervisor.stop()
        layout.pid_file.unlink(missing_ok=True)


def up(home: Path, nodes: int, webserver_port: int | None, timeout_s: float = 600.0) -> int:
    """Start the supervisor in the background unless it runs; return when every service is ready."""
    layout = Layout(home)
    if layout.supervisor_pid() is not None:
        print(f"the deployment runs already (supervisor pid {layout.supervisor_pid()})")
        return print_status(home)
    from llm_assets.platform.store_security import make_private

    make_private(layout.root)
    layout.services_file.unlink(missing_ok=True)
    logged = layout.log.stat().st_size if layout.log.exists() else 0  # what earlier supervisors said
    fd = os.open(layout.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open(fd, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "llm_assets.platform.deploy", "supervise", "--nodes", str(nodes),
                                 *(["--port", str(webserver_port)] if webserver_port else [])],
                                env={**os.environ, "LLM_ASSETS_HOME": str(home)}, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=PROJECT_ROOT)
    deadline = time.monotonic() + timeout_s
    while True:
        states = read_states(layout)
        if proc.poll() is not None:
            print(f"the supervisor exited with {proc.returncode}; see {layout.log}:\n{tail(layout.log)}",
                  file=sys.stderr)
            return 1
        if states and all(s.state == "ready" for s in states) and READY in layout.log.read_bytes()[logged:].decode():
            break
        if time.monotonic() > deadline:
            print(f"the deployment was not ready after {timeout_s:.0f} s; see {layout.log}", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    return print_status(home)


def down(home: Path, timeout_s: float = 180.0) -> int:
    """Stop the supervisor (which stops every service); then whatever a killed supervisor left behind."""
    layout = Layout(home)
    pid = layout.supervisor_pid()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and layout.supervisor_pid() == pid and psutil.pid_exists(pid):
            time.sleep(POLL_S)
    states = read_states(layout)
    left = [g for s in states for g in s.groups]
    stop_groups(left, 30.0)
    # A supervisor killed before it could stop them leaves the store and the cluster it started in their own
    # sessions (so that a service's restart does not take them down): stopped here by their own commands.
    if any(s.name == "store" and s.groups for s in states):
        from llm_assets.platform.embedded_store import home_store

        home_store().stop()
    if any(s.name == "cluster" and s.groups for s in states):
        from llm_assets.platform.runners import local_cluster

        local_cluster().stop()
    if pid is not None and psutil.pid_exists(pid):
        os.kill(pid, signal.SIGKILL)
    layout.pid_file.unlink(missing_ok=True)
    print("deployment stopped" if pid is not None or left else "no deployment was running")
    return 0


def read_states(layout: Layout) -> list[ServiceState]:
    try:
        return [ServiceState(**s) for s in json.loads(layout.services_file.read_text())]
    except (OSError, ValueError, TypeError):
        return []


def print_status(home: Path, as_json: bool = False) -> int:
    layout = Layout(home)
    pid = layout.supervisor_pid()
    states = read_states(layout) if pid is not None else []
    if as_json:
        print(json.dumps({"running": pid is not None, "supervisor": pid,
                          "services": [{k: v for k, v in asdict(s).items() if k != "groups"} for s in states]}))
    elif pid is None:
        print("stopped")
    else:
        print(f"supervisor pid {pid}; state and logs in {layout.root}; DAGSTER_HOME={layout.dagster_home}")
        print(f"{'service':<12} {'pid':>8} {'port':>6}  {'state':<10} restarts")
        for s in states:
            print(f"{s.name:<12} {s.pid or '-':>8} {s.port or '-':>6}  {s.state:<10} {s.restarts}")
        if web := next((s for s in states if s.name == "webserver"), None):
            print(f"UI: http://{HOST}:{web.port}")
    return 0 if pid is not None else 3


# ---- the store's and the cluster's foreground processes: they run while the server they started runs


def _run_until_stopped(start: Callable[[], object], alive: Callable[[], bool], stop: Callable[[], object]) -> int:
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    start()
    while not stopping.wait(1.0):
        if not alive():
            print("the server this service started is gone", file=sys.stderr, flush=True)
            stop()
            return 1
    stop()
    return 0


def _store_ready() -> bool:
    from llm_assets.platform.embedded_store import home_store

    return home_store().ready()


def run_store() -> int:
    from llm_assets.platform.embedded_store import home_store

    store = home_store()
    return _run_until_stopped(store.start, lambda: store.pid() is not None, store.stop)


def run_cluster(nodes: int) -> int:
    from llm_assets.platform.runners import local_cluster

    cluster = local_cluster()
    return _run_until_stopped(lambda: cluster.start(nodes=nodes), lambda: cluster.state() is not None, cluster.stop)


def run_daemon(workspace: Path = WORKSPACE) -> int:
    """`dagster-daemon run -w workspace.yaml`, once the project's concurrency pools have their limits in the instance
    of DAGSTER_HOME: its run queue would otherwise let every run of a pool it meets for the first time start."""
    import dagster as dg

    from llm_assets.platform.dagster_private import run_daemon as dagster_daemon
    from llm_assets.platform.instance import configure_pools

    with dg.DagsterInstance.get() as instance:
        configure_pools(instance)
    dagster_daemon(["run", "-w", str(workspace)])
    return 0


def main(argv: list[str] | None = None) -> int:
    from llm_assets.platform import environment

    parser = argparse.ArgumentParser(prog="python -m llm_assets.platform.deploy")
    parser.add_argument("action", choices=["supervise", "run-store", "run-cluster", "run-daemon"])
    parser.add_argument("--nodes", type=int, default=0)
    parser.add_argument("--port", type=int)
    parser.add_argument("--workspace", type=Path, default=WORKSPACE)
    args = parser.parse_args(argv)
    if args.action == "run-store":
        return run_store()
    if args.action == "run-cluster":
        return run_cluster(args.nodes)
    if args.action == "run-daemon":
        return run_daemon(args.workspace)
    return supervise(environment.home(), args.nodes, args.port)


if __name__ == "__main__":
    sys.exit(main())
