"""Stage `documents`: WARC/ARC records -> extracted main text with URL and provenance.

One work unit reads one raw file, streaming, and writes one part.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

import pyarrow as pa

from llm_assets.core.extract import EXTRACTOR_VERSION, extract_html
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.core.units import DropCounter, UnitResult, timed_unit
from llm_assets.core.warc import iter_html_records
from llm_assets.settings import DocumentsSettings

STAGE_VERSION = "1"
BATCH_ROWS = 256

SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("url", pa.string()),
        ("domain", pa.string()),
        ("crawl", pa.string()),
        ("source_key", pa.string()),
        ("record_offset", pa.int64()),
        ("warc_record_id", pa.string()),
        ("fetch_time", pa.string()),
        ("content_type", pa.string()),
        ("charset", pa.string()),
        ("title", pa.string()),
        ("date", pa.string()),
        ("text", pa.string()),
        ("extractor", pa.string()),
    ]
)


def doc_id(source_key: str, record_id: str, offset: int) -> str:
    """Stable across re-runs: the WARC record id where there is one, else the file and offset."""
    identity = record_id or f"{source_key}@{offset}"
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ExtractUnit:
    store: StoreConfig
    settings: DocumentsSettings
    crawl: str
    source: str  # raw/<crawl>/<file>
    size: int
    unit: str
    part: str


@timed_unit
def extract_documents(u: ExtractUnit) -> UnitResult:
    lake = Lake(u.store)
    drops = DropCounter()
    rows_out = 0
    rows: list[dict] = []
    with lake.part_writer(u.part, SCHEMA) as out:
        for rec in iter_html_records(lake.open(u.source), drops, u.settings.max_payload_bytes):
            extracted = extract_html(rec.html, rec.url)
            if extracted is None or len(extracted.text) < u.settings.min_text_chars:
                drops.drop("no_text")
                continue
            rows.append(
                {
                    "doc_id": doc_id(u.source, rec.record_id, rec.offset),
                    "url": rec.url,
                    "domain": (urlsplit(rec.url).hostname or "").lower(),
                    "crawl": u.crawl,
                    "source_key": u.source,
                    "record_offset": rec.offset,
                    "warc_record_id": rec.record_id,
                    "fetch_time": rec.fetch_time,
                    "content_type": rec.content_type,
                    "charset": rec.charset,
                    "title": extracted.title,
                    "date": extracted.date,
                    "text": extracted.text,
                    "extractor": EXTRACTOR_VERSION,
                }
            )
            if len(rows) >= BATCH_ROWS:
                out.write(pa.Table.from_pylist(rows, SCHEMA))
                rows_out += len(rows)
                rows.clear()
        out.write(pa.Table.from_pylist(rows, SCHEMA))
        rows_out += len(rows)
    errors = [f"{u.source}: damaged after the last intact record"] if drops.get("truncated_file") else []
    return UnitResult(
        unit=u.unit,
        source=u.source,
        part=u.part,
        rows_in=rows_out + sum(drops.values()),
        rows_out=rows_out,
        dropped=dict(drops),
        bytes_in=u.size,
        bytes_out=out.bytes,
        errors=errors,
        columns=SCHEMA.names,
    )
