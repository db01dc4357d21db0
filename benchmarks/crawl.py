"""`make bench-crawl`: the whole path as a user runs it, on a corpus of two crawls, through a real deployment.

    .venv/bin/python -m benchmarks.crawl [--corpus .bench/corpus] [--runner pool|dask] [--no-anchor] [--resume]
                                         [--output BENCHMARKS.md] [--json .bench/crawl/results.json]

The corpus is a folder holding `manifest.json` (`{"crawls": {crawl: [file paths relative to the folder]}}`, and
optionally `"counts"`: records per file) and its WARC files. From a fresh LLM_ASSETS_HOME (`.bench/crawl/home`: the
embedded SeaweedFS store, the SQLite Dagster instance), the benchmark starts what the demo starts (a code server and
`dagster-daemon`, `llm_assets.cli.demo.deployment`), with the runner of the settings (the pool of 2 workers; `--runner
dask` starts the local Dask cluster as `make demo-cluster` does), and:

1. crawl A: `llm-assets drop` (the CLI, as a user), the raw-drop sensor's `lake_job` runs, then ONE stale backfill
   (`crawl_job`, `curated_job`, the release), as the demo runs them;
2. with the deployment stopped (so nothing builds it), crawl B dropped and `llm-assets stale --forecast --json` run:
   the forecast of crawl B from crawl A's history, saved;
3. the deployment started again: the sensor's runs and one stale backfill build crawl B; the forecast is compared
   with the ledger rows its planned partitions appended (CPU-seconds and bytes out per stage: stages of at least
   `JUDGED_CPU_S` within ±25 %, the total within ±15 %);
4. per stage, from the cost ledger and the materializations: CPU-seconds per page, wall, peak RSS per unit, bytes,
   S3 requests, units, Dagster runs; per phase, from /proc of every process of the deployment (sampled each second):
   the CPU of the daemon, the code server, the run workers (their own, without their pool's) and the unit
   processes, the run workers' peak RSS, and the driver's (this process and the CLI commands it runs);
5. every record accounted for, per crawl and file: records read = documents + set aside + quarantined + skipped,
   from the documents manifests' units, checked against the rows their parts and rejected parts hold (and the
   corpus manifest's counts where it has them);
6. datatrove's FineWeb pipeline on the same files (`benchmarks.crawl_datatrove.run_anchor`, when importable;
   `--no-anchor` skips it): CPU-seconds end to end, and the agreement of the kept documents;
7. `benchmarks/results/crawl.md`, rows of BENCHMARKS.md's summary, and (`--json`) everything as JSON.

Each phase's figures are saved to `<work>/state.json` when it ends: `--resume` skips the phases already done (the
store and the instance keep their state), so a run of an hour that fails late need not start over.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from benchmarks.report import table
from benchmarks.summary import ROOT, Row, publish

SECTION = "crawl"  # the details file and the summary rows' keys; --section names another (a corpus's slice)
FORECAST_STAGE_GOAL, FORECAST_TOTAL_GOAL = 0.25, 0.15
JUDGED_CPU_S = 60.0  # the issue's: stages that cost at least this are judged; below it, first-unit costs dominate
RATIO_GOAL, AGREEMENT_GOAL, UNIT_RSS_GOAL, DAGSTER_SHARE_GOAL = 3.0, 0.99, 2**30, 0.05
# The documents stage's drop reasons, as its docstring sorts them: records set aside for what they hold (kept in the
# rejected part with their URL) and bad input quarantined there; every other reason is a record skipped (requests,
# metadata, revisits...), counted only.
SET_ASIDE = frozenset({"non_2xx", "non_html", "no_text"})
QUARANTINED = frozenset({"truncated_file", "corrupt_record", "oversized", "non_html_payload", "extraction_timeout",
                         "corrupt_json", "missing_text", "unreadable_file"})
# Our stages that do what datatrove's FineWeb pipeline does (extraction and filters, MinHash dedup, tokenization): the
# others (image-text pairs, enrichment, statistics, the cost roll-up, raw inventory) are work it does not do.
SAME_WORK = ("documents", "filtered", "signatures", "duplicate_clusters", "deduplicated", "tokenized")
# One Common Crawl dump, in Common Crawl's figures (not measured here), and the compass goal for it
DUMP_PAGES, DUMP_CORE_HOURS_GOAL = 3.6e9, 25_000
SLICE_ROWS = ("vs-datatrove", "agreement")  # the summary rows a slice of the corpus publishes (`--section`)
WARC_TYPES = frozenset({"warcinfo", "request", "response", "metadata", "revisit", "resource", "conversion",
                        "continuation"})
ANCHOR_LANGUAGES = frozenset({"en"})  # what datatrove's FineWeb pipeline keeps: English
NOT_PAGES = frozenset({"not_response", "revisit"})  # records read that are no page: a page is a response record
LLM_ASSETS = str(Path(sys.executable).with_name("llm-assets"))


def log(message: str) -> None:
    print(f"{datetime.now(timezone.utc):%H:%M:%S} bench-crawl: {message}", file=sys.stderr, flush=True)


# -- the corpus ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    root: Path
    crawls: dict[str, list[Path]]  # crawl -> its files, in the manifest's order
    counts: dict[str, int]  # file path relative to root -> records, where the manifest states them
    page_sizes: dict | None = None  # `make corpus`: percentiles of its pages' sizes and of the CC sample it fitted

    @classmethod
    def load(cls, root: Path) -> Corpus:
        manifest = json.loads((root / "manifest.json").read_text())
        crawls = {c: [root / p for p in files] for c, files in manifest["crawls"].items()}
        if len(crawls) != 2:
            raise ValueError(f"{root}/manifest.json: two crawls expected (history, then forecast), got {list(crawls)}")
        paths = {p for files in manifest["crawls"].values() for p in files}
        return cls(root, crawls, {p: n for p, n in _record_counts(manifest).items() if p in paths},
                   manifest.get("page_sizes"))

    def sizes(self) -> str:
        return ", ".join(f"{c}: {len(f)} files, {sum(p.stat().st_size for p in f) / 2**20:,.1f} MiB"
                         for c, f in self.crawls.items())


def _record_counts(manifest: dict) -> dict[str, int]:
    """Records per file as the corpus manifest states them: `files[].records` by kind (`make corpus`: the WARC
    record types, and kinds of response counted among the responses too: redirect, image, damaged...), or `counts`
    as {path: n} or {path: {"records": n}}. A corpus that states none (or in another shape) is not compared rather
    than guessed at."""
    out: dict[str, int] = {}
    for f in manifest.get("files") or []:
        if isinstance(f, dict) and isinstance(f.get("records"), dict):
            out[f["path"]] = sum(n for kind, n in f["records"].items() if kind in WARC_TYPES)
    counts = manifest.get("counts")
    for path, value in (counts.items() if isinstance(counts, dict) else ()):
        if isinstance(value, int):
            out[path] = value
        elif isinstance(value, dict) and isinstance(value.get("records"), int):
            out[path] = value["records"]
    return out


# -- the processes: CPU and memory of the deployment from /proc --------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")
ROLES = ("daemon", "code_server", "run_worker", "units", "store", "cluster", "cli", "other")


def _role(cmdline: str, parent_role: str | None) -> str:
    if "run-daemon" in cmdline or "dagster-daemon" in cmdline:
        return "daemon"
    if "api grpc" in cmdline or "code-server" in cmdline:
        return "code_server"
    # the code server's other children are the runs it launched (DefaultRunLauncher: a process per run)
    if "execute_run" in cmdline or parent_role == "code_server":
        return "run_worker"
    if parent_role in ("run_worker", "units"):  # the pool's fork server and workers, a unit's own children
        return "units"
    if parent_role in ("daemon", "store", "cluster", "cli"):
        return parent_role
    if "llm-assets" in cmdline or "llm_assets.cli" in cmdline:
        return "cli"
    return "other"


@dataclass
class Proc:
    role: str
    cmd: str
    cpu_s: float = 0.0
    peak_rss_bytes: int = 0


class ProcessMeter:
    """Samples every process descended from this one (the store, the code server, the daemon, the run workers and
    their pools, the CLI commands) each `interval_s`: CPU (user + system) and peak RSS (VmHWM) per process, keyed by
    (pid, start time) so a reused pid is another process. A process that outlives its parent (a pool's fork server
    reparented to init) keeps being sampled. The last interval of a process that ends is lost: ≤ 1 s of CPU each."""

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self.procs: dict[tuple[int, int], Proc] = {}
        self.adopted: dict[int, str] = {}  # processes started detached (the store, a cluster's nodes): pid -> role
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="process-meter")

    def __enter__(self) -> ProcessMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def adopt(self, pid: int, role: str) -> None:
        """Sample `pid` too, as `role`: a process not descended from this one (the CLI started it detached)."""
        with self._lock:
            self.adopted[pid] = role

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        stats = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    raw = Path(f"/proc/{entry.name}/stat").read_text()
                except OSError:
                    continue
                fields_ = raw[raw.rindex(")") + 2:].split()
                # after the command: state, ppid, ..., utime (14th field of the whole line), stime, ..., starttime
                stats[int(entry.name)] = (int(fields_[1]), int(fields_[11]) + int(fields_[12]), int(fields_[19]))
        ours, roots = {}, {os.getpid()}
        with self._lock:
            known = set(self.procs)
            children: dict[int, list[int]] = {}
            for pid, (ppid, _, _) in stats.items():
                children.setdefault(ppid, []).append(pid)
            stack: list[tuple[int, str | None]] = [(os.getpid(), None)]
            stack += [(p, None) for p, start in known if p in stats and stats[p][2] == start]
            stack += [(p, None) for p in self.adopted if p in stats]
            while stack:
                pid, parent_role = stack.pop()
                if pid in ours:
                    continue
                _, ticks, start = stats[pid]
                key = (pid, start)
                proc = self.procs.get(key)
                if proc is None:
                    if pid in roots:
                        proc = Proc("driver", "benchmark")
                    elif pid in self.adopted:
                        proc = Proc(self.adopted[pid], self.adopted[pid])
                    else:
                        try:
                            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                                errors="replace").strip()
                        except OSError:
                            continue
                        proc = Proc(_role(cmd, parent_role), cmd[:160])
                    self.procs[key] = proc
                if pid in self.adopted:  # sampled as its starter's child before it was adopted
                    proc.role = self.adopted[pid]
                elif parent_role is not None and pid not in roots:  # or a child of such a process
                    proc.role = _role(proc.cmd, parent_role)
                proc.cpu_s = max(proc.cpu_s, ticks / CLK_TCK)
                proc.peak_rss_bytes = max(proc.peak_rss_bytes, _hwm(pid))
                ours[pid] = proc
                stack.extend((c, proc.role) for c in children.get(pid, ()))

    def totals(self) -> dict[str, float]:
        """CPU-seconds by role so far (every process seen, ended ones included)."""
        with self._lock:
            out = dict.fromkeys((*ROLES, "driver"), 0.0)
            for proc in self.procs.values():
                out[proc.role] = out.get(proc.role, 0.0) + proc.cpu_s
            return out

    def top(self, n: int = 20) -> list[dict]:
        """The processes that spent most CPU: role, command, CPU-s, peak RSS (how the roles were told apart)."""
        with self._lock:
            procs = sorted(self.procs.values(), key=lambda p: -p.cpu_s)[:n]
            return [asdict(p) for p in procs]

    def peaks(self) -> dict[str, int]:
        """The largest peak RSS of any process of each role so far."""
        with self._lock:
            out: dict[str, int] = {}
            for proc in self.procs.values():
                out[proc.role] = max(out.get(proc.role, 0), proc.peak_rss_bytes)
            return out


def _hwm(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# -- the phases --------------------------------------------------------------------------------------------------------


@dataclass
class Phase:
    """One step of the run: its window, its Dagster runs, and what the processes of the deployment spent in it."""

    name: str
    started: float
    ended: float = 0.0
    # runs created and units committed since: the end of the phase before, so that none falls between two phases
    counted_from: float = 0.0
    runs: int = 0
    failed: list[str] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)  # by process role (`ROLES`), during the phase
    peak_rss_bytes: dict[str, int] = field(default_factory=dict)  # by role, the largest of any process so far
    commit: str = ""  # the checkout that ran it ("" in a state saved before it was recorded)
    load: list[float] = field(default_factory=list)  # the 1-minute load average, sampled every 30 s during it

    @property
    def wall_s(self) -> float:
        return self.ended - self.started


class Bench:
    """The run: its home, the deployment's instance and lake, the phases done (saved after each one)."""

    def __init__(self, work: Path, corpus: Corpus, runner: str, resume: bool):
        self.work, self.corpus, self.runner = work, corpus, runner
        self.home = work / "home"
        self.state_file = work / "state.json"
        state = json.loads(self.state_file.read_text()) if resume and self.state_file.exists() else {}
        if not state:
            if self.home.exists():
                self._stop_local_services()
                shutil.rmtree(self.home)
            self.home.mkdir(parents=True)
        self.phases: dict[str, Phase] = {n: Phase(**p) for n, p in state.get("phases", {}).items()}
        self.loads: list[float] = []  # the 1-minute load average every 30 s, from `_sample_load`
        self.forecast: dict = state.get("forecast", {})
        self._last_end: float | None = None
        self.env = {**os.environ, "LLM_ASSETS_HOME": str(self.home)}
        for var in ("LLM_ASSETS_S3_ENDPOINT", "LLM_ASSETS_BUCKET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                    "DAGSTER_HOME"):
            self.env.pop(var, None)  # the home's own store and instance, never one this shell points at
        if runner == "dask":
            self.env["LLM_ASSETS_SETTINGS"] = str(ROOT / "llm_assets" / "settings.cluster.yaml")
        os.environ.update(self.env)
        for var in set(os.environ) - set(self.env):
            del os.environ[var]

    def _stop_local_services(self) -> None:
        env = {**os.environ, "LLM_ASSETS_HOME": str(self.home)}
        for what in (["cluster", "stop"], ["store", "stop"]):
            subprocess.run([LLM_ASSETS, *what], env=env, capture_output=True, check=False)

    def save(self) -> None:
        self.state_file.write_text(json.dumps({"phases": {n: asdict(p) for n, p in self.phases.items()},
                                               "forecast": self.forecast}, indent=1))

    def cli(self, *args: str) -> str:
        """An `llm-assets` command, as a user runs it; -> its standard output."""
        got = subprocess.run([LLM_ASSETS, *args], env=self.env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
        if got.returncode:
            raise RuntimeError(f"llm-assets {' '.join(args[:3])} ... failed ({got.returncode}): {got.stderr[-2000:]}")
        return got.stdout

    def drop(self, crawl: str) -> None:
        files = [str(p) for p in self.corpus.crawls[crawl]]
        for i in range(0, len(files), 500):  # within any argument-length limit
            self.cli("drop", "--crawl", crawl, *files[i:i + 500])
        log(f"dropped {len(files)} files into {crawl}")

    @contextmanager
    def phase(self, name: str, meter: ProcessMeter) -> Iterator[Phase]:
        import dagster as dg

        from benchmarks.harness import git_commit
        from llm_assets.platform.instance import get_instance

        phase = Phase(name, time.time(), commit=git_commit())
        phase.counted_from = self._last_end or phase.started
        first_sample = len(self.loads)
        before = meter.totals()
        log(f"{name}: begins")
        yield phase
        meter.sample()
        phase.ended = time.time()
        after = meter.totals()
        phase.cpu_s = {r: round(after.get(r, 0.0) - before.get(r, 0.0), 3) for r in after}
        phase.peak_rss_bytes = meter.peaks()
        phase.load = self.loads[first_sample:] or [os.getloadavg()[0]]
        phase.runs = len(get_instance().get_run_records(dg.RunsFilter(created_after=datetime.fromtimestamp(
            phase.counted_from, timezone.utc), created_before=datetime.fromtimestamp(phase.ended, timezone.utc))))
        self._last_end = phase.ended
        self.phases[name] = phase
        self.save()
        log(f"{name}: {phase.wall_s:,.0f} s, {phase.runs} Dagster runs, CPU-s by process {phase.cpu_s}")

    def done(self, name: str) -> bool:
        if name in self.phases:
            log(f"{name}: done in an earlier run (--resume)")
            return True
        return False


def build_crawl(bench: Bench, meter: ProcessMeter, crawl: str, first: bool) -> None:
    """Drop (the first crawl only: the second was dropped before its forecast), the sensor's lake runs, then ONE
    stale backfill, as the demo runs them: a code server and the daemon of this home run them all."""
    from llm_assets.cli import demo
    from llm_assets.core.lake import Lake
    from llm_assets.platform.environment import store_config
    from llm_assets.platform.instance import get_instance
    from llm_assets.settings import load_settings

    todo = [f"lake {crawl}", f"backfill {crawl}", *(["models"] if first else [])]
    if all(name in bench.phases for name in todo):
        log(f"{crawl}: built in an earlier run (--resume)")
        return
    settings = load_settings()
    lake = Lake(store_config(settings.store))
    instance = get_instance()
    with ExitStack() as services:
        # starting and stopping the code server and the daemon are part of what the run costs
        with bench.phase(f"start {crawl}", meter):
            runs = services.enter_context(demo.deployment(instance))
        if first and not bench.done("models"):
            with bench.phase("models", meter) as phase:
                phase.failed = [f.run_id for f in demo.run_models(runs)]
        if not bench.done(f"lake {crawl}"):
            with bench.phase(f"lake {crawl}", meter) as phase:
                # after the upload, as the demo: a tick begun during it may not list the files yet. The second crawl
                # was dropped before the daemon started, whose first tick may come before this phase.
                began = time.time()
                if first:
                    bench.drop(crawl)
                dropped_at = time.time() if first else bench.forecast["dropped_at"]
                phase.failed = [f.run_id for f in demo.run_sensor_requests(runs, dropped_at,
                                                                            began if first else dropped_at)]
        if not bench.done(f"backfill {crawl}"):
            with bench.phase(f"backfill {crawl}", meter) as phase:
                planned = demo.stale_plan(instance, lake, settings, [])
                phase.failed = [f.run_id for f in demo.run_stale_backfill(runs, lake, settings, planned)]
        with bench.phase(f"stop {crawl}", meter):
            services.close()
    failed = [r for name, p in bench.phases.items() if crawl in name for r in p.failed]
    if failed:
        raise RuntimeError(f"{len(failed)} runs of {crawl} failed ({', '.join(failed[:5])}): see "
                           f"{bench.home}/demo/logs and the runs in the instance")


def forecast_crawl(bench: Bench, meter: ProcessMeter, crawl: str) -> None:
    """Crawl B dropped while no daemon runs (nothing builds it), and the forecast `llm-assets stale --forecast`
    makes of its plan from the history in the ledger."""
    if bench.done(f"forecast {crawl}"):
        return
    with bench.phase(f"forecast {crawl}", meter):
        bench.drop(crawl)
        dropped_at = time.time()
        bench.forecast = json.loads(bench.cli("stale", "--forecast", "--json")) | {"dropped_at": dropped_at}
        (bench.work / "forecast.json").write_text(json.dumps(bench.forecast, indent=1))
    log(f"forecast of {crawl}: {len(bench.forecast['partitions'])} partitions, "
        f"{bench.forecast['forecast']['total']['cpu_hours'] * 3600:,.1f} CPU-s")


@contextmanager
def dask_cluster(bench: Bench, meter: ProcessMeter) -> Iterator[None]:
    """`llm-assets cluster start` as `make demo-cluster` runs it: a scheduler and two workers on 127.0.0.1."""
    if bench.runner != "dask":
        yield
        return
    log(bench.cli("cluster", "start", "--nodes", "3").strip())
    for node in json.loads((bench.home / "cluster" / "cluster.json").read_text())["nodes"]:
        meter.adopt(node["pid"], "cluster" if node["role"] == "scheduler" else "units")
    try:
        yield
    finally:
        bench.cli("cluster", "stop")


# -- what the run cost, from the ledger and the instance -----------------------------------------------------------


@dataclass(frozen=True)
class StageRow:
    asset: str
    units: int
    cpu_s: float
    wall_s: float  # the partitions' own `seconds` (first unit submitted to output), summed
    cpu_s_per_page: float
    peak_unit_rss_bytes: int
    bytes_in: int
    bytes_out: int
    requests: int
    rows_in: int
    rows_out: int
    runs: int  # Dagster runs that materialized it


def stage_rows(ledger: pl.DataFrame, pages: int, walls: dict[str, float], runs: dict[str, int]) -> list[StageRow]:
    from llm_assets.stages import SPECS

    order = [s.name for s in SPECS]
    per = ledger.group_by("asset").agg(
        units=pl.len(), cpu_s=pl.col("cpu_s").sum(), peak=pl.col("peak_rss_bytes").max(),
        bytes_in=pl.col("bytes_in").sum(), bytes_out=pl.col("bytes_out").sum(), requests=pl.col("requests").sum(),
        rows_in=pl.col("rows_in").sum(), rows_out=pl.col("rows_out").sum())
    rows = [StageRow(r["asset"], r["units"], r["cpu_s"], walls.get(r["asset"], 0.0), r["cpu_s"] / max(pages, 1),
                     r["peak"], r["bytes_in"], r["bytes_out"], r["requests"], r["rows_in"], r["rows_out"],
                     runs.get(r["asset"], 0))
            for r in per.iter_rows(named=True)]
    return sorted(rows, key=lambda r: order.index(r.asset) if r.asset in order else len(order))


def materialization_walls(instance, assets: list[str]) -> dict[str, float]:
    """asset -> the `seconds` of its materializations (each partition's own measure of its work), summed."""
    import dagster as dg

    out = {}
    for asset in assets:
        total, cursor = 0.0, None
        while True:
            got = instance.fetch_materializations(dg.AssetKey(asset), limit=1000, cursor=cursor)
            for record in got.records:
                seconds = record.asset_materialization.metadata.get("seconds") if record.asset_materialization \
                    else None
                total += float(seconds.value) if seconds is not None else 0.0
            if not got.has_more:
                break
            cursor = got.cursor
        out[asset] = total
    return out


def runs_per_asset(instance) -> tuple[dict[str, int], dict[str, int]]:
    """(asset -> runs that materialized it, job -> runs): a run of several assets counts for each."""
    import dagster as dg

    per_asset: dict[str, int] = {}
    per_job: dict[str, int] = {}
    for record in instance.get_run_records(dg.RunsFilter()):
        run = record.dagster_run
        per_job[run.job_name] = per_job.get(run.job_name, 0) + 1
        assets = {e.event_log_entry.dagster_event.asset_key.path[-1] for e in instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION, limit=10_000).records}
        for asset in assets or {key.path[-1] for key in run.asset_selection or ()}:
            per_asset[asset] = per_asset.get(asset, 0) + 1
    return per_asset, per_job


# -- the record accounting ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileAccount:
    crawl: str
    source: str
    read: int
    documents: int
    set_aside: dict[str, int]
    quarantined: dict[str, int]
    skipped: dict[str, int]
    written_documents: int  # rows of the documents parts from this file
    written_rejected: int  # rows of the rejected parts from this file
    manifest_records: int | None  # the corpus manifest's count, where it has one

    @property
    def outcomes(self) -> int:
        return self.documents + sum(self.set_aside.values()) + sum(self.quarantined.values()) + sum(
            self.skipped.values())

    @property
    def balanced(self) -> bool:
        """Every record read has one outcome, and the parts hold what the units say they wrote (rejected rows:
        damaged records are kept up to a cap per unit, so at most)."""
        aside = sum(self.set_aside.values()) + sum(self.quarantined.values())
        return (self.read == self.outcomes and self.written_documents == self.documents
                and self.written_rejected <= aside)

    @property
    def as_written(self) -> bool | None:
        """Whether the records read are the records the corpus manifest says the file holds (None: it says not)."""
        return None if self.manifest_records is None else self.manifest_records == self.read


def account(lake, settings, corpus: Corpus) -> list[FileAccount]:
    from llm_assets.core.partition import committed

    out = []
    for crawl, files in corpus.crawls.items():
        manifests = committed(lake, "documents", crawl, settings.shard_keys()).values()
        per: dict[str, dict] = {}
        for m in manifests:
            for u in m.units:
                f = per.setdefault(u.source, {"read": 0, "documents": 0, "set_aside": {}, "quarantined": {},
                                              "skipped": {}})
                f["read"] += u.rows_in
                f["documents"] += u.rows_out
                for reason, n in u.dropped.items():
                    kind = "set_aside" if reason in SET_ASIDE else "quarantined" if reason in QUARANTINED else "skipped"
                    f[kind][reason] = f[kind].get(reason, 0) + n
        parts = [p for m in manifests for p in m.parts]
        rejected = [p for m in manifests for p in m.rejected_parts]
        written = _counts_by_source(lake, parts)
        written_rejected = _counts_by_source(lake, rejected)
        by_name = {p.name: p for p in files}
        for source, f in sorted(per.items()):
            name = source.rsplit("/", 1)[-1]
            rel = str(by_name[name].relative_to(corpus.root)) if name in by_name else name
            out.append(FileAccount(crawl, source, f["read"], f["documents"], f["set_aside"], f["quarantined"],
                                   f["skipped"], written.get(source, 0), written_rejected.get(source, 0),
                                   corpus.counts.get(rel)))
    return out


def _counts_by_source(lake, keys: list[str]) -> dict[str, int]:
    if not keys:
        return {}
    frame = lake.scan(keys).select("source_key").group_by("source_key").len().collect()
    return dict(frame.iter_rows())


# -- the anchor: datatrove's FineWeb pipeline on the same files --------------------------------------------------------


@dataclass(frozen=True)
class AnchorStage:
    name: str
    cpu_s: float
    wall_s: float
    peak_rss_mib: float
    docs_in: int
    docs_out: int
    bytes_out: int


@dataclass(frozen=True)
class Anchor:
    stages: list[AnchorStage]
    kept_filtered: set[tuple[str, str]]  # (WARC file name, WARC-Record-ID) after its filter stage
    kept: set[tuple[str, str]]  # ... and after its deduplication: what it keeps end to end
    repaired: dict[str, int] = field(default_factory=dict)  # crawl/file -> damaged gzip members left out of its input

    @property
    def cpu_s(self) -> float:
        return sum(s.cpu_s for s in self.stages)


def _get(obj, name: str, default=None):
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def run_anchor(corpus: Corpus, work: Path, workers: int, extract_timeout: float) -> Anchor | None:
    """datatrove's side (`benchmarks.crawl_datatrove.run_anchor`) on the corpus's files, linked one folder per crawl
    as it reads them, with Trafilatura's per-page limit at `extract_timeout` wall seconds (datatrove's own 1 s drops
    pages by the machine's load; ours is 30 CPU-s); None when that module is not there."""
    try:
        from benchmarks.crawl_datatrove import intact_members
        from benchmarks.crawl_datatrove import run_anchor as anchor_fn  # type: ignore[import-not-found]
    except ImportError:
        log("benchmarks.crawl_datatrove is not there: no anchor")
        return None
    inputs = work / "anchor-input"
    shutil.rmtree(inputs, ignore_errors=True)
    repaired: dict[str, int] = {}
    for crawl, files in corpus.crawls.items():
        (inputs / crawl).mkdir(parents=True)
        for path in files:
            intact, damaged = intact_members(path.read_bytes())
            if damaged:  # datatrove's reader would end the file's task there: it reads the intact members
                (inputs / crawl / path.name).write_bytes(intact)
                repaired[f"{crawl}/{path.name}"] = damaged
            else:
                (inputs / crawl / path.name).symlink_to(path.resolve())
    if repaired:
        log(f"datatrove reads {len(repaired)} files without their {sum(repaired.values())} damaged gzip members")
    log(f"datatrove's FineWeb pipeline on the same files, {workers} workers")
    result = anchor_fn(inputs, work / "anchor", workers=workers, extract_timeout=extract_timeout)
    stages = _get(result, "stages", {})
    items = stages.items() if isinstance(stages, dict) else ((_get(s, "name", "?"), s) for s in stages)
    parsed = [AnchorStage(str(name), float(_get(s, "cpu_s", 0.0)), float(_get(s, "wall_s", 0.0)),
                          float(_get(s, "peak_rss_mib", 0.0)), int(_get(s, "docs_in", 0) or 0),
                          int(_get(s, "docs_out", 0) or 0), int(_get(s, "bytes_out", 0))) for name, s in items]
    return Anchor(parsed, _kept_documents(_get(result, "kept_filtered", [])),
                  _kept_documents(_get(result, "kept_dedup", None) or _get(result, "kept", [])), repaired)


def _kept_documents(kept) -> set[tuple[str, str]]:
    """(file name, WARC-Record-ID) of the anchor's kept documents: rows, or files of rows (JSON Lines, CSV, Parquet)."""
    rows: list = []
    for item in kept if not isinstance(kept, (str, Path)) else [kept]:
        if isinstance(item, (str, Path)) and Path(item).is_file():
            path = Path(item)
            frame = (pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path) if path.suffix == ".csv"
                     else pl.read_ndjson(path))
            rows.extend(frame.to_dicts())
        else:
            rows.append(item)
    out = set()
    for row in rows:
        if isinstance(row, (tuple, list)):
            out.add((Path(str(row[0])).name, str(row[1])))
        else:
            name = next((row[k] for k in ("file", "warc_file", "source", "file_name") if k in row), "")
            rid = next((row[k] for k in ("warc_record_id", "record_id", "WARC-Record-ID", "id") if k in row), "")
            out.add((Path(str(name)).name, str(rid)))
    return out


