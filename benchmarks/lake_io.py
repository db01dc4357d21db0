"""Reading a Parquet part from the store: the lake client's ranged reads (boto3, every request retried within the
store's budget and pinned to the part's ETag) against PyArrow's own S3 client (its own retries, errors that do not
say whether the store or the bytes failed), interleaved A B A B on the same part of an embedded SeaweedFS.

    .venv/bin/python -m benchmarks.lake_io [--mb 40] [--repeat 5]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.platform.embedded_store import EmbeddedStore

KEY = "lake/bench/crawl=BENCH/shard=0000/part-" + "a" * 20 + ".parquet"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=40, help="size of the part (random text, zstd)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = EmbeddedStore.throwaway(Path(tmp), "bench-lake-io")
        store.start()
        try:
            run(store, args.mb, args.repeat)
        finally:
            store.stop()


def run(store: EmbeddedStore, mb: int, repeat: int) -> None:
    config = StoreConfig(endpoint=store.endpoint, bucket=store.bucket, region="us-east-1",
                         credentials_file=str(store.credentials_file))
    lake = Lake(config)
    rows = mb * 1_000_000 // 2_000
    table = pa.table({"doc_id": [str(i) for i in range(rows)], "text": [secrets.token_hex(1_000) for _ in range(rows)]})
    with lake.part_writer(KEY, table.schema) as w:
        w.write(table)
    arrow = pafs.S3FileSystem(access_key=store.access_key, secret_key=store.secret_key, region=config.region,
                              endpoint_override=store.endpoint.split("://")[1], scheme="http")

    def lake_client() -> int:
        return sum(b.num_rows for b in lake.iter_batches(KEY, 1024))

    def pyarrow_s3() -> int:
        with arrow.open_input_file(f"{config.bucket}/{KEY}") as f:
            return sum(b.num_rows for b in pq.ParquetFile(f).iter_batches(batch_size=1024))

    timings: dict[str, list[tuple[float, float]]] = {"lake client (boto3 ranges, retried)": [],
                                                      "PyArrow S3FileSystem": []}
    for _ in range(repeat):
        for name, fn in zip(timings, (lake_client, pyarrow_s3), strict=True):
            wall, cpu = time.perf_counter(), time.process_time()
            assert fn() == rows
            timings[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"part: {w.bytes / 1e6:.1f} MB, {rows:,} rows; median of {repeat} interleaved reads")
    print("| reader | seconds | MB/s | CPU-s |\n|---|---:|---:|---:|")
    for name, runs in timings.items():
        wall = statistics.median(t for t, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"| {name} | {wall:.2f} | {w.bytes / 1e6 / wall:.0f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
