"""The lake's garbage collection, like a table format's vacuum: parts that no committed manifest needs any more
(and a killed preview's scratch) are deleted once the retention (settings: store.retention_hours) has passed."""

import dagster as dg

from llm_assets.core.partition import vacuum
from resources import ObjectStore


@dg.op
def vacuum_lake(context: dg.OpExecutionContext, store: ObjectStore) -> dg.Output[int]:
    """Delete parts superseded by a commit longer ago than the retention, parts of killed runs older than it, what
    release builds that failed left, and the scratch of previews killed before they removed it. Live parts,
    superseded parts a reader of an older manifest may still be reading, and every file of a committed release
    stay."""
    retention_s = store.config().retention_s
    deleted = vacuum(store.lake(), retention_s)
    context.log.info(f"vacuum: deleted {len(deleted)} objects older than {retention_s / 3600:g} h")
    return dg.Output(len(deleted), metadata={"deleted": len(deleted), "retention_hours": retention_s / 3600})


@dg.job(description="Garbage-collect the lake: superseded and orphaned parts, and failed release builds, past the "
                    "retention.")
def vacuum_job():
    vacuum_lake()


vacuum_schedule = dg.ScheduleDefinition(job=vacuum_job, cron_schedule="17 3 * * *",
                                        default_status=dg.DefaultScheduleStatus.RUNNING)
