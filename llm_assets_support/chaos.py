"""Fault injection against the real pipeline: the harness of `test_chaos.py` (short, in CI) and `make chaos` (full).

A private SeaweedFS (free loopback ports, its own state folder) that the harness stops, SIGKILLs, pauses (SIGSTOP)
and fills; real WARC files of ../shared/data/warc dropped as one crawl; every job run by a worker subprocess, so a
run can be SIGKILLed at any point. After each fault the lake is checked:

- nothing partial is visible: every manifest lists parts that exist and hold the rows it says; a release's
  `latest.json` names a release whose every file is there; a model pointer names a stored model;
- no silent loss: every committed partition holds exactly what a clean run commits (rows and data version), or is
  still what it was before the fault, never a third (short) state;
- rerunning the job commits exactly the clean run's partitions;
- after the vacuum with retention 0, no part, tombstone or release folder is left that nothing lists.

Buckets: `ref` holds the clean reference (every job run once without faults), `ref-resiliparse` the lake built with
the other extractor (a complete but different state, for rebuilds and mixed concurrent runs), and `work` is wiped
and refilled from them before each scenario. Data versions hash raw keys and ETags, not the bucket, so partitions
of `work` are comparable with `ref`.

A worker reads JSON commands on stdin, one per line, and answers one JSON line each:
    python -m llm_assets_support.chaos worker
    {"job": "lake_job", "partition": "CHAOS-2024|0000", "bucket": "work", "budget_s": 300}
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import queue
import random
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from llm_assets.core.lake import Lake, RetryPolicy, StoreConfig
from llm_assets.core.partition import LakeInput, Manifest, vacuum
from llm_assets.platform.embedded_store import DEFAULT_PORTS, EmbeddedStore, free_ports
from llm_assets.settings import DEFAULT_SETTINGS, PROJECT_ROOT

WARC = PROJECT_ROOT.parent / "shared" / "data" / "warc"
CRAWL = "CHAOS-2024"
# shard -> real WARC files. Small: a clean lake_job partition takes seconds to tens of seconds. The full run adds
# the 140-page archive.org file, so a 10 s outage lands well inside one partition's run.
SHORT_LAYOUT = {
    "0000": ["dolma__sample-0000.warc.gz", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"],
    "0001": ["dolma__sample-0001.warc.gz", "whirlwind__CC-MAIN-2024-22.warc.gz"],
}
FULL_LAYOUT = {
    "0000": ["aut__example.IAH-2008-archive.org.warc.gz", "whirlwind__CC-MAIN-2024-22.warc.gz"],
    "0001": ["dolma__sample-0000.warc.gz", "dolma__sample-0001.warc.gz",
             "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"],
}
SHARDS = 2
LAKE_ASSETS = ("raw_files", "documents", "image_text_pairs", "filtered", "signatures")
CRAWL_ASSETS = ("duplicate_clusters", "crawl_stats")
CURATED_ASSETS = ("deduplicated", "tokenized")
# What each job writes, and what must be in the lake before it runs.
WRITES = {"lake_job": LAKE_ASSETS, "crawl_job": CRAWL_ASSETS, "curated_job": CURATED_ASSETS, "release_job": ()}
NEEDS = {"lake_job": (), "crawl_job": LAKE_ASSETS, "curated_job": LAKE_ASSETS + CRAWL_ASSETS,
         "release_job": LAKE_ASSETS + CRAWL_ASSETS + CURATED_ASSETS}
RESILIPARSE = {"ops": {"documents": {"config": {"extractor": "resiliparse"}}}}
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
MANIFEST_RE = re.compile(r"^lake/(?P<asset>[^/]+)/crawl=(?P<crawl>[^/]+)/shard=(?P<shard>[^/]+)/_manifest\.json$")
MEASURED_ASSETS = {"cost"}  # whose data are measurements of the runs that built the lake
MEASURED = "measured"
PART_RE = re.compile(r"^(?:lake|rejected)/[^/]+/crawl=[^/]+/shard=[^/]+/part-[0-9a-f]+\.parquet$")
RESULT = "CHAOS-RESULT "


class Hang(Exception):
    """A run or a read did not end within its time limit."""


# the store ---------------------------------------------------------------------------------------------------------

class ChaosStore:
    """An embedded SeaweedFS the harness may break: stop it, SIGKILL it, pause it, fill its disk. With `tmpfs_mb`,
    its data folder is a tmpfs of that size (root only), so it can run out of space for real."""

    def __init__(self, root: Path, bucket: str = "chaos", tmpfs_mb: int | None = None,
                 keys: tuple[str, str] | None = None):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.tmpfs = None
        if tmpfs_mb:
            self.tmpfs = root / "data"
            self.tmpfs.mkdir(mode=0o700, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={tmpfs_mb}m,mode=0700", "tmpfs", str(self.tmpfs)],
                           check=True, capture_output=True)
        access_key, secret_key = keys or ("chaos" + secrets.token_hex(6), secrets.token_urlsafe(24))
        self.store = EmbeddedStore(state_dir=root, bucket=bucket, access_key=access_key, secret_key=secret_key,
                                   ports=dict(zip(DEFAULT_PORTS, free_ports(len(DEFAULT_PORTS)), strict=True)))
        self.paused = False

    @property
    def endpoint(self) -> str:
        return self.store.endpoint

    def start(self) -> None:
        self.store.start(timeout=120)

    def stop(self) -> None:
        if self.paused:
            self.resume()
        self.store.stop()

    def kill(self) -> None:
        """SIGKILL, no shutdown: the store dies as in a crash of its process."""
        if (pid := self.store.pid()) is not None:
            os.killpg(pid, signal.SIGKILL)
            _wait_gone(pid)
        self.store.pid_file.unlink(missing_ok=True)

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted by the kernel but never answered, as with a hung server."""
        os.killpg(self.store.pid(), signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        os.killpg(self.store.pid(), signal.SIGCONT)
        self.paused = False

    def fill(self, leave_bytes: int = 0) -> None:
        """Take all the tmpfs's free space but `leave_bytes` with ballast files. The store keeps writing meanwhile, so
        the free space is measured again for each piece, and a piece that no longer fits is tried again smaller."""
        chunk, n = 64 * 2**20, 0
        while chunk >= 4096:
            stat = os.statvfs(self.tmpfs)
            free = stat.f_bavail * stat.f_frsize - leave_bytes
            if free <= 0:
                return
            path = self.tmpfs / f"ballast-{n}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, min(chunk, free))
                n += 1
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                chunk //= 2
            finally:
                os.close(fd)
        (self.tmpfs / f"ballast-{n}").unlink(missing_ok=True)  # the piece that did not fit

    def unfill(self) -> None:
        for ballast in self.tmpfs.glob("ballast-*"):
            ballast.unlink()

    def config(self, bucket: str, budget_s: float = 60.0) -> StoreConfig:
        return StoreConfig(endpoint=self.endpoint, bucket=bucket, region="us-east-1",
                           credentials_file=str(self.store.credentials_file),
                           retry=RetryPolicy(budget_s=budget_s, base_s=0.2, max_s=2))

    def lake(self, bucket: str) -> Lake:
        return Lake(self.config(bucket))

    def create_bucket(self, bucket: str) -> Lake:
        lake = self.lake(bucket)
        if bucket != self.store.bucket:  # the store made its own at start
            lake.s3.create_bucket(Bucket=bucket)
        return lake

    def env(self) -> dict[str, str]:
        return {"LLM_ASSETS_S3_ENDPOINT": self.endpoint, "AWS_ACCESS_KEY_ID": self.store.access_key,
                "AWS_SECRET_ACCESS_KEY": self.store.secret_key, "AWS_REGION": "us-east-1"}

    def close(self) -> None:
        try:
            if self.paused:
                self.resume()
            self.store.stop()
        finally:
            if self.tmpfs is not None:
                # weed may still hold its files open for a moment after its main process is gone
                for _ in range(50):
                    if subprocess.run(["umount", str(self.tmpfs)], capture_output=True).returncode == 0:
                        break
                    time.sleep(0.2)


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


# the worker ----------------------------------------------------------------------------------------------------------

class Worker:
    """A subprocess that runs jobs on command; its own process group, so SIGKILL takes its pool workers too."""

    def __init__(self, env: dict[str, str], log: Path):
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "llm_assets_support.chaos", "worker"], cwd=PROJECT_ROOT,
                                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         text=True, start_new_session=True)
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(RESULT):
                self.replies.put(json.loads(line[len(RESULT):]))
        self.replies.put(None)  # the worker is gone

    def _reply(self, timeout: float) -> dict:
        try:
            reply = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise Hang(f"worker {self.proc.pid}: no answer within {timeout:.0f} s (log: {self.log})") from None
        if reply is None:
            raise RuntimeError(f"worker {self.proc.pid} exited with {self.proc.wait()}: see {self.log}")
        return reply

    def ready(self, timeout: float = 300.0) -> Worker:
        self.code = self._reply(timeout)["code"]
        return self

    def send(self, **command) -> None:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict:
        return self._reply(timeout)

    def run(self, timeout: float = 1800.0, **command) -> dict:
        self.send(**command)
        return self.result(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()  # and whatever it left in its process group


def worker_main() -> None:
    """Run jobs as commanded on stdin, answering on the original stdout; Dagster and the lake log to stderr."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def answer(**reply) -> None:
        answers.write(RESULT + json.dumps(reply) + "\n")
        answers.flush()

    import dagster as dg

    from llm_assets.definitions import build_defs
    from llm_assets.platform.partitions import crawl_shard_key
    from llm_assets.settings import load_settings
    from resources import LakeIOManager, ObjectStore, S3Endpoint

    base = build_defs(load_settings())
    settings = load_settings().store
    instance = dg.DagsterInstance.get()

    # A process's first run pays for Dagster's own warm-up; without this the kill points, drawn from a warm
    # worker's run times, would land early in the runs of fresh workers.
    @dg.op
    def warm_up_op() -> None:
        pass

    @dg.job
    def warm_up() -> None:
        warm_up_op()

    warm_up.execute_in_process(instance=instance, run_config=QUIET)
    answer(ready=True, pid=os.getpid(), code=code_fingerprint(base))
    for line in sys.stdin:
        cmd = json.loads(line)
        store = ObjectStore(
            s3=S3Endpoint(endpoint_url=cmd.get("endpoint") or os.environ["LLM_ASSETS_S3_ENDPOINT"],
                          region_name="us-east-1", aws_access_key_id=dg.EnvVar("AWS_ACCESS_KEY_ID"),
                          aws_secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY")),
            bucket=cmd["bucket"],
            retry_budget_s=cmd.get("budget_s") or settings.retry_budget_s,
            retry_base_s=settings.retry_base_s,
            retry_max_s=settings.retry_max_s,
            retention_hours=cmd.get("retention_h", settings.retention_hours),
            local_data_dir=cmd.get("store_data") or "",  # where the lake can see a full disk
        )
        defs = dg.Definitions(assets=base.assets, jobs=base.jobs,
                              resources={"store": store, "lake_io_manager": LakeIOManager(store=store)})
        key = None
        if partition := cmd.get("partition"):
            crawl, _, shard = partition.partition("|")
            if not instance.has_dynamic_partition("crawl", crawl):
                instance.add_dynamic_partitions("crawl", [crawl])
            key = crawl_shard_key(crawl, shard) if shard else crawl
        start = time.monotonic()
        result = defs.resolve_job_def(cmd["job"]).execute_in_process(
            partition_key=key, instance=instance, raise_on_error=False,
            run_config={**QUIET, **(cmd.get("run_config") or {})})
        errors = [f"{e.step_key or 'run'}: {e.event_specific_data.error.to_string()}"
                  for e in result.all_events if e.is_failure and getattr(e.event_specific_data, "error", None)]
        answer(ok=result.success, seconds=time.monotonic() - start, errors=errors, run_id=result.run_id)


def code_fingerprint(defs) -> str:
    """A hash of every asset's code version (stage version + effective settings): workers started later must run
    the same stages as the reference, or their partitions are not comparable (the working tree may be edited while
    a long session goes on)."""
    versions = sorted(f"{spec.key.to_user_string()}={spec.code_version}" for spec in defs.resolve_all_asset_specs())
    return hashlib.sha256("|".join(versions).encode()).hexdigest()[:16]


class CodeChanged(RuntimeError):
    """The code changed during the session: what workers commit is no longer comparable with the reference."""


# the lake's state and its invariants --------------------------------------------------------------------------------

def committed_state(lake: Lake) -> dict[tuple, tuple]:
    """What is committed: (asset, crawl, shard) -> (rows, data version); ("release", name) -> (version, documents);
    ("model", prefix) -> sha256."""
    state: dict[tuple, tuple] = {}
    for obj in lake.list("lake/"):
        if m := MANIFEST_RE.match(obj.key):
            manifest = lake.get_json(obj.key)
            # `cost` holds what the runs measured (seconds, requests) and its version names the ledger objects they
            # appended: no two runs agree on it. What must hold is that it is committed whole: its rows, one per stage.
            version = MEASURED if m["asset"] in MEASURED_ASSETS else manifest["data_version"]
            state[m.group("asset", "crawl", "shard")] = (manifest["rows"], version)
    for obj in lake.list("releases/"):
        if obj.key.endswith("/latest.json") and obj.key.count("/") == 2:
            pointer = lake.get_json(obj.key)
            manifest = lake.get_json(pointer["prefix"] + "manifest.json") or {}
            state[("release", obj.key.split("/")[1])] = (pointer["version"],
                                                         manifest.get("counts", {}).get("documents"))
    for obj in lake.list("models/"):
        if obj.key.endswith("/latest.json"):
            state[("model", obj.key.rsplit("/", 1)[0])] = (lake.get_json(obj.key)["sha256"],)
    return state


def visible_problems(lake: Lake) -> list[str]:
    """What a reader could see that is not whole: a manifest naming a missing part or one holding other rows than
    it says, a release pointer naming an incomplete release, a model pointer naming a missing model."""
    import pyarrow.parquet as pq

    stored = {o.key: o for prefix in ("lake/", "rejected/", "releases/", "models/") for o in lake.list(prefix)}
    problems = []
    for key in stored:
        if not MANIFEST_RE.match(key):
            continue
        manifest = lake.get_json(key)
        if manifest["rows"] != sum(u["rows_out"] for u in manifest["units"]):
            problems.append(f"{key}: rows {manifest['rows']} is not the sum of its units'")
        for unit in manifest["units"]:
            for part in (unit.get("part"), unit.get("rejected_part")):
                if part and part not in stored:
                    problems.append(f"{key} lists {part}, which is not in the store")
            if (part := unit.get("part")) and part in stored:
                with lake.open_arrow(part) as f:
                    rows = pq.ParquetFile(f).metadata.num_rows
                if rows != unit["rows_out"]:
                    problems.append(f"{part} holds {rows} rows, its manifest says {unit['rows_out']}")
    for key in stored:
        if key.startswith("releases/") and key.endswith("/latest.json") and key.count("/") == 2:
            prefix = lake.get_json(key)["prefix"]
            manifest = lake.get_json(prefix + "manifest.json")
            if manifest is None:
                problems.append(f"{key} names {prefix}, which has no manifest.json")
                continue
            for name, size in manifest.get("files", {}).items():
                if (obj := stored.get(prefix + name)) is None or obj.size != size:
                    problems.append(f"{key}: {prefix + name} is missing or not {size} bytes")
        if key.startswith("models/") and key.endswith("/latest.json"):
            if lake.get_json(key)["key"] not in stored:
                problems.append(f"{key} names a model that is not in the store")
    return problems


def leftovers(lake: Lake) -> list[str]:
    """After a vacuum with retention 0: parts no manifest lists, tombstones, release folders without a manifest."""
    keys = {o.key for prefix in ("lake/", "rejected/", "releases/") for o in lake.list(prefix)}
    live = set()
    for key in keys:
        if MANIFEST_RE.match(key):
            live |= Manifest.from_json(lake.get_json(key) or {}).part_keys()
    out = sorted(k for k in keys if (PART_RE.match(k) and k not in live) or "/_superseded/" in k)
    releases = {k.rsplit("/", 1)[0] for k in keys if k.startswith("releases/") and k.count("/") >= 3}
    out += sorted(f"{r}/ (no manifest.json)" for r in {"/".join(k.split("/")[:3]) for k in releases}
                  if f"{r}/manifest.json" not in keys)
    return out


def read_partition(lake: Lake, asset: str, crawl: str, shard: str, parts: set | None = None) -> tuple[str, int]:
    """Read a committed partition whole, both ways readers do (Polars scan, Arrow batches per part); the rows read
    must be the rows its manifest says. -> (data version, rows); the parts read are added to `parts`."""
    source = LakeInput.load(lake, asset, [(crawl, shard)])
    if parts is not None:
        parts.update(source.parts)
    scanned = source.scan().collect().height
    batched = sum(b.num_rows for part in source.parts for b in lake.iter_batches(part))
    if not scanned == batched == source.rows:
        raise AssertionError(f"{asset} {crawl}|{shard} {source.data_version}: manifest says {source.rows} rows, "
                             f"scan read {scanned}, batches {batched}")
    return source.data_version, source.rows


# the session ---------------------------------------------------------------------------------------------------------

@dataclass
class Tally:
    """One scenario's figures. `short`, `partial`, `mismatches`, `orphans` and `hangs` must stay 0."""

    scenario: str
    runs: int = 0
    kills: int = 0
    outages: int = 0
    failed_runs: int = 0
    short: int = 0  # committed partitions in neither the clean nor the previous state
    partial: int = 0  # things a reader could see that are not whole
    mismatches: int = 0  # after the rerun: partitions that differ from the clean run's
    orphans: int = 0  # after the vacuum
    hangs: int = 0
    reads: int = 0
    error: str = ""  # the failed run's error, in full
    kill_points: list[tuple[int, int]] = field(default_factory=list)  # (partitions committed by the kill, of n)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.short or self.partial or self.mismatches or self.orphans or self.hangs or self.problems)

    def problem(self, text: str) -> None:
        self.problems.append(text)
        print(f"  PROBLEM [{self.scenario}] {text}", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  [{self.scenario}] {text}", flush=True)

    def add(self, other: Tally) -> None:
        for name in ("runs", "kills", "outages", "failed_runs", "short", "partial", "mismatches", "orphans", "hangs",
                     "reads"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems += other.problems
        self.notes += other.notes
        self.kill_points += other.kill_points


class Chaos:
    """A chaos session: its store, Dagster home, settings, the clean reference, and the scenarios. Every scenario
    returns a Tally; `Tally.ok` says whether every invariant held."""

    def __init__(self, root: Path, layout: dict[str, list[str]] = SHORT_LAYOUT, seed: int | None = None):
        self.root = root
        self.layout = layout
        self.seed = secrets.randbelow(2**31) if seed is None else seed
        self.rng = random.Random(self.seed)
        print(f"chaos: seed {self.seed} (the same seed draws the same fault points)", flush=True)
        self.code: str | None = None  # the stages' code versions, as the reference's worker saw them
        self.store = ChaosStore(root / "store")
        self.workers: list[Worker] = []
        self.helper: Worker | None = None  # runs the clean runs, reruns and the runs that are not killed
        self.reference: dict[tuple, tuple] = {}
        self.resiliparse: dict[tuple, tuple] = {}
        self.durations: dict[tuple[str, str | None], float] = {}
        self.settings = self._write_settings()
        (root / "dagster").mkdir(exist_ok=True)
        (root / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        (root / "logs").mkdir(exist_ok=True)

    # set-up

    def __enter__(self) -> Chaos:
        try:
            self.store.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for w in self.workers:
            w.close()
        self.workers.clear()
        self.store.close()

    def _write_settings(self) -> Path:
        data = yaml.safe_load(DEFAULT_SETTINGS.read_text())
        data["shards"] = SHARDS
        # in-process: a run is one process, so SIGKILL of the worker's group stops all of it at once
        data["runner"] = {"kind": "inprocess"}
        path = self.root / "settings.yaml"
        self.root.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LLM_ASSETS_", "DAGSTER_"))}
        return {**env, **self.store.env(), "LLM_ASSETS_BUCKET": "ref", "LLM_ASSETS_HOME": str(self.root / "home"),
                "DAGSTER_HOME": str(self.root / "dagster"), "LLM_ASSETS_SETTINGS": str(self.settings)}

    def worker(self) -> Worker:
        # An import may fail while someone is saving a file of the working tree: try again a little later.
        for attempt in range(3):
            w = Worker(self.env(), self.root / "logs" / f"worker-{len(self.workers):03d}-{attempt}.log")
            self.workers.append(w)
            try:
                w.ready()
                break
            except RuntimeError:
                self.done(w)
                if attempt == 2:
                    raise
                time.sleep(20)
        self.code = self.code or w.code
        if w.code != self.code:
            self.done(w)
            raise CodeChanged("the stages' code versions changed since the reference was built (an edit in the "
                              "working tree?): new partitions are not comparable with the reference")
        return w

    def done(self, w: Worker) -> None:
        w.close()
        self.workers.remove(w)

    def partitions(self) -> list[str]:
        return [f"{CRAWL}|{s}" for s in sorted(self.layout)]

    def raw_keys(self) -> dict[str, Path]:
        """raw key -> local file: each file renamed so that its key hashes to the shard the layout gives it."""
        return {self.key_in_shard(name.split("__")[0], shard): WARC / name
                for shard, names in self.layout.items() for name in names}

    @staticmethod
    def key_in_shard(stem: str, shard: str) -> str:
        from llm_assets.core.inventory import shard_of

        return next(k for i in range(10_000) if shard_of(k := f"raw/{CRAWL}/{stem}-{i}.warc.gz", SHARDS) == shard)

    def drop_raw(self, lake: Lake) -> None:
        for key, path in self.raw_keys().items():
            lake.put_file(key, path)

    def build_reference(self) -> None:
        """Every job once, without faults: the clean reference, and how long each run takes (to draw kill points).
        Called again after CodeChanged, it starts over with the code as it is now."""
        if self.helper is not None:
            self.done(self.helper)
            self.helper, self.code = None, None
        for bucket in ("ref", "ref-resiliparse", "work"):
            drop_bucket(self.store.lake(bucket))
        ref = self.store.create_bucket("ref")
        self.drop_raw(ref)
        self.helper = self.worker()
        steps = ([("lake_job", p) for p in self.partitions()] + [("crawl_job", CRAWL)]
                 + [("curated_job", p) for p in self.partitions()] + [("release_job", None)])
        for job, partition in steps:
            self.durations[(job, partition)] = self._clean_run(job, partition, "ref")
        self.reference = committed_state(ref)
        resil = self.store.create_bucket("ref-resiliparse")
        self.drop_raw(resil)
        for partition in self.partitions():
            self._clean_run("lake_job", partition, "ref-resiliparse", run_config=RESILIPARSE)
        self.resiliparse = committed_state(resil)
        self.store.create_bucket("work")
        if problems := visible_problems(ref) + visible_problems(resil):
            raise AssertionError(f"the clean reference is not whole: {problems}")
        print("chaos: clean run seconds: "
              + ", ".join(f"{j} {p or ''} {s:.1f}" for (j, p), s in self.durations.items()), flush=True)

    def _clean_run(self, job: str, partition: str | None, bucket: str, **extra) -> float:
        reply = self.helper.run(job=job, partition=partition, bucket=bucket, **extra)
        if not reply["ok"]:
            raise AssertionError(f"clean {job} {partition} failed:\n" + "\n".join(reply["errors"]))
        return reply["seconds"]

    # the work bucket

    def reset(self, job: str, previous: str = "none", partition: str | None = None) -> Lake:
        """Empty `work`, then copy into it what `job` needs from the reference (raw files, upstream partitions). With
        `previous="resiliparse"`, lake_job's partitions of `partition` are there already, made with the other
        extractor."""
        work = self.store.lake("work")
        wipe(work)
        copy(self.store.lake("ref"), work, ["raw/"] + [f"{z}/{a}/" for a in NEEDS[job] for z in ("lake", "rejected")])
        if previous == "resiliparse":
            crawl, shard = partition.split("|")
            copy(self.store.lake("ref-resiliparse"), work,
                 [f"{z}/{a}/crawl={crawl}/shard={shard}/" for a in LAKE_ASSETS for z in ("lake", "rejected")])
        return work

    # checks

    def check_fault(self, t: Tally, lake: Lake, before: dict, also: dict | None = None) -> dict:
        """Right after a fault: nothing partial, and each partition clean, as before, or (`also`) another complete
        state. -> the state."""
        for p in visible_problems(lake):
            t.partial += 1
            t.problem(f"partial: {p}")
        state = committed_state(lake)
        for key, value in state.items():
            if value not in (self.reference.get(key), before.get(key), (also or {}).get(key)):
                t.short += 1
                t.problem(f"{key} committed as {value}: clean is {self.reference.get(key)}, before it was "
                          f"{before.get(key)}")
        return state

    def rerun(self, t: Tally, lake: Lake, job: str, partition: str | None, endpoint: str | None = None) -> None:
        """Run the job again without fault: it must succeed and commit exactly the clean partitions."""
        t.runs += 1
        reply = self.helper.run(job=job, partition=partition, bucket=lake.bucket, endpoint=endpoint)
        if not reply["ok"]:
            t.failed_runs += 1
            t.problem(f"the rerun of {job} {partition or ''} failed: {_first_error(reply)}")
        for p in visible_problems(lake):
            t.partial += 1
            t.problem(f"partial after the rerun: {p}")
        state = committed_state(lake)
        for key in set(self._written_by(job, partition)) | set(state):
            if state.get(key) != self.reference.get(key):
                t.mismatches += 1
                t.problem(f"after the rerun {key} is {state.get(key)}, clean is {self.reference.get(key)}")

    def _written_by(self, job: str, partition: str | None) -> list[tuple]:
        if job == "release_job":
            return [k for k in self.reference if k[0] in ("release", "model")]
        crawl, _, shard = (partition or "").partition("|")
        return [(asset, crawl, shard or "all") for asset in WRITES[job]]

    def check_gc(self, t: Tally, lake: Lake) -> None:
        """The vacuum with retention 0 leaves nothing that nothing lists, and deletes nothing a manifest lists."""
        vacuum(lake, 0)
        for leftover in leftovers(lake):
            t.orphans += 1
            t.problem(f"left after the vacuum: {leftover}")
        for p in visible_problems(lake):
            t.partial += 1
            t.problem(f"after the vacuum: {p}")

    def _outcome(self, t: Tally, reply: dict | None, what: str) -> None:
        if reply is None:
            return
        if reply["ok"]:
            t.note(f"{what}: completed in {reply['seconds']:.0f} s")
        else:
            t.failed_runs += 1
            t.note(f"{what}: failed after {reply['seconds']:.0f} s: {_first_error(reply)[:300]}")

    def _wait(self, t: Tally, w: Worker, timeout: float) -> dict | None:
        try:
            return w.result(timeout)
        except Hang as e:
            t.hangs += 1
            t.problem(str(e))
            w.kill()
            if w is self.helper:
                self.workers.remove(w)
                self.helper = self.worker()
            return None

    # scenarios

    def kill_run(self, job: str, partition: str | None = None, delay: float | None = None,
                 previous: str = "none", window: tuple[float, float] = (0.0, 1.1)) -> Tally:
        """SIGKILL a run of `job` at a random point (a share of its clean duration drawn from `window`), then check,
        rerun, vacuum. `previous="resiliparse"`: the run rebuilds partitions committed with the other extractor."""
        t = Tally(f"SIGKILL {job}" + (" (rebuild)" if previous != "none" else ""))
        clean = self.durations[(job, partition)]
        delay = self.rng.uniform(*window) * clean if delay is None else delay
        lake = self.reset(job, previous, partition)
        before = committed_state(lake)
        w = self.worker()
        t.runs += 1
        w.send(job=job, partition=partition, bucket="work")
        try:
            reply = w.result(timeout=delay)
            t.note(f"{job} {partition or ''}: finished ({'ok' if reply['ok'] else 'failed'}) before the kill at "
                   f"{delay:.1f} s")
            if not reply["ok"]:
                t.failed_runs += 1
        except Hang:
            w.kill()
            t.kills += 1
            t.failed_runs += 1
        self.done(w)
        after = self.check_fault(t, lake, before, self.resiliparse if previous == "resiliparse" else None)
        written = self._written_by(job, partition)
        committed = sum(1 for k in written if after.get(k) != before.get(k))
        if t.kills:
            t.kill_points.append((committed, len(written)))
            t.note(f"killed {job} {partition or ''} at {delay:.1f} s of {clean:.1f} s: {committed} of {len(written)} "
                   "partitions committed by then")
        self.rerun(t, lake, job, partition)
        self.check_gc(t, lake)
        return t

    def outage(self, duration: float, budget_s: float, mode: str = "stop", at: float | None = None,
               partition: str | None = None) -> Tally:
        """The store goes away `at` s into a lake_job run (default: once the run has written its first part, so the
        outage falls mid-run however loaded the machine is), for `duration` s: stopped (`stop`, SIGTERM), SIGKILLed
        (`kill`) or paused (`pause`, SIGSTOP: connections hang). The run must complete (clean) or fail naming the
        store; it must never commit a short partition."""
        partition = partition or self.partitions()[0]
        t = Tally(f"store {mode} {duration:g} s, budget {budget_s:g} s")
        lake = self.reset("lake_job")
        before = committed_state(lake)
        written_before = set(lake.keys("lake/"))
        t.runs += 1
        self.helper.send(job="lake_job", partition=partition, bucket="work", budget_s=budget_s)
        started, reply = time.monotonic(), None
        try:
            if at is not None:
                reply = self.helper.result(timeout=at)
            else:
                reply = self._result_unless_written(lake, written_before)
            at = time.monotonic() - started if at is None else at
            t.problem(f"the run ended {at:.1f} s in, before the outage: the scenario tested nothing")
        except Hang:
            at = time.monotonic() - started
            t.outages += 1
            {"stop": self.store.stop, "kill": self.store.kill, "pause": self.store.pause}[mode]()
            try:
                time.sleep(duration)
            finally:
                self.store.resume() if mode == "pause" else self.store.start()
            reply = self._wait(t, self.helper, budget_s + 900)
        self._outcome(t, reply, f"lake_job {partition} with the store {mode} {at:.1f}–{at + duration:.1f} s")
        if reply is not None and not reply["ok"]:
            error = t.error = "\n".join(reply["errors"])
            if "StoreUnavailable" not in error or self.store.endpoint not in error or "bucket work" not in error:
                t.problem(f"the failure does not say the store ({self.store.endpoint}, bucket work) is unavailable: "
                          f"{_first_error(reply)}")
            for step in unclassified(reply):
                t.note(f"a step failed with an error that is not StoreUnavailable: {step}")
        self.check_fault(t, lake, before)
        self.rerun(t, lake, "lake_job", partition)
        self.check_gc(t, lake)
        return t

    def _result_unless_written(self, lake: Lake, before: set[str], timeout: float = 1800.0) -> dict:
        """The helper's reply if its run ends before it writes a new object under `lake/`; Hang as soon as it has."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return self.helper.result(timeout=0.2)
            except Hang:
                if set(lake.keys("lake/")) - before:
                    raise
        raise Hang(f"the run wrote nothing and did not end within {timeout:.0f} s")

    def concurrent(self, partition: str | None = None, mixed: bool = False) -> Tally:
        """Two runs of one partition at once (`mixed`: the second with the other extractor): both finish or one
        fails cleanly; the lake holds complete states only; a rerun gives the clean partition."""
        partition = partition or self.partitions()[0]
        t = Tally("two runs of one partition at once" + (", other extractor" if mixed else ""))
        lake = self.reset("lake_job")
        before = committed_state(lake)
        other = self.worker()
        self.helper.send(job="lake_job", partition=partition, bucket="work")
        other.send(job="lake_job", partition=partition, bucket="work", run_config=RESILIPARSE if mixed else None)
        t.runs += 2
        for w, what in ((self.helper, "first run"), (other, "second run")):
            self._outcome(t, self._wait(t, w, 1800), what)
        self.done(other)
        self.check_fault(t, lake, before, self.resiliparse if mixed else None)
        self.rerun(t, lake, "lake_job", partition)
        self.check_gc(t, lake)
        return t

    def reader_during_recommit(self, recommits: int = 3, partition: str | None = None,
                               retention_s: float = 10.0) -> Tally:
        """A reader reads documents and filtered whole, over and over, while lake_job recommits the partition in
        turn with the other extractor, with one more raw file, and as it was. Each commit supersedes parts, and the
        short retention lets the commits after it delete them while the reader goes on. Every read must succeed
        and return a complete partition: one some commit made, read whole."""
        partition = partition or self.partitions()[0]
        crawl, shard = partition.split("|")
        t = Tally("reader during recommits")
        lake = self.reset("crawl_job")  # lake_job's partitions committed, clean
        before = committed_state(lake)
        extra = self.key_in_shard("extra", shard)
        committed = [before]
        stop, seen, parts, errors = threading.Event(), set(), set(), []

        def read() -> None:
            reader_lake = self.store.lake("work")
            while not stop.is_set():
                for asset in ("documents", "filtered"):
                    try:
                        seen.add((asset, read_partition(reader_lake, asset, crawl, shard, parts)[0]))
                        t.reads += 1
                    except Exception as e:  # noqa: BLE001 - every failed read is a finding
                        errors.append(f"reading {asset}: {type(e).__name__}: {e}")

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            for i in range(recommits):
                if i % 3 == 1:
                    lake.put_file(extra, WARC / "whirlwind__CC-MAIN-2024-22.warc.gz")
                elif i % 3 == 2:
                    lake.delete([extra])
                t.runs += 1
                reply = self.helper.run(job="lake_job", partition=partition, bucket="work",
                                        retention_h=retention_s / 3600, run_config=RESILIPARSE if i % 3 == 0 else None)
                self._outcome(t, reply, f"recommit {i + 1}")
                committed.append(committed_state(lake))
                time.sleep(retention_s / 2)
        finally:
            stop.set()
            reader.join(600)
            lake.delete([extra])
        if reader.is_alive():
            t.hangs += 1
            t.problem("the reader did not finish a read within 600 s")
        complete = {(key[0], value[1]) for state in committed for key, value in state.items()}
        errors += [f"read {asset} at version {version}, which no commit made" for asset, version in seen
                   if (asset, version) not in complete]
        for e in errors[:20]:
            t.problem(e)
        t.partial += len(errors)
        deleted = len(parts - {o.key for o in lake.list("lake/")})
        t.note(f"{t.reads} whole reads during {recommits} recommits; {len(seen)} (asset, version) states read; "
               f"{deleted} parts the reader had read were deleted meanwhile (retention {retention_s:g} s)")
        # Whether the vacuum deleted a part during the scenario depends on timing (commits vs the retention), so it
        # is reported, not required; that the reader saw a recommit is required.
        if len({v for a, v in seen if a == "documents"}) < 2:
            t.problem("the reader saw no recommit: the scenario tested less than it should")
        for p in visible_problems(lake):
            t.partial += 1
            t.problem(f"partial: {p}")
        self.rerun(t, lake, "lake_job", partition)
        self.check_gc(t, lake)
        return t

    def full_store(self, at: float | None = None, budget_s: float = 10.0, partition: str | None = None) -> Tally:
        """A store whose disk (a tmpfs) fills up `at` s into a lake_job run (default: once the run has written its
        first part, so the disk fills mid-run however loaded the machine is): the run must fail with an error naming
        the store, nothing partial or short may be committed, and once space is freed a rerun is clean. Needs root,
        for the tmpfs."""
        partition = partition or self.partitions()[0]
        t = Tally("full store")
        full = ChaosStore(self.root / "full-store", bucket="full", tmpfs_mb=160,
                          keys=(self.store.store.access_key, self.store.store.secret_key))
        try:
            full.start()
            lake = full.lake("full")
            self.drop_raw(lake)
            written_before = set(lake.keys("lake/"))
            t.runs += 1
            self.helper.send(job="lake_job", partition=partition, bucket="full", endpoint=full.endpoint,
                             budget_s=budget_s, store_data=str(full.tmpfs))
            started, reply = time.monotonic(), None
            try:
                if at is not None:
                    reply = self.helper.result(timeout=at)
                else:
                    reply = self._result_unless_written(lake, written_before)
                at = time.monotonic() - started if at is None else at
                t.problem(f"the run ended {at:.1f} s in, before the disk filled: the scenario tested nothing")
            except Hang:
                at = time.monotonic() - started
                full.fill()
                t.outages += 1
                reply = self._wait(t, self.helper, budget_s + 900)
            self._outcome(t, reply, f"lake_job {partition}, disk full from {at:.1f} s")
            if reply is not None and reply["ok"]:
                t.problem("the run succeeded although the store was full")
            elif reply is not None:
                error = "\n".join(reply["errors"])
                t.error = error
                if full.endpoint not in error:
                    t.problem(f"the failure does not name the store: {_first_error(reply)}")
                if "StoreFull" not in error or "object store full" not in error:
                    t.problem(f"not reported as a full store (StoreFull): {_first_error(reply)}")
            before = {}  # nothing was committed in this bucket before the run
            self.check_fault(t, lake, before)
            full.unfill()
            self.rerun(t, lake, "lake_job", partition, endpoint=full.endpoint)
            self.check_gc(t, lake)
        finally:
            full.close()
        return t


def _first_error(reply: dict) -> str:
    """The line of a failed run's first error that says what happened: the store's error if there is one, else
    the innermost exception (Dagster's wrappers come first)."""
    return _headline((reply.get("errors") or ["(no error event)"])[0])


def _headline(error: str) -> str:
    lines = [line.strip() for line in error.splitlines()]
    for line in lines:
        if "StoreUnavailable:" in line or "StoreFull:" in line:
            return line
    errors = [line for line in lines
              if re.match(r"^[\w.]*(Error|Exception|Failed)\w*:", line) and not line.startswith("dagster")]
    return errors[0] if errors else lines[0]


def unclassified(reply: dict) -> list[str]:
    """The failed steps whose error is not the lake's StoreUnavailable or StoreFull: a store failure that reached
    the run some other way (e.g. unwrapped from another client)."""
    return [f"{e.split(':', 1)[0]}: {_headline(e)}" for e in reply.get("errors", [])
            if not e.startswith("run:") and "StoreUnavailable" not in e and "StoreFull" not in e]


def wipe(lake: Lake) -> None:
    lake.delete([o.key for o in lake.list("")])


def drop_bucket(lake: Lake) -> None:
    """Delete a bucket and what it holds, if it exists."""
    from botocore.exceptions import ClientError

    try:
        wipe(lake)
        lake.s3.delete_bucket(Bucket=lake.bucket)
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("NoSuchBucket", "404"):
            raise


def copy(source: Lake, target: Lake, prefixes: list[str]) -> None:
    """Server-side copies: the same bytes, so the same ETags, so the same unit ids and data versions."""
    keys = [o.key for p in prefixes for o in source.list(p)]

    def one(key: str) -> None:
        target._call(f"copying {key}", lambda: target.s3.copy_object(
            Bucket=target.bucket, Key=key, CopySource={"Bucket": source.bucket, "Key": key}))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, keys))


if __name__ == "__main__":
    if sys.argv[1:] == ["worker"]:
        worker_main()
    else:
        sys.exit(__doc__)
