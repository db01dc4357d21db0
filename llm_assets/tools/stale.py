"""The stale planner: every partition that a rebuild must run, and why.

The lake's manifests are the record: each committed partition's manifest records its code version, its data version
and the data versions of what it was built from (`inputs`). The planner walks the stage registry
(`llm_assets.stages.SPECS`) in build order. A partition is planned when one of its inputs is planned, when it is missing
while an input exists, when its code version (stage version + effective settings) differs from the code's, or when what
it would read now differs from what it read (a shard stage's recorded inputs; a crawl stage's data version, recomputed
from the manifests it fans in). Stages with rules of their own say so in their spec: the raw inventory compares file
fingerprints, so an identical re-upload plans nothing; a release compares its version. A partition its quality gate
holds back is not an input: nothing downstream of it is planned until a rebuild passes the gate.

What Dagster marks stale is the same plan: a partition is stale for Dagster when its code version or an input's data
version changed since it was built, so what a stage reads outside the lake's assets (raw files, takedown and eval
lists) reaches Dagster as the per-partition versions of an observed source (`StageSpec.observed`), computed here
and reported by `source_versions`' callers. Dagster marks where a change happened; the plan also lists what
rebuilding it changes (`upstream data changed (X is rebuilt)`), which Dagster marks once X is rebuilt.

The lake says what is committed, not what was tried: a partition whose latest run failed may still hold what an
earlier run committed, and look fresh. The Dagster instance knows those failures (the UI's red "Failed"); given
them, the planner plans each such partition first, with the run that failed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Collection, Mapping, Sequence, TypeVar, cast

from llm_assets.core.keys import CRAWL_LEVEL_SHARD, PartitionRef
from llm_assets.core.lake import InvalidKey, Lake, validate_crawl
from llm_assets.core.partition import Manifest, read_manifest
from llm_assets.registry import CODE, FAILED, LANGUAGES, MISSING, RAW, UNOBSERVED, UPSTREAM, SourceVersion, StageSpec
from llm_assets.settings import Settings
from llm_assets.stages import SPECS, code_versions

T = TypeVar("T")


@dataclass(frozen=True)
class Planned:
    asset: str
    partition: str  # "crawl|shard", "crawl", or "" for an unpartitioned asset
    cause: str


class Planner:
    """One planning pass: the lake, the settings, the crawls, the code versions, and what is planned so far. Specs'
    hooks read the lake through it (manifests are read once)."""

    def __init__(self, lake: Lake, settings: Settings, crawls: list[str], code_versions: dict[str, str],
                 specs: Sequence[StageSpec], failed: Mapping[tuple[str, str], str] | None = None,
                 hold: Collection[tuple[str, str]] = ()):
        self.lake: Lake = lake  # typed one by one: the specs that read them are checked before this module
        self.settings, self.crawls, self.code = settings, crawls, code_versions
        self.failed, self.hold = failed or {}, set(hold)
        self.shards = settings.shard_keys()
        self.specs = {s.name: s for s in specs}
        self.planned: dict[tuple[str, str], str] = {}
        self._manifests: dict[tuple[str, str, str], Manifest | None] = {}
        self._memo: dict[object, object] = {}

    def memo(self, key: object, compute: Callable[[], T]) -> T:
        """What `compute()` returns, once per planning pass (the takedown lists, the eval index, ...)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return cast(T, self._memo[key])

    def manifest(self, asset: str, crawl: str, shard: str) -> Manifest | None:
        key = (asset, crawl, shard)
        if key not in self._manifests:
            self._manifests[key] = read_manifest(self.lake, asset, crawl, shard)
        return self._manifests[key]

    def committed(self, asset: str, crawl: str) -> dict[str, Manifest]:
        """shard -> committed manifest of a shard asset, for the shards of `crawl` that have one its quality gate
        does not hold back (what a crawl stage fans in)."""
        return {s: m for s in self.shards if (m := self.manifest(asset, crawl, s)) is not None and not m.held_back}

    def held_back(self, asset: str, crawl: str, shard: str) -> bool:
        built = self.manifest(asset, crawl, shard)
        return built is not None and bool(built.held_back)

    def data_version(self, asset: str, crawl: str, shard: str) -> str | None:
        built = self.manifest(asset, crawl, shard)
        return built.data_version if built else None

    def code_changed(self, asset: str, built: Manifest) -> bool:
        return built.code_version != self.code.get(asset, built.code_version)

    def failure(self, asset: str, partition: str) -> str | None:
        run = self.failed.get((asset, partition))
        return f"{FAILED} (run {run[:8]})" if run else None

    def plan(self, asset: str, partition: str, cause: str | None) -> None:
        if cause and (asset, partition) not in self.hold:
            self.planned.setdefault((asset, partition), cause)

    def is_planned(self, asset: str, partition: str) -> bool:
        return (asset, partition) in self.planned

    def cause_is(self, spec: StageSpec, partition: str) -> bool:
        """Whether the partition is planned for what its observed source carries (new raw data, an input that is
        not a lake asset, or the thresholds of the languages it held)."""
        cause = self.planned.get((spec.name, partition), "")
        return cause == RAW or cause.startswith(LANGUAGES) or (
            cause.startswith(UPSTREAM) and "rebuilt" not in cause and not any(f"({i})" in cause for i in spec.inputs))

    def any_planned(self, asset: str) -> bool:
        return any(a == asset for a, _ in self.planned)

    # -- the rules ---------------------------------------------------------------------------------------------

    def input_partition(self, name: str, crawl: str, shard: str) -> str:
        return crawl if self.specs[name].level == "crawl" else PartitionRef(crawl, shard).key

    def shard_stage(self, spec: StageSpec, crawl: str, shard: str) -> str | None:
        if spec.plan is not None:
            return spec.plan(self, crawl, shard)
        p = PartitionRef(crawl, shard).key
        built = self.manifest(spec.name, crawl, shard)
        shard_inputs = [i for i in spec.inputs if self.specs[i].level == "shard"]
        if any(self.held_back(i, crawl, shard) for i in shard_inputs) and not any(
                self.is_planned(i, p) for i in shard_inputs):
            return None  # not promoted: downstream keeps what it was built from
        exists = any(self.manifest(i, crawl, shard) is not None or self.is_planned(i, p) for i in shard_inputs)
        if upstream := next((i for i in spec.inputs if self.is_planned(i, self.input_partition(i, crawl, shard))),
                            None):
            return f"{UPSTREAM} ({upstream} is rebuilt)" if built is not None or exists else None
        if built is None:
            return MISSING if exists else None
        if self.code_changed(spec.name, built):
            return CODE
        current = (spec.current_inputs(self, crawl, shard) if spec.current_inputs is not None
                   else {i: self.data_version(i, crawl, shard) for i in spec.inputs})
        recorded = built.inputs
        changed = next((name for name, version in current.items() if recorded.get(name, version) != version), None)
        if changed is None:
            return None
        return (spec.cause(self, built, changed) if spec.cause is not None else None) or f"{UPSTREAM} ({changed})"

    def crawl_stage(self, spec: StageSpec, crawl: str) -> str | None:
        if spec.plan is not None:
            return spec.plan(self, crawl, None)
        built = self.manifest(spec.name, crawl, CRAWL_LEVEL_SHARD)
        if upstream := next((i for i in spec.inputs for s in self.shards
                             if self.is_planned(i, PartitionRef(crawl, s).key)),
                            None):
            return f"{UPSTREAM} ({upstream} is rebuilt)"
        if built is None:
            return MISSING if any(self.committed(i, crawl) for i in spec.inputs) else None
        if self.code_changed(spec.name, built):
            return CODE
        if spec.expected_version is not None and built.data_version != spec.expected_version(self, crawl):
            return f"{UPSTREAM} ({', '.join(spec.inputs)})"
        return None


