"""The demo as the README runs it: `make demo` and `make demo-cluster` from a clean state, each in a home of its own,
and a demo whose runs fail. Its runs are real runs of the code location (a code server and dagster-daemon run them):
the webserver's GraphQL, queried as the UI's pages query it, shows each with its code location and who launched it.

Each command runs in an environment holding none of the variables that point llm-assets at a store or carry
credentials, so nothing works only because a process happened to inherit them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from llm_assets.settings import PROJECT_ROOT

LLM_ASSETS = str(Path(sys.executable).with_name("llm-assets"))
# What a release holds, byte for byte; its manifest and card also name the run and the time that wrote it.
RUN_SPECIFIC = ("manifest.json", "README.md")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items()
                 if not k.startswith(("AWS_", "LLM_ASSETS_", "DAGSTER_", "DASK_", "MAKE", "MFLAGS"))}
    return {**inherited, "LLM_ASSETS_HOME": str(home), **extra}


@dataclass
class Demo:
    home: Path
    env: dict[str, str]
    result: subprocess.CompletedProcess

    @property
    def out(self) -> str:
        return self.result.stdout

    def release(self) -> dict[str, str]:
        """Every object of the release, by key, as sha256 (the run-specific manifest and card left out)."""
        lake = self.lake()
        return {key: hashlib.sha256(lake.get_bytes(key)).hexdigest() for key in sorted(lake.keys("releases/"))
                if not key.endswith(RUN_SPECIFIC)}

    def lake(self):
        from llm_assets.core.lake import Lake, StoreConfig

        store = self.home / "store"
        port = json.loads((store / "ports.json").read_text())["s3.port"]
        return Lake(StoreConfig(endpoint=f"http://127.0.0.1:{port}", bucket="llm-assets", region="us-east-1",
                                credentials_file=str(store / "credentials.env")))

    def released_languages(self) -> dict[str, int]:
        """language -> documents of the latest release, read back from its files: the documents its provenance
        places, with the language of the release's own text files."""
        from llm_assets.core.release import latest_release, provenance_keys

        lake = self.lake()
        prefix = latest_release(lake, "demo")
        assert prefix is not None, "no release"
        manifest = lake.get_json(prefix + "manifest.json")
        placed = lake.scan(provenance_keys(prefix, manifest)).select("doc_id").unique().collect()
        text = lake.scan(sorted(k for k in lake.keys(prefix + "text/") if k.endswith(".parquet")))
        languages = placed.join(text.select("doc_id", "language").collect(), on="doc_id", how="left")
        assert languages["language"].null_count() == 0, "a released document without its text"
        return dict(languages.group_by("language").len().iter_rows())


def make(*targets: str, env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *targets], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def run_demo(home: Path, *targets: str) -> Demo:
    env = clean_env(home)
    return Demo(home, env, make(*targets, env=env))


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """The README's two demos, each from a clean state in a home of its own: `make clean && make demo` (the
    process pool) and `make clean && make demo-cluster` (every unit on a local Dask cluster)."""
    homes = {name: tmp_path_factory.mktemp(name) / "state" for name in ("pool", "cluster")}
    started: list[Path] = []
    try:
        for home in homes.values():
            assert make("clean", env=clean_env(home)).returncode == 0
            started.append(home)
        # Side by side: two homes share nothing (stores, instances, clusters and ports of their own), and each demo
        # mostly waits on its daemon's ticks, so running them at once takes little more than the longer one.
        with ThreadPoolExecutor(2) as pool:
            out = dict(zip(homes, pool.map(run_demo, homes.values(), ("demo", "demo-cluster")), strict=True))
        yield out
    finally:
        for home in started:
            make("clean", env=clean_env(home), timeout=300)


def _report(demo: Demo) -> str:
    return f"exit {demo.result.returncode}\n--- stdout\n{demo.out[-4000:]}\n--- stderr\n{demo.result.stderr[-4000:]}"


