"""The demo: real WARC files dropped as two crawls and built as a deployment builds them (a code server and the
daemon run the raw-drop sensor's runs, then ONE stale backfill, job by job), a summary printed."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import random
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import polars as pl
import yaml
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from llm_assets.core.keys import crawls_named, split_partition
from llm_assets.core.lake import parse_raw_key
from llm_assets.core.partition import LakeInput, committed
from llm_assets.core.tokenize import train_bytelevel_bpe
from llm_assets.platform.failures import FailedRun, first_error, report
from llm_assets.platform.instance import launched_by
from llm_assets.platform.partitions import partitions_label
from llm_assets.settings import PROJECT_ROOT, Settings, settings_path
from llm_assets.stages import SPECS
from llm_assets.stages.cost import SPEC as COST
from llm_assets.stages.crawl_stats import SPEC as CRAWL_STATS
from llm_assets.stages.dedup import CLUSTERS_SPEC
from llm_assets.stages.enriched import SPEC as ENRICHED
from llm_assets.stages.image_text_pairs import SPEC as IMAGE_TEXT_PAIRS
from llm_assets.stages.release import SPEC as RELEASE
from llm_assets.tools.stale import Planned, stale_partitions

SHARED_WARC = PROJECT_ROOT.parent / "shared" / "data" / "warc"

# Two crawls, so crawl partitions are real: files grouped by the era of their crawl.
DEMO_CRAWLS = {
    "CC-MAIN-2020-34": [
        "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz",
        "aut__example.IAH-2008-archive.org.warc.gz",
        "pywb__iana.warc.gz",
    ],
    "CC-MAIN-2024-22": [
        "whirlwind__CC-MAIN-2024-22.warc.gz",
        "dolma__sample-0000.warc.gz",
        "dolma__sample-0001.warc.gz",
    ],
}


def demo_files(workdir: Path, settings: Settings) -> tuple[dict[str, list[Path]], Settings]:
    """crawl -> local files to drop, and the settings to run them with: the shared real WARC files, or a generated
    sample where they are absent."""
    if SHARED_WARC.is_dir():
        return {crawl: [SHARED_WARC / name for name in names if (SHARED_WARC / name).exists()]
                for crawl, names in DEMO_CRAWLS.items()}, settings
    workdir.mkdir(parents=True, exist_ok=True)
    out = {}
    for i, crawl in enumerate(["SAMPLE-2025-01", "SAMPLE-2025-02"]):
        path = workdir / f"sample-{i}.warc.gz"
        path.write_bytes(sample_warc(seed=i, pages=12))
        out[crawl] = [path]
    return out, with_sample_tokenizer(workdir, settings)


def with_sample_tokenizer(workdir: Path, settings: Settings) -> Settings:
    """Without the shared GPT-2 files: the settings pointed at a small byte-level BPE trained on sample text, so the
    tokenized stage still runs a real tokenizer."""
    if settings.tokenized.resolved_path().exists():
        return settings
    rng = random.Random(0)
    texts = [" ".join(rng.choice(_WORDS) for _ in range(200)) for _ in range(200)]
    tokenizer = workdir / "tokenizer.json"
    train_bytelevel_bpe(texts, 1000, [settings.tokenized.eos_token], tokenizer)
    # The code server and the run workers read the settings from a file: this one, named in the environment they
    # inherit.
    data = yaml.safe_load(settings_path().read_text()) or {}
    data.setdefault("tokenized", {})["tokenizer_path"] = str(tokenizer)
    (path := workdir / "settings.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    os.environ["LLM_ASSETS_SETTINGS"] = str(path)
    print(f"../shared/data is absent: generated a sample crawl and a sample tokenizer ({tokenizer}); settings {path}")
    return Settings.from_file(path)


_WORDS = ("data river model token corpus archive crawl page text language quality filter shard lake "
          "training science history music garden city people water energy market school").split()


def sample_warc(seed: int, pages: int) -> bytes:
    """A small WARC (gzip per record) of generated English HTML pages, for machines without ../shared/data."""
    rng = random.Random(seed)
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for n in range(pages):
        paragraphs = "".join(
            "<p>" + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 90))).capitalize() + ".</p>"
            for _ in range(rng.randint(3, 6))
        )
        html = (f"<html><head><title>Sample page {n}</title></head><body><article><h1>Sample page {n}</h1>"
                f"{paragraphs}</article></body></html>").encode()
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        record = writer.create_warc_record(f"http://sample-{seed}.example/page/{n}", "response",
                                           payload=io.BytesIO(html), http_headers=headers)
        writer.write_record(record)
    return buf.getvalue()


def drop_files(lake, files: dict[str, list[Path]]) -> list[str]:
    keys = []
    for crawl, paths in files.items():
        for path in paths:
            key = f"raw/{crawl}/{path.name}"
            parse_raw_key(key)  # a crawl or file name that cannot be a key fails here, before any upload
            lake.put_file(key, path)
            keys.append(key)
    return keys


# -- the processes: the demo runs what a deployment runs ---------------------------------------------------------

READY_S = 600  # a code server loads the code location in ~12 s on a busy 2-core machine; far more is a failure
HEARTBEAT_S = 300  # the daemon beats every ~30 s: one silent this long is gone (or restarting without end)


def _poll(condition, what: str, check, deadline_s: float | None, logs: Path):
    """Wait until `condition()` is truthy: an error after `deadline_s` (None: no deadline), or when `check()` says
    what went wrong."""
    end = None if deadline_s is None else time.monotonic() + deadline_s
    while not (value := condition()):
        if problem := check():
            raise RuntimeError(f"{problem} while the demo waited for {what}: see the logs in {logs}")
        if end is not None and time.monotonic() > end:
            raise RuntimeError(f"gave up after {deadline_s:.0f} s waiting for {what}: see the logs in {logs}")
        time.sleep(1.0)
    return value


# The demo's own services tick the raw-drop sensor every 5 s, not every `sensor.interval_seconds` (30 s by default,
# sized for listing a bucket of millions of raw files): the demo's drop is six files, and waiting on the tick was a
# sixth of its time.
DEMO_SENSOR_INTERVAL_S = 5


def with_quick_sensor(workdir: Path) -> Path:
    """The settings file in force, its raw-drop sensor ticking every `DEMO_SENSOR_INTERVAL_S` (part of no code
    version: what the demo builds is what the settings build), for the services the demo starts."""
    data = yaml.safe_load(settings_path().read_text()) or {}
    data.setdefault("sensor", {})["interval_seconds"] = DEMO_SENSOR_INTERVAL_S
    workdir.mkdir(parents=True, exist_ok=True)
    (path := workdir / "services-settings.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# -- the runs ----------------------------------------------------------------------------------------------------


class Runs:
    """The demo's view of the deployment: it launches runs of the code location through the run coordinator (as the
    CLI, tagged so the UI says who launched them), finds the runs a sensor's tick requested, and follows runs and
    backfills to their end, saying each one that ends."""

    def __init__(self, instance: dg.DagsterInstance, workspace: Path, logs: Path):
        from llm_assets.platform.dagster_private import WorkspaceFileTarget, WorkspaceProcessContext

        self.instance, self.logs = instance, logs
        self.context = WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(workspace)]))

    def problem(self) -> str | None:
        """Why the daemon cannot run the demo's runs, if it cannot: no heartbeat for minutes."""
        beats = self.instance.get_daemon_heartbeats()
        last = max((beats[d].timestamp for d in ("QUEUED_RUN_COORDINATOR", "SENSOR") if d in beats), default=0.0)
        return f"no dagster-daemon has run for {HEARTBEAT_S} s" if time.time() - last > HEARTBEAT_S else None

    def close(self) -> None:
        self.context.__exit__(None, None, None)

    def _repository(self):
        from llm_assets.platform.deploy import LOCATION

        location = self.context.create_request_context().get_code_location(LOCATION)
        return location, location.get_repository(next(iter(location.get_repositories())))

    def launch(self, job_name: str, assets: Sequence[str] = ()) -> str:
        """Queue a run of `job_name` (only `assets` of it, when given), launched by this command; -> its run id."""
        from llm_assets.platform.dagster_private import JobSubsetSelector

        location, repo = self._repository()
        keys = frozenset(dg.AssetKey(a) for a in assets) or None
        job = location.get_job(JobSubsetSelector(location_name=location.name, repository_name=repo.name,
                                                 job_name=job_name, op_selection=None, asset_selection=keys))
        plan = location.get_execution_plan(job, {}, step_keys_to_execute=None, known_state=None,
                                           instance=self.instance)
        run = self.instance.create_run(
            job_name=job_name, run_id=None, run_config={}, resolved_op_selection=None,
            step_keys_to_execute=plan.execution_plan_snapshot.step_keys_to_execute, op_selection=None, status=None,
            root_run_id=None, parent_run_id=None, tags={**job.tags, **launched_by("demo")},
            job_snapshot=job.job_snapshot, execution_plan_snapshot=plan.execution_plan_snapshot,
            parent_job_snapshot=job.parent_job_snapshot, remote_job_origin=job.get_remote_origin(),
            job_code_origin=job.get_python_origin(), asset_selection=keys, asset_check_selection=None,
            asset_graph=repo.asset_graph)
        return self.instance.submit_run(run.run_id, self.context.create_request_context()).run_id

    def sensor_runs(self, sensor_name: str, after: float, since: float | None = None) -> list[str]:
        """The runs the sensor requested from `since` through its first whole pass over the lake begun after `after`
        (timestamps; the daemon ticks it every `sensor.interval_seconds`). A tick begun before the drop ended, even
        before it began, may list some or all of its files: the runs it created since are the drop's too, and
        waited for with the others."""
        from llm_assets.platform.dagster_private import SENSOR_NAME_TAG, TickStatus

        sensor = self._repository()[1].get_sensor(sensor_name)
        origin, selector = sensor.get_remote_origin_id(), sensor.selector_id
        if not sensor.get_current_instigator_state(self.instance.get_instigator_state(origin, selector)).is_running:
            raise RuntimeError(f"{sensor_name} is stopped in this Dagster instance: start it (`make ui`, Automation) "
                               "and run the demo again")

        def passed():
            ticks = self.instance.get_ticks(origin, selector, after=after,
                                            statuses=[TickStatus.SUCCESS, TickStatus.SKIPPED, TickStatus.FAILURE])
            return next((t for t in sorted(ticks, key=lambda t: t.timestamp)
                         if t.status == TickStatus.FAILURE or json.loads(t.cursor or "{}").get("scan") is None), None)

        tick = _poll(passed, f"{sensor_name}'s next tick", self.problem, READY_S, self.logs)
        if tick.status == TickStatus.FAILURE:
            raise RuntimeError(f"{sensor_name}'s tick failed: {tick.error.message.strip() if tick.error else '?'}")
        if since is None:
            return list(tick.run_ids)
        # a tick records its runs once they are created: the passing tick's are there, and every earlier tick's
        records = self.instance.get_run_records(dg.RunsFilter(
            tags={SENSOR_NAME_TAG: sensor_name}, created_after=dt.datetime.fromtimestamp(since, dt.timezone.utc)))
        return [r.dagster_run.run_id for r in sorted(records, key=lambda r: r.create_timestamp)]

    def wait(self, run_ids: Sequence[str]) -> list[FailedRun]:
        """Follow the runs to their end, saying each as it ends, a failure with its first error."""
        ended: set[str] = set()
        failed: list[FailedRun] = []

        def all_ended() -> bool:
            records = self.instance.get_run_records(dg.RunsFilter(run_ids=list(run_ids), statuses=ENDED))
            for record in sorted(records, key=lambda r: r.end_time or 0):
                if record.dagster_run.run_id not in ended:
                    ended.add(record.dagster_run.run_id)
                    failed.extend(self._said(record.dagster_run, len(ended), len(run_ids)))
            return len(ended) == len(run_ids)

        _poll(all_ended, "the runs", self.problem, None, self.logs)
        return failed

    def wait_backfill(self, backfill_id: str) -> list[FailedRun]:
        """Follow a stale backfill the daemon's sensor runs until it ends, saying each of its runs as it ends."""
        from llm_assets.platform.backfills import get_stale_backfill, runs_of

        said: set[str] = set()
        failed: list[FailedRun] = []

        def done() -> bool:
            backfill = get_stale_backfill(self.instance, backfill_id)
            records = self.instance.get_run_records(runs_of(backfill_id, ENDED), ascending=True)
            for record in sorted(records, key=lambda r: r.end_time or 0):
                if record.dagster_run.run_id not in said:
                    said.add(record.dagster_run.run_id)
                    failed.extend(self._said(record.dagster_run, len(said), None))
            return backfill is not None and not backfill.in_progress

        _poll(done, f"backfill {backfill_id}", self.problem, None, self.logs)
        return failed

    def _said(self, run: dg.DagsterRun, n: int, total: int | None) -> list[FailedRun]:
        job = run.job_name
        partition = partitions_label(run.tags)
        what = f"{job} {partition}" if partition else job
        print(f"[{n}/{total}] {what}" if total else f"[{n}] {what}", flush=True)
        if run.status == dg.DagsterRunStatus.SUCCESS:
            return []
        events = [e.dagster_event for e in self.instance.all_logs(run.run_id) if e.dagster_event is not None]
        failure = FailedRun(job, partition, run.run_id,
                            first_error(events) if run.status == dg.DagsterRunStatus.FAILURE
                            else f"the run ended {run.status.value.lower()}")
        report(failure)
        return [failure]


