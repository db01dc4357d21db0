"""`llm-assets export`: a stage's documents (text and provenance) or token ids, out of the lake, for tools that do
not read it: JSON Lines (plain, or gzip / zstd by the file name's `.gz` / `.zst`) or Parquet, to a local file, to
an `s3://bucket/key`, or to standard output (`-`, JSON Lines).

It streams: the committed manifests are read once, then every part is read batch by batch and written out before the
next batch is read, so memory holds one batch (and, for Parquet, one row group), whatever the size of the export.
Reading the manifests once makes the export one snapshot: a partition recommitted meanwhile does not mix in, since
a commit leaves the parts it supersedes in place for the lake's retention. Nothing partial is ever visible where the
export goes: a local file is written under a hidden temporary name beside it and renamed when complete; an S3
object is a multipart upload completed after its last byte, and aborted on any error. No Dagster import.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal, cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from llm_assets.core.lake import RAW_NAME_FORBIDDEN_RE, Lake, validate_crawl, validate_shard
from llm_assets.core.partition import Manifest, MissingPartition, read_manifest
from llm_assets.stages import SPECS

# The crawl × shard stages holding documents (text and provenance, scores) or their token ids.
EXPORTABLE = tuple(s.name for s in SPECS if s.documents)  # the stages holding documents
Format = Literal["jsonl", "parquet"]
FORMATS: tuple[Format, ...] = ("jsonl", "parquet")
BATCH_ROWS = 1024
ROW_GROUP_ROWS = 65_536  # Parquet: batches are gathered into row groups of about this many rows ...
ROW_GROUP_BYTES = 64 << 20  # ... or this many bytes in memory, whichever comes first
S3_PART_BYTES = 16 << 20  # multipart upload part size (S3's minimum is 5 MiB, except for the last part)
# The lake's own zones: an export into one of them in the lake's bucket would be taken for lake data (raw/ is
# the drop zone the sensor ingests).
RESERVED_PREFIXES = ("raw/", "lake/", "rejected/", "index/", "models/", "releases/", "takedowns/", "evals/",
                     "labels/", "thresholds/", "robots/")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
KEY_MAX_BYTES = 1024


class ExportError(ValueError):
    """What was asked cannot be exported as it is: an unknown asset, a bad destination, nothing committed."""


@dataclass(frozen=True)
class Destination:
    """Where an export goes: a local path, an S3 object, or standard output."""

    path: Path | None = None
    bucket: str = ""
    key: str = ""
    stdout: bool = False

    @property
    def name(self) -> str:
        return "-" if self.stdout else f"s3://{self.bucket}/{self.key}" if self.bucket else str(self.path)

    @property
    def compression(self) -> str | None:
        suffix = (self.key or (self.path.name if self.path else "")).lower()
        return "gzip" if suffix.endswith(".gz") else "zstd" if suffix.endswith(".zst") else None


def parse_destination(out: str, lake_bucket: str | None = None) -> Destination:
    """A local path, `-`, or `s3://bucket/key`, validated: a key S3 accepts (1..1024 bytes of UTF-8, no empty, `.`
    or `..` segment, no control character, backslash, line separator or bidi control), not a folder, and not in one
    of the lake's zones when the bucket is the lake's."""
    if out == "-":
        return Destination(stdout=True)
    if not out.startswith("s3://"):
        if not out or out.endswith(("/", os.sep)) or Path(out).is_dir():
            raise ExportError(f"--out {out!r} is a folder: name the file to write")
        return Destination(path=Path(out))
    bucket, _, key = out.removeprefix("s3://").partition("/")
    if not BUCKET_RE.fullmatch(bucket) or ".." in bucket:
        raise ExportError(f"--out {out!r}: {bucket!r} is not a valid S3 bucket name")
    if not key or key.endswith("/"):
        raise ExportError(f"--out {out!r}: name the object to write (s3://bucket/path/file.jsonl), not a folder")
    if len(key.encode("utf-8")) > KEY_MAX_BYTES:
        raise ExportError(f"--out {out[:80]!r}…: the key is over S3's {KEY_MAX_BYTES} bytes")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise ExportError(f"--out {out!r}: empty, '.' or '..' segment in the key")
        if bad := RAW_NAME_FORBIDDEN_RE.search(segment):
            raise ExportError(f"--out {out!r}: U+{ord(bad.group()):04X} in the key; control characters, '\\', line "
                              "separators and bidi controls are not allowed")
    if bucket == lake_bucket and key.startswith(RESERVED_PREFIXES):
        raise ExportError(f"--out {out!r}: {key.split('/')[0]}/ is one of the lake's zones in its bucket "
                          f"({', '.join(RESERVED_PREFIXES)}); export under another prefix, e.g. exports/")
    return Destination(bucket=bucket, key=key)


def default_out(asset: str, crawl: str, shard: str | None, fmt: Format) -> str:
    return f"{asset}-{crawl}" + (f"-{shard}" if shard else "") + (".parquet" if fmt == "parquet" else ".jsonl")


def format_of(out: str | None, fmt: str | None) -> Format:
    """The format asked for, else the one the file name says (`.parquet`), else JSON Lines."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ExportError(f"unknown format {fmt!r}; one of: {', '.join(FORMATS)}")
        return cast(Format, fmt)
    return "parquet" if out and out.lower().endswith(".parquet") else "jsonl"


