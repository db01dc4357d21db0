"""The llm-assets code location: `build_defs(settings)` composes it; `defs` is the deployment's (the settings file
LLM_ASSETS_SETTINGS names, else the embedded default), loaded when Dagster asks for it."""

from collections.abc import Sequence

import dagster as dg

from llm_assets.dagster.adapter import stage_definitions
from llm_assets.dagster.freshness import build_stale_backfill_sensor, build_stale_checks, build_stale_sensor
from llm_assets.dagster.jobs import build_jobs
from llm_assets.dagster.preview import build_preview_job
from llm_assets.dagster.raw_sensor import build_raw_drop_sensor
from llm_assets.dagster.vacuum import vacuum_job, vacuum_schedule
from llm_assets.settings import Settings, load_settings
from llm_assets.stage import Stage
from llm_assets.stages import STAGES, specs_of
from llm_assets.stages.raw_files import SPEC as RAW_FILES
from resources import LakeIOManager, object_store_from_env


def build_stages(settings: Settings, stages: Sequence[Stage] = STAGES) -> dg.Definitions:
    """The stages' assets, the jobs their specs name, the sensor that runs stale backfills through them, and the one
    that watches the raw drop zone for the stage that reads it."""
    specs = specs_of(stages)
    jobs = build_jobs(specs)
    sensors = [build_stale_backfill_sensor(settings, jobs)]
    sensors += [build_raw_drop_sensor(settings)] if RAW_FILES in specs else []
    return dg.Definitions.merge(stage_definitions(stages, settings), dg.Definitions(jobs=jobs, sensors=sensors))


def build_assets(settings: Settings) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    # stage modules build assets and asset specs only (no source or cacheable assets)
    return [a for a in build_stages(settings).assets or [] if isinstance(a, dg.AssetsDefinition | dg.AssetSpec)]


def build_defs(settings: Settings, stages: Sequence[Stage] = STAGES) -> dg.Definitions:
    store = object_store_from_env(settings.store)
    return dg.Definitions.merge(build_stages(settings, stages), dg.Definitions(
        jobs=[vacuum_job, build_preview_job(settings)],
        schedules=[vacuum_schedule],
        sensors=[build_stale_sensor(settings)],
        asset_checks=build_stale_checks(settings),
        resources={"store": store, "lake_io_manager": LakeIOManager(store=store)},
        # Jobs that name no executor (vacuum_job) run in the run's process too, like every asset job: Dagster's
        # default, a process per step, would start another interpreter and import the code location again
        # (seconds) before a step that takes one.
        executor=dg.in_process_executor,
    ))


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs(load_settings())
