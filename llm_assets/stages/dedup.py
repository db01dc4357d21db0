"""Deduplication: signatures per shard, duplicate clusters per crawl, deduplicated per shard."""

import time
from collections.abc import Mapping

import polars as pl

from llm_assets import charts
from llm_assets.core.clusters import SignaturePart, cluster_lake
from llm_assets.core.dedup import (
    CLUSTERS_VERSION,
    DEDUPLICATED_SCHEMA,
    LAYOUT_SETTINGS,
    REMOVED_SCHEMA,
    SIGNATURES_VERSION,
    STAGE_VERSION,
    DedupUnit,
    SignatureUnit,
    compute_signatures,
    remove_duplicates,
    signature_schema,
)
from llm_assets.core.keys import CRAWL_LEVEL_SHARD
from llm_assets.core.lake import part_key
from llm_assets.core.partition import Manifest, PartitionOutput, committed, read_manifest, units_version
from llm_assets.core.stage_names import DEDUPLICATED, DUPLICATE_CLUSTERS, FILTERED, SIGNATURES
from llm_assets.core.units import UnitResult, peak_rss_bytes, run_units, unit_id
from llm_assets.core.versions import code_version, digest
from llm_assets.registry import StageSpec
from llm_assets.report import Markdown, Report
from llm_assets.stage import Built, CrawlStage, Partition, ShardStage


def signatures_version(settings) -> str:
    """Signatures depend only on how documents are hashed."""
    return code_version(STAGE_VERSION, SIGNATURES_VERSION,
                        settings.dedup.model_dump_json(include={"ngram", "bands", "rows", "seed"}))


def clusters_code_version(settings) -> str:
    """The clustering depends on every dedup setting but those that only cut it into work units."""
    return code_version(STAGE_VERSION, CLUSTERS_VERSION, settings.dedup.model_dump_json(exclude=LAYOUT_SETTINGS))


def deduplicated_version(settings) -> str:
    return code_version(STAGE_VERSION)


def clusters_version(code: str, *manifest_sets: Mapping[str, Manifest]) -> str:
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
    clusters = read_manifest(lake, CLUSTERS_SPEC.name, crawl, CRAWL_LEVEL_SHARD)
    return removals_version(shard_removals(lake, clusters.parts if clusters else [], shard))


def _clusters_now(planner, crawl: str) -> str:
    """The clusters' data version if built now: this crawl's signatures and, with cross_crawl, the earlier crawls'."""
    earlier = planner.settings.dedup.earlier_crawls(crawl, planner.crawls)
    return clusters_version(planner.code[DUPLICATE_CLUSTERS], planner.committed(SIGNATURES, crawl),
                            *(planner.committed(SIGNATURES, c) for c in earlier))


SIGNATURES_SPEC = StageSpec(SIGNATURES, "shard", (FILTERED,), version=signatures_version, job="lake_job")
CLUSTERS_SPEC = StageSpec(DUPLICATE_CLUSTERS, "crawl", (SIGNATURES,), version=clusters_code_version,
                          expected_version=_clusters_now, group="dedup", job="crawl_job")
# deduplicated records its shard's removals, not the clusters' data version: a new cluster elsewhere in the crawl
# does not make this shard stale.
DEDUPLICATED_SPEC = StageSpec(DEDUPLICATED, "shard", (FILTERED, DUPLICATE_CLUSTERS),
                              version=deduplicated_version,
                              current_inputs=lambda planner, crawl, shard: {
                                  FILTERED: planner.data_version(FILTERED, crawl, shard),
                                  "removals": removals_of(planner.lake, crawl, shard)},
                              group="curated", job="curated_job", documents=True)


def size_classes(sizes) -> tuple[list[str], list[int]]:
    """(cluster size, clusters) rows, by size, as the chart's bars: 2 to 9 documents one bar each, then one bar a
    power of ten (a dump's clusters have thousands of distinct sizes: a bar each would make a chart metres tall)."""
    bars: dict[str, int] = {}
    for size, clusters in sizes:
        low = 10 ** (len(str(size)) - 1)
        label = f"{size:,} documents" if size < 10 else f"{low:,}–{low * 10 - 1:,} documents"
        bars[label] = bars.get(label, 0) + clusters
    return list(bars), list(bars.values())


