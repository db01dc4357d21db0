"""Stage `documents`: raw crawl files -> documents with their text, URL and provenance.

One work unit reads one raw file, streaming, whatever its format (see `readers`), extracts the main text of HTML
records, and writes one part. Bad records are quarantined under `rejected/` with their reason, and so are the
responses set aside for what they hold (`non_2xx`, `non_html`, `no_text`), with their URL and doc id: the rejected
part is indexed like the documents part, so `why URL` finds a page that never became a document.

A large WARC or ARC file is split into shares (`extract_units`), so that the partition's workers extract one file
together: each share is a byte range of the file, and its unit reads the records of the gzip members that start in
that range, fetched from the store by a ranged GET that starts at the range (`readers.read_member_range`): no share
decompresses another's bytes. That needs the file to be gzip per record (`readers.member_layout`, checked on its
first member); any other file (one gzip stream, zstd, uncompressed) is read whole by every share, which extracts
every n-th HTML record. The shares are a function of the file's name and size alone, never of the number of workers.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Literal
from urllib.parse import urlsplit

import polars as pl
import pyarrow as pa
from pydantic import Field

from llm_assets.core.collapse import Collapse, CollapseWindow
from llm_assets.core.config import Section
from llm_assets.core.errors import SourceChanged, is_store_error
from llm_assets.core.extract import (
    DEFAULT_PRESET,
    ROUTED,
    ExtractionTimeout,
    Preset,
    Routed,
    Router,
    Routing,
    extract_html,
)
from llm_assets.core.lake import Lake, PartWriter
from llm_assets.core.policy_files import CAPTURE_SCHEMA, captures_frame, meta_reservation
from llm_assets.core.readers import (
    CHUNK,
    LOOKAHEAD,
    ByteStream,
    ReaderSettings,
    ReadReport,
    SourceRecord,
    UnreadableFile,
    format_named,
    member_layout,
    random_access,
    read_member_range,
    read_records,
)
from llm_assets.core.takedowns import write_id_index
from llm_assets.core.units import UnitResult, Warmup, WorkUnit, timed_unit


class DocumentsSettings(Section):
    extractor: Literal["routed", "trafilatura", "resiliparse", "trafilatura_fast"] = Field(
        default="routed", description=(
            "HTML to main text: `routed` (`routing.primary` for most pages, `routing.fast` for the few that would "
            "cost most of its time), or one extractor for every page: `trafilatura` (FineWeb's settings), "
            "`trafilatura_fast` or `resiliparse`. A run may override it."))
    routing: Routing = Field(default=Routing(), description=(
        "`extractor: routed`: which pages go to the fast extractor."))
    trafilatura_preset: Preset = Field(default=DEFAULT_PRESET, description=(
        "trafilatura's options that change the text (`extract.PRESETS`): `fineweb` (favor_precision, no comments: "
        "FineWeb's), `trafilatura` (trafilatura's own defaults: comments kept) or `recall` (favor_recall). `fineweb` "
        "by default: on the five public sets of `make bench-extraction-quality` its main-text F1 is the best mean "
        "(0.942 against 0.937 and 0.934), best on the two news sets by up to 0.03 and within 0.007 of the best "
        "preset on the other three, and a training corpus pays more for boilerplate kept than for a tail lost; "
        "`trafilatura` suits crawls whose wanted text includes comments and long tails (its recall is 0.007-0.023 "
        "higher on each of the five sets, its precision 0.006-0.070 lower)."))
    collapse: Collapse = Field(default=Collapse(), description=(
        "Many distinct pages of one host in a work unit that extract to one identical text (a shop's product pages "
        "all reduced to its sidebar) are extracted again by the other extractor: trafilatura's pages by resiliparse, "
        "resiliparse's by `routing.primary` (by trafilatura when not routed). The `extractor` column says `(routed: "
        "collapse)` and `pages_routed_by_reason` counts them; a page in which the other extractor finds no text keeps "
        "its first one. Which pages collapse depends on the unit's pages and their order only, never on timing."))
    max_payload_bytes: int = Field(default=5_000_000, gt=0, description=(
        "Bytes: a larger record (an HTML or WET payload, a JSON line or array element, a Parquet text) is quarantined"
        " as `oversized` without being held whole."))
    # CPU seconds of the extracting thread per page, so that other processes' load does not count. CPU time still
    # grows with contention for caches and memory (the slowest shared page: 2.2 CPU-s on a quiet machine, 4.9 with
    # the other core busy), hence far above it.
    extract_timeout_s: float = Field(default=30.0, gt=0, description=(
        "Per-page extraction limit in CPU seconds of the extracting thread (`extraction_timeout`; routed: the fast "
        "extractor's), so other processes' load does not count. Far above the slowest real page (2.2 CPU-s quiet, 4.9"
        " with the other core busy)."))
    max_html_chars: int = Field(default=2_000_000, gt=0, description=(
        "Characters: HTML is cut to this length before parsing."))
    min_text_chars: int = Field(default=1, ge=0, description=(
        "Characters: documents whose extracted text is shorter are dropped (`no_text`)."))
    text_field: str = Field(default="text", description=(
        "JSON Lines / JSON / Parquet sources: the field holding the text."))
    url_field: str = Field(default="url", description="JSON Lines / JSON / Parquet sources: the field holding the URL.")
    id_field: str = Field(default="id", description=(
        "JSON Lines / JSON / Parquet sources: the field holding the source's own id."))


# 3: CPU-time extraction limit; JSON, JSON Lines and Parquet records capped. 4: records set aside for their content
# (no text, not HTML, an error status) kept in the rejected part by URL and doc id, and indexed. 5: a gzip-per-record
# WARC/ARC's shares are byte ranges (a share's part holds other records than before); routed extraction, the
# `extractor` column names the extractor that made each document and why it was routed to it. 6: pages of a host
# that collapse to one text are extracted again by the other extractor (`collapse`). 7: `reservation`, and the policy
# files (robots.txt, tdmrep.json, ai.txt) kept beside the part as opt-out evidence.
STAGE_VERSION = "7"
BATCH_ROWS = 256

SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("url", pa.string()),
        ("domain", pa.string()),
        ("crawl", pa.string()),
        ("source_key", pa.string()),
        ("source_format", pa.string()),
        ("record_offset", pa.int64()),  # compressed offset of the record's gzip member (or of the record)
        ("record_skip", pa.int64()),  # uncompressed bytes from record_offset to the record; 0 for gzip per record
        ("warc_record_id", pa.string()),
        ("fetch_time", pa.string()),
        ("content_type", pa.string()),
        ("charset", pa.string()),
        ("title", pa.string()),
        ("date", pa.string()),
        ("text", pa.string()),
        ("extractor", pa.string()),
        # the response's own reservation of TDM rights (JSON, `policy_files`): its headers', else its <meta> tags'
        ("reservation", pa.string()),
    ]
)

REJECTED_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),  # the id the record would have had (set aside records; null for damaged bytes)
        ("source_key", pa.string()),
        ("record_offset", pa.int64()),
        ("record_skip", pa.int64()),
        ("url", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


def doc_id(source_key: str, record_id: str, offset: int, skip: int = 0) -> str:
    """Stable across re-runs: the WARC record id where there is one, else the file and position."""
    identity = record_id if record_id.startswith("<urn:") else f"{source_key}@{offset}+{skip}#{record_id}"
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


# A WARC or ARC file gets one share per SHARE_BYTES (compressed), at most MAX_SHARES: a file that is not gzip per
# record is read whole by every share (~2% of the extraction's CPU each), so a huge file is not split further.
SHARE_BYTES = 512 * 1024
MAX_SHARES = 8


@dataclass(frozen=True)
class ExtractUnit(WorkUnit):  # source: raw/<crawl>/<file>
    settings: DocumentsSettings
    crawl: str
    size: int
    part: str
    rejected_part: str = ""
    extractor: str = ""  # a run's override of settings.extractor
    # This unit reads the records of the gzip members that start in the byte range [offset, offset + size) of the
    # file. A file that cannot be read from a member on: the HTML records i (in file order) with
    # i % shares == share; share 0 also keeps the records that need no extraction and accounts for everything the
    # reader passed over or quarantined.
    share: int = 0
    shares: int = 1
    offset: int = 0

    @property
    def effective_extractor(self) -> str:
        return self.extractor or self.settings.extractor

    @property
    def warmup(self) -> Warmup:
        """The reader's and the extractor's libraries, imported and run once by the pool's fork server rather than
        by each worker on its first page."""
        routed = self.effective_extractor == ROUTED
        routing = self.settings.routing
        return Warmup("llm_assets.core.documents:warm",
                      f"{routing.primary},{routing.fast}" if routed else self.effective_extractor)

    def takes(self, html_index: int) -> bool:
        return html_index % self.shares == self.share


_WARM_PAGE = ("<html><head><title>t</title><meta charset='utf-8'></head><body><article><h1>t</h1>"
              + "<p>A paragraph of a page, long enough to be kept as its main text by every extractor.</p>" * 8
              + "</article></body></html>")


def warm(extractors: str) -> None:
    """Import what reading WARC files and extracting pages with each of `extractors` ("trafilatura,resiliparse":
    routed extraction runs both) loads on first use."""
    from warcio.archiveiterator import ArchiveIterator  # noqa: F401 - imported where used

    from llm_assets.core.charset import decode_html

    decode_html(_WARM_PAGE.encode(), "text/html")
    for extractor in extractors.split(","):
        extract_html(_WARM_PAGE, "http://example.com/", extractor=extractor)


def shares_of(key: str, size: int) -> int:
    """How many units extract a raw file: by its name and size only, so the same file always gives the same units.
    Files of formats that hold text already (WET, JSON, Parquet) are one unit: a share would re-read them for
    nothing."""
    fmt = format_named(key)
    if fmt is None or not fmt.splits:
        return 1
    return max(1, min(MAX_SHARES, -(-size // SHARE_BYTES)))


def extract_units(store, settings: DocumentsSettings, crawl: str, shard: str, key: str, size: int, etag: str,
                  code: str, extractor: str, prefix: str = "") -> list[ExtractUnit]:
    """The units that turn one raw file into documents: one, or `shares_of` for a large WARC/ARC file. A file that
    is one unit keeps the id it had before files were split. `prefix`: where their parts go, before the zones
    (`lake/`, `rejected/`): "" for the stage, a scratch prefix for a preview."""
    from llm_assets.core.lake import part_key
    from llm_assets.core.units import unit_id

    n = shares_of(key, size)
    units = []
    for share in range(n):
        unit = unit_id("documents", code, extractor, key, etag, *([f"share {share}/{n}"] if n > 1 else []))
        start = size * share // n
        units.append(ExtractUnit(store=store, settings=settings, crawl=crawl, source=key,
                                 size=size * (share + 1) // n - start, offset=start, unit=unit,
                                 part=part_key("documents", crawl, shard, unit, zone=prefix + "lake"),
                                 rejected_part=part_key("documents", crawl, shard, unit, zone=prefix + "rejected"),
                                 extractor=extractor, share=share, shares=n))
    return units


def reader_settings(s: DocumentsSettings) -> ReaderSettings:
    return ReaderSettings(max_payload_bytes=s.max_payload_bytes, text_field=s.text_field, url_field=s.url_field,
                          id_field=s.id_field)


def iter_source(lake: Lake, key: str, settings: ReaderSettings, report: ReadReport):
    """Records of one raw object, streamed (a format that needs random access, Parquet, read from a seekable file). A
    file that is no known format is quarantined as `unreadable_file` and named in `report.errors`; it yields nothing."""
    def records():
        body = lake.open(key)
        head = body.read(4)
        if (fmt := random_access(head)) is not None and fmt.read_file is not None:
            body.close()
            with lake.open_arrow(key) as f:
                yield from fmt.read_file(f, settings, report)
            return
        yield from read_records(_Prepend(head, body), key, settings, report)

    return _guarded(key, report, records())


def share_records(open_at: Callable[[int], ByteStream], key: str, u: ExtractUnit, settings: ReaderSettings,
                  report: ReadReport):
    """The records share `u` of a split WARC/ARC file turns into documents, its problems counted into `report`.
    `open_at(offset)`: the file's bytes from `offset` on (a ranged GET). A gzip-per-record file: the members that
    start in the share's byte range, every record of them. Any other: the whole file is read, and the share takes
    its part of the HTML records (`_share`); only share 0 counts what the reader passed over."""
    body = open_at(0)
    head = _read_up_to(body, CHUNK)  # a gzip-per-record file's first member (warcinfo) is small
    fmt = member_layout(head, whole=len(head) < CHUNK)
    if fmt is None and len(head) == CHUNK:
        head += _read_up_to(body, LOOKAHEAD - CHUNK)
        fmt = member_layout(head, whole=len(head) < LOOKAHEAD)
    if fmt is None:
        reader_report = report if u.share == 0 else ReadReport(keep_set_aside=False)
        return _share(u, _guarded(key, reader_report, read_records(_Prepend(head, body), key, settings,
                                                                   reader_report)))
    if u.offset:
        _close(body)
        version = getattr(body, "etag", None)
        body = open_at(u.offset)
        if version is not None and getattr(body, "etag", version) != version:  # both reads must see one version
            raise SourceChanged(f"{key} was replaced while it was being read")
    return _guarded(key, report, read_member_range(body if u.offset else _Prepend(head, body), u.offset,
                                                   u.offset + u.size, fmt, settings, report))


def _read_up_to(body: ByteStream, n: int) -> bytes:
    chunks, got = [], 0
    while got < n and (chunk := body.read(n - got)):
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _close(body: ByteStream) -> None:
    if (close := getattr(body, "close", None)) is not None:
        close()


def _guarded(key: str, report: ReadReport, records):
    """`records`, with the failures of a file's bytes quarantined (store errors raised)."""
    try:
        yield from records
    except UnreadableFile as e:
        report.quarantine("unreadable_file", 0, detail=str(e))
        report.errors.append(f"{key}: unreadable: {e}")
    except Exception as e:  # noqa: BLE001 - bytes that crash a reader cost their file's rest, not the partition
        if is_store_error(e):
            raise
        report.quarantine("unreadable_file", 0, detail=f"reader failed: {type(e).__name__}: {e}")
        report.errors.append(f"{key}: the reader failed; records before it are kept, the rest of the file is "
                             f"quarantined: {type(e).__name__}: {e}")