@dataclass
class ExportResult:
    asset: str
    crawl: str
    destination: str
    format: Format
    shards: list[str] = field(default_factory=list)  # the partitions exported
    missing_shards: list[str] = field(default_factory=list)  # asked for (every shard of the crawl), not committed
    parts: int = 0
    rows: int = 0
    bytes: int = 0
    seconds: float = 0.0
    data_versions: dict[str, str] = field(default_factory=dict)  # shard -> the data version exported

    def summary(self) -> str:
        shards = ("shard " if len(self.shards) == 1 else "shards ") + ", ".join(self.shards)
        return (f"exported {self.rows:,} rows of {self.asset} crawl={self.crawl} ({shards}; {self.parts} "
                f"part{'' if self.parts == 1 else 's'}) as {self.format} to {self.destination}: {self.bytes:,} bytes "
                f"in {self.seconds:.1f} s")


def committed_partitions(lake: Lake, asset: str, crawl: str, shards: list[str]) -> tuple[list[Manifest], list[str]]:
    """-> (the committed manifests of these shards, in shard order; the shards without one). Nothing committed at
    all is an error naming the asset and the partition(s)."""
    if asset not in EXPORTABLE:
        raise ExportError(f"cannot export {asset!r}: one of {', '.join(EXPORTABLE)}")
    validate_crawl(crawl)
    manifests, missing = [], []
    for shard in shards:
        m = read_manifest(lake, asset, crawl, validate_shard(shard))
        if m is None:
            missing.append(shard)
        else:
            manifests.append(m)
    if not manifests:
        which = f"shard={shards[0]}" if len(shards) == 1 else f"any of its {len(shards)} shards"
        raise MissingPartition(f"{asset} has no committed partition crawl={crawl} {which}: nothing to export "
                               f"(materialize it first; `llm-assets status` lists what is committed)")
    return manifests, missing


def export(lake: Lake, asset: str, crawl: str, shards: list[str], out: str | None = None, fmt: str | None = None,
           columns: list[str] | None = None, batch_rows: int = BATCH_ROWS, stdout: IO[bytes] | None = None
           ) -> ExportResult:
    """Export the committed partitions of `asset` in `crawl` for these shards (the missing ones are skipped and
    listed; none committed is an error) to `out` (default: `<asset>-<crawl>[-<shard>].<format>` here)."""
    start = time.perf_counter()
    format_ = format_of(out, fmt)
    manifests, missing = committed_partitions(lake, asset, crawl, shards)
    dest = parse_destination(out or default_out(asset, crawl, shards[0] if len(shards) == 1 else None, format_),
                             lake.bucket)
    if format_ == "parquet" and (dest.compression or dest.stdout):
        raise ExportError(f"--out {dest.name}: Parquet is compressed inside (zstd) and needs a file or an object; "
                          "name it .parquet")
    parts = [p for m in manifests for p in m.parts]
    result = ExportResult(asset, crawl, dest.name, format_, [m.shard for m in manifests], missing, len(parts),
                          data_versions={m.shard: m.data_version for m in manifests})
    schema = _schema(lake, parts, columns, asset) if parts or format_ == "parquet" else None
    expected = sum(m.rows for m in manifests)
    batches = (b for part in parts for b in lake.iter_batches(part, batch_rows, columns=columns))
    with _open(dest, lake, stdout) as sink:
        if format_ == "jsonl":
            result.rows = _write_jsonl(batches, sink, dest.compression)
        else:
            assert schema is not None
            result.rows = _write_parquet(batches, sink, schema)
        if result.rows != expected:  # raised inside the block: nothing is committed
            raise ExportError(f"{asset} crawl={crawl}: read {result.rows} rows where the manifests list {expected}")
        result.bytes = sink.tell()
    result.seconds = time.perf_counter() - start
    return result


def _schema(lake: Lake, parts: list[str], columns: list[str] | None, asset: str) -> pa.Schema:
    """The schema of the export: the first part's (every part of a stage has the stage's schema)."""
    if not parts:
        raise ExportError(f"{asset}: the committed partitions hold no rows, and an empty Parquet file needs a schema; "
                          "export as jsonl")
    with lake.open_arrow(parts[0]) as f:
        schema = pq.read_schema(f)
    if columns:
        if unknown := [c for c in columns if c not in schema.names]:
            raise ExportError(f"{asset} has no column {', '.join(map(repr, unknown))}; its columns: "
                              f"{', '.join(schema.names)}")
        schema = pa.schema([schema.field(c) for c in columns])
    return schema


