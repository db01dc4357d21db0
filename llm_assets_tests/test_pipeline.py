"""One full materialization through Dagster: a real WARC dropped, the sensor's request run through lake_job,
every stage committed with its metadata and passing checks; then the CLI reads it back."""

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass

import dagster as dg
import polars as pl
import pytest

from llm_assets import cli
from llm_assets.core.crawl_stats import NOT_IDENTIFIED
from llm_assets.core.inventory import EMPTY_FINGERPRINT, shard_of
from llm_assets.core.partition import LakeInput
from llm_assets.dagster.jobs import jobs_of
from llm_assets.dagster.raw_sensor import build_raw_drop_sensor, requested_fingerprints
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import load_settings
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import asset_metadata, built, english_only_settings, object_store_on, png_size, point_at
from resources import LakeIOManager, ObjectStore

STAGES = ["raw_files", "documents", "image_text_pairs", "filtered", "signatures", "deduplicated", "tokenized"]


@dataclass
class Built:
    """One partition taken through every stage once for the module: its runs, and where they ran."""

    results: "Runs"
    partition: dg.MultiPartitionKey
    crawl: str
    instance: dg.DagsterInstance
    object_store: ObjectStore


@pytest.fixture(scope="module")
def built_once(seaweed, store_config, tmp_path_factory):
    """The tests below read what one build wrote (the extractor test, last, rewrites documents)."""
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("pipeline")
        point_at(mp, seaweed, home / "home")
        # what it checks is FineWeb's English outcome on the shared crawl
        mp.setenv("LLM_ASSETS_SETTINGS", str(english_only_settings(home / "settings.yaml")))
        (home / "dagster").mkdir()
        with dg.instance_for_test(temp_dir=str(home / "dagster")) as instance:
            object_store = object_store_on(store_config, seaweed)
            crawl = f"TEST-{uuid.uuid4().hex[:10]}"
            results, partition = _build(object_store, instance, crawl)
            yield Built(results, partition, crawl, instance, object_store)


@pytest.fixture
def materialized(built_once):
    return built_once.results, built_once.partition


def _build(object_store, instance, crawl):
    warc = shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz")
    lake = object_store.lake()
    lake.put_file(f"raw/{crawl}/{warc.name}", warc)
    # English pages that pass the whole filter chain, under a name that lands in the same shard (one partition)
    shards = load_settings().shards
    shard = shard_of(f"raw/{crawl}/{warc.name}", shards)
    name = next(n for i in range(1000) if shard_of(f"raw/{crawl}/{(n := f'dolma-{i}.warc.gz')}", shards) == shard)
    lake.put_file(f"raw/{crawl}/{name}", shared("warc", "dolma__sample-0000.warc.gz"))
    stages = ("raw_files", "documents", "image_text_pairs", "filtered", "signatures", "duplicate_clusters",
              "deduplicated", "tokenized", "crawl_stats", "enriched", "cost")
    test_defs = dg.Definitions(
        assets=built(*stages),
        jobs=jobs_of(stages),
        resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)},
    )
    with dg.build_sensor_context(instance=instance, definitions=test_defs, resources={"store": object_store}) as ctx:
        tick = build_raw_drop_sensor(load_settings())(ctx)
    for request in tick.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    ((partition, _),) = [(p, fp) for r in tick.run_requests for p, fp in requested_fingerprints(r).items()
                         if p.startswith(f"{crawl}|") and fp != EMPTY_FINGERPRINT]  # its other shards are empty
    request = dg.RunRequest(partition_key=crawl_shard_key(*partition.split("|")))
    # The sensor's run, then the crawl-level run (dedup clusters over every shard, stats), then the curated stages.
    results = Runs([
        test_defs.resolve_job_def("lake_job").execute_in_process(
            partition_key=request.partition_key, instance=instance, tags=request.tags),
        test_defs.resolve_job_def("crawl_job").execute_in_process(partition_key=crawl, instance=instance),
        test_defs.resolve_job_def("curated_job").execute_in_process(
            partition_key=request.partition_key, instance=instance),
        test_defs.resolve_job_def("enrich_job").execute_in_process(
            partition_key=request.partition_key, instance=instance),
        test_defs.resolve_job_def("cost_job").execute_in_process(partition_key=crawl, instance=instance),
    ])
    return results, request.partition_key


