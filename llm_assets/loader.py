"""Stream a release's packed training sequences to a training job: local folder or S3, any rank and worker.

A release is a folder (a local path, or `s3://bucket/prefix` in an S3-compatible store) holding `data.bin` +
`data.idx`, a Megatron indexed dataset (llm_assets.core.indexed) of sequences that all have one length, the
context, and were globally shuffled when written; or, for a large release, the shards its manifest lists
(`shards`: `data-0000k-of-0000N`), each an indexed dataset holding a consecutive range of that order, read one
after the other as one dataset; and `manifest.json`, written last: the loader refuses a release without it, and
checks the data files against the sizes it lists (`files`), if any. Sequences are read in file (and shard) order.

Who reads what (N sequences, global order 0..N-1):

- rank r of world_size reads the global indices i >= start with i % world_size == r, in increasing order;
- inside a rank, worker w of num_workers takes runs of `batch_size` consecutive sequences of the rank's stream
  round-robin (run k to worker k % num_workers; single sequences at batch_size=1), counted from `start`. A torch
  DataLoader takes one batch from each worker in turn, so it hands the rank's stream over in order.

`start` is a global sample index. Resuming from start=k yields, on every rank, exactly what an uninterrupted run
yields from global index k on. `state_dict()["next_index"]` is the global index of the next sequence this rank
would read; in a job whose ranks consumed the same number of sequences (lockstep, as data-parallel training
does), the smallest value over ranks is a resume point for every rank, even with another world size.

Local releases are memory-mapped. S3 releases: the `.idx` is read whole, then the `.bin` in ranged GETs of
`block_bytes` covering consecutive sequences, `prefetch` blocks ahead on threads. A rank (and each worker) reads
whole blocks and keeps its rows, so it transfers world_size × num_workers times its share.

torch is optional and imported only by `torch_dataset`.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice, tee
from pathlib import Path
from typing import Any, Literal

import numpy as np

from llm_assets.core.indexed import Index, IndexedDataset, IndexFormatError, parse_index
from llm_assets.core.keys import SUPERSEDED  # written into a release's folder when a later version removed documents

DATA = "data"  # the indexed dataset's prefix inside a release
MANIFEST = "manifest.json"
MIB = 2**20
DEFAULT_BLOCK_BYTES = 32 * MIB
DEFAULT_PREFETCH = 2
GET_ATTEMPTS = 3  # a body cut off mid-read is not retried by botocore itself
_CHECK_ROWS = 1 << 20  # index rows validated per vectorized step, bounding the temporaries

# storage_options keys -> boto3.client arguments; the lake's StoreConfig.storage_options() spellings included
_OPTION_KEYS = {
    "endpoint_url": "endpoint_url",
    "aws_endpoint_url": "endpoint_url",
    "aws_access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "aws_session_token": "aws_session_token",
    "region_name": "region_name",
    "aws_region": "region_name",
}
# boto3 takes the scheme from the endpoint URL; the retry settings are Polars' (the lake's StoreConfig passes them)
_IGNORED_OPTIONS = {"aws_allow_http", "max_retries", "retry_timeout_ms", "retry_init_backoff_ms",
                    "retry_max_backoff_ms"}


# which sequences a reader takes ----------------------------------------------------------------------------------


def first_index(start: int, rank: int, world_size: int) -> int:
    """The smallest global index >= start that belongs to `rank`."""
    return start + (rank - start) % world_size


def plan_batches(n: int, start: int, rank: int, world_size: int, batch_size: int, worker_id: int = 0,
                 num_workers: int = 1, drop_last: bool = False) -> Iterator[tuple[int, int]]:
    """(first global index, count) of each batch a worker yields; a batch's rows are first + world_size * k."""
    first = first_index(start, rank, world_size)
    share = len(range(first, n, world_size))
    for pos in range(worker_id * batch_size, share, num_workers * batch_size):
        count = min(batch_size, share - pos)
        if count < batch_size and drop_last:
            return
        yield first + world_size * pos, count


