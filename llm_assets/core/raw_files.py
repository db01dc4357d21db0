"""Stage `raw_files`: the inventory of one (crawl, shard) partition's raw files, as observed in the bucket."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from llm_assets.core.inventory import SCHEMA, fingerprint, partition_files
from llm_assets.core.lake import Lake, StoreConfig, parse_raw_key, part_key
from llm_assets.core.units import UnitResult, timed_unit

STAGE_VERSION = "1"


@dataclass(frozen=True)
class InventoryUnit:
    store: StoreConfig
    crawl: str
    shard: str
    shards: int

    @property
    def source(self) -> str:
        return f"raw/{self.crawl}/"


@timed_unit
def observe_raw_files(u: InventoryUnit) -> UnitResult:
    lake = Lake(u.store)
    files = partition_files(lake, u.crawl, u.shard, u.shards)
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
    return UnitResult(unit=unit, source=u.source, part=key, rows_in=len(files), rows_out=len(files),
                      bytes_in=sum(f.size for f in files), bytes_out=out.bytes, columns=SCHEMA.names)
