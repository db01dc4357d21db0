"""`llm-assets preview` on a real store: what a preview of new settings reports is what the rebuild under them then
does, document by document, for the inputs it sampled (a change run on a sample) or for every document (a change of
thresholds only, re-decided over the stored scores); its scratch prefix is gone after; the `preview` job shows the
report as its run's metadata."""

from __future__ import annotations

import json
import time

import dagster as dg
import polars as pl
import pytest
import yaml

from llm_assets import cli
from llm_assets.core.lake import SCRATCH_PREFIX, InvalidKey, Lake, id_index_key, scratch_prefix
from llm_assets.core.partition import read_manifest, vacuum_scratch
from llm_assets.core.preview import parse_sample, scratch, take_sample
from llm_assets.core.units import InProcessRunner
from llm_assets.dagster.preview import build_preview_job, preview_change, settings_config
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import DEFAULT_SETTINGS, Settings, load_settings
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import built, object_store_on, png_size, point_at
from llm_assets_tests.core.test_dedup import name_in_shard

WARCS = ("dolma__sample-0000.warc.gz", "dolma__sample-0001.warc.gz")
STAGES = ("raw_files", "documents", "filtered")


def build(lake: Lake, resources: dict, instance, crawl: str, settings: Settings, selection=STAGES) -> None:
    """The crawl's shard 0000 through `selection` of raw_files, documents and filtered, under `settings`."""
    assert dg.materialize(built(*STAGES, settings=settings), selection=list(selection), instance=instance,
                          partition_key=crawl_shard_key(crawl, "0000"), resources=resources).success


@pytest.fixture(scope="module")
def deployment(seaweed, store_config, tmp_path_factory):
    """The test store, a Dagster instance, and a crawl of two real WARC files in shard 0000 built through filtered
    under the default settings."""
    from resources import LakeIOManager

    home = tmp_path_factory.mktemp("preview")
    with pytest.MonkeyPatch.context() as mp:
        point_at(mp, seaweed, home / "home")
        mp.delenv("LLM_ASSETS_SETTINGS", raising=False)
        (home / "dagster").mkdir()
        with dg.instance_for_test(temp_dir=str(home / "dagster")) as instance:
            store = object_store_on(store_config, seaweed)
            resources = {"store": store, "lake_io_manager": LakeIOManager(store=store)}

            def new_crawl() -> str:
                import uuid

                crawl = f"TEST-{uuid.uuid4().hex[:10]}"
                lake = store.lake()
                for i, name in enumerate(WARCS):
                    lake.put_file(f"raw/{crawl}/{name_in_shard(crawl, '0000', f'w{i}')}", shared("warc", name))
                instance.add_dynamic_partitions("crawl", [crawl])
                build(lake, resources, instance, crawl, load_settings())
                return crawl

            yield store, resources, instance, new_crawl, new_crawl()


def outcome(lake: Lake, crawl: str, documents_parts: set[str]) -> pl.DataFrame:
    """doc_id, filter, reason of every document `filtered` committed for these documents parts (filter null: kept)."""
    m = read_manifest(lake, "filtered", crawl, "0000")
    assert m is not None
    units = [u for u in m.units if u.source in documents_parts]
    kept = [u.part for u in units if u.part and u.rows_out]
    rejected = [u.rejected_part for u in units if u.rejected_part and u.rows_out < u.rows_in]
    frames = [lake.scan(kept).select("doc_id").collect().with_columns(filter=pl.lit(None, pl.String),
                                                                       reason=pl.lit(None, pl.String))] if kept else []
    frames += [lake.scan(rejected).select("doc_id", "filter", "reason").collect()] if rejected else []
    return pl.concat(frames).sort("doc_id")


def changed(blocks: dict[str, dict] | None = None, **sections) -> tuple[Settings, str]:
    """The default settings file with these sections' fields and these filter blocks' fields replaced: (settings,
    YAML text)."""
    data = yaml.safe_load(DEFAULT_SETTINGS.read_text())
    for section, fields in sections.items():
        data[section] = {**data.get(section, {}), **fields}
    for block in data["filtered"]["chain"]:
        block.update((blocks or {}).get(block["block"], {}))
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return Settings.model_validate(yaml.safe_load(text)), text


