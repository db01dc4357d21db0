"""The stale planner on a real store and instance: after a full build nothing is stale; a threshold change, a new
raw file, an identical re-upload and a removed file each plan exactly the partitions they should."""

import json
import uuid

import dagster as dg
import pytest

from llm_assets import cli
from llm_assets.definitions import build_defs
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import load_settings
from llm_assets.tools.stale import CODE, MISSING, RAW, plan_stale, stale_partitions
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import object_store_on, point_at
from llm_assets_tests.core.test_dedup import (  # noqa: F401 (fixtures)
    build_curated,
    curated,
    dedup_defs,
    lake_defs,
    name_in_shard,
    run,
)

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
CHAIN = ["documents", "image_text_pairs", "filtered", "signatures", "deduplicated", "tokenized"]


@pytest.fixture(scope="module")
def built(seaweed, store_config, tmp_path_factory):
    """(lake, instance, crawl): one curated crawl for the tests that only plan over it (building one takes a
    minute); a test that changes its crawl builds its own (`curated`)."""
    home = tmp_path_factory.mktemp("stale-plans")
    (home / "dagster").mkdir()
    with pytest.MonkeyPatch.context() as mp, dg.instance_for_test(temp_dir=str(home / "dagster")) as instance:
        point_at(mp, seaweed, home / "home")
        store = object_store_on(store_config, seaweed)
        crawl = f"TEST-{uuid.uuid4().hex[:10]}"
        yield build_curated(lake_defs(store), store.lake(), instance, crawl), instance, crawl


def plan(instance, lake, crawl, code=None) -> dict[tuple[str, str], str]:
    """The plan for `crawl` (the release, made of every crawl the instance knows, and the enrichment and the cost
    report, which these builds leave out, are left out)."""
    return {(p.asset, p.partition): p.cause for p in stale_partitions(instance, lake, load_settings(), code)
            if p.asset not in ("release", "enriched", "cost") and p.partition.split("|")[0] == crawl}


def test_nothing_is_stale_after_a_build_and_an_identical_reupload_changes_nothing(built):
    lake, instance, crawl = built
    assert plan(instance, lake, crawl) == {}
    key = next(o.key for o in lake.list(f"raw/{crawl}/"))
    lake.put_bytes(key, lake.get_bytes(key))  # the same bytes again: same ETag and size
    assert plan(instance, lake, crawl) == {}


def test_a_changed_threshold_plans_the_filtered_stage_and_what_follows_not_the_documents(built):
    from llm_assets.stages import code_versions

    curated, instance, crawl = built

    planned = plan(instance, curated, crawl, code_versions(load_settings()) | {"filtered": "2-changed"})
    shards = ("0000", "0001")
    assert {(a, p) for a, p in planned} == (
        {(a, f"{crawl}|{s}") for a in ("filtered", "signatures", "deduplicated", "tokenized") for s in shards}
        | {("crawl_stats", crawl), ("duplicate_clusters", crawl)})
    assert planned[("filtered", f"{crawl}|0000")] == CODE


def test_a_new_word_split_plans_the_filtered_documents_and_what_follows_not_the_documents(built):
    """A lake built before the words were split by spaCy's tokenizers (filtered's and signatures' code versions as
    they were, per the definitions snapshot): the filtered documents, the signatures and what follows are rebuilt;
    the documents are kept."""
    from llm_assets.stages import code_versions

    curated, instance, crawl = built
    before = {"filtered": "7-b57d1f8889623d5ad5d2", "signatures": "1-3bd939952a65d4b688a1"}
    planned = plan(instance, curated, crawl, code_versions(load_settings()) | before)
    shards = ("0000", "0001")
    assert {(a, p) for a, p in planned} == (
        {(a, f"{crawl}|{s}") for a in ("filtered", "signatures", "deduplicated", "tokenized") for s in shards}
        | {("crawl_stats", crawl), ("duplicate_clusters", crawl)})
    assert planned[("filtered", f"{crawl}|0000")] == CODE
    # the signatures' own version moved too (languages newly split by IndicNLP's rules): alone, it plans them
    planned = plan(instance, curated, crawl, code_versions(load_settings()) | {"signatures": before["signatures"]})
    assert planned[("signatures", f"{crawl}|0000")] == CODE and ("filtered", f"{crawl}|0000") not in planned