def plan_blocks(batches: Iterable[tuple[int, int]], step: int, block_rows: int, n: int,
                shard_ends: Sequence[int] = ()) -> Iterator[tuple[int, int]]:
    """Global row ranges [g0, g1) of the blocks to fetch, in order, so that every batch row lies in one.
    A block starts at the first row not yet covered: rows the stride skips before it are never fetched. A block
    ends at the latest at the end of its shard (`shard_ends`, ascending), so it is one ranged read of one file."""
    end = 0
    for i0, count in batches:
        last = i0 + step * (count - 1)
        while last >= end:
            g0 = i0 if end <= i0 else i0 + step * math.ceil((end - i0) / step)
            shard_end = shard_ends[bisect_right(shard_ends, g0)] if shard_ends else n
            end = min(n, shard_end, g0 + block_rows)
            yield g0, end


# the loader ------------------------------------------------------------------------------------------------------


class SupersededRelease(RuntimeError):
    """A release that takedown requests made obsolete, opened with on_superseded="refuse"."""


class SupersededReleaseWarning(UserWarning):
    pass


class ReleaseLoader:
    """Batches (rows, context) of a release, for one rank. See the module docstring for who reads what.

    A release that a later version superseded because takedown requests removed documents it holds is opened with
    a warning (`on_superseded="warn"`), refused (`"refuse"`: SupersededRelease) or opened silently (`"ignore"`)."""

    def __init__(self, uri: str, rank: int = 0, world_size: int = 1, start: int = 0, batch_size: int = 1,
                 storage_options: dict | None = None, drop_last: bool = False,
                 block_bytes: int = DEFAULT_BLOCK_BYTES, prefetch: int = DEFAULT_PREFETCH,
                 on_superseded: Literal["warn", "refuse", "ignore"] = "warn"):
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..world_size-1 (world_size {world_size})")
        if start < 0 or batch_size < 1 or block_bytes < 1 or prefetch < 1:
            raise ValueError("start >= 0, batch_size >= 1, block_bytes >= 1 and prefetch >= 1 are required")
        self.uri, self.rank, self.world_size = uri, rank, world_size
        self.start, self.batch_size, self.drop_last = start, batch_size, drop_last
        self.block_bytes, self.prefetch = block_bytes, prefetch
        self._client_kwargs = s3_client_kwargs(storage_options) if is_s3(uri) else {}
        self._next = first_index(start, rank, world_size)
        self._source = open_release(uri, self._client_kwargs, block_bytes, prefetch)  # fails here, not in a worker
        if on_superseded != "ignore" and (record := superseded(self._source)) is not None:
            message = (f"{uri}: release {record.get('version')} is superseded by {record.get('superseded_by')}: it "
                       f"holds documents removed by takedown requests or opt-outs "
                       f"({', '.join([*record.get('takedowns', []), *record.get('opt_outs', [])][:5])})")
            if on_superseded == "refuse":
                raise SupersededRelease(message)
            warnings.warn(message, SupersededReleaseWarning, stacklevel=2)

    def __repr__(self) -> str:  # never the storage options: they hold credentials
        return (f"ReleaseLoader({self.uri!r}, rank={self.rank}, world_size={self.world_size}, "
                f"start={self.start}, batch_size={self.batch_size})")

    # workers started with spawn receive the loader pickled: they reopen the release rather than copy its index
    # (forked workers share the parent's; the S3 source makes a client per process)
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_source": None}

    @property
    def source(self) -> _LocalRelease | _S3Release:
        if self._source is None:
            self._source = open_release(self.uri, self._client_kwargs, self.block_bytes, self.prefetch)
        return self._source

    # what the release holds

    @property
    def total_sequences(self) -> int:
        return self.source.sequences

    @property
    def context(self) -> int:
        return self.source.context

    @property
    def dtype(self) -> np.dtype:
        return self.source.dtype

    @property
    def manifest(self) -> dict:
        return self.source.manifest

    @property
    def num_sequences(self) -> int:
        """Sequences this rank reads from `start` on (all workers together)."""
        return len(range(first_index(self.start, self.rank, self.world_size), self.total_sequences, self.world_size))

    def __len__(self) -> int:
        """Batches this rank yields from `start` on."""
        full, rest = divmod(self.num_sequences, self.batch_size)
        return full if self.drop_last else full + bool(rest)

    # iteration

    def __iter__(self) -> Iterator[np.ndarray]:
        """The rank's batches (the last one smaller unless drop_last); state_dict() follows them."""
        self._next = first_index(self.start, self.rank, self.world_size)
        for (i0, count), batch in self._batches(0, 1, self.drop_last):
            self._next = i0 + self.world_size * count  # the batch counts as consumed once handed over
            yield batch

    def iter_batches(self, worker_id: int = 0, num_workers: int = 1) -> Iterator[np.ndarray]:
        """One worker's batches: runs of batch_size sequences of the rank's stream, round-robin over workers."""
        for _, batch in self._batches(worker_id, num_workers, self.drop_last):
            yield batch

    def iter_sequences(self, worker_id: int = 0, num_workers: int = 1) -> Iterator[np.ndarray]:
        """One worker's sequences, 1-D, in order: the rows of its batches (drop_last does not apply)."""
        for _, batch in self._batches(worker_id, num_workers, False):
            yield from batch

    def _batches(self, worker_id: int, num_workers: int, drop_last: bool):
        if not 0 <= worker_id < num_workers:
            raise ValueError(f"worker_id {worker_id} is not in 0..num_workers-1 (num_workers {num_workers})")
        plan = plan_batches(self.total_sequences, self.start, self.rank, self.world_size, self.batch_size,
                            worker_id, num_workers, drop_last)
        plan, for_reading = tee(plan)
        reader = self.source.read_batches(for_reading, self.world_size)
        try:
            yield from zip(plan, reader, strict=False)
        finally:
            reader.close()  # stops an S3 reader's prefetch threads when the caller stops early

    # resuming

    def state_dict(self) -> dict[str, int]:
        """{"next_index": the global index of the next sequence this rank would read}."""
        return {"next_index": self._next}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume: the next iteration starts at state["next_index"]."""
        start = int(state["next_index"])
        if start < 0:
            raise ValueError(f"next_index {start} is negative")
        self.start = start
        self._next = first_index(start, self.rank, self.world_size)

    def next_index_after(self, consumed: int) -> int:
        """The global index this rank reads after `consumed` sequences from `start`: the state to save when the
        sequences are counted elsewhere (a torch DataLoader with workers returns the rank's stream in order)."""
        return first_index(self.start, self.rank, self.world_size) + self.world_size * consumed

    def io_stats(self) -> dict[str, int]:
        """Ranged GETs and bytes read from the object store by this process (zero for local releases)."""
        return self.source.io_stats()


# sources ---------------------------------------------------------------------------------------------------------


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def open_release(uri: str, client_kwargs: dict, block_bytes: int, prefetch: int) -> _LocalRelease | _S3Release:
    if is_s3(uri):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        if not bucket:
            raise ValueError(f"{uri!r}: expected s3://bucket/prefix")
        return _S3Release(bucket, prefix.strip("/"), client_kwargs, block_bytes, prefetch)
    return _LocalRelease(Path(uri.removeprefix("file://")))


def superseded(source: _LocalRelease | _S3Release) -> dict | None:
    """The release's superseded record, or None while it is current."""
    try:
        return json.loads(source.read_bytes(SUPERSEDED))
    except FileNotFoundError:
        return None


def fixed_context(index: Index, name: str) -> int:
    """The one sequence length of a release, after checking every sequence has it and lies right after the
    previous one: then sequence i is bytes [i * row, (i + 1) * row) of the .bin."""
    n = len(index)
    if n == 0:
        return 0
    context = int(index.sequence_lengths[0])
    if context <= 0:
        raise IndexFormatError(f"{name}: sequence 0 is empty; a release holds sequences of one positive length")
    row = context * index.dtype.itemsize
    for lo in range(0, n, _CHECK_ROWS):
        hi = min(n, lo + _CHECK_ROWS)
        bad = np.flatnonzero((index.sequence_lengths[lo:hi] != context)
                             | (index.sequence_pointers[lo:hi] != np.arange(lo, hi, dtype=np.int64) * row))
        if bad.size:
            i = lo + int(bad[0])
            raise IndexFormatError(
                f"{name}: sequence {i} has length {index.sequence_lengths[i]} at byte {index.sequence_pointers[i]}; "
                f"a release holds sequences of one length ({context}) stored back to back")
    return context


def read_manifest(read_bytes: Callable[[str], bytes], name: str) -> dict:
    """The release's manifest.json, required: it is written last, so a release without one is incomplete."""
    try:
        return json.loads(read_bytes(MANIFEST))
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{name}: not found; a release is complete once its {MANIFEST} is written") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{name}: not valid JSON ({e})") from e