def test_a_sample_preview_is_what_the_rebuild_then_does_on_its_sample(deployment):
    store, resources, instance, new_crawl, _ = deployment
    crawl, lake, current = new_crawl(), store.lake(), load_settings()
    new, _ = changed(documents={"extractor": "resiliparse"})  # not thresholds: documents and filtered are stale

    report = preview_change(lake, store.config(), current, new, [crawl], 0.5, runner=InProcessRunner())

    assert report.mode == "sample" and report.not_thresholds.startswith("settings other than filtered changed")
    assert dict(report.planned)["documents"] == 1 and dict(report.planned)["filtered"] == 1
    assert report.sample is not None and len(report.sample.units) == 1 and report.sample.units_total == 2
    assert 0 < report.sample.fraction < 1
    assert not list(lake.list(SCRATCH_PREFIX)), "the scratch prefix is removed after the preview"
    assert not any("scratch" in k for k in lake.keys(f"lake/documents/crawl={crawl}/"))
    (source,) = report.sample.units
    before = read_manifest(lake, "documents", crawl, "0000")
    assert before is not None
    documents_before = {u.part for u in before.units if u.source == source and u.part}
    assert report.kept[0].stage == "documents"
    assert report.kept[0].documents_before == sum(u.rows_out for u in before.units if u.source == source)
    was = outcome(lake, crawl, documents_before)

    build(lake, resources, instance, crawl, new, selection=("documents", "filtered"))

    after = read_manifest(lake, "documents", crawl, "0000")
    assert after is not None
    rebuilt = outcome(lake, crawl, {u.part for u in after.units if u.source == source and u.part})
    previewed = report.decisions.filter(pl.col("source") == source).select("doc_id", "filter", "reason").sort("doc_id")
    assert previewed.height == rebuilt.height > 0
    assert previewed.equals(rebuilt), "the preview keeps and drops what the rebuild does, for the same reasons"
    assert report.kept[0].documents_after == sum(u.rows_out for u in after.units if u.source == source)
    kept_after = sum(r.documents_after for r in report.kept if r.stage == "filtered")
    kept_before = sum(r.documents_before for r in report.kept if r.stage == "filtered")
    assert kept_after == rebuilt["filter"].null_count() and kept_before == was["filter"].null_count()
    assert all(r.tokens_after is not None for r in report.kept if r.stage == "filtered" and r.documents_after)
    text = report.render()
    assert "sample: 1 of 2 units" in text and "scaled to the crawl" in text


def test_the_preview_job_shows_its_report_as_its_run_metadata(deployment):
    store, _, instance, _, crawl = deployment
    _, text = changed(blocks={"c4_quality": {"enabled": False}})  # a block off: its line cleanup no longer runs
    # the Launchpad opens with the deployment's settings as structured config (YAML there, not one escaped string),
    # every field written out, and they are the deployment's settings
    preview_job = build_preview_job(load_settings())
    prefilled = preview_job.run_config["ops"]["preview_settings"]["config"]["settings"]
    assert prefilled == settings_config(load_settings()) and Settings.model_validate(prefilled) == load_settings()
    assert isinstance(prefilled["filtered"]["chain"], list) and prefilled["shards"] == load_settings().shards
    result = preview_job.execute_in_process(run_config={"ops": {"preview_settings": {"config": {
        "settings": yaml.safe_load(text), "sample": "50%", "crawl": crawl}}}},
        resources={"store": store}, instance=instance)

    assert result.success
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    meta = {k: v.value for k, v in output.step_output_data.metadata.items()}
    assert meta["mode"] == "sample" and meta["crawls"] == [crawl]
    assert "c4_quality" in meta["not_thresholds_only"]
    assert meta["stale"]["filtered"] == 1 and "documents" not in meta["stale"]  # the sample runs filtered alone
    assert len(meta["sample_units"]) == 1 and 0 < meta["sample_fraction_of_input_bytes"] < 1
    assert meta["kept"].startswith("| stage | language |") and "| filtered | en |" in meta["kept"]
    assert all(b["dropped_after"] == 0 for b in meta["report_json"]["blocks"] if b["block"] == "c4_quality")
    assert meta["drop_rates"].startswith("| block |")
    assert png_size(meta["drop_rates_chart"])[0] == 720
    assert "forecast only: reads every shard" in str(meta["forecast_only"])
    assert "total" in meta["forecast"]
    assert meta["report_json"]["sample"]["units"] == meta["sample_units"]
    assert not list(store.lake().list(SCRATCH_PREFIX))
    # a bad setting fails the run with an error naming it, and where it came from
    with pytest.raises(ValueError, match=r"(?s)invalid settings in the run config's `settings`.*shards"):
        preview_job.execute_in_process(
            run_config={"ops": {"preview_settings": {"config": {"settings": {"shards": -1}}}}},
            resources={"store": store}, instance=instance)