def run_logs(home: Path) -> str:
    """Every message the demo's runs logged, from the event log of its Dagster instance."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        return "\n".join(entry.user_message for run in instance.get_runs() for entry in instance.all_logs(run.run_id))


def test_the_cluster_demo_from_a_clean_state_releases_what_the_pool_demo_releases(demos):
    pool, cluster = demos["pool"], demos["cluster"]
    assert pool.result.returncode == 0, _report(pool)
    assert cluster.result.returncode == 0, _report(cluster)
    assert "NoCredentialsError" not in cluster.result.stderr
    assert re.search(r"\d+ work units on DaskRunner", run_logs(cluster.home)), "no unit ran on the cluster"
    released = pool.release()
    assert any(key.endswith("/data.bin") for key in released), released
    assert cluster.release() == released  # the same version, the same tokens, documents and provenance


def test_the_cluster_workers_were_given_no_credentials(demos):
    """The workers read the store's credentials file each unit names; none is in their environment."""
    cluster = demos["cluster"]
    status = subprocess.run([LLM_ASSETS, "cluster", "status", "--json"], env=cluster.env, capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    workers = [n for n in json.loads(status.stdout)["nodes"] if n["role"] == "worker"]
    assert workers and all(n["alive"] for n in workers)
    for node in workers:
        environ = Path(f"/proc/{node['pid']}/environ").read_bytes().split(b"\0")
        assert not [v for v in environ if v.startswith((b"AWS_ACCESS_KEY_ID=", b"AWS_SECRET_ACCESS_KEY="))]
    stop = make("cluster-stop", env=cluster.env, timeout=300)
    assert stop.returncode == 0 and "cluster stopped" in stop.stdout, stop.stdout + stop.stderr


@pytest.mark.parametrize("which", ["pool", "cluster"])
def test_the_stage_table_comes_after_every_run_the_release_included(demos, which):
    out = demos[which].out
    table = out.index("\nstage ")
    assert out.index("\nbackfill ") < out.rindex("] release_job\n") < table  # the backfill's release run
    assert out.index("\nrelease s3://") < table
    # every asset the demo built, the release and the (empty) takedown list included; the quality classifier is
    # trained on demand from labels/quality/, not by the demo
    shown = [line for line in out[table:].split("\n\n")[0].splitlines()
             if "not materialized" in line and not line.startswith("quality_classifier ")]
    assert not shown, shown
    assert "FAILED" not in out + demos[which].result.stderr
    # last, the forecast of `demo --change` before it is applied: the late file's raw stages, the changed
    # threshold's `filtered` and what follows it, with CPU-hours
    forecast = out[out.index("\nnext, `llm-assets demo --change`"):]
    header = forecast.splitlines()[3].split()
    assert header[:3] == ["stage", "partitions", "units"], forecast
    rows = {cells[0]: cells for line in forecast.splitlines()[5:] if (cells := line.split())}
    assert {"raw_files", "documents", "filtered", "signatures", "duplicate_clusters", "deduplicated", "tokenized",
            "total"} <= set(rows), forecast
    cpu_hours = header.index("CPU-hours") + 1  # the input column is two cells: "144.2 KB"
    assert float(rows["total"][cpu_hours]) > 0 and float(rows["documents"][cpu_hours]) > 0, forecast


FUNNEL_ROW = re.compile(r"^  (\S+)" + r"\s+([\d,]+)" * 6 + "$", re.MULTILINE)


def language_funnel(out: str) -> dict[str, list[int]]:
    """The demo's last table: language -> documents identified, filtered, deduplicated, tokenized, released, and
    the release's tokens."""
    table = out[out.index("\ndocuments per language through the stages"):]
    return {m[1]: [int(n.replace(",", "")) for n in m.groups()[1:]] for m in FUNNEL_ROW.finditer(table)}


def latest_filtered(home: Path) -> dict:
    """partition -> the latest materialization of each `filtered` partition, as the UI shows it."""
    import dagster as dg

    latest: dict[str, dg.AssetMaterialization] = {}
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey("filtered")),
                                                  limit=1000).records
        for record in records:  # newest first
            if record.partition_key is not None and record.asset_materialization is not None:
                latest.setdefault(record.partition_key, record.asset_materialization)
    return latest


def filtered_language_funnels(home: Path) -> dict[str, dict[str, int]]:
    """language -> documents and kept, summed over the latest materialization of every `filtered` partition: its
    `language_funnel` table, as the UI shows it."""
    totals: dict[str, dict[str, int]] = {}
    for materialization in latest_filtered(home).values():
        for row in materialization.metadata["language_funnel"].value.records:
            total = totals.setdefault(row.data["language"], {"documents": 0, "kept": 0})
            total["documents"] += row.data["documents"]
            total["kept"] += row.data["kept"]
    return totals


