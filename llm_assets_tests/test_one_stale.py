"""One notion of stale: what the Dagster UI marks stale or missing for a partition (a real `dagster-webserver` on the
test instance, asked through its GraphQL: `staleStatusByPartition`, `staleCausesByPartition`) and what
`llm-assets stale` plans agree, on a lake of one crawl and two WARC files in two shards built by executing the
planner's own plans (as `backfill --stale` does): before the build, after it, after a changed threshold, after a
takedown, after a changed threshold of one language (German, held by one shard) and after a new raw file, each time
before and after the rebuild.

The two differ in one way only, by design, and the comparison says where: Dagster marks a partition for what changed
directly under it (its code version, or the data version of an input, the observed sources `raw_drop` and
`curation_scope` included), while the planner also plans what rebuilding it will change (cause "upstream data
changed (X is rebuilt)"), which Dagster marks once X is rebuilt. Such a follower is planned because of a planned
partition it reads, and if Dagster marks it at all, it is missing. Assets these jobs do not build (the release, the
tokenizer, the enrichment, the curation assets) are left out; with two shards both holding files there is no empty
shard (which Dagster calls missing and the planner does not plan: the raw-drop sensor builds a new crawl's empty
shards, so the demo has none).
"""

import json
import os
import subprocess
import sys
import urllib.request
import uuid
import warnings
from datetime import date

import dagster as dg
import pytest
import yaml

from llm_assets.cli.demo import write_changed_settings
from llm_assets.core.filtered import languages_held
from llm_assets.core.partition import read_manifest
from llm_assets.core.takedowns import TakedownRequest
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import PROJECT_ROOT, load_settings
from llm_assets.stages.filtered import SPEC as FILTERED
from llm_assets.tools import takedown
from llm_assets.tools.stale import LANGUAGES, stale_partitions
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import built, object_store_on, point_at
from llm_assets_tests.core.test_dedup import name_in_shard
from llm_assets_tests.tools.test_stale import udhr_jsonl

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
SHARDS = ("0000", "0001")
JOBS = {"lake_job": ("raw_files", "documents", "image_text_pairs", "filtered", "signatures"),
        "crawl_job": ("duplicate_clusters", "crawl_stats"), "curated_job": ("deduplicated", "tokenized")}
JOB_OF = {asset: job for job, assets in JOBS.items() for asset in assets}
CRAWL_LEVEL = {"duplicate_clusters", "crawl_stats"}
FOLLOWS = "is rebuilt)"  # the cause of a partition planned because a partition it reads is


@pytest.fixture(scope="module")
def deployment(seaweed, store_config, tmp_path_factory):
    """The test store and a Dagster instance; the settings (two shards) in a file the webserver reads too."""
    from llm_assets.dagster.jobs import jobs_of
    from resources import LakeIOManager

    home = tmp_path_factory.mktemp("one-stale")
    with pytest.MonkeyPatch.context() as mp:
        point_at(mp, seaweed, home / "home")
        settings_file = home / "settings.yaml"
        data = yaml.safe_load((PROJECT_ROOT / "llm_assets" / "settings.yaml").read_text())
        settings_file.write_text(yaml.safe_dump({**data, "shards": len(SHARDS)}, sort_keys=False))
        mp.setenv("LLM_ASSETS_SETTINGS", str(settings_file))
        (home / "dagster").mkdir()
        with dg.instance_for_test(temp_dir=str(home / "dagster")) as instance:
            store = object_store_on(store_config, seaweed)
            resources = {"store": store, "lake_io_manager": LakeIOManager(store=store)}

            def defs():
                return dg.Definitions(assets=built(*JOB_OF, settings=load_settings()),
                                      jobs=jobs_of(JOB_OF), resources=resources)

            yield instance, store, defs, resources, settings_file, home
        lake = store.lake()
        lake.delete([o.key for o in lake.list("takedowns/")])


@pytest.fixture(scope="module")
def webserver(deployment):
    from llm_assets.platform.embedded_store import free_ports
    from llm_assets_support.browser import _poll

    instance, *_, home = deployment
    (port,) = free_ports(1)
    server = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "dagster-webserver"), "-h", "127.0.0.1",
                               "-p", str(port), "-m", "llm_assets.definitions"],
                              env={**os.environ, "DAGSTER_HOME": instance.root_directory},
                              stdout=open(home / "webserver.log", "wb"), stderr=subprocess.STDOUT)
    try:
        _poll(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5), timeout=180)
        yield f"http://127.0.0.1:{port}/graphql"
    finally:
        server.terminate()
        server.wait(timeout=60)