def check_manifest_sizes(manifest: dict, sizes: dict[str, int], name: str) -> None:
    """When the manifest lists file sizes, the data files must have them: a mismatch means the files were
    replaced after the manifest was written (or the reverse)."""
    listed = manifest.get("files") or {}
    for file, size in sizes.items():
        if file in listed and int(listed[file]) != size:
            raise IndexFormatError(f"{name}: {file} is {size:,} bytes, the manifest says {int(listed[file]):,}")


def shard_names(manifest: dict) -> list[str]:
    """The indexed datasets of a release, in training order: its shards, each a consecutive range of that order, or
    `data` alone for a release written as one file before shards existed."""
    return [shard["data"] for shard in manifest.get("shards") or [{"data": DATA}]]


@dataclass(frozen=True)
class Layout:
    """A release's shards read as one dataset: shard k holds global indices [firsts[k], firsts[k + 1])."""

    names: list[str]
    context: int
    dtype: np.dtype
    firsts: np.ndarray  # int64, len(names) + 1

    @property
    def sequences(self) -> int:
        return int(self.firsts[-1])

    def shard_of(self, g: int) -> int:
        return int(np.searchsorted(self.firsts, g, side="right")) - 1


def layout(manifest: dict, indexes: list[Index], name: Callable[[str], str]) -> Layout:
    """Check the shards agree (one dtype, one context, the sequence counts the manifest lists) and place them one
    after the other. `name(file)` is how errors name a file."""
    names = shard_names(manifest)
    contexts = {fixed_context(index, name(f"{n}.idx")) for n, index in zip(names, indexes, strict=True) if len(index)}
    dtypes = {index.dtype for index in indexes}
    if len(contexts) > 1 or len(dtypes) > 1:
        raise IndexFormatError(f"{name(MANIFEST)}: its shards differ in sequence length ({sorted(contexts)}) or "
                               f"dtype ({sorted(str(d) for d in dtypes)})")
    firsts = np.concatenate([[0], np.cumsum([len(index) for index in indexes])]).astype(np.int64)
    for listed, n, index, first in zip(manifest.get("shards") or [], names, indexes, firsts, strict=False):
        if int(listed["sequences"]) != len(index):
            raise IndexFormatError(f"{name(n + '.idx')}: {len(index):,} sequences, the manifest says "
                                   f"{int(listed['sequences']):,}")
        if int(listed.get("first", first)) != first:  # shards listed out of their order
            raise IndexFormatError(f"{name(MANIFEST)}: shard {n} starts at position {int(listed['first']):,}, but "
                                   f"the shards listed before it hold {int(first):,} sequences")
    return Layout(names, contexts.pop() if contexts else 0, indexes[0].dtype, firsts)


