"""The raw-drop sensor: watches the drop zone and requests the runs of `raw_files` whose files changed."""

import json

import dagster as dg

from llm_assets.core.inventory import EMPTY_FINGERPRINT, RawScan, changed_partitions
from llm_assets.core.keys import PartitionRef
from llm_assets.core.versions import digest
from llm_assets.platform.backfills import observation, stale_backfill_targets
from llm_assets.platform.partitions import CRAWL_PARTITIONS, contiguous_ranges, crawl_partitions, range_request
from llm_assets.registry import UNOBSERVED, SourceVersion
from llm_assets.settings import Settings
from llm_assets.stages.filtered import CURATION_SCOPE
from llm_assets.stages.raw_files import RAW_DROP, SPEC
from resources import SENSOR_RETRY_BUDGET_S, ObjectStore

# Hidden in the UI (a leading "."): what a curator reads of a run is its partitions, not their fingerprints.
RAW_FINGERPRINTS_TAG = ".llm_assets/raw_fingerprints"
LOGGED_INVALID = 20  # per tick; `llm-assets status` lists every raw key that will not be ingested


def run_request(group: dict[str, str]) -> dg.RunRequest:
    """The run of a range of partitions (key -> raw fingerprint): its run key names the partitions and digests their
    fingerprints, so a repeated tick never launches it twice; the fingerprints ride along in a hidden tag
    (`requested_fingerprints`)."""
    keys = list(group)
    first, last = PartitionRef.parse(keys[0]), PartitionRef.parse(keys[-1])
    run_key = f"{first.key}|{group[first.key]}" if len(keys) == 1 else \
        f"{first.key}..{last.shard if last.crawl == first.crawl else last.key}|{digest(*group.values())}"
    return range_request(keys, run_key=run_key, tags={RAW_FINGERPRINTS_TAG: json.dumps(group, separators=(",", ":"))})


def requested_fingerprints(request: dg.RunRequest) -> dict[str, str]:
    """Partition key -> the raw fingerprint a run request of the raw-drop sensor builds."""
    return json.loads(request.tags[RAW_FINGERPRINTS_TAG])


def build_raw_drop_sensor(settings: Settings) -> dg.SensorDefinition:
    @dg.sensor(
        job_name=SPEC.job,  # it requests the runs of the job that builds raw_files
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
        registered = context.instance.get_dynamic_partitions(CRAWL_PARTITIONS)
        new_crawls = sorted({PartitionRef.parse(p).crawl for p in now} - set(registered))
        for crawl in new_crawls:  # its shards that got no file are built too: empty, not missing for ever
            for shard in settings.shard_keys():
                changed.setdefault(PartitionRef(crawl, shard).key, EMPTY_FINGERPRINT)
        owned = {p for asset, p in stale_backfill_targets(context.instance) if asset == SPEC.name}
        for p in sorted(owned & set(changed)):
            context.log.info(f"{p}: a stale backfill in progress rebuilds it")
        wanted = {p: fp for p, fp in changed.items() if p not in owned}
        # the crawls in the order the instance will hold them once this tick's new ones are added: crawls dropped
        # together share runs
        crawls = [*registered, *new_crawls]
        runs = [run_request({p: wanted[p] for p in keys}) for keys in contiguous_ranges(wanted, settings, crawls)]
        observed = []
        for p, fp in sorted(wanted.items()):
            # on record before the run reads them: the UI marks raw_files stale until the run ends, and a new
            # crawl's filtered partitions have their curation source on record before their first build
            observed.append(observation(SourceVersion(RAW_DROP.name, p, fp)))
            if PartitionRef.parse(p).crawl in new_crawls:
                observed.append(observation(SourceVersion(CURATION_SCOPE.name, p, UNOBSERVED)))
        return dg.SensorResult(
            run_requests=runs,
            asset_events=observed,
            dynamic_partitions_requests=[crawl_partitions.build_add_request(new_crawls)] if new_crawls else [],
            cursor=json.dumps({"seen": now, "scan": None}),
            skip_reason=None if runs else "no new, changed or removed raw files",
        )

    return raw_drop_sensor
