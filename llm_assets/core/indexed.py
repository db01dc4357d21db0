"""Megatron-LM's indexed dataset on disk (`<prefix>.bin` + `<prefix>.idx`): writer and memory-mapped reader.

Training code built on Megatron-LM (and its forks: NeMo, Megatron-DeepSpeed, GPT-NeoX) reads token data in the
format `tools/preprocess_data.py` writes and `megatron/core/datasets/indexed_dataset.py` (`IndexedDataset`,
formerly `MMapIndexedDataset`) reads. Writing it directly lets a release be trained on without conversion.

`.bin`: the sequences' elements, concatenated, in one dtype, nothing else.
`.idx`, little-endian, in this order:

    magic             9 bytes  b"MMIDIDX\\x00\\x00"
    version           <Q       1
    dtype code        <B       see DTYPE_CODES
    sequence count    <Q       N
    document count    <Q       D = len(document_indices)
    sequence_lengths  int32[N]  elements per sequence
    sequence_pointers int64[N]  byte offset of each sequence in .bin
    document_indices  int64[D]  sequence index where each document starts, from 0, the last one = N

(Megatron's multimodal variant appends int8[N] sequence modes; the reader accepts and ignores them.)
"""

from __future__ import annotations

import array
import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
_FIXED = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequence count, document count
HEADER_BYTES = _FIXED.size  # 34

# megatron/core/datasets/indexed_dataset.py, `class DType(Enum)`. The legacy megatron/data/indexed_dataset.py
# (and fairseq before it) mapped 6 to np.float (float64) and 7 to np.double (float64 too): only the float codes
# differ, and token data never uses them. There is no unsigned 32-bit code: see `disk_dtype`.
DTYPE_CODES: dict[np.dtype, int] = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
CODE_DTYPES: dict[int, np.dtype] = {code: dt for dt, code in DTYPE_CODES.items()}
INT32_MAX = np.iinfo(np.int32).max


class IndexFormatError(ValueError):
    """An `.idx` (or its `.bin`) that is not a readable Megatron indexed dataset; the message names the file."""


def disk_dtype(dtype) -> np.dtype:
    """The dtype written for `dtype`. uint32 becomes int32: Megatron has no uint32 code and itself stores
    vocabularies of 65,500 tokens or more as int32 (`DType.optimal_dtype`); ids below 2**31 have the same bytes."""
    dt = np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).byteorder == ">" else np.dtype(dtype)
    if dt == np.uint32:
        return np.dtype(np.int32)
    if dt not in DTYPE_CODES:
        names = ", ".join(sorted(str(d) for d in DTYPE_CODES))
        raise ValueError(f"dtype {dt} has no Megatron DType code (supported: {names}, and uint32 as int32)")
    return dt


def data_path(prefix: Path | str) -> Path:
    return Path(f"{prefix}.bin")


def index_path(prefix: Path | str) -> Path:
    return Path(f"{prefix}.idx")


# the index -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Index:
    """The parsed `.idx`: arrays are read-only views of the buffer it was parsed from."""

    dtype: np.dtype
    sequence_lengths: np.ndarray  # int32[N]
    sequence_pointers: np.ndarray  # int64[N]
    document_indices: np.ndarray  # int64[D]

    def __len__(self) -> int:
        return len(self.sequence_lengths)

    @property
    def data_bytes(self) -> int:
        """Size the `.bin` must have: the end of the last sequence."""
        if not len(self):
            return 0
        return int(self.sequence_pointers[-1]) + int(self.sequence_lengths[-1]) * self.dtype.itemsize


def encode_index(dtype, sequence_lengths: np.ndarray, document_indices: np.ndarray) -> bytes:
    """The `.idx` bytes for sequences stored back to back (pointers are the running byte offsets)."""
    dt = disk_dtype(dtype)
    lengths = np.asarray(sequence_lengths, dtype=np.int64)
    pointers = np.zeros(len(lengths), dtype="<i8")
    np.cumsum(lengths[:-1] * dt.itemsize, out=pointers[1:])
    docs = np.asarray(document_indices, dtype="<i8")
    header = _FIXED.pack(MAGIC, VERSION, DTYPE_CODES[dt], len(lengths), len(docs))
    return b"".join([header, lengths.astype("<i4").tobytes(), pointers.tobytes(), docs.tobytes()])