@pytest.mark.parametrize("which", ["pool", "cluster"])
def test_the_release_holds_english_and_two_other_languages_each_through_its_funnel(demos, which):
    """The default keep list and each language's own FineWeb-2 thresholds let English and at least two other
    languages of the shared crawl files through every stage; the demo's last table says how many at each, and the
    release's own files agree with it."""
    demo = demos[which]
    assert demo.result.returncode == 0, _report(demo)
    funnel = language_funnel(demo.out)
    released = {lang: counts[4] for lang, counts in funnel.items() if counts[4]}
    assert "en" in released and len(set(released) - {"en"}) >= 2, funnel
    for lang in released:
        identified, kept, deduplicated, tokenized, release, tokens = funnel[lang]
        assert identified >= kept >= deduplicated >= tokenized >= release > 0 and tokens > 0, (lang, funnel[lang])
    assert demo.released_languages() == released
    # each of them with its own funnel in the metadata of the filtered partitions that held it
    funnels = filtered_language_funnels(demo.home)
    for lang in released:
        assert funnels[lang] == {"documents": funnel[lang][0], "kept": funnel[lang][1]}, (lang, funnels)


@pytest.mark.parametrize("which", ["pool", "cluster"])
def test_the_demo_shows_the_opt_out_funnel(demos, which):
    """The demo's robots.txt capture bars CCBot from one host of the 2008 crawl: its pages are left out, counted in
    the crawl's filter funnel (which the UI charts), in the `opt_outs` table of the filtered partition that held
    them, with its evidence, and in the release's card."""
    from llm_assets.cli.demo import DEMO_ROBOTS
    from llm_assets.core.release import latest_release

    demo = demos[which]
    assert demo.result.returncode == 0, _report(demo)
    crawl, host, _ = DEMO_ROBOTS
    assert f"dropped robots/{crawl}/demo-robots.warc.gz, a robots.txt capture made for the demo" in demo.out
    funnel = re.search(r"^  - opt_out robots_txt +([\d,]+)$", demo.out, re.MULTILINE)
    assert funnel, demo.out
    left_out = int(funnel[1].replace(",", ""))
    tables = [r.data for m in latest_filtered(demo.home).values() for r in m.metadata["opt_outs"].value.records
              if r.data["kind"] == "robots_txt" and r.data["documents"]]
    assert [(t["documents"], t["hosts"]) for t in tables] == [(left_out, 1)] and left_out > 0, tables
    lake = demo.lake()
    card = lake.get_bytes(latest_release(lake, "demo") + "README.md").decode()
    assert f"| `robots_txt` | {left_out:,} | 1 | 0 |" in card, card
    assert lake.get_json(latest_release(lake, "demo") + "manifest.json")["opt_outs"]["hosts"] == [f"robots_txt:{host}"]


def test_a_demo_whose_runs_fail_says_so(seaweed, tmp_path):
    """A runner that cannot reach its cluster: every run fails. Each is marked with its first error and its run
    id, nothing is shown of what was not built, and the demo exits non-zero with one line saying so."""
    from llm_assets.core.lake import Lake, StoreConfig
    from llm_assets.platform.embedded_store import free_ports

    bucket = f"demo-fails-{os.getpid()}"
    Lake(StoreConfig(endpoint=seaweed.endpoint, bucket=bucket, region="us-east-1",
                     credentials_file=str(seaweed.credentials_file))).s3.create_bucket(Bucket=bucket)
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"runner:\n  kind: dask\n  address: tcp://127.0.0.1:{free_ports(1)[0]}\n"
                        "  connect_timeout_s: 1\n")
    env = clean_env(tmp_path / "home", LLM_ASSETS_S3_ENDPOINT=seaweed.endpoint, LLM_ASSETS_BUCKET=bucket,
                    AWS_ACCESS_KEY_ID=seaweed.access_key, AWS_SECRET_ACCESS_KEY=seaweed.secret_key,
                    LLM_ASSETS_SETTINGS=str(settings))
    result = subprocess.run([LLM_ASSETS, "demo"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                            timeout=1200, stdin=subprocess.DEVNULL)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    planned = re.findall(r"^\[\d+/\d+\] (lake_job \S+)$", result.stdout, re.MULTILINE)
    marked = re.findall(r"^  FAILED (lake_job \S+): raw_files: ClusterUnavailable: cannot reach the Dask scheduler "
                        r"at tcp://127\.0\.0\.1:\d+.*\n    run ([0-9a-f-]{36}): ", result.stderr, re.MULTILINE)
    said = "\n".join(line for line in result.stderr.splitlines() if line.startswith(("  FAILED", "    run ")))
    # the crawls dropped together share a run (each crawl's four shards), marked
    assert len(planned) >= 1 and {name for name, _ in marked} == set(planned), said
    # said once each: a demo does not retry its own failures (the stale planner lists them as failed)
    names = re.findall(r"^  FAILED (\S+ \S+):", result.stderr, re.MULTILINE)
    assert len(names) == len(set(names)), said
    assert " (stale)" not in result.stdout
    # nothing that depends on a failed run is built: no crawl-level partition over shards never committed
    crawls = re.search(r"^dropped \d+ raw files into \d+ crawls: (.+)$", result.stdout, re.MULTILINE)[1].split(", ")
    assert len(crawls) == 2
    assert "no backfill: what is left to build depends on the runs that failed" in result.stdout
    rows = {line.split()[0]: line for line in result.stdout[result.stdout.index("\nstage "):].splitlines()[3:] if line}
    for asset in ("crawl_stats", "duplicate_clusters"):
        assert rows[asset].rstrip().endswith(f"0 rows, 0/{len(crawls)} partitions"), rows[asset]
    assert "not materialized" not in rows["takedowns"], rows["takedowns"]  # curation_job built it
    assert "image–text pairs, for example" not in result.stdout and "enriched documents, for" not in result.stdout
    assert "ColumnNotFoundError" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"demo failed: \d+ runs? failed \(lake_job ×\d+.*\); each is marked FAILED above with its "
                        r"first error and run id", last), last