class Runs(list):
    """The runs that took the partition through every stage."""

    @property
    def success(self) -> bool:
        return all(r.success for r in self)

    def get_asset_materialization_events(self):
        return [e for r in self for e in r.get_asset_materialization_events()]

    def get_asset_check_evaluations(self):
        return [e for r in self for e in r.get_asset_check_evaluations()]


def test_every_stage_is_materialized_with_its_report(materialized):
    result, _ = materialized
    assert result.success
    raw, docs, pairs, filt, sigs, dedup, tok = (asset_metadata(result, a) for a in STAGES)
    assert raw["rows_out"] == 2
    # the CC-MAIN-2020-34 excerpt: 50 records, 16 of them HTML responses, one of which has no main text; the dolma
    # crawl: 22 HTML pages
    assert docs["rows_in"] > 50 and docs["rows_out"] == 15 + 22
    assert docs["dropped_by_reason"]["not_response"] >= 34 and docs["dropped_by_reason"]["no_text"] >= 1
    # routed extraction: one page of the 2020 excerpt has more than 5,000 tags
    assert docs["pages_by_extractor"] == {"resiliparse": 1, "trafilatura": 16 + 22 - 1}
    assert docs["pages_routed_by_reason"] == {"tags": 1}
    # 13 pages of the 2020 excerpt are not English; the quality rules drop more; some academic pages pass
    assert 0 < filt["rows_out"] < filt["rows_in"] == 37
    assert filt["dropped_by_reason"]["language/language"] >= 13
    assert "| language |" in filt["filter_funnel"] and "pii_email" in filt["pii_masked"]
    assert sigs["rows_out"] == filt["rows_out"] == dedup["rows_in"]
    clusters = asset_metadata(result, "duplicate_clusters")
    assert clusters["documents"] == filt["rows_out"] and clusters["shards"] == 1
    assert dedup["rows_out"] == filt["rows_out"] - clusters["duplicates_removed"] == tok["rows_out"]
    assert pairs["rows_out"] > 0
    for meta in (raw, docs, pairs, filt, sigs, dedup, tok):
        assert meta["seconds"] > 0 and meta["peak_rss_mib"] > 0 and "funnel" in meta
        assert meta["bytes_in"] > 0  # what its units read: the raw files, or the upstream parts' bytes fetched
        assert png_size(meta["funnel_chart"])[0] >= 600
    for chart in ("filter_funnel_chart", "language_chart", "language_funnel_chart", "length_chart"):
        assert png_size(filt[chart])[1] >= 150
    assert "`rejected/filtered/crawl=" in filt["rejected_parts"]  # the funnel names its audit trail
    assert png_size(tok["tokens_chart"])[0] >= 600 and tok["tokens"] > 0


