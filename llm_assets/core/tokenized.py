"""Stage `tokenized`: token ids per document, EOS appended as the document boundary.

One work unit tokenizes one upstream part, batch by batch, with a parallel batch encoder (`batch_encoder`:
tiktoken's where it gives the tokenizer's ids, else the tokenizer's own); the next batch is encoded (the encoders
release the GIL) while this one is converted and written. With `min_tokens`,
documents with fewer tokens are set aside under `rejected/tokenized/` with the reason `too_few_tokens`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
from pydantic import Field

from llm_assets.core.config import PROJECT_ROOT, Section
from llm_assets.core.lake import Lake, ReadCount
from llm_assets.core.tokenize import batch_encoder, load_tokenizer
from llm_assets.core.units import DropCounter, UnitResult, Warmup, WorkUnit, timed_unit
from llm_assets.core.versions import digest


class TokenizerTraining(Section):
    """A byte-level BPE trained by the `tokenizer` asset on a deterministic sample of deduplicated documents."""

    vocab_size: int = Field(default=32_000, ge=260, description="Tokens in the trained vocabulary.")
    min_frequency: int = Field(default=2, ge=1, description="Occurrences a merge needs in the sample.")
    special_tokens: tuple[str, ...] = Field(default=("<|endoftext|>",), description="Tokens added whole.")
    sample_documents: int = Field(default=100_000, ge=1, description=(
        "The deduplicated documents trained on: those whose doc_id hashes lowest."))
    crawls: tuple[str, ...] = Field(default=(), description="The crawls sampled; empty: every crawl.")


class TokenizedSettings(Section):
    source: Literal["file", "train"] = Field(default="file", description=(
        "`file`: the tokenizer at `tokenizer_path`; `train`: the one the `tokenizer` asset trains."))
    tokenizer_path: Path = Field(default=Path("../shared/data/tokenizers/gpt2"), description=(
        "GPT-2 byte-level BPE as vocab + merges (encoder.json / vocab.bpe), or a `tokenizer.json` file; relative "
        "paths are from the repository."))
    eos_token: str = Field(default="<|endoftext|>", description="Appended after every document.")
    train: TokenizerTraining = Field(default=TokenizerTraining(), description=(
        "`source: train`: the byte-level BPE the `tokenizer` asset trains."))
    min_tokens: int = Field(default=0, ge=0, description=(
        "Documents with fewer tokens (the EOS not counted) are set aside as `too_few_tokens`; 0 keeps every document."))

    def resolved_path(self) -> Path:
        path = self.tokenizer_path
        return path if path.is_absolute() else (PROJECT_ROOT / path).resolve()

    def fingerprint(self) -> str:
        """As every section's, but `min_tokens` at its default of 0 is left out: it joined the section later, and
        lakes tokenized before keep their code version. Any other value changes it."""
        values = self.model_dump(mode="json")
        if not values["min_tokens"]:
            del values["min_tokens"]
        return digest(json.dumps(values, sort_keys=True))


STAGE_VERSION = "2"  # 2: each document keeps its language
TOKENIZER_VERSION = "1"  # the tokenizer's: how text is encoded (the stage's version says what its documents carry)
BATCH_ROWS = 256  # encodings of a batch are held at once (two batches: one encoding, one written): keep it small
TOO_FEW_TOKENS = "too_few_tokens"
# a unit's counts: the documents and tokens (EOS included) it kept per language ("" when a document has none)
DOCUMENTS_COUNT, TOKENS_COUNT = "documents:", "tokens:"
REJECTED_GROUP_ROWS = 16_384


def schema(vocab_size: int) -> pa.Schema:
    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("url", pa.string()),
            ("crawl", pa.string()),
            ("language", pa.string()),  # the filters' (lid.176 label), for figures and release mixes per language
            ("n_tokens", pa.int32()),  # EOS included
            ("tokens", pa.list_(token_type(vocab_size))),
        ]
    )


def token_type(vocab_size: int) -> pa.DataType:
    return pa.uint16() if vocab_size <= 2**16 else pa.uint32()


# What tokenized sets aside: the document, how many tokens it had (its own, without the EOS), why.
REJECTED_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("url", pa.string()),
        ("crawl", pa.string()),
        ("document_tokens", pa.int32()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


def tokenize_batch(batch: pa.RecordBatch | pa.Table, ids: list[list[int]], eos: int, vocab_size: int,
                   min_tokens: int = 0) -> tuple[pa.Table, pa.Table]:
    """-> (kept, rejected): the documents of `batch` (doc_id, url, crawl) with their token ids and EOS, in the
    stage's schema, and those under `min_tokens` in REJECTED_SCHEMA. `ids`: the batch's texts, encoded (the EOS is
    appended to these lists)."""
    n = len(ids)
    lengths = np.fromiter(map(len, ids), np.int64, count=n)  # the documents' own tokens
    for document in ids:
        document.append(eos)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths + 1, out=offsets[1:])
    values_type = token_type(vocab_size)
    # one pass over the ids into a flat buffer, then the list array over it: no per-document arrays
    values = np.fromiter(chain.from_iterable(ids), values_type.to_pandas_dtype(), count=int(offsets[-1]))
    tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, values_type))
    language = batch.column("language") if "language" in batch.schema.names else pa.nulls(n, pa.string())
    table = pa.table({"doc_id": batch.column("doc_id"), "url": batch.column("url"), "crawl": batch.column("crawl"),
                      "language": language, "n_tokens": pa.array(lengths + 1, pa.int32()), "tokens": tokens})
    if not min_tokens or (short := lengths < min_tokens).sum() == 0:
        return table, REJECTED_SCHEMA.empty_table()
    rejected = table.filter(pa.array(short)).select(["doc_id", "url", "crawl"])
    under = lengths[short]
    rejected = rejected.append_column("document_tokens", pa.array(under, pa.int32())) \
        .append_column("reason", pa.array([TOO_FEW_TOKENS] * len(under), pa.string())) \
        .append_column("detail",
                       pa.array([f"{k} tokens, min_tokens {min_tokens}" for k in under.tolist()], pa.string()))
    return table.filter(pa.array(~short)), rejected


def encoded(encoder: Callable[[list[str]], list[list[int]]], batches: Iterator[pa.RecordBatch]
            ) -> Iterator[tuple[pa.RecordBatch, list[list[int]]]]:
    """Each batch with its texts' token ids, the next batch encoded in a thread while the caller uses this one."""
    def encode(batch: pa.RecordBatch) -> list[list[int]]:
        return encoder(batch.column("text").fill_null("").to_pylist())

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode") as pool:
        pending = None
        for batch in batches:
            ahead = (batch, pool.submit(encode, batch))
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = ahead
        if pending is not None:
            yield pending[0], pending[1].result()