# -- what the UI shows of the demo's runs ------------------------------------------------------------------------

LOCATION = "llm_assets"
# The Overview page's timeline (ui-core/src/runs/useRunsForTimeline.tsx): runs are placed by their repositoryOrigin;
# a run without one is left out of it.
TIMELINE = """query CompletedRunTimelineQuery($completedFilter: RunsFilter!, $limit: Int!) {
  completed: runsOrError(filter: $completedFilter, limit: $limit) {
    ... on Runs { results { id pipelineName status tags { key value }
                            repositoryOrigin { repositoryName repositoryLocationName } } } } }"""
# The Jobs page's "Latest run" of a job (ui-core/src/nav/LatestRunTag.tsx): runs tagged with the job's repository.
LATEST_RUN = """query LatestRunTagQuery($runsFilter: RunsFilter) {
  pipelineRunsOrError(filter: $runsFilter, limit: 1) { ... on Runs { results { id status } } } }"""
# The Runs page (ui-core/src/runs/RunsFeedRow.tsx): a backfill is one row, its "Launched by" read from its tags.
RUNS_FEED = """query RunsFeed { runsFeedOrError(limit: 100, view: ROOTS) {
  ... on RunsFeedConnection { results { __typename id tags { key value } } } } }"""


def launched_by(tags: dict[str, str]) -> str:
    """What the UI's "Launched by" cell says for these tags (ui-core/src/runs/CreatedByTag.tsx): a sensor's run
    names the sensor even when it carries a `user` tag too (seen on the Runs page)."""
    if "dagster/sensor_name" in tags:
        return f"sensor {tags['dagster/sensor_name']}"
    if "user" in tags:
        return f"user {tags['user']}"
    return "Manually launched"