class _LocalRelease:
    def __init__(self, folder: Path):
        self.folder = folder
        self.manifest = read_manifest(self.read_bytes, str(folder / MANIFEST))
        datasets = [IndexedDataset(folder / n) for n in shard_names(self.manifest)]
        check_manifest_sizes(self.manifest, {f"{n}.{ext}": (folder / f"{n}.{ext}").stat().st_size
                                             for n in shard_names(self.manifest) for ext in ("bin", "idx")},
                             str(folder / MANIFEST))
        self.layout = layout(self.manifest, [d.index for d in datasets], lambda f: str(folder / f))
        self.sequences, self.dtype, self.context = self.layout.sequences, self.layout.dtype, self.layout.context
        self.rows = [d.tokens.reshape(len(d.index), self.context) for d in datasets]

    def read_batches(self, batches: Iterable[tuple[int, int]], step: int) -> Generator[np.ndarray, None, None]:
        firsts = self.layout.firsts
        for i0, count in batches:
            rows = i0 + step * np.arange(count, dtype=np.int64)
            shard = np.searchsorted(firsts, rows, side="right") - 1
            # a copy (fancy indexing): the caller owns a writable array and the mapping's pages can be dropped
            yield np.concatenate([self.rows[k][rows[shard == k] - firsts[k]] for k in np.unique(shard)]) \
                if count else np.empty((0, self.context), self.dtype)

    def read_bytes(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def io_stats(self) -> dict[str, int]:
        return {"requests": 0, "bytes": 0}


def s3_client_kwargs(storage_options: dict | None) -> dict[str, str]:
    """boto3.client arguments from storage_options; what they leave out comes from the environment:
    LLM_ASSETS_S3_ENDPOINT for the endpoint, then boto3's own chain (AWS_* variables, config files, roles)."""
    kwargs = {}
    for key, value in (storage_options or {}).items():
        if key in _IGNORED_OPTIONS:
            continue
        if key not in _OPTION_KEYS:  # the key's name only: values may be secrets
            raise ValueError(f"unknown storage option {key!r} (known: {', '.join(sorted(_OPTION_KEYS))})")
        kwargs[_OPTION_KEYS[key]] = value
    env_endpoint = os.environ.get("LLM_ASSETS_S3_ENDPOINT", "")
    if "endpoint_url" not in kwargs and env_endpoint not in ("", "aws"):
        kwargs["endpoint_url"] = env_endpoint
    return kwargs


class _S3Release:
    def __init__(self, bucket: str, prefix: str, client_kwargs: dict, block_bytes: int, prefetch: int):
        self.bucket, self.prefix = bucket, prefix
        self._client_kwargs, self.prefetch = client_kwargs, prefetch
        self._client, self._client_pid = None, None
        self._lock = threading.Lock()
        self._requests = self._bytes = 0
        self.manifest = read_manifest(self.read_bytes, self.url(MANIFEST))
        names = shard_names(self.manifest)
        idx = {n: self.read_bytes(f"{n}.idx") for n in names}  # 12 bytes a sequence
        indexes = [parse_index(idx[n], self.url(f"{n}.idx")) for n in names]
        self.layout = layout(self.manifest, indexes, self.url)
        self.sequences, self.dtype, self.context = self.layout.sequences, self.layout.dtype, self.layout.context
        self.row_bytes = self.context * self.dtype.itemsize
        self.block_rows = max(1, block_bytes // max(1, self.row_bytes))
        sizes = {f"{n}.idx": len(idx[n]) for n in names}
        for n, index in zip(names, indexes, strict=True):
            sizes[f"{n}.bin"] = self._check_data_size(n, index)
        check_manifest_sizes(self.manifest, sizes, self.url(MANIFEST))

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    @property
    def client(self):
        # boto3 clients are thread-safe but must not cross a fork
        if self._client is None or self._client_pid != os.getpid():
            import boto3
            from botocore.config import Config

            path_style = {"s3": {"addressing_style": "path"}} if "endpoint_url" in self._client_kwargs else {}
            config = Config(retries={"max_attempts": 5, "mode": "standard"},
                            max_pool_connections=max(10, self.prefetch + 2), **path_style)
            self._client = boto3.client("s3", config=config, **self._client_kwargs)
            self._client_pid = os.getpid()
        return self._client

    def _check_data_size(self, shard: str, index: Index) -> int:
        from botocore.exceptions import ClientError

        name = f"{shard}.bin"
        try:
            size = self.client.head_object(Bucket=self.bucket, Key=self.key(name))["ContentLength"]
        except ClientError as e:
            raise _not_found(e, self.url(name)) from e
        if size != index.data_bytes:
            raise IndexFormatError(f"{self.url(name)}: {size:,} bytes, but its index describes {index.data_bytes:,}")
        return size

    def read_bytes(self, name: str, first: int | None = None, last: int | None = None) -> bytes:
        """A whole object, or bytes [first, last] of it; a read cut off mid-body is retried."""
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs = {"Bucket": self.bucket, "Key": self.key(name)}
        if first is not None:
            kwargs["Range"] = f"bytes={first}-{last}"
        for attempt in range(GET_ATTEMPTS):
            try:
                data = self.client.get_object(**kwargs)["Body"].read()
                break
            except ClientError as e:
                raise _not_found(e, self.url(name)) from e
            except BotoCoreError:
                if attempt == GET_ATTEMPTS - 1:
                    raise
        with self._lock:
            self._requests += 1
            self._bytes += len(data)
        return data

    def _block(self, rows: tuple[int, int]) -> tuple[int, np.ndarray]:
        g0, g1 = rows  # inside one shard: plan_blocks ends a block at its shard's end
        k = self.layout.shard_of(g0)
        first, name = int(self.layout.firsts[k]), f"{self.layout.names[k]}.bin"
        data = self.read_bytes(name, (g0 - first) * self.row_bytes, (g1 - first) * self.row_bytes - 1)
        if len(data) != (g1 - g0) * self.row_bytes:
            raise IOError(f"{self.url(name)}: {len(data)} bytes for sequences {g0 - first}..{g1 - 1 - first}, "
                          f"expected {(g1 - g0) * self.row_bytes}")
        return g0, np.frombuffer(data, dtype=self.dtype).reshape(g1 - g0, self.context)

    def read_batches(self, batches: Iterable[tuple[int, int]], step: int) -> Generator[np.ndarray, None, None]:
        batches, for_blocks = tee(batches)
        blocks = prefetched(self._block, plan_blocks(for_blocks, step, self.block_rows, self.sequences,
                                                     self.layout.firsts[1:].tolist()), self.prefetch)
        try:
            g0, block = 0, np.empty((0, self.context), dtype=self.dtype)
            for i0, count in batches:
                pieces, k = [], 0
                while k < count:  # the batch's rows in this block form one strided slice
                    g = i0 + step * k
                    if not g0 <= g < g0 + len(block):
                        g0, block = next(blocks)
                        if g0 != g:  # plan_blocks starts each block at the first row not yet covered
                            raise RuntimeError(f"block plan out of step: block at {g0}, row {g} needed")
                    m = min(count, k + (g0 + len(block) - 1 - g) // step + 1)
                    pieces.append(block[g - g0 : g - g0 + step * (m - k - 1) + 1 : step])
                    k = m
                yield np.concatenate(pieces)  # a copy: the block's buffer is released once passed
        finally:
            blocks.close()

    def io_stats(self) -> dict[str, int]:
        with self._lock:
            return {"requests": self._requests, "bytes": self._bytes}


def _not_found(error, url: str) -> Exception:
    code = error.response.get("Error", {}).get("Code", "")
    if code in ("404", "NoSuchKey", "NotFound"):
        return FileNotFoundError(f"{url}: not found (a release holds {DATA}.bin, {DATA}.idx and {MANIFEST})")
    return error


def prefetched(fn: Callable, items: Iterable, depth: int) -> Generator:
    """fn(item) for each item, in order, with up to `depth` calls running ahead on threads. Closing the
    iterator early cancels what has not started and waits for what has."""
    pool = ThreadPoolExecutor(max_workers=depth)
    pending: deque = deque()
    items = iter(items)
    try:
        for item in islice(items, depth):
            pending.append(pool.submit(fn, item))
        while pending:
            future = pending.popleft()
            for item in islice(items, 1):
                pending.append(pool.submit(fn, item))
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# torch -----------------------------------------------------------------------------------------------------------


def torch_dataset(uri: str, rank: int = 0, world_size: int = 1, start: int = 0, batch_size: int = 1,
                  storage_options: dict | None = None, drop_last: bool = False, **loader_options):
    """A torch IterableDataset of int64 tensors (rows, context) for this rank; workers split the rank's stream
    (torch.utils.data.get_worker_info()). Use it with DataLoader(dataset, batch_size=None, num_workers=k): the
    dataset batches. To checkpoint, count the sequences consumed and save `dataset.loader.next_index_after(n)`."""
    cls = __getattr__("TorchReleaseDataset")
    return cls(ReleaseLoader(uri, rank, world_size, start, batch_size, storage_options, drop_last, **loader_options))


def _import_torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("torch_dataset needs PyTorch, which is not installed: pip install torch "
                          "(ReleaseLoader itself yields NumPy arrays without it)") from e
    return torch


def _make_torch_dataset_class():
    torch = _import_torch()

    class TorchReleaseDataset(torch.utils.data.IterableDataset):
        def __init__(self, loader: ReleaseLoader):
            super().__init__()
            self.loader = loader

        def __len__(self) -> int:
            return len(self.loader)

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
            for batch in self.loader.iter_batches(worker_id, num_workers):
                # int64: what embedding lookups take; uint16 tensors support few operations
                yield torch.from_numpy(batch.astype(np.int64))

    # a module-level name, so that workers started with spawn can unpickle instances
    TorchReleaseDataset.__module__, TorchReleaseDataset.__qualname__ = __name__, "TorchReleaseDataset"
    return TorchReleaseDataset


def __getattr__(name: str):
    # built on first use, so that importing this module never imports torch
    if name == "TorchReleaseDataset":
        if name not in globals():
            globals()[name] = _make_torch_dataset_class()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