ENDED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


@contextmanager
def deployment(instance: dg.DagsterInstance) -> Iterator[Runs]:
    """The services that run the demo's runs: those of `llm-assets deploy up` when it runs (`get_instance` opened
    its instance then), else a code server and a `dagster-daemon` of this instance (the embedded SQLite one) for the
    demo's duration, supervised as the deployment supervises them, logging under $LLM_ASSETS_HOME/demo/logs/."""
    from llm_assets.platform import deploy, environment

    layout = deploy.Layout(environment.home())
    supervisor = None
    if layout.supervisor_pid() is not None:
        logs = layout.root / "logs"
        port = json.loads(layout.ports_file.read_text())["code-server"]
    else:
        logs = environment.home() / "demo" / "logs"
        port = deploy.free_port()
    # The workspace file names the code server through the environment: this process loads it too.
    os.environ.update(deploy.dagster_env(Path(os.environ["DAGSTER_HOME"]), port))
    try:
        if layout.supervisor_pid() is None:
            started = time.time()
            env = {**os.environ, "LLM_ASSETS_SETTINGS": str(with_quick_sensor(environment.home() / "demo"))}
            supervisor = deploy.start_services(environment.home() / "demo", deploy.dagster_services(port), env=env,
                                               timeout_s=READY_S)
            _poll(lambda: {"SENSOR", "QUEUED_RUN_COORDINATOR"} <= {  # this daemon's, not an earlier one's
                name for name, beat in instance.get_daemon_heartbeats().items() if beat.timestamp >= started},
                  "the dagster-daemon", lambda: None, READY_S, logs)
        runs = Runs(instance, deploy.WORKSPACE, logs)
        try:
            yield runs
        finally:
            runs.close()
    finally:
        if supervisor is not None:
            supervisor.stop()


