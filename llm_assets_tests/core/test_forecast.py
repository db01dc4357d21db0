"""Backfill forecasts: the rates a ledger gives, the table, the tags, the comparison with what ran (core), and a
forecast on a real store after a threshold change (servers)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from llm_assets.core.forecast import DEFAULT_RATES, FORECAST_TAG, Estimator, Forecast, Rates, StageForecast
from llm_assets.core.ledger import LEDGER_COLUMNS, LedgerRow, empty_ledger
from llm_assets_tests.core.test_dedup import curated, dedup_defs  # noqa: F401 (fixtures)


def rows(*specs: tuple) -> pl.DataFrame:
    """Ledger rows: (asset, crawl, shard, cpu_s, wall_s, bytes_in, bytes_out, requests)."""
    out = [LedgerRow(asset=a, crawl=c, shard=s, unit=f"{i:08x}", source="raw/x", runner="pool", committed_at=1.0 + i,
                     cpu_s=cpu, wall_s=wall, peak_rss_bytes=0, bytes_in=bin_, bytes_out=bout, requests=req,
                     rows_in=0, rows_out=0)
           for i, (a, c, s, cpu, wall, bin_, bout, req) in enumerate(specs)]
    return pl.DataFrame([r.__dict__ for r in out]).select(LEDGER_COLUMNS)


def test_rates_are_a_line_through_the_ledger_rows_per_stage_and_the_defaults_elsewhere():
    ledger = rows(("documents", "C", "0000", 3.0, 4.0, 1_000, 200, 10),
                  ("documents", "C", "0001", 7.0, 4.0, 3_000, 600, 14),
                  ("crawl_stats", "C", "all", 1.5, 1.0, 0, 10, 2),  # read no bytes: priced per unit
                  ("signatures", "C", "0000", 2.0, 1.0, 1_000, 10, 2),
                  ("signatures", "C", "0001", 1.0, 1.0, 3_000, 10, 2))
    rates = Rates.from_ledger(ledger)
    docs = rates.of("documents")  # CPU 1 s a unit + 2 ms a KB; wall 4 s a unit; 0.2 bytes out a byte in
    assert (docs.cpu_s_per_byte, docs.cpu_s_per_unit, docs.wall_s_per_unit, docs.out_per_in, docs.requests_per_unit,
            docs.basis) == (pytest.approx(0.002), pytest.approx(1.0), 4.0, pytest.approx(0.2), 12.0, "ledger")
    assert docs.cpu_s(2_000, 1) == pytest.approx(5.0)
    assert docs.wall_s(2_000, 2) == 8.0 and docs.bytes_out(2_000, 1) == 400
    stats = rates.of("crawl_stats")
    assert stats.basis == "ledger" and stats.cpu_s(0, 3) == 4.5 and stats.bytes_out(0, 3) == 30
    # more bytes for less CPU: no negative price per byte, the mean per unit
    assert rates.of("signatures").cpu_s_per_byte == 0 and rates.of("signatures").cpu_s(10**6, 2) == 3.0
    assert rates.of("tokenized") == DEFAULT_RATES["tokenized"] and rates.of("tokenized").basis == "default"
    assert Rates.from_ledger(empty_ledger()).of("filtered") == DEFAULT_RATES["filtered"]


def test_a_stage_reads_its_inputs_bytes_as_its_history_read_them():
    """The bytes a never-built partition will read are its inputs' bytes times what the stage read per byte they
    wrote in the crawls where both ran (its rates are per byte read): enriched read 2 bytes a byte deduplicated
    wrote in crawl A; crawl B, where it did not run, does not count. Without history: the bytes as written."""
    ledger = rows(("deduplicated", "A", "0000", 1.0, 1.0, 5_000, 1_000, 2),
                  ("deduplicated", "A", "0001", 1.0, 1.0, 5_000, 3_000, 2),
                  ("deduplicated", "B", "0000", 1.0, 1.0, 5_000, 9_000, 2),
                  ("enriched", "A", "0000", 4.0, 4.0, 2_000, 100, 2),
                  ("enriched", "A", "0001", 12.0, 12.0, 6_000, 300, 2))
    est = Estimator(None, 2, Rates.from_ledger(ledger), {}, None, ledger)  # type: ignore[arg-type]
    assert est.read_per_written("enriched", ("deduplicated",)) == pytest.approx(2.0)
    assert est.read_per_written("tokenized", ("deduplicated",)) == 1.0


def forecast_of(*stages: StageForecast, priced: bool = False) -> Forecast:
    return Forecast(list(stages), "pool of 2 workers", 2, "EUR", priced)


def test_the_total_table_json_and_tags_agree():
    fc = forecast_of(StageForecast("documents", 2, 5, 2_000_000, 0.5, 0.25, 400_000, 60, 1.5, "ledger"),
                     StageForecast("filtered", 2, 5, 400_000, 0.25, 0.125, 200_000, 40, 0.5, "default"), priced=True)
    total = fc.total
    assert (total.asset, total.partitions, total.units, total.cpu_hours, total.bytes_out, total.requests, total.cost,
            total.basis) == ("total", 4, 10, 0.75, 600_000, 100, 2.0, "default+ledger")
    text = fc.render()
    lines = text.splitlines()
    assert "pool of 2 workers" in lines[0] and lines[1].split()[:3] == ["stage", "partitions", "units"]
    assert [line.split()[0] for line in lines[3:]] == ["documents", "filtered", "total"]
    assert lines[-1].split()[5:7] == ["0.750000", "0.375000"] and "2.00 EUR" in lines[-1]
    assert json.loads(json.dumps(fc.to_json()))["total"]["cpu_hours"] == 0.75
    assert fc.to_tags() == {FORECAST_TAG: "0.750000 CPU-h · 0.375000 h wall · 600.0 KB out · 100 requests · "
                                          "2.00 EUR (default+ledger)"}
    unpriced = forecast_of(*fc.stages)
    assert "EUR" not in unpriced.to_tags()[FORECAST_TAG] and "unpriced" in unpriced.render().splitlines()[-1]


def test_a_forecast_on_the_real_store_after_a_threshold_change(curated, instance, crawl, object_store, tmp_path,
                                                                monkeypatch, capsys):  # noqa: F811
    import dagster as dg

    from llm_assets import cli
    from llm_assets.cli import demo
    from llm_assets.core.forecast import forecast
    from llm_assets.core.partition import read_manifest
    from llm_assets.dagster.freshness import launch_stale_backfill, stale_backfill
    from llm_assets.definitions import build_defs
    from llm_assets.settings import DEFAULT_SETTINGS, Settings
    from llm_assets.stages import SPECS
    from llm_assets.tools.stale import CODE, stale_partitions

    lake = curated
    path = demo.write_changed_settings(DEFAULT_SETTINGS, tmp_path)  # Gopher's min_doc_words 50 → 80
    monkeypatch.setenv("LLM_ASSETS_SETTINGS", str(path))
    settings = Settings.from_file(path)
    # this test's crawl (others share the bucket); the release, the enrichment and the cost are not built here
    planned = [p for p in stale_partitions(instance, lake, settings)
               if p.partition.split("|")[0] == crawl and p.asset not in ("release", "enriched", "cost")]
    fc = forecast(lake, settings, planned, stages=SPECS)
    assert [s.asset for s in fc.stages] == list(dict.fromkeys(p.asset for p in planned))
    assert {s.asset for s in fc.stages} == {"filtered", "signatures", "crawl_stats", "duplicate_clusters",
                                            "deduplicated", "tokenized"}
    assert all(s.basis == "ledger" and s.cpu_hours > 0 and s.units > 0 for s in fc.stages), fc.render()
    by = {s.asset: s for s in fc.stages}
    rebuilt = [p for p in planned if p.asset == "filtered"]
    assert rebuilt and all(p.cause == CODE for p in rebuilt)
    recorded = [read_manifest(lake, "filtered", *p.partition.split("|")) for p in rebuilt]
    assert by["filtered"].input_bytes == sum(u.bytes_in for m in recorded if m for u in m.units) > 0
    assert by["filtered"].partitions == len(rebuilt) and fc.total.cpu_hours == pytest.approx(
        sum(s.cpu_hours for s in fc.stages))

    # the stale sensor's backfill carries the forecast of its (whole-bucket) plan; then a launched backfill ours
    defs = build_defs(settings)
    with dg.build_sensor_context(instance=instance, resources={"store": object_store}, definitions=defs) as ctx:
        defs.resolve_sensor_def("stale_sensor")(ctx)
    by_sensor = stale_backfill(instance)
    assert by_sensor is not None and by_sensor.trigger == "sensor"
    assert float(by_sensor.tags[FORECAST_TAG].split()[0]) > 0
    backfill_id = launch_stale_backfill(instance, planned, forecast=fc)
    assert stale_backfill(instance, backfill_id).tags == fc.to_tags()

    assert cli.main(["stale", "--forecast", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    stages = {s["asset"]: s for s in out["forecast"]["stages"]}
    assert set(by) <= set(stages) and out["forecast"]["total"]["cpu_hours"] > 0
    assert stages["filtered"]["input_bytes"] >= by["filtered"].input_bytes
    assert cli.main(["backfill", "--stale", "--dry-run", "--forecast"]) == 0
    said = capsys.readouterr().out
    assert "\nforecast on the " in said and "\ntotal " in said and said.rstrip().endswith("(dry run: nothing launched)")
