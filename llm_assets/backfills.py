"""What the sensors and the stale backfill share about Dagster's instance: the tag of a stale backfill, the
partitions one in progress holds, and an observed source's version as Dagster's observation of it."""

from __future__ import annotations

import dagster as dg

from llm_assets.dagster_private import DATA_VERSION_TAG, BulkActionStatus, PartitionBackfill, backfill_targets
from llm_assets.registry import SourceVersion

STALE_TAG = "llm_assets/stale_backfill"


def stale_backfills_in_progress(instance: dg.DagsterInstance) -> list[PartitionBackfill]:
    return [b for b in instance.get_backfills(status=BulkActionStatus.REQUESTED, limit=50) if STALE_TAG in b.tags]


def stale_backfill_targets(instance: dg.DagsterInstance) -> set[tuple[str, str]]:
    """(asset, partition) of every stale backfill still in progress: the raw-drop sensor leaves those to it."""
    return {t for b in stale_backfills_in_progress(instance) for t in backfill_targets(b)}


def observation(version: SourceVersion) -> dg.AssetObservation:
    return dg.AssetObservation(dg.AssetKey(version.source), partition=version.partition,
                               tags={DATA_VERSION_TAG: version.version})
