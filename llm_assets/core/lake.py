"""The lake: one bucket whose prefixes are zones, and the only code that knows its key layout.

    raw/<crawl>/<file>                              drop zone, never modified
    lake/<asset>/crawl=<c>/shard=<s>/part-<u>.parquet   one part per work unit
    lake/<asset>/crawl=<c>/shard=<s>/_manifest.json     the commit: lists the partition's parts
    rejected/<stage>/crawl=<c>/shard=<s>/part-<u>.parquet  what a stage dropped, with the reason
    index/<asset>/crawl=<c>/shard=<s>/part-<u>.ids.npz   a part's URL, domain and doc-id hashes (takedowns)
    takedowns/<file>.jsonl, evals/<file>.jsonl      takedown requests and evaluation sets, dropped by people

A partition is committed by one PUT of its manifest. Parts are uploaded whole (a single PUT or a completed
multipart upload), so a run killed mid-write leaves at most an unreferenced part that no reader will open.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import json
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

import polars as pl
import pyarrow as pa
from botocore.exceptions import ClientError
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.errors import (
    InfrastructureError,
    LocalDiskFull,
    SourceChanged,
    StoreAuthFailed,
    StoreFull,
    StoreUnavailable,
    auth_failure,
    is_store_full,
    is_transient,
)

# The lake's keys are `keys`'s; re-exported for the many callers that build them beside a `Lake`.
from llm_assets.core.keys import (  # noqa: F401
    ASSET_RE,
    CRAWL_RE,
    RAW_KEY_MAX_BYTES,
    RAW_NAME_FORBIDDEN_RE,
    SCRATCH_ID_RE,
    SCRATCH_PART_RE,
    SCRATCH_PREFIX,
    SHARD_RE,
    UNIT_RE,
    InvalidKey,
    contamination_key,
    id_index_key,
    manifest_key,
    parse_raw_key,
    part_key,
    partition_index_key,
    partition_prefix,
    scratch_prefix,
    tombstone_key,
    validate_crawl,
    validate_shard,
)
from llm_assets.core.units import count_request


class StoreSettings(Section):
    """How the lake treats its object store. Not part of any code version: it changes how long a run waits for
    a failing store, never what a partition holds."""

    retry_budget_s: float = Field(default=300.0, gt=0, description=(
        "Seconds a run keeps retrying a failing store (unreachable, throttled, 5xx), one clock for all its calls and "
        "units, before it fails."))
    retry_base_s: float = Field(default=0.5, gt=0, description=(
        "Seconds of the first backoff; it doubles up to `retry_max_s`, with full jitter."))
    retry_max_s: float = Field(default=20.0, gt=0, description="Seconds of the longest backoff.")
    retention_hours: float = Field(default=24.0, ge=0, description=(
        "Hours superseded parts (and a killed run's parts) outlive their last manifest before the vacuum deletes "
        "them."))

    def retry(self) -> RetryPolicy:
        return RetryPolicy(budget_s=self.retry_budget_s, base_s=self.retry_base_s, max_s=self.retry_max_s)


LOGGER = logging.getLogger(__name__)
T = TypeVar("T")
LOW_DISK_BYTES = 64 << 20  # a local store's disk with less free space than this cannot take another part

@dataclass(frozen=True)
class RetryPolicy:
    """How long the lake client keeps retrying a store that fails transiently (unreachable, throttled, 5xx):
    exponential backoff with full jitter, from `base_s` up to `max_s` between attempts, until the store has been
    failing for `budget_s` on the outage clock (see `OutageClock`)."""

    budget_s: float = 300.0
    base_s: float = 0.5
    max_s: float = 20.0
    # An outage nobody has seen for this long is over (its calls succeeded, or none was made): a new failure starts a
    # new one. Well above the longest gap between two failures of one outage (max_s + a timed-out read).
    quiet_s: float = 120.0

    def delays(self) -> Iterator[float]:
        attempt = 0
        while True:
            yield random.uniform(0, min(self.max_s, self.base_s * 2**attempt))
            attempt += 1


class OutageClock:
    """When the store started failing, shared by every call that names the same clock: the retry budget bounds a
    run, not each call. Measured with a budget per call: a run of many units against a store that had moved failed
    only after (units / workers) x budget (19 min 40 s), each unit waiting out its own 300 s.

    With a `path` (a file the run's processes share: the run's process, its pool workers, cluster workers on this
    machine), the outage's start is recorded there once; without one, or where the file cannot be written (a worker on
    another machine), this process keeps it. Any call that succeeds ends the outage."""

    _local: ClassVar[dict[str, tuple[float, float]]] = {}  # this process's outages: key -> (start, last failure)
    _unwritable: ClassVar[set[str]] = set()  # clock files this process cannot write

    def __init__(self, key: str, path: str | None, quiet_s: float):
        self.key, self.path, self.quiet_s = key, path, quiet_s

    def failing_for(self) -> float:
        """Record a failure now; how long the store has been failing (0 for the first failure of an outage)."""
        now = time.time()
        start, last = self._read() or (now, now)
        if now - last > self.quiet_s:  # the previous outage ended unseen
            start = now
        self._write(start, now)
        return now - start

    def elapsed(self) -> float:
        """How long the current outage has lasted, without recording a failure (0 when none is going on)."""
        start, last = self._read() or (0.0, 0.0)
        now = time.time()
        return 0.0 if now - last > self.quiet_s else now - start

    def recovered(self) -> None:
        """The store answered: the outage is over. Cheap enough for every call (a dict lookup, one unlink)."""
        self._local.pop(self.key, None)
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def _shared(self) -> bool:
        return bool(self.path) and self.path not in self._unwritable

    def _read(self) -> tuple[float, float] | None:
        if self._shared():
            try:
                start, last = (float(v) for v in Path(cast(str, self.path)).read_text().split())
                return start, last
            except FileNotFoundError:  # no outage, or another process saw the store answer again
                return None
            except (OSError, ValueError):
                pass
        return self._local.get(self.key)

    def _write(self, start: float, last: float) -> None:
        self._local[self.key] = (start, last)
        if self._shared():
            path = cast(str, self.path)
            try:
                Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                tmp = f"{path}.{os.getpid()}.tmp"
                Path(tmp).write_text(f"{start} {last}")
                os.replace(tmp, path)
            except OSError:  # a worker on another machine: this process's clock bounds its own calls
                self._unwritable.add(path)


def read_env_file(path: Path) -> dict[str, str]:
    """`NAME=value` lines (comments and blank lines aside), as the store's credentials and the deployment's database
    connection are written. A missing file raises OSError."""
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@dataclass(frozen=True)
class Credentials:
    """An S3 key pair. It never leaves the process that read it: pickling raises, so no work unit, task argument,
    engine log or event log can hold it. Every process (a pool worker, a cluster worker) reads its own."""

    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)

    def __reduce__(self):
        raise TypeError("S3 credentials do not travel between processes: each worker reads its own "
                        "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the store's credentials file)")

    @classmethod
    def from_env(cls) -> Credentials | None:
        key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
        return cls(key, secret) if key and secret else None

    @classmethod
    def from_file(cls, path: str | Path) -> Credentials:
        """`AWS_ACCESS_KEY_ID=...` and `AWS_SECRET_ACCESS_KEY=...` lines, as the embedded store writes them."""
        try:
            values = read_env_file(Path(path))
            return cls(values["AWS_ACCESS_KEY_ID"], values["AWS_SECRET_ACCESS_KEY"])
        except (OSError, KeyError) as e:
            raise InfrastructureError(f"cannot read S3 credentials from {path}: {type(e).__name__}: {e}") from e


@dataclass(frozen=True)
class StoreConfig:
    """Where the lake lives, and where each process finds its credentials: never the credentials themselves, so a
    StoreConfig travels inside work units to pool and cluster workers, which open their own clients."""

    endpoint: str | None  # None: AWS S3
    bucket: str
    region: str
    # A file of the embedded store's credentials, read by each process that opens the lake. Without it: the
    # environment's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, else boto3's default chain (profiles, IAM roles).
    credentials_file: str | None = None
    retry: RetryPolicy = RetryPolicy()
    # The embedded store's record of its ports (`{"s3.port": 8333, ...}`). Read again whenever a call fails to
    # connect or is refused: a store restarted on another port (a foreign server took its old one) is found again by
    # every process, instead of being retried at the old address for good.
    ports_file: str | None = None
    # The file of the run's outage clock (see `OutageClock`); None: this process's own.
    outage_clock: str | None = None
    retention_s: float = 86_400.0  # superseded and orphaned parts outlive their last use by this long
    # The store's data folder when it runs on this machine (the embedded store). Some servers (SeaweedFS) answer a
    # write to a full disk with a bare 500 "internal error": with the folder known, that is reported as full.
    local_data_dir: str | None = None

    @property
    def secure(self) -> bool:
        return not (self.endpoint or "").startswith("http://")

    @property
    def where(self) -> str:
        """The store, for error messages: endpoint and bucket, never credentials."""
        return f"{self.endpoint or 'AWS S3'} (bucket {self.bucket})"

    @property
    def credentials_source(self) -> str:
        """Where this process's credentials come from, for error messages: a file, a variable's name, never a value."""
        if self.credentials_file:
            return f"read from {self.credentials_file}"
        if Credentials.from_env():
            return "from the environment's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        return "from boto3's default credential chain"

    def recorded_endpoint(self) -> str | None:
        """The S3 endpoint the ports file names now (same host, the recorded port), or None without one."""
        if not self.ports_file or not self.endpoint:
            return None
        try:
            port = int(json.loads(Path(self.ports_file).read_text())["s3.port"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return f"{self.endpoint.rsplit(':', 1)[0]}:{port}"

    def credentials(self) -> Credentials | None:
        """This process's credentials for the store; None leaves them to boto3's default chain."""
        if self.credentials_file:
            return Credentials.from_file(self.credentials_file)
        return Credentials.from_env()

    def boto_options(self, credentials: Credentials | None = None) -> dict[str, str | None]:
        """boto3 client keyword arguments."""
        creds = credentials or self.credentials()
        opts = {"endpoint_url": self.endpoint, "region_name": self.region}
        if creds:
            opts |= {"aws_access_key_id": creds.access_key, "aws_secret_access_key": creds.secret_key}
        return opts

    def storage_options(self, credentials: Credentials | None = None,
                        budget_s: float | None = None) -> dict[str, str | int]:
        """Polars / object_store options for s3:// URLs, retrying for `budget_s` (default: the whole budget)."""
        creds = credentials or self.credentials()
        opts: dict[str, str | int] = {
            "aws_region": self.region,
            "max_retries": 1_000_000,  # bounded by the time budget, not a count
            "retry_timeout_ms": int((self.retry.budget_s if budget_s is None else budget_s) * 1000),
            "retry_init_backoff_ms": int(self.retry.base_s * 1000),
            "retry_max_backoff_ms": int(self.retry.max_s * 1000),
        }
        if creds:
            opts |= {"aws_access_key_id": creds.access_key, "aws_secret_access_key": creds.secret_key}
        if self.endpoint:
            opts["aws_endpoint_url"] = self.endpoint
            opts["aws_allow_http"] = str(not self.secure).lower()
        return opts


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    modified: float = 0.0  # seconds since the epoch


