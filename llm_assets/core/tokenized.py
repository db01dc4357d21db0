"""Stage `tokenized`: token ids per document, EOS appended as the document boundary.

One work unit tokenizes one `filtered` part, batch by batch, with the tokenizer's parallel batch encoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa
from pydantic import Field

from llm_assets.core.config import PROJECT_ROOT, Section
from llm_assets.core.lake import Lake
from llm_assets.core.tokenize import load_tokenizer
from llm_assets.core.units import UnitResult, WorkUnit, timed_unit


class TokenizerTraining(Section):
    """A byte-level BPE trained by the `tokenizer` asset on a deterministic sample of deduplicated documents."""

    vocab_size: int = Field(default=32_000, ge=260)
    min_frequency: int = Field(default=2, ge=1)
    special_tokens: tuple[str, ...] = ("<|endoftext|>",)
    sample_documents: int = Field(default=100_000, ge=1)  # the documents whose doc_id hashes lowest
    crawls: tuple[str, ...] = ()  # empty: every crawl

class TokenizedSettings(Section):
    source: Literal["file", "train"] = "file"  # the tokenizer at tokenizer_path, or one the tokenizer asset trains
    tokenizer_path: Path = Path("../shared/data/tokenizers/gpt2")
    eos_token: str = "<|endoftext|>"
    train: TokenizerTraining = TokenizerTraining()

    def resolved_path(self) -> Path:
        path = self.tokenizer_path
        return path if path.is_absolute() else (PROJECT_ROOT / path).resolve()


STAGE_VERSION = "1"
BATCH_ROWS = 256  # encodings of a batch are held at once: keep it small


def schema(vocab_size: int) -> pa.Schema:
    token_type = pa.uint16() if vocab_size <= 2**16 else pa.uint32()
    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("url", pa.string()),
            ("crawl", pa.string()),
            ("n_tokens", pa.int32()),
            ("tokens", pa.list_(token_type)),
        ]
    )


@dataclass(frozen=True)
class TokenizeUnit(WorkUnit):  # source: the upstream deduplicated part
    settings: TokenizedSettings
    part: str


@timed_unit
def tokenize_documents(u: TokenizeUnit) -> UnitResult:
    lake = Lake(u.store)
    tok = load_tokenizer(str(u.settings.resolved_path()))
    eos = tok.token_to_id(u.settings.eos_token)
    if eos is None:
        raise ValueError(f"EOS token {u.settings.eos_token!r} is not in the tokenizer's vocabulary")
    out_schema = schema(tok.get_vocab_size())
    rows_in = 0
    with lake.part_writer(u.part, out_schema) as out:
        for batch in lake.iter_batches(u.source, BATCH_ROWS, columns=["doc_id", "url", "crawl", "text"]):
            rows_in += batch.num_rows
            # encode_batch_fast skips offsets and alignments: the same ids at about twice the speed
            texts = batch.column("text").to_pylist()
            ids = [e.ids + [eos] for e in tok.encode_batch_fast(texts, add_special_tokens=False)]
            out.write(
                pa.table(
                    {
                        "doc_id": batch.column("doc_id"),
                        "url": batch.column("url"),
                        "crawl": batch.column("crawl"),
                        "n_tokens": pa.array([len(x) for x in ids], pa.int32()),
                        "tokens": pa.array(ids, out_schema.field("tokens").type),
                    }
                )
            )
    return UnitResult(
        unit=u.unit,
        source=u.source,
        part=u.part,
        rows_in=rows_in,
        rows_out=out.rows,
        bytes_out=out.bytes,
        columns=out_schema.names,
    )
