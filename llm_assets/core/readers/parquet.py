"""Parquet: a table with a text column, read batch by batch with random access (a seekable file, not a stream),
told by its raw first bytes; a record is found again by its row number."""

from __future__ import annotations

import json
from collections.abc import Iterator

from llm_assets.core.readers.base import Format, ReaderSettings, ReadReport, RecordSource, SourceRecord, UnreadableFile
from llm_assets.core.readers.jsonl import json_record

PARQUET_MAGIC = b"PAR1"


def read_parquet(file, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    """A Parquet file (random access), batch by batch; `offset` is the row number. A text over max_payload_bytes
    is quarantined as `oversized` before it becomes a Python string (the batch itself is in memory already)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(file)
    names = set(pf.schema_arrow.names)
    field = settings.text_field
    if field not in names:
        raise UnreadableFile(f"Parquet file has no column {field!r} (settings: documents.text_field)")
    text_type = pf.schema_arrow.field(field).type
    measurable = pa.types.is_string(text_type) or pa.types.is_large_string(text_type)
    columns = [c for c in (field, settings.url_field, settings.id_field) if c in names]
    cap = settings.max_payload_bytes
    row = 0
    for batch in pf.iter_batches(batch_size=1024, columns=columns):
        oversized = [False] * batch.num_rows
        if measurable:
            texts = batch.column(field)
            over = pc.fill_null(pc.greater(pc.binary_length(texts), cap), False)
            if pc.any(over).as_py():
                oversized = over.to_pylist()
                batch = batch.set_column(batch.schema.get_field_index(field), field,
                                         pc.if_else(over, pa.scalar(None, texts.type), texts))
        for obj, too_big in zip(batch.to_pylist(), oversized, strict=True):
            if too_big:
                report.quarantine("oversized", row, detail=f"text over {cap} bytes")
            elif (rec := json_record(obj, "parquet", row, settings, report)) is not None:
                yield rec
            row += 1


def record_at(lake: RecordSource, key: str, offset: int, skip: int, max_bytes: int) -> str:
    """Row `offset` of the file, as JSON."""
    import pyarrow.parquet as pq

    with lake.open_arrow(key) as f:
        table = pq.read_table(f)
    return json.dumps(table.slice(offset, 1).to_pylist()[0], ensure_ascii=False, default=str)


FORMAT = Format(name="parquet", suffixes=(".parquet",), magic=PARQUET_MAGIC, read_file=read_parquet,
                record_at=record_at)