def graphql(url: str, query: str) -> dict:
    request = urllib.request.Request(url, json.dumps({"query": query}).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        body = json.load(response)
    assert not body.get("errors"), body["errors"]
    return body["data"]


def partitions_of(asset: str, crawl: str) -> list[str]:
    return [crawl] if asset in CRAWL_LEVEL else [f"{crawl}|{s}" for s in SHARDS]


def marked(url: str, crawl: str) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """(asset, partition) -> (STALE or MISSING, its root causes: "<asset> <partition> <reason>"), for what the UI
    marks."""
    fields = "\n".join(
        f'{asset}: assetNodes(assetKeys: [{{path: ["{asset}"]}}]) {{ '
        f'staleStatusByPartition(partitions: {json.dumps(partitions_of(asset, crawl))}) '
        f'staleCausesByPartition(partitions: {json.dumps(partitions_of(asset, crawl))}) '
        '{ key { path } partitionKey reason } }' for asset in JOB_OF)
    data = graphql(url, "{ " + fields + " }")
    out = {}
    for asset in JOB_OF:
        (node,) = data[asset]
        for p, status, causes in zip(partitions_of(asset, crawl), node["staleStatusByPartition"],
                                     node["staleCausesByPartition"], strict=True):
            if status != "FRESH":
                out[(asset, p)] = (status, [f"{'/'.join(c['key']['path'])} {c['partitionKey'] or ''} {c['reason']}"
                                            for c in causes])
    return out


def planned(instance, store, crawl: str) -> dict[tuple[str, str], str]:
    """What `llm-assets stale` plans for this crawl's partitions of these jobs' assets (it also reports the observed
    sources' versions it read, which the UI's marks then follow)."""
    return {(p.asset, p.partition): p.cause for p in stale_partitions(instance, store.lake(), load_settings())
            if p.asset in JOB_OF and p.partition.split("|")[0] == crawl}


def agree(url: str, instance, store, crawl: str) -> dict[tuple[str, str], str]:
    """The UI's marks and the plan agree; -> the plan."""
    plan = planned(instance, store, crawl)
    marks = marked(url, crawl)
    roots = {k for k, cause in plan.items() if not cause.endswith(FOLLOWS)}
    stale = {k for k, (status, _) in marks.items() if status == "STALE"}
    missing = {k for k, (status, _) in marks.items() if status == "MISSING"}
    why = f"\nplanned: {json.dumps(sorted(map(list, plan.items())), indent=1)}\nmarked: {marks}"
    # every partition the planner plans for what changed under it is marked, stale or, never built, missing
    assert roots <= stale | missing, why
    assert {k for k in roots if plan[k] == "missing"} == {k for k in roots & missing}, why
    # every partition the UI marks stale is planned for that reason: not only as a follower
    assert stale <= roots, why
    # every partition the UI marks missing is planned (a missing partition's inputs are missing too: a follower)
    assert missing <= set(plan), why
    # a follower follows a planned partition of what it reads: the UI marks it once that one is rebuilt
    for (asset, p), cause in plan.items():
        if cause.endswith(FOLLOWS):
            upstream = cause.rsplit("(", 1)[1].removesuffix(FOLLOWS).strip()
            assert any(a == upstream and q.split("|")[0] == p.split("|")[0] for a, q in plan), (asset, p, cause)
    return plan


def rebuild(defs, instance, plan: dict[tuple[str, str], str]) -> None:
    """What `backfill --stale` runs: exactly the planned asset partitions, a job's assets per partition in one run."""
    runs: dict[tuple[int, str, str], list[str]] = {}
    for asset, p in plan:
        job = JOB_OF[asset]
        runs.setdefault((list(JOBS).index(job), p, job), []).append(asset)
    for (_, p, job), assets in sorted(runs.items()):
        key = crawl_shard_key(*p.split("|")) if "|" in p else p
        result = defs.resolve_job_def(job).execute_in_process(
            partition_key=key, instance=instance, asset_selection=[dg.AssetKey(a) for a in assets])
        assert result.success, (job, p)


def reload_code(url: str, filtered_version: str) -> None:
    """The webserver reloads its code location (the settings file changed) and shows the new code versions."""
    from llm_assets_support.browser import _poll

    graphql(url, "mutation { reloadWorkspace { __typename } }")

    def shown():
        node = graphql(url, '{ assetNodes(assetKeys: [{path: ["filtered"]}]) { opVersion } }')["assetNodes"]
        if not node or node[0]["opVersion"] != filtered_version:
            raise OSError("not reloaded yet")

    _poll(shown, timeout=180)


def test_the_ui_marks_stale_exactly_what_the_stale_planner_plans(deployment, webserver):
    instance, store, defs, resources, settings_file, home = deployment
    lake, crawl = store.lake(), f"ONE-{uuid.uuid4().hex[:8]}"
    for shard, name in zip(SHARDS, ("dolma__sample-0000.warc.gz", "dolma__sample-0001.warc.gz"), strict=True):
        lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, shard, 'r')}", shared("warc", name))
    for shard, code in zip(SHARDS, ("deu", "fra"), strict=True):  # German documents in shard 0000, French ones in 0001
        lake.put_bytes(f"raw/{crawl}/{name_in_shard(crawl, shard, code, '.jsonl')}", udhr_jsonl(code))
    instance.add_dynamic_partitions("crawl", [crawl])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dg.materialize(built("takedowns"), instance=instance, resources=resources).success

    # a new crawl: every partition missing for both
    plan = agree(webserver, instance, store, crawl)
    assert {("raw_files", f"{crawl}|{s}") for s in SHARDS} <= set(plan)
    rebuild(defs(), instance, plan)
    assert agree(webserver, instance, store, crawl) == {}

    # a changed threshold: filtered is stale by its code version in both, what follows is the planner's alone
    changed = write_changed_settings(settings_file, home / "changed")
    settings_file.write_text(changed.read_text())
    reload_code(webserver, FILTERED.version(load_settings()))
    plan = agree(webserver, instance, store, crawl)
    assert {k for k, cause in plan.items() if not cause.endswith(FOLLOWS)} == {
        ("filtered", f"{crawl}|{s}") for s in SHARDS}
    rebuild(defs(), instance, plan)
    assert agree(webserver, instance, store, crawl) == {}

    # a takedown of one document of shard 0000, with the takedowns asset materialized again (as the demo does):
    # only the filtered partition holding it is stale, in both; the other shard's stays fresh
    built0 = read_manifest(lake, "filtered", crawl, "0000")
    url = lake.scan(built0.parts).select("url").head(1).collect()["url"][0]
    takedown.add(lake, TakedownRequest(url=url, reason="test", requested_by="test", date=date.today()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dg.materialize(built("takedowns"), instance=instance, resources=resources).success
    plan = agree(webserver, instance, store, crawl)
    assert {k for k, cause in plan.items() if not cause.endswith(FOLLOWS)} == {("filtered", f"{crawl}|0000")}
    assert marked(webserver, crawl)[("filtered", f"{crawl}|0000")] == (
        "STALE", [f"curation_scope {crawl}|0000 has a new data version"])
    rebuild(defs(), instance, plan)
    assert agree(webserver, instance, store, crawl) == {}
    assert url not in lake.scan(read_manifest(lake, "filtered", crawl, "0000").parts).select("url").collect()["url"]

    # a threshold of one language (`filtered.overrides`): the code version is the same, and only the filtered
    # partition that holds German documents is stale, in both (by `curation_scope`)
    assert [s for s in SHARDS if "de" in languages_held(read_manifest(lake, "filtered", crawl, s).counts())] == ["0000"]
    data = yaml.safe_load(settings_file.read_text())
    data["filtered"]["overrides"] = {"de": {"gopher_quality.min_stop_words": 3}}
    settings_file.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    reload_code(webserver, FILTERED.version(load_settings()))
    plan = agree(webserver, instance, store, crawl)
    assert {k: cause for k, cause in plan.items() if not cause.endswith(FOLLOWS)} == {
        ("filtered", f"{crawl}|0000"): f"{LANGUAGES} (de)"}
    assert marked(webserver, crawl)[("filtered", f"{crawl}|0000")] == (
        "STALE", [f"curation_scope {crawl}|0000 has a new data version"])
    rebuild(defs(), instance, plan)
    assert agree(webserver, instance, store, crawl) == {}

    # a new raw file in shard 0001: its raw_files partition is stale in both (by `raw_drop`), what follows is the
    # planner's; an identical re-upload changes nothing for either
    new = f"raw/{crawl}/{name_in_shard(crawl, '0001', 'new')}"
    lake.put_file(new, shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"))
    plan = agree(webserver, instance, store, crawl)
    assert {k for k, cause in plan.items() if not cause.endswith(FOLLOWS)} == {("raw_files", f"{crawl}|0001")}
    assert marked(webserver, crawl)[("raw_files", f"{crawl}|0001")][1] == [
        f"raw_drop {crawl}|0001 has a new data version"]
    rebuild(defs(), instance, plan)
    lake.put_bytes(new, lake.get_bytes(new))  # the same bytes again: same ETag and size
    assert agree(webserver, instance, store, crawl) == {}


def test_a_version_is_reported_once_and_an_anchor_only_while_its_source_has_no_observation(instance):
    """What `new_observations` reports: a version Dagster does not hold yet, once; an anchor (a partition planned
    for another cause) only while the source has no observation at all, so that a lake built before its observed
    sources existed has one to compare later observations with once it is rebuilt."""
    from llm_assets.platform.backfills import last_observed, new_observations
    from llm_assets.tools.stale import SourceVersion

    versions = [SourceVersion("raw_drop", "C|0000", "a", anchor=True), SourceVersion("curation_scope", "C|0001", "b")]
    first = new_observations(instance, versions)
    observed = [(e.asset_key.path[-1], e.partition) for e in first]
    assert observed == [("raw_drop", "C|0000"), ("curation_scope", "C|0001")]
    for event in first:
        instance.report_runless_asset_event(event)
    assert last_observed(instance, "curation_scope", "C|0001") == "b"
    assert new_observations(instance, versions) == []
    assert new_observations(instance, [SourceVersion("raw_drop", "C|0001", "c", anchor=True)]) == []  # anchored
    changed = new_observations(instance, [SourceVersion("curation_scope", "C|0001", "d")])
    assert [e.tags for e in changed] == [{"dagster/data_version": "d"}]
