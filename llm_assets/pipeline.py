"""The pipeline: every asset of the code location, and the lake stages' specs in build order.

`definitions` composes Dagster's objects from this; the stale planner, `status` and the demo read the specs.
"""

from __future__ import annotations

from llm_assets.crawl_stats.assets import SPEC as CRAWL_STATS, crawl_stats
from llm_assets.dedup.assets import (CLUSTERS_SPEC, DEDUPLICATED_SPEC, SIGNATURES_SPEC, deduplicated,
                                     duplicate_clusters, signatures)
from llm_assets.documents.assets import SPEC as DOCUMENTS, documents
from llm_assets.filtered.assets import SPEC as FILTERED, filtered
from llm_assets.image_text_pairs.assets import SPEC as IMAGE_TEXT_PAIRS, image_text_pairs
from llm_assets.quality_classifier.assets import quality_classifier
from llm_assets.raw.assets import SPEC as RAW_FILES, raw_files
from llm_assets.registry import StageSpec, check_order
from llm_assets.releases.assets import SPEC as RELEASE, release
from llm_assets.tokenized.assets import SPEC as TOKENIZED, tokenized, tokenizer

ASSETS = [raw_files, documents, image_text_pairs, filtered, signatures, duplicate_clusters, deduplicated, tokenized,
          crawl_stats, quality_classifier, tokenizer, release]

SPECS: list[StageSpec] = [RAW_FILES, DOCUMENTS, IMAGE_TEXT_PAIRS, FILTERED, SIGNATURES_SPEC, CRAWL_STATS,
                          CLUSTERS_SPEC, DEDUPLICATED_SPEC, TOKENIZED, RELEASE]
check_order(SPECS)


def code_versions() -> dict[str, str]:
    """Each asset's code version (stage version + the settings it depends on), as the definitions declare it."""
    return {key.path[-1]: version for a in ASSETS for key, version in a.code_versions_by_key.items()
            if version is not None}