@dataclass(frozen=True)
class Agreement:
    ours: int
    anchor: int
    both: int
    classes: dict[str, int]  # why a document is on one side only: "only datatrove: dropped by filtered gopher_..."

    @property
    def rate(self) -> float:
        union = self.ours + self.anchor - self.both
        return self.both / union if union else 1.0


def agreement(lake, settings, crawls: list[str], anchor: Anchor) -> dict[str, Agreement]:
    """Our documents against the anchor's, by (file, WARC-Record-ID), after filtering (`filtered` against its filter
    stage's) and end to end (`deduplicated` against its dedup stage's), all of ours and those in the anchor's
    languages (`*_same_languages`: FineWeb keeps English, the default settings more); see `classify`."""
    from llm_assets.core.partition import committed

    def frame(asset: str, rejected: bool, columns: list[str]) -> pl.DataFrame:
        keys = [p for c in crawls for m in committed(lake, asset, c, settings.shard_keys()).values()
                for p in (m.rejected_parts if rejected else m.parts)]
        if not keys:
            return pl.DataFrame(schema={c: pl.String for c in columns})
        return lake.scan(keys).select(columns).collect()

    file = pl.col("source_key").str.split("/").list.last()
    kept = {asset: frame(asset, False, ["source_key", "warc_record_id", "language"]).select(
        file, "warc_record_id", "language") for asset in ("filtered", "deduplicated")}
    ours = {asset: {(f, r) for f, r, _ in k.iter_rows()} for asset, k in kept.items()}
    language = {(f, r): lang for f, r, lang in kept["filtered"].iter_rows()}
    dropped: dict[tuple[str, str] | str, str] = {}
    set_aside = frame("documents", True, ["doc_id", "reason"]).drop_nulls("doc_id")
    dropped.update({doc: f"documents {why}" for doc, why in set_aside.iter_rows()})
    by_filter = pl.concat_str("filter", pl.lit(" "), "reason")
    for asset, why in (("filtered", by_filter), ("deduplicated", pl.col("reason"))):
        rows = frame(asset, True, ["source_key", "warc_record_id", "reason"]
                     + (["filter"] if asset == "filtered" else []))
        for name, rid, reason in rows.select(file, "warc_record_id", why.alias("why")).iter_rows():
            dropped[(name, rid)] = f"{asset} {reason}"
    same = {asset: {d for d in docs if language.get(d) in ANCHOR_LANGUAGES} for asset, docs in ours.items()}
    return {"filtered": classify(ours["filtered"], anchor.kept_filtered, dropped, language),
            "deduplicated": classify(ours["deduplicated"], anchor.kept, dropped, language),
            "filtered_same_languages": classify(same["filtered"], anchor.kept_filtered, dropped, language),
            "deduplicated_same_languages": classify(same["deduplicated"], anchor.kept, dropped, language)}


