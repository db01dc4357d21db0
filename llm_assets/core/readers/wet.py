"""WET: the text Common Crawl extracted, as WARC `conversion` records. A WET file is a WARC file (sniffed and read
as one, `warc.py`); its records come out as `wet` records holding text instead of HTML, found again as WARC records.
Not split: there is nothing to extract, so a share would only re-read the file."""

from __future__ import annotations

from llm_assets.core.readers.base import Format
from llm_assets.core.readers.warc import record_at

FORMAT = Format(name="wet", suffixes=(".warc.wet.gz", ".wet.gz", ".wet"), record_at=record_at)
