"""`make bench-trace`: finding one URL's documents in 1,000 parts, through the id indexes against a scan.

    .venv/bin/python -m benchmarks.trace [--crawls 10] [--parts-per-partition 25] [--docs-per-part 200]

An embedded SeaweedFS on free loopback ports (a temporary folder, always stopped) gets CRAWLS crawls × 4 shards of
committed `documents` partitions, PARTS parts each (1,000 by default), DOCS documents a part, each part with the id
index the documents unit writes beside it. Then, for a URL held by one part: `trace()` the first time (it builds
each partition's index from its parts' indexes and keeps it), `trace()` again (one read per partition of its index
and of the index of the records its units set aside, then the parts' indexes of the one partition that may hold
it, then that part), and a scan of the `url` column of every part (what finding it costs without an index). Wall seconds
and store requests, median of 3.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa

from benchmarks.report import n, table
from benchmarks.summary import Row, publish
from llm_assets.core import documents
from llm_assets.core.lake import Lake, StoreConfig, part_key
from llm_assets.core.partition import PartitionOutput, commit, data_version
from llm_assets.core.takedowns import write_id_index
from llm_assets.core.units import UnitResult, unit_id
from llm_assets.platform.embedded_store import EmbeddedStore
from llm_assets.settings import Settings

BEGIN, END = "<!-- trace:begin -->", "<!-- trace:end -->"
SHARDS = ("0000", "0001", "0002", "0003")


def build(lake: Lake, crawls: int, parts: int, docs: int) -> str:
    """The lake; -> a URL one part holds."""
    for c in range(crawls):
        crawl = f"BENCH-{c:02d}"
        for shard in SHARDS:
            units = []
            for p in range(parts):
                unit = unit_id("bench", crawl, shard, str(p))
                key = part_key("documents", crawl, shard, unit)
                rows = {"doc_id": [secrets.token_hex(16) for _ in range(docs)],
                        "url": [f"https://site{c}-{shard}-{p}-{i % 50}.example/{i}" for i in range(docs)],
                        "domain": [f"site{c}-{shard}-{p}-{i % 50}.example" for i in range(docs)],
                        "crawl": [crawl] * docs, "text": ["lorem ipsum " * 50] * docs}
                frame = pa.table({f.name: pa.array(rows.get(f.name, [None] * docs), f.type)
                                  for f in documents.SCHEMA})
                with lake.part_writer(key, documents.SCHEMA) as out:
                    out.write(frame)
                write_id_index(lake, key, pl.DataFrame({k: rows[k] for k in ("doc_id", "url", "domain")}))
                # what the unit set aside (pages with no text, not HTML, ...), indexed too: trace reads both indexes
                rejected_key = part_key("documents", crawl, shard, unit, zone="rejected")
                aside = {"doc_id": [secrets.token_hex(16) for _ in range(docs // 10)],
                         "url": [f"https://site{c}-{shard}-{p}.example/gone/{i}" for i in range(docs // 10)],
                         "reason": ["no_text"] * (docs // 10)}
                with lake.part_writer(rejected_key, documents.REJECTED_SCHEMA) as out:
                    out.write(pa.table({f.name: pa.array(aside.get(f.name, [None] * (docs // 10)), f.type)
                                        for f in documents.REJECTED_SCHEMA}))
                write_id_index(lake, rejected_key, pl.DataFrame(
                    {"doc_id": aside["doc_id"], "url": aside["url"], "domain": [None] * (docs // 10)},
                    schema=dict.fromkeys(("doc_id", "url", "domain"), pl.String)))
                units.append(UnitResult(unit=unit, source=f"raw/{crawl}/{p}", part=key, rejected_part=rejected_key,
                                        rows_in=docs + docs // 10, rows_out=docs))
            commit(lake, "documents", crawl, shard, PartitionOutput(units, "bench", data_version(units)))
    i = docs // 2
    return f"https://site{crawls // 2}-0002-{parts // 2}-{i % 50}.example/{i}"


class Counting:
    """The lake's store requests, counted."""

    def __init__(self, lake: Lake):
        self.n = 0
        lake.s3.meta.events.register("before-call.s3", self._count)

    def _count(self, **_):
        self.n += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--crawls", type=int, default=10)
    parser.add_argument("--parts-per-partition", type=int, default=25)
    parser.add_argument("--docs-per-part", type=int, default=200)
    parser.add_argument("--output", type=Path, default=Path(__file__).resolve().parents[1] / "BENCHMARKS.md")
    args = parser.parse_args()
    from llm_assets.tools import trace

    with tempfile.TemporaryDirectory() as tmp:
        store = EmbeddedStore.throwaway(Path(tmp), "bench-trace")
        store.start()
        try:
            lake = Lake(StoreConfig(endpoint=store.endpoint, bucket=store.bucket, region="us-east-1",
                                    credentials_file=str(store.credentials_file)))
            t0 = time.perf_counter()
            url = build(lake, args.crawls, args.parts_per_partition, args.docs_per_part)
            build_s = time.perf_counter() - t0
            crawls = [f"BENCH-{c:02d}" for c in range(args.crawls)]
            settings = Settings()
            counter = Counting(lake)
            rows = []

            def timed(name: str, fn, parts_read: int, passes: int = 3) -> None:
                seconds, requests = [], []
                for _ in range(passes):
                    counter.n = 0
                    t = time.perf_counter()
                    found = fn()
                    seconds.append(time.perf_counter() - t)
                    requests.append(counter.n)
                    assert found == 1, f"{name} found {found} documents"
                rows.append([name, f"{statistics.median(seconds):.2f}", n(statistics.median(requests)), n(parts_read)])

            timed("trace, first time (builds the partition indexes)",
                  lambda: sum(s.stage == "documents" for s in trace.trace(lake, settings, crawls, url).steps), 1, 1)
            timed("trace (partition indexes, then one partition's part indexes)",
                  lambda: sum(s.stage == "documents" for s in trace.trace(lake, settings, crawls, url).steps), 1)
            parts = [o.key for o in lake.list("lake/documents/") if o.key.endswith(".parquet")]
            timed("scan of every part's url column",
                  lambda: lake.scan(parts).filter(pl.col("url") == url).select("doc_id").collect().height, len(parts))
        finally:
            store.stop()
    total = args.crawls * len(SHARDS) * args.parts_per_partition
    body = "\n".join([
        "## Finding one URL (`make bench-trace`; not part of `make bench`)", "",
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `make bench-trace`: {n(total)} documents parts "
        f"({args.crawls} crawls × 4 shards × {args.parts_per_partition} parts, {n(args.docs_per_part)} documents "
        f"each, {n(total * args.docs_per_part)} documents) on an embedded SeaweedFS; written in {build_s:.0f} s. "
        "One URL held by one part; wall seconds (median of 3 passes; the first trace once), the requests the lake "
        "client made (manifests, indexes) and the Parquet parts read (through Polars).", "",
        table(["lookup", "seconds", "lake client requests", "Parquet parts read"], rows), "",
    ])
    print(body)
    first, again = rows[0][1], rows[1][1]
    publish(args.output, "trace", BEGIN, END, body, [Row(
        "trace:one-url", f"trace one URL in {n(total * args.docs_per_part)} documents ({n(total)} parts; wall s)",
        f"{again} s ({first} s the first time)", " ".join([".venv/bin/python -m benchmarks.trace", *sys.argv[1:]]),
        "trace.md")])


if __name__ == "__main__":
    main()