def classify(ours: set[tuple[str, str]], theirs: set[tuple[str, str]], dropped: dict[tuple[str, str] | str, str],
             language: dict[tuple[str, str], str] | None = None) -> Agreement:
    """Each document kept on one side only, classed by where our side dropped it: `dropped` maps (file,
    WARC-Record-ID), or for the documents stage's set-aside records their doc id, to the stage and reason; those
    only we kept, by the language we gave them (FineWeb keeps English alone, the default settings more)."""
    from llm_assets.core.documents import doc_id

    classes: dict[str, int] = {}
    for name, rid in theirs - ours:
        why = dropped.get((name, rid)) or dropped.get(doc_id(name, rid, 0))
        ours_as = (language or {}).get((name, rid))
        label = (f"only datatrove's: ours dropped it at {why}" if why else
                 f"only datatrove's: ours kept it as language {ours_as}" if ours_as else
                 "only datatrove's: no document of ours (not read as an HTML response)")
        classes[label] = classes.get(label, 0) + 1
    for doc in ours - theirs:
        label = f"only ours: datatrove dropped it (ours: language {(language or {}).get(doc) or '?'})"
        classes[label] = classes.get(label, 0) + 1
    return Agreement(len(ours), len(theirs), len(ours & theirs),
                     dict(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))))


