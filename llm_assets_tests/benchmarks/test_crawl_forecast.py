"""The held-back crawl's forecast replayed after the fact (benchmarks/crawl_forecast.py) on the lake of a whole
`make bench-crawl` run (the `run` fixture of conftest.py): with the code that made it, the replay makes the same
forecast, so a change to the forecast's rules can be judged on a run's lake without running it again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_assets.settings import PROJECT_ROOT


def test_the_replay_reproduces_the_forecast_the_run_made(run, tmp_path):
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