def parse_index(buffer, name: str) -> Index:
    """Parse `.idx` bytes (bytes, memoryview or a uint8 memmap); `name` is the file named in errors."""
    buf = memoryview(buffer).cast("B")
    if len(buf) < HEADER_BYTES:
        raise IndexFormatError(
            f"{name}: not a Megatron index ({len(buf)} bytes, shorter than its {HEADER_BYTES}-byte header)")
    magic, version, code, n, d = _FIXED.unpack_from(buf)
    if magic != MAGIC:
        raise IndexFormatError(f"{name}: not a Megatron index (magic {magic!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise IndexFormatError(f"{name}: unsupported index version {version} (expected {VERSION})")
    if code not in CODE_DTYPES:
        raise IndexFormatError(f"{name}: unknown dtype code {code} (known: {sorted(CODE_DTYPES)})")
    body = 12 * n + 8 * d
    # exact size, or with Megatron's multimodal int8 sequence modes after the document indices
    if len(buf) not in (HEADER_BYTES + body, HEADER_BYTES + body + n):
        raise IndexFormatError(f"{name}: {len(buf)} bytes, but a header of {n} sequences and {d} documents "
                               f"needs {HEADER_BYTES + body} (truncated or not an index)")
    lengths = np.frombuffer(buf, dtype="<i4", count=n, offset=HEADER_BYTES)
    pointers = np.frombuffer(buf, dtype="<i8", count=n, offset=HEADER_BYTES + 4 * n)
    docs = np.frombuffer(buf, dtype="<i8", count=d, offset=HEADER_BYTES + 12 * n)
    if d and (docs[0] != 0 or docs[-1] != n):
        raise IndexFormatError(f"{name}: document indices run {docs[0]}..{docs[-1]}, expected 0..{n}")
    return Index(CODE_DTYPES[code], lengths, pointers, docs)


def read_index(path: Path | str) -> Index:
    """Parse an `.idx` file, memory-mapped: only the pages touched are read."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: index file not found (an indexed dataset is <prefix>.bin + <prefix>.idx)")
    if path.stat().st_size < HEADER_BYTES:  # np.memmap refuses empty files
        return parse_index(path.read_bytes(), str(path))
    return parse_index(np.memmap(path, dtype=np.uint8, mode="r"), str(path))


# writing ---------------------------------------------------------------------------------------------------------


class IndexedWriter:
    """Writes `<prefix>.bin` + `<prefix>.idx`, visible only once complete.

        with IndexedWriter("out/data", np.uint16) as w:
            w.add(tokens)              # one sequence, which is also one document
            w.add_many(packed)         # (rows, context): one sequence (and document) per row

    Sequences stream into `<prefix>.bin.tmp`; memory grows with the sequence count only (12 bytes each). On a
    clean exit the index goes to `<prefix>.idx.tmp`, both are fsynced, any old `.idx` is removed, then `.bin`
    and last `.idx` are renamed into place: a reader (which needs both) sees the old dataset, none, or the new
    one, never a mix. On an error inside the block both temporary files are deleted.
    """

    def __init__(self, prefix: Path | str, dtype):
        self.prefix = Path(prefix)
        self.dtype = disk_dtype(dtype)
        self.bin_path, self.idx_path = data_path(prefix), index_path(prefix)
        self._bin_tmp = Path(f"{self.bin_path}.tmp")
        self._idx_tmp = Path(f"{self.idx_path}.tmp")
        self._lengths = array.array("q")
        self._documents = array.array("q", [0])
        self._file: io.BufferedWriter | None = None

    def __enter__(self) -> IndexedWriter:
        self.bin_path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self._bin_tmp, "wb")
        return self

    @property
    def sequence_count(self) -> int:
        return len(self._lengths)

    def add(self, sequence, end_document: bool = True) -> None:
        """Append one 1-D sequence; with `end_document` (the default) it is a document of its own."""
        arr = np.asarray(sequence)
        if arr.ndim != 1:
            raise ValueError(f"a sequence is 1-D, got shape {arr.shape}")
        self._write(self._cast(arr))
        self._lengths.append(len(arr))
        if end_document:
            self.end_document()

    def add_many(self, sequences, end_document: bool = True) -> None:
        """Append each row of a 2-D array as a sequence (one write); with `end_document` each row is a document.
        An array of no rows adds nothing."""
        arr = np.asarray(sequences)
        if arr.ndim != 2:
            raise ValueError(f"add_many takes a 2-D array (rows, length), got shape {arr.shape}")
        rows, length = arr.shape
        self._write(self._cast(arr))
        first = len(self._lengths)
        self._lengths.frombytes(np.full(rows, length, dtype=np.int64).tobytes())
        if end_document and rows:
            self._documents.frombytes(np.arange(first + 1, first + rows + 1, dtype=np.int64).tobytes())

    def end_document(self) -> None:
        """Close the current document. A no-op when no sequence was added since the last boundary: an empty
        document would be a repeated entry in document_indices, which samplers would count as a document."""
        if len(self._lengths) > self._documents[-1]:
            self._documents.append(len(self._lengths))

    def _cast(self, arr: np.ndarray) -> np.ndarray:
        if arr.shape[-1] > INT32_MAX:
            raise ValueError(f"a sequence of {arr.shape[-1]:,} elements does not fit Megatron's int32 lengths")
        if self.dtype.kind in "iu" and not np.can_cast(arr.dtype, self.dtype):
            _check_range(arr, self.dtype)
        return np.ascontiguousarray(arr, dtype=self.dtype)

    def _write(self, arr: np.ndarray) -> None:
        if self._file is None:
            raise RuntimeError("IndexedWriter is written inside `with IndexedWriter(...) as w:`")
        if not arr.size:  # memoryview refuses to cast a view with a zero in its shape, e.g. (0, context)
            return
        # numpy's stubs give ndarray the buffer protocol only on Python 3.12+
        self._file.write(memoryview(arr).cast("B"))  # type: ignore[arg-type]

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            assert self._file is not None  # `with` runs __exit__ only after __enter__ opened it
            self._file.close()
            if exc_type is None:
                self._publish()
        finally:
            # after a successful publish the temporary files are gone; otherwise nothing partial stays
            for tmp in (self._bin_tmp, self._idx_tmp):
                tmp.unlink(missing_ok=True)

    def _publish(self) -> None:
        self.end_document()  # the trailing document: document_indices must end with the sequence count
        lengths = np.frombuffer(self._lengths, dtype=np.int64)
        with open(self._idx_tmp, "wb") as f:
            f.write(encode_index(self.dtype, lengths, np.frombuffer(self._documents, dtype=np.int64)))
            f.flush()
            os.fsync(f.fileno())
        _fsync_path(self._bin_tmp)
        self.idx_path.unlink(missing_ok=True)
        os.replace(self._bin_tmp, self.bin_path)
        os.replace(self._idx_tmp, self.idx_path)
        _fsync_path(self.idx_path.parent)


def _check_range(arr: np.ndarray, dtype: np.dtype) -> None:
    """Refuse values the cast would wrap or truncate: a wrapped token id is silent corruption."""
    if arr.dtype.kind not in "iub":
        raise TypeError(f"cannot store {arr.dtype} values as {dtype}: pass integers")
    if arr.size == 0:
        return
    info = np.iinfo(dtype)
    lo, hi = arr.min(), arr.max()
    if lo < info.min or hi > info.max:
        raise ValueError(f"values {lo}..{hi} do not fit {dtype} ({info.min}..{info.max})")


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# reading ---------------------------------------------------------------------------------------------------------


class IndexedDataset:
    """A Megatron indexed dataset, memory-mapped: `ds[i]` is sequence i as a read-only view of the `.bin`."""

    def __init__(self, prefix: Path | str):
        self.prefix = Path(prefix)
        self.index = read_index(index_path(prefix))
        self._tokens = _map_data(data_path(prefix), self.index)

    # pickled by prefix (as Megatron does): a memmap would pickle as a full copy of the data
    def __getstate__(self) -> dict:
        return {"prefix": self.prefix}

    def __setstate__(self, state: dict) -> None:
        type(self).__init__(self, state["prefix"])

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.get(i)

    def get(self, i: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        """Elements [offset, offset + length) of sequence i (to its end when length is None), as a view."""
        i = _check_item(i, len(self))
        size = int(self.index.sequence_lengths[i])
        length = size - offset if length is None else length
        if offset < 0 or length < 0 or offset + length > size:
            raise IndexError(f"elements [{offset}, {offset + length}) are outside sequence {i} of length {size}")
        start = int(self.index.sequence_pointers[i]) // self.dtype.itemsize + offset
        return self._tokens[start : start + length]

    @property
    def dtype(self) -> np.dtype:
        return self.index.dtype

    @property
    def sequence_lengths(self) -> np.ndarray:
        return self.index.sequence_lengths

    @property
    def sequence_pointers(self) -> np.ndarray:
        return self.index.sequence_pointers

    @property
    def document_indices(self) -> np.ndarray:
        return self.index.document_indices

    @property
    def tokens(self) -> np.ndarray:
        """The whole `.bin` as one flat read-only array."""
        return self._tokens


def _check_item(i, n: int) -> int:
    if not isinstance(i, (int, np.integer)):
        raise TypeError(f"sequence index must be an integer, got {type(i).__name__}")
    j = int(i) + n if i < 0 else int(i)
    if not 0 <= j < n:
        raise IndexError(f"sequence {i} out of range for {n} sequences")
    return j


def _map_data(path: Path, index: Index) -> np.ndarray:
    """Memory-map the `.bin`, after checking that its size is the one the index describes."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: data file not found (an indexed dataset is <prefix>.bin + <prefix>.idx)")
    size = path.stat().st_size
    if size != index.data_bytes:
        raise IndexFormatError(f"{path}: {size:,} bytes, but its index describes {index.data_bytes:,}")
    if bool(np.any(index.sequence_pointers % index.dtype.itemsize)):
        raise IndexFormatError(f"{path}: sequence pointers not aligned to {index.dtype} elements")
    if size == 0:
        return np.empty(0, dtype=index.dtype)
    # a plain ndarray view (the memmap stays alive as its base): slices are ordinary arrays
    return np.memmap(path, dtype=index.dtype, mode="r").view(np.ndarray)
