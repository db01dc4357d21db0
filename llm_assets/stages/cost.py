"""The `cost` stage: what building a crawl cost, one partition per crawl, built from the cost ledger, not from parts."""

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import polars as pl

from llm_assets import charts
from llm_assets.core.keys import CRAWL_LEVEL_SHARD, split_partition
from llm_assets.core.ledger import CostSettings, ledger_keys, runner_costs, scan_ledger, stage_costs
from llm_assets.core.partition import FrameOutput, read_manifest
from llm_assets.core.units import InProcessRunner, UnitResult, peak_rss_bytes, s3_requests
from llm_assets.core.versions import code_version, digest
from llm_assets.registry import CODE, MISSING, UPSTREAM, StageSpec
from llm_assets.report import MIB, Markdown, Report, in_mib, rounded, significant
from llm_assets.stage import Built, CrawlStage, Partition

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake
    from llm_assets.registry import Planner
    from llm_assets.settings import Settings

NAME = "cost"
STAGE_VERSION = "1"
LEDGER = "cost ledger"  # what a new ledger row makes stale: "upstream data changed (cost ledger)"


def cost_version(settings: "Settings") -> str:
    """The stage and its prices: a new price is new money figures."""
    return code_version(STAGE_VERSION, settings.cost.fingerprint())


def charged(specs) -> list[str]:
    """The stages whose units the ledger charges per crawl: every shard and crawl stage but this one."""
    return [s.name for s in specs if s.level in ("shard", "crawl") and s.name != NAME]


def ledger_version(lake: "Lake", crawl: str, assets: list[str]) -> tuple[str, list[str]]:
    """The version of a crawl's ledger (its objects' keys: appended, never rewritten) and those keys."""
    keys = ledger_keys(lake, assets, [crawl])
    return digest(*keys), keys


def _plan(planner: "Planner", crawl: str | None, _shard: str | None) -> str | None:
    """Stale when the crawl's ledger has objects the last build did not aggregate, or will have: a stage of the crawl
    is planned (its rebuild appends to the ledger; the backfill builds this stage after it, its dependency)."""
    assert crawl is not None
    if rebuilt := next((a for a, p in planner.planned if a != NAME and split_partition(p)[0] == crawl), None):
        return f"{UPSTREAM} ({rebuilt} is rebuilt)"
    now, keys = planner.memo((NAME, crawl), lambda: ledger_version(
        planner.lake, crawl, charged(planner.specs.values())))
    built = planner.manifest(NAME, crawl, CRAWL_LEVEL_SHARD)
    if built is None:
        return MISSING if keys else None
    if planner.code_changed(NAME, built):
        return CODE
    return f"{UPSTREAM} ({LEDGER})" if built.data_version != now else None


READERS = 16  # manifests read at once


def stored_bytes(lake: "Lake", crawl: str, levels: Mapping[str, str], shards: list[str]) -> dict[str, int]:
    """Bytes each stage keeps committed for the crawl now: what its units wrote, summed over the parts its current
    manifests list (superseded parts awaiting the vacuum are not counted)."""
    wanted = [(a, s) for a, level in levels.items() for s in (shards if level == "shard" else [CRAWL_LEVEL_SHARD])]
    with ThreadPoolExecutor(READERS) as pool:
        manifests = pool.map(lambda p: read_manifest(lake, p[0], crawl, p[1]), wanted)
        stored: dict[str, int] = {}
        for (asset, _), m in zip(wanted, manifests, strict=True):
            if m is not None:
                stored[asset] = stored.get(asset, 0) + sum(u.bytes_out for u in m.units)
    return stored


# Last in the registry: it is planned after every stage whose rebuild it waits for.
SPEC = StageSpec(NAME, "crawl", version=cost_version, plan=_plan, group="reports", job="cost_job")


def charged_levels(specs: Sequence[StageSpec]) -> dict[str, str]:
    """The charged stages (`charged`) and their levels, in registry order."""
    names = charged(specs)
    return {s.name: s.level for s in specs if s.name in names}


def shown(stages: pl.DataFrame) -> pl.DataFrame:
    """The per-stage table as the panel shows it: bytes in MiB, floats to three digits, and only what fits its
    width (wall-hours are by_runner's; money is its total; the rest is the stored part's)."""
    columns = ["asset", "units", "cpu_hours", "peak_mib", "read_mib", "written_mib", "stored_mib", "requests",
               "cpu_h_per_m_docs", *(["cost_total"] if "cost_total" in stages.columns else [])]
    return in_mib(rounded(stages), {"peak_rss_bytes": "peak_mib", "bytes_in": "read_mib", "bytes_out":
                                    "written_mib", "stored_bytes": "stored_mib"}).rename(
        {"cpu_hours_per_million_docs": "cpu_h_per_m_docs"}).select(columns)


