"""The stage registry: what the stale planner, `status`, the jobs and the demo know of each lake stage.

Each stage declares its `StageSpec` in its stage module (`llm_assets/stages/<stage>.py`, beside its `build`);
`llm_assets.stages.STAGES` lists the modules in build order. Nothing else names assets: the planner walks the
specs, `status` shows them, the jobs are made from them, the demo picks its stages from them. A spec says which
lake assets the stage reads and, where the general rules do not cover it, how its code version follows the
settings, how the data version a build would have now is computed, and, where the stage reads something outside
the lake's assets (raw files, the takedown and eval lists), the observed source that carries it into Dagster's
notion of stale. No Dagster here: the planner and `status` run without the definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake
    from llm_assets.core.partition import Manifest
    from llm_assets.settings import Settings

Level = Literal["shard", "crawl", "release", "model"]

# Why a partition is planned.
MISSING = "missing"
FAILED = "failed"  # its latest run failed: "failed (run <id>)"
CODE = "code or config changed"
RAW = "new or changed raw data"
UPSTREAM = "upstream data changed"
LANGUAGES = "language thresholds changed"  # for a language the partition holds: "language thresholds changed (de)"


T = TypeVar("T")


class Planner(Protocol):
    """What a spec's functions read of the stale planner (`llm_assets.tools.stale.Planner`) during one planning pass."""

    lake: Lake
    settings: Settings
    shards: list[str]
    crawls: list[str]
    code: dict[str, str]

    # Read-only members are covariant: the planner may hold plain dicts.
    @property
    def specs(self) -> Mapping[str, StageSpec]: ...
    @property
    def planned(self) -> Mapping[tuple[str, str], str]: ...  # (asset, partition) -> cause, so far in this pass

    def memo(self, key: object, compute: Callable[[], T]) -> T: ...
    def manifest(self, asset: str, crawl: str, shard: str) -> Manifest | None: ...
    def committed(self, asset: str, crawl: str) -> dict[str, Manifest]: ...
    def code_changed(self, asset: str, built: Manifest) -> bool: ...
    def data_version(self, asset: str, crawl: str, shard: str) -> str | None: ...
    def any_planned(self, asset: str) -> bool: ...


@dataclass(frozen=True)
class SourceVersion:
    """An observed source's version for a partition, as Dagster should see it (`StageSpec.observed`)."""

    source: str
    partition: str  # "crawl|shard"
    version: str
    anchor: bool = False  # of a partition planned for another cause: needed only while the source has no observation


UNOBSERVED = "none"  # an observed source's version for a partition it cannot be computed for yet


def _unversioned(settings: Settings) -> str:
    return "1"


@dataclass(frozen=True)
class Observed:
    """What a shard stage reads from outside the lake's assets, as one version per crawl × shard: an observable
    source asset `name` the stage depends on in Dagster. The UI marks a partition stale when this source's version
    for it changes after the partition was built, so the versions are the planner's own: `current(planner, crawl,
    shard)` is what a build would read now (None when it cannot tell yet), `recorded(manifest)` what the committed
    partition read. They differ exactly when the planner plans the partition for this reason."""

    name: str
    description: str
    current: Callable[[Planner, str, str], str | None]
    recorded: Callable[[Manifest], str]
    deps: tuple[str, ...] = ()


@dataclass(frozen=True)
class StageSpec:
    """One asset of the code location.

    - `level`: `shard` (a crawl × shard partition), `crawl` (one partition per crawl over every shard of its input,
      stored as shard "all"), `release` (unpartitioned, written under releases/), or `model` (unpartitioned, a
      file under models/; not planned: a lake stage that uses one records its hash).
    - `inputs`: the lake assets it reads. A shard stage reads the same crawl × shard of a shard input and its
      crawl's partition of a crawl input; a crawl stage reads every shard of its crawl.
    - `version(settings)`: its code version, the stage version and the settings it depends on; the asset declares
      it and the planner compares it with what each manifest recorded.
    - `current_inputs(planner, crawl, shard)`: a shard stage's inputs as its manifest records them (name -> data
      version), when they are not simply each input's data version (deduplicated records its shard's removals).
    - `expected_version(planner, crawl)`: a crawl stage's data version if it were built now.
    - `plan(planner, crawl, shard)`: a stage whose staleness follows none of the rules above (the raw inventory
      compares file fingerprints, a release its version): the cause, or None when fresh.
    - `observed`: the observed source carrying what the stage reads outside the lake's assets into Dagster.
    - `cause(planner, built, name)`: why a shard partition whose recorded input `name` differs from now is planned,
      where `upstream data changed (name)` would not say it (None: that).
    - `facts(lake, settings)`: an unpartitioned asset's latest build as `status` shows it (its version and counts),
      or None when it was never built.
    - `group`: its asset group in the catalog; `job`: the asset job that builds it (None: materialized on its own);
      jobs are made from these (`llm_assets.dagster.jobs`).
    - `documents`: it holds documents with their provenance, one part per unit: `trace` follows a URL through it
      and `export` writes it out.
    """

    name: str
    level: Level
    inputs: tuple[str, ...] = ()
    version: Callable[[Settings], str] = _unversioned
    current_inputs: Callable[[Planner, str, str], dict[str, str | None]] | None = None
    expected_version: Callable[[Planner, str], str] | None = None
    plan: Callable[[Planner, str | None, str | None], str | None] | None = None
    facts: Callable[[Lake, Settings], dict | None] | None = None
    observed: Observed | None = None
    cause: Callable[[Planner, Manifest, str], str | None] | None = None
    group: str = "lake"
    job: str | None = None
    documents: bool = False


def check_order(specs: Sequence[StageSpec]) -> None:
    """Every input of a stage is listed before it: the registry's order is a build order."""
    seen: set[str] = set()
    for spec in specs:
        if missing := [i for i in spec.inputs if i not in seen]:
            raise ValueError(f"stage {spec.name} reads {missing}, which the registry lists after it (or not at all)")
        seen.add(spec.name)


def by_level(specs: Sequence[StageSpec], *levels: Level) -> list[str]:
    return [s.name for s in specs if s.level in levels]
