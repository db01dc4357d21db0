"""Process start-up: what a command, and a run's worker, cost before they do anything.

Every Dagster run worker, code server and CLI command imports Dagster and the code location. Where
PYTHONDONTWRITEBYTECODE is set (CI images, many containers) nothing is cached, so each process compiles them again
unless the environment was installed with its bytecode (`uv sync --compile-bytecode`, as the Makefile does).
"Without bytecode" points Python at an empty cache folder (PYTHONPYCACHEPREFIX) and forbids writing one.

1. Commands: wall and CPU seconds (user + system of the whole process) of each command start to finish, interleaved
   runs, median of `--repeat`.
2. A run worker, on a real deployment: a throwaway embedded store and Dagster instance (the project's dagster.yaml),
   the code server of `llm_assets.definitions` as the deployment starts it (`dagster code-server start`, which runs
   `python -m dagster api grpc`), and `--runs` runs of `curation_job` (in-process
   executor, like every asset job) and of `vacuum_job` launched through it one after the other. The code server
   spawns a fresh worker process per run; the run's event log times what that worker did before its first step:
   RUN_STARTING (written as the launch is sent) → "Started process for run" (the worker is up: interpreter,
   Dagster, the instance) → RUN_START (the code location imported and built, the job resolved) → STEP_START
   (resources initialized, the step begun). The worker's CPU seconds are sampled as its first step starts.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.summary import Row, archive, details_path, ensure_details, update_rows, verdict

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PYTHON = str(BIN / "python")
CLI = str(BIN / "llm-assets")
COMMANDS = {
    "`import dagster`": [PYTHON, "-c", "import dagster"],
    "the code location imported (`import llm_assets.definitions`)": [PYTHON, "-c", "import llm_assets.definitions"],
    "the code location built (`definitions.defs()`)": [PYTHON, "-c", "from llm_assets.definitions import defs; defs()"],
    "`llm-assets status` (the demo's lake)": [CLI, "status"],
    "`llm-assets stale` (the demo's lake)": [CLI, "stale"],
}
JOBS = ("curation_job", "vacuum_job")
PHASES = ("process up", "run started", "first step")  # a run worker's milestones, in the order it reaches them
LOCATION = "llm_assets"
HEADING = "## Process start-up"
# The code before commit 8a6c7cb against the code after it, measured interleaved (A B A B) on the same busy machine,
# 2026-11-26; kept here so that the section this module writes keeps them next to its new figures.
EARLIER = (
    "Before and after commit 8a6c7cb (interleaved runs of both trees on the same busy machine, 2026-11-26; CPU "
    "seconds, median and min of 5): `defs()` in a fresh process 6.08 (5.55) → 5.46 (5.41); `import "
    "llm_assets.definitions` 5.96 (5.02) → 5.59 (4.02); in a replay of a worker's steps, the code location's import "
    "once Dagster and the instance are loaded 1.84 (1.66) → 1.49 (1.41), median and min of 3. `vacuum_job` ran its "
    "one step in a second process (Dagster's default executor, which imported the code location again): its first "
    "step started 14.8 s after RUN_START, now 0.4 s; the same held for the asset job of materializations launched "
    "from the UI and of asset backfills (`llm-assets backfill --stale`, the stale sensor), one process per step. "
    "On an idle machine the code before 8a6c7cb took 1.50 s wall for `import dagster` and 4.86 s for `defs()`."
)
# Issue 29's cuts, measured interleaved (A B A B) against the code before them on the same busy machine (load 8-12),
# 2026-11-26; kept here so that the section this module writes keeps them next to its new figures.
BEFORE_AFTER = (
    "Before and after the object store resource stopped importing dagster-aws (commits c5aeb5a, 5edb28c: with psutil "
    "and pyarrow.compute imported where used), interleaved on the same busy machine (load 8-12), 2026-11-26, CPU "
    "seconds min/median/max: `defs()` in a fresh process pinned to one core 2.58/2.68/2.77 → 1.61/1.67/1.75 (6 pairs); "
    "a run worker's CPU seconds at its first step (this benchmark, code server as the deployment starts it, 3 rounds "
    "of 2 runs of each job, the per-round medians of each job) 2.01/2.10/2.25 → 1.86/1.94/2.02."
)
# Where a worker's start-up goes, from a script replaying the worker's steps in one process pinned to one core (CPU
# seconds, median of 3, the same busy machine, 2026-11-26, after issue 29's cuts) and `python -X importtime`.
WHERE = (
    "Where a run worker's start-up goes (CPU seconds; a script replaying the worker's steps in one process pinned to "
    "one core, median of 3, and `python -X importtime`): `import dagster` 0.64; the instance 0.69 (Dagster's SQL "
    "storage: SQLAlchemy, Alembic with Mako and Pygments; structlog and rich through its daemon module); the code "
    "location imported 0.48 and built (`defs()`) 0.07; resources and the step's set-up about 0.05. The first two, "
    "1.33 of the worker's 1.9, are Dagster's own and paid by every run: the code server starts each run's worker with "
    "multiprocessing's spawn (hard-coded in `dagster/_grpc/server.py`; no option of `dagster api grpc` or "
    "`code-server start` changes it), and Dagster has no public run launcher that forks workers from a warm process. "
    "A worker of a code server started from the `dagster` script (as this benchmark did before) also imports Dagster's "
    "CLI module again as the server's main, 0.13 more; `dagster code-server start`, which `make ui`, the demo and "
    "`deploy up` run, starts its server with `python -m dagster`, whose workers do not. Of the code location's import: "
    "polars, pyarrow and numpy 0.24 (module-level schemas and dtypes of about 15 core modules; every step that reads "
    "the lake imports them anyway), the project's own modules (pydantic settings, dataclasses, asset decorators) "
    "about 0.25. Building the code location imports neither dagster-aws (the object store resource has its own S3 "
    "endpoint fields; dagster_aws's package imports `dagster._core.test_utils`, hence Dagster's SQL storage, "
    "SQLAlchemy, Alembic, Mako, Pygments, and boto3: about 0.9 CPU-s of a process that builds the code location "
    "without an instance), nor psutil, pyarrow.compute or a step's libraries (duckdb, boto3, pyarrow.parquet, warcio, "
    "lxml, the Dask runner and the embedded store's management, spaCy, trafilatura, matplotlib...): "
    "`llm_assets_tests/test_definitions.py` checks it."
)


def measure(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def commands(repeat: int, cold: bool) -> list[str]:
    subprocess.run([CLI, "store", "start"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    rows = []
    with tempfile.TemporaryDirectory() as empty:
        envs = {"warm": {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}}
        if cold:
            envs["cold"] = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty}
        for label, cmd in COMMANDS.items():
            times: dict[str, list[tuple[float, float]]] = {kind: [] for kind in envs}
            for _ in range(repeat):  # A B A B: both see the same machine
                for kind, env in envs.items():
                    times[kind].append(measure(cmd, env))
            cells = [f"{statistics.median(t[i] for t in times[kind]):.2f}" if kind in times else "–"
                     for kind in ("cold", "warm") for i in (0, 1)]
            rows.append(f"| {label} | {' | '.join(cells)} |")
            print(rows[-1], flush=True)
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, what: str, deadline_s: float = 300.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if value := condition():
            return value
        time.sleep(0.05)
    raise RuntimeError(f"gave up after {deadline_s:.0f} s waiting for {what}")


class Deployment:
    """A throwaway embedded store, Dagster instance and code server of the project's code location."""

    def __init__(self, root: Path):
        import dagster as dg
        import yaml

        from llm_assets.platform.embedded_store import EmbeddedStore

        self.root = root
        self.store = EmbeddedStore.throwaway(root / "store", "llm-assets")
        self.store.start()
        self.home = root / "dagster"
        self.home.mkdir()
        (self.home / "dagster.yaml").write_text((ROOT / "dagster.yaml").read_text())
        self.port = free_port()
        self.workspace = self.home / "workspace.yaml"
        self.workspace.write_text(yaml.safe_dump({"load_from": [
            {"grpc_server": {"host": "127.0.0.1", "port": self.port, "location_name": LOCATION}}]}))
        # The store's state folder is LLM_ASSETS_HOME's `store/`: the code location finds it as `llm-assets` would.
        self.env = {**os.environ, "DAGSTER_HOME": str(self.home), "LLM_ASSETS_HOME": str(root),
                    "AWS_ACCESS_KEY_ID": self.store.access_key, "AWS_SECRET_ACCESS_KEY": self.store.secret_key}
        self.env.pop("LLM_ASSETS_S3_ENDPOINT", None)
        self.instance = dg.DagsterInstance.from_config(str(self.home))
        self.instance.get_runs(limit=1)  # creates the SQLite storage before the code server opens it
        self.server: subprocess.Popen | None = None
        self.context = None

    def start_code_server(self) -> float:
        """Start the code server as `make ui`, the demo and `deploy up` do (`dagster code-server start`, which runs
        `python -m dagster api grpc` under it); seconds until it lists the code location's repositories."""
        from llm_assets.platform.dagster_private import DagsterGrpcClient, WorkspaceFileTarget, WorkspaceProcessContext
        from llm_assets.platform.deploy import dagster_services

        # Started as `dagster api grpc` from its script instead, each run's worker would import Dagster's CLI module
        # again as the server's main (0.13 CPU-s more than the deployment's workers pay: a spawned child re-runs a
        # main script, not a package's __main__).
        (server,) = dagster_services(self.port, daemon=False)
        start = time.perf_counter()
        with open(self.root / "code_server.log", "ab") as log:
            self.server = subprocess.Popen(server.argv, env=self.env, cwd=server.cwd, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        client = DagsterGrpcClient(host="127.0.0.1", port=self.port)

        def serving():
            if self.server.poll() is not None:
                raise RuntimeError(f"the code server exited; see {self.root / 'code_server.log'}")
            try:
                client.list_repositories()
                return True
            except Exception:  # noqa: BLE001 - not serving yet
                return False

        wait_for(serving, "the code server")
        ready = time.perf_counter() - start
        self.context = WorkspaceProcessContext(self.instance, WorkspaceFileTarget(paths=[str(self.workspace)]))
        return ready

    def launch(self, job_name: str) -> str:
        request = self.context.create_request_context()
        location = request.get_code_location(LOCATION)
        repo = location.get_repository(next(iter(location.get_repositories())))
        job = repo.get_full_job(job_name)
        plan = location.get_execution_plan(job, {}, step_keys_to_execute=None, known_state=None,
                                           instance=self.instance)
        run = self.instance.create_run(
            job_name=job.name, run_id=None, run_config={}, resolved_op_selection=None, step_keys_to_execute=None,
            op_selection=None, status=None, root_run_id=None, parent_run_id=None, tags={},
            job_snapshot=job.job_snapshot, execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=None, remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(), asset_selection=None, asset_check_selection=None,
            asset_graph=repo.asset_graph)
        self.instance.launch_run(run.run_id, request)
        return run.run_id

    def worker_cpu_at_first_step(self, run_id: str) -> float | None:
        """CPU seconds of the run's worker (the code server's child) when its first STEP_START is in the log."""
        import dagster as dg
        import psutil

        seen: dict[int, float] = {}
        while True:
            for child in psutil.Process(self.server.pid).children(recursive=True):
                try:
                    times = child.cpu_times()
                    seen[child.pid] = times.user + times.system
                except psutil.NoSuchProcess:
                    pass
            started = self.instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_START, limit=1)
            if started.records:
                pid = self.worker_pid(run_id)
                return seen.get(pid) if pid else None
            if self.instance.get_run_by_id(run_id).is_finished:
                return None
            time.sleep(0.02)

    def worker_pid(self, run_id: str) -> int | None:
        for entry in self.instance.all_logs(run_id):
            if entry.message and entry.message.startswith("Started process for run (pid: "):
                return int(entry.message.split("pid: ")[1].split(")")[0])
        return None

    def phases(self, run_id: str) -> dict[str, float]:
        """Seconds from the launch to each milestone of the worker's start-up, from the run's event log."""
        import dagster as dg

        wait_for(lambda: self.instance.get_run_by_id(run_id).is_finished, f"run {run_id}")
        run = self.instance.get_run_by_id(run_id)
        if run.status != dg.DagsterRunStatus.SUCCESS:
            raise RuntimeError(f"run {run_id} of {run.job_name} ended {run.status.value}")
        stamps: dict[str, float] = {}
        for entry in self.instance.all_logs(run_id):
            kind = entry.dagster_event_type
            name = ("launched" if kind == dg.DagsterEventType.RUN_STARTING
                    else "process up" if (entry.message or "").startswith("Started process for run")
                    else "run started" if kind == dg.DagsterEventType.RUN_START
                    else "first step" if kind == dg.DagsterEventType.STEP_START else None)
            if name and name not in stamps:
                stamps[name] = entry.timestamp
        return {k: stamps[k] - stamps["launched"] for k in PHASES}

    def close(self) -> None:
        if self.context is not None:
            self.context.__exit__(None, None, None)
        if self.server is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.server.pid, sig)
                    self.server.wait(30)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.store.stop()
        self.instance.dispose()


