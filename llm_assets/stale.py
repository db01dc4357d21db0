"""The stale planner: every partition that a rebuild must run, and why.

Dagster does not compute staleness for partitioned assets, so the lake does: each committed partition's manifest
records its code version, its data version and the data versions of what it was built from (`inputs`). A partition
is planned when it is missing while its input exists, when its code version (stage version + effective settings)
differs from the code's, when an input it read has another data version now, or when one of its inputs is itself
planned. Raw partitions compare the fingerprint of their files (key, ETag, size) with the one they were built
from, so an identical re-upload plans nothing. Crawl-level assets (duplicate clusters, crawl stats) recompute their
data version from the current manifests of every shard they fan in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from llm_assets.core.inventory import fingerprint, partition_files
from llm_assets.core.lake import Lake, manifest_key

# (asset, its lake inputs), in build order. Each reads the same (crawl, shard) of its inputs.
SHARD_STAGES = [
    ("documents", ["raw_files"]),
    ("image_text_pairs", ["raw_files"]),
    ("filtered", ["documents"]),
    ("signatures", ["filtered"]),
]
CURATED_STAGES = [("deduplicated", ["filtered"]), ("tokenized", ["deduplicated"])]

MISSING = "missing"
CODE = "code or config changed"
RAW = "new or changed raw data"
UPSTREAM = "upstream data changed"


@dataclass(frozen=True)
class Planned:
    asset: str
    partition: str  # "crawl|shard", "crawl", or "" for an unpartitioned asset
    cause: str


class Planner:
    def __init__(self, lake: Lake, crawls: list[str], shards: list[str], code_versions: dict[str, str]):
        self.lake, self.crawls, self.shards, self.code = lake, crawls, shards, code_versions
        self.planned: dict[tuple[str, str], str] = {}
        self._manifests: dict[tuple[str, str, str], dict | None] = {}

    def manifest(self, asset: str, crawl: str, shard: str) -> dict | None:
        key = (asset, crawl, shard)
        if key not in self._manifests:
            self._manifests[key] = self.lake.get_json(manifest_key(asset, crawl, shard))
        return self._manifests[key]

    def plan(self, asset: str, partition: str, cause: str) -> None:
        self.planned.setdefault((asset, partition), cause)

    def is_planned(self, asset: str, partition: str) -> bool:
        return (asset, partition) in self.planned

    # -- the rules ---------------------------------------------------------------------------------------------

    def check(self, asset: str, partition: str, built: dict | None, inputs: dict[str, tuple[str, str | None]],
              exists: bool) -> None:
        """`inputs`: input name -> (planned-key partition or "", its current data version, None if absent)."""
        upstream = next((name for name, (p, _) in inputs.items() if p is not None and self.is_planned(name, p)), None)
        if upstream is not None:
            if built is not None or exists:
                self.plan(asset, partition, f"{UPSTREAM} ({upstream} is rebuilt)")
            return
        if built is None:
            if exists:
                self.plan(asset, partition, MISSING)
            return
        if built.get("code_version") != self.code.get(asset, built.get("code_version")):
            self.plan(asset, partition, CODE)
            return
        recorded = built.get("inputs") or {}
        for name, (_, version) in inputs.items():
            if recorded.get(name, version) != version:
                self.plan(asset, partition, f"{UPSTREAM} ({name})")
                return

    def raw(self, crawl: str, shard: str, shards: int) -> None:
        files = partition_files(self.lake, crawl, shard, shards)
        built = self.manifest("raw_files", crawl, shard)
        if built is None:
            if files:
                self.plan("raw_files", f"{crawl}|{shard}", MISSING)
        elif fingerprint(files) not in [u.get("unit") for u in built.get("units", [])]:  # the inventory unit's id
            self.plan("raw_files", f"{crawl}|{shard}", RAW)
        elif built.get("code_version") != self.code.get("raw_files", built.get("code_version")):
            self.plan("raw_files", f"{crawl}|{shard}", CODE)

    def stage(self, asset: str, upstreams: list[str], crawl: str, shard: str, extra: dict | None = None) -> None:
        p = f"{crawl}|{shard}"
        inputs = {}
        for up in upstreams:
            m = self.manifest(up, crawl, shard)
            inputs[up] = (p, (m or {}).get("data_version"))
        exists = any(self.manifest(up, crawl, shard) is not None or self.is_planned(up, p) for up in upstreams)
        self.check(asset, p, self.manifest(asset, crawl, shard), {**inputs, **(extra or {})}, exists)

    def crawl_level(self, asset: str, upstream: str, crawl: str, version_of) -> None:
        """A crawl-level asset over every shard of `upstream`: `version_of(manifests)` is its expected data
        version."""
        manifests = {s: m for s in self.shards if (m := self.manifest(upstream, crawl, s)) is not None}
        built = self.manifest(asset, crawl, "all")
        planned_up = [s for s in self.shards if self.is_planned(upstream, f"{crawl}|{s}")]
        if planned_up:
            self.plan(asset, crawl, f"{UPSTREAM} ({upstream} is rebuilt)")
        elif built is None:
            if manifests:
                self.plan(asset, crawl, MISSING)
        elif built.get("code_version") != self.code.get(asset, built.get("code_version")):
            self.plan(asset, crawl, CODE)
        elif built.get("data_version") != version_of(manifests):
            self.plan(asset, crawl, f"{UPSTREAM} ({upstream})")


def plan_stale(lake: Lake, crawls: list[str], shards: list[str], code_versions: dict[str, str],
               clusters_version, stats_version, removals_of, release_check=None) -> list[Planned]:
    """Every planned partition, in build order. The version functions come from the assets that define them:
    `clusters_version(manifests)`, `stats_version(manifests)`, `removals_of(crawl, shard)` (that shard's removals
    version under the current clusters)."""
    planner = Planner(lake, crawls, shards, code_versions)
    for crawl in crawls:
        for shard in shards:
            planner.raw(crawl, shard, len(shards))
            for asset, ups in SHARD_STAGES:
                planner.stage(asset, ups, crawl, shard)
        planner.crawl_level("crawl_stats", "filtered", crawl, lambda ms: stats_version(list(ms.values())))
        planner.crawl_level("duplicate_clusters", "signatures", crawl, lambda ms: clusters_version(ms))
        for shard in shards:
            clusters_rebuilt = planner.is_planned("duplicate_clusters", crawl)
            extra = {"duplicate_clusters": (crawl, None)} if clusters_rebuilt else \
                {"removals": (None, removals_of(crawl, shard))}
            planner.stage("deduplicated", ["filtered"], crawl, shard, extra)
            planner.stage("tokenized", ["deduplicated"], crawl, shard)
    if release_check is not None:
        cause = release_check(any(a == "tokenized" for a, _ in planner.planned))
        if cause:
            planner.plan("release", "", cause)
    order = ["raw_files"] + [a for a, _ in SHARD_STAGES] + ["crawl_stats", "duplicate_clusters"] + \
        [a for a, _ in CURATED_STAGES] + ["release"]
    return sorted((Planned(a, p, c) for (a, p), c in planner.planned.items()), key=lambda x: (order.index(x.asset),
                                                                                          x.partition))


def as_json(planned: list[Planned]) -> dict:
    return {"partitions": [asdict(p) for p in planned]}


def stale_partitions(instance, lake: Lake) -> list[Planned]:
    """The plan for this deployment: the code versions of its definitions, the crawls the instance knows plus
    those under raw/ it does not know yet."""
    from llm_assets.core.lake import InvalidKey, validate_crawl
    from llm_assets.core.release import release_version
    from llm_assets.core.tokenize import resolve_tokenizer
    from llm_assets.crawl_stats.assets import stats_version
    from llm_assets.dedup.assets import clusters_version, removals_version, shard_removals
    from llm_assets.definitions import defs
    from llm_assets.settings import load_settings

    settings = load_settings()
    code = {s.key.path[-1]: s.code_version for s in defs.resolve_all_asset_specs()}
    crawls = set(instance.get_dynamic_partitions("crawl"))
    for name in lake.folders("raw/"):
        try:
            crawls.add(validate_crawl(name))
        except InvalidKey:
            continue

    def removals_of(crawl: str, shard: str) -> str:
        m = lake.get_json(manifest_key("duplicate_clusters", crawl, "all"))
        parts = [u["part"] for u in (m or {}).get("units", []) if u.get("part")]
        return removals_version(shard_removals(lake, parts, shard))

    def release_check(tokenized_rebuilt: bool) -> str | None:
        if tokenized_rebuilt:
            return f"{UPSTREAM} (tokenized is rebuilt)"
        release = settings.release
        names = list(release.crawls) or sorted(crawls)
        partitions = [{"crawl": c, "shard": s, "data_version": m["data_version"]} for c in names
                      for s in settings.shard_keys() if (m := lake.get_json(manifest_key("tokenized", c, s)))]
        if not partitions:
            return None
        _, tok_hash = resolve_tokenizer(settings.tokenized, lake)
        version = release_version(release, tok_hash, partitions)
        return None if lake.exists(f"releases/{release.name}/{version}/manifest.json") else MISSING

    return plan_stale(lake, sorted(crawls), settings.shard_keys(), code, clusters_version=clusters_version,
                      stats_version=stats_version, removals_of=removals_of, release_check=release_check)