def test_enriched_has_entities_keywords_and_summaries_with_charts(materialized, built_once, capsys):
    result, _ = materialized
    dedup, meta = asset_metadata(result, "deduplicated"), asset_metadata(result, "enriched")
    assert meta["rows_in"] == meta["rows_out"] == dedup["rows_out"] and meta["entity_mentions"] > 0
    for chart in ("top_entities_chart", "entity_types_chart", "top_keywords_chart"):
        assert png_size(meta[chart])[0] >= 600
    assert {r.data["label"] for r in meta["top_entities"].records} & {"PERSON", "ORG", "GPE"}
    assert cli.main(["show", "enriched", "--crawl", built_once.crawl, "--limit", "50", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == dedup["rows_out"] and all(r["summary"] and r["keywords"] for r in rows)
    assert any(e["label"] == "PERSON" for r in rows for e in r["entities"] or [])
    assert cli.main(["show", "enriched", "--crawl", built_once.crawl, "--limit", "2"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("entities: ") == shown.count("keywords: ") == shown.count("summary: ") == 2


def test_crawl_stats_reports_the_crawl_funnel(materialized, built_once):
    object_store, crawl = built_once.object_store, built_once.crawl
    """The crawl-level asset reads every committed shard of `filtered`: funnel, languages and lengths."""
    result, _ = materialized
    meta = asset_metadata(result, "crawl_stats")
    assert meta["documents_in"] == 37 and meta["shards"] == 1
    for chart in ("funnel_chart", "language_chart", "length_chart"):
        width, height = png_size(meta[chart])
        assert 600 <= width <= 800 and height >= 150  # sized to the metadata panel
    languages = {r.data["language"]: r.data for r in meta["languages"].records}
    # a document a block before `language` dropped has no language: named, not a bare "?"
    assert "?" not in languages and all(language for language in languages)
    before_language = sum(r.data["documents"] for r in meta["funnel"].records
                          if r.data["step"] == "dropped" and r.data["block"] in ("normalize", "url", "takedown"))
    assert languages.get(NOT_IDENTIFIED, {"dropped": 0})["dropped"] == before_language
    # lid.176 reads a few of the short Chinese pages as Japanese
    assert languages["zh"]["dropped"] >= 6 and languages["en"]["kept"] == meta["documents_kept"] > 0
    assert sum(v["kept"] + v["dropped"] for v in languages.values()) == 37
    funnel = meta["funnel"].records
    assert funnel[0].data["step"] == "in" and funnel[-1].data["step"] == "out"
    assert sum(r.data["documents"] for r in funnel if r.data["step"] == "dropped") == 37 - meta["documents_kept"]
    # every figure per language: each language's funnel adds up to its documents and to the crawl's drops
    for chart in ("language_mix_chart", "language_funnel_chart"):
        assert png_size(meta[chart])[0] == 720
    # every language at a glance first, then the funnel of each of the 8 with the most documents
    assert meta["language_funnel_chart"].count("data:image/png") == 1 + min(8, len(languages))
    assert meta["language_funnel_chart"].startswith(f"![{crawl}: documents per language, kept and dropped by each")
    per_language = [r.data for r in meta["language_funnel"].records]
    for language, row in languages.items():
        steps = [r for r in per_language if r["language"] == language]
        assert steps[0]["step"] == "in" and steps[0]["documents"] == row["kept"] + row["dropped"]
        assert steps[-1] == {**steps[-1], "step": "out", "documents": row["kept"], "remaining": row["kept"]}
        assert sum(r["documents"] for r in steps if r["step"] == "dropped") == row["dropped"]
    assert {(r["block"], r["reason"]) for r in per_language if r["step"] == "dropped"} == {
        (r.data["block"], r.data["reason"]) for r in funnel if r.data["step"] == "dropped"}
    assert languages["en"]["kept_words"] > 0 and all(row["kept_words"] == 0 for row in languages.values()
                                                     if not row["kept"])
    stored = LakeInput.load(object_store.lake(), "crawl_stats", [(crawl, "all")]).scan().collect()
    assert set(stored["section"]) == {"funnel", "language_kept", "language_dropped", "length_words",
                                      "language_kept_words", "language_funnel"}
    tokenized = {r.data["language"]: r.data for r in asset_metadata(result, "tokenized")["languages"].records}
    assert tokenized["en"]["documents"] == asset_metadata(result, "tokenized")["dagster/row_count"] and \
        tokenized["en"]["tokens"] == asset_metadata(result, "tokenized")["tokens"]


def test_every_check_passes(materialized):
    result, _ = materialized
    evaluations = result.get_asset_check_evaluations()
    assert {(e.asset_key.path[-1], e.check_name) for e in evaluations} == {
        (a, "schema") for a in (*STAGES, "enriched")} | {
        (a, "row_accounting") for a in (*STAGES, "enriched") if a != "image_text_pairs"} | {
        ("filtered", "quality_gate")}
    assert all(e.passed for e in evaluations)


def test_cli_show_and_status_read_the_lake(materialized, built_once, capsys):
    crawl = built_once.crawl
    _, partition = materialized
    assert cli.main(["show", "documents", "--crawl", crawl, "--limit", "3", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3
    for row in rows:
        assert row["url"].startswith("http") and len(row["text"]) > 20
        assert row["crawl"] == crawl and row["warc_record_id"].startswith("<urn:uuid:")
    assert cli.main(["show", "filtered", "--crawl", crawl, "--limit", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and all(r["language"] == "en" and r["language_score"] >= 0.65 for r in rows)
    assert all(r["n_words"] >= 50 and set(r["pii"]) == {"email", "ip_address", "phone", "credit_card", "iban",
                                                                "person", "location"}
               for r in rows)
    assert cli.main(["show", "deduplicated", "--crawl", crawl, "--limit", "2", "--json"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert cli.main(["show", "duplicate_clusters", "--crawl", crawl, "--json"]) == 0  # crawl-level: shard "all"
    assert all(json.loads(line)["reason"] in {"exact", "near"} for line in capsys.readouterr().out.splitlines())
    assert cli.main(["show", "tokenized", "--crawl", crawl, "--limit", "1", "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["tokens"][-1] == 50256 and row["n_tokens"] == len(row["tokens"])

    assert cli.main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert crawl in status["crawls"]
    for asset in STAGES:
        assert status["assets"][asset]["materialized"] >= 1
        assert status["assets"][asset]["rows"] > 0
        assert status["assets"][asset]["total"] == len(status["crawls"]) * 4
    # every asset of the code location is listed: crawl-level ones per crawl, the models and the release once
    for asset in ("duplicate_clusters", "crawl_stats"):
        assert status["assets"][asset]["total"] == len(status["crawls"])
        assert status["assets"][asset]["materialized"] >= 1
    assert {a: status["assets"][a]["total"] for a in ("tokenizer", "quality_classifier", "release")} == {
        "tokenizer": 1, "quality_classifier": 1, "release": 1}
    assert cli.main(["status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.endswith(" ")] == []  # no padding after the last column
    assert {a for a in ("crawl_stats", "tokenizer", "release") if any(line.startswith(f"{a} ") for line in lines)} == {
        "crawl_stats", "tokenizer", "release"}


def test_export_to_a_reader_that_went_away_stops_quietly(built_once):
    """`llm-assets export ... --out - | head`: the reader closes the pipe; the command ends without a traceback."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte: every write fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "llm_assets.cli", "export", "documents", "--crawl",
                               built_once.crawl, "--out", "-"], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=300)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 141, done.stderr


def test_show_rejects_bad_input(store_env, capsys):
    assert cli.main(["show", "documents", "--crawl", "../etc", "--limit", "1"]) == 1
    assert "invalid crawl name" in capsys.readouterr().err
    assert cli.main(["show", "nope", "--crawl", "CC-X"]) == 2


def test_secrets_appear_in_no_metadata_or_log(materialized, seaweed, built_once):
    result, _ = materialized
    instance = built_once.instance
    logs = "\n".join(str(e.message) for r in result for e in instance.all_logs(r.run_id))
    metadata = "\n".join(str(v.value) for m in result.get_asset_materialization_events()
                         for v in m.materialization.metadata.values())
    for secret in (seaweed.secret_key, seaweed.access_key):
        assert secret not in logs and secret not in metadata


def test_record_prints_the_original_warc_record(materialized, built_once, capsys):
    crawl = built_once.crawl
    assert cli.main(["show", "documents", "--crawl", crawl, "--limit", "2", "--json"]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for doc in docs:
        assert cli.main(["record", doc["doc_id"], "--crawl", crawl, "--max-bytes", "2000"]) == 0
        out = capsys.readouterr().out
        assert f"WARC-Record-ID: {doc['warc_record_id']}" in out
        assert f"WARC-Target-URI: {doc['url']}" in out
        assert "HTTP/1.1 200" in out or "HTTP/1.0 200" in out
    assert cli.main(["record", "00ff", "--crawl", crawl]) == 1


def test_the_ledger_charges_each_commit_its_units_that_ran(materialized, built_once):
    """A partition's ledger rows sum to its metadata and manifest; the cost asset's table is the ledger's sums; a
    rebuild that reuses units charges only the units it redid, and makes the cost asset stale."""
    from llm_assets.core.ledger import read_ledger
    from llm_assets.core.partition import read_manifest
    from llm_assets.stages import SPECS, code_versions
    from llm_assets.tools.stale import plan_stale

    result, partition = materialized
    lake, crawl = built_once.object_store.lake(), built_once.crawl
    shard = partition.keys_by_dimension["shard"]
    ledger = read_ledger(lake, crawls=[crawl])
    for asset in ("documents", "filtered", "signatures"):
        meta, manifest = asset_metadata(result, asset), read_manifest(lake, asset, crawl, shard)
        rows = ledger.filter((pl.col("asset") == asset) & (pl.col("shard") == shard))
        assert (sorted(rows["unit"]) == sorted(u.unit for u in manifest.units)
                and set(rows["runner"]) == {meta["runner"]})
        assert rows["cpu_s"].sum() == pytest.approx(meta["cpu_seconds"], abs=1e-3) and meta["cpu_seconds"] > 0
        assert (rows["requests"].sum(), rows["bytes_in"].sum(), rows["bytes_out"].sum()) == (
            meta["requests"], meta["bytes_in"], meta["bytes_out"]) and meta["requests"] > 0
        assert (rows["rows_in"].sum(), rows["rows_out"].sum()) == (manifest.rows_in, manifest.rows)
    # the crawl-level stages are charged too: crawl_stats as one row of its own work
    stats = ledger.filter(pl.col("asset") == "crawl_stats")
    assert stats.height == 1 and stats["cpu_s"][0] > 0 and stats["rows_in"][0] == 37
    assert ledger.filter(pl.col("asset") == "duplicate_clusters").height > len(
        read_manifest(lake, "duplicate_clusters", crawl, "all").units)  # every step, not only the kept one

    # the cost asset (cost_job, after every other job): its table is the ledger's sums at its build
    cost = asset_metadata(result, "cost")
    built_at = read_manifest(lake, "cost", crawl, "all").committed_at
    then = ledger.filter((pl.col("committed_at") < built_at) & (pl.col("asset") != "cost"))
    by_stage = {r.data["asset"]: r.data for r in cost["by_stage"].records}
    for asset, rows in then.group_by("asset"):
        assert by_stage[asset[0]]["units"] == rows.height
        assert by_stage[asset[0]]["cpu_hours"] == pytest.approx(rows["cpu_s"].sum() / 3600, rel=5e-3)  # shown rounded
        assert by_stage[asset[0]]["requests"] == rows["requests"].sum()
    assert by_stage["total"]["units"] == then.height == cost["units"]
    assert by_stage["total"]["cpu_hours"] == pytest.approx(then["cpu_s"].sum() / 3600, rel=5e-3)
    stored = sum(u.bytes_out for u in read_manifest(lake, "filtered", crawl, shard).units)
    assert by_stage["filtered"]["stored_mib"] == pytest.approx(stored / 2 ** 20, rel=5e-3) and stored > 0  # in MiB
    assert list(by_stage["total"]) == ["asset", "units", "cpu_hours", "peak_mib", "read_mib", "written_mib",
                                       "stored_mib", "requests", "cpu_h_per_m_docs"]  # what the panel's width holds
    for chart in ("cost_chart", "crawls_chart"):
        assert png_size(cost[chart])[0] == 720

    # a rebuild that redoes one unit of two charges that one unit, and the cost asset is planned again
    signatures = read_manifest(lake, "signatures", crawl, shard)
    redone = signatures.units[0]
    assert len(signatures.units) == 2
    lake.delete([redone.part])
    *upstream, sigs = built("raw_files", "documents", "filtered", "signatures")
    rerun = dg.materialize([*upstream, sigs], selection=[sigs], partition_key=partition, instance=built_once.instance,
                           resources={"store": built_once.object_store,
                                      "lake_io_manager": LakeIOManager(store=built_once.object_store)})
    assert rerun.success and asset_metadata(rerun, "signatures")["reused_units"] == 1
    added = read_ledger(lake, ["signatures"], [crawl]).join(
        ledger.filter(pl.col("asset") == "signatures"), on=["unit", "committed_at"], how="anti")
    assert added["unit"].to_list() == [redone.unit]
    assert added["cpu_s"][0] == pytest.approx(asset_metadata(rerun, "signatures")["cpu_seconds"], abs=1e-3)
    settings = load_settings()
    planned = plan_stale(lake, settings, [crawl], code_versions(settings), SPECS)
    assert [p.cause for p in planned if p.asset == "cost"] == ["upstream data changed (cost ledger)"]


def test_a_run_can_choose_the_other_extractor(materialized, built_once, capsys):
    """Launchpad config picks resiliparse for one run: other unit ids, the extractor recorded on every row.
    Last in this module: it rewrites the shared build's documents."""
    _, partition = materialized
    object_store, instance, crawl = built_once.object_store, built_once.instance, built_once.crawl
    raw_files, documents = built("raw_files", "documents")
    rerun = dg.materialize([raw_files, documents], selection=[documents], partition_key=partition, instance=instance,
                           resources={"store": object_store, "lake_io_manager": LakeIOManager(store=object_store)},
                           run_config={"ops": {"documents": {"config": {"extractor": "resiliparse"}}}})
    assert rerun.success
    meta = asset_metadata(rerun, "documents")
    assert meta["extractor"] == "resiliparse"
    assert meta["rows_out"] >= 15
    assert cli.main(["show", "documents", "--crawl", crawl, "--limit", "50", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["extractor"] for r in rows} == {"resiliparse 2.0.0"}

