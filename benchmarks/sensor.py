"""How long one raw_drop_sensor tick takes with many raw files (the daemon's default sensor timeout is 60 s).

    LLM_ASSETS_S3_ENDPOINT=http://127.0.0.1:8333 .venv/bin/python -m benchmarks.sensor [--files 10000]

Uploads N small files over 3 crawls into a fresh bucket of the store the environment names (the embedded one by
default), then times sensor ticks with the cursor carried over, as the daemon runs them: the first pass (every
partition new), a tick with nothing new, and a tick after 1% of the files changed. The bucket is deleted after.
"""

from __future__ import annotations

import argparse
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import dagster as dg

from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.dagster.raw_sensor import build_raw_drop_sensor
from llm_assets.platform import environment
from llm_assets.settings import load_settings
from resources import ObjectStore, S3Endpoint


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args()
    settings = load_settings()
    raw_drop_sensor = build_raw_drop_sensor(settings)
    base = environment.store_config(settings.store)
    cfg = StoreConfig(**{**base.__dict__, "bucket": f"bench-sensor-{secrets.token_hex(4)}"})
    lake = Lake(cfg)
    lake.s3.create_bucket(Bucket=cfg.bucket)
    store = ObjectStore(s3=S3Endpoint(endpoint_url=cfg.endpoint, region_name=cfg.region,
                                      aws_access_key_id=lake.credentials.access_key,
                                      aws_secret_access_key=lake.credentials.secret_key),
                        bucket=cfg.bucket)
    keys = [f"raw/CC-BENCH-{i % 3}/file-{i:06d}.jsonl" for i in range(args.files)]
    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda k: lake.put_bytes(k, b'{"text": "x"}\n'), keys))
        with dg.instance_for_test() as instance:
            cursor, rows = None, []

            def tick(label: str) -> None:
                nonlocal cursor
                start = time.perf_counter()
                with dg.build_sensor_context(instance=instance, cursor=cursor,
                                             resources={"store": store}) as context:
                    result = raw_drop_sensor(context)
                seconds = time.perf_counter() - start
                cursor = result.cursor
                for request in result.dynamic_partitions_requests:
                    instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
                rows.append(f"| {label} | {args.files:,} | {len(result.run_requests)} | {seconds:.2f} |")

            tick("first pass: every partition new")
            tick("nothing new")
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda k: lake.put_bytes(k, b'{"text": "changed"}\n'), keys[::100]))
            tick("1% of the files changed")
        print("| tick | raw files | run requests | seconds |\n|---|---:|---:|---:|\n" + "\n".join(rows))
    finally:
        for i in range(0, len(keys), 1000):
            lake.delete(keys[i:i + 1000])
        lake.s3.delete_bucket(Bucket=cfg.bucket)


if __name__ == "__main__":
    main()
