"""Ray against Dask distributed as the cluster engine (`make bench-engine-bakeoff`); the table goes into
benchmarks/results/engine-bakeoff.md and a row of BENCHMARKS.md's summary table.

    .venv/bin/python -m benchmarks.engine_bakeoff [--starts 10] [--no-write]

Both engines run as a deployment would run them on this machine: a head (Ray) or scheduler (Dask) and 2 worker nodes,
each started by the engine's own command as separate processes, every address 127.0.0.1. Dask is the cluster the
product ships (`llm_assets.platform.local_cluster`, mutual TLS); Ray 2.60 runs from its own environment under
`.bench/engine-bakeoff/` (installed from PyPI on first use), with the settings that keep it on loopback
(`--node-ip-address=127.0.0.1` and `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`; without the latter Ray resolves "127.0.0.1"
to the machine's external address), usage stats and the dashboard off.

Measured for each engine:
- cold starts: `--starts` starts on an idle machine and as many while 8 busy loops load the 2 cores; a start counts when
  every worker node has joined and ran a task within 120 s;
- loopback: every listening socket and every connection of every cluster process (and the driver), sampled during the
  runs below, must have both ends in 127.0.0.0/8;
- a worker node SIGKILLed (its whole process tree) after 5 of 40 half-second tasks: all 40 results must come back;
- per-task overhead: 2,000 no-op tasks, at most 64 in flight, through the engine's usual client API.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from benchmarks.report import table, write_hand_section
from benchmarks.scratch_env import scratch_venv
from benchmarks.summary import Row, details_path, update_rows
from llm_assets.platform.embedded_store import free_ports
from llm_assets.platform.local_cluster import LocalCluster
from llm_assets.settings import PROJECT_ROOT

SCRATCH = PROJECT_ROOT / ".bench" / "engine-bakeoff"
RAY_VERSION = "2.60.0"
HEADING = "## Cluster engine: Ray or Dask distributed"
BENCHMARKS = PROJECT_ROOT / "BENCHMARKS.md"
COMMAND = ".venv/bin/python -m benchmarks.engine_bakeoff"  # `make bench-engine-bakeoff`
START_TIMEOUT = 120.0
WORKERS = 2
LABELS = {"ray-loopback": f"Ray {RAY_VERSION}, every node 127.0.0.1",
          "ray-addresses": f"Ray {RAY_VERSION}, a 127.0.0.x address per node",
          "dask": "Dask distributed, as shipped (mutual TLS)"}

# The driver side of each measurement, run by the engine's own Python: it prints one JSON line per result and
# "KILL" when the orchestrator should kill a worker node.
DRIVER = {
    "dask": textwrap.dedent("""
        import json, sys, time
        from distributed import Client, as_completed
        from distributed.security import Security
        address, ca, cert, key, what = sys.argv[1:6]
        sec = Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
        client = Client(address, security=sec, timeout=60)
        def sleepy(i):
            import time; time.sleep(0.5); return i
        def noop(i):
            return i
        if what == "ready":
            client.wait_for_workers(%(workers)d, timeout=%(timeout)d)
            workers = list(client.scheduler_info(n_workers=-1)["workers"])
            print(json.dumps({"ran": sorted(client.run(lambda: 1, workers=workers))}))
        elif what == "kill":
            futures = client.map(sleepy, range(40), pure=False)
            done = []
            for f in as_completed(futures):
                done.append(f.result())
                if len(done) == 5:
                    print("KILL", flush=True)
            print(json.dumps({"results": sorted(done)}))
        elif what == "overhead":
            n, window = int(sys.argv[6]), int(sys.argv[7])
            t = time.perf_counter()
            it = iter(range(n))
            ac = as_completed([client.submit(noop, next(it), pure=False) for _ in range(window)])
            got = 0
            for f in ac:
                f.result(); got += 1
                nxt = next(it, None)
                if nxt is not None:
                    ac.add(client.submit(noop, nxt, pure=False))
            print(json.dumps({"tasks": got, "seconds": time.perf_counter() - t}))
        client.close()
    """),
    "ray": textwrap.dedent("""
        import json, sys, time
        import ray
        address, ip, what = sys.argv[1:4]
        ray.init(address=address, _node_ip_address=ip, logging_level="ERROR", log_to_driver=False)
        @ray.remote(num_cpus=1, max_retries=3)
        def sleepy(i):
            import time; time.sleep(0.5); return i
        @ray.remote(num_cpus=1)
        def noop(i):
            return i
        @ray.remote(num_cpus=1)
        def where():  # long enough that every worker node (1 CPU each) must take one
            import time; time.sleep(1); return ray.get_runtime_context().get_node_id()
        if what == "ready":
            deadline = time.monotonic() + %(timeout)d
            while sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU")) < %(workers)d:
                if time.monotonic() > deadline:
                    raise SystemExit("workers did not join")
                time.sleep(0.2)
            print(json.dumps({"ran": sorted(set(ray.get([where.remote() for _ in range(%(workers)d * 2)])))}))
        elif what == "kill":
            pending = [sleepy.remote(i) for i in range(40)]
            done = []
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                done += ray.get(ready)
                if len(done) == 5:
                    print("KILL", flush=True)
            print(json.dumps({"results": sorted(done)}))
        elif what == "overhead":
            n, window = int(sys.argv[4]), int(sys.argv[5])
            t = time.perf_counter()
            it = iter(range(n))
            pending = [noop.remote(next(it)) for _ in range(window)]
            got = 0
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready); got += 1
                nxt = next(it, None)
                if nxt is not None:
                    pending.append(noop.remote(nxt))
            print(json.dumps({"tasks": got, "seconds": time.perf_counter() - t}))
        ray.shutdown()
    """),
}


@dataclass
class Tally:
    engine: str
    starts_idle: list[float | None] = field(default_factory=list)  # seconds to ready, None for a failed start
    starts_loaded: list[float | None] = field(default_factory=list)
    start_errors: list[str] = field(default_factory=list)
    sockets_checked: int = 0
    outside_loopback: list[str] = field(default_factory=list)
    kill_results: int | None = None
    kill_error: str | None = None
    overhead_ms: float | None = None
    overhead_error: str | None = None


class Engine:
    name: str  # the driver's engine
    label: str  # the configuration measured
    python: str

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def driver_args(self) -> list[str]: ...
    def roots(self) -> list[int]: ...
    def worker_root(self) -> int: ...

    def pids(self) -> set[int]:
        pids: set[int] = set()
        for root in self.roots():
            try:
                p = psutil.Process(root)
                pids |= {p.pid} | {c.pid for c in p.children(recursive=True)}
            except psutil.NoSuchProcess:
                pass
        return pids

    def kill_worker(self) -> None:
        """SIGKILL a worker node's whole process tree, as when its machine dies."""
        root = psutil.Process(self.worker_root())
        for p in [root, *root.children(recursive=True)]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass

    def drive(self, what: str, *extra: str, on_kill=None, timeout: float = 300) -> dict:
        code = DRIVER[self.name] % {"workers": WORKERS, "timeout": int(START_TIMEOUT)}
        proc = subprocess.Popen([self.python, "-c", code, *self.driver_args(), what, *extra], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env(), cwd=SCRATCH)
        self.driver_pid = proc.pid
        deadline = time.monotonic() + timeout
        result = None
        try:
            for line in proc.stdout:
                if line.strip() == "KILL" and on_kill:
                    on_kill()
                elif line.startswith("{"):
                    result = json.loads(line)
                if time.monotonic() > deadline:
                    break
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            self.driver_pid = None
        if proc.returncode != 0 or result is None:
            err = (proc.stderr.read() or "").strip().splitlines()
            raise RuntimeError(f"{self.name} driver {what} exited {proc.returncode}: {' | '.join(err[-3:])}")
        return result

    def env(self) -> dict:
        return dict(os.environ)


