"""What the lake holds, per asset of the code location: materialized partitions and rows (crawl × shard stages,
crawl-level stages, and the unpartitioned models and release), from the Dagster instance; and the raw keys that
will not be ingested, from one listing of `raw/`."""

from __future__ import annotations

import dagster as dg

from llm_assets.core.inventory import rejected_raw_keys
from llm_assets.core.lake import Lake
from llm_assets.partitions import crawl_partitions
from llm_assets.pipeline import ASSETS, SPECS
from llm_assets.registry import by_level
from llm_assets.settings import load_settings

STAGES = by_level(SPECS, "shard")
CRAWL_LEVEL = by_level(SPECS, "crawl")  # one partition per crawl, stored as its shard "all"
# Everything else is unpartitioned: the models and the release.
UNPARTITIONED = [k.path[-1] for a in ASSETS for k in a.keys if k.path[-1] not in STAGES + CRAWL_LEVEL]
REJECTED_SHOWN = 100  # raw keys listed by name; all are counted


def latest_materializations(instance: dg.DagsterInstance, asset: str) -> dict[str, dg.AssetMaterialization]:
    """partition key -> its latest materialization."""
    latest: dict[str, dg.AssetMaterialization] = {}
    cursor = None
    while True:
        result = instance.fetch_materializations(dg.AssetKey(asset), limit=1000, cursor=cursor)
        for record in result.records:
            m = record.asset_materialization
            if m is not None and m.partition and m.partition not in latest:
                latest[m.partition] = m
        if not result.has_more:
            return latest
        cursor = result.cursor


def latest_unpartitioned(instance: dg.DagsterInstance, asset: str) -> dg.AssetMaterialization | None:
    result = instance.fetch_materializations(dg.AssetKey(asset), limit=1)
    return result.records[0].asset_materialization if result.records else None


def _rows(m: dg.AssetMaterialization) -> int:
    value = m.metadata.get("rows_out") or m.metadata.get("dagster/row_count")
    return int(value.value) if value is not None else 0


# What an unpartitioned asset's line shows besides "materialized": metadata key -> label.
FACTS = {"tokens": "tokens", "sequences": "sequences", "documents": "documents", "vocab_size": "vocabulary",
         "train_examples": "training examples", "version": "version"}


def lake_status(instance: dg.DagsterInstance, lake: Lake | None = None) -> dict:
    """Crawls, and per asset materialized/total partitions and rows; with `lake`, also `rejected_raw_keys`:
    every raw key that will not be ingested (counted; the first REJECTED_SHOWN listed with the reason)."""
    crawls = sorted(instance.get_dynamic_partitions(crawl_partitions.name))
    shards = load_settings().shards
    assets = {}
    by_crawl: dict[str, dict[str, dict[str, int]]] = {}
    for asset in STAGES + CRAWL_LEVEL:
        latest = {p: m for p, m in latest_materializations(instance, asset).items() if p.split("|")[0] in crawls}
        assets[asset] = {"materialized": len(latest), "total": len(crawls) * (shards if asset in STAGES else 1),
                         "rows": sum(_rows(m) for m in latest.values())}
        for p, m in latest.items():
            cell = by_crawl.setdefault(asset, {}).setdefault(p.split("|")[0], {"partitions": 0, "rows": 0})
            cell["partitions"] += 1
            cell["rows"] += _rows(m)
    for asset in UNPARTITIONED:
        m = latest_unpartitioned(instance, asset)
        facts = {k: m.metadata[k].value for k in FACTS if m is not None and k in m.metadata}
        assets[asset] = {"materialized": int(m is not None), "total": 1, "rows": _rows(m) if m else 0, **facts}
    status = {"crawls": crawls, "assets": assets, "by_crawl": by_crawl}
    if lake is not None:
        count, shown = rejected_raw_keys(lake, REJECTED_SHOWN)
        status["rejected_raw_keys"] = {"count": count, "keys": [r.to_dict() for r in shown]}
    return status


def format_summary(status: dict) -> str:
    crawls = status["crawls"]
    header = ["stage", *crawls, "total"]
    rows = []
    for asset, totals in status["assets"].items():
        if asset in UNPARTITIONED:
            facts = [f"{label} {totals[k]:,}" if isinstance(totals[k], int) else f"{label} {totals[k]}"
                     for k, label in FACTS.items() if k in totals]
            rows.append([asset, *([""] * len(crawls)),
                         ", ".join(["materialized" if totals["materialized"] else "not materialized", *facts])])
            continue
        cells = [status["by_crawl"].get(asset, {}).get(c, {"rows": 0, "partitions": 0}) for c in crawls]
        rows.append([asset, *(f"{c['rows']:,} rows, {c['partitions']} partition{'s' * (c['partitions'] != 1)}" for c in cells),
                     f"{totals['rows']:,} rows, {totals['materialized']}/{totals['total']} partitions"])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths))  # noqa: E731
    lines = [fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)]
    if rejected := status.get("rejected_raw_keys", {}).get("count"):
        lines += ["", f"{rejected:,} raw key{'s' * (rejected != 1)} will not be ingested "
                      "(`llm-assets status` lists them with the reason)"]
    return "\n".join(lines)


def format_rejected(status: dict) -> str:
    """The raw keys that will not be ingested, one reason a line (each names its key, escaped)."""
    rejected = status.get("rejected_raw_keys") or {"count": 0, "keys": []}
    lines = [f"  {r['reason']}" for r in rejected["keys"]]
    if rejected["count"] > len(rejected["keys"]):
        lines.append(f"  … and {rejected['count'] - len(rejected['keys']):,} more")
    return "\n".join(lines)
