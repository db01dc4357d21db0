"""`make bench-crawl` end to end on a corpus of two shared WARC files, one crawl each, without datatrove (the `run`
fixture of conftest.py): a real store, code server and daemon of the benchmark's own home, as a user's run. One
shard, so the deployment makes few runs (the cost of this test is Dagster's per-run start-up, not the pages)."""

from __future__ import annotations

import json
import subprocess
import sys

from llm_assets.settings import PROJECT_ROOT
from llm_assets_tests.benchmarks.conftest import CRAWLS


def test_every_stage_that_ran_has_a_row_with_its_costs(run):
    results, _, _, _ = run
    stages = {s["asset"]: s for s in results["stages"]}
    assert {"documents", "filtered", "deduplicated", "tokenized"} <= set(stages)
    for s in stages.values():
        assert s["units"] > 0 and s["runs"] > 0 and s["peak_unit_rss_bytes"] > 0, s
    assert stages["documents"]["cpu_s"] > 0 and stages["documents"]["cpu_s_per_page"] > 0
    whole = results["whole"]
    assert results["pages"] > 0 and whole["cpu_s"] > whole["unit_cpu_s"] > 0
    assert whole["dagster_cpu_s"] > 0 and 0 < whole["dagster_share"] < 1
    # the deployment's processes were told apart: a daemon, a code server and run workers each spent CPU
    cpu = whole["cpu_by_process"]
    assert cpu["daemon"] > 0 and cpu["code_server"] > 0 and cpu["run_worker"] > 0, cpu
    phases = {p["name"]: p for p in results["phases"]}
    assert list(phases) == ["start TEST-A", "models", "lake TEST-A", "backfill TEST-A", "stop TEST-A",
                            "forecast TEST-B", "start TEST-B", "lake TEST-B", "backfill TEST-B", "stop TEST-B"]
    assert phases["models"]["runs"] == 2  # curation_job, and release_job for the tokenizer
    for crawl in CRAWLS:
        # the daemon's first tick may request crawl B's runs (dropped while it was down) before it is said ready
        lake = [phases[f"start {crawl}"], phases[f"lake {crawl}"]]
        assert sum(p["runs"] for p in lake) > 0 and sum(p["unit_cpu_s"] for p in lake) > 0, lake
        assert phases[f"backfill {crawl}"]["runs"] > 0 and phases[f"backfill {crawl}"]["unit_cpu_s"] > 0
    # nothing built crawl B before its forecast: the daemon was down
    assert phases["forecast TEST-B"]["runs"] == 0 and phases["forecast TEST-B"]["cpu_s"]["run_worker"] == 0


def test_every_record_is_accounted_for(run):
    results, _, _, _ = run
    accounts = results["accounting"]
    assert {a["crawl"] for a in accounts} == set(CRAWLS)
    for a in accounts:
        outcomes = a["documents"] + sum(a["set_aside"].values()) + sum(a["quarantined"].values()) + sum(
            a["skipped"].values())
        assert a["read"] == outcomes > 0 and a["balanced"], a
        assert a["written_documents"] == a["documents"]
    assert any(a["skipped"] for a in accounts)  # WARC requests and metadata records are read and skipped


def test_crawl_b_is_forecast_before_it_is_built_and_compared(run):
    results, _, _, _ = run
    forecast = results["forecast"]
    assert forecast["crawl"] == "TEST-B" and forecast["history"] == "TEST-A"
    by_stage = {x["asset"]: x for x in forecast["comparison"]}
    assert by_stage["documents"]["basis"] == "ledger"  # forecast from crawl A's rows in the ledger
    assert by_stage["documents"]["cpu_s_actual"] > 0 and by_stage["documents"]["units_actual"] > 0
    assert forecast["judged"] == []  # nothing this small reaches 60 CPU-s


def test_the_report_and_the_summary_rows_are_written(run):
    _, output, done, _ = run
    details = output.parent / "benchmarks" / "results" / "crawl.md"
    text = details.read_text()
    for heading in ("### Per stage", "### Per phase", "### Forecast of TEST-B from TEST-A", "### Every record",
                    "### datatrove"):
        assert heading in text, heading
    assert "load average" in text and "commit" in text
    summary = output.read_text()
    assert "whole path through Dagster, CPU-ms per page" in summary and "records read = documents" in summary
    rows = json.loads((output.parent / "benchmarks" / "results" / "summary.json").read_text())
    assert {r["key"] for r in rows} == {"crawl:cpu-per-page", "crawl:unit-rss", "crawl:dagster-share",
                                        "crawl:forecast", "crawl:accounting"}  # the anchor's rows: not run
    assert "bench-crawl:" in done.stderr  # progress lines, timestamped


def test_a_run_published_again_from_its_json_under_another_section(run, tmp_path):
    results, _, _, tmp = run
    output = tmp_path / "BENCHMARKS.md"
    done = subprocess.run([sys.executable, "-m", "benchmarks.crawl", "--from-json", str(tmp / "r.json"),
                           "--section", "crawl-slice", "--output", str(output)], cwd=PROJECT_ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    details = (tmp_path / "benchmarks" / "results" / "crawl-slice.md").read_text()
    assert "<!-- crawl-slice:begin -->" in details and "### Per stage" in details
    rows = json.loads((tmp_path / "benchmarks" / "results" / "summary.json").read_text())
    assert {r["key"] for r in rows} == {f"crawl-slice:{k}" for k in (
        "cpu-per-page", "unit-rss", "dagster-share", "forecast", "accounting")}
    c = results["conditions"]
    assert all(r["measured"] == f"{c['started'][:10]}, {c['commit']}" and r["details"] == "crawl-slice.md"
               and r["measure"].endswith("[corpus]") for r in rows)
