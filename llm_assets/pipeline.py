"""The stage registry of the code location: every asset's spec, in build order.

`definitions.build_defs` builds each stage's asset from its module's factory; the stale planner, `status` and the
demo read the specs without importing Dagster's definitions.
"""

from __future__ import annotations

from llm_assets.cost.spec import SPEC as COST
from llm_assets.crawl_stats.spec import SPEC as CRAWL_STATS
from llm_assets.curation.spec import EVAL_INDEX_SPEC, TAKEDOWNS_SPEC
from llm_assets.dedup.spec import CLUSTERS_SPEC, DEDUPLICATED_SPEC, SIGNATURES_SPEC
from llm_assets.documents.spec import SPEC as DOCUMENTS
from llm_assets.enriched.spec import SPEC as ENRICHED
from llm_assets.filtered.spec import SPEC as FILTERED
from llm_assets.image_text_pairs.spec import SPEC as IMAGE_TEXT_PAIRS
from llm_assets.quality_classifier.spec import SPEC as QUALITY_CLASSIFIER
from llm_assets.raw.spec import SPEC as RAW_FILES
from llm_assets.registry import StageSpec, check_order
from llm_assets.releases.spec import SPEC as RELEASE
from llm_assets.tokenized.spec import SPEC as TOKENIZED, TOKENIZER_SPEC

SPECS: list[StageSpec] = [TAKEDOWNS_SPEC, EVAL_INDEX_SPEC, RAW_FILES, DOCUMENTS, IMAGE_TEXT_PAIRS, FILTERED, SIGNATURES_SPEC, CRAWL_STATS,
                          CLUSTERS_SPEC, DEDUPLICATED_SPEC, QUALITY_CLASSIFIER, TOKENIZER_SPEC, TOKENIZED, ENRICHED, RELEASE,
                          COST]  # cost last: planned once every stage it charges is
check_order(SPECS)


def code_versions(settings) -> dict[str, str]:
    """Each asset's code version under these settings (stage version + the settings it depends on)."""
    return {spec.name: spec.version(settings) for spec in SPECS}
