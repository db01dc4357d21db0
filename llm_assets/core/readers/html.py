"""HTML: one loose page per file, named by its file name, extracted like a WARC response."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from llm_assets.core.charset import decode_html
from llm_assets.core.readers.base import Format, ReaderSettings, ReadReport, SourceRecord


def read_html(stream: BinaryIO, name: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    payload = stream.read(settings.max_payload_bytes + 1)
    if len(payload) > settings.max_payload_bytes:
        report.quarantine("oversized", 0, detail=f"HTML file over {settings.max_payload_bytes} bytes")
        return
    html, charset = decode_html(payload, "")
    yield SourceRecord(fmt="html", offset=0, url=name, content_type="text/html", charset=charset, html=html,
                       payload_bytes=len(payload))


_OPENINGS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<!--", b"<meta", b"<title")


def _sniff(head: bytes) -> bool:
    lower = head[:2048].lower()
    return lower.startswith(_OPENINGS) or (
        lower.startswith(b"<") and (b"<html" in lower or b"<body" in lower or b"<div" in lower or b"<p>" in lower))


FORMAT = Format(name="html", suffixes=(".html", ".htm", ".html.gz"), sniff=_sniff, read=read_html)
