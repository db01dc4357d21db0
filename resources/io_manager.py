"""The lake IO manager: Parquet per partition under lake/<asset>/crawl=<c>/shard=<s>/, committed atomically,
loaded lazily.

Stages write their own parts (one per work unit, possibly from other processes) and hand this IO manager a
`PartitionOutput`; it commits the partition by writing its manifest. A Polars or Arrow frame is also accepted
and written as one part. Downstream assets receive a `LakeInput`: the committed manifests of one or many
upstream partitions and a `scan()` that returns a `polars.LazyFrame`, so nothing is loaded until asked.
"""

from __future__ import annotations

import os
import secrets
import time

import dagster as dg
import polars as pl
import pyarrow as pa

from llm_assets.core.keys import PartitionRef
from llm_assets.core.lake import manifest_key, part_key
from llm_assets.core.partition import FrameOutput, LakeInput, PartitionOutput, RangeOutput, commit
from llm_assets.core.units import UnitResult, peak_rss_bytes, s3_requests
from resources.object_store import ObjectStore

# Input metadata (Dagster's convention for IO managers): load the committed partitions, skip those never built.
ALLOW_MISSING_PARTITIONS = "allow_missing_partitions"


def crawl_shard(partition_key: str | dg.MultiPartitionKey) -> tuple[str, str]:
    if isinstance(partition_key, dg.MultiPartitionKey):
        dims = partition_key.keys_by_dimension
        return dims["crawl"], dims["shard"]
    ref = PartitionRef.parse(str(partition_key))  # a crawl-level asset's partition is stored as its crawl's one shard
    return ref.crawl, ref.shard


class LakeIOManager(dg.ConfigurableIOManager):
    """Commits crawl × shard partitions to the lake and opens them lazily downstream."""

    store: ObjectStore

    def handle_output(self, context: dg.OutputContext,
                      obj: PartitionOutput | RangeOutput | pl.DataFrame | pa.Table) -> None:
        asset = context.asset_key.path[-1]
        if isinstance(obj, RangeOutput):  # a run of many partitions: each committed on its own
            for (crawl, shard), out in obj.partitions.items():
                if out is not None:
                    self.commit(asset, crawl, shard, out)
                    context.log.debug(f"committed {asset} crawl={crawl} shard={shard}")
            context.add_output_metadata({"partitions_committed": sum(o is not None for o in obj.partitions.values())})
            return
        (key,) = context.asset_partition_keys  # one partition: of its run, or the one of a range of one
        crawl, shard = crawl_shard(key)
        out = self.commit(asset, crawl, shard, obj)
        context.add_output_metadata({"lake_manifest": dg.MetadataValue.text(self.manifest_url(asset, crawl, shard)),
                                     "parts": len(out.units)})
        context.log.debug(f"committed {asset} crawl={crawl} shard={shard}: {out.rows_out} rows")

    def commit(self, asset: str, crawl: str, shard: str, obj: PartitionOutput | FrameOutput | pl.DataFrame | pa.Table
               ) -> PartitionOutput:
        """Write a frame as the partition's one part, then commit the partition's output: its manifest."""
        lake = self.store.lake()
        if isinstance(obj, FrameOutput):
            frame = obj
            obj = self._write_frame(lake, asset, crawl, shard, frame.frame, frame.work)
            obj.code_version, obj.data_version, obj.inputs = frame.code_version, frame.data_version, frame.inputs
            obj.runner = frame.runner
        elif isinstance(obj, (pl.DataFrame, pa.Table)):
            obj = self._write_frame(lake, asset, crawl, shard, obj)
        if not isinstance(obj, PartitionOutput):
            raise TypeError(f"{asset}: the lake IO manager stores PartitionOutput or a frame, not {type(obj).__name__}")
        commit(lake, asset, crawl, shard, obj)
        return obj

    @staticmethod
    def _write_frame(lake, asset: str, crawl: str, shard: str, frame: pl.DataFrame | pa.Table,
                     work: UnitResult | None = None) -> PartitionOutput:
        """One part holding the frame, as one unit that carries what computing it cost (`work`) and its write."""
        table = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
        unit = secrets.token_hex(10)  # a fresh part per write; the commit drops the previous one
        key = part_key(asset, crawl, shard, unit)
        start, cpu, requests = time.perf_counter(), time.process_time(), s3_requests()
        with lake.part_writer(key, table.schema) as w:
            for batch in table.to_batches(max_chunksize=65536):
                w.write(batch)
        work = work or UnitResult(unit="", source="frame", rows_in=table.num_rows)
        return PartitionOutput(units=[UnitResult(
            unit=unit, source=work.source, part=key, rows_in=work.rows_in, rows_out=table.num_rows,
            bytes_in=work.bytes_in, bytes_out=w.bytes, seconds=work.seconds + time.perf_counter() - start,
            cpu_seconds=work.cpu_seconds + time.process_time() - cpu,
            requests=work.requests + s3_requests() - requests,
            worker=os.getpid(), peak_rss_bytes=max(work.peak_rss_bytes, peak_rss_bytes()),
            columns=table.schema.names)])

    def load_input(self, context: dg.InputContext) -> LakeInput:
        """The committed partitions the input maps to. An input that fans in (every shard of a crawl) and declares
        `allow_missing_partitions` gets those that are committed: a shard without raw files has none."""
        asset = context.asset_key.path[-1]
        keys = context.asset_partition_keys if context.has_asset_partitions else []
        allow_missing = bool((context.definition_metadata or {}).get(ALLOW_MISSING_PARTITIONS))
        # In a run of a range of partitions, one that cannot be read fails (or is kept) alone, when the stage takes
        # it; a run of one partition that fans many in fails here, naming the one missing.
        return LakeInput.load(self.store.lake(), asset, [crawl_shard(k) for k in keys], allow_missing=allow_missing,
                              per_partition=len(keys) > 1 and not context.has_partition_key)

    def manifest_url(self, asset: str, crawl: str, shard: str) -> str:
        return self.store.lake().url(manifest_key(asset, crawl, shard))