def worker_runs(runs: int, jobs: tuple[str, ...] = JOBS) -> tuple[float, list[dict]]:
    """The code server's start (seconds until it serves) and, for `runs` runs of each job launched through it
    (interleaved: every job sees the same machine), each run's start-up phases (seconds from the launch) and its
    worker's CPU seconds at its first step."""
    with tempfile.TemporaryDirectory(prefix="llm-assets-startup-") as tmp:
        saved = dict(os.environ)
        deployment = Deployment(Path(tmp))
        os.environ.update(deployment.env)  # this process reads the same instance and store as the code server
        try:
            server_s = deployment.start_code_server()
            results = []
            for _ in range(runs):
                for job in jobs:
                    run_id = deployment.launch(job)
                    cpu = deployment.worker_cpu_at_first_step(run_id)
                    results.append({"job": job, **deployment.phases(run_id), "worker_cpu_s": cpu})
            return server_s, results
        finally:
            deployment.close()
            os.environ.clear()
            os.environ.update(saved)


def run_workers(runs: int) -> tuple[float, list[str]]:
    """Median start-up phases of `runs` runs of each job, each in a fresh worker of one code server."""
    server_s, results = worker_runs(runs)
    rows = []
    for job in JOBS:
        mine = [r for r in results if r["job"] == job]
        phases = {k: statistics.median(r[k] for r in mine) for k in PHASES}
        cpus = [r["worker_cpu_s"] for r in mine if r["worker_cpu_s"] is not None]
        cpu = f"{statistics.median(cpus):.2f}" if cpus else "–"
        rows.append(f"| `{job}` | {phases['process up']:.2f} | {phases['run started']:.2f} | "
                    f"{phases['first step']:.2f} | {cpu} |")
        print(rows[-1], flush=True)
    return server_s, rows