def source_versions(planner: Planner) -> list[SourceVersion]:
    """The observed sources' versions Dagster must be told of for its notion of stale to be the planner's: for each
    partition of a stage with an observed source, what the stage would read now, where it differs from what the
    committed partition read, unless the partition is planned for another cause Dagster shows itself (code,
    upstream, a failure). A partition never built has its version reported too: Dagster compares what is observed
    after a build with what was observed before it, so something must be on record before the first build; for the
    same reason a partition planned for another cause gives an `anchor`, reported while the source has no
    observation at all (a lake built before the source existed)."""
    out: list[SourceVersion] = []
    for spec in planner.specs.values():
        if spec.observed is None:
            continue
        anchored = False
        for crawl in planner.crawls:
            for shard in planner.shards:
                p, built = PartitionRef(crawl, shard).key, planner.manifest(spec.name, crawl, shard)
                anchor = built is not None and (spec.name, p) in planner.planned and not planner.cause_is(spec, p)
                if anchor:  # its version does not matter, only that one is on record before the rebuild
                    if not anchored:
                        out.append(SourceVersion(spec.observed.name, p, UNOBSERVED, anchor=True))
                    anchored = True
                    continue
                now = spec.observed.current(planner, crawl, shard) or UNOBSERVED
                if built is None or now != spec.observed.recorded(built):
                    out.append(SourceVersion(spec.observed.name, p, now))
    return out


