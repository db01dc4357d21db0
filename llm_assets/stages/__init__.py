"""The stages of the code location, in build order: the one list every other list derives from.

Each module holds its stage's Dagster-free `StageSpec`s at top level (what the stale planner, `status`, `trace`,
`export` and the demo read, without importing Dagster) and `build(settings, specs) -> dg.Definitions` (its assets,
its sensor if any). `llm_assets.definitions` merges what each builds; `llm_assets.jobs` makes the jobs the specs
name. docs/extending.md, "Add a stage", says how to add one.
"""

from __future__ import annotations

from types import ModuleType

from llm_assets.registry import StageSpec, check_order
from llm_assets.stages import (
    cost,
    crawl_stats,
    curation,
    dedup,
    documents,
    enriched,
    filtered,
    image_text_pairs,
    quality_classifier,
    raw,
    releases,
    tokenized,
)

# cost last: it is planned once every stage it charges is
STAGES: list[ModuleType] = [curation, raw, documents, image_text_pairs, filtered, dedup, crawl_stats,
                            quality_classifier, tokenized, enriched, releases, cost]


def specs_of(stages: list[ModuleType]) -> list[StageSpec]:
    """Every spec the stage modules declare (a module may declare several: dedup's three), in build order."""
    specs = [spec for stage in stages for spec in stage.SPECS]
    check_order(specs)
    return specs


SPECS: list[StageSpec] = specs_of(STAGES)


def code_versions(settings) -> dict[str, str]:
    """Each asset's code version under these settings (stage version + the settings it depends on)."""
    return {spec.name: spec.version(settings) for spec in SPECS}