# -- the demo's steps ----------------------------------------------------------------------------------------------

MODELS = ("takedowns", "eval_index", "tokenizer")


def run_models(runs: Runs) -> list[FailedRun]:
    """The takedown requests and the eval index in force (curation_job), and the tokenizer published, before any
    partition reads them: the lineage of every filtered and tokenized partition starts from these versions."""
    print("curation_job; release_job (tokenizer only)", flush=True)
    return runs.wait([runs.launch("curation_job"), runs.launch("release_job", assets=["tokenizer"])])


def run_sensor_requests(runs: Runs, dropped_at: float, drop_began: float) -> list[FailedRun]:
    """The raw-drop sensor's ticks from the drop's start through its next whole pass after it request the lake
    runs; the daemon runs them."""
    requested = runs.sensor_runs("raw_drop_sensor", dropped_at, since=drop_began)
    print(f"raw_drop_sensor requested {len(requested)} run{'s' * (len(requested) != 1)} of lake_job", flush=True)
    return runs.wait(requested) if requested else []  # files dropped again as they were: nothing to run


def stale_plan(instance, lake, settings: Settings, failed: list[FailedRun]) -> list[Planned]:
    """What the stale planner lists, but the crawls whose runs failed earlier in this demo, and the release when a
    run failed: the planner lists a failed partition to retry it, and a demo neither retries its own failures
    (each is said once, when it happens) nor builds what depends on them."""
    gave_up = {crawl for f in failed if f.partition for crawl in crawls_named(f.partition)}
    return [p for p in stale_partitions(instance, lake, settings)
            if split_partition(p.partition)[0] not in gave_up and not (failed and p.asset == RELEASE.name)]


