"""The stages of the code location, in build order: the one list every other list derives from.

Each module holds its stages' Dagster-free `StageSpec`s (what the stale planner, `status`, `trace`, `export` and
the demo read) and their stage objects (`llm_assets.stage`), listed in its `STAGES`. `llm_assets.dagster.adapter` makes
their assets; `llm_assets.dagster.jobs` the jobs the specs name. docs/extending.md, "Add a stage", says how to add one.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_assets.registry import StageSpec, check_order
from llm_assets.stage import Stage
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
    raw_files,
    release,
    tokenized,
)

# cost last: it is planned once every stage it charges is
STAGES: list[Stage] = [stage for module in (curation, raw_files, documents, image_text_pairs, filtered, dedup,
                                             crawl_stats, quality_classifier, tokenized, enriched, release, cost)
                       for stage in module.STAGES]


def specs_of(stages: Sequence[Stage]) -> list[StageSpec]:
    """The stages' specs, in build order."""
    specs = [stage.spec for stage in stages]
    check_order(specs)
    return specs


SPECS: list[StageSpec] = specs_of(STAGES)


def code_versions(settings) -> dict[str, str]:
    """Each asset's code version under these settings (stage version + the settings it depends on)."""
    return {spec.name: spec.version(settings) for spec in SPECS}