def plan_stale(lake: Lake, settings: Settings, crawls: list[str], code_versions: dict[str, str],
               specs: Sequence[StageSpec], failed: Mapping[tuple[str, str], str] | None = None,
               hold: Collection[tuple[str, str]] = ()) -> list[Planned]:
    """Every planned partition, in build order (the registry's, then the partition). `failed`: (asset, partition)
    -> the run id, for the partitions whose latest run failed; `hold`: (asset, partition) never planned, nor
    anything for their sake."""
    return planned_of(planning(lake, settings, crawls, code_versions, specs, failed, hold))


def planned_of(planner: Planner) -> list[Planned]:
    order = list(planner.specs)
    return sorted((Planned(a, p, c) for (a, p), c in planner.planned.items()),
                  key=lambda x: (order.index(x.asset), x.partition))


def planning(lake: Lake, settings: Settings, crawls: list[str], code_versions: dict[str, str],
             specs: Sequence[StageSpec], failed: Mapping[tuple[str, str], str] | None = None,
             hold: Collection[tuple[str, str]] = ()) -> Planner:
    """One planning pass, done: its `planned` partitions, and what it read (for `source_versions`)."""
    planner = Planner(lake, settings, crawls, code_versions, specs, failed, hold)
    for crawl in crawls:
        for spec in specs:
            if spec.level == "shard":
                for shard in planner.shards:
                    p = PartitionRef(crawl, shard).key
                    planner.plan(spec.name, p, planner.failure(spec.name, p) or planner.shard_stage(spec, crawl, shard))
            elif spec.level == "crawl":
                planner.plan(spec.name, crawl, planner.failure(spec.name, crawl) or planner.crawl_stage(spec, crawl))
    for spec in specs:
        if spec.level == "release" and spec.plan is not None:
            planner.plan(spec.name, "", spec.plan(planner, None, None))
    return planner


def as_json(planned: list[Planned]) -> dict:
    return {"partitions": [asdict(p) for p in planned]}


def known_crawls(lake: Lake, instance=None) -> list[str]:
    """The crawls under raw/, those the raw inventory was built for (their files may be gone since), and those the
    Dagster instance knows, if given."""
    crawls = set(instance.get_dynamic_partitions("crawl")) if instance is not None else set()
    names = lake.folders("raw/") + [f.removeprefix("crawl=") for f in lake.folders("lake/raw_files/")]
    for name in names:
        try:
            crawls.add(validate_crawl(name))
        except InvalidKey:
            continue
    return sorted(crawls)


def stale_partitions(instance, lake: Lake, settings: Settings, code: dict[str, str] | None = None) -> list[Planned]:
    """The plan for a deployment's settings: its stages and code versions (or `code`), every crawl it knows or
    finds under raw/, and, given a Dagster instance, the partitions whose latest run failed; the observed sources'
    versions it read are reported to that instance, so the UI's stale marks are this plan's, and so is each asset's
    `not_stale` check (the catalog marks the assets with stale partitions)."""
    crawls = known_crawls(lake, instance)
    if instance is None:
        return plan_stale(lake, settings, crawls, code or code_versions(settings), SPECS)
    # Dagster's side: only given an instance
    from llm_assets.platform.backfills import failed_partitions, report_sources, report_stale_checks

    planner = planning(lake, settings, crawls, code or code_versions(settings), SPECS,
                       failed_partitions(instance, settings, crawls, SPECS))
    report_sources(instance, source_versions(planner))
    planned = planned_of(planner)
    report_stale_checks(instance, [(p.asset, p.partition, p.cause) for p in planned], SPECS)
    return planned


__all__ = ["CODE", "FAILED", "LANGUAGES", "MISSING", "RAW", "UPSTREAM", "Planned", "Planner", "SourceVersion",
           "as_json", "plan_stale", "planned_of", "planning", "source_versions", "stale_partitions"]