def load() -> float:
    return os.getloadavg()[0]


def write_section(section: str, rows: list[Row], path: Path = ROOT / "BENCHMARKS.md") -> None:
    """Replace this section of benchmarks/results/startup.md beside `path`, up to the next heading or HTML comment
    (text below it stays), or add it; then these rows of the summary table in `path`."""
    details = details_path(path, "startup")
    ensure_details(details)
    text = details.read_text()
    pattern = re.compile(re.escape(HEADING) + r".*?(?=\n## |\n<!-- |\Z)", re.DOTALL)
    found = pattern.search(text)
    if found:
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    details.write_text(text)
    if found:
        archive(details, found.group(0), section)
    update_rows(path, rows)


def summary(command: str, command_rows: list[str], run_rows: list[str]) -> list[Row]:
    """The rows of BENCHMARKS.md's summary table, from the rendered rows of the section's two tables."""
    def cells(row: str) -> list[str]:
        return [c.strip() for c in row.strip().strip("|").split("|")]

    out = []
    for row in command_rows:
        label, _, _, wall, cpu = cells(row)
        if label.startswith("the code location built"):
            out.append(Row("startup:code-location-built", "start-up: the code location built in a fresh process "
                           "(`defs()`, with bytecode; wall s, CPU-s)", f"{wall} wall, {cpu} CPU-s", command,
                           "startup.md", "≤ 3 s", verdict(wall != "–" and float(wall) <= 3.0)))
    for row in run_rows:
        job, _, _, first, cpu = cells(row)
        if job == "`curation_job`":
            out.append(Row("startup:run-worker-first-step", "start-up: a run worker's first step from launch "
                           "(`curation_job`; s, worker CPU-s)", f"{first} s, {cpu} CPU-s", command, "startup.md",
                           "≤ 3 s", verdict(float(first) <= 3.0)))
    return out