# -- the forecast against the build ----------------------------------------------------------------------------------


def forecast_comparison(lake, forecast: dict, since: float) -> pl.DataFrame:
    """The saved forecast against the ledger rows its planned partitions appended after `since`."""
    from llm_assets.core.forecast import Forecast, StageForecast, with_actuals
    from llm_assets.core.ledger import read_ledger

    fc = forecast["forecast"]
    figures = Forecast([StageForecast(**s) for s in fc["stages"]], fc["runner"], fc["slots"], fc["currency"],
                       fc["priced"])
    return with_actuals(figures, planned_rows(read_ledger(lake), forecast, since))


def planned_rows(ledger: pl.DataFrame, forecast: dict, since: float) -> pl.DataFrame:
    """The ledger rows the saved forecast's planned partitions appended from `since` on: what the plan cost."""
    from llm_assets.core.keys import split_partition

    targets = {(p["asset"], *split_partition(p["partition"] or "")) for p in forecast["partitions"]}
    return ledger.filter(pl.col("committed_at") >= since).filter(
        pl.struct("asset", "crawl", "shard").map_elements(
            lambda r: (r["asset"], r["crawl"], r["shard"]) in targets, return_dtype=pl.Boolean))


def forecast_verdicts(cmp: pl.DataFrame) -> tuple[list[str], bool, dict]:
    """(the judged stages, every judged stage within ±25 % on CPU and bytes out, the total's figures and errors)."""
    judged = cmp.filter(pl.col("cpu_s_actual") >= JUDGED_CPU_S)
    stage_ok = all(r[f"{m}_error"] is not None and abs(r[f"{m}_error"]) <= FORECAST_STAGE_GOAL
                   for r in judged.iter_rows(named=True) for m in ("cpu_s", "bytes_out"))
    total = {m: (float(cmp[f"{m}_forecast"].sum()), float(cmp[f"{m}_actual"].sum())) for m in ("cpu_s", "bytes_out")}
    errors = {m: (f / a - 1 if a else None) for m, (f, a) in total.items()}
    return list(judged["asset"]), stage_ok, {"figures": total, "errors": errors}