class _SetAside:
    """The unit's rejected part: quarantined records and those set aside for their content, written a batch at a
    time, and the index of their URLs and doc ids (the one a documents part gets), so `why URL` finds them."""

    def __init__(self, u: ExtractUnit):
        self.u = u
        self.ids: dict[str, list[str | None]] = {"doc_id": [], "url": [], "domain": []}
        self.out: PartWriter | None = None

    def writer(self, lake: Lake):
        if not self.u.rejected_part:
            return nullcontext()
        self.out = lake.part_writer(self.u.rejected_part, REJECTED_SCHEMA)
        return self.out

    def drain(self, report: ReadReport, final: bool = False) -> None:
        if len(report.set_aside_records) < BATCH_ROWS and not final:
            return
        rows = [{"source_key": self.u.source, "doc_id": doc_id(self.u.source, r.pop("record_id"), r["record_offset"],
                                                                r["record_skip"]), **r}
                for r in report.set_aside_records]
        report.set_aside_records.clear()
        if final:  # damaged records, last: they are few (capped) and have no id
            rows += [{"source_key": self.u.source, "doc_id": None, **q} for q in report.quarantined]
        if self.out is None or not rows:
            return
        self.out.write(pa.Table.from_pylist(rows, REJECTED_SCHEMA))
        for row in rows:
            self.ids["doc_id"].append(row["doc_id"])
            self.ids["url"].append(row["url"] or None)
            self.ids["domain"].append(_domain(row["url"]) or None)

    def index(self, lake: Lake) -> None:
        if self.out is not None:
            write_id_index(lake, self.u.rejected_part,
                           pl.DataFrame(self.ids, schema=dict.fromkeys(self.ids, pl.String)))


