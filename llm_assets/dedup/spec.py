"""Deduplication in the stage registry: signatures per shard, clusters per crawl, deduplicated per shard."""

from __future__ import annotations

import polars as pl

from llm_assets.core.dedup import CLUSTERS_VERSION, LAYOUT_SETTINGS, SIGNATURES_VERSION, STAGE_VERSION
from llm_assets.core.partition import Manifest, read_manifest, units_version
from llm_assets.core.versions import code_version, digest
from llm_assets.registry import StageSpec


def signatures_version(settings) -> str:
    """Signatures depend only on how documents are hashed."""
    return code_version(STAGE_VERSION, SIGNATURES_VERSION,
                        settings.dedup.model_dump_json(include={"ngram", "bands", "rows", "seed"}))


def clusters_code_version(settings) -> str:
    """The clustering depends on every dedup setting but those that only cut it into work units."""
    return code_version(STAGE_VERSION, CLUSTERS_VERSION, settings.dedup.model_dump_json(exclude=LAYOUT_SETTINGS))


def deduplicated_version(settings) -> str:
    return code_version(STAGE_VERSION)


def clusters_version(code: str, *manifest_sets: dict[str, Manifest]) -> str:
    """The clusters' data version: their code version and every signatures unit they were built from."""
    return units_version(code, [m for ms in manifest_sets for m in ms.values()])


def shard_removals(lake, removed_parts: list[str], shard: str) -> pl.DataFrame:
    """The documents of one shard the clusters remove."""
    if not removed_parts:
        return pl.DataFrame()
    return lake.scan(removed_parts).filter(pl.col("shard") == shard).select("doc_id", "source_key", "reason").collect()


def removals_version(removals: pl.DataFrame) -> str:
    """A shard's removals as a version: its deduplicated partition changes exactly when they do."""
    if not removals.height:
        return ""
    return digest(removals.sort(removals.columns).write_csv())


def removals_of(lake, crawl: str, shard: str) -> str:
    """The removals version of one shard under the crawl's committed clusters."""
    clusters = read_manifest(lake, CLUSTERS_SPEC.name, crawl, "all")
    return removals_version(shard_removals(lake, clusters.parts if clusters else [], shard))


def _clusters_now(planner, crawl: str) -> str:
    """The clusters' data version if built now: this crawl's signatures and, with cross_crawl, the earlier crawls'."""
    earlier = planner.settings.dedup.earlier_crawls(crawl, planner.crawls)
    return clusters_version(planner.code["duplicate_clusters"], planner.committed("signatures", crawl),
                            *(planner.committed("signatures", c) for c in earlier))


SIGNATURES_SPEC = StageSpec("signatures", "shard", ("filtered",), version=signatures_version)
CLUSTERS_SPEC = StageSpec("duplicate_clusters", "crawl", ("signatures",), version=clusters_code_version,
                          expected_version=_clusters_now)
# deduplicated records its shard's removals, not the clusters' data version: a new cluster elsewhere in the crawl
# does not make this shard stale.
DEDUPLICATED_SPEC = StageSpec("deduplicated", "shard", ("filtered", "duplicate_clusters"),
                              version=deduplicated_version,
                              current_inputs=lambda planner, crawl, shard: {
                                  "filtered": planner.data_version("filtered", crawl, shard),
                                  "removals": removals_of(planner.lake, crawl, shard)})
