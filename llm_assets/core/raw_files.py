"""Stage `raw_files`: the inventory of one (crawl, shard) partition's raw files, as observed in the bucket.

Keys under the crawl that hash to the shard but cannot be ingested are not files of the partition: they are
counted as dropped (`invalid_raw_key`) and kept under `rejected/raw_files/` with the reason."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from llm_assets.core.inventory import INVALID_RAW_KEY, REJECTED_SCHEMA, SCHEMA, fingerprint, partition_listing
from llm_assets.core.lake import Lake, parse_raw_key, part_key
from llm_assets.core.units import UnitResult, WorkUnit, timed_unit

STAGE_VERSION = "1"


@dataclass(frozen=True)
class InventoryUnit(WorkUnit):  # source: raw/<crawl>/; no id: the inventory always lists again
    crawl: str
    shard: str
    shards: int


@timed_unit
def observe_raw_files(u: InventoryUnit) -> UnitResult:
    lake = Lake(u.store)
    files, rejected = partition_listing(lake, u.crawl, u.shard, u.shards)
    unit = fingerprint(files)
    key = part_key("raw_files", u.crawl, u.shard, unit)
    table = pa.table(
        {
            "key": [f.key for f in files],
            "file": [parse_raw_key(f.key)[1] for f in files],
            "size": [f.size for f in files],
            "etag": [f.etag for f in files],
        },
        schema=SCHEMA,
    )
    with lake.part_writer(key, SCHEMA) as out:
        out.write(table)
    rejected_key = None
    if rejected:
        # Named by the objects it lists, as the inventory part is by its files.
        rejected_key = part_key("raw_files", u.crawl, u.shard, fingerprint(r.obj for r in rejected), zone="rejected")
        with lake.part_writer(rejected_key, REJECTED_SCHEMA) as out_rejected:
            out_rejected.write(pa.Table.from_pylist(
                [{"key": r.obj.key, "size": r.obj.size, "etag": r.obj.etag, "reason": r.reason} for r in rejected],
                REJECTED_SCHEMA))
    return UnitResult(unit=unit, source=u.source, part=key, rejected_part=rejected_key,
                      rows_in=len(files) + len(rejected), rows_out=len(files),
                      dropped={INVALID_RAW_KEY: len(rejected)} if rejected else {},
                      bytes_in=sum(f.size for f in files), bytes_out=out.bytes, columns=SCHEMA.names)