def run_stale_backfill(runs: Runs, lake, settings: Settings, planned: list[Planned], held: bool = False
                       ) -> list[FailedRun]:
    """ONE backfill of the planned partitions, as `llm-assets backfill --stale` launches it (its forecast in its
    tags); the daemon runs it. `held`: what depends on a failed run was left out of the plan."""
    from llm_assets.dagster.freshness import launch_stale_backfill, plan_forecast

    if not planned:
        print("no backfill: " + ("what is left to build depends on the runs that failed" if held else
                                 "nothing is stale"), flush=True)
        return []
    backfill_id = launch_stale_backfill(runs.instance, planned, tags=launched_by("demo"),
                                        forecast=plan_forecast(lake, settings, planned))
    assets = sorted({p.asset for p in planned}, key=[s.name for s in SPECS].index)
    print(f"backfill {backfill_id}: the {len(planned)} stale partitions ({', '.join(assets)})", flush=True)
    return runs.wait_backfill(str(backfill_id))


def latest_metadata(instance, asset: str, partition: str | None = None) -> dict:
    """The metadata of the asset's (partition's) latest materialization, as the UI shows it."""
    records = instance.fetch_materializations(dg.AssetRecordsFilter(
        asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None), limit=1).records
    if not records or records[0].asset_materialization is None:
        return {}
    return {k: v.value for k, v in records[0].asset_materialization.metadata.items()}