@dataclass(frozen=True)
class TokenizeUnit(WorkUnit):  # source: the upstream deduplicated part
    settings: TokenizedSettings
    part: str
    rejected_part: str = ""  # where documents under min_tokens go; "" writes none (they are still counted)

    @property
    def warmup(self) -> Warmup:
        """The tokenizer, loaded once by the pool's fork server rather than by each worker."""
        return Warmup("llm_assets.core.tokenize:warm", str(self.settings.resolved_path()))


@timed_unit
def tokenize_documents(u: TokenizeUnit) -> UnitResult:
    lake = Lake(u.store)
    tok = load_tokenizer(str(u.settings.resolved_path()))
    eos = tok.token_to_id(u.settings.eos_token)
    if eos is None:
        raise ValueError(f"EOS token {u.settings.eos_token!r} is not in the tokenizer's vocabulary")
    vocab_size = tok.get_vocab_size()
    out_schema = schema(vocab_size)
    drops = DropCounter()
    rows_in = 0
    rejected_part = u.rejected_part if u.settings.min_tokens else ""
    fetched = ReadCount()
    languages: Counter[str] = Counter()  # kept documents and tokens per language
    set_aside: list[pa.Table] = []  # small rows (no text, no tokens): written in a few row groups, not one a batch
    with lake.part_writer(u.part, out_schema) as out, _optional_writer(lake, rejected_part) as rejected:
        batches = lake.iter_batches(u.source, BATCH_ROWS, columns=["doc_id", "url", "crawl", "language", "text"],
                                   fetched=fetched)
        for batch, ids in encoded(batch_encoder(str(u.settings.resolved_path())), batches):
            rows_in += batch.num_rows
            kept, dropped = tokenize_batch(batch, ids, eos, vocab_size, u.settings.min_tokens)
            out.write(kept)
            for language, n, tokens in pl.DataFrame(kept.select(["language", "n_tokens"])).group_by("language") \
                    .agg(pl.len(), pl.col("n_tokens").cast(pl.Int64).sum()).iter_rows():
                languages[DOCUMENTS_COUNT + (language or "")] += n
                languages[TOKENS_COUNT + (language or "")] += tokens
            if dropped.num_rows:
                drops.drop(TOO_FEW_TOKENS, dropped.num_rows)
                set_aside.append(dropped)
                if sum(t.num_rows for t in set_aside) >= REJECTED_GROUP_ROWS:
                    rejected.write(pa.concat_tables(set_aside))
                    set_aside.clear()
        if set_aside:
            rejected.write(pa.concat_tables(set_aside))
    return UnitResult(
        unit=u.unit,
        source=u.source,
        part=u.part,
        rejected_part=rejected_part or None,
        rows_in=rows_in,
        rows_out=out.rows,
        dropped=dict(drops),
        counts=dict(languages),
        bytes_in=fetched.bytes,
        bytes_out=out.bytes,
        columns=out_schema.names,
    )


class _NoWriter:
    """Stands in for the rejected part's writer when none is written."""

    rows = 0

    def __enter__(self) -> _NoWriter:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def write(self, data) -> None:
        return None


def _optional_writer(lake: Lake, key: str):
    return lake.part_writer(key, REJECTED_SCHEMA) if key else _NoWriter()
