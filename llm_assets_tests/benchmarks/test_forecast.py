"""benchmarks/forecast.py: the comparison of a forecast with what ran, as its report renders it, and the held-back
half of a crawl it builds."""

import polars as pl
import pytest

from benchmarks.forecast import Flow, met, render_flow, summary_row, worst
from llm_assets.core.forecast import StageForecast, with_actuals
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.test_forecast import forecast_of, rows


def test_the_comparison_with_what_ran_and_its_rendering():
    fc = forecast_of(StageForecast("documents", 1, 2, 1_000, 10 / 3600, 5 / 3600, 400, 20, 0.0, "ledger"),
                     StageForecast("filtered", 1, 2, 400, 6 / 3600, 1 / 3600, 100, 10, 0.0, "ledger"),
                     StageForecast("tokenized", 1, 1, 100, 1 / 3600, 1 / 3600, 50, 5, 0.0, "ledger"))
    # documents: 8 CPU-s in two units of one partition, 4 + 6 wall-s over 2 slots; filtered 5 CPU-s; tokenized none
    actual = rows(("documents", "C", "0000", 3.0, 4.0, 500, 150, 10),
                  ("documents", "C", "0000", 5.0, 6.0, 500, 150, 10), ("filtered", "C", "0000", 5.0, 2.0, 300, 100, 10),
                  ("tokenized", "C", "0000", 0.1, 0.1, 100, 20, 4))  # too short to judge: +900 %, shown only
    cmp = with_actuals(fc, actual)
    by = {r["asset"]: r for r in cmp.iter_rows(named=True)}
    assert by["documents"]["cpu_s_error"] == pytest.approx(10 / 8 - 1)
    assert by["documents"]["wall_s_actual"] == pytest.approx(5.0)
    assert by["documents"]["wall_s_error"] == pytest.approx(0)
    assert by["documents"]["bytes_out_error"] == pytest.approx(400 / 300 - 1)
    assert by["filtered"]["cpu_s_error"] == pytest.approx(0.2) and by["tokenized"]["cpu_s_error"] == pytest.approx(9)
    assert worst(cmp) == ("documents", pytest.approx(0.25)) and met(cmp)
    assert not met(cmp.with_columns(pl.when(pl.col("asset") == "filtered").then(0.3).otherwise(pl.col("cpu_s_error"))
                                    .alias("cpu_s_error")))
    flow = Flow("demo `--change`", cmp)
    text = render_flow(flow)
    assert "| documents | ledger | 2 / 2 | 10.0 / 8.0 | +25 % |" in text
    assert "worst stage (CPU): documents +25 %" in text and text.rstrip().endswith("met")
    assert "| tokenized (not judged) | ledger |" in text
    row = summary_row(flow, "change", "make bench-forecast")
    assert row.key == "forecast:change" and row.met == "yes" and row.current.startswith("worst documents +25 %")


def test_a_forecast_with_no_history_is_judged_on_its_total_within_four_times():
    fc = forecast_of(StageForecast("documents", 1, 2, 1_000, 3 / 3600, 5 / 3600, 400, 20, 0.0, "default"),
                     StageForecast("filtered", 1, 2, 400, 1 / 3600, 1 / 3600, 100, 10, 0.0, "default"))
    actual = rows(("documents", "C", "0000", 6.0, 4.0, 500, 150, 10), ("filtered", "C", "0000", 6.0, 2.0, 300, 100, 10))
    flow = Flow("first crawl", with_actuals(fc, actual))  # 4 CPU-s forecast, 12 ran: a third
    assert render_flow(flow).rstrip().endswith("total 4.0 / 12.0 CPU-s = 0.33× the cost; goal (within 4× either "
                                               "way): met")
    row = summary_row(flow, "first-crawl", "make bench-forecast")
    assert row.met == "yes" and row.target == "within 4× either way" and "filtered -83 %" in row.current
    low = with_actuals(fc, rows(("documents", "C", "0000", 30.0, 4.0, 500, 150, 10)))  # 4 CPU-s forecast, 30 ran
    assert summary_row(Flow("first crawl", low), "first-crawl", "make bench-forecast").met == "no"


def test_the_held_back_half_of_a_crawl_is_every_other_record_of_each_file(tmp_path):
    from benchmarks.forecast import split_records
    from llm_assets.core.documents import DocumentsSettings, reader_settings
    from llm_assets.core.readers import ReadReport, read_records

    source = shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz")
    halves = (tmp_path / "a.warc.gz", tmp_path / "b.warc.gz")
    split_records(source, halves)
    assert sum(h.stat().st_size for h in halves) == source.stat().st_size

    def urls(path):
        with path.open("rb") as f:
            return [r.url for r in read_records(f, path.name, reader_settings(DocumentsSettings()), ReadReport())]

    a, b = urls(halves[0]), urls(halves[1])
    assert a and b and not set(a) & set(b) and sorted(a + b) == sorted(urls(source))