def crawl_summaries(instance, crawls: list[str]) -> str:
    """Each crawl's filter funnel and what deduplication removed, as the UI shows them."""
    out = []
    for crawl in crawls:
        stats, dedup = latest_metadata(instance, CRAWL_STATS.name, crawl), latest_metadata(
            instance, CLUSTERS_SPEC.name, crawl)
        if stats:
            out.append(f"\ncrawl_stats {crawl}: the filter funnel (the UI shows it as a chart)")
            for row in stats["funnel"].records:
                step, block, reason, n = (row.data[k] for k in ("step", "block", "reason", "documents"))
                label = step if step in ("in", "out") else f"- {block} {reason}"
                out.append(f"  {label:<52} {n:>8,}")
        if dedup:
            reasons = ", ".join(f"{n:,} {reason}" for reason, n in sorted(dedup["removed_by_reason"].items()))
            out.append(f"duplicate_clusters {crawl}: {dedup['duplicates_removed']:,} of {dedup['documents']:,} "
                       f"filtered documents removed" + (f" ({reasons})" if reasons else ""))
        if cost := latest_metadata(instance, COST.name, crawl):
            out.append(f"cost {crawl}: {cost['cpu_hours'] * 3600:,.1f} CPU-s over {cost['units']:,} work units, "
                       f"{cost['requests']:,} S3 requests (the cost asset charts them per stage)")
    return "\n".join(out)


def release_summary(instance) -> str:
    """The release's latest materialization: what a training job reads."""
    m = latest_metadata(instance, RELEASE.name)
    if not m:
        return ""
    return (f"release {m['release']}: {m['documents']:,} documents, {m['tokens']:,} tokens → {m['sequences']:,} "
            f"sequences of {m['context']:,} (padding {m['padding_pct']:.2f}%, truncated {m['truncated_pct']:.2f}%)"
            f"{' (already released: unchanged)' if m['reused'] else ''}\n"
            "  look at it: .venv/bin/llm-assets show release --limit 2 --json")