def _domain(url: str) -> str:
    return (urlsplit(url).hostname or "").lower() if "://" in url else ""


class _Prepend:
    """A stream with bytes already read put back in front."""

    def __init__(self, head: bytes, body):
        self.head, self.body = head, body

    def read(self, n: int = -1) -> bytes:
        if self.head:
            data, self.head = self.head[:n] if n >= 0 else self.head, self.head[n:] if n >= 0 else b""
            more = self.body.read(n - len(data)) if n < 0 or len(data) < n else b""
            return data + (more or b"")
        return self.body.read(n) if n >= 0 else self.body.read()


# UnitResult.counts keys: HTML pages per extractor that made them, and pages routed per reason (to the fast one, or
# for `collapse` to the other one)
EXTRACTED_BY = "extracted_by/"
RESERVED = "reserved/"  # + policy kind: documents carrying their own reservation of TDM rights
POLICY = "policy"  # the side part of a unit's policy files
ROUTED_FOR = "routed/"
COLLAPSE = "collapse"


class PageExtractor:
    """One unit's HTML extraction: the unit's extractor for every page, or routing (`extract.Router`: a host's
    overruns count within the unit), and collapsed pages extracted again; the pages each extractor made and those
    routed per reason counted as they are finally written."""

    def __init__(self, settings: DocumentsSettings, extractor: str):
        self.settings, self.extractor = settings, extractor
        self.router = Router(settings.routing, settings.trafilatura_preset) if extractor == ROUTED else None
        self.counts: Counter[str] = Counter()

    def __call__(self, html: str, url: str | None) -> Routed:
        """Raises ExtractionTimeout when the page passes `extract_timeout_s` (routed: with the fast extractor)."""
        s = self.settings
        if self.router is not None:
            routed = self.router.extract(html, url, timeout_s=s.extract_timeout_s, max_chars=s.max_html_chars)
        else:
            routed = Routed(extract_html(html, url, extractor=self.extractor, timeout_s=s.extract_timeout_s,
                                         max_chars=s.max_html_chars, preset=s.trafilatura_preset), self.extractor,
                            preset=s.trafilatura_preset)
        self._count(routed, 1)
        return routed

    def again(self, html: str, url: str | None, first: Routed) -> Routed:
        """A collapsed page (see `Collapse`) extracted by the other extractor than `first`'s, reason `collapse`, and
        counted instead of `first`; `first` when the other gives no text or goes over its CPU limit."""
        s = self.settings
        other, timeout_s = self._other(first.extractor)
        try:
            result = extract_html(html, url, other, timeout_s=timeout_s, max_chars=s.max_html_chars,
                                  preset=s.trafilatura_preset)
        except ExtractionTimeout:
            return first
        if result is None or len(result.text) < s.min_text_chars:
            return first  # the collapsed text is still the page's: it is not dropped for a failed second try
        again = Routed(result, other, COLLAPSE, preset=s.trafilatura_preset)
        self._count(first, -1)
        self._count(again, 1)
        return again

    def _other(self, made_by: str) -> tuple[str, float]:
        """The extractor that takes a collapsed page over from `made_by`, and its CPU limit (routed: the primary
        extractor's budget, as for any page)."""
        s = self.settings
        if made_by != "resiliparse":
            return "resiliparse", s.extract_timeout_s
        if self.router is None:
            return "trafilatura", s.extract_timeout_s
        return s.routing.primary, min(s.extract_timeout_s, s.routing.budget_s or s.extract_timeout_s)

    def _count(self, routed: Routed, n: int) -> None:
        for key in (EXTRACTED_BY + routed.extractor, *([ROUTED_FOR + routed.reason] if routed.reason else [])):
            self.counts[key] += n
            if not self.counts[key]:
                del self.counts[key]


