"""WET files (`llm_assets.core.readers.wet`): Common Crawl's conversion records come out as text, from one gzip
member for the whole file or one per record."""

from __future__ import annotations

import gzip
import re
from collections import Counter

from llm_assets.core.filters import language_model
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import CC_WET, WHIRLWIND, first_record, gzip_members, intact, read


def test_single_member_wet_yields_its_25_conversion_records_as_text():
    """The CC-MAIN-2016-50 WET is ONE gzip member for the whole file: its 25 conversion records come out as
    text (no HTML to extract), all at offset 0, each `skip` uncompressed bytes into the member, where warcio
    finds the same record.

    Languages by fastText lid.176: 24 English pages and one Italian one (biosmanagement.it, Italian navigation
    and prose: "Chi siamo", "Aree di business"); the data README's "1 fr" is wrong about that page."""
    data = shared("wet", CC_WET).read_bytes()
    assert len(gzip_members(data)) == 1
    records, report = read(data)
    assert len(records) == 25
    assert dict(report.drops) == {"not_response": 1}  # the warcinfo record
    assert report.quarantined == []
    plain = gzip.decompress(data)
    skips = [r.skip for r in records]
    assert skips == sorted(set(skips)) and skips[0] > 0
    for r in records:
        assert (r.fmt, r.offset, r.html, r.charset) == ("wet", 0, None, "utf-8")
        assert r.text and r.payload_bytes >= len(r.text.encode()) - r.text.count("\ufffd") * 3
        assert r.url.startswith("http") and re.match(r"2016-12-\d\dT", r.fetch_time)
        first = first_record(plain, r.skip)
        assert (first.rec_type, first.rec_headers.get_header("WARC-Record-ID")) == ("conversion", r.record_id)

    labels, _ = language_model().predict([r.text.replace("\n", " ") for r in records], k=1)
    languages = [label[0].removeprefix("__label__") for label in labels]
    assert Counter(languages) == {"en": 24, "it": 1}
    assert records[languages.index("it")].url == "http://www.biosmanagement.it/ita/aree-di-business/8/manufacturing"


def test_whirlwind_wet_yields_the_text_of_the_warc_page():
    """The whirlwind WET (gzip per record) holds one conversion record: the text of the page in the WARC."""
    records, report = read(shared("wet", "whirlwind__CC-MAIN-2024-22.warc.wet.gz").read_bytes())
    (page,) = intact(WHIRLWIND)[2].values()
    assert [(r.fmt, r.url) for r in records] == [("wet", page.url)]
    assert page.url == "https://an.wikipedia.org/wiki/Escopete"
    assert "Escopete" in records[0].text and records[0].skip == 0 and records[0].offset > 0
    assert dict(report.drops) == {"not_response": 1} and report.quarantined == []
