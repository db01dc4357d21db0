"""Takedowns and decontamination on a real store and Dagster instance: a two-crawl lake built and released; a
takedown by URL, by domain and by doc id plans exactly the partitions that hold them (and the release), the rebuild
removes them into `rejected/` with the request, a new release lacks them and the old one is marked superseded;
an eval set plans exactly the partitions whose documents it quotes (in their final text or as extracted), and the
rebuild drops them as contaminated."""

import json
import uuid
import warnings

import dagster as dg
import polars as pl
import pytest

from llm_assets.core.decontamination import CONTAMINATED
from llm_assets.core.keys import SUPERSEDED
from llm_assets.core.partition import read_manifest
from llm_assets.core.release import latest_release
from llm_assets.core.takedowns import TakedownRequest
from llm_assets.loader import ReleaseLoader, SupersededRelease, SupersededReleaseWarning
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import ReleaseSettings, load_settings
from llm_assets.stages import SPECS, code_versions
from llm_assets.tools import takedown
from llm_assets.tools.stale import plan_stale
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import built, object_store_on, point_at
from llm_assets_tests.core.test_dedup import lake_defs, name_in_shard, run

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
SHARDS = ("0000", "0001")


@pytest.fixture(scope="module")
def store_env(seaweed, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        point_at(mp, seaweed, tmp_path_factory.mktemp("takedowns") / "home")
        yield seaweed


@pytest.fixture(scope="module")
def object_store(store_config, seaweed):
    return object_store_on(store_config, seaweed)


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    with dg.instance_for_test(temp_dir=str(tmp_path_factory.mktemp("dagster"))) as inst:
        yield inst


@pytest.fixture(scope="module")
def settings():
    tag = uuid.uuid4().hex[:8]
    crawls = (f"TD-A-{tag}", f"TD-B-{tag}")
    return load_settings().model_copy(update={"release": ReleaseSettings(name=f"td-{tag}", crawls=crawls,
                                                                         context=256)})


@pytest.fixture(scope="module")
def lake(store_env, object_store, instance, settings):
    """Crawl A: dolma 0000 in shard 0000, dolma 0001 in shard 0001. Crawl B: dolma 0000 in shard 0001 only. Built,
    and released. The bucket's takedowns/ and evals/ are emptied after the module: other tests share the bucket."""
    lake = object_store.lake()
    a, b = settings.release.crawls
    files = {(a, "0000"): "dolma__sample-0000.warc.gz", (a, "0001"): "dolma__sample-0001.warc.gz",
             (b, "0001"): "dolma__sample-0000.warc.gz"}
    for (crawl, shard), name in files.items():
        lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, shard, 'r')}", shared("warc", name))
    instance.add_dynamic_partitions("crawl", [a, b])
    rebuild(object_store, instance, settings, {(c, s) for c, s in files}, {a, b})
    yield lake
    lake.delete([o.key for prefix in ("takedowns/", "evals/") for o in lake.list(prefix)])


def rebuild(object_store, instance, settings, partitions, crawls):
    defs = lake_defs(object_store, settings)
    for crawl, shard in sorted(partitions):
        run(defs, "lake_job", crawl_shard_key(crawl, shard), instance)
    for crawl in sorted(crawls):
        run(defs, "crawl_job", crawl, instance)
    for crawl, shard in sorted(partitions):
        run(defs, "curated_job", crawl_shard_key(crawl, shard), instance)
    return release(object_store, instance, settings)


