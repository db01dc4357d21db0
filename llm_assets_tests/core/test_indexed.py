"""The Megatron indexed dataset: round trips, the `.idx` layout parsed independently of our reader, whole-or-nothing
writes, and clear errors for missing or corrupt files."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest

from llm_assets.core.indexed import IndexedDataset, IndexedWriter, IndexFormatError


def sequences(dtype, high: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = [0, 1, 5, 2048, 17, 3, 1000, 0, 64]
    return [rng.integers(0, high, size=n, dtype=np.int64).astype(dtype) for n in lengths]


def write(prefix, dtype, seqs, boundaries=None) -> None:
    """Each sequence its own document, or documents ending after the sequence numbers in `boundaries`."""
    with IndexedWriter(prefix, dtype) as w:
        for i, s in enumerate(seqs):
            w.add(s, end_document=boundaries is None or i in boundaries)


def independent_parse(path) -> dict:
    """The `.idx` layout read with struct and np.frombuffer only, straight from the format description."""
    raw = path.read_bytes()
    magic, version, code, n, d = struct.unpack_from("<9sQBQQ", raw, 0)
    off = 9 + 8 + 1 + 8 + 8
    lengths = np.frombuffer(raw, dtype="<i4", count=n, offset=off)
    pointers = np.frombuffer(raw, dtype="<i8", count=n, offset=off + 4 * n)
    docs = np.frombuffer(raw, dtype="<i8", count=d, offset=off + 12 * n)
    return {"magic": magic, "version": version, "code": code, "lengths": lengths, "pointers": pointers,
            "docs": docs, "size": len(raw), "expected_size": off + 12 * n + 8 * d}


def test_uint16_round_trip(tmp_path):
    seqs = sequences(np.uint16, 2**16)
    write(tmp_path / "ds", np.uint16, seqs)
    ds = IndexedDataset(tmp_path / "ds")
    assert len(ds) == len(seqs) and ds.dtype == np.uint16
    for i, s in enumerate(seqs):
        assert ds[i].dtype == np.uint16
        np.testing.assert_array_equal(ds[i], s)
    np.testing.assert_array_equal(ds[-1], seqs[-1])
    np.testing.assert_array_equal(ds.sequence_lengths, [len(s) for s in seqs])
    np.testing.assert_array_equal(ds.document_indices, np.arange(len(seqs) + 1))
    np.testing.assert_array_equal(ds.get(3, offset=10, length=5), seqs[3][10:15])
    np.testing.assert_array_equal(ds.get(3, offset=2040), seqs[3][2040:])


def test_uint32_is_stored_as_megatron_int32(tmp_path):
    """Megatron has no uint32 code: ids of large vocabularies go to disk as int32, values unchanged."""
    seqs = sequences(np.uint32, 2**31 - 1)
    seqs[1] = np.array([2**31 - 1], dtype=np.uint32)
    write(tmp_path / "ds", np.uint32, seqs)
    ds = IndexedDataset(tmp_path / "ds")
    assert ds.dtype == np.int32
    assert independent_parse(tmp_path / "ds.idx")["code"] == 4
    for i, s in enumerate(seqs):
        np.testing.assert_array_equal(ds[i].astype(np.int64), s.astype(np.int64))


@pytest.mark.parametrize("dtype, bad", [(np.uint32, [2**31]), (np.uint16, [65536]), (np.uint16, [-1])])
def test_values_that_do_not_fit_are_refused(tmp_path, dtype, bad):
    with pytest.raises(ValueError, match="do not fit"):
        with IndexedWriter(tmp_path / "ds", dtype) as w:
            w.add(np.array(bad, dtype=np.int64))
    assert not list(tmp_path.iterdir())


def test_unsupported_dtype_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no Megatron DType code"):
        IndexedWriter(tmp_path / "ds", np.uint64)


def test_idx_layout_parsed_independently(tmp_path):
    seqs = sequences(np.uint16, 2**16)
    # documents: [0, 1, 2], [3], [4, 5, 6, 7, 8]
    write(tmp_path / "ds", np.uint16, seqs, boundaries={2, 3})
    idx = independent_parse(tmp_path / "ds.idx")
    assert idx["magic"] == b"MMIDIDX\x00\x00" and idx["version"] == 1 and idx["code"] == 8
    assert idx["size"] == idx["expected_size"]
    np.testing.assert_array_equal(idx["lengths"], [len(s) for s in seqs])
    np.testing.assert_array_equal(idx["pointers"], np.concatenate([[0], np.cumsum([2 * len(s) for s in seqs])[:-1]]))
    np.testing.assert_array_equal(idx["docs"], [0, 3, 4, 9])
    data = (tmp_path / "ds.bin").read_bytes()
    assert data == b"".join(s.astype("<u2").tobytes() for s in seqs)
    np.testing.assert_array_equal(IndexedDataset(tmp_path / "ds").document_indices, idx["docs"])


def test_add_many_and_document_boundaries(tmp_path):
    packed = np.arange(5 * 8, dtype=np.int64).reshape(5, 8)
    with IndexedWriter(tmp_path / "ds", np.int32) as w:
        w.add_many(packed)  # five documents
        w.add_many(packed[:2], end_document=False)
        w.end_document()
        w.end_document()  # no new sequence: no empty document
        w.add(np.array([1, 2, 3]), end_document=False)  # the trailing document is closed on exit
    ds = IndexedDataset(tmp_path / "ds")
    assert len(ds) == 8
    np.testing.assert_array_equal(ds.document_indices, [0, 1, 2, 3, 4, 5, 7, 8])
    for i in range(5):
        np.testing.assert_array_equal(ds[i], packed[i])
    np.testing.assert_array_equal(ds[7], [1, 2, 3])


def test_add_many_of_no_rows_adds_nothing(tmp_path):
    """A shard or chunk with no sequences hands the writer a (0, context) array: nothing is added, no document."""
    packed = np.arange(3 * 8, dtype=np.int64).reshape(3, 8)
    with IndexedWriter(tmp_path / "ds", np.uint16) as w:
        w.add_many(np.empty((0, 8), np.int64))
        w.add_many(packed)
        w.add_many(packed[:0], end_document=False)
        w.add_many(packed[3:])
    ds = IndexedDataset(tmp_path / "ds")
    assert len(ds) == 3
    np.testing.assert_array_equal(ds.document_indices, [0, 1, 2, 3])
    np.testing.assert_array_equal(np.stack([ds[i] for i in range(3)]), packed)
    with IndexedWriter(tmp_path / "none", np.uint16) as w:
        w.add_many(np.empty((0, 8), np.int64))
    assert len(IndexedDataset(tmp_path / "none")) == 0


def test_empty_dataset(tmp_path):
    with IndexedWriter(tmp_path / "ds", np.uint16):
        pass
    ds = IndexedDataset(tmp_path / "ds")
    assert len(ds) == 0
    np.testing.assert_array_equal(ds.document_indices, [0])


def test_error_inside_the_block_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with IndexedWriter(tmp_path / "ds", np.uint16) as w:
            w.add(np.arange(100))
            raise RuntimeError("boom")
    assert not list(tmp_path.iterdir())


def test_error_inside_the_block_keeps_the_previous_dataset(tmp_path):
    write(tmp_path / "ds", np.uint16, [np.arange(10)])
    with pytest.raises(RuntimeError):
        with IndexedWriter(tmp_path / "ds", np.uint16) as w:
            w.add(np.arange(50))
            raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.bin", "ds.idx"]
    np.testing.assert_array_equal(IndexedDataset(tmp_path / "ds")[0], np.arange(10))


def test_missing_index_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"ds\.idx"):
        IndexedDataset(tmp_path / "ds")


@pytest.mark.parametrize("corrupt", ["magic", "version", "truncated", "empty", "dtype"])
def test_corrupt_index_names_the_file(tmp_path, corrupt):
    write(tmp_path / "ds", np.uint16, sequences(np.uint16, 2**16))
    path = tmp_path / "ds.idx"
    raw = bytearray(path.read_bytes())
    if corrupt == "magic":
        raw[:9] = b"TNTIDX\x00\x00\x00"
    elif corrupt == "version":
        raw[9:17] = struct.pack("<Q", 2)
    elif corrupt == "truncated":
        raw = raw[:-5]
    elif corrupt == "empty":
        raw = bytearray()
    elif corrupt == "dtype":
        raw[17] = 42
    path.write_bytes(bytes(raw))
    with pytest.raises(IndexFormatError, match=str(path).replace(".", r"\.")):
        IndexedDataset(tmp_path / "ds")


def test_data_file_of_the_wrong_size_is_refused(tmp_path):
    write(tmp_path / "ds", np.uint16, sequences(np.uint16, 2**16))
    with open(tmp_path / "ds.bin", "ab") as f:
        f.write(b"\0\0")
    with pytest.raises(IndexFormatError, match=r"ds\.bin"):
        IndexedDataset(tmp_path / "ds")


def test_reads_and_pickles_by_prefix(tmp_path):
    seqs = sequences(np.uint16, 2**16)
    write(tmp_path / "ds", np.uint16, seqs)
    ds = IndexedDataset(str(tmp_path / "ds"))
    blob = pickle.dumps(ds)
    assert len(blob) < 1000  # the prefix, not the data
    np.testing.assert_array_equal(pickle.loads(blob)[3], seqs[3])
    with pytest.raises(IndexError):
        ds[len(seqs)]
    with pytest.raises(IndexError):
        ds.get(1, offset=0, length=2)
