"""Stage `filtered`: language ID and quality rules; every dropped document goes to `rejected/` with its reason.

One work unit filters one `documents` part, batch by batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from llm_assets.core import documents
from llm_assets.core.filters import LanguageFilter, WordCountFilter, apply_filters
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.core.units import DropCounter, UnitResult, timed_unit
from llm_assets.settings import FilteredSettings

STAGE_VERSION = "1"
BATCH_ROWS = 1024

SCHEMA = pa.schema(
    list(documents.SCHEMA) + [("language", pa.string()), ("language_score", pa.float32()), ("n_words", pa.int32())]
)
REJECTED_SCHEMA = pa.schema(list(SCHEMA) + [("reason", pa.string())])


def build_filters(s: FilteredSettings) -> list:
    return [
        LanguageFilter(languages=tuple(s.languages), threshold=s.language_threshold),
        WordCountFilter(min_words=s.min_words, max_words=s.max_words),
    ]


@dataclass(frozen=True)
class FilterUnit:
    store: StoreConfig
    settings: FilteredSettings
    source: str  # the upstream documents part
    unit: str
    part: str
    rejected_part: str


@timed_unit
def filter_documents(u: FilterUnit) -> UnitResult:
    lake = Lake(u.store)
    filters = build_filters(u.settings)
    drops = DropCounter()
    rows_in = 0
    with lake.part_writer(u.part, SCHEMA) as out, lake.part_writer(u.rejected_part, REJECTED_SCHEMA) as rejected:
        for batch in lake.iter_batches(u.source, BATCH_ROWS):
            df = pl.from_arrow(batch)
            rows_in += df.height
            kept, dropped = apply_filters(df, filters)
            out.write(kept)
            rejected.write(dropped)
            for reason, n in dropped["reason"].value_counts().iter_rows():
                drops.drop(reason, n)
    return UnitResult(
        unit=u.unit,
        source=u.source,
        part=u.part,
        rejected_part=u.rejected_part,
        rows_in=rows_in,
        rows_out=out.rows,
        dropped=dict(drops),
        bytes_in=0,
        bytes_out=out.bytes,
        columns=SCHEMA.names,
    )
