"""The llm-assets code location. This module only composes."""

import dagster as dg

from llm_assets.freshness import stale_sensor
from llm_assets.jobs import crawl_job, curated_job, lake_job, release_job
from llm_assets.pipeline import ASSETS
from llm_assets.raw.sensor import raw_drop_sensor
from llm_assets.vacuum import vacuum_job, vacuum_schedule
from resources import LakeIOManager, object_store_from_env

store = object_store_from_env()

defs = dg.Definitions(
    assets=ASSETS,
    jobs=[lake_job, crawl_job, curated_job, release_job, vacuum_job],
    schedules=[vacuum_schedule],
    sensors=[raw_drop_sensor, stale_sensor],
    resources={"store": store, "lake_io_manager": LakeIOManager(store=store)},
)