class CommitConflict(Exception):
    """A conditional write lost: the object changed since it was read."""


def _is_missing(e: ClientError) -> bool:
    return e.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound")


def _is_server_error(e: BaseException | None) -> bool:
    """A 5xx answer, also wrapped (boto3's transfer manager raises S3UploadFailedError from the ClientError)."""
    while e is not None:
        if isinstance(e, ClientError):
            return (e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0) >= 500
        if type(e).__name__ == "S3UploadFailedError" and "(InternalError)" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def _is_precondition_failed(e: ClientError) -> bool:
    return e.response["Error"]["Code"] in ("PreconditionFailed", "412", "ConditionalRequestConflict")


def warm_client(service: str) -> None:
    """Load botocore's model of `service` into boto3's default session, which every `Lake.s3` client is made from:
    the process pool's fork server does, so that a worker's first client costs ~0.07 CPU-s instead of ~0.3 with the
    import. The client made here is unsigned, points nowhere and is never used."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    boto3.client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                 config=Config(signature_version=UNSIGNED))


class Lake:
    """A thin client over one bucket: listing, whole-object writes, manifests and lazy Parquet reads.

    Every call to the store goes through `_call`, which retries transient failures within the retry budget and
    turns what persists into `StoreUnavailable` (or `StoreFull`) naming the store: an outage is never mistaken
    for bad input, and never ends in a short partition."""

    def __init__(self, config: StoreConfig, credentials: Credentials | None = None,
                 credentials_source: str = "given to the lake client"):
        self.config = replace(config, endpoint=config.recorded_endpoint() or config.endpoint)
        self.bucket = config.bucket
        # where `credentials` came from, for errors (never the credentials themselves)
        self.credentials_source = credentials_source if credentials else config.credentials_source
        self.credentials = credentials or config.credentials()
        self.outage = OutageClock(self.config.where, config.outage_clock, config.retry.quiet_s)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}  # the receiving process reads its own credentials

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["config"])

    @cached_property
    def s3(self):
        # boto3 and pyarrow.parquet are imported where used: building the code location (every run worker) imports
        # this module without paying for them.
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            **self.config.boto_options(self.credentials),
            # One attempt per call: `_call` owns retries, with a time budget instead of a count.
            config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1},
                          connect_timeout=5, read_timeout=60),
        )
        # Every HTTP request this client sends counts toward the running unit's `requests` (the cost ledger).
        client.meta.events.register("before-send.s3", count_request)
        return client

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        delays, since = self.config.retry.delays(), time.monotonic()
        while True:
            try:
                result = fn()
            except Exception as e:  # noqa: BLE001 - classified below; anything else is raised as it is
                self._wait_or_raise(what, e, delays, since)
                continue
            self.outage.recovered()  # any call that succeeds ends the outage, whichever client saw it
            return result

    def _wait_or_raise(self, what: str, e: Exception, delays: Iterator[float], since: float) -> None:
        """Return once the failed call may be tried again (the store moved, or a backoff was waited out), or raise
        what the failure means: refused credentials and a full store at once, an outage once the budget is spent:
        the run's (the outage clock), or this call's own since `since` (monotonic) when other calls succeed
        meanwhile and keep resetting the run's."""
        if is_store_full(e):
            raise StoreFull(f"object store full: {self.config.where} refused {what}: {e}") from e
        if (free := self._local_free_bytes(e)) is not None:
            raise StoreFull(f"object store full: {self.config.where} failed {what} with its data folder "
                            f"{self.config.local_data_dir} down to {free / 2**20:.1f} MiB free: {e}") from e
        code = auth_failure(e)
        if (code or is_transient(e)) and self._follow_moved_store():
            return
        if code:
            raise StoreAuthFailed(f"object store {self.config.where} refused the credentials "
                                  f"({self.credentials_source}) while {what}: {code}; not retried") from e
        if not is_transient(e):
            raise e
        failing_for, delay = max(self.outage.failing_for(), time.monotonic() - since), next(delays)
        if failing_for + delay > self.config.retry.budget_s:
            raise StoreUnavailable(
                f"object store {self.config.where} failing for {failing_for:.0f} s in this run, past its retry budget "
                f"of {self.config.retry.budget_s:.0f} s (settings: store.retry_budget_s), while {what}: "
                f"{type(e).__name__}: {e}") from e
        LOGGER.warning("object store %s: %s failed (%s), retrying in %.1f s", self.config.where, what,
                       type(e).__name__, delay)
        time.sleep(delay)

    def _follow_moved_store(self) -> bool:
        """Switch to the endpoint the store's ports file records when it is not the one in use: True if it moved."""
        moved = self.config.recorded_endpoint()
        if not moved or moved == self.config.endpoint:
            return False
        LOGGER.warning("object store moved: %s -> %s (recorded in %s); following it", self.config.endpoint, moved,
                       self.config.ports_file)
        self.config = replace(self.config, endpoint=moved)
        self.__dict__.pop("s3", None)  # the cached client still points at the old port
        return True

    def _local_free_bytes(self, e: Exception) -> int | None:
        """The free bytes of the local store's disk when a server error coincides with that disk being full."""
        if not self.config.local_data_dir or not _is_server_error(e):
            return None
        try:
            free = shutil.disk_usage(self.config.local_data_dir).free
        except OSError:
            return None
        return free if free < LOW_DISK_BYTES else None

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    # listing and small objects

    def list(self, prefix: str, start_after: str = "") -> Iterator[ObjectInfo]:
        token = None
        while True:
            kwargs = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            elif start_after:
                kwargs["StartAfter"] = start_after
            page = self._call(f"listing {prefix}", partial(self.s3.list_objects_v2, **kwargs))
            for obj in page.get("Contents", []):
                yield ObjectInfo(obj["Key"], obj["Size"], obj["ETag"].strip('"'), obj["LastModified"].timestamp())
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    # builtins.list: inside this class, `list` is the method above
    def folders(self, prefix: str) -> builtins.list[str]:
        """The names of the folders directly under `prefix` (e.g. the crawls under raw/)."""
        names, token = [], None
        while True:
            kwargs = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": "/"}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(f"listing {prefix}", partial(self.s3.list_objects_v2, **kwargs))
            names += [p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", [])]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return sorted(names)

    def keys(self, prefix: str) -> set[str]:
        return {o.key for o in self.list(prefix)}

    def exists(self, key: str) -> bool:
        def head() -> bool:
            try:
                self.s3.head_object(Bucket=self.bucket, Key=key)
                return True
            except ClientError as e:
                if _is_missing(e):
                    return False
                raise

        return self._call(f"checking {key}", head)

    def get_bytes(self, key: str) -> bytes:
        return self._call(f"reading {key}", lambda: self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def get_bytes_if_exists(self, key: str) -> bytes | None:
        """The object, or None when absent: one request where `exists` then `get_bytes` make two."""
        def get() -> bytes | None:
            try:
                return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            except ClientError as e:
                if _is_missing(e):
                    return None
                raise

        return self._call(f"reading {key}", get)

    def open(self, key: str, start: int = 0) -> ObjectStream:
        """A streaming, file-like body from byte `start`: memory stays bounded by what the caller reads, and a
        connection lost mid-read resumes where it stopped (the same object version, or `SourceChanged`)."""
        return ObjectStream(self, key, start)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._call(f"writing {key}", lambda: self.s3.put_object(Bucket=self.bucket, Key=key, Body=data))

    def put_file(self, key: str, path: Path) -> None:
        # upload_file completes a multipart upload only once every part is in, and aborts it on error:
        # the object appears whole or not at all.
        self._call(f"uploading {key}", lambda: self.s3.upload_file(str(path), self.bucket, key))

    def delete(self, keys: Iterable[str]) -> None:
        batch = [{"Key": k} for k in keys]
        for i in range(0, len(batch), 1000):
            chunk = batch[i : i + 1000]
            self._call(f"deleting {len(chunk)} objects", partial(
                self.s3.delete_objects, Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True}))

    def get_json(self, key: str) -> dict | None:
        return self.get_json_versioned(key)[0]

    def get_json_versioned(self, key: str) -> tuple[dict | None, str | None]:
        """The object and its ETag (for a conditional write), or (None, None) when absent."""
        def get() -> tuple[dict | None, str | None]:
            try:
                obj = self.s3.get_object(Bucket=self.bucket, Key=key)
            except ClientError as e:
                if _is_missing(e):
                    return None, None
                raise
            return json.loads(obj["Body"].read()), obj["ETag"]

        return self._call(f"reading {key}", get)

    def put_json(self, key: str, value: dict, if_match: str | None = None, if_absent: bool = False) -> None:
        """Write a JSON object. With `if_match` (an ETag) or `if_absent`, the write happens only if the object is
        still that version (or still absent); otherwise `CommitConflict`."""
        body = json.dumps(value, indent=1, sort_keys=True).encode()
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": body}
        if if_match:
            kwargs["IfMatch"] = if_match
        elif if_absent:
            kwargs["IfNoneMatch"] = "*"

        def put() -> None:
            try:
                self.s3.put_object(**kwargs)
            except ClientError as e:
                if _is_precondition_failed(e):
                    raise CommitConflict(f"{key} changed since it was read") from e
                raise

        self._call(f"writing {key}", put)

    # parquet parts

    def part_writer(self, key: str, schema: pa.Schema) -> PartWriter:
        return PartWriter(self, key, schema)

    def storage_options(self) -> dict[str, str | int]:
        """Polars options for this lake's s3:// URLs, with this process's credentials and what is left of the run's
        retry budget when the store is failing now."""
        left = self.config.retry.budget_s - self.outage.elapsed()
        return self.config.storage_options(self.credentials, budget_s=max(left, self.config.retry.base_s))

    def scan(self, keys: builtins.list[str], schema: pa.Schema | None = None) -> pl.LazyFrame:
        """A lazy frame over parts; nothing is read until it is collected or streamed."""
        if not keys:
            if schema is None:
                return pl.LazyFrame()
            return cast(pl.DataFrame, pl.from_arrow(schema.empty_table())).lazy()
        return pl.scan_parquet([self.url(k) for k in keys], storage_options=self.storage_options())

    def iter_batches(self, key: str, batch_rows: int = 1024, columns: builtins.list[str] | None = None,
                     fetched: ReadCount | None = None) -> Iterator[pa.RecordBatch]:
        """Read one part batch by batch (row groups are fetched by range, not the whole object); the bytes fetched
        are added to `fetched` (a unit's bytes_in)."""
        import pyarrow.parquet as pq

        with self.open_arrow(key) as f:
            try:
                yield from pq.ParquetFile(f).iter_batches(batch_size=batch_rows, columns=columns)
            finally:
                if fetched is not None:
                    fetched.bytes += cast(RangeFile, f.raw).fetched

    def open_arrow(self, key: str, buffer_size: int = 0) -> io.BufferedReader:
        """A seekable file over an object, read by ranges through the same retries as every other call (Parquet
        reads its footer, then only the column chunks it needs). A read shorter than `buffer_size` fetches that
        much (default RANGE_READ): less where only a few row groups are wanted."""
        return io.BufferedReader(RangeFile(self, key), buffer_size=buffer_size or RANGE_READ)


RANGE_READ = 4 << 20


class ObjectStream(io.RawIOBase):
    """An object's bytes from `start` on, streamed. When the connection fails mid-read, the rest is requested
    again from the current position, pinned to the ETag first seen, within the lake's retry budget."""

    def __init__(self, lake: Lake, key: str, start: int = 0):
        self.lake, self.key, self.pos = lake, key, start
        self.etag: str | None = None
        self.body = None
        self._open()

    def _open(self) -> None:
        def get() -> dict[str, Any] | None:
            kwargs: dict[str, Any] = {"Bucket": self.lake.bucket, "Key": self.key}
            if self.pos:
                kwargs["Range"] = f"bytes={self.pos}-"
            if self.etag:
                kwargs["IfMatch"] = self.etag
            try:
                return self.lake.s3.get_object(**kwargs)
            except ClientError as e:
                if _is_precondition_failed(e):
                    raise SourceChanged(f"{self.key} was replaced while it was being read") from e
                if e.response["Error"]["Code"] == "InvalidRange":  # resuming exactly at the end
                    return None
                raise

        obj = self.lake._call(f"reading {self.key}", get)
        self.body = obj["Body"] if obj is not None else None
        if obj is not None:
            self.etag = self.etag or obj["ETag"]

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            return b"".join(iter(lambda: self.read(RANGE_READ), b""))
        delays, since = self.lake.config.retry.delays(), time.monotonic()
        while self.body is not None:
            try:
                data = self.body.read(n)
                self.pos += len(data)
                return data
            except Exception as e:  # noqa: BLE001 - a broken connection resumes; anything else is raised
                self.lake._wait_or_raise(f"reading {self.key} at byte {self.pos}", e, delays, since)
                self._open()
        return b""

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if self.body is not None:
            self.body.close()
        super().close()


@dataclass
class ReadCount:
    """Bytes fetched from the store by a unit's reads: its `bytes_in`."""

    bytes: int = 0


class RangeFile(io.RawIOBase):
    """A seekable, read-only view of one object version: every read is a ranged GET pinned to its ETag."""

    def __init__(self, lake: Lake, key: str):
        self.lake, self.key, self.pos = lake, key, 0
        self.fetched = 0  # bytes read from the store
        head = lake._call(f"checking {key}", lambda: lake.s3.head_object(Bucket=lake.bucket, Key=key))
        self.size, self.etag = head["ContentLength"], head["ETag"]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, b) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0

        def get() -> bytes:
            try:
                obj = self.lake.s3.get_object(Bucket=self.lake.bucket, Key=self.key, IfMatch=self.etag,
                                              Range=f"bytes={self.pos}-{self.pos + n - 1}")
            except ClientError as e:
                if _is_precondition_failed(e):
                    raise SourceChanged(f"{self.key} was replaced while it was being read") from e
                raise
            return obj["Body"].read()

        data = self.lake._call(f"reading {self.key}", get)
        b[: len(data)] = data
        self.pos += len(data)
        self.fetched += len(data)
        return len(data)


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
        import pyarrow.parquet as pq

        self._tmp = tempfile.TemporaryDirectory(prefix="llm-assets-part-")
        self._path = Path(self._tmp.name) / "part.parquet"
        # Dictionaries pay off on repeated strings (languages, source keys), never on hashes, signatures or
        # token ids, whose all-distinct values made pyarrow build a useless dictionary per row group.
        text = [f.name for f in self.schema if _repeats(f.type)]
        self._writer = pq.ParquetWriter(self._path, self.schema, compression="zstd", use_dictionary=text)
        return self

    def write(self, data: pa.Table | pa.RecordBatch | pl.DataFrame) -> None:
        if isinstance(data, pl.DataFrame):
            data = data.to_arrow()
        if data.num_rows:
            with _local_disk(self._path):
                if data.schema != self.schema:  # a cast loads pyarrow.compute: 0.35 CPU-s in a fresh worker
                    data = data.select(self.schema.names).cast(self.schema)
                self._writer.write(data)
            self.rows += data.num_rows

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            with _local_disk(self._path):
                self._writer.close()
            if exc_type is None:
                self.bytes = os.path.getsize(self._path)
                self.lake.put_file(self.key, self._path)
        finally:
            self._tmp.cleanup()


def _repeats(t: pa.DataType) -> bool:
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_dictionary(t))


@contextmanager
def _local_disk(path: Path) -> Iterator[None]:
    """A full temporary disk is the machine's fault, not the input's: say so, and where."""
    try:
        yield
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(e):
            raise LocalDiskFull(f"no space left on the local temporary disk ({path.parent}): {e}") from e
        raise