def _write_jsonl(batches: Iterator[pa.RecordBatch], sink: IO[bytes], compression: str | None) -> int:
    rows = 0
    with _compressed(sink, compression) as f:
        for batch in batches:
            if batch.num_rows:
                # Polars writes JSON Lines in Rust: lists (token ids) as arrays, structs as objects, nulls as null.
                cast(pl.DataFrame, pl.from_arrow(batch)).write_ndjson(f)
                rows += batch.num_rows
    return rows


def _write_parquet(batches: Iterator[pa.RecordBatch], sink: IO[bytes], schema: pa.Schema) -> int:
    rows = 0
    writer = pq.ParquetWriter(sink, schema, compression="zstd")
    group: list[pa.RecordBatch] = []
    group_rows = group_bytes = 0
    try:
        for batch in batches:
            batch = batch.select(schema.names).cast(schema) if batch.schema != schema else batch
            group.append(batch)
            group_rows, group_bytes = group_rows + batch.num_rows, group_bytes + batch.nbytes
            if group_rows >= ROW_GROUP_ROWS or group_bytes >= ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_batches(group, schema))
                rows += group_rows
                group, group_rows, group_bytes = [], 0, 0
        if group or not rows:
            writer.write_table(pa.Table.from_batches(group, schema))
            rows += group_rows
    finally:
        writer.close()
    return rows


@contextmanager
def _compressed(sink: IO[bytes], compression: str | None) -> Iterator[IO[bytes]]:
    if compression is None:
        yield sink
    elif compression == "gzip":
        with gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0) as f:
            yield cast(IO[bytes], f)
    else:
        z = zstandard.ZstdCompressor(level=3).stream_writer(sink, closefd=False)
        try:
            yield cast(IO[bytes], z)
        finally:
            z.close()  # ends the frame; the sink stays open


@contextmanager
def _open(dest: Destination, lake: Lake, stdout: IO[bytes] | None = None) -> Iterator[Any]:
    """A writable, counting sink for `dest`, committed (renamed, upload completed) only when the block ends without
    an error, discarded otherwise."""
    if dest.stdout:
        yield _Counting(stdout or sys.stdout.buffer)
    elif dest.bucket:
        target = lake if dest.bucket == lake.bucket else Lake(replace(lake.config, bucket=dest.bucket))
        upload = _MultipartUpload(target, dest.key)
        try:
            yield upload
        except BaseException:
            upload.abort()
            raise
        upload.complete()
    else:
        assert dest.path is not None
        dest.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.path.with_name(f".{dest.path.name}.{secrets.token_hex(4)}.tmp")
        try:
            with open(tmp, "wb") as f:
                sink = _Counting(f)
                yield sink
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest.path)
        finally:
            tmp.unlink(missing_ok=True)


class _Counting(io.RawIOBase):
    """Passes writes through and counts the bytes (`tell`)."""

    def __init__(self, f: IO[bytes]):
        self.f, self.n = f, 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.f.write(b)
        n = len(memoryview(b))
        self.n += n
        return n

    def tell(self) -> int:
        return self.n

    def flush(self) -> None:
        self.f.flush()


class _MultipartUpload(io.RawIOBase):
    """An S3 object written as a multipart upload, S3_PART_BYTES a part: memory holds one part. The object appears
    only at `complete()`; `abort()` discards the parts uploaded. An export smaller than one part is one PUT."""

    def __init__(self, lake: Lake, key: str):
        self.lake, self.key = lake, key
        self.buffer = bytearray()
        self.n = 0
        self.upload_id: str | None = None
        self.parts: list[dict] = []

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = memoryview(b).cast("B")
        self.buffer += data
        self.n += len(data)
        while len(self.buffer) >= S3_PART_BYTES:
            self._upload_part(bytes(self.buffer[:S3_PART_BYTES]))
            del self.buffer[:S3_PART_BYTES]
        return len(data)

    def tell(self) -> int:
        return self.n

    def _upload_part(self, body: bytes) -> None:
        lake = self.lake
        if self.upload_id is None:
            self.upload_id = lake._call(f"starting the upload of {self.key}", lambda: lake.s3.create_multipart_upload(
                Bucket=lake.bucket, Key=self.key)["UploadId"])
        number = len(self.parts) + 1
        etag = lake._call(f"uploading part {number} of {self.key}", lambda: lake.s3.upload_part(
            Bucket=lake.bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=body)["ETag"])
        self.parts.append({"PartNumber": number, "ETag": etag})

    def complete(self) -> None:
        lake = self.lake
        if self.upload_id is None:  # smaller than a part: one PUT, whole or nothing
            lake.put_bytes(self.key, bytes(self.buffer))
            return
        if self.buffer:
            self._upload_part(bytes(self.buffer))
            self.buffer.clear()
        lake._call(f"completing the upload of {self.key}", lambda: lake.s3.complete_multipart_upload(
            Bucket=lake.bucket, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": self.parts}))

    def abort(self) -> None:
        if self.upload_id is not None:
            lake = self.lake
            try:
                lake.s3.abort_multipart_upload(Bucket=lake.bucket, Key=self.key, UploadId=self.upload_id)
            except Exception:  # noqa: BLE001 - the export failed already; an upload left over expires by lifecycle
                pass