def release(object_store, instance, settings) -> dict:
    from resources import LakeIOManager

    *upstream, asset = built("raw_files", "documents", "filtered", "signatures", "duplicate_clusters", "deduplicated",
                             "tokenized", "release", settings=settings)
    result = dg.materialize([*upstream, asset], selection=[asset], instance=instance,
                            resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)})
    assert result.success
    (event,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def plan(instance, lake, settings) -> dict[tuple[str, str], str]:
    """The plan over this module's two crawls (other tests' crawls share the bucket)."""
    planned = plan_stale(lake, settings, list(settings.release.crawls), code_versions(settings), SPECS)
    return {(p.asset, p.partition): p.cause for p in planned
            if p.asset not in ("enriched", "cost")}  # not built here


def docs_of(lake, asset, crawl, shard) -> pl.DataFrame:
    m = read_manifest(lake, asset, crawl, shard)
    return lake.scan(m.parts).select("doc_id", "url", "domain").collect() if m and m.parts else pl.DataFrame()


def holding(lake, settings, match) -> set[str]:
    """The partitions whose documents stage holds a document `match` (an expression) selects."""
    return {f"{c}|{s}" for c in settings.release.crawls for s in SHARDS
            if (d := docs_of(lake, "documents", c, s)).width and d.filter(match).height}


def test_a_takedown_by_url_domain_and_doc_id_reaches_a_new_release_and_supersedes_the_old(
        lake, object_store, instance, settings, store_config):
    a, b = settings.release.crawls
    old = latest_release(lake, settings.release.name)
    assert plan(instance, lake, settings) == {}

    curated_a1 = docs_of(lake, "deduplicated", a, "0001")
    curated_b1 = docs_of(lake, "deduplicated", b, "0001")
    url = curated_a1["url"][0]  # from dolma 0001: in A|0001 only
    doc_id = curated_b1["doc_id"][0]  # the WARC record's id: crawl A holds the same record in shard 0000
    domains = curated_b1.group_by("domain").len().filter(pl.col("len") == 1)["domain"].sort()
    domain = next(d for d in domains if d.count(".") >= 1 and not any(h.endswith("." + d) or h == d for h in
                                                                          curated_a1["domain"]))
    requests = [TakedownRequest(url=url, reason="dmca", requested_by="a site owner", date="2026-11-20"),
                TakedownRequest(domain=domain, reason="robots opt-out", requested_by="ops", date="2026-11-21"),
                TakedownRequest(doc_id=doc_id, reason="gdpr erasure", requested_by="legal", date="2026-11-22")]
    for r in requests:
        takedown.add(lake, r)

    # the URL is a page of dolma 0001 (A|0001 only); the doc id and the domain's pages are records of dolma 0000
    assert holding(lake, settings, pl.col("url") == url) == {f"{a}|0001"}
    assert holding(lake, settings, pl.col("doc_id") == doc_id) == {f"{a}|0000", f"{b}|0001"}
    assert holding(lake, settings, (pl.col("domain") == domain) | pl.col("domain").str.ends_with("." + domain)) == {
        f"{a}|0000", f"{b}|0001"}
    expected = {f"{a}|0000", f"{a}|0001", f"{b}|0001"}
    planned = plan(instance, lake, settings)
    filtered = {p for (asset, p) in planned if asset == "filtered"}
    assert filtered == expected
    assert all("takedowns" in planned[("filtered", p)] for p in filtered)
    assert not any(asset in ("raw_files", "documents", "image_text_pairs") for asset, _ in planned)
    for asset in ("signatures", "deduplicated", "tokenized"):
        assert {p for (x, p) in planned if x == asset} == expected
    assert ("release", "") in planned
    statuses = {s.target: s for s in takedown.status(lake, settings, list(settings.release.crawls))}
    assert all(s.state == "pending" for s in statuses.values())

    new = rebuild(object_store, instance, settings, {tuple(p.split("|")) for p in expected},
                  {p.split("|")[0] for p in expected})
    assert plan(instance, lake, settings) == {}
    assert new["version"] != old.rstrip("/").rsplit("/", 1)[-1]
    assert new["supersedes"] == old.rstrip("/").rsplit("/", 1)[-1]

    # gone from every curated stage, kept in rejected/ with the request that removed it
    for crawl, shard in (p.split("|") for p in expected):
        kept = docs_of(lake, "deduplicated", crawl, shard)
        assert kept.filter((pl.col("url") == url) | (pl.col("doc_id") == doc_id) | (pl.col("domain") == domain)
                           ).is_empty()
    m = read_manifest(lake, "filtered", b, "0001")
    rejected = lake.scan(m.rejected_parts).filter(pl.col("reason") == "takedown").collect()
    assert doc_id in rejected["doc_id"].to_list()
    details = [json.loads(d) for d in rejected["detail"]]
    assert {"doc_id": doc_id, "reason": "gdpr erasure", "requested_by": "legal", "date": "2026-11-22"} in details
    assert any(d.get("domain") == domain for d in details)

    # the new release lacks them; the old one is superseded and the loader says so
    new_prefix = latest_release(lake, settings.release.name)
    manifest = lake.get_json(new_prefix + "manifest.json")
    assert set(manifest["takedowns"]) == {r.target for r in requests}
    marker = lake.get_json(old + SUPERSEDED)
    assert marker["superseded_by"] == manifest["version"] and set(marker["takedowns"]) == set(manifest["takedowns"])
    options = store_config.boto_options()
    with pytest.warns(SupersededReleaseWarning, match="superseded"):
        ReleaseLoader(f"s3://{store_config.bucket}/{old}", storage_options=options)
    with pytest.raises(SupersededRelease, match=manifest["version"]):
        ReleaseLoader(f"s3://{store_config.bucket}/{old}", storage_options=options, on_superseded="refuse")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ReleaseLoader(f"s3://{store_config.bucket}/{new_prefix}", storage_options=options)

    statuses = {s.target: s for s in takedown.status(lake, settings, list(settings.release.crawls))}
    for r in requests:
        s = statuses[r.target]
        assert s.state == "removed" and not s.pending and s.removed_at
        assert s.first_release_without == manifest["version"] and s.superseded == [marker["version"]]
    assert set(statuses[f"url={url}"].removed) == holding(lake, settings, pl.col("url") == url)

    # one URL's path: kept by documents, removed by the takedown in filtered, held only by the superseded release
    from llm_assets.tools import trace

    path = trace.trace(lake, settings, [a], url)
    assert [(s.stage, s.outcome) for s in path.steps] == [("documents", "kept"), ("filtered", "dropped")]
    assert path.stops()[0].facts["filter"] == "takedown" and json.loads(path.stops()[0].facts["detail"])["url"] == url
    assert path.releases == [marker["version"]]
    assert path.superseded == {marker["version"]: manifest["version"]}
    assert (f"releases holding it: {marker['version']} (superseded by {manifest['version']})"
            in trace.format_trace(path))


def test_an_eval_set_plans_exactly_the_partitions_that_quote_it_and_the_rebuild_drops_them(
        lake, object_store, instance, settings):
    a, b = settings.release.crawls
    assert plan(instance, lake, settings) == {}
    lake.put_file("evals/gsm8k_test.jsonl", shared("evals", "openai-grade-school-math__gsm8k_test.jsonl"))
    assert plan(instance, lake, settings) == {}  # real web pages do not quote GSM8K: nothing to rebuild

    text = lake.scan(read_manifest(lake, "deduplicated", a, "0001").parts).select("doc_id", "text").collect()
    quoted = text.filter(pl.col("text").str.split(" ").list.len() > 200).row(0, named=True)
    passage = " ".join(quoted["text"].split()[40:120])
    lake.put_bytes("evals/planted.jsonl", (json.dumps({"question": passage, "answer": "42"}) + "\n").encode())
    planned = plan(instance, lake, settings)
    assert {p for (asset, p) in planned if asset == "filtered"} == {f"{a}|0001"}
    assert "evals" in planned[("filtered", f"{a}|0001")]

    rebuild(object_store, instance, settings, {(a, "0001")}, {a})
    assert plan(instance, lake, settings) == {}
    m = read_manifest(lake, "filtered", a, "0001")
    rejected = lake.scan(m.rejected_parts).filter(pl.col("reason") == CONTAMINATED).collect()
    assert rejected["doc_id"].to_list() == [quoted["doc_id"]]
    match = json.loads(rejected["detail"][0])
    assert match["benchmark"] == "planted" and match["ngrams"] >= 80 - 13 + 1
    assert passage.split()[0].lower() in rejected["text"][0][match["match_start"]:match["match_end"]].lower()


def test_an_eval_set_quoting_what_c4_removed_is_found_in_the_text_as_extracted(lake, object_store, instance,
                                                                                settings):
    """A passage of a kept document's extracted text around a short line C4's line cleanup deleted: every 13-gram of
    it holds that line's words, so none is in the final text. The planner still plans the partition, and the rebuild
    drops the document with the match in its text as extracted."""
    import regex

    from llm_assets.core.decontamination import build_index, contamination

    a, b = settings.release.crawls
    assert plan(instance, lake, settings) == {}
    extracted = lake.scan(read_manifest(lake, "documents", a, "0000").parts).select("doc_id", "text").collect()
    final = lake.scan(read_manifest(lake, "filtered", a, "0000").parts).select("doc_id", "text").collect()
    word = regex.compile(r"[^\s\pP\pS]+")
    found = None
    for doc_id, text, final_text in extracted.join(final, on="doc_id", suffix="_final").iter_rows():
        lines = text.split("\n")
        for i, line in enumerate(lines):
            removed = word.findall(line)
            if removed and len(line.split()) < 3 and len(removed) < 3:  # a line C4 deletes
                before = word.findall("\n".join(lines[:i]))[-6:]
                after = word.findall("\n".join(lines[i + 1:]))[:6]
                passage = " ".join(before + removed + after)
                index = build_index({"x": [passage]})
                if len(before) == len(after) == 6 and not contamination(index, pl.Series([final_text]))[
                        "contaminated_ngrams"][0]:
                    found = doc_id, passage
                    break
        if found:
            break
    assert found is not None, "no kept document lost a short line to C4"
    doc_id, passage = found
    lake.put_bytes("evals/c4_removed.jsonl", (json.dumps({"text": passage}) + "\n").encode())
    planned = plan(instance, lake, settings)
    stale = {p for (asset, p) in planned if asset == "filtered"}
    assert stale == {f"{a}|0000", f"{b}|0001"}  # crawl B's shard 0001 holds the same WARC file
    assert all("evals" in planned[("filtered", p)] for p in stale)

    rebuild(object_store, instance, settings, {(a, "0000"), (b, "0001")}, {a, b})
    assert plan(instance, lake, settings) == {}
    m = read_manifest(lake, "filtered", a, "0000")
    rejected = lake.scan(m.rejected_parts).filter(pl.col("reason") == CONTAMINATED).collect()
    match = json.loads(rejected.filter(pl.col("doc_id") == doc_id)["detail"][0])
    assert match["benchmark"] == "c4_removed" and match["text"] == "extracted"
    assert passage.split()[0] in extracted.filter(pl.col("doc_id") == doc_id)["text"][0][match["match_start"]:
                                                                                         match["match_end"]]


def test_trace_why_and_show_rejected_find_one_document_through_the_id_index(lake, settings, capsys):
    from llm_assets import cli
    from llm_assets.tools import trace

    a, _ = settings.release.crawls
    m = read_manifest(lake, "filtered", a, "0001")
    dropped = lake.scan(m.rejected_parts).filter(pl.col("filter") == "gopher_quality").collect().row(0, named=True)
    found = trace.trace(lake, settings, [a], dropped["url"])
    assert [(s.stage, s.outcome) for s in found.steps] == [("documents", "kept"), ("filtered", "dropped")]
    assert found.stops()[0].facts["reason"] == dropped["reason"] and not found.releases
    said = trace.why(trace.trace(lake, settings, [a], dropped["doc_id"]), settings)
    assert f"gopher_quality/{dropped['reason']}" in said and "min_doc_words=50 (chain)" in said
    rule = json.loads(dropped["detail"])  # the value Gopher measured and the threshold it failed
    assert isinstance(rule["measured"], (int, float)) and rule["threshold"].split()[1] in ("<", ">")
    assert f"measured: {json.dumps(rule['measured'])} (dropped when {rule['threshold']})" in said
    assert cli.main(["why", dropped["doc_id"], "--crawl", a, "--json"]) == 0
    stop = json.loads(capsys.readouterr().out)["stops"][0]
    assert (stop["filter"], stop["reason"], stop["measured"], stop["threshold"]) == (
        "gopher_quality", dropped["reason"], rule["measured"], rule["threshold"])

    kept = read_manifest(lake, "tokenized", a, "0001")
    doc_id = lake.scan(kept.parts).select("doc_id").head(1).collect().item()
    reached = trace.trace(lake, settings, [a], doc_id)
    assert reached.stops() == [] and [s.stage for s in reached.steps] == ["documents", "filtered", "deduplicated",
                                                                          "tokenized"]
    assert latest_release(lake, settings.release.name).rstrip("/").rsplit("/", 1)[-1] in reached.releases

    assert cli.main(["show", "rejected", "--stage", "filtered", "--crawl", a, "--reason", dropped["reason"],
                     "--json", "--limit", "100"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (rows and {r["reason"] for r in rows} == {dropped["reason"]}
            and dropped["doc_id"] in {r["doc_id"] for r in rows})
    assert cli.main(["show", "filtered", "--crawl", a, "--where", "language_score >= 0.9", "--json"]) == 0
    assert all(json.loads(line)["language_score"] >= 0.9 for line in capsys.readouterr().out.splitlines())
