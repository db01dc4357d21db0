"""JSON Lines: one JSON object per line, its text in `text_field` (Dolma, FineWeb and most text dumps).

`json_record` (an object -> a record) is shared with the JSON and Parquet formats, which hold the same objects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

from llm_assets.core.readers.base import Format, ReaderSettings, ReadReport, SourceRecord
from llm_assets.core.readers.compression import CHUNK


def json_record(obj, fmt: str, offset: int, settings: ReaderSettings, report: ReadReport) -> SourceRecord | None:
    if not isinstance(obj, dict):
        report.quarantine("corrupt_json", offset, detail="not a JSON object")
        return None
    text = obj.get(settings.text_field)
    if not isinstance(text, str):
        report.quarantine("missing_text", offset, detail=f"no string field {settings.text_field!r}")
        return None
    url = obj.get(settings.url_field)
    if not isinstance(url, str):
        meta = obj.get("metadata")
        url = meta.get("url", "") if isinstance(meta, dict) else ""
    return SourceRecord(fmt=fmt, offset=offset, url=url or "", record_id=str(obj.get(settings.id_field) or ""),
                        content_type="application/json", charset="utf-8", text=text, payload_bytes=len(text))


def read_jsonl(stream: BinaryIO, _name: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    """One record per line; `offset` is the line's byte offset. A line over max_payload_bytes (newline not
    counted) is quarantined as `oversized` and skipped in bounded chunks: a JSON line is read and parsed whole, and
    a parsed line takes many times its size in memory."""
    cap = settings.max_payload_bytes
    offset = 0
    while line := stream.readline(cap + 1):
        start, offset = offset, offset + len(line)
        if len(line) > cap and not line.endswith(b"\n"):
            offset += _skip_line(stream)
            report.quarantine("oversized", start, detail=f"JSON line of {offset - start} bytes, over {cap}")
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            report.quarantine("corrupt_json", start, detail=str(e))
            continue
        if (rec := json_record(obj, "jsonl", start, settings, report)) is not None:
            yield rec


def _skip_line(stream: BinaryIO) -> int:
    """Read on to the end of the current line, a chunk at a time; the number of bytes skipped."""
    skipped = 0
    while chunk := stream.readline(CHUNK):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


def _sniff(head: bytes) -> bool:
    return head.startswith(b"{")


FORMAT = Format(name="jsonl", suffixes=(".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson", ".ndjson.gz"), sniff=_sniff,
                read=read_jsonl)
