"""Stage `image_text_pairs`: images of the crawl's HTML pages with the text that describes them.

One work unit reads one raw file with the same reader as `documents` (no main-text extraction, so it is cheap)
and writes one part. Rows are pairs; the unit's accounting is in pages: pages in = pages with pairs + pages
without (`no_image_pairs`) + records the reader skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.documents import DocumentsSettings, doc_id, iter_source, reader_settings
from llm_assets.core.images import IMAGE_PAIRS_SCHEMA, ImagePairSettings, extract_image_pairs
from llm_assets.core.lake import Lake
from llm_assets.core.readers import ReadReport
from llm_assets.core.units import UnitResult, WorkUnit, timed_unit


class ImagePairsSettings(Section):
    min_text_chars: int = Field(default=5, ge=0, description=(
        "Characters: a pair needs alt, caption or nearby text at least this long."))
    nearby_chars: int = Field(default=300, ge=0, description="Characters: nearby text is cut to this length.")
    min_side_px: int = Field(default=32, ge=0, description=(
        "Pixels: images declared smaller than this on a side (spacers, icons) are dropped."))
    max_images_per_page: int = Field(default=100, ge=1, description="Pairs kept per page at most.")


STAGE_VERSION = "1"
BATCH_ROWS = 2048

SCHEMA = pa.schema(list(IMAGE_PAIRS_SCHEMA) + [("crawl", pa.string()), ("source_key", pa.string()),
                                               ("record_offset", pa.int64())])


@dataclass(frozen=True)
class ImagePairsUnit(WorkUnit):  # source: raw/<crawl>/<file>
    reader: DocumentsSettings
    settings: ImagePairsSettings
    crawl: str
    size: int
    part: str


@timed_unit
def extract_image_text_pairs(u: ImagePairsUnit) -> UnitResult:
    lake = Lake(u.store)
    report = ReadReport()
    rules = ImagePairSettings(**u.settings.model_dump())
    rows: list[dict] = []
    pages_with_pairs = 0
    with lake.part_writer(u.part, SCHEMA) as out:
        for rec in iter_source(lake, u.source, reader_settings(u.reader), report):
            if rec.html is None:
                report.skip("not_html")
                continue
            page = doc_id(u.source, rec.record_id, rec.offset, rec.skip)
            pairs = extract_image_pairs(rec.html, rec.url, page, rules)
            if not pairs:
                report.skip("no_image_pairs")
                continue
            pages_with_pairs += 1
            rows += [{**p, "crawl": u.crawl, "source_key": u.source, "record_offset": rec.offset} for p in pairs]
            if len(rows) >= BATCH_ROWS:
                out.write(pa.Table.from_pylist(rows, SCHEMA))
                rows.clear()
        out.write(pa.Table.from_pylist(rows, SCHEMA))
    return UnitResult(
        unit=u.unit,
        source=u.source,
        part=u.part,
        rows_in=pages_with_pairs + sum(report.drops.values()),
        rows_out=out.rows,
        dropped=dict(report.drops),
        bytes_in=u.size,
        bytes_out=out.bytes,
        errors=list(report.errors),
        columns=SCHEMA.names,
    )