@dataclass
class _Page:
    """A document on its way out of its unit and, when its text was extracted from HTML, that HTML and the
    extraction, so that the page can be extracted again if it turns out to have collapsed."""

    row: dict
    html: str | None = None
    routed: Routed | None = None

    def hold(self, window: CollapseWindow[_Page]) -> list[tuple[_Page, bool]]:
        extracted = self.row["text"] if self.html is not None else None
        return window.add(self, self.row["domain"], self.row["url"], extracted, len(self.html or ""))

    def extract_again(self, extract: PageExtractor) -> None:
        if self.html is None or self.routed is None:
            return
        routed = extract.again(self.html, self.row["url"], self.routed)
        if routed is not self.routed and routed.result is not None:
            self.row.update(text=routed.result.text, title=routed.result.title, date=routed.result.date,
                            extractor=routed.label)


def _document(u: ExtractUnit, rec: SourceRecord, report: ReadReport, extract: PageExtractor) -> dict | None:
    """The row a record becomes, as first extracted; None when it is set aside or quarantined (into `report`)."""
    page = _page(u, rec, report, extract)
    return None if page is None else page.row


def _page(u: ExtractUnit, rec: SourceRecord, report: ReadReport, extract: PageExtractor) -> _Page | None:
    s = u.settings
    routed: Routed | None = None
    title = date = None
    text = rec.text
    extractor = rec.fmt  # text a WET, JSON or Parquet source already holds
    if rec.html is not None:
        try:
            routed = extract(rec.html, rec.url)
        except ExtractionTimeout:
            report.quarantine("extraction_timeout", rec.offset, rec.skip, rec.url,
                              f"over {s.extract_timeout_s} CPU seconds")
            return None
        extractor = routed.label
        if routed.result is not None:
            text, title, date = routed.result.text, routed.result.title, routed.result.date
    if not text or len(text) < s.min_text_chars:
        report.set_aside("no_text", rec.offset, rec.skip, rec.url, rec.record_id,
                         f"{len(text)} characters of text, fewer than min_text_chars {s.min_text_chars}" if text
                         else f"no main text ({extractor})")
        return None
    row = {
        "doc_id": doc_id(u.source, rec.record_id, rec.offset, rec.skip),
        "url": rec.url,
        "domain": _domain(rec.url),
        "crawl": u.crawl,
        "source_key": u.source,
        "source_format": rec.fmt,
        "record_offset": rec.offset,
        "record_skip": rec.skip,
        "warc_record_id": rec.record_id,
        "fetch_time": rec.fetch_time,
        "content_type": rec.content_type,
        "charset": rec.charset,
        "title": title,
        "date": date,
        "text": text,
        "extractor": extractor,
        "reservation": rec.reservation or (meta_reservation(rec.html) if rec.html is not None else None),
    }
    return _Page(row) if rec.html is None else _Page(row, rec.html[:s.max_html_chars], routed)