def render(args: argparse.Namespace, argv: list[str], loads: tuple[float, float], command_rows: list[str],
           server_s: float, run_rows: list[str]) -> str:
    """The BENCHMARKS.md section of these figures."""
    command = " ".join(["python -m benchmarks.startup", *argv])
    section = [
        f"{HEADING} (`make bench-startup`; not part of `make bench`)",
        "",
        f"`{command}`, {time.strftime('%Y-%m-%d')}, a 2-core machine (1-minute load average {loads[0]:.1f} "
        f"at the start, {loads[1]:.1f} at the end: other processes were running, so wall seconds are inflated; "
        "compare CPU seconds).",
    ]
    if command_rows:
        section += [
            "",
            "Wall and CPU (user + system) seconds of a whole process (the imports alone, the code location imported, "
            f"and built, two CLI commands start to finish on the demo's lake), median of {args.repeat} interleaved "
            "runs: without compiled bytecode (PYTHONDONTWRITEBYTECODE=1 and an empty PYTHONPYCACHEPREFIX: every "
            "process compiles Dagster again) and with the bytecode `make` installs (`uv sync --compile-bytecode` "
            "and `compileall` of the project). `status` reads the lake alone and imports no Dagster; `stale` reads "
            "the Dagster instance for its crawls." + (" –: not measured (`--no-cold`)." if args.no_cold else ""),
            "",
            "| command | without bytecode: wall s | CPU s | with bytecode: wall s | CPU s |",
            "|---|---:|---:|---:|---:|",
            *command_rows,
        ]
    if run_rows:
        section += [
            "",
            "A run worker on a real deployment (a throwaway embedded store and instance with the project's "
            f"dagster.yaml; the code location's code server started as the deployment starts it, `dagster "
            f"code-server start`, serving after {server_s:.1f} s): "
            f"seconds from the launch (RUN_STARTING) to each milestone of the worker's start-up, median of "
            f"{args.runs} runs of each job, interleaved, each in a fresh worker process the code server spawns. "
            "process up: \"Started process for run\" (interpreter, Dagster, the instance); run started: RUN_START "
            "(the code location imported "
            "and built, the job resolved); first step: STEP_START (resources initialized). Worker CPU: the worker's "
            "user + system seconds as its first step starts (sampled every 20 ms).",
            "",
            "| job | process up (s) | run started (s) | first step (s) | worker CPU s at first step |",
            "|---|---:|---:|---:|---:|",
            *run_rows,
        ]
    section += ["", BEFORE_AFTER, "", EARLIER, "", WHERE]
    return "\n".join(section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command")
    parser.add_argument("--runs", type=int, default=5, help="runs of each job through the code server")
    parser.add_argument("--skip-commands", action="store_true")
    parser.add_argument("--no-cold", action="store_true", help="commands: only with compiled bytecode")
    parser.add_argument("--skip-runs", action="store_true")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the section instead of writing benchmarks/results/startup.md and the summary "
                             "table of BENCHMARKS.md")
    args = parser.parse_args()
    load_before = load()
    command_rows = [] if args.skip_commands else commands(args.repeat, cold=not args.no_cold)
    server_s, run_rows = (0.0, []) if args.skip_runs else run_workers(args.runs)
    section = render(args, sys.argv[1:], (load_before, load()), command_rows, server_s, run_rows)
    if args.dry_run:
        print(section)
    else:
        write_section(section, summary(" ".join([".venv/bin/python -m benchmarks.startup", *sys.argv[1:]]),
                                       command_rows, run_rows))


if __name__ == "__main__":
    main()
