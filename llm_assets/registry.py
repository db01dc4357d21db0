"""The stage registry: what the stale planner, `status`, the jobs and the demo know of each lake stage.

Each stage declares its `StageSpec` beside its asset (`llm_assets/<stage>/assets.py`); `llm_assets.pipeline` lists
them in build order. Nothing else names assets: the planner walks the specs, `status` shows them, the demo picks
its stages from them. A spec says which lake assets the stage reads and, where the general rules do not cover it,
how the data version a build would have now is computed. No Dagster here: the planner runs without definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from llm_assets.stale import Planner

Level = Literal["shard", "crawl", "release"]

# Why a partition is planned.
MISSING = "missing"
CODE = "code or config changed"
RAW = "new or changed raw data"
UPSTREAM = "upstream data changed"


@dataclass(frozen=True)
class StageSpec:
    """One lake stage.

    - `level`: `shard` (a crawl × shard partition), `crawl` (one partition per crawl over every shard of its input,
      stored as shard "all"), or `release` (unpartitioned, written under releases/).
    - `inputs`: the lake assets it reads. A shard stage reads the same crawl × shard of a shard input and its
      crawl's partition of a crawl input; a crawl stage reads every shard of its crawl.
    - `current_inputs(planner, crawl, shard)`: a shard stage's inputs as its manifest records them (name -> data
      version), when they are not simply each input's data version (deduplicated records its shard's removals).
    - `expected_version(planner, crawl)`: a crawl stage's data version if it were built now.
    - `plan(planner, crawl, shard)`: a stage whose staleness follows none of the rules above (the raw inventory
      compares file fingerprints, a release its version): the cause, or None when fresh.
    """

    name: str
    level: Level
    inputs: tuple[str, ...] = ()
    current_inputs: Callable[[Planner, str, str], dict[str, str | None]] | None = None
    expected_version: Callable[[Planner, str], str] | None = None
    plan: Callable[[Planner, str | None, str | None], str | None] | None = None


def check_order(specs: Sequence[StageSpec]) -> None:
    """Every input of a stage is listed before it: the registry's order is a build order."""
    seen: set[str] = set()
    for spec in specs:
        if missing := [i for i in spec.inputs if i not in seen]:
            raise ValueError(f"stage {spec.name} reads {missing}, which the registry lists after it (or not at all)")
        seen.add(spec.name)


def by_level(specs: Sequence[StageSpec], level: Level) -> list[str]:
    return [s.name for s in specs if s.level == level]
