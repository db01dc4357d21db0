"""The cost ledger: one object per commit, only the units that ran, read back whole; requests counted per unit;
prices turned into money."""

from __future__ import annotations

import polars as pl
import pytest

from llm_assets.core.lake import InvalidKey, Lake
from llm_assets.core.ledger import (
    LEDGER_COLUMNS,
    CostSettings,
    LedgerRow,
    append_ledger,
    cost_of,
    ledger_frame,
    ledger_key,
    read_ledger,
    stage_costs,
)
from llm_assets.core.partition import PartitionOutput, commit, data_version
from llm_assets.core.units import UnitResult, WorkUnit, timed_unit, unit_id


def result(name: str, cpu: float, requests: int) -> UnitResult:
    return UnitResult(unit=unit_id(name), source=name, rows_in=10, rows_out=7, dropped={"x": 3}, bytes_in=1000,
                      bytes_out=300, seconds=2 * cpu, cpu_seconds=cpu, requests=requests, peak_rss_bytes=2**20)


def test_commits_append_the_units_that_ran_and_read_back(lake, crawl):
    a, b, c = result("a", 1.5, 4), result("b", 2.0, 6), result("c", 0.25, 1)
    first = PartitionOutput(units=[a, b], code_version="c1", data_version=data_version([a, b]), runner="pool(2)")
    manifest = commit(lake, "numbers", crawl, "0000", first)
    # b taken from the first commit: only c, which ran, is charged again
    commit(lake, "numbers", crawl, "0000", PartitionOutput(
        units=[b, c], code_version="c1", data_version=data_version([b, c]), runner="InProcessRunner()",
        reused=frozenset({b.unit})))
    commit(lake, "numbers", crawl, "0001", PartitionOutput(units=[b], data_version="v", reused=frozenset({b.unit})))
    ledger = read_ledger(lake, ["numbers"], [crawl]).sort("committed_at", "unit")
    assert ledger.columns == list(LEDGER_COLUMNS)
    assert sorted(ledger["source"]) == ["a", "b", "c"] and set(ledger["shard"]) == {"0000"}
    assert ledger.filter(pl.col("source") == "a").row(0, named=True) == {
        "asset": "numbers", "crawl": crawl, "shard": "0000", "unit": a.unit, "source": "a", "runner": "pool(2)",
        "committed_at": manifest.committed_at, "cpu_s": 1.5, "wall_s": 3.0, "peak_rss_bytes": 2**20,
        "bytes_in": 1000, "bytes_out": 300, "requests": 4, "rows_in": 10, "rows_out": 7}
    assert ledger.filter(pl.col("source") == "c")["runner"].to_list() == ["InProcessRunner()"]
    # one object per commit that charged anything, under ledger/costs/<asset>/crawl=<crawl>/
    keys = [o.key for o in lake.list(f"ledger/costs/numbers/crawl={crawl}/")]
    assert len(keys) == 2 and all(k.endswith(".parquet") for k in keys)
    # filters: another crawl's and an unpartitioned asset's rows are apart
    append_ledger(lake, [LedgerRow("release", "", "", "u", "s", "r", 1.0, 1, 1, 1, 1, 1, 1, 1, 1)])
    assert read_ledger(lake, ["numbers"], [crawl + "x"]).height == 0
    assert read_ledger(lake, ["numbers"], [crawl]).height == 3
    assert read_ledger(lake, ["nothing_here"]).columns == list(LEDGER_COLUMNS)
    assert read_ledger(lake, crawls=[crawl]).height == 3


def test_ledger_keys_are_validated():
    assert (ledger_key("filtered", "CC-1", 1.5, "ab12")
            == "ledger/costs/filtered/crawl=CC-1/000000000001500-ab12.parquet")
    for asset, crawl, token in (("../x", "CC", "a1"), ("filtered", "a/../b", "a1"), ("filtered", "CC", "../x")):
        with pytest.raises(InvalidKey):
            ledger_key(asset, crawl, 1.0, token)


@timed_unit
def put_and_get(unit: WorkUnit) -> UnitResult:
    lake = Lake(unit.store)
    lake.put_bytes(unit.source, b"x")
    lake.get_bytes(unit.source)
    return UnitResult(unit="", source=unit.source)


def test_a_unit_counts_its_s3_requests(store_config, crawl):
    done = put_and_get(WorkUnit(store=store_config, source=f"scratch/{crawl}/object"))
    assert done.requests == 2  # one PUT, one GET


def test_money_and_stage_totals():
    prices = CostSettings(core_hour=0.05, gib_month=0.02, thousand_requests=0.004, currency="EUR")
    assert cost_of(7200, 2**31, 5000, prices) == pytest.approx(0.1 + 0.04 + 0.02)
    assert cost_of(7200, 2**31, 5000, CostSettings()) == 0 and not CostSettings().priced
    rows = [LedgerRow("filtered", "C", s, unit_id(s), s, "pool(2)", 1.0, 1800.0, 900.0, 5 * 2**20, 10, 5, 2000, 500_000,
                      400_000) for s in ("0000", "0001")]
    rows.append(LedgerRow("documents", "C", "0000", "d", "raw", "pool(2)", 1.0, 3600.0, 3600.0, 2**20, 1, 1, 10, 1, 1))
    table = stage_costs(ledger_frame(rows), {"filtered": 2**30}, prices, ["documents", "filtered"])
    by = {r["asset"]: r for r in table.iter_rows(named=True)}
    assert table["asset"].to_list() == ["documents", "filtered", "total"]
    assert by["filtered"]["units"] == 2 and by["filtered"]["cpu_hours"] == pytest.approx(1.0)
    assert by["filtered"]["cpu_hours_per_million_docs"] == pytest.approx(1.0)  # 1 CPU-hour for 1M documents read
    assert by["filtered"]["cost_total"] == pytest.approx(0.05 + 0.02 + 4 * 0.004)
    assert by["total"]["cpu_hours"] == pytest.approx(2.0) and by["total"]["peak_rss_bytes"] == 5 * 2**20
    assert by["total"]["cost_total"] == pytest.approx(by["filtered"]["cost_total"] + by["documents"]["cost_total"])
    assert "cost_total" not in stage_costs(ledger_frame(rows), {}, CostSettings()).columns  # unpriced: no money
