"""The held-back crawl's forecast made again, after the fact, by the current code: from the lake as it stood when the
forecast was made (the second crawl's raw files dropped, none of its partitions built) and the ledger of the first
crawl only, against what building the second crawl cost.

    LLM_ASSETS_HOME=.bench/crawl/home .venv/bin/python -m benchmarks.crawl_forecast [--work .bench/crawl]

`make bench-crawl` saves its forecast (`forecast.json`: the stale plan and its figures, made by the code of its
run). After a change to the forecast's rules, this replays the same plan on the same lake without a new run of an
hour: the lake is read through `LakeAsOf`, which hides every lake object of the held-back crawl (its manifests,
parts and ledger rows), so the estimator sees exactly what it saw then. The store of the run's home must be up
(`llm-assets store start` with that `LLM_ASSETS_HOME`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import polars as pl

from benchmarks.crawl import pct

ROOT = Path(__file__).resolve().parent.parent


class LakeAsOf:
    """A lake without one crawl's lake objects (everything under `lake/*/crawl=<crawl>/`); its raw files stay (the
    ledger's later rows are left out by `replay`, which passes the forecast the rows from before). Reads only:
    anything else goes to the lake itself."""

    def __init__(self, lake, crawl: str):
        self._lake, self._hidden = lake, f"/crawl={crawl}/"

    def _visible(self, key: str) -> bool:
        return not (key.startswith("lake/") and self._hidden in key)

    def get_json(self, key: str) -> dict | None:
        return self._lake.get_json(key) if self._visible(key) else None

    def list(self, prefix: str, start_after: str = ""):
        return (o for o in self._lake.list(prefix, start_after) if self._visible(o.key))

    def folders(self, prefix: str) -> list[str]:
        return [f for f in self._lake.folders(prefix) if self._visible(f"{prefix}{f}/")]

    def __getattr__(self, name: str):
        return getattr(self._lake, name)


def replay(lake, settings, saved: dict, ledger: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The saved plan's forecast against what its partitions cost: as the run made it (`then`), and as the current
    code makes it again from the lake and the ledger as of the saved drop (`now`)."""
    from benchmarks.crawl import forecast_comparison, planned_rows
    from llm_assets.core.forecast import forecast, with_actuals
    from llm_assets.core.keys import split_partition
    from llm_assets.stages import SPECS

    since = saved["dropped_at"]
    planned = [SimpleNamespace(asset=p["asset"], partition=p["partition"] or "", cause=p["cause"])
               for p in saved["partitions"]]
    targets = {(p.asset, *split_partition(p.partition)) for p in planned}
    held_back = {crawl for _, crawl, _ in targets if crawl}  # the release is of every crawl
    if len(held_back) != 1:
        raise SystemExit(f"the saved plan covers {sorted(held_back)}: one held-back crawl expected")
    fc = saved["forecast"]
    made = forecast(LakeAsOf(lake, held_back.pop()), settings, planned, stages=SPECS,
                    ledger=ledger.filter(pl.col("committed_at") < since), slots=fc["slots"], runner=fc["runner"])
    return forecast_comparison(lake, saved, since), with_actuals(made, planned_rows(ledger, saved, since))


def render(now: pl.DataFrame, then: pl.DataFrame) -> str:
    lines = ["| stage | CPU-s actual | forecast then | error | forecast now | error | bytes out actual | then | "
             "error | now | error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by = {r["asset"]: r for r in then.iter_rows(named=True)}
    for r in now.iter_rows(named=True):
        t = by.get(r["asset"], {})
        lines.append(f"| {r['asset']} | {r['cpu_s_actual']:,.1f} | {t.get('cpu_s_forecast', 0):,.1f} | "
                     f"{pct(t.get('cpu_s_error'))} | {r['cpu_s_forecast']:,.1f} | {pct(r['cpu_s_error'])} | "
                     f"{r['bytes_out_actual']:,} | {t.get('bytes_out_forecast', 0):,} | {pct(t.get('bytes_out_error'))}"
                     f" | {r['bytes_out_forecast']:,} | {pct(r['bytes_out_error'])} |")
    return "\n".join(lines)


def main() -> None:
    from llm_assets.core.lake import Lake
    from llm_assets.core.ledger import read_ledger
    from llm_assets.platform.environment import store_config
    from llm_assets.settings import load_settings

    parser = argparse.ArgumentParser(prog="python -m benchmarks.crawl_forecast", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / ".bench" / "crawl")
    parser.add_argument("--json", type=Path, help="both comparisons, as JSON ({'then': rows, 'now': rows})")
    parser.add_argument("--output", type=Path, help="publish the replay (benchmarks/results/crawl-forecast.md and a "
                                                    "summary row) beside this BENCHMARKS.md")
    args = parser.parse_args()
    saved = json.loads((args.work / "forecast.json").read_text())
    settings = load_settings()
    lake = Lake(store_config(settings.store))
    then, now = replay(lake, settings, saved, read_ledger(lake))
    if args.json:
        args.json.write_text(json.dumps({"then": then.to_dicts(), "now": now.to_dicts()}, indent=1))
    body = render(now, then)
    print(body)
    if args.output:
        publish_replay(args.output, saved, now, body, " ".join(["LLM_ASSETS_HOME=<the run's home>",
                                                                 ".venv/bin/python -m benchmarks.crawl_forecast",
                                                                 *sys.argv[1:]]))


def publish_replay(output: Path, saved: dict, now: pl.DataFrame, table: str, command: str) -> None:
    from benchmarks.crawl import forecast_row, forecast_verdicts
    from benchmarks.harness import cpu_model, git_commit
    from benchmarks.summary import Row, publish

    judged, within, total = forecast_verdicts(now)
    fc = {"comparison": now.to_dicts(), "judged": judged, "stages_within": within, "total": total}
    body = "\n".join([
        "## The held-back crawl's forecast, replayed by the current code", "",
        f"Replayed at commit {git_commit()} ({cpu_model()}) on the lake of the bench-crawl run that saved "
        f"`forecast.json` ({len(saved['partitions'])} planned partitions), as of its drop: `then` is the forecast "
        "that run made with its own code, `now` the current code's on the same lake and history. Actual: what "
        "building the crawl cost (the ledger).", "", table, "",
        f"Total now: CPU-s {pct(total['errors']['cpu_s'])}, bytes out {pct(total['errors']['bytes_out'])}; judged "
        f"stages (≥ 60 CPU-s): {', '.join(judged) or 'none'}."])
    row: Row = forecast_row("crawl-forecast:replay", "forecast of the held-back crawl, replayed by the current "
                            "code on the bench-crawl lake", fc, command, "crawl-forecast.md")
    publish(output, "crawl-forecast", "<!-- crawl-forecast:begin -->", "<!-- crawl-forecast:end -->", body, [row])


if __name__ == "__main__":
    main()
