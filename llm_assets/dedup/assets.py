import hashlib
import time
import warnings

import dagster as dg
import polars as pl

from llm_assets.core.crawl_stats import bar_chart
from llm_assets.core.dedup import (DEDUPLICATED_SCHEMA, STAGE_VERSION, DedupUnit, SignatureUnit, compute_signatures,
                                   find_clusters, read_signatures, remove_duplicates, signature_schema)
from llm_assets.core.lake import manifest_key, part_key
from llm_assets.core.partition import FrameOutput, LakeInput, committed, units_version
from llm_assets.core.units import peak_rss_bytes, unit_id
from llm_assets.crawl_stats.assets import _table
from llm_assets.partitions import crawl_partitions
from llm_assets.registry import StageSpec
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*MultiToSingleDimensionPartitionMapping.*")
SETTINGS = load_settings().dedup
SHARDS = load_settings().shard_keys()
# Signatures depend only on how documents are hashed; the clustering on every setting.
SIGNATURES_VERSION = code_version(STAGE_VERSION, SETTINGS.model_dump_json(include={"ngram", "bands", "rows", "seed"}))
CLUSTERS_VERSION = code_version(STAGE_VERSION, SETTINGS.fingerprint())
DEDUPLICATED_VERSION = code_version(STAGE_VERSION)
BY_CRAWL = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="crawl")


@stage_asset(SIGNATURES_VERSION, group_name="lake")
def signatures(context: dg.AssetExecutionContext, store: ObjectStore, filtered: LakeInput):
    """Per filtered document: the hash of its normalized text and of its URL, and its MinHash signature over word
    5-grams with the LSH band hashes (FineWeb: 14 bands × 8 rows), computed for whole batches at once
    (one-permutation hashing with optimal densification). One work unit per filtered part, so a changed shard
    recomputes only its own signatures; `duplicate_clusters` reads every shard's.
    """
    crawl, shard = partition_of(context)
    units = []
    for source in filtered.parts:
        unit = unit_id("signatures", SIGNATURES_VERSION, source)
        units.append(SignatureUnit(store=store.config(), settings=SETTINGS, source=source, unit=unit,
                                   part=part_key("signatures", crawl, shard, unit)))
    yield from run_stage(context, compute_signatures, units, SIGNATURES_VERSION,
                         signature_schema(SETTINGS.bands, SETTINGS.rows).names,
                         inputs={"filtered": filtered.data_version})


def clusters_version(*manifest_sets: dict[str, dict]) -> str:
    """The clusters' data version: their code version and every signatures unit they were built from."""
    return units_version(CLUSTERS_VERSION, [m for ms in manifest_sets for m in ms.values()])


def shard_removals(lake, removed_parts: list[str], shard: str) -> pl.DataFrame:
    """The documents of one shard the clusters remove."""
    if not removed_parts:
        return pl.DataFrame()
    return lake.scan(removed_parts).filter(pl.col("shard") == shard).select("doc_id", "source_key", "reason").collect()


def removals_version(removals: pl.DataFrame) -> str:
    """A shard's removals as a version: its deduplicated partition changes exactly when they do."""
    if not removals.height:
        return ""
    return hashlib.sha256(removals.sort(removals.columns).write_csv().encode()).hexdigest()[:20]


