"""Back from a document to the raw record it came from, using its provenance (source key, format, offsets)."""

from __future__ import annotations

import json

from llm_assets.core.lake import Lake
from llm_assets.core.readers import ReaderSettings, ReadReport, by_name, read_records


def original_record(lake: Lake, key: str, fmt: str, offset: int, skip: int, max_bytes: int = 1 << 20) -> str:
    """The raw record as text: WARC headers, HTTP headers and payload (cut at `max_bytes`), or the source line/row.
    A format with random access (`Format.record_at`) seeks to the record; any other is read up to it."""
    record_at = by_name(fmt).record_at
    if record_at is not None:
        return record_at(lake, key, offset, skip, max_bytes)
    for rec in read_records(lake.open(key), key, ReaderSettings(), ReadReport()):
        if rec.offset == offset:
            return rec.html if rec.html is not None else json.dumps({"url": rec.url, "id": rec.record_id,
                                                                     "text": rec.text}, ensure_ascii=False)
    raise LookupError(f"no record at offset {offset} in {key}")