class Dask(Engine):
    name = label = "dask"
    python = sys.executable

    def __init__(self, folder: Path):
        self.cluster = LocalCluster(folder / "dask")
        self.state = None

    def start(self) -> None:
        self.state = self.cluster.start(nodes=WORKERS + 1, timeout=START_TIMEOUT)

    def stop(self) -> None:
        self.cluster.stop()
        self.state = None

    def driver_args(self) -> list[str]:
        tls = self.cluster.tls_files()
        return [self.state.address, str(tls["ca"]), str(tls["cert"]), str(tls["key"])]

    def roots(self) -> list[int]:
        return [n.pid for n in self.state.nodes] if self.state else []

    def worker_root(self) -> int:
        return self.state.workers[0].pid


class Ray(Engine):
    """Ray nodes on this machine, in one of the two ways Ray offers to name a loopback address: `loopback` is
    127.0.0.1 with `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` (without it, Ray replaces 127.0.0.1 by the machine's
    external address), `addresses` gives each node its own address in 127.0.0.0/8 (127.0.0.2, .3, ...), which
    Ray keeps as given."""

    def __init__(self, folder: Path, variant: str):
        self.name = "ray"
        self.label = f"ray-{variant}"
        self.variant = variant
        self.python = str(ray_environment() / "bin" / "python")
        self.ray = str(ray_environment() / "bin" / "ray")
        self.temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # Ray's socket paths must stay short
        self.procs: list[subprocess.Popen] = []
        self.address = ""
        self.folder = folder

    def env(self) -> dict:
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        return env | {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"} if self.variant == "loopback" else env

    def ip(self, node: int) -> str:
        return "127.0.0.1" if self.variant == "loopback" else f"127.0.0.{2 + node}"

    def start(self) -> None:
        port, = free_ports(1)
        self.address = f"{self.ip(0)}:{port}"
        common = ["--block", "--disable-usage-stats"]
        self.procs = [self._spawn("head", ["--head", f"--node-ip-address={self.ip(0)}", f"--port={port}",
                                           "--num-cpus=0", "--include-dashboard=false", f"--temp-dir={self.temp}",
                                           *common])]
        deadline = time.monotonic() + START_TIMEOUT
        # A worker node may only join once the head's GCS answers.
        while not _listening(self.procs[0].pid, port):
            if self.procs[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray head did not come up: {self._tail('head')}")
            time.sleep(0.2)
        for i in range(1, WORKERS + 1):
            self.procs.append(self._spawn(f"worker-{i}", [f"--address={self.address}",
                                                          f"--node-ip-address={self.ip(i)}", "--num-cpus=1", *common]))
        # `ray start --block` exits when its node cannot start or join: fail fast rather than wait for the timeout.
        while not all("Ray runtime started" in self._log(f"worker-{i}") for i in range(1, WORKERS + 1)):
            if dead := [i for i in range(1, WORKERS + 1) if self.procs[i].poll() is not None]:
                raise RuntimeError(f"ray worker-{dead[0]} exited: {self._tail(f'worker-{dead[0]}')}")
            if time.monotonic() > deadline:
                raise RuntimeError("ray workers did not start")
            time.sleep(0.2)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"ray-{name}.log", "wb")
        return subprocess.Popen([self.ray, "start", *args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=self.env(), cwd=SCRATCH)

    def _log(self, name: str) -> str:
        return (self.folder / f"ray-{name}.log").read_text(errors="replace")

    def _tail(self, name: str) -> str:
        return " | ".join(self._log(name).strip().splitlines()[-2:])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            for p in _tree(proc.pid):
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            proc.wait()
        # Ray's own stop, for any process that left the tree (the GCS and the agents may re-parent).
        subprocess.run([self.ray, "stop", "--force"], capture_output=True, env=self.env(), timeout=60)
        self.procs = []

    def driver_args(self) -> list[str]:
        return [self.address, self.ip(0)]

    def roots(self) -> list[int]:
        return [p.pid for p in self.procs]

    def worker_root(self) -> int:
        return self.procs[1].pid

    def pids(self) -> set[int]:
        # Ray's daemons may leave the tree of `ray start`; everything running from the Ray environment is the cluster.
        pids = super().pids()
        for p in psutil.process_iter(["cmdline"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if str(ray_environment()) in cmd or str(self.temp) in cmd:
                pids.add(p.pid)
        return pids


def ray_environment() -> Path:
    """A separate environment for Ray (it is not a dependency of the product), made with uv on first use."""
    venv = SCRATCH / "ray-venv"
    if not (venv / "bin" / "ray").exists():
        scratch_venv(venv, f"ray=={RAY_VERSION}")
    return venv


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _listening(pid: int, port: int) -> bool:
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
               for p in _tree(pid) for c in _connections(p))


def _connections(p: psutil.Process) -> list:
    try:
        return p.net_connections(kind="inet")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _loopback(addr) -> bool:
    if not addr:
        return True
    ip = ipaddress.ip_address(addr.ip.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def check_sockets(engine: Engine, tally: Tally) -> None:
    pids = engine.pids() | ({engine.driver_pid} if getattr(engine, "driver_pid", None) else set())
    for pid in pids:
        try:
            p = psutil.Process(pid)
            name = p.name()
        except psutil.NoSuchProcess:
            continue
        for c in _connections(p):
            tally.sockets_checked += 1
            if not (_loopback(c.laddr) and _loopback(c.raddr)):
                where = f"{name} {c.status} {c.laddr.ip}:{c.laddr.port}" + (
                    f" -> {c.raddr.ip}:{c.raddr.port}" if c.raddr else "")
                if where not in tally.outside_loopback:
                    tally.outside_loopback.append(where)


class Load:
    """Busy loops that keep every core saturated while a cluster starts."""

    def __init__(self, n: int = 8):
        self.n = n

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def cold_start(engine: Engine, tally: Tally) -> float | None:
    t = time.monotonic()
    try:
        engine.start()
        ran = engine.drive("ready", timeout=START_TIMEOUT)["ran"]
        check_sockets(engine, tally)
        if len(ran) < WORKERS:
            raise RuntimeError(f"tasks ran on {len(ran)} of {WORKERS} workers")
        return time.monotonic() - t
    except Exception as e:  # a failed start is a result here
        tally.start_errors.append(f"{type(e).__name__}: {str(e)[:300]}")
        return None
    finally:
        engine.stop()


def survival_and_overhead(engine: Engine, tally: Tally) -> None:
    try:
        engine.start()
        engine.drive("ready", timeout=START_TIMEOUT)
    except Exception as e:
        engine.stop()
        tally.kill_error = tally.overhead_error = f"the cluster did not start ({str(e)[:200]})"
        return
    try:
        check_sockets(engine, tally)
        try:
            def kill():
                check_sockets(engine, tally)
                engine.kill_worker()
            results = engine.drive("kill", on_kill=kill)["results"]
            tally.kill_results = len(set(results) & set(range(40)))
        except Exception as e:
            tally.kill_error = str(e)[:300]
    finally:
        engine.stop()
    engine.start()
    try:
        engine.drive("ready", timeout=START_TIMEOUT)
        check_sockets(engine, tally)
        try:
            r = engine.drive("overhead", "2000", "64", on_kill=None)
            tally.overhead_ms = 1000 * r["seconds"] / r["tasks"]
        except Exception as e:
            tally.overhead_error = str(e)[:300]
        check_sockets(engine, tally)
    finally:
        engine.stop()


def measure(engine: Engine, starts: int) -> Tally:
    tally = Tally(engine.label)
    for i in range(starts):
        tally.starts_idle.append(cold_start(engine, tally))
        print(f"{engine.label} idle start {i + 1}: {tally.starts_idle[-1]}", flush=True)
    with Load():
        for i in range(starts):
            tally.starts_loaded.append(cold_start(engine, tally))
            print(f"{engine.label} loaded start {i + 1}: {tally.starts_loaded[-1]}", flush=True)
    survival_and_overhead(engine, tally)
    print(json.dumps(asdict(tally)), flush=True)
    return tally


def render(tallies: list[Tally], seconds: float) -> str:
    def starts(xs: list) -> str:
        ok = [x for x in xs if x is not None]
        return f"{len(ok)} of {len(xs)}" + (f" (median {sorted(ok)[len(ok) // 2]:.1f} s)" if ok else "")

    rows = []
    for t in tallies:
        rows.append([
            LABELS[t.engine],
            starts(t.starts_idle), starts(t.starts_loaded),
            ("yes" if not t.outside_loopback else f"**no** ({len(t.outside_loopback)} sockets)")
            if t.sockets_checked else "not reached",
            f"{t.kill_results} of 40" if t.kill_results is not None else "**failed**",
            f"{t.overhead_ms:.2f} ms" if t.overhead_ms is not None else "**failed**"])
    lines = [
        f"{HEADING} (`make bench-engine-bakeoff`; not part of `make bench`)", "",
        f"Command: `{COMMAND}` ({seconds / 60:.0f} minutes). A head or scheduler and {WORKERS} worker nodes, each "
        "started by the engine's own command (`ray start --block`, `dask scheduler` / `dask worker`) as separate "
        "processes. Ray runs from its own environment, without dashboard or usage stats, in the two ways it offers "
        "to stay on loopback: every node `--node-ip-address=127.0.0.1` with `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` "
        "(without that variable Ray replaces 127.0.0.1 by the machine's external address), or one address of "
        "127.0.0.0/8 per node (127.0.0.2, .3, .4), which Ray keeps as given. A "
        f"start counts when every worker has joined and ran a task within {START_TIMEOUT:.0f} s; under load, 8 busy "
        "loops share the 2 cores. Loopback: every socket of every cluster process and of the driver, sampled during "
        f"the runs, has both ends in 127.0.0.0/8 ({sum(t.sockets_checked for t in tallies):,} sockets checked). "
        "Survival: a worker node's whole process tree SIGKILLed after 5 of 40 half-second tasks. Overhead: 2,000 "
        "no-op tasks, at most 64 in flight, wall time per task.", "",
        table(["engine", "cold starts, idle", "cold starts, loaded", "loopback only", "killed worker: results",
               "per-task overhead"], rows), ""]
    lines += [verdict(tallies), ""]
    for t in tallies:
        for e in sorted({_short(e) for e in t.start_errors})[:3]:
            lines.append(f"- {LABELS[t.engine]}, a failed start: `{e}`")
        if t.outside_loopback:
            shown = ", ".join(f"`{w}`" for w in t.outside_loopback[:4])
            lines.append(f"- {LABELS[t.engine]}, outside loopback ({len(t.outside_loopback)} sockets): {shown}, ...")
    return "\n".join(lines) + "\n"


def passed(t: Tally) -> dict[str, bool]:
    return {"every cold start": all(x is not None for x in t.starts_idle + t.starts_loaded),
            "loopback only": t.sockets_checked > 0 and not t.outside_loopback,
            "a killed worker survived": t.kill_results == 40,
            "per-task overhead measured": t.overhead_ms is not None}


def verdict(tallies: list[Tally]) -> str:
    """Ray is preferred (the peers run it) if one of its configurations passes all four; else Dask, if it does."""
    ray = max((t for t in tallies if t.engine.startswith("ray")), key=lambda t: sum(passed(t).values()), default=None)
    dask = next((t for t in tallies if t.engine == "dask"), None)
    if ray is not None and all(passed(ray).values()):
        return f"**Ray passes all four ({LABELS[ray.engine]}): it is the engine to ship.**"
    failed = ", ".join(k for k, ok in passed(ray).items() if not ok) if ray else "not measured"
    if dask is not None and all(passed(dask).values()):
        return (f"**Shipped: Dask distributed**, which passes all four. Ray's best configuration here "
                f"({LABELS[ray.engine] if ray else '-'}) fails: {failed}. Ray's lower cost per task does not matter "
                "at this grain: an extraction unit takes seconds (see the next section), so even Dask's cost is "
                "well under 1 % of it.")
    return "**Neither engine passes all four.**"


def summary(tallies: list[Tally]) -> Row:
    """The row of BENCHMARKS.md's summary table: which engine passes the four checks."""
    checks = "; ".join(f"{LABELS[t.engine]}: {sum(passed(t).values())} of 4" for t in tallies)
    return Row("engine-bakeoff:engine", "cluster engine: checks passed (every cold start, loopback only, a killed "
               "worker survived, per-task overhead)", checks, "make bench-engine-bakeoff", "engine-bakeoff.md")


def _short(error: str) -> str:
    """A failed start's message without the log line's timestamp and source position."""
    if " exited: " not in error:
        return error
    who, rest = error.split(" exited: ", 1)
    pieces = [p.strip() for part in rest.split(" | ") for p in part.split(" -- ")]
    return f"{who} exited: {max(pieces, key=len)}".replace("`", "'")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=10, help="cold starts per engine, idle and again under load")
    parser.add_argument("--engines", default=",".join(LABELS))
    parser.add_argument("--no-write", action="store_true",
                        help="print the section, do not write benchmarks/results/engine-bakeoff.md")
    args = parser.parse_args()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=SCRATCH))
    t = time.monotonic()
    tallies = []
    try:
        for name in args.engines.split(","):
            engine = Dask(folder) if name == "dask" else Ray(folder, name.removeprefix("ray-"))
            tallies.append(measure(engine, args.starts))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    section = render(tallies, time.monotonic() - t)
    (SCRATCH / "results.json").write_text(json.dumps({"seconds": time.monotonic() - t,
                                                      "tallies": [asdict(x) for x in tallies]}, indent=2))
    print(section)
    if not args.no_write:
        write_hand_section(HEADING, section, details_path(BENCHMARKS, "engine-bakeoff"))
        update_rows(BENCHMARKS, [summary(tallies)])
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