@dg.asset(
    partitions_def=crawl_partitions,
    deps=[dg.AssetDep(signatures, partition_mapping=BY_CRAWL)],
    io_manager_key="lake_io_manager",
    group_name="dedup",
    kinds={"polars", "parquet"},
    code_version=CLUSTERS_VERSION,
)
def duplicate_clusters(context: dg.AssetExecutionContext, store: ObjectStore):
    """Per crawl, over every shard's stored signatures: documents joined by the same normalized text, the same URL
    (optional) or a shared LSH band, grouped into connected components. Each cluster keeps one document (setting
    `keep`: earliest fetch, longest text or first doc_id); the rest are listed here with their reason (`exact`,
    `url`, `near`) and the document they duplicate. With `cross_crawl`, the crawl is also compared with the
    signatures of every earlier crawl (in `crawl_order`), whose documents always win (`cross_crawl`).

    Metadata: duplicates removed by reason, the cluster-size histogram (chart) and the largest clusters with
    example URLs, the crawls compared against, peak memory.
    """
    start = time.perf_counter()
    crawl = context.partition_key
    lake = store.lake()
    own = committed(lake, "signatures", crawl, SHARDS)
    earlier = SETTINGS.earlier_crawls(crawl, context.instance.get_dynamic_partitions("crawl"))
    index = {c: committed(lake, "signatures", c, SHARDS) for c in earlier}
    docs = pl.concat([read_signatures(lake, crawl, own, SETTINGS),
                      *(read_signatures(lake, c, ms, SETTINGS) for c, ms in index.items())])
    clusters = find_clusters(docs, SETTINGS, crawl)
    removed = clusters.removed
    by_reason = dict(removed.group_by("reason").len().sort("reason").iter_rows())
    sizes = clusters.sizes
    metadata = {
        "dagster/row_count": removed.height,
        "documents": clusters.documents,
        "duplicates_removed": removed.height,
        "duplicate_rate": round(removed.height / clusters.documents, 4) if clusters.documents else 0.0,
        "removed_by_reason": dg.MetadataValue.json(by_reason),
        "removed_by_shard": dg.MetadataValue.json(dict(removed.group_by("shard").len().sort("shard").iter_rows())),
        "cluster_sizes": dg.MetadataValue.md(bar_chart([f"{s:,} documents" for s in sizes["cluster_size"]],
                                                       sizes["clusters"].to_list(), unit="clusters")
                                             if sizes.height else "no duplicates"),
        "largest_clusters": _table(clusters.largest),
        "against_crawls": dg.MetadataValue.json(earlier),
        "index_documents": clusters.index_documents,
        "shards": len(own),
        "shards_without_signatures": dg.MetadataValue.json([s for s in SHARDS if s not in own]),
        "seconds": round(time.perf_counter() - start, 3),
        "peak_rss_mib": round(peak_rss_bytes() / 2**20, 1),
    }
    version = clusters_version(own, *index.values())
    return dg.Output(FrameOutput(removed, CLUSTERS_VERSION, version, {"against": ",".join(earlier)}),
                     metadata=metadata, data_version=dg.DataVersion(version))


@stage_asset(DEDUPLICATED_VERSION, group_name="curated",
             ins={"duplicate_clusters": dg.AssetIn(partition_mapping=BY_CRAWL)})
def deduplicated(context: dg.AssetExecutionContext, store: ObjectStore, filtered: LakeInput,
                 duplicate_clusters: LakeInput):
    """The filtered documents minus the duplicates `duplicate_clusters` lists for this shard. Every removed
    document is kept under `rejected/deduplicated/` with its reason (`exact`, `url`, `near`, `cross_crawl`) and
    the document it duplicates. A unit is redone only when its part or this shard's removals change.
    """
    crawl, shard = partition_of(context)
    removed_parts = duplicate_clusters.parts
    mine = shard_removals(store.lake(), removed_parts, shard)
    removals = removals_version(mine)
    units = []
    for source in filtered.parts:
        unit = unit_id("deduplicated", DEDUPLICATED_VERSION, source, removals)
        units.append(DedupUnit(store=store.config(), source=source, removed="\n".join(removed_parts), shard=shard,
                               unit=unit, part=part_key("deduplicated", crawl, shard, unit),
                               rejected_part=part_key("deduplicated", crawl, shard, unit, zone="rejected")))
    yield from run_stage(context, remove_duplicates, units, DEDUPLICATED_VERSION, DEDUPLICATED_SCHEMA.names,
                         metadata={"removals": mine.height},
                         inputs={"filtered": filtered.data_version, "removals": removals})


def removals_of(lake, crawl: str, shard: str) -> str:
    """The removals version of one shard under the crawl's committed clusters."""
    m = lake.get_json(manifest_key("duplicate_clusters", crawl, "all"))
    parts = [u["part"] for u in (m or {}).get("units", []) if u.get("part")]
    return removals_version(shard_removals(lake, parts, shard))


def _clusters_now(planner, crawl: str) -> str:
    """The clusters' data version if built now: this crawl's signatures and, with cross_crawl, the earlier crawls'."""
    earlier = SETTINGS.earlier_crawls(crawl, planner.crawls)
    return clusters_version(planner.committed("signatures", crawl), *(planner.committed("signatures", c) for c in earlier))


SIGNATURES_SPEC = StageSpec("signatures", "shard", ("filtered",))
CLUSTERS_SPEC = StageSpec("duplicate_clusters", "crawl", ("signatures",), expected_version=_clusters_now)
# deduplicated records its shard's removals, not the clusters' data version: a new cluster elsewhere in the crawl
# does not make this shard stale.
DEDUPLICATED_SPEC = StageSpec("deduplicated", "shard", ("filtered", "duplicate_clusters"),
                              current_inputs=lambda planner, crawl, shard: {
                                  "filtered": planner.data_version("filtered", crawl, shard),
                                  "removals": removals_of(planner.lake, crawl, shard)})