class Signatures(ShardStage):
    """Per filtered document: the hash of its normalized text and of its URL, and its MinHash signature over
    word 5-grams with the LSH band hashes (FineWeb: 14 bands × 8 rows), computed for whole batches at once
    (one-permutation hashing with optimal densification). One work unit per filtered part, so a changed shard
    recomputes only its own signatures; `duplicate_clusters` reads every shard's.
    """

    spec = SIGNATURES_SPEC
    work = staticmethod(compute_signatures)

    def unit(self, p: Partition, source: str) -> SignatureUnit:
        unit = unit_id(self.spec.name, self.spec.version(p.settings), source)
        key = lambda *ids: part_key(self.spec.name, p.crawl, p.shard, unit_id(unit, *ids))  # noqa: E731
        return SignatureUnit(store=p.lake.config, settings=p.settings.dedup, source=source, unit=unit, part=key(),
                             index=key("index"), docs=key("docs"))

    def columns(self, p: Partition) -> list[str]:
        return signature_schema(p.settings.dedup.bands, p.settings.dedup.rows).names


def signature_part(crawl: str, shard: str, unit: UnitResult) -> SignaturePart:
    if not {"index", "docs"} <= unit.side_parts.keys():
        raise RuntimeError(f"signatures crawl={crawl} shard={shard}: part {unit.part} has no band index (it was "
                           "built before signatures v2): rebuild its signatures (`llm-assets backfill --stale`)")
    return SignaturePart(crawl, shard, unit.part or "", unit.rows_out, unit.side_parts["index"],
                         unit.side_parts["docs"])


class DuplicateClusters(CrawlStage):
    """Per crawl, over every shard's stored signatures (a shard with raw files and no committed signatures
    fails it: no clusters of part of a crawl): documents joined by the same normalized text, the same URL
    (optional) or a shared LSH band whose signatures do not put their Jaccard similarity confidently below
    `jaccard_threshold` (`jaccard_confidence`), grouped into connected components. Each cluster keeps one document
    (setting `keep`: earliest fetch, longest text or first doc_id); the rest are listed here with their reason
    (`exact`, `url`, `near`) and the document they duplicate. With `cross_crawl`, the crawl is also compared with
    the signatures of every earlier crawl (in `crawl_order`), whose documents always win (`cross_crawl`). Runs as
    work units on the runner from the band index the signatures stage writes beside each part (edges per range of
    keys, components in rounds of units per range of documents, members per part, the keep rule per range of a hash
    of the cluster); an earlier crawl's index is read only where this crawl's keys fall. The removed documents are
    the keep units' parts.

    Metadata: duplicates removed by reason, the cluster-size histogram (chart) and the largest clusters with
    example URLs, the crawls compared against and the rows and bytes of their index read, LSH candidates
    rejected by their Jaccard estimate, units per step, the components' ranges and rounds, peak memory of this
    process and of the largest unit (the peak of the process it ran in: the pool runner runs a step of one
    unit in this process, which it then reports).
    """

    spec = CLUSTERS_SPEC
    kinds = frozenset({"polars", "parquet"})

    def build(self, p: Partition) -> Built:
        from llm_assets.platform.runners import (
            runner_for,  # as a shard stage's does: a cluster's client only when it runs
        )

        start, crawl, dedup = time.perf_counter(), p.crawl, p.settings.dedup
        signatures = p.inputs[SIGNATURES_SPEC.name]
        p.require_every_shard(self.spec, signatures)
        own = {m.shard: m for m in signatures.manifests}
        # the earlier crawls' signatures manifests are read as committed: no partition mapping says "every crawl
        # before this one in crawl_order"
        earlier = dedup.earlier_crawls(crawl, p.registered_crawls())
        index = {c: committed(p.lake, SIGNATURES_SPEC.name, c, p.settings.shard_keys()) for c in earlier}
        parts = [signature_part(c, shard, u) for c, manifests in [(crawl, own), *index.items()]
                 for shard, m in sorted(manifests.items()) for u in m.units if u.part]
        runner, code = runner_for(p.settings.runner), self.spec.version(p.settings)
        # The keep units' parts are what gets committed: new keys every run, so that a reader of the previous
        # commit never sees a part rewritten under it.
        clusters, done = cluster_lake(
            p.lake.config, parts, dedup, crawl, lambda fn, units: run_units(fn, units, runner),
            lambda step, identity: part_key(self.spec.name, crawl, CRAWL_LEVEL_SHARD, unit_id(
                self.spec.name, code, step, identity, p.run_id if step == "keep" else "")),
            REMOVED_SCHEMA)
        report = {**self.clusters_report(crawl, clusters), "against_crawls": earlier, "shards": len(own),
                  "shards_without_signatures": [s for s in p.settings.shard_keys() if s not in own],
                  **self.work_report(done), "runner": str(runner), "seconds": round(time.perf_counter() - start, 3)}
        # the manifest lists the last step's units; the ledger charges every step's
        spent = [r for step, results in done.steps.items() if step != "keep" for r in results]
        return Built(PartitionOutput(units=done.steps["keep"], code_version=code,
                                     data_version=clusters_version(code, own, *index.values()),
                                     inputs={"against": ",".join(earlier)}, runner=str(runner), spent=spent), report)

    @staticmethod
    def clusters_report(crawl: str, clusters) -> Report:
        """Duplicates removed by reason and shard, the clusters by size (chart), the largest clusters."""
        removed, by, sizes = clusters.removed_count, clusters.removed_by, clusters.sizes
        return {
            "dagster/row_count": removed,
            "documents": clusters.documents,
            "duplicates_removed": removed,
            "duplicate_rate": round(removed / clusters.documents, 4) if clusters.documents else 0.0,
            "removed_by_reason": dict(by.group_by("reason").agg(pl.col("documents").sum()).sort("reason").iter_rows()),
            "removed_by_shard": dict(by.group_by("shard").agg(pl.col("documents").sum()).sort("shard").iter_rows()),
            "cluster_sizes": Markdown(charts.hbars(
                f"{crawl}: duplicate clusters by size", *size_classes(sizes.iter_rows()), "clusters")
                if sizes.height else "no duplicates"),
            "largest_clusters": clusters.largest,
            "index_documents": clusters.index_documents,
            "lsh_candidates": clusters.candidates,
            "lsh_rejected": clusters.rejected,
        }

    @staticmethod
    def work_report(done) -> Report:
        """What the units did: the earlier crawls' index read, units per step, ranges and rounds, peak memory."""
        return {
            "index_rows_matched": done.count("history_rows_matched"),
            "index_bytes_read": done.count("history_bytes_read"),
            "buckets": done.buckets,
            "components_ranges": len(done.starts),
            "components_rounds": done.rounds,
            "units": {step: len(results) for step, results in done.steps.items()},
            "peak_rss_mib": round(peak_rss_bytes() / 2**20, 1),
            "unit_peak_rss_mib": round(done.peak_rss_bytes() / 2**20, 1),
        }