def test_a_new_clustering_rule_plans_the_clusters_and_what_follows_not_the_signatures(built):
    """A lake built before the near-duplicate confirmation changed (duplicate_clusters' code version alone moved,
    as the definitions snapshot shows): the clusters, the deduplicated shards and what follows are rebuilt; the
    documents, filtered documents and signatures are kept."""
    from llm_assets.stages import code_versions

    curated, instance, crawl = built
    planned = plan(instance, curated, crawl, code_versions(load_settings()) | {"duplicate_clusters": "3-before"})
    assert set(planned) == ({("duplicate_clusters", crawl)}
                            | {(a, f"{crawl}|{s}") for a in ("deduplicated", "tokenized") for s in ("0000", "0001")})
    assert planned[("duplicate_clusters", crawl)] == CODE


def test_a_new_file_plans_its_shard_chain_and_the_crawl_level_assets_then_a_rebuild_clears_it(
        curated, instance, crawl, dedup_defs):  # noqa: F811
    lake = curated
    new = f"raw/{crawl}/{name_in_shard(crawl, '0001', 'new')}"
    lake.put_file(new, shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"))
    planned = plan(instance, lake, crawl)
    assert planned[("raw_files", f"{crawl}|0001")] == RAW
    assert {(a, f"{crawl}|0001") for a in CHAIN} <= set(planned)
    assert not any(p.endswith("|0000") for a, p in planned if a in ("raw_files", "documents", "filtered"))
    assert ("duplicate_clusters", crawl) in planned and ("crawl_stats", crawl) in planned

    run(dedup_defs, "lake_job", crawl_shard_key(crawl, "0001"), instance)
    run(dedup_defs, "crawl_job", crawl, instance)
    for shard in ("0000", "0001"):
        run(dedup_defs, "curated_job", crawl_shard_key(crawl, shard), instance)
    assert plan(instance, lake, crawl) == {}

    lake.delete([new])  # removed again: its documents must go
    planned = plan(instance, lake, crawl)
    assert planned[("raw_files", f"{crawl}|0001")] == RAW and ("tokenized", f"{crawl}|0001") in planned


def test_a_crawl_dropped_but_never_built_is_missing(store_env, object_store, capsys):
    lake = object_store.lake()
    lake.put_file("raw/NEW-CRAWL-1/a.warc.gz", shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz"))
    try:
        assert cli.main(["stale", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        rows = [p for p in out["partitions"] if p["partition"].startswith("NEW-CRAWL-1")]
        assert [r["asset"] for r in rows][:1] == ["raw_files"] and rows[0]["cause"] == MISSING
    finally:
        lake.delete(["raw/NEW-CRAWL-1/a.warc.gz"])


def test_backfill_stale_launches_one_backfill_of_exactly_the_stale_partitions_run_under_their_jobs(
        curated, instance, crawl, object_store):  # noqa: F811
    import uuid

    from llm_assets.dagster.freshness import launch_stale_backfill
    from llm_assets.platform.backfills import STALE_TAG, stale_backfills
    from llm_assets.platform.partitions import PARTITION_TAG, covers

    defs = build_defs(load_settings())
    lake = curated
    assert launch_stale_backfill(instance, []) is None and not stale_backfills(instance)
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', 'more')}", shared("warc", "pywb__iana.warc.gz"))
    planned = stale_partitions(instance, lake, load_settings())
    backfill_id = launch_stale_backfill(instance, planned)
    (backfill,) = stale_backfills(instance)
    assert backfill.backfill_id == backfill_id and backfill.in_progress and backfill.trigger == "cli"
    assert set(backfill.planned) == {(p.asset, p.partition) for p in planned}
    assert ("raw_files", f"{crawl}|0000") in backfill.planned and ("documents", f"{crawl}|0001") not in backfill.planned
    # while that backfill is in progress, the stale sensor launches no second one
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        assert isinstance(defs.resolve_sensor_def("stale_sensor")(ctx), dg.SkipReason)

    # stale_backfill_sensor requests the runs of the first job alone: lake_job, of exactly the plan's partitions
    # of its assets, tagged with the backfill
    runner = defs.resolve_sensor_def("stale_backfill_sensor")
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        requests = runner(ctx).run_requests
    assert {r.job_name for r in requests} == {"lake_job"} and all(r.tags[STALE_TAG] == backfill_id for r in requests)
    lake_assets = {"raw_files", "documents", "image_text_pairs", "filtered", "signatures"}
    built = [({k.path[-1] for k in r.asset_selection}, {**r.tags, **(
        {PARTITION_TAG: str(r.partition_key)} if r.partition_key else {})}) for r in requests]
    for p in planned:  # each planned partition of lake_job's assets in exactly one run, with its asset
        assert len([1 for assets, tags in built if p.asset in assets and covers(tags, p.partition)]) == (
            p.asset in lake_assets), p
    # while a run of it is in flight, nothing more
    instance.add_run(dg.DagsterRun(job_name="lake_job", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
                                   tags={STALE_TAG: backfill_id, PARTITION_TAG: f"{crawl}|0000"}))
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        assert isinstance(runner(ctx), dg.SkipReason)


def test_the_stale_sensor_requests_a_backfill_only_when_something_is_stale(curated, instance, crawl,
                                                                           object_store):  # noqa: F811
    from llm_assets.platform.backfills import Status, stale_backfills, update_stale_backfill

    defs = build_defs(load_settings())
    stale_sensor = defs.resolve_sensor_def("stale_sensor")
    lake = curated

    def mine() -> set:
        """What the sensor's latest backfill holds of this test's crawl (other tests' crawls share the bucket), but
        the enrichment and the cost report, which this build leaves out; it ends, as the next check needs."""
        launched = stale_backfills(instance)
        if not launched:
            return set()
        update_stale_backfill(instance, launched[-1], status=Status.SUCCEEDED)
        assert launched[-1].trigger == "sensor"
        return {(a, p) for a, p in launched[-1].planned
                if p and p.split("|")[0] == crawl and a not in ("enriched", "cost")}

    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        assert not stale_sensor(ctx).run_requests
    assert mine() == set()
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0001', 'late')}", shared("warc", "pywb__iana.warc.gz"))
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        result = stale_sensor(ctx)
    assert not result.run_requests  # stale_backfill_sensor requests the backfill's runs
    target = mine()
    assert ("raw_files", f"{crawl}|0001") in target and ("raw_files", f"{crawl}|0000") not in target
    # the new files' version goes to Dagster with the request: the UI marks that raw_files partition stale too
    reported = {(e.asset_key.path[-1], e.partition) for e in result.asset_events}
    assert ("raw_drop", f"{crawl}|0001") in reported and ("raw_drop", f"{crawl}|0000") not in reported


def test_a_rebuild_reuses_unchanged_units_and_equals_a_full_rebuild(curated, instance, crawl, dedup_defs):  # noqa: F811
    from llm_assets.core.lake import manifest_key

    lake = curated
    key = crawl_shard_key(crawl, "0000")
    before = {a: lake.get_json(manifest_key(a, crawl, "0000")) for a in ("documents", "filtered")}
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', 'added')}", shared("warc", "pywb__iana.warc.gz"))
    meta = run(dedup_defs, "lake_job", key, instance)
    # the file that was there is not extracted or filtered again: its units are reused, the new one runs
    assert meta["documents"]["reused_units"] == len(before["documents"]["units"]) == 1
    # the added WARC (787 KB) is extracted as two shares of its HTML records: two new documents parts to filter
    units = lake.get_json(manifest_key("filtered", crawl, "0000"))["units"]
    assert meta["filtered"]["reused_units"] == 1 and len(units) == 3

    def rows(asset):
        m = lake.get_json(manifest_key(asset, crawl, "0000"))
        return lake.scan([u["part"] for u in m["units"] if u.get("part")]).collect().drop("extractor", strict=False) \
            .sort("doc_id")

    incremental = {a: rows(a) for a in ("documents", "filtered", "signatures")}
    for asset in ("documents", "filtered", "signatures"):
        lake.delete([manifest_key(asset, crawl, "0000")])  # forget what was built: a full rebuild
    full = run(dedup_defs, "lake_job", key, instance)
    assert full["documents"]["reused_units"] == 0
    for asset, frame in incremental.items():
        assert rows(asset).equals(frame), asset


def test_a_late_drop_has_one_owner(curated, instance, crawl, object_store):  # noqa: F811
    """A raw partition a stale backfill rebuilds is not requested again by the raw-drop sensor; while a run of the
    raw-drop sensor is in flight, the stale sensor requests nothing."""
    import uuid

    from llm_assets.dagster.freshness import launch_stale_backfill
    from llm_assets.dagster.raw_sensor import requested_fingerprints
    from llm_assets.platform.backfills import Status, stale_backfills, update_stale_backfill
    from llm_assets.platform.dagster_private import SENSOR_NAME_TAG

    defs = build_defs(load_settings())
    lake = curated
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0001', 'owned')}", shared("warc", "pywb__iana.warc.gz"))
    planned = stale_partitions(instance, lake, load_settings())
    assert ("raw_files", f"{crawl}|0001") in {(p.asset, p.partition) for p in planned}
    launch_stale_backfill(instance, planned)
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        result = defs.resolve_sensor_def("raw_drop_sensor")(ctx)
    # a sensor without a cursor sees every partition as new: it requests shard 0000, leaves 0001 to the backfill
    shards = {p.split("|")[1] for r in result.run_requests for p in requested_fingerprints(r)
              if p.startswith(f"{crawl}|")}
    assert shards == {"0000"}

    for backfill in stale_backfills(instance):  # done: the stale sensor would wait for it otherwise
        update_stale_backfill(instance, backfill, status=Status.SUCCEEDED)
    instance.add_run(dg.DagsterRun(job_name="lake_job", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
                                   tags={SENSOR_NAME_TAG: "raw_drop_sensor"}))
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        skipped = defs.resolve_sensor_def("stale_sensor")(ctx)
    assert isinstance(skipped, dg.SkipReason) and "raw_drop_sensor" in skipped.skip_message


def test_a_failed_partition_is_planned_first_and_a_held_one_plans_nothing_for_its_sake(lake, crawl):
    """The failures the instance reports are planned with their run, whatever the lake says; a partition the stale
    sensor holds (it failed in the sensor's own backfill) is not planned, nor what follows it."""
    from llm_assets.stages import SPECS, code_versions

    settings = load_settings()
    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', 'f')}",
                  shared("warc", "whirlwind__CC-MAIN-2024-22.warc.gz"))
    code = code_versions(settings)
    p = f"{crawl}|0000"
    planned = {(x.asset, x.partition): x.cause for x in plan_stale(
        lake, settings, [crawl], code, SPECS, failed={("raw_files", p): "0123456789abcdef"})}
    assert planned[("raw_files", p)] == "failed (run 01234567)"  # never committed: the failure says more
    assert planned[("documents", p)] == "upstream data changed (raw_files is rebuilt)"
    assert not plan_stale(lake, settings, [crawl], code, SPECS, failed={("raw_files", p): "0123456789abcdef"},
                          hold={("raw_files", p)})


# --- per-language staleness: a partition records the languages it held ------------------------------------------

LANGUAGE_FILES = {"0000": ("eng", "deu"), "0001": ("eng", "fra")}  # shard -> one JSON Lines file per language


def udhr_jsonl(code: str, documents: int = 4) -> bytes:
    """The Universal Declaration of Human Rights in one language (`udhr2/<iso639-3>.txt`) as JSON Lines: `documents`
    documents of consecutive paragraphs."""
    import zipfile

    with zipfile.ZipFile(shared("text", "nltk-data__udhr2.zip")) as z:
        lines = [line.strip() for line in z.read(f"udhr2/{code}.txt").decode().splitlines() if line.strip()]
    size = len(lines) // documents
    rows = [{"id": f"{code}-{i}", "url": f"https://udhr.example/{code}/{i}",
             "text": "\n".join(lines[i * size:(i + 1) * size])} for i in range(documents)]
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def write_settings(path, languages: list[str], overrides: dict | None = None, **gopher_quality) -> None:
    """The default settings file with the language block keeping `languages` at each one's own threshold, the
    settings' per-language `overrides`, and changed defaults of gopher_quality; work units run in-process."""
    import yaml

    from llm_assets.settings import DEFAULT_SETTINGS

    data = yaml.safe_load(DEFAULT_SETTINGS.read_text())
    for block in data["filtered"]["chain"]:
        if block["block"] == "language":
            block.pop("multilingual", None)
            block.update(languages=languages, threshold=None)
        if block["block"] == "gopher_quality":
            block.update(gopher_quality)
    data["filtered"]["overrides"] = overrides or {}
    data["runner"] = {"kind": "inprocess"}
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


@pytest.fixture
def multilingual(store_env, object_store, instance, crawl, tmp_path, monkeypatch):
    """A crawl of two shards built through lake_job: shard 0000 holds an English and a German JSON Lines file, shard
    0001 an English and a French one; the chain keeps en, de and fr. -> (lake, settings file)."""
    from llm_assets_tests.core.test_dedup import lake_defs

    settings_file = tmp_path / "settings.yaml"
    write_settings(settings_file, ["en", "de", "fr"])
    monkeypatch.setenv("LLM_ASSETS_SETTINGS", str(settings_file))
    lake = object_store.lake()
    for shard, codes in LANGUAGE_FILES.items():
        for code in codes:
            lake.put_bytes(f"raw/{crawl}/{name_in_shard(crawl, shard, code, '.jsonl')}", udhr_jsonl(code))
    instance.add_dynamic_partitions("crawl", [crawl])
    defs = lake_defs(object_store, load_settings())
    meta = {shard: run(defs, "lake_job", crawl_shard_key(crawl, shard), instance)["filtered"]
            for shard in LANGUAGE_FILES}
    return lake, settings_file, meta


def roots(planned: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """The partitions planned for what changed under them, not because a partition they read is rebuilt (and not
    the crawl-level assets these builds leave out)."""
    return {k: cause for k, cause in planned.items()
            if not cause.endswith("is rebuilt)") and k[0] not in ("duplicate_clusters", "crawl_stats")}


def test_a_threshold_change_for_one_language_plans_only_the_partitions_that_hold_it(
        multilingual, instance, crawl, object_store):
    from llm_assets.core.filtered import language_funnels, languages_held, languages_version
    from llm_assets.core.partition import read_manifest
    from llm_assets.stages.filtered import LANGUAGE_INPUT, LANGUAGES_INPUT
    from llm_assets.tools.stale import LANGUAGES
    from llm_assets_tests.conftest import png_size
    from llm_assets_tests.core.test_dedup import lake_defs

    lake, settings_file, meta = multilingual
    # each partition records the languages it held, with their funnels (its units' counts) and thresholds
    settings = load_settings().filtered
    for shard, held in (("0000", ["de", "en"]), ("0001", ["en", "fr"])):
        built = read_manifest(lake, "filtered", crawl, shard)
        assert languages_held(built.counts()) == held
        assert sorted(languages_held(u.counts) for u in built.units) == [[language] for language in held]  # per file
        assert built.inputs[LANGUAGES_INPUT] == languages_version(settings.language_fingerprint, held)
        assert {k: v for k, v in built.inputs.items() if k.startswith(LANGUAGE_INPUT)} == {
            LANGUAGE_INPUT + language: settings.language_fingerprint(language) for language in held}
        funnels = language_funnels(built.counts())
        assert {f.language for f in funnels} - {"?"} == set(held)
        for f in funnels:  # each language's funnel adds up: in = kept + dropped by each block
            assert f.documents == f.kept + sum(f.dropped.values()) > 0
        assert sum(f.documents for f in funnels) == built.rows_in and sum(f.kept for f in funnels) == built.rows
        # the UI shows them: a table of language x documents in / kept / dropped by block, and its chart
        rows = {r.data["language"]: r.data for r in meta[shard]["language_funnel"].records}
        assert {language: (r["documents"], r["kept"]) for language, r in rows.items() if language in held} == {
            f.language: (f.documents, f.kept) for f in funnels if f.language in held}
        assert png_size(meta[shard]["language_funnel_chart"])[0] == 720
    assert roots(plan(instance, lake, crawl)) == {}

    # German only: shard 0000 holds German, shard 0001 does not
    write_settings(settings_file, ["en", "de", "fr"], {"de": {"gopher_quality.min_stop_words": 3}})
    assert roots(plan(instance, lake, crawl)) == {("filtered", f"{crawl}|0000"): f"{LANGUAGES} (de)"}
    # its rebuild redoes the German file's unit and reuses the English one's
    meta = run(lake_defs(object_store, load_settings()), "lake_job", crawl_shard_key(crawl, "0000"), instance)
    assert meta["filtered"]["reused_units"] == 1
    assert roots(plan(instance, lake, crawl)) == {}

    # a language leaving the keep list is a change of its thresholds: English, held by both shards, plans both
    write_settings(settings_file, ["de", "fr"], {"de": {"gopher_quality.min_stop_words": 3}})
    assert roots(plan(instance, lake, crawl)) == {
        ("filtered", f"{crawl}|{s}"): f"{LANGUAGES} (en)" for s in ("0000", "0001")}

    # a change of the chain's own value is a change of the stage's code: every partition
    write_settings(settings_file, ["en", "de", "fr"], {"de": {"gopher_quality.min_stop_words": 3}},
                   max_avg_word_length=11)
    assert roots(plan(instance, lake, crawl)) == {("filtered", f"{crawl}|{s}"): CODE for s in ("0000", "0001")}


def test_a_units_counts_give_each_languages_funnel():
    import polars as pl

    from llm_assets.core.filtered import _count_languages, language_funnels, languages_held
    from llm_assets.core.gates import LANGUAGE_COUNT

    kept = pl.DataFrame({"language": ["en", "en", "de"]})
    dropped = pl.DataFrame({"language": [None, "de", "fr", "de"],
                            "filter": ["url", "gopher_quality", "language", "gopher_quality"]})
    counts = {LANGUAGE_COUNT + "en": 2, LANGUAGE_COUNT + "de": 1}  # kept: the quality gate's counts
    _count_languages(counts, kept, dropped)
    _count_languages(counts, kept.head(1), dropped.head(0))  # a second batch adds up
    funnels = {f.language: (f.documents, f.kept, dict(f.dropped)) for f in language_funnels(counts)}
    assert funnels == {"en": (3, 2, {}), "de": (3, 1, {"gopher_quality": 2}), "fr": (1, 0, {"language": 1}),
                       "?": (1, 0, {"url": 1})}
    assert [f.language for f in language_funnels(counts)][:2] == ["de", "en"]  # most documents first, then by name
    assert languages_held(counts) == ["de", "en", "fr"]  # not the documents dropped before the language block


def test_one_languages_override_changes_only_that_languages_version_and_not_the_code():
    from llm_assets.core.filtered import FilteredSettings, languages_version
    from llm_assets.stages.filtered import SPEC

    before = FilteredSettings()
    after = FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3}})
    assert before.fingerprint() == after.fingerprint()
    settings = load_settings()
    overridden = settings.filtered.model_copy(update={"overrides": {"de": {"gopher_quality.min_stop_words": 3}}})
    assert SPEC.version(settings) == SPEC.version(settings.model_copy(update={"filtered": overridden}))
    old, new = before.language_fingerprint, after.language_fingerprint
    assert languages_version(old, ["en", "fr"]) == languages_version(new, ["fr", "en"])
    assert languages_version(old, ["de", "en"]) != languages_version(new, ["de", "en"])
    assert languages_version(old, []) == languages_version(new, [])


def test_the_measuring_mode_is_the_chains_code_version_not_a_languages():
    """`filtered.measure` applies to every language: it changes the stage's code version (every partition is
    stale), not the per-language versions; the default leaves the version as it was before the mode existed."""
    from llm_assets.core.filtered import languages_version
    from llm_assets.stages.filtered import SPEC

    settings = load_settings()
    filtered = settings.filtered.model_copy(update={"measure": "until_dropped"})
    cascade = settings.model_copy(update={"filtered": filtered})
    assert SPEC.version(settings) != SPEC.version(cascade)
    assert languages_version(settings.filtered.language_fingerprint, ["de", "en", "zh"]) == \
        languages_version(cascade.filtered.language_fingerprint, ["de", "en", "zh"])


def test_each_assets_not_stale_check_says_what_the_plan_holds_of_it_and_why(built):
    """The catalog's asset list marks the assets with stale partitions: every plan reports each asset's `not_stale`
    check, failed with the asset's planned partitions and their causes; a build run carries the last plan forward
    but the partitions it built."""
    from llm_assets.platform.backfills import NOT_STALE, PLANNED_KEY, carried_forward
    from llm_assets.stages import code_versions

    curated, instance, crawl = built

    def latest(asset: str) -> dg.AssetCheckEvaluation:
        record = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(asset), NOT_STALE))
        return record.event.dagster_event.event_specific_data

    plan(instance, curated, crawl, code_versions(load_settings()) | {"filtered": "2-changed"})
    filtered, documents = latest("filtered"), latest("documents")
    assert not filtered.passed and filtered.severity == dg.AssetCheckSeverity.WARN
    mine = {p: c for p, c in filtered.metadata[PLANNED_KEY].value if p.startswith(f"{crawl}|")}
    assert mine == {f"{crawl}|0000": CODE, f"{crawl}|0001": CODE}
    assert CODE in filtered.metadata["causes"].value and f"| {crawl}|0000 | {CODE} |" in filtered.metadata[
        "stale_partitions"].value
    assert not any(p.startswith(f"{crawl}|") for p, _ in documents.metadata[PLANNED_KEY].value)

    run = dg.DagsterRun(job_name="lake_job", tags={"dagster/partition": f"{crawl}|0000"})
    left = carried_forward(instance, "filtered", run)
    assert {p for p, _ in left.metadata[PLANNED_KEY].value if p.startswith(f"{crawl}|")} == {f"{crawl}|0001"}
    assert plan(instance, curated, crawl) == {} and latest("filtered").metadata["partitions_stale"].value == len(
        [p for p, _ in latest("filtered").metadata[PLANNED_KEY].value if not p.startswith(f"{crawl}|")])