def cpu_hours_by_crawl(lake: "Lake", levels: Mapping[str, str]) -> pl.DataFrame:
    """Every crawl's CPU-hours per stage, from the whole ledger: a row per crawl, a column per stage."""
    return (scan_ledger(lake, ledger_keys(lake, list(levels))).filter(pl.col("crawl") != "")
            .group_by("crawl", "asset").agg(cpu_hours=pl.col("cpu_s").sum() / 3600).collect()
            .pivot(on="asset", index="crawl", values="cpu_hours").sort("crawl").fill_null(0.0))


def cost_report(crawl: str, stages: pl.DataFrame, runners: pl.DataFrame, crawls: pl.DataFrame,
                prices: CostSettings, levels: Mapping[str, str], ledger_objects: int) -> Report:
    """The crawl's totals (money too, when priced), the tables by stage and by runner, and the charts: cost (or
    CPU-hours) per stage, every crawl's CPU-hours per stage."""
    per_stage = stages.filter(pl.col("asset") != "total")
    total = stages.row(-1, named=True)
    priced = "cost_total" in stages.columns
    return {
        "dagster/row_count": per_stage.height,
        "units": total["units"],
        "cpu_hours": significant(total["cpu_hours"]),
        "wall_hours": significant(total["wall_hours"]),
        "requests": total["requests"],
        "stored_mib": significant(total["stored_bytes"] / MIB),
        **({"cost_total": round(total["cost_total"], 6), "currency": prices.currency} if priced else {}),
        # shown rounded: the exact sums are the stored part's (and the ledger's)
        "by_stage": shown(stages),
        "by_runner": rounded(runners),
        "cost_chart": Markdown(charts.hbars(
            f"{crawl}: {'cost' if priced else 'CPU-hours'} per stage" + (
                f" ({prices.currency}: CPU, a month of storage, requests)" if priced else " (no prices set)"),
            per_stage["asset"].to_list(), per_stage["cost_total" if priced else "cpu_hours"].to_list(),
            prices.currency if priced else "CPU-hours", counts=False)),
        "crawls_chart": Markdown(charts.stacked(
            "CPU-hours per crawl and stage (every crawl in the ledger)", crawls["crawl"].to_list(),
            {a: crawls[a].to_list() for a in levels if a in crawls.columns},
            "CPU-hours", counts=False, legend_below=True)),
        "ledger_objects": ledger_objects,
        "storage": "bytes of the parts the crawl's current manifests list (superseded parts not counted)",
    }


class Cost(CrawlStage):
    """What building the crawl cost, from the cost ledger (`ledger/costs/`: one row per work unit that ran, appended
    at each commit; units reused from an earlier commit are not charged again). Per stage: units, CPU-hours,
    wall-hours, highest peak memory, bytes read and written, S3 requests, CPU-hours per million documents read,
    and the bytes the stage keeps committed now (from its current manifests); per stage and runner; and, with
    prices under `cost:` in the settings, money: CPU, a month of storage, requests and the total. Charts: cost (or
    CPU-hours when unpriced) per stage, and every crawl's CPU-hours per stage. Stale when the crawl's ledger has
    rows it did not aggregate.
    """

    spec = SPEC
    kinds = frozenset({"parquet"})
    fan_in = False  # it reads the ledger and the manifests, not the parts

    def deps(self, settings: "Settings", specs: Sequence[StageSpec]) -> list[str]:
        """Every stage the ledger charges: the crawl's cost follows their builds."""
        return charged(specs)

    def build(self, p: Partition) -> Built:
        start, cpu, requests = time.perf_counter(), time.process_time(), s3_requests()
        lake, prices, levels = p.lake, p.settings.cost, charged_levels(p.specs)
        version, keys = ledger_version(lake, p.crawl, list(levels))
        mine = scan_ledger(lake, keys).collect()
        stages = stage_costs(mine, stored_bytes(lake, p.crawl, levels, p.settings.shard_keys()), prices, list(levels))
        report = cost_report(p.crawl, stages, runner_costs(mine), cpu_hours_by_crawl(lake, levels), prices, levels,
                             len(keys))
        # what aggregating the ledger cost, charged to the ledger like a unit's work
        work = UnitResult(unit="", source=f"{len(keys)} ledger objects", rows_in=mine.height,
                          seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu,
                          requests=s3_requests() - requests, peak_rss_bytes=peak_rss_bytes())
        return Built(FrameOutput(stages, SPEC.version(p.settings), version, work=work, runner=str(InProcessRunner())),
                     report)


STAGES = [Cost()]
