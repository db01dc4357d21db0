"""The lake: one bucket whose prefixes are zones, and the only code that knows its key layout.

    raw/<crawl>/<file>                              drop zone, never modified
    lake/<asset>/crawl=<c>/shard=<s>/part-<u>.parquet   one part per work unit
    lake/<asset>/crawl=<c>/shard=<s>/_manifest.json     the commit: lists the partition's parts
    rejected/<stage>/crawl=<c>/shard=<s>/part-<u>.parquet  what a stage dropped, with the reason

A partition is committed by one PUT of its manifest. Parts are uploaded whole (a single PUT or a completed
multipart upload), so a run killed mid-write leaves at most an unreferenced part that no reader will open.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import boto3
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from botocore.config import Config
from botocore.exceptions import ClientError

CRAWL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
SHARD_RE = re.compile(r"^(?:[0-9]{4}|all)$")  # "all": a crawl-level asset
ASSET_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
UNIT_RE = re.compile(r"^[0-9a-f]{8,64}$")
# One path segment of a raw file name: printable, no separators or traversal.
RAW_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=@,-]{0,254}$")


class InvalidKey(ValueError):
    """A crawl, shard or file name that cannot be a lake key."""


def validate_crawl(crawl: str) -> str:
    if not CRAWL_RE.fullmatch(crawl or "") or ".." in crawl:
        raise InvalidKey(f"invalid crawl name {crawl!r}: use letters, digits, '.', '_' or '-' (max 128)")
    return crawl


def validate_shard(shard: str) -> str:
    if not SHARD_RE.fullmatch(shard or ""):
        raise InvalidKey(f"invalid shard {shard!r}: expected four digits such as '0003' (or 'all' for a crawl-level asset)")
    return shard


def parse_raw_key(key: str) -> tuple[str, str]:
    """`raw/<crawl>/<path>` -> (crawl, path). Sub-folders are allowed; every segment is validated."""
    parts = key.split("/")
    if len(parts) < 3 or parts[0] != "raw":
        raise InvalidKey(f"not a raw key: {key!r} (expected raw/<crawl>/<file>)")
    validate_crawl(parts[1])
    for segment in parts[2:]:
        if not RAW_NAME_RE.fullmatch(segment) or segment in (".", ".."):
            raise InvalidKey(f"invalid file name segment {segment!r} in {key!r}")
    return parts[1], "/".join(parts[2:])


def partition_prefix(zone: str, asset: str, crawl: str, shard: str) -> str:
    if not ASSET_RE.fullmatch(asset):
        raise InvalidKey(f"invalid asset name {asset!r}")
    return f"{zone}/{asset}/crawl={validate_crawl(crawl)}/shard={validate_shard(shard)}/"


def part_key(asset: str, crawl: str, shard: str, unit: str, zone: str = "lake") -> str:
    if not UNIT_RE.fullmatch(unit):
        raise InvalidKey(f"invalid unit id {unit!r}")
    return f"{partition_prefix(zone, asset, crawl, shard)}part-{unit}.parquet"


def manifest_key(asset: str, crawl: str, shard: str) -> str:
    return partition_prefix("lake", asset, crawl, shard) + "_manifest.json"


@dataclass(frozen=True)
class StoreConfig:
    """Where the lake lives. Picklable, so process-pool workers can open their own clients."""

    endpoint: str | None  # None: AWS S3
    bucket: str
    region: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)

    @property
    def secure(self) -> bool:
        return not (self.endpoint or "").startswith("http://")

    def boto_options(self) -> dict[str, str | None]:
        """boto3 client keyword arguments."""
        return {"endpoint_url": self.endpoint, "aws_access_key_id": self.access_key,
                "aws_secret_access_key": self.secret_key, "region_name": self.region}

    def storage_options(self) -> dict[str, str]:
        """Polars / object_store options for s3:// URLs."""
        opts = {
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "aws_region": self.region,
        }
        if self.endpoint:
            opts["aws_endpoint_url"] = self.endpoint
            opts["aws_allow_http"] = str(not self.secure).lower()
        return opts


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str


