"""`make bench-crawl` end to end on a corpus of two shared WARC files, one crawl each, without datatrove: a real store,
code server and daemon of the benchmark's own home, as a user's run. One shard, so the deployment makes few runs (the
cost of this test is Dagster's per-run start-up, not the pages). On the same run's lake: the forecast replayed after
the fact (benchmarks/crawl_forecast.py) and the report published again from its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llm_assets.settings import DEFAULT_SETTINGS, PROJECT_ROOT
from llm_assets_support.shared_data import shared

CRAWLS = {"TEST-A": "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz", "TEST-B": "dolma__sample-0000.warc.gz"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`python -m benchmarks.crawl` without datatrove on a corpus of two shared WARC files, one crawl each, one
    shard: (its results, its BENCHMARKS.md, the finished process); its work folder is `tmp/work`."""
    tmp = tmp_path_factory.mktemp("bench-crawl")
    corpus = tmp / "corpus"
    manifest = {"crawls": {}, "counts": {}}
    for crawl, name in CRAWLS.items():
        (corpus / "crawls" / crawl).mkdir(parents=True)
        (corpus / "crawls" / crawl / name).symlink_to(shared("warc", name))
        manifest["crawls"][crawl] = [f"crawls/{crawl}/{name}"]
    (corpus / "manifest.json").write_text(json.dumps(manifest))  # counts: none recorded, tolerated
    settings = yaml.safe_load(DEFAULT_SETTINGS.read_text())
    settings["shards"] = 1
    (tmp / "settings.yaml").write_text(yaml.safe_dump(settings, sort_keys=False, allow_unicode=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LLM_ASSETS_", "DAGSTER_", "DASK_"))}
    env["LLM_ASSETS_SETTINGS"] = str(tmp / "settings.yaml")
    output = tmp / "BENCHMARKS.md"
    done = subprocess.run([sys.executable, "-m", "benchmarks.crawl", "--corpus", str(corpus), "--work",
                           str(tmp / "work"), "--no-anchor", "--output", str(output), "--json", str(tmp / "r.json")],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1800,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((tmp / "r.json").read_text()), output, done, tmp


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
    # the anchor's rows: not run
    assert {r["key"] for r in rows} == {"crawl:cpu-per-page", "crawl:unit-rss", "crawl:dagster-share",
                                        "crawl:forecast", "crawl:dump", "crawl:accounting"}
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
    assert rows == []  # a slice publishes datatrove's rows only, and this run had no datatrove


def test_the_replay_reproduces_the_forecast_the_run_made(run, tmp_path):
    """With the code that made it, the replay makes the same forecast: so a change to the forecast's rules can be
    judged on a run's lake without running it again."""
    _, _, _, tmp = run
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LLM_ASSETS_", "DAGSTER_", "DASK_"))}
    env |= {"LLM_ASSETS_SETTINGS": str(tmp / "settings.yaml"), "LLM_ASSETS_HOME": str(tmp / "work" / "home")}
    llm_assets = [str(Path(sys.executable).with_name("llm-assets"))]
    subprocess.run([*llm_assets, "store", "start"], env=env, check=True, capture_output=True, cwd=PROJECT_ROOT)
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.crawl_forecast", "--work", str(tmp / "work"),
                               "--json", str(tmp_path / "replay.json")], env=env, cwd=PROJECT_ROOT,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
    finally:
        subprocess.run([*llm_assets, "store", "stop"], env=env, check=False, capture_output=True, cwd=PROJECT_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads((tmp_path / "replay.json").read_text())
    then, now = ({r["asset"]: r for r in got[k]} for k in ("then", "now"))
    assert then.keys() == now.keys() and "documents" in now
    for asset, r in now.items():
        assert r["units_forecast"] == then[asset]["units_forecast"], asset
        assert r["bytes_out_forecast"] == then[asset]["bytes_out_forecast"], asset
        assert r["cpu_s_forecast"] == pytest.approx(then[asset]["cpu_s_forecast"], rel=1e-9), asset
        assert [r[k] for k in ("cpu_s_actual", "bytes_out_actual")] == [
            then[asset][k] for k in ("cpu_s_actual", "bytes_out_actual")], asset
    assert "| documents |" in done.stdout