@pytest.fixture(scope="module")
def graphql(demos, tmp_path_factory):
    """The UI of the pool demo's home, as `make ui` serves it after `make demo`: a code server and the webserver on
    free loopback ports, on the demo's Dagster instance; -> a function querying the webserver's GraphQL."""
    from llm_assets.platform import deploy

    pool = demos["pool"]
    assert pool.result.returncode == 0, _report(pool)
    code_port, web_port = deploy.free_port(), deploy.free_port()
    env = {**pool.env, **deploy.dagster_env(pool.home / "dagster", code_port)}
    supervisor = deploy.start_services(tmp_path_factory.mktemp("ui"), deploy.dagster_services(
        code_port, web_port, daemon=False), env=env, timeout_s=600)

    def query(text: str, variables: dict | None = None) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{web_port}/graphql", method="POST",
                                         data=json.dumps({"query": text, "variables": variables or {}}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.loads(response.read())
        assert "errors" not in body, body["errors"]
        return body["data"]

    try:
        yield query
    finally:
        supervisor.stop()


def test_the_demo_runs_are_on_the_timeline_with_their_launcher(graphql):
    runs = graphql(TIMELINE, {"limit": 500, "completedFilter": {"statuses": ["SUCCESS", "FAILURE", "CANCELED"]}})[
        "completed"]["results"]
    assert runs and all(r["status"] == "SUCCESS" for r in runs), [(r["pipelineName"], r["status"]) for r in runs]
    assert {(r["repositoryOrigin"] or {}).get("repositoryLocationName") for r in runs} == {LOCATION}
    by_job: dict[str, list[dict]] = {}
    backfill_runs = []
    for run in runs:
        run["tags"] = {t["key"]: t["value"] for t in run["tags"]}
        if "llm_assets/stale_backfill" in run["tags"]:
            backfill_runs.append(run)
        else:
            by_job.setdefault(run["pipelineName"], []).append(run)
    # the raw-drop sensor's tick requested the lake run: one for the two crawls dropped together (their four shards
    # each), with its tick
    lake = by_job.pop("lake_job")
    assert len(lake) == 1 and all(launched_by(r["tags"]) == "sensor raw_drop_sensor" and "dagster/tick" in r["tags"]
                                  for r in lake), [r["tags"] for r in lake]
    # the CLI launched the curation and the tokenizer
    cli = by_job.pop("curation_job") + by_job.pop("release_job")
    assert len(cli) == 2 and all(re.fullmatch(r"user .+ \(llm-assets demo\)", launched_by(r["tags"])) for r in cli)
    assert not by_job, by_job
    # the stale backfill the rest, under their jobs, each run tagged with the backfill and the one forecast
    assert {"crawl_job", "curated_job", "release_job", "cost_job"} <= {r["pipelineName"] for r in backfill_runs} <= {
        "crawl_job", "curated_job", "release_job", "enrich_job", "cost_job"}
    assert len({r["tags"]["llm_assets/stale_backfill"] for r in backfill_runs}) == 1
    # requested by stale_backfill_sensor, with who launched the backfill (the `user` tag, under "View all tags")
    assert all(launched_by(r["tags"]) == "sensor stale_backfill_sensor" and
               re.fullmatch(r".+ \(llm-assets demo\)", r["tags"]["user"]) and
               [k for k in r["tags"] if k.startswith("llm_assets/forecast")] == ["llm_assets/forecast"]
               for r in backfill_runs)
    assert "Manually launched" not in {launched_by(r["tags"]) for r in runs}

    for job in ("lake_job", "curation_job", "crawl_job", "curated_job", "release_job"):  # the Jobs page's latest run
        latest = graphql(LATEST_RUN, {"runsFilter": {"pipelineName": job, "tags": [
            {"key": ".dagster/repository", "value": f"__repository__@{LOCATION}"}]}})
        assert latest["pipelineRunsOrError"]["results"][0]["status"] == "SUCCESS", job
    # and the runs feed holds runs alone: no backfill of Dagster's hidden asset job
    assert {e["__typename"] for e in graphql(RUNS_FEED)["runsFeedOrError"]["results"]} == {"Run"}


def test_a_demo_stopped_by_sigterm_stops_the_services_it_started(seaweed, tmp_path):
    """`timeout` sends SIGTERM: the demo unwinds as on Ctrl-C and stops the code server and the daemon it started
    (a `make demo-cluster` killed so once left them running for an hour, parented to init)."""
    import signal

    import psutil

    from llm_assets.core.lake import Lake, StoreConfig
    from llm_assets_tests.platform.test_instance_run_monitoring import wait_for

    bucket = f"demo-sigterm-{os.getpid()}"
    Lake(StoreConfig(endpoint=seaweed.endpoint, bucket=bucket, region="us-east-1",
                     credentials_file=str(seaweed.credentials_file))).s3.create_bucket(Bucket=bucket)
    env = clean_env(tmp_path / "home", LLM_ASSETS_S3_ENDPOINT=seaweed.endpoint, LLM_ASSETS_BUCKET=bucket,
                    AWS_ACCESS_KEY_ID=seaweed.access_key, AWS_SECRET_ACCESS_KEY=seaweed.secret_key)
    demo = subprocess.Popen([LLM_ASSETS, "demo"], cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        assert demo.stdout is not None
        for line in demo.stdout:  # the services are up once it launches its first runs
            if line.startswith("curation_job"):
                break
        started = psutil.Process(demo.pid).children(recursive=True)
        assert any("code-server" in " ".join(p.cmdline()) for p in started), [p.cmdline() for p in started]
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=300) == 128 + signal.SIGTERM
    finally:
        if demo.poll() is None:
            demo.kill()

    def alive(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    wait_for(lambda: not [p for p in started if alive(p)], "every process the demo started to end", 120)
