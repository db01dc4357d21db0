"""The llm-assets code location. This module only composes."""

import dagster as dg

from llm_assets.crawl_stats.assets import crawl_stats
from llm_assets.dedup.assets import deduplicated, duplicate_clusters, signatures
from llm_assets.documents.assets import documents
from llm_assets.freshness import stale_sensor
from llm_assets.filtered.assets import filtered
from llm_assets.image_text_pairs.assets import image_text_pairs
from llm_assets.jobs import crawl_job, curated_job, lake_job, release_job
from llm_assets.quality_classifier.assets import quality_classifier
from llm_assets.raw.assets import raw_files
from llm_assets.raw.sensor import raw_drop_sensor
from llm_assets.releases.assets import release
from llm_assets.tokenized.assets import tokenized, tokenizer
from llm_assets.vacuum import vacuum_job, vacuum_schedule
from resources import LakeIOManager, object_store_from_env

store = object_store_from_env()

defs = dg.Definitions(
    assets=[raw_files, documents, image_text_pairs, filtered, signatures, duplicate_clusters, deduplicated, tokenized,
            crawl_stats, quality_classifier, tokenizer, release],
    jobs=[lake_job, crawl_job, curated_job, release_job, vacuum_job],
    schedules=[vacuum_schedule],
    sensors=[raw_drop_sensor, stale_sensor],
    resources={"store": store, "lake_io_manager": LakeIOManager(store=store)},
)
