"""The rows of the `signatures` stage for one batch of a `filtered` part: per document its ids, the hash of its
normalized text and of its URL, its MinHash signature and LSH band hashes (see `minhash`).

This is the stage's whole per-batch work, apart from `dedup` (settings, clustering, object store) so that a
process which only computes signatures imports NumPy, Polars and PyArrow and nothing else. Arrow columns go in and
out as they are: ids pass through untouched, the computed columns are built in the part's types, and only the text
column is handed to Polars.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa

from llm_assets.core.minhash import MinHasher, words

BATCH_ROWS = 2048
# the columns of `filtered` it reads; the language picks the segmenter of languages written without spaces
SIGNATURE_INPUT = ["doc_id", "source_key", "url", "fetch_time", "text", "language"]
PASSED = ["doc_id", "source_key", "url", "fetch_time"]  # copied from the input as they are


def signature_schema(bands: int, rows: int) -> pa.Schema:
    return pa.schema([
        ("doc_id", pa.string()),
        ("source_key", pa.string()),  # with doc_id, the document: the same record may be uploaded twice
        ("url", pa.string()),
        ("fetch_time", pa.string()),
        ("n_chars", pa.int64()),
        ("text_hash", pa.uint64()),
        ("url_hash", pa.uint64()),
        ("bands", pa.list_(pa.uint64(), bands)),
        ("signature", pa.list_(pa.uint32(), bands * rows)),  # the MinHash values: for similarity estimates
    ])


class _ArrowStream:
    """An Arrow column seen only through the Arrow C stream interface, which Polars imports without a copy of
    fixed-width data and without `pl.from_arrow`'s import of pyarrow.compute (0.35 CPU-s in a fresh worker)."""

    def __init__(self, column: pa.Array | pa.ChunkedArray):
        self.column = column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.column.__arrow_c_stream__(requested_schema)


def _series(column: pa.Array | pa.ChunkedArray) -> pl.Series:
    return pl.Series(_ArrowStream(column))


def _string(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A string column as the part stores it (a `filtered` part already does; a frame's may be a large string)."""
    return column if column.type == pa.string() else column.cast(pa.string())


def _fixed_lists(values: np.ndarray, arrow_type: pa.DataType) -> pa.FixedSizeListArray:
    """A (documents, width) matrix as a fixed-size list column, without a copy."""
    return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel(), arrow_type.value_type), values.shape[1])


def signature_table(batch: pa.RecordBatch | pa.Table, hasher: MinHasher) -> pa.Table:
    """One batch of a `filtered` part (at least the SIGNATURE_INPUT columns) -> its rows of the signatures part,
    in `signature_schema(hasher.bands, hasher.rows)`. A document without text has n_chars null, and the hashes of
    the empty text."""
    schema = signature_schema(hasher.bands, hasher.rows)
    text = _series(batch.column("text"))
    # a frame without a language column: words by spaces and punctuation only
    languages = _series(batch.column("language")) if "language" in batch.schema.names else None
    text_words = words(text.fill_null(""), languages)
    sig = hasher.signatures_of_words(text_words)
    columns = [_string(batch.column(name)) for name in PASSED]
    n_chars = text.str.len_chars().cast(pl.Int64).to_arrow()
    text_hash = text_words.list.join(" ").hash(seed=hasher.seed).to_numpy()
    url_hash = _series(batch.column("url")).fill_null("").hash(seed=hasher.seed).to_numpy()
    columns += [n_chars, pa.array(text_hash, pa.uint64()), pa.array(url_hash, pa.uint64()),
                _fixed_lists(hasher.band_hashes(sig), schema.field("bands").type),
                _fixed_lists(sig, schema.field("signature").type)]
    return pa.Table.from_arrays(columns, schema=schema)


def signature_frame(df: pl.DataFrame, hasher: MinHasher) -> pl.DataFrame:
    """The same for a Polars frame (`doc_id`, `source_key`, `url`, `fetch_time`, `text`)."""
    columns = [c for c in SIGNATURE_INPUT if c in df.columns]
    return cast(pl.DataFrame, pl.from_arrow(signature_table(df.select(columns).to_arrow(), hasher)))