def _share(u: ExtractUnit, records):
    """The records this unit turns into documents: its share of the HTML records, and (the first share) the rest.
    The reader of a share other than the first counts into a report that is discarded: the first share counts
    and quarantines what the reader passed over, once for the file."""
    html_index = -1
    for rec in records:
        if rec.html is not None:
            html_index += 1
            if u.takes(html_index):
                yield rec
        elif u.share == 0:
            yield rec


@timed_unit
def extract_documents(u: ExtractUnit) -> UnitResult:
    lake = Lake(u.store)
    report = ReadReport()
    rows: list[dict] = []
    ids: dict[str, list[str]] = {"doc_id": [], "url": [], "domain": []}
    aside = _SetAside(u)
    extract = PageExtractor(u.settings, u.effective_extractor)
    window: CollapseWindow[_Page] = CollapseWindow(u.settings.collapse)
    with lake.part_writer(u.part, SCHEMA) as out, aside.writer(lake):

        def write(released: list[tuple[_Page, bool]]) -> None:
            for page, collapsed in released:
                if collapsed:
                    page.extract_again(extract)
                rows.append(page.row)
                if page.row["reservation"]:
                    extract.counts[RESERVED + json.loads(page.row["reservation"])["kind"]] += 1
                for column, values in ids.items():
                    values.append(page.row[column])
                if len(rows) >= BATCH_ROWS:
                    out.write(pa.Table.from_pylist(rows, SCHEMA))
                    rows.clear()

        settings = reader_settings(u.settings)
        records = iter_source(lake, u.source, settings, report) if u.shares == 1 else \
            share_records(lambda offset: lake.open(u.source, offset), u.source, u, settings, report)
        for rec in records:
            if (page := _page(u, rec, report, extract)) is not None:
                write(page.hold(window))
            aside.drain(report)
        write(window.flush())
        out.write(pa.Table.from_pylist(rows, SCHEMA))
        aside.drain(report, final=True)
    write_id_index(lake, u.part, pl.DataFrame(ids, schema=dict.fromkeys(ids, pl.String)))  # for takedowns
    aside.index(lake)
    side_parts = {}
    if report.policy_files:
        side_parts[POLICY] = policy_key(u.part)
        with lake.part_writer(side_parts[POLICY], CAPTURE_SCHEMA) as policy:
            policy.write(captures_frame(replace(c, source_key=u.source) for c in report.policy_files))
    errors = list(report.errors)
    damaged = sum(report.drops.get(r, 0) for r in ("truncated_file", "corrupt_record"))
    if damaged:
        errors.append(f"{u.source}: {damaged} damaged record(s) quarantined; intact records kept")
    return UnitResult(
        unit=u.unit,
        source=u.source,
        part=u.part,
        rejected_part=u.rejected_part or None,
        rows_in=out.rows + sum(report.drops.values()),
        rows_out=out.rows,
        dropped=dict(report.drops),
        bytes_in=u.size,
        bytes_out=out.bytes,
        errors=errors,
        columns=SCHEMA.names,
        counts=dict(extract.counts),
        side_parts=side_parts,
    )


def policy_key(part: str) -> str:
    """Where a unit keeps the policy files its source held (`policy_files.Capture`): beside its part, so the commit
    lists it with the part (`UnitResult.side_parts["policy"]`)."""
    prefix, _, name = part.rpartition("/")
    return f"{prefix}/policy-{name.removeprefix('part-')}"