class Deduplicated(ShardStage):
    """The filtered documents minus the duplicates `duplicate_clusters` lists for this shard. Every removed
    document is kept under `rejected/deduplicated/` with its reason (`exact`, `url`, `near`, `cross_crawl`) and
    the document it duplicates. A unit is redone only when its part or this shard's removals change.
    """

    spec = DEDUPLICATED_SPEC
    work = staticmethod(remove_duplicates)

    def units(self, p: Partition) -> list[DedupUnit]:
        removed_parts = p.inputs[CLUSTERS_SPEC.name].parts
        mine = shard_removals(p.lake, removed_parts, p.shard)
        p.notes["removals"] = (mine.height, removals := removals_version(mine))
        code, name = self.spec.version(p.settings), self.spec.name
        units = []
        for source in p.inputs[FILTERED].parts:
            unit = unit_id(name, code, source, removals)
            units.append(DedupUnit(store=p.lake.config, source=source, removed="\n".join(removed_parts),
                                   shard=p.shard, unit=unit, part=part_key(name, p.crawl, p.shard, unit),
                                   rejected_part=part_key(name, p.crawl, p.shard, unit, zone="rejected")))
        return units

    def recorded_inputs(self, p: Partition) -> dict[str, str]:
        # its shard's removals, not the clusters' data version: a new cluster elsewhere does not make it stale
        return {FILTERED: p.inputs[FILTERED].data_version, "removals": p.notes["removals"][1]}

    def metadata(self, p: Partition) -> Report:
        return {"removals": p.notes["removals"][0]}

    def columns(self, p: Partition) -> list[str]:
        return DEDUPLICATED_SCHEMA.names


STAGES = [Signatures(), DuplicateClusters(), Deduplicated()]
