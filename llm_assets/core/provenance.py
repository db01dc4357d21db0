"""Back from a document to the raw record it came from, using its provenance (source key, format, offsets)."""

from __future__ import annotations

import io
import json

from warcio.archiveiterator import ArchiveIterator

from llm_assets.core.lake import Lake
from llm_assets.core.readers import CHUNK, GZIP_MAGIC, _Member, _Source, _SourceIO


def _skip(stream, n: int) -> None:
    while n > 0:
        got = stream.read(min(n, CHUNK))
        if not got:
            raise EOFError("the source ends before the record: it changed since the document was extracted")
        n -= len(got)


def original_record(lake: Lake, key: str, fmt: str, offset: int, skip: int, max_bytes: int = 1 << 20) -> str:
    """The raw record as text: WARC headers, HTTP headers and payload (cut at `max_bytes`), or the source line/row."""
    if fmt in ("warc", "arc", "wet"):
        body = lake.open(key, start=offset)
        src = _Source(body)
        raw: _Member | _SourceIO = _Member(src) if src.peek(3) == GZIP_MAGIC else _SourceIO(src)
        stream = io.BufferedReader(raw, CHUNK)
        _skip(stream, skip)
        record = next(iter(ArchiveIterator(stream, arc2warc=True)))
        parts = [record.rec_headers.to_str()]
        if record.http_headers is not None:
            parts.append(record.http_headers.to_str())
        payload = record.content_stream().read(max_bytes + 1)
        parts.append(payload[:max_bytes].decode("utf-8", errors="replace") + ("\n[…]" if len(payload) > max_bytes else ""))
        return "".join(parts)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with lake.open_arrow(key) as f:
            table = pq.read_table(f)
        return json.dumps(table.slice(offset, 1).to_pylist()[0], ensure_ascii=False, default=str)
    # jsonl / json / html: the decompressed source, from the record on
    from llm_assets.core.readers import ReaderSettings, ReadReport, read_records

    for rec in read_records(lake.open(key), key, ReaderSettings(), ReadReport()):
        if rec.offset == offset:
            return rec.html if rec.html is not None else json.dumps({"url": rec.url, "id": rec.record_id,
                                                                     "text": rec.text}, ensure_ascii=False)
    raise LookupError(f"no record at offset {offset} in {key}")