# -- the report --------------------------------------------------------------------------------------------------------


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.0f} %"


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def conditions(phases: list[Phase]) -> dict:
    """When and where the phases ran: their first start, the checkouts that ran them, the load averages sampled while
    they ran (None where a resumed run's saved phases did not record them), this machine."""
    from benchmarks.harness import cpu_model, git_commit, loadavg

    loads = [x for p in phases for x in p.load]
    recorded = bool(phases) and all(p.load for p in phases)
    commits = sorted({p.commit for p in phases if p.commit}) or [git_commit()]
    return {"started": datetime.fromtimestamp(min((p.started for p in phases), default=time.time()),
                                              timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "loadavg_end": loadavg(), "cpu_model": cpu_model(), "cores": os.cpu_count(),
            "commit": ", ".join(commits) + ("" if all(p.commit for p in phases) else " (phases before: not recorded)"),
            "loadavg_max": max(loads) if recorded else None,
            "loadavg_mean": sum(loads) / len(loads) if recorded else None, "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ROOT / ".bench" / "corpus")
    parser.add_argument("--work", type=Path, default=ROOT / ".bench" / "crawl",
                        help="LLM_ASSETS_HOME goes under it (home/), with state.json and the forecast")
    parser.add_argument("--runner", choices=("pool", "dask"), default="pool")
    parser.add_argument("--no-anchor", action="store_true", help="skip datatrove's side")
    parser.add_argument("--anchor-extract-timeout", type=float, default=30.0,
                        help="datatrove's Trafilatura limit per page, wall seconds (default 30, the product's own)")
    parser.add_argument("--resume", action="store_true", help="skip the phases state.json says are done")
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--json", type=Path, help="everything measured, as JSON")
    parser.add_argument("--from-json", type=Path, help="no run: the report and rows again from a run's --json file")
    parser.add_argument("--section", help="the details file (benchmarks/results/SECTION.md) and the summary rows' "
                                          f"key prefix (default: the run's own, else {SECTION})")
    args = parser.parse_args()
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        publish_results(args.output, results | ({"section": args.section or SECTION} if args.section else {}))
        log(f"{args.output}, benchmarks/results/crawl.md from {args.from_json}")
        return
    started = time.time()
    corpus = Corpus.load(args.corpus.resolve())
    bench = Bench(args.work.resolve(), corpus, args.runner, args.resume)
    first, second = list(corpus.crawls)
    log(f"corpus {corpus.root}: {corpus.sizes()}; home {bench.home}; runner {args.runner}")
    threading.Thread(target=_sample_load, args=(bench.loads,), daemon=True).start()
    with ProcessMeter() as meter:
        bench.cli("store", "start")
        try:
            meter.adopt(int((bench.home / "store" / "weed.pid").read_text()), "store")
            with dask_cluster(bench, meter):
                run(bench, meter, first, second)
            results = collect(bench, meter, args)
        finally:
            bench.cli("store", "stop")
    results |= {"command": " ".join([".venv/bin/python -m benchmarks.crawl", *sys.argv[1:]]),
                "section": args.section or SECTION}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print(publish_results(args.output, results))
    log(f"done in {time.time() - started:,.0f} s: {args.output}, benchmarks/results/crawl.md")


def publish_results(output: Path, results: dict) -> str:
    """The report into benchmarks/results/<section>.md and the rows into the summary of `output`, stamped with the
    date and commit of the run's phases (not the checkout that writes them); -> the report."""
    section, c = results.get("section", SECTION), results["conditions"]
    body = render(results)
    publish(output, section, f"<!-- {section}:begin -->", f"<!-- {section}:end -->", body,
            summary_rows(results, results.get("command", "make bench-crawl"), section),
            f"{c['started'][:10]}, {c['commit']}")
    return body


def run(bench: Bench, meter: ProcessMeter, first: str, second: str) -> None:
    build_crawl(bench, meter, first, first=True)
    forecast_crawl(bench, meter, second)
    build_crawl(bench, meter, second, first=False)


def _sample_load(loads: list[float]) -> None:
    while True:
        loads.append(os.getloadavg()[0])
        time.sleep(30)


def collect(bench: Bench, meter: ProcessMeter, args) -> dict:
    from llm_assets.core.lake import Lake
    from llm_assets.core.ledger import read_ledger
    from llm_assets.platform.environment import store_config
    from llm_assets.platform.instance import get_instance
    from llm_assets.settings import load_settings

    log("collecting the figures: ledger, materializations, runs, accounting")
    settings = load_settings()
    lake = Lake(store_config(settings.store))
    instance = get_instance()
    ledger = read_ledger(lake)
    crawls = list(bench.corpus.crawls)
    accounts = account(lake, settings, bench.corpus)
    pages = sum(a.read - sum(n for r, n in a.skipped.items() if r in NOT_PAGES) for a in accounts)
    per_asset, per_job = runs_per_asset(instance)
    assets = sorted(set(ledger["asset"]))
    stages = stage_rows(ledger, pages, materialization_walls(instance, assets), per_asset)
    b_phases = [p for n, p in bench.phases.items() if n.endswith(crawls[1]) and not n.startswith("forecast")]
    cmp = forecast_comparison(lake, bench.forecast, min(p.started for p in b_phases))
    judged, stage_ok, total = forecast_verdicts(cmp)
    anchor = None if args.no_anchor else run_anchor(bench.corpus, bench.work, 2, args.anchor_extract_timeout)
    agreed = agreement(lake, settings, crawls, anchor) if anchor else None
    build = [p for n, p in bench.phases.items() if not n.startswith("forecast")]
    cpu = {r: sum(p.cpu_s.get(r, 0.0) for p in build) for r in (*ROLES, "driver")}
    unit_cpu = float(ledger["cpu_s"].sum())
    phases = [asdict(p) | {"wall_s": p.wall_s, "unit_cpu_s": _unit_cpu(ledger, p)}
              for p in sorted(bench.phases.values(), key=lambda p: p.started)]
    for p in phases:
        p["dagster_cpu_s"] = _dagster_cpu(p["cpu_s"], p["unit_cpu_s"])
    dagster_cpu = _dagster_cpu(cpu, unit_cpu)
    all_cpu = sum(cpu.values())
    wall = sum(p.wall_s for p in build)
    return {
        "conditions": conditions(list(bench.phases.values())),
        "corpus": {"root": str(bench.corpus.root), "crawls": {c: [str(p.relative_to(bench.corpus.root)) for p in f]
                                                              for c, f in bench.corpus.crawls.items()}},
        "runner": args.runner, "pages": pages, "page_sizes": bench.corpus.page_sizes,
        "stages": [asdict(s) for s in stages],
        "phases": phases,
        "runs_per_job": per_job,
        "whole": {"wall_s": wall, "cpu_s": all_cpu, "unit_cpu_s": unit_cpu, "cpu_by_process": cpu,
                  "dagster_cpu_s": dagster_cpu, "dagster_share": dagster_cpu / all_cpu if all_cpu else 0.0,
                  "cpu_s_per_page": all_cpu / pages if pages else 0.0,
                  "wall_s_per_page": wall / pages if pages else 0.0,
                  "peak_unit_rss_bytes": int(ledger["peak_rss_bytes"].max() or 0),
                  # the phases' (a resumed run's included), not the anchor's processes sampled since
                  "peak_rss_by_process": {r: max(p.peak_rss_bytes.get(r, 0) for p in build) for r in (*ROLES, "driver")
                                          if any(p.peak_rss_bytes.get(r) for p in build)},
                  "top_processes": meter.top(),
                  "driver_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024},
        "forecast": {"crawl": crawls[1], "history": crawls[0], "comparison": cmp.to_dicts(), "judged": judged,
                     "stages_within": stage_ok, "total": total},
        "accounting": [asdict(a) | {"balanced": a.balanced, "as_written": a.as_written} for a in accounts],
        "anchor": None if anchor is None else {"stages": [asdict(s) for s in anchor.stages], "cpu_s": anchor.cpu_s,
                                               "kept_filtered": len(anchor.kept_filtered), "kept": len(anchor.kept),
                                               "repaired": anchor.repaired},
        "agreement": None if agreed is None else {k: asdict(a) | {"rate": a.rate} for k, a in agreed.items()},
    }


def _unit_cpu(ledger: pl.DataFrame, phase: Phase) -> float:
    """CPU-s of the work units committed during the phase."""
    window = ledger.filter(pl.col("committed_at").is_between(phase.counted_from or phase.started,
                                                             phase.ended or time.time()))
    return float(window["cpu_s"].sum())


def _dagster_cpu(cpu: dict[str, float], unit_cpu: float) -> float:
    """Dagster's own CPU: the daemon's, the code server's, and the run workers' with their pools' less what their
    units measured themselves (a partition of one unit runs it in the run worker; a pool's start-up is counted
    here). With units on a cluster, its workers' CPU is `units` too, so the difference holds their idle cost."""
    return cpu.get("daemon", 0.0) + cpu.get("code_server", 0.0) + cpu.get("run_worker", 0.0) + cpu.get(
        "units", 0.0) - unit_cpu


def render(r: dict) -> str:
    c, whole, fc = r["conditions"], r["whole"], r["forecast"]
    lines = [
        "## The whole path at size (`make bench-crawl`)", "",
        f"Measured {c['started']} on {c['cores']} cores ({c['cpu_model']}), commit {c['commit']}; load average "
        + (f"during the run: mean {c['loadavg_mean']:.1f}, max {c['loadavg_max']:.1f}"
           if c.get("loadavg_mean") is not None else "during the run: not recorded (phases saved before it was)")
        + f", {c['loadavg_end']} when the report was made (other work on the machine inflates wall time more than "
        "CPU time). Corpus "
        f"`{r['corpus']['root']}`: " + ", ".join(f"{k} ({len(v)} files)" for k, v in r["corpus"]["crawls"].items())
        + f"; {r['pages']:,} pages (response records). Runner: {r['runner']}. Each crawl: `llm-assets drop`, the "
        "raw-drop sensor's `lake_job` runs, one stale backfill (`crawl_job`, `curated_job`, the release), run by "
        "a code server and `dagster-daemon` on the embedded store and SQLite instance.", "",
        f"Whole run: {whole['wall_s']:,.0f} s wall, {whole['cpu_s']:,.0f} CPU-s "
        f"({whole['cpu_s_per_page'] * 1000:,.1f} CPU-ms and {whole['wall_s_per_page'] * 1000:,.1f} wall-ms per page); "
        f"units {whole['unit_cpu_s']:,.0f} CPU-s; Dagster's own (below) {whole['dagster_cpu_s']:,.0f} CPU-s = "
        f"{whole['dagster_share'] * 100:.1f} % of the run's (goal ≤ {DAGSTER_SHARE_GOAL:.0%}): the daemon and the "
        f"code server {_cpu_of(whole, 'daemon', 'code_server'):,.0f} CPU-s, the run workers with their pools less "
        f"the units {whole['dagster_cpu_s'] - _cpu_of(whole, 'daemon', 'code_server'):,.0f} CPU-s over "
        f"{sum(r['runs_per_job'].values()):,} runs; peak RSS: "
        f"largest unit {mib(whole['peak_unit_rss_bytes'])} MiB (goal ≤ 1,024), "
        + ", ".join(f"{k} {mib(v)} MiB" for k, v in sorted(whole["peak_rss_by_process"].items())) + ".", "",
        "### Per stage (both crawls)", "",
        table(["stage", "units", "CPU-s", "CPU-ms / page", "wall s", "peak RSS / unit MiB", "bytes in", "bytes out",
               "S3 requests", "rows in", "rows out", "Dagster runs"],
              [[s["asset"], f"{s['units']:,}", f"{s['cpu_s']:,.1f}", f"{s['cpu_s_per_page'] * 1000:,.2f}",
                f"{s['wall_s']:,.1f}", mib(s["peak_unit_rss_bytes"]), f"{s['bytes_in']:,}", f"{s['bytes_out']:,}",
                f"{s['requests']:,}", f"{s['rows_in']:,}", f"{s['rows_out']:,}", str(s["runs"])]
               for s in r["stages"]]), "",
        "Wall: each partition's own `seconds` (first unit submitted to its output), summed over partitions. Runs: "
        "Dagster runs that materialized the stage (a run of several stages counts for each); per job: "
        + ", ".join(f"{k} {v}" for k, v in sorted(r["runs_per_job"].items())) + ".", "",
        "### Per phase: the deployment's processes (CPU-s from /proc, sampled each second)", "",
        table(["phase", "wall s", "Dagster runs", "daemon", "code server", "run workers and pools", "units (ledger)",
               "Dagster's own", "store", "CLI", "driver", "largest run worker MiB"],
              [[p["name"], f"{p['wall_s']:,.0f}", str(p["runs"]),
                *(f"{p['cpu_s'].get(k, 0.0):,.1f}" for k in ("daemon", "code_server")),
                f"{p['cpu_s'].get('run_worker', 0.0) + p['cpu_s'].get('units', 0.0):,.1f}",
                f"{p['unit_cpu_s']:,.1f}", f"{p['dagster_cpu_s']:,.1f}",
                *(f"{p['cpu_s'].get(k, 0.0):,.1f}" for k in ("store", "cli", "driver")),
                mib(p["peak_rss_bytes"].get("run_worker", 0))] for p in r["phases"]]), "",
        "Dagster's own: daemon + code server + run workers with their pools − the units' own CPU (the ledger's, "
        "for the partitions committed in the phase): Dagster's work, the stages' planning and commits, and the "
        "pools' start-up.", "",
        f"### Forecast of {fc['crawl']} from {fc['history']}'s history", "",
        "`llm-assets stale --forecast --json` with the deployment stopped, right after the drop; actual: the ledger "
        "rows its planned partitions appended. Judged: stages of at least "
        f"{JUDGED_CPU_S:.0f} CPU-s, on CPU-s and bytes out within ±{FORECAST_STAGE_GOAL:.0%}; the total within "
        f"±{FORECAST_TOTAL_GOAL:.0%}.", "",
        table(["stage", "basis", "units (forecast / actual)", "CPU-s", "error", "bytes out", "error", "requests",
               "error"],
              [[x["asset"] + ("" if x["asset"] in fc["judged"] else " (not judged)"), x["basis"],
                f"{x['units_forecast']:,} / {x['units_actual']:,}",
                f"{x['cpu_s_forecast']:,.1f} / {x['cpu_s_actual']:,.1f}", pct(x["cpu_s_error"]),
                f"{x['bytes_out_forecast']:,} / {x['bytes_out_actual']:,}", pct(x["bytes_out_error"]),
                f"{x['requests_forecast']:,} / {x['requests_actual']:,}", pct(x["requests_error"])]
               for x in fc["comparison"]]), "",
        f"Total: CPU-s {fc['total']['figures']['cpu_s'][0]:,.1f} / {fc['total']['figures']['cpu_s'][1]:,.1f} "
        f"({pct(fc['total']['errors']['cpu_s'])}), bytes out {fc['total']['figures']['bytes_out'][0]:,.0f} / "
        f"{fc['total']['figures']['bytes_out'][1]:,.0f} ({pct(fc['total']['errors']['bytes_out'])}). Judged stages: "
        f"{', '.join(fc['judged']) or 'none (no stage reached the threshold)'}"
        + (f"; {'all' if fc['stages_within'] else 'not all'} within ±{FORECAST_STAGE_GOAL:.0%}." if fc["judged"]
           else "."), "",
        *_page_size_lines(r.get("page_sizes")),
        "### Every record accounted for", "",
        "From the documents manifests' units; documents and rejected rows as their parts hold them (rejected rows "
        "at most the set-aside and quarantined counts: damaged records are kept up to a cap per unit).", "",
        table(["crawl", "files", "records read", "documents", "set aside", "quarantined", "skipped", "balanced",
               "read = corpus manifest's"],
              [[crawl, str(len(rows)), f"{sum(a['read'] for a in rows):,}", f"{sum(a['documents'] for a in rows):,}",
                _reasons(rows, "set_aside"), _reasons(rows, "quarantined"), _reasons(rows, "skipped"),
                f"{sum(a['balanced'] for a in rows)} / {len(rows)} files", _as_written(rows)]
               for crawl in r["corpus"]["crawls"]
               if (rows := [a for a in r["accounting"] if a["crawl"] == crawl])]), "",
        *_unbalanced(r["accounting"]),
        *_anchor_lines(r),
    ]
    return "\n".join(lines)


def _page_size_lines(sizes: dict | None) -> list[str]:
    """The corpus's HTML payload sizes beside those of the Common Crawl sample its size model was fitted to."""
    if not sizes or "corpus" not in sizes or "cc_sample" not in sizes:
        return []
    cc, ours = sizes["cc_sample"], sizes["corpus"]
    sample = len(sizes.get("model", {}).get("cc_sample_bytes", []))
    keys = [k for k in ("p10", "p25", "p50", "p75", "p90", "p99", "max") if k in cc and k in ours]
    return ["### Page sizes: the corpus beside Common Crawl", "",
            f"HTML payload bytes per page: the corpus's (its log-normal size model, μ "
            f"{sizes['model']['lognormal_mu']}, σ {sizes['model']['lognormal_sigma']}, fitted to the CC-MAIN WARC "
            f"sample of `../shared/data/warc`, {sample} pages, plus planted oversized pages) and that sample's.", "",
            table(["", *keys], [["Common Crawl sample", *(f"{cc[k]:,}" for k in keys)],
                                ["corpus", *(f"{ours[k]:,}" for k in keys)]]), ""]


def _cpu_of(whole: dict, *roles: str) -> float:
    return sum(whole["cpu_by_process"].get(r, 0.0) for r in roles)


def _as_written(rows: list[dict]) -> str:
    stated = [a for a in rows if a["as_written"] is not None]
    if not stated:
        return "not stated"
    return (f"{sum(a['as_written'] for a in stated)} / {len(stated)} files "
            f"({sum(a['read'] for a in stated):,} read, {sum(a['manifest_records'] for a in stated):,} written)")


def _unbalanced(accounts: list[dict], n: int = 10) -> list[str]:
    """The files that do not balance or whose reads differ from the corpus manifest's records, the first `n`."""
    bad = [a for a in accounts if not a["balanced"] or a["as_written"] is False]
    if not bad:
        return []
    return [f"Files that do not add up ({len(bad)}; the first {min(n, len(bad))}):", "",
            table(["file", "read", "outcomes", "documents (parts)", "rejected rows", "corpus manifest"],
                  [[a["source"], f"{a['read']:,}", f"{_outcomes(a):,}",
                    f"{a['documents']:,} ({a['written_documents']:,})", f"{a['written_rejected']:,}",
                    "–" if a["manifest_records"] is None else f"{a['manifest_records']:,}"] for a in bad[:n]]), ""]


def _outcomes(a: dict) -> int:
    return a["documents"] + sum(sum(a[k].values()) for k in ("set_aside", "quarantined", "skipped"))


def _reasons(rows: list[dict], kind: str) -> str:
    total: dict[str, int] = {}
    for a in rows:
        for reason, n in a[kind].items():
            total[reason] = total.get(reason, 0) + n
    return f"{sum(total.values()):,}" + (" (" + ", ".join(f"{k} {v:,}" for k, v in sorted(total.items())) + ")"
                                         if total else "")


def _anchor_lines(r: dict) -> list[str]:
    if r["anchor"] is None:
        return ["### datatrove", "", "Not run (`--no-anchor`, or `benchmarks.crawl_datatrove` absent).", ""]
    a, g = r["anchor"], r["agreement"]
    ratio = a["cpu_s"] / r["whole"]["cpu_s"] if r["whole"]["cpu_s"] else 0.0
    same = sum(s["cpu_s"] for s in r["stages"] if s["asset"] in SAME_WORK)
    langs = ", ".join(sorted(ANCHOR_LANGUAGES))
    repaired = a.get("repaired") or {}
    return ["### datatrove's FineWeb pipeline on the same files", "",
            *([f"Its WARC reader stops a file at a damaged gzip member (`zlib.error`), where ours quarantines the "
               f"member and reads on: it read {len(repaired)} files without their {sum(repaired.values())} damaged "
               "members.", ""] if repaired else []),
            table(["stage", "CPU-s", "wall s", "peak RSS MiB", "docs in", "docs out", "bytes out"],
                  [[s["name"], f"{s['cpu_s']:,.1f}", f"{s['wall_s']:,.1f}", f"{s['peak_rss_mib']:,.0f}",
                    f"{s['docs_in']:,}", f"{s['docs_out']:,}", f"{s['bytes_out']:,}"] for s in a["stages"]]), "",
            f"End to end per CPU-second: {ratio:.2f}× datatrove ({a['cpu_s']:,.0f} CPU-s against our "
            f"{r['whole']['cpu_s']:,.0f}, every process of the deployment counted, stages datatrove does not run "
            f"included; goal ≥ {RATIO_GOAL:.0f}×). The units of the stages that do its work alone ("
            f"{', '.join(SAME_WORK)}): {same:,.0f} CPU-s, {a['cpu_s'] / same if same else 0.0:.2f}×.", "",
            *(line for stage, label in (
                ("deduplicated_same_languages", f"end to end, ours in datatrove's languages ({langs})"),
                ("filtered_same_languages", f"after filtering, ours in datatrove's languages ({langs})"),
                ("deduplicated", "end to end, all of ours"), ("filtered", "after filtering, all of ours"))
              for line in _agreement_lines(g[stage], label))]


def _agreement_lines(g: dict, label: str) -> list[str]:
    return [f"Kept documents {label}: ours {g['ours']:,}, datatrove's {g['anchor']:,}, both {g['both']:,}: "
            f"agreement {g['rate'] * 100:.2f} % of either's (goal ≥ {AGREEMENT_GOAL:.0%}).", "",
            table(["difference", "documents"], [[k, f"{v:,}"] for k, v in g["classes"].items()]), ""]


def forecast_row(key: str, measure: str, fc: dict, command: str, details: str) -> Row:
    """The summary row of a forecast's comparison (`fc`: comparison rows, judged stages and the total's errors)."""
    return Row(key, f"{measure} (CPU-s, bytes out; stages ≥ {JUDGED_CPU_S:.0f} CPU-s)",
               f"total CPU {pct(fc['total']['errors']['cpu_s'])}, bytes {pct(fc['total']['errors']['bytes_out'])}; "
               + (", ".join(f"{x['asset']} {pct(x['cpu_s_error'])}/{pct(x['bytes_out_error'])}"
                            for x in fc["comparison"] if x["asset"] in fc["judged"]) or "no stage judged"),
               command, details, "stages ±25 %, total ±15 %",
               "yes" if fc["stages_within"] and all(e is not None and abs(e) <= FORECAST_TOTAL_GOAL
                                                    for e in fc["total"]["errors"].values()) else "no")


def summary_rows(r: dict, command: str, section: str = SECTION) -> list[Row]:
    """The summary's rows of a run, keyed `<section>:<measure>` and linking `<section>.md`; a section other than
    the corpus's own names its corpus in each measure."""
    rows = _rows(r, command)
    if section == SECTION:
        return rows
    corpus = Path(r["corpus"]["root"]).name
    # the summary stays short: a slice keeps the rows its corpus's own run does not have (datatrove's side)
    return [replace(row, key=section + row.key.removeprefix(SECTION), details=f"{section}.md",
                    measure=f"{row.measure} [{corpus}]") for row in rows
            if row.key.removeprefix(f"{SECTION}:") in SLICE_ROWS]


def dump_core_hours(cpu_s_per_page: float) -> float:
    return cpu_s_per_page * DUMP_PAGES / 3600


def _rows(r: dict, command: str) -> list[Row]:
    whole, fc = r["whole"], r["forecast"]
    same_work_per_page = sum(s["cpu_s_per_page"] for s in r["stages"] if s["asset"] in SAME_WORK)
    rows = [
        Row("crawl:cpu-per-page", "whole path through Dagster, CPU-ms per page (bench-crawl corpus)",
            f"{whole['cpu_s_per_page'] * 1000:,.1f} CPU-ms/page, {whole['wall_s']:,.0f} s wall, {r['pages']:,} pages; "
            + ", ".join(f"{s['asset']} {s['cpu_s_per_page'] * 1000:,.2f}" for s in r["stages"]
                        if s["cpu_s"] >= 0.05 * whole["unit_cpu_s"]), command, "crawl.md"),
        Row("crawl:unit-rss", "peak RSS of the largest work unit", f"{mib(whole['peak_unit_rss_bytes'])} MiB",
            command, "crawl.md", "≤ 1 GiB", "yes" if whole["peak_unit_rss_bytes"] <= UNIT_RSS_GOAL else "no"),
        Row("crawl:dagster-share", "Dagster's own CPU (daemon, code server, run workers) of the run's",
            f"{whole['dagster_share'] * 100:.1f} %", command, "crawl.md", f"≤ {DAGSTER_SHARE_GOAL:.0%}",
            "yes" if whole["dagster_share"] <= DAGSTER_SHARE_GOAL else "no"),
        forecast_row("crawl:forecast", "forecast of a held-back crawl at size", fc, command, "crawl.md"),
        Row("crawl:dump", f"one Common Crawl dump ({DUMP_PAGES / 1e9:.1f} billion pages) at this run's CPU per page",
            f"{dump_core_hours(whole['cpu_s_per_page']):,.0f} core-hours, the whole deployment; the training path's "
            f"units ({', '.join(SAME_WORK)}) {dump_core_hours(same_work_per_page):,.0f}", command, "crawl.md",
            f"≤ {DUMP_CORE_HOURS_GOAL:,} core-hours (compass)",
            "yes" if dump_core_hours(whole["cpu_s_per_page"]) <= DUMP_CORE_HOURS_GOAL else "no"),
        Row("crawl:accounting", "records read = documents + set aside + quarantined + skipped, per file",
            f"{sum(a['balanced'] for a in r['accounting'])} of {len(r['accounting'])} files balance; records read "
            f"as the corpus wrote them: {_as_written(r['accounting'])}", command, "crawl.md", "every file",
            "yes" if all(a["balanced"] and a["as_written"] is not False for a in r["accounting"]) else "no"),
    ]
    if r["anchor"] is not None:
        ratio = r["anchor"]["cpu_s"] / whole["cpu_s"] if whole["cpu_s"] else 0.0
        rows += [Row("crawl:vs-datatrove", "whole path vs datatrove's FineWeb pipeline, per CPU-second",
                     f"{ratio:.2f}×", command, "crawl.md", f"≥ {RATIO_GOAL:.0f}×",
                     "yes" if ratio >= RATIO_GOAL else "no"),
                 Row("crawl:agreement", "kept documents agreeing with datatrove, ours in its languages (end to "
                                        "end; after filtering)",
                     f"{r['agreement']['deduplicated_same_languages']['rate'] * 100:.2f} %; "
                     f"{r['agreement']['filtered_same_languages']['rate'] * 100:.2f} %", command, "crawl.md",
                     f"≥ {AGREEMENT_GOAL:.0%}",
                     "yes" if r["agreement"]["deduplicated_same_languages"]["rate"] >= AGREEMENT_GOAL else "no")]
    return rows


if __name__ == "__main__":
    main()
