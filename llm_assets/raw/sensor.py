import json

import dagster as dg

from llm_assets.core.inventory import EMPTY_FINGERPRINT, RawScan, changed_partitions
from llm_assets.filtered.spec import CURATION_SCOPE
from llm_assets.freshness import observation, stale_backfill_targets
from llm_assets.partitions import CRAWL_PARTITIONS, crawl_partitions, crawl_shard_key
from llm_assets.raw.spec import RAW_DROP, SPEC
from llm_assets.registry import UNOBSERVED
from llm_assets.stale import SourceVersion
from llm_assets.settings import Settings
from resources import SENSOR_RETRY_BUDGET_S, ObjectStore

RAW_FINGERPRINT_TAG = "llm_assets/raw_fingerprint"
LOGGED_INVALID = 20  # per tick; `llm-assets status` lists every raw key that will not be ingested



def build_raw_drop_sensor(settings: Settings) -> dg.SensorDefinition:
    @dg.sensor(
        job_name="lake_job",
        minimum_interval_seconds=settings.sensor.interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def raw_drop_sensor(context: dg.SensorEvaluationContext, store: ObjectStore):
        """Watches `raw/<crawl>/` and requests a run for exactly the (crawl, shard) partitions whose raw files
        appeared, changed or disappeared; registers new crawls as partitions and requests their shards that got no
        file too (an empty partition, rather than one missing for ever). A partition a stale backfill in progress
        rebuilds is left to it: a drop has one owner.

        The listing is incremental: a pass over `raw/` may span several ticks (settings: sensor.max_keys_per_tick),
        its progress kept in the cursor. A partition is requested when its fingerprint over (key, ETag, size)
        differs from the last completed pass; the run key carries that fingerprint, so an identical re-upload
        requests nothing and a repeated tick never launches a second run. The fingerprint is reported as the
        partition's version of `raw_drop`, the observed source `raw_files` depends on.
        """
        cursor = json.loads(context.cursor) if context.cursor else {}
        seen: dict[str, str] = cursor.get("seen", {})
        scan = RawScan.from_json(cursor.get("scan") or {})
        finished = scan.step(store.lake(retry_budget_s=SENSOR_RETRY_BUDGET_S), settings.shards,
                             settings.sensor.max_keys_per_tick)
        for message in scan.invalid[:LOGGED_INVALID]:
            context.log.warning(f"ignored raw key: {message}")
        if len(scan.invalid) > LOGGED_INVALID:
            context.log.warning(f"ignored {len(scan.invalid) - LOGGED_INVALID} more raw keys that cannot be "
                                "ingested; `llm-assets status` lists them with the reason")
        if not finished:
            return dg.SensorResult(cursor=json.dumps({"seen": seen, "scan": scan.to_json()}),
                                   skip_reason=f"listing raw/ continues after {scan.after!r}")

        now = scan.fingerprints()
        changed = changed_partitions(seen, now)
        known = set(context.instance.get_dynamic_partitions(CRAWL_PARTITIONS))
        new_crawls = sorted({p.split("|")[0] for p in now} - known)
        for crawl in new_crawls:  # its shards that got no file are built too: empty, not missing for ever
            for shard in settings.shard_keys():
                changed.setdefault(f"{crawl}|{shard}", EMPTY_FINGERPRINT)
        owned = {p for asset, p in stale_backfill_targets(context.instance) if asset == SPEC.name}
        runs, observed = [], []
        for p, fp in sorted(changed.items()):
            if p in owned:
                context.log.info(f"{p}: a stale backfill in progress rebuilds it")
                continue
            crawl, shard = p.split("|")
            runs.append(dg.RunRequest(run_key=f"{crawl}|{shard}|{fp}", partition_key=crawl_shard_key(crawl, shard),
                                      tags={RAW_FINGERPRINT_TAG: fp}))
            # on record before the run reads them: the UI marks raw_files stale until the run ends, and a new
            # crawl's filtered partitions have their curation source on record before their first build
            observed.append(observation(SourceVersion(RAW_DROP.name, p, fp)))
            if crawl in new_crawls:
                observed.append(observation(SourceVersion(CURATION_SCOPE.name, p, UNOBSERVED)))
        return dg.SensorResult(
            run_requests=runs,
            asset_events=observed,
            dynamic_partitions_requests=[crawl_partitions.build_add_request(new_crawls)] if new_crawls else [],
            cursor=json.dumps({"seen": now, "scan": None}),
            skip_reason=None if runs else "no new, changed or removed raw files",
        )

    return raw_drop_sensor