class Lake:
    """A thin client over one bucket: listing, whole-object writes, manifests and lazy Parquet reads."""

    def __init__(self, config: StoreConfig):
        self.config = config
        self.bucket = config.bucket

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])

    @cached_property
    def s3(self):
        return boto3.client(
            "s3",
            endpoint_url=self.config.endpoint,
            aws_access_key_id=self.config.access_key,
            aws_secret_access_key=self.config.secret_key,
            region_name=self.config.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"}),
        )

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    # listing and small objects

    def list(self, prefix: str, start_after: str = "") -> Iterator[ObjectInfo]:
        paginator = self.s3.get_paginator("list_objects_v2")
        kwargs = {"Bucket": self.bucket, "Prefix": prefix}
        if start_after:
            kwargs["StartAfter"] = start_after
        for page in paginator.paginate(**kwargs):
            for obj in page.get("Contents", []):
                yield ObjectInfo(obj["Key"], obj["Size"], obj["ETag"].strip('"'))

    def folders(self, prefix: str) -> list[str]:
        """The names of the folders directly under `prefix` (e.g. the crawls under raw/)."""
        paginator = self.s3.get_paginator("list_objects_v2")
        return sorted(p["Prefix"][len(prefix):].rstrip("/")
                      for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix, Delimiter="/")
                      for p in page.get("CommonPrefixes", []))

    def exists(self, key: str) -> bool:
        try:
            self.s3.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError as e:
            if e.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def get_bytes(self, key: str) -> bytes:
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def open(self, key: str):
        """A streaming, file-like body: memory stays bounded by what the caller reads."""
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]

    def put_bytes(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)

    def put_file(self, key: str, path: Path) -> None:
        # upload_file completes a multipart upload only once every part is in, and aborts it on error:
        # the object appears whole or not at all.
        self.s3.upload_file(str(path), self.bucket, key)

    def delete(self, keys: Iterable[str]) -> None:
        batch = [{"Key": k} for k in keys]
        for i in range(0, len(batch), 1000):
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": batch[i : i + 1000], "Quiet": True})

    def get_json(self, key: str) -> dict | None:
        try:
            return json.loads(self.get_bytes(key))
        except ClientError as e:
            if e.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def put_json(self, key: str, value: dict) -> None:
        self.put_bytes(key, json.dumps(value, indent=1, sort_keys=True).encode())

    # parquet parts

    def part_writer(self, key: str, schema: pa.Schema) -> PartWriter:
        return PartWriter(self, key, schema)

    def scan(self, keys: list[str], schema: pa.Schema | None = None) -> pl.LazyFrame:
        """A lazy frame over parts; nothing is read until it is collected or streamed."""
        if not keys:
            if schema is None:
                return pl.LazyFrame()
            return pl.from_arrow(schema.empty_table()).lazy()
        return pl.scan_parquet([self.url(k) for k in keys], storage_options=self.config.storage_options())

    def iter_batches(self, key: str, batch_rows: int = 1024, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Read one part batch by batch (row groups are fetched by range, not the whole object)."""
        with self.open_arrow(key) as f:
            yield from pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=columns)

    def open_arrow(self, key: str):
        return self.arrow_fs.open_input_file(f"{self.bucket}/{key}")

    @cached_property
    def arrow_fs(self):
        from pyarrow import fs as pafs

        endpoint = self.config.endpoint
        kwargs: dict[str, Any] = {}
        if endpoint:
            scheme, _, host = endpoint.partition("://")
            kwargs = {"endpoint_override": host, "scheme": scheme}
        return pafs.S3FileSystem(
            access_key=self.config.access_key,
            secret_key=self.config.secret_key,
            region=self.config.region,
            **kwargs,
        )


class PartWriter:
    """Writes one Parquet part: batches stream into a local file, uploaded whole when the block ends without
    an error. On an error nothing is uploaded, so no reader can ever see a partial part.

        with lake.part_writer(key, schema) as w:
            w.write(table)
    """

    def __init__(self, lake: Lake, key: str, schema: pa.Schema):
        self.lake, self.key, self.schema = lake, key, schema
        self.rows = 0
        self.bytes = 0

    def __enter__(self) -> PartWriter:
        self._tmp = tempfile.TemporaryDirectory(prefix="llm-assets-part-")
        self._path = Path(self._tmp.name) / "part.parquet"
        self._writer = pq.ParquetWriter(self._path, self.schema, compression="zstd")
        return self

    def write(self, data: pa.Table | pa.RecordBatch | pl.DataFrame) -> None:
        if isinstance(data, pl.DataFrame):
            data = data.to_arrow()
        if data.num_rows:
            self._writer.write(data.select(self.schema.names).cast(self.schema))
            self.rows += data.num_rows

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._writer.close()
            if exc_type is None:
                self.bytes = os.path.getsize(self._path)
                self.lake.put_file(self.key, self._path)
        finally:
            self._tmp.cleanup()
