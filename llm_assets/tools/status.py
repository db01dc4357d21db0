"""What the lake holds, per asset of the stage registry: committed partitions and rows (crawl × shard stages,
crawl-level stages), the latest build of the models and the release, and the raw keys that will not be ingested.

Read from the lake alone (its manifests are what a materialization commits), so `llm-assets status` starts
without Dagster."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from llm_assets.core.decontamination import eval_keys
from llm_assets.core.inventory import rejected_raw_keys
from llm_assets.core.keys import CRAWL_LEVEL_SHARD
from llm_assets.core.lake import Lake
from llm_assets.core.partition import read_manifest
from llm_assets.registry import by_level
from llm_assets.settings import Settings
from llm_assets.stages import SPECS
from llm_assets.tools.stale import known_crawls

STAGES = by_level(SPECS, "shard")
CRAWL_LEVEL = by_level(SPECS, "crawl")  # one partition per crawl, stored as its shard "all"
UNPARTITIONED = by_level(SPECS, "model", "release")
REJECTED_SHOWN = 100  # raw keys listed by name; all are counted
# the documents stage's reasons for a raw file it could not read (whole or from some point on)
FILE_FAULTS = ("unreadable_file", "truncated_file")
READERS = 16  # manifests read at once: a large lake has thousands

# What an unpartitioned asset's line shows besides "materialized": fact -> label.
FACTS = {"tokens": "tokens", "sequences": "sequences", "documents": "documents", "vocab_size": "vocabulary",
         "train_examples": "training examples", "requests": "requests", "eval_sets": "eval sets",
         "version": "version", "error": "error:"}


def lake_status(lake: Lake, settings: Settings, rejected: bool = True) -> dict:
    """Crawls (every crawl under raw/), per asset committed/total partitions and rows, the partitions a quality gate
    holds back; with `rejected`, also
    `rejected_raw_keys`: every raw key that will not be ingested (counted; the first REJECTED_SHOWN listed with
    the reason), and `unused_eval_keys`: every key under the eval sets' prefix that is not read, with the reason."""
    crawls = known_crawls(lake)
    shards = settings.shard_keys()
    wanted = [(a, c, s) for a in STAGES for c in crawls for s in shards] + [
        (a, c, CRAWL_LEVEL_SHARD) for a in CRAWL_LEVEL for c in crawls]
    with ThreadPoolExecutor(READERS) as pool:
        manifests = dict(zip(wanted, pool.map(lambda p: read_manifest(lake, *p), wanted), strict=True))
    assets: dict[str, dict] = {}
    by_crawl: dict[str, dict[str, dict[str, int]]] = {}
    status_held: list[dict[str, str]] = []
    quarantined: dict[str, set[str]] = {}
    for (asset, crawl, _), m in manifests.items():
        totals = assets.setdefault(asset, {"materialized": 0, "total": 0, "rows": 0})
        totals["total"] += 1
        if m is None:
            continue
        cell = by_crawl.setdefault(asset, {}).setdefault(crawl, {"partitions": 0, "rows": 0})
        for counts in (totals, cell):
            counts["rows"] += m.rows
        totals["materialized"] += 1
        cell["partitions"] += 1
        if m.held_back:
            status_held.append({"asset": asset, "crawl": crawl, "shard": m.shard, "why": m.held_back})
        if asset == "documents":
            quarantined.setdefault(crawl, set()).update(
                u.source for u in m.units if any(u.dropped.get(reason) for reason in FILE_FAULTS))
    specs = {s.name: s for s in SPECS}
    for asset in UNPARTITIONED:
        spec = specs[asset]
        facts = spec.facts(lake, settings) if spec.facts else None
        assets[asset] = {"materialized": int(facts is not None), "total": 1, "rows": 0, **(facts or {})}
    status = {"crawls": crawls, "assets": assets, "by_crawl": by_crawl, "held_back": status_held,
              "quarantined_files": {crawl: len(files) for crawl, files in sorted(quarantined.items()) if files}}
    if rejected:
        count, shown = rejected_raw_keys(lake, REJECTED_SHOWN)
        status["rejected_raw_keys"] = {"count": count, "keys": [r.to_dict() for r in shown]}
        unused = eval_keys(lake, settings.evals).unused
        status["unused_eval_keys"] = {"prefix": settings.evals.prefix, "count": len(unused),
                                      "keys": [u.to_dict() for u in unused[:REJECTED_SHOWN]]}
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
        rows.append([asset,
                     *(f"{c['rows']:,} rows, {c['partitions']} partition{'s' * (c['partitions'] != 1)}"
                       for c in cells),
                     f"{totals['rows']:,} rows, {totals['materialized']}/{totals['total']} partitions"])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    # no line ends in padding: a terminal as wide as the text would wrap it
    fmt = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    lines = [fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)]
    for held in status.get("held_back", []):
        lines += ["", f"{held['asset']} crawl={held['crawl']} shard={held['shard']} is held back by its quality gate: "
                      f"{held['why']}"]
    for crawl, n in status.get("quarantined_files", {}).items():
        lines += ["", f"{n:,} raw file{'s' * (n != 1)} of crawl {crawl} could not be read, whole or in part "
                      f"(quarantined: `llm-assets show rejected --stage documents --crawl {crawl}` lists them)"]
    if rejected := status.get("rejected_raw_keys", {}).get("count"):
        lines += ["", f"{rejected:,} raw key{'s' * (rejected != 1)} will not be ingested "
                      "(`llm-assets status` lists them with the reason)"]
    if unused := status.get("unused_eval_keys", {}).get("count"):
        evals = status["unused_eval_keys"]
        lines += ["", f"{unused:,} key{'s' * (unused != 1)} under {evals['prefix']} not used as eval sets:",
                  *(f"  {k['key']!r}: {k['reason']}" for k in evals["keys"])]
        if unused > len(evals["keys"]):
            lines.append(f"  … and {unused - len(evals['keys']):,} more")
    return "\n".join(lines)


def format_rejected(status: dict) -> str:
    """The raw keys that will not be ingested, one reason a line (each names its key, escaped)."""
    rejected = status.get("rejected_raw_keys") or {"count": 0, "keys": []}
    lines = [f"  {r['reason']}" for r in rejected["keys"]]
    if rejected["count"] > len(rejected["keys"]):
        lines.append(f"  … and {rejected['count'] - len(rejected['keys']):,} more")
    return "\n".join(lines)
