"""Opt-outs on a real store and Dagster instance, in a bucket of the module's own: a crawl of three shared WARCs
built and released by `llm-assets backfill --stale`; a robots.txt capture that bars one host to CCBot, dropped under
`robots/`, makes `llm-assets stale` plan exactly the partitions holding that host's documents, and `backfill --stale`
leaves them out of a new release whose card counts them and which supersedes the old; a response's own
`tdm-reservation: 1` header or `<meta>` tag does the same for its documents; an agent added to the settings plans only
the partitions its rules change; `trace` names the evidence.

The daemon's part of a backfill, the ticks of `stale_backfill_sensor`, is played here: each tick's runs are executed
in this process, as the daemon would launch them, until the backfill ends."""

import contextlib
import io
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from llm_assets import cli
from llm_assets.cli.demo import robots_warc
from llm_assets.core.keys import SUPERSEDED
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.core.optouts import OptOutSettings
from llm_assets.core.partition import read_manifest
from llm_assets.core.release import latest_release
from llm_assets.definitions import build_defs
from llm_assets.platform.backfills import Status, get_stale_backfill, stale_backfills
from llm_assets.platform.instance import get_instance
from llm_assets.settings import ReleaseSettings, Settings, load_settings
from llm_assets.tools import trace
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import object_store_on, point_at
from llm_assets_tests.core.test_dedup import name_in_shard
from llm_assets_tests.tools.test_takedown import docs_of

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
FILES = {"0000": "pywb__iana.warc.gz", "0001": "dolma__sample-0000.warc.gz", "0002": "dolma__sample-0001.warc.gz"}
BARRED = "www.iana.org"  # pywb__iana's pages: shard 0000 only
GPT_ONLY = "commoncrawl.org"  # dolma 0001's pages: shard 0002 only


@dataclass
class Env:
    lake: Lake
    store: object  # the Dagster resource on the module's bucket
    instance: dg.DagsterInstance  # the CLI's: DAGSTER_HOME
    settings: Settings
    crawl: str
    home: Path


@pytest.fixture(scope="module")
def env(seaweed, store_config, tmp_path_factory):
    """A bucket of the module's own (a backfill plans every crawl it finds), the CLI's instance, and the settings:
    the module's release, CCBot the one AI agent (one is added later), a run per partition. The crawl is dropped and
    built by `backfill --stale`."""
    home = tmp_path_factory.mktemp("opt-outs")
    config = StoreConfig(**{**store_config.__dict__, "bucket": f"opt-{uuid.uuid4().hex[:12]}"})
    Lake(config).s3.create_bucket(Bucket=config.bucket)
    crawl = f"OPT-{uuid.uuid4().hex[:8]}"
    settings = load_settings().model_copy(update={
        "release": ReleaseSettings(name="opt", crawls=(crawl,), context=256), "partitions_per_run": 1,
        "opt_outs": OptOutSettings(agents=("CCBot",))})
    with pytest.MonkeyPatch.context() as mp:
        point_at(mp, seaweed, home / "home")
        mp.setenv("LLM_ASSETS_BUCKET", config.bucket)
        mp.setenv("DAGSTER_HOME", str(home / "dagster"))
        instance = get_instance()
        try:
            env = Env(Lake(config), object_store_on(config, seaweed), instance, settings, crawl, home)
            for shard, name in FILES.items():
                env.lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, shard, 'r')}", shared("warc", name))
            instance.add_dynamic_partitions("crawl", [crawl])
            yield env, backfill_stale(env, settings)
        finally:
            instance.dispose()


def settings_file(env: Env, settings: Settings) -> str:
    path = env.home / f"settings-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False))
    return str(path)


