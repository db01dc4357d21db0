"""A real Dask cluster on this machine: a scheduler and N−1 worker nodes, each its own process group.

It is what the demo and the tests run the cluster runner on, and the same processes a deployment runs on many
machines (`dask scheduler`, `dask worker` with a nanny). Everything stays on loopback: every listener binds
127.0.0.1 and every address a process advertises is 127.0.0.1, so nothing listens on or dials any other address,
this machine's own external one included. A scheduler accepts any client that can reach it, and a client can run
any code on the workers, so every connection is mutual TLS with a private CA made at start whose key is dropped:
only processes that can read the 0700 state folder get in. The dashboard is off unless asked for.

State (`$LLM_ASSETS_HOME/cluster/`): `cluster.json` (address, nodes, pids), the TLS files, one log per node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from llm_assets.platform.embedded_store import free_ports
from llm_assets.platform.store_security import loopback_certificates, make_private, write_private

HOST = "127.0.0.1"


@dataclass
class Node:
    name: str
    role: str  # scheduler | worker
    pid: int
    log: str

    def alive(self) -> bool:
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False


@dataclass
class ClusterState:
    address: str
    nodes: list[Node] = field(default_factory=list)
    dashboard: str | None = None

    @property
    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "worker"]


class LocalCluster:
    def __init__(self, state_dir: Path):
        self.state_dir = state_dir

    @property
    def state_file(self) -> Path:
        return self.state_dir / "cluster.json"

    def tls_files(self) -> dict[str, Path]:
        folder = self.state_dir / "tls"
        return {"ca": folder / "ca.crt", "cert": folder / "node.crt", "key": folder / "node.key"}

    def security(self):
        """The client side of the cluster's mutual TLS."""
        from distributed.security import Security

        files = self.tls_files()
        return Security(tls_ca_file=str(files["ca"]), tls_client_cert=str(files["cert"]),
                        tls_client_key=str(files["key"]), require_encryption=True)

    def state(self) -> ClusterState | None:
        """The running cluster, or None when none was started (or its scheduler is gone)."""
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        state = ClusterState(address=data["address"], nodes=[Node(**n) for n in data["nodes"]],
                             dashboard=data.get("dashboard"))
        scheduler = next(n for n in state.nodes if n.role == "scheduler")
        return state if scheduler.alive() else None

    def start(self, nodes: int = 3, dashboard: bool = False, memory_per_worker: int | None = None,
              timeout: float = 120.0) -> ClusterState:
        """Start a scheduler and `nodes - 1` workers (one thread each: units are CPU-bound Python) unless a cluster
        of this state folder runs already; return when every worker has joined."""
        if nodes < 2:
            raise ValueError("a cluster needs at least 2 nodes: the scheduler and one worker")
        if (running := self.state()) is not None:
            return running
        self.stop()  # leftovers of a cluster whose scheduler died
        make_private(self.state_dir)
        self._dashboard = dashboard
        files = self.tls_files()
        files["ca"].parent.mkdir(mode=0o700, exist_ok=True)
        for name, pem in zip(("ca", "cert", "key"), loopback_certificates("llm-assets local cluster"), strict=True):
            write_private(files[name], pem)
        tls = ["--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"])]
        port, dashboard_port = free_ports(2)
        address = f"tls://{HOST}:{port}"
        scheduler_file = self.state_dir / "scheduler.json"
        scheduler_file.unlink(missing_ok=True)
        # Without the dashboard, the scheduler and the workers still serve health and metrics over HTTP, on all
        # interfaces unless told otherwise.
        dash = ["--dashboard" if dashboard else "--no-dashboard", "--dashboard-address",
                f"{HOST}:{dashboard_port if dashboard else 0}"]
        state = ClusterState(address=address, dashboard=f"http://{HOST}:{dashboard_port}/status" if dashboard else None)
        state.nodes.append(self._spawn("scheduler", "scheduler", [
            "distributed.cli.dask_scheduler", "--host", HOST, "--port", str(port), "--protocol", "tls", *tls,
            "--scheduler-file", str(scheduler_file), *dash]))
        memory = memory_per_worker or psutil.virtual_memory().total // (nodes - 1)
        for i in range(1, nodes):
            name = f"worker-{i}"
            state.nodes.append(self._spawn(name, "worker", [
                "distributed.cli.dask_worker", address, "--host", HOST, "--protocol", "tls", *tls,
                "--name", name, "--nthreads", "1", "--nworkers", "1", "--memory-limit", str(memory),
                "--resources", f"CPU=1,MEMORY={memory}", "--no-dashboard", "--dashboard-address", f"{HOST}:0",
                "--local-directory", str(self.state_dir / name), "--death-timeout", "60"]))
        self._write(state)
        try:
            self._wait_for_workers(state, timeout)
        except BaseException:
            self.stop()
            raise
        return state

    def stop(self, timeout: float = 20.0) -> bool:
        """Stop every node (SIGTERM to its process group, SIGKILL after `timeout`); False when none ran."""
        try:
            nodes = [Node(**n) for n in json.loads(self.state_file.read_text())["nodes"]]
        except (OSError, ValueError):
            return False
        for node in reversed(nodes):  # workers first: they say goodbye to the scheduler
            _signal_group(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(n.alive() for n in nodes):
            _reap(nodes)
            time.sleep(0.1)
        for node in nodes:
            if node.alive():
                _signal_group(node.pid, signal.SIGKILL)
        _reap(nodes)
        self.state_file.unlink(missing_ok=True)
        return True

    def kill_node(self, name: str) -> None:
        """SIGKILL a node's whole process group (a worker and its nanny): the node dies as in a crash."""
        state = self.state()
        node = next(n for n in (state.nodes if state else []) if n.name == name)
        _signal_group(node.pid, signal.SIGKILL)

    def status(self) -> dict:
        state = self.state()
        if state is None:
            return {"running": False, "dir": str(self.state_dir)}
        workers: dict = {}
        try:
            from distributed import Client

            with Client(state.address, security=self.security(), timeout=10, set_as_default=False) as client:
                workers = client.scheduler_info(n_workers=-1)["workers"]
        except (OSError, TimeoutError) as e:
            return {"running": False, "address": state.address, "error": f"{type(e).__name__}: {e}"}
        return {"running": True, "address": state.address, "dashboard": state.dashboard, "dir": str(self.state_dir),
                "nodes": [asdict(n) | {"alive": n.alive()} for n in state.nodes],
                "workers": sorted(w.get("name", a) for a, w in workers.items())}

    def _spawn(self, name: str, role: str, args: list[str]) -> Node:
        log = self.state_dir / f"{name}.log"
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}  # units may start their own processes
        if not self._dashboard:  # the HTTP servers answer without credentials: health checks only
            env |= {"DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES": "['distributed.http.health']",
                    "DASK_DISTRIBUTED__WORKER__HTTP__ROUTES": "['distributed.http.health']"}
        with open(fd, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.state_dir,
                                    umask=0o077, env=env)
        return Node(name=name, role=role, pid=proc.pid, log=str(log))

    def _write(self, state: ClusterState) -> None:
        write_private(self.state_file, json.dumps(asdict(state), indent=2).encode())

    def _wait_for_workers(self, state: ClusterState, timeout: float) -> None:
        from distributed import Client

        deadline = time.monotonic() + timeout
        while True:
            if dead := [n for n in state.nodes if not n.alive()]:
                raise RuntimeError(f"the local cluster's {dead[0].name} exited during start; see {dead[0].log}")
            try:
                with Client(state.address, security=self.security(), timeout=5, set_as_default=False) as client:
                    client.wait_for_workers(len(state.workers), timeout=max(1.0, deadline - time.monotonic()))
                    return
            except (OSError, TimeoutError) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the local cluster did not come up in {timeout:.0f} s ({e}); see the logs "
                                       f"in {self.state_dir}") from e
                time.sleep(0.5)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(nodes: list[Node]) -> None:
    """Collect nodes that are our exited children (start and stop in one process), so none lingers as a zombie."""
    for node in nodes:
        try:
            os.waitpid(node.pid, os.WNOHANG)
        except ChildProcessError:  # not our child, or already collected
            pass