def run_demo(instance, lake, settings: Settings, files: dict[str, list[Path]]) -> list[FailedRun]:
    """The demo's runs, launched as a deployment launches them: the models by the CLI, the lake runs by the raw-drop
    sensor's tick, the rest by ONE stale backfill; a code server and the daemon run them. -> the runs that failed."""
    with deployment(instance) as runs:
        failed = run_models(runs)
        drop_began = time.time()
        keys = drop_files(lake, files)
        dropped_at = time.time()
        print(f"dropped {len(keys)} raw files into {len(files)} crawls: {', '.join(files)}", flush=True)
        failed += run_sensor_requests(runs, dropped_at, drop_began)
        failed += run_stale_backfill(runs, lake, settings, stale_plan(instance, lake, settings, failed), bool(failed))
    if summaries := crawl_summaries(instance, list(files)):
        print(summaries)
    if release := release_summary(instance):
        print(f"\n{release}")
    return failed


def takedown_step(instance, lake, settings: Settings) -> list[FailedRun]:
    """The takedown demo: a request for one released document's URL, the plan (exactly the partitions that hold
    it, and the release), the rebuild, and where the request stands: removed, in a new release, the old one
    superseded."""
    from llm_assets.core.release import latest_release
    from llm_assets.core.takedowns import TakedownRequest
    from llm_assets.loader import ReleaseLoader, SupersededReleaseWarning
    from llm_assets.stages.dedup import DEDUPLICATED_SPEC
    from llm_assets.tools import takedown

    crawls = [c for c in instance.get_dynamic_partitions("crawl")]
    old = latest_release(lake, settings.release.name)
    manifests = [m for c in crawls for m in committed(lake, DEDUPLICATED_SPEC.name, c, settings.shard_keys()).values()
                 if m.rows]
    if old is None or not manifests:
        raise LookupError("no release yet: run `make demo` first")
    url = LakeInput(lake, DEDUPLICATED_SPEC.name, manifests[:1]).scan().select("url").head(1).collect()["url"][0]
    request = TakedownRequest(url=url, reason="demo: a site owner's request", requested_by="demo",
                              date=dt.date.today())
    print(f"takedown add --url {url}: written to {lake.url(takedown.add(lake, request))}")
    with deployment(instance) as runs:
        print("curation_job", flush=True)
        failed = runs.wait([runs.launch("curation_job")])
        planned = stale_plan(instance, lake, settings, failed)
        for p in planned:
            print(f"  stale  {p.asset:<18} {p.partition or '(unpartitioned)':<24} {p.cause}")
        failed += run_stale_backfill(runs, lake, settings, planned, bool(failed))
    if release := release_summary(instance):
        print(f"\n{release}")
    print()
    print(takedown.format_status([s for s in takedown.status(lake, settings, crawls) if s.target == request.target]))
    uri = lake.url(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ReleaseLoader(uri, storage_options=lake.config.boto_options(lake.credentials))
    said = [str(w.message) for w in caught if issubclass(w.category, SupersededReleaseWarning)]
    print(f"\nthe loader on the previous release: {said[0] if said else 'no warning'}\n"
          "  (ReleaseLoader(..., on_superseded='refuse') refuses it)")
    return failed


def drop_eval_sets(lake, settings: Settings) -> list[str]:
    """The GSM8K test set of ../shared/data under evals/: the demo's release is decontaminated against it."""
    path = SHARED_WARC.parent / "evals" / GSM8K
    if not path.exists():
        return []
    lake.put_file(key := f"{settings.evals.prefix}{GSM8K}", path)
    return [key]


# A robots.txt capture made for the demo (no shared file bars an AI agent from a host it has pages of): it bars CCBot
# from the two pages of one host of the 2008 crawl, so the opt-out funnel has something to show.
DEMO_ROBOTS = ("CC-MAIN-2020-34", "deadlists.com", "User-agent: CCBot\nDisallow: /\n")


def drop_robots(lake) -> str | None:
    """The demo's robots.txt capture under robots/<crawl>/, where Common Crawl's robots.txt WARCs are dropped."""
    crawl, host, body = DEMO_ROBOTS
    if not SHARED_WARC.is_dir():
        return None
    lake.put_bytes(key := f"robots/{crawl}/demo-robots.warc.gz",
                   robots_warc({host: body}, dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")))
    return key


def robots_warc(captures: dict[str, str], fetched: str) -> bytes:
    """A WARC (gzip per record) of robots.txt responses, host -> body, as Common Crawl publishes its captures."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for host, body in captures.items():
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/plain")], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(
            f"http://{host}/robots.txt", "response", payload=io.BytesIO(body.encode()), http_headers=http,
            warc_headers_dict={"WARC-Date": fetched}))
    return buf.getvalue()


CHANGED_SETTINGS = "changed-settings.yaml"
GSM8K = "openai-grade-school-math__gsm8k_test.jsonl"
LATE_DROP = ("CC-MAIN-2024-22", "late-drop.warc.gz", "dolma__sample-0001.warc.gz")


def write_changed_settings(source: Path, workdir: Path) -> Path:
    """The settings file `source` with one threshold changed: Gopher's minimum words per document, 50 → 80."""
    data = yaml.safe_load(source.read_text())
    chain = data.setdefault("filtered", {}).setdefault("chain", [{"block": "gopher_quality"}])
    next(b for b in chain if b["block"] == "gopher_quality")["min_doc_words"] = 80
    path = workdir / CHANGED_SETTINGS
    workdir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def late_file_bytes() -> dict[str, int]:
    """The raw key and size of the file `drop_late_file` drops, before it is dropped."""
    crawl, name, source = LATE_DROP
    path = SHARED_WARC / source
    return {f"raw/{crawl}/{name}": path.stat().st_size if path.exists() else len(sample_warc(seed=7, pages=6))}


def change_forecast(lake, source: Path, workdir: Path):
    """The forecast of `demo --change` before either change is applied: the plan under the changed settings, with
    the late file counted as if it were dropped. -> (the changed settings' path, the forecast)."""
    from llm_assets.dagster.freshness import plan_forecast

    path = write_changed_settings(source, workdir)
    settings = Settings.from_file(path)
    return path, plan_forecast(lake, settings, stale_partitions(None, lake, settings), late_file_bytes())


def drop_late_file(lake) -> str:
    crawl, name, source = LATE_DROP
    key = f"raw/{crawl}/{name}"
    if (SHARED_WARC / source).exists():
        lake.put_file(key, SHARED_WARC / source)
    else:
        lake.put_bytes(key, sample_warc(seed=7, pages=6))
    return key


def image_pair_examples(lake, settings: Settings, crawls: list[str], n: int = 3) -> str:
    """A few image–text pairs of the demo crawls, to look at."""
    lines = ["image–text pairs, for example:"]
    for crawl in crawls:
        manifests = list(committed(lake, IMAGE_TEXT_PAIRS.name, crawl, settings.shard_keys()).values())
        if not manifests:  # not built (its runs failed): nothing to show
            continue
        pairs = (LakeInput(lake, IMAGE_TEXT_PAIRS.name, manifests).scan()
                 .filter(pl.col("alt").str.len_chars() > 10).head(n).collect())
        for image_url, alt in pairs.select("image_url", "alt").iter_rows():
            lines.append(f"  [{crawl}] {alt[:60]!r} → {image_url[:90]}")
    return "\n".join(lines) if len(lines) > 1 else ""


def enrichment_examples(lake, settings: Settings, crawls: list[str], n: int = 2) -> str:
    """A few enriched documents of each crawl: their entities, keywords and summary."""
    lines = ["enriched documents, for example (`llm-assets show enriched --crawl C` for more):"]
    for crawl in crawls:
        manifests = list(committed(lake, ENRICHED.name, crawl, settings.shard_keys()).values())
        docs = (LakeInput(lake, ENRICHED.name, manifests).scan().filter(pl.col("entities").list.len() >= 3)
                .sort("doc_id").head(n).collect()) if manifests else pl.DataFrame()
        for row in docs.iter_rows(named=True):
            lines += [f"  [{crawl}] {row['url']}", *describe_enriched(row, "    ")]
    return "\n".join(lines) if len(lines) > 1 else ""


def describe_enriched(row: dict, indent: str = "") -> list[str]:
    """One enriched row, for people: entities with label and mentions, keywords, the summary."""
    entities = ", ".join(f"{e['text']} ({e['label']}{' ×%d' % e['count'] if e['count'] > 1 else ''})"
                         for e in (row["entities"] or [])[:6])
    keywords = ", ".join(k["keyword"] for k in (row["keywords"] or [])[:6])
    summary = (row["summary"] or "")[:300] + ("…" if len(row["summary"] or "") > 300 else "")
    return [f"{indent}entities: {entities or '-'}", f"{indent}keywords: {keywords or '-'}",
            f"{indent}summary:  {summary or '-'}", *([f"{indent}skipped:  {'; '.join(row['skipped'])}"]
                                                    if row.get("skipped") else [])]


FUNNEL_STAGES = ("identified", "filtered", "deduplicated", "tokenized", "release")


def language_funnel(lake, settings: Settings, crawls: list[str]) -> pl.DataFrame:
    """Documents per language through the stages, read from the lake: `identified` (lid.176 labelled them so, kept
    or dropped by the chain), kept by `filtered`, `deduplicated`, `tokenized`, and in the latest `release` (with its
    `release_tokens`). A document keeps the language `filtered` gave it; the stages after it are counted by doc_id."""
    from llm_assets.core.release import latest_release, provenance_keys
    from llm_assets.stages.dedup import DEDUPLICATED_SPEC
    from llm_assets.stages.filtered import SPEC as FILTERED
    from llm_assets.stages.tokenized import SPEC as TOKENIZED

    def manifests(asset: str) -> list:
        return [m for c in crawls for m in committed(lake, asset, c, settings.shard_keys()).values()]

    def scan(keys: list[str], columns: list[str]) -> pl.DataFrame:
        return lake.scan(keys).select(columns).collect() if keys else pl.DataFrame(
            schema={c: pl.String for c in columns})

    filtered = manifests(FILTERED.name)
    kept = scan([p for m in filtered for p in m.parts], ["doc_id", "language"])
    rejected = scan([p for m in filtered for p in m.rejected_parts], ["language"]).drop_nulls()
    deduplicated = scan([p for m in manifests(DEDUPLICATED_SPEC.name) for p in m.parts], ["doc_id"])
    tokenized = scan([p for m in manifests(TOKENIZED.name) for p in m.parts], ["doc_id"])
    release = pl.DataFrame(schema={"doc_id": pl.String, "length": pl.Int64})
    if (prefix := latest_release(lake, settings.release.name)) is not None and (
            manifest := lake.get_json(prefix + "manifest.json")) is not None:
        release = (lake.scan(provenance_keys(prefix, manifest)).group_by("doc_id")
                   .agg(pl.col("length").sum()).collect())
    language = kept.select("doc_id", "language")

    def per_language(docs: pl.DataFrame, name: str) -> pl.DataFrame:
        return docs.join(language, on="doc_id").group_by("language").agg(pl.len().alias(name))

    counts = pl.concat([kept.select("language"), rejected.select("language")]).group_by("language").agg(
        pl.len().alias("identified"))
    for docs, name in ((kept, "filtered"), (deduplicated, "deduplicated"), (tokenized, "tokenized"),
                       (release, "release")):
        counts = counts.join(per_language(docs, name), on="language", how="left")
    tokens = release.join(language, on="doc_id").group_by("language").agg(pl.col("length").sum().alias(
        "release_tokens"))
    return (counts.join(tokens, on="language", how="left").fill_null(0)
            .sort(["release", "identified", "language"], descending=[True, True, False]))


def format_language_funnel(funnel: pl.DataFrame) -> str:
    """The per-language funnel as the demo prints it: one line per language lid.176 named."""
    if funnel.is_empty():
        return ""
    head = f"  {'language':<10}" + "".join(f"{s:>14}" for s in FUNNEL_STAGES) + f"{'release tokens':>16}"
    lines = ["documents per language through the stages (identified: lid.176's label, kept or dropped by the "
             "chain; each language filtered with its own thresholds)", head]
    for row in funnel.iter_rows(named=True):
        lines.append(f"  {row['language']:<10}" + "".join(f"{row[s]:>14,}" for s in FUNNEL_STAGES)
                     + f"{row['release_tokens']:>16,}")
    return "\n".join(lines)