def stale(env: Env, settings: Settings) -> dict[tuple[str, str], str]:
    """`llm-assets stale --json` under these settings."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["stale", "--json", "--settings", settings_file(env, settings)]) == 0
    return {(p["asset"], p["partition"]): p["cause"] for p in json.loads(out.getvalue())["partitions"]}


def backfill_stale(env: Env, settings: Settings) -> dict:
    """`llm-assets backfill --stale`, then the daemon's part: each tick of `stale_backfill_sensor` and its runs,
    until the backfill ends. -> the release's metadata, as the UI shows it."""
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["backfill", "--stale", "--settings", settings_file(env, settings)]) == 0
    (backfill,) = stale_backfills(env.instance, in_progress=True)
    defs = build_defs(settings)
    sensor = defs.resolve_sensor_def("stale_backfill_sensor")
    for _ in range(20):  # a tick per job: lake_job, crawl_job, curated_job, release_job, cost_job, then its end
        if not get_stale_backfill(env.instance, backfill.backfill_id).in_progress:
            break
        with dg.build_sensor_context(instance=env.instance, resources={"store": env.store}, definitions=defs) as ctx:
            result = sensor(ctx)
        requests = result.run_requests if isinstance(result, dg.SensorResult) else None
        for r in requests or []:
            assert defs.resolve_job_def(r.job_name).execute_in_process(
                instance=env.instance, tags=r.tags, partition_key=r.partition_key,
                asset_selection=r.asset_selection).success, r
    assert get_stale_backfill(env.instance, backfill.backfill_id).status == Status.SUCCEEDED
    event = env.instance.get_latest_materialization_event(dg.AssetKey("release"))
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def holding(env: Env, host: str) -> set[str]:
    return {f"{env.crawl}|{s}" for s in FILES if (d := docs_of(env.lake, "documents", env.crawl, s)).width
            and d.filter(pl.col("domain") == host).height}


def reserved_copies() -> tuple[bytes, list[str]]:
    """Two real HTML responses of dolma 0001, captured again with a reservation: one with `tdm-reservation: 1` in
    its HTTP headers, one with the TDMRep `<meta>` tag in its page. -> the WARC and their URLs."""
    with shared("warc", "dolma__sample-0001.warc.gz").open("rb") as f:
        pages = [(r.rec_headers.get_header("WARC-Target-URI"), list(r.http_headers.headers), r.content_stream().read())
                 for r in ArchiveIterator(f) if r.rec_type == "response"
                 and "html" in (r.http_headers.get_header("Content-Type") or "")][:2]
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    urls = []
    for (url, headers, body), how in zip(pages, ("header", "meta"), strict=True):
        headers = [(k, v) for k, v in headers if k.lower() not in ("content-length", "content-encoding",
                                                                    "transfer-encoding")]
        if how == "header":
            headers.append(("tdm-reservation", "1"))
        else:
            body = body.replace(b"<head>", b'<head><meta name="tdm-reservation" content="1">', 1)
            assert b"tdm-reservation" in body
        urls.append(f"{url}{'&' if '?' in url else '?'}capture={how}")
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(urls[-1], "response", payload=io.BytesIO(body),
                                                      http_headers=http))
    return buf.getvalue(), urls


def coverage(release: dict) -> dict[str, dict]:
    """The release's `opt_outs` table, by policy kind."""
    return {r.data["kind"]: r.data for r in release["opt_outs"].records}


def opted_out(env: Env, shard: str) -> pl.DataFrame:
    m = read_manifest(env.lake, "filtered", env.crawl, shard)
    return env.lake.scan(m.rejected_parts).filter(pl.col("filter") == "opt_out").select(
        "doc_id", "url", "domain", "reason", "detail").collect()