def test_a_sample_is_the_same_everywhere_and_scratch_goes_even_when_a_preview_fails(lake):
    sources = [f"raw/C/file-{i}.warc.gz" for i in range(200)]
    one = take_sample(sources, 0.01)
    assert len(one) == 2 and take_sample(list(reversed(sources)), 0.01) == one  # ceil(1% of 200), in hash order
    assert (set(one) <= set(take_sample(sources, 0.1))
            and take_sample(sources[:3], 0.0001) == take_sample(sources[:3], 0.2))
    assert parse_sample("1%") == parse_sample("0.01") == 0.01 and parse_sample("100%") == 1.0
    for bad in ("0%", "150%", "a lot", "-0.5"):
        with pytest.raises(ValueError, match="--sample"):
            parse_sample(bad)
    with pytest.raises(InvalidKey, match="preview id"):
        scratch_prefix("../lake")
    part = scratch_prefix("0123456789abcdef") + "lake/documents/crawl=C/shard=0000/part-0123456789.parquet"
    assert id_index_key(part) == ("scratch/preview/0123456789abcdef/index/documents/crawl=C/shard=0000/"
                                  "part-0123456789.ids.npz")

    with pytest.raises(RuntimeError, match="unit failed"):
        with scratch(lake) as prefix:
            lake.put_bytes(prefix + "lake/x/part.parquet", b"x")
            raise RuntimeError("unit failed")
    assert not list(lake.list(prefix))
    left = scratch_prefix("fedcba9876543210") + "lake/x/part.parquet"  # as a killed preview leaves it
    lake.put_bytes(left, b"x")
    assert vacuum_scratch(lake, retention_s=3600) == [] and lake.keys(left)
    assert vacuum_scratch(lake, retention_s=3600, now=time.time() + 3601) == [left] and not lake.keys(left)


def test_a_thresholds_preview_over_the_stored_scores_is_what_the_rebuild_then_does(deployment, tmp_path, capsys):
    """After the job's test, which previews the same crawl under the default settings."""
    store, resources, instance, _, crawl = deployment
    lake, current = store.lake(), load_settings()
    new, text = changed(blocks={"gopher_quality": {"min_doc_words": 300}})
    (path := tmp_path / "new.yaml").write_text(text)
    assert cli.main(["preview", str(path), "--sample", "0%"]) == 1
    assert "--sample '0%': must be above 0" in capsys.readouterr().err
    assert cli.main(["preview", str(path), "--crawl", crawl, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)

    report = preview_change(lake, store.config(), current, new, [crawl])

    assert report.mode == "thresholds" and report.sample is None and not report.not_thresholds
    assert not list(lake.list(SCRATCH_PREFIX))
    dropped = [e for e in report.examples if e.change == "newly dropped"]
    assert dropped and all(e.block == "gopher_quality" and "300" in (e.threshold or "") for e in dropped)
    quality = next(b for b in report.blocks if b.block == "gopher_quality")
    assert quality.dropped_after > quality.dropped_before
    assert printed["mode"] == "thresholds" and printed["blocks"] == [vars(b) for b in report.blocks]
    assert printed["forecast"]["stages"] and "sample" in printed and printed["sample"] is None

    build(lake, resources, instance, crawl, new, selection=("filtered",))

    built = read_manifest(lake, "filtered", crawl, "0000")
    assert built is not None
    rebuilt = outcome(lake, crawl, {u.source for u in built.units})
    previewed = report.decisions.select("doc_id", "filter", "reason").sort("doc_id")
    assert previewed.height == rebuilt.height > 0
    assert previewed.equals(rebuilt), "re-deciding the stored scores keeps and drops what the rebuild does"


def test_a_lake_measured_until_dropped_is_previewed_on_a_sample():
    """Its stored scores hold no measures of the blocks after the one that dropped a document: a change of
    thresholds only is refused as one (the preview then runs a sample), naming the mode."""
    from llm_assets.dagster.preview import thresholds_only

    current = Settings()
    cascade = current.model_copy(update={"filtered": current.filtered.model_copy(update={"measure": "until_dropped"})})
    looser = cascade.model_copy(update={"filtered": cascade.filtered.replaced(
        "gopher_quality", cascade.filtered.block("gopher_quality").model_copy(update={"min_doc_words": 25}))})
    why = thresholds_only(cascade, looser)
    assert why is not None and why.startswith("filtered.measure is until_dropped")
    # the same change over scores measured of every document is one
    assert thresholds_only(current, looser.model_copy(update={"filtered": looser.filtered.model_copy(
        update={"measure": "every_document"})})) is None