def test_robots_txt_tdm_headers_meta_tags_and_a_new_agent_each_rebuild_only_what_they_touch(env):
    env, first = env
    lake, settings, crawl = env.lake, env.settings, env.crawl
    assert stale(env, settings) == {}
    assert {k: r["documents"] for k, r in coverage(first).items()} == dict.fromkeys(
        ("robots_txt", "tdm_reservation", "noai", "ai_txt"), 0)
    barred = holding(env, BARRED)
    assert barred == {f"{crawl}|0000"}

    # 1. a robots.txt capture bars www.iana.org to CCBot; commoncrawl.org's bars GPTBot only, not yet an agent here
    key = f"robots/{crawl}/robots-1.warc.gz"
    lake.put_bytes(key, robots_warc({BARRED: "User-agent: CCBot\nDisallow: /\n",
                                     GPT_ONLY: "User-agent: GPTBot\nDisallow: /\n"}, "2026-11-01T00:00:00Z"))
    # a file under robots/ that is no WARC, and a damaged one: each named, neither stops anything
    lake.put_bytes(f"robots/{crawl}/not-a-warc.txt", b"User-agent: *\nDisallow: /\n")
    damaged = robots_warc({"ia300142.us.archive.org": "User-agent: *\nDisallow: /\n"}, "2026-11-01T00:00:00Z")
    lake.put_bytes(f"robots/{crawl}/damaged.warc.gz", damaged[: len(damaged) // 2])
    planned = stale(env, settings)
    assert {p for a, p in planned if a == "filtered"} == barred
    assert all("opt_outs" in planned[("filtered", p)] for p in barred)
    assert not any(a in ("raw_files", "documents") for a, _ in planned)
    release = backfill_stale(env, settings)
    assert stale(env, settings) == {}
    removed = opted_out(env, "0000")
    in_documents = docs_of(lake, "documents", crawl, "0000").filter(pl.col("domain") == BARRED).height
    assert removed.height == in_documents > 0 and set(removed["reason"]) == {"robots_txt"}
    evidence = json.loads(removed["detail"][0])
    assert evidence["rule"] == "line 2: Disallow: /" and evidence["agent"] == "CCBot"
    assert evidence["capture"].startswith(key + "@") and evidence["fetched"] == "2026-11-01T00:00:00Z"
    assert docs_of(lake, "deduplicated", crawl, "0000").filter(pl.col("domain") == BARRED).is_empty()
    table = coverage(release)
    assert (table["robots_txt"]["documents"], table["robots_txt"]["hosts"]) == (in_documents, 1)
    assert f"| `robots_txt` | {in_documents:,} | 1 | 0 | 2026-11-01 |" in release["dataset_card"]
    assert release["supersedes"] == first["version"]
    marker = lake.get_json(latest_release(lake, "opt").replace(release["version"], first["version"]) + SUPERSEDED)
    assert marker["opt_outs"] == [f"robots_txt:{BARRED}"]
    filtered = env.instance.get_latest_materialization_event(dg.AssetKey("filtered")).asset_materialization
    problems = filtered.metadata["opt_out_evidence_problems"].value
    assert any(p.startswith(f"robots/{crawl}/not-a-warc.txt: not a readable WARC") for p in problems), problems
    assert any(p.startswith(f"robots/{crawl}/damaged.warc.gz: ") for p in problems), problems

    # `trace` prints the evidence: which capture, which rule line, when
    path = trace.trace(lake, settings, [crawl], removed["url"][0])
    assert [(s.stage, s.outcome) for s in path.steps] == [("documents", "kept"), ("filtered", "dropped")]
    stop = path.stops()[0].facts
    assert stop["filter"] == "opt_out" and json.loads(stop["detail"])["rule"] == "line 2: Disallow: /"

    # 2. a page that reserves itself by its header, another by its <meta> tag: only their shard is planned
    data, urls = reserved_copies()
    lake.put_bytes(f"raw/{crawl}/{name_in_shard(crawl, '0002', 'reserved')}", data)
    planned = stale(env, settings)
    assert {p for a, p in planned if a == "filtered"} == {f"{crawl}|0002"}
    release = backfill_stale(env, settings)
    removed = opted_out(env, "0002")
    assert sorted(removed.select("url", "reason").rows()) == sorted((u, "tdm_reservation") for u in urls)
    sources = {u: json.loads(d)["source"] for u, d in removed.select("url", "detail").rows()}
    assert sources == {urls[0]: "header", urls[1]: "meta"}
    table = coverage(release)
    assert table["tdm_reservation"]["documents"] == 2 and table["robots_txt"]["documents"] == in_documents
    assert "| `tdm_reservation` | 2 |" in release["dataset_card"]

    # 3. GPTBot joins the agents: only the partitions of the host whose robots.txt names it are planned
    wider = settings.model_copy(update={"opt_outs": OptOutSettings(agents=("CCBot", "GPTBot"))})
    planned = stale(env, wider)
    assert {p for a, p in planned if a == "filtered"} == holding(env, GPT_ONLY) == {f"{crawl}|0002"}
