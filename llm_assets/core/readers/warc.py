"""WARC: HTML responses to extract (and WET conversion records, whose text Common Crawl extracted already).

A gzip-per-record file (the Common Crawl convention) is read member by member, resynchronizing at the next member
after damage, and splits into work units by byte range (`member_layout`, `read_member_range`); one gzip stream,
zstd or an uncompressed file is read from its start, damage ending it. The ARC format (`arc.py`) is read by the same
code: warcio turns its records into WARC records.
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from llm_assets.core.charset import decode_html
from llm_assets.core.errors import is_store_error
from llm_assets.core.policy_files import ROBOTS_MAX_BYTES, capture_of, header_reservation, policy_file
from llm_assets.core.readers.base import ByteStream, Format, ReaderSettings, ReadReport, RecordSource, SourceRecord
from llm_assets.core.readers.compression import (
    CHUNK,
    GZIP_MAGIC,
    LOOKAHEAD,
    DamagedMember,
    Member,
    Source,
    SourceIO,
    scan_to_next_member,
)

HTML_TYPES = ("text/html", "application/xhtml+xml")
# Payloads that start like these are not HTML, whatever their Content-Type says.
BINARY_MAGICS = (b"%PDF", b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"PK\x03\x04", b"\x1f\x8b", b"RIFF",
                 b"\x00\x00\x01\x00", b"OggS", b"ID3", b"\x7fELF", b"wOFF", b"wOF2")


def _looks_binary(payload: bytes) -> bool:
    head = payload[:1024].lstrip()
    return head.startswith(BINARY_MAGICS) or b"\x00" in head


def _warc_records(stream: BinaryIO, fmt: str, base_offset: int, member: Member | None, settings: ReaderSettings,
                  report: ReadReport) -> Iterator[SourceRecord]:
    """Records of one (uncompressed) WARC/ARC stream. `member` is set when the stream is a gzip member."""
    # warcio is imported where used: building the code location imports this module (settings).
    from warcio.archiveiterator import ArchiveIterator

    it = ArchiveIterator(stream, arc2warc=True, check_digests=False)
    for record in it:
        # it.get_record_offset() reads the record to its end: call it only once the payload has been read
        url = record.rec_headers.get_header("WARC-Target-URI") or ""
        # for ARC, warcio makes up a new WARC-Record-ID on every read: no stable id to keep
        record_id = "" if fmt == "arc" else record.rec_headers.get_header("WARC-Record-ID") or ""
        rec_type = record.rec_type
        if rec_type == "revisit":
            report.skip("revisit")
            continue
        if rec_type == "conversion":  # WET: text Common Crawl already extracted
            payload = record.content_stream().read(settings.max_payload_bytes + 1)
            skip = it.get_record_offset()
            if len(payload) > settings.max_payload_bytes:
                report.quarantine("oversized", base_offset, skip, url, f"{len(payload)}+ bytes")
                continue
            if member is not None and skip == 0 and not member.ends_within(LOOKAHEAD):
                member.damaged(f"gzip member at offset {base_offset} runs on after its record")
            yield SourceRecord(fmt="wet", offset=base_offset, skip=skip, url=url, record_id=record_id,
                               fetch_time=record.rec_headers.get_header("WARC-Date") or "",
                               content_type=record.rec_headers.get_header("Content-Type") or "text/plain",
                               charset="utf-8", text=payload.decode("utf-8", errors="replace"),
                               payload_bytes=len(payload))
            continue
        if rec_type != "response" or record.http_headers is None:
            report.skip("not_response")
            continue
        status = record.http_headers.get_statuscode() or ""
        if policy_file(url) is not None:  # whatever its status: RFC 9309 reads a 5xx robots.txt as a full disallow
            payload = record.content_stream().read(4 * ROBOTS_MAX_BYTES + 1)
            offset, skip = base_offset, it.get_record_offset()
            code = int(status) if status.isdigit() else 0  # a garbled status line: no rule (not 2xx, not 5xx)
            report.policy_files.append(capture_of(url, code, record.rec_headers.get_header("WARC-Date") or "",
                                                  payload, "", offset))
            report.set_aside("policy_file", offset, skip, url, record_id, f"HTTP {status}, {len(payload)} bytes")
            continue
        if not status.startswith("2"):
            report.set_aside("non_2xx", base_offset, it.get_record_offset(), url, record_id, f"HTTP status {status}")
            continue
        content_type = record.http_headers.get_header("Content-Type") or ""
        if content_type and content_type.lower().split(";")[0].strip() not in HTML_TYPES:
            report.set_aside("non_html", base_offset, it.get_record_offset(), url, record_id,
                             f"Content-Type {content_type[:200]}")
            continue
        payload = record.content_stream().read(settings.max_payload_bytes + 1)
        truncated = getattr(record.raw_stream, "limit", 0) > 0
        skip = it.get_record_offset()
        if len(payload) > settings.max_payload_bytes:
            report.quarantine("oversized", base_offset, skip, url, f"payload over {settings.max_payload_bytes} bytes")
            continue
        if truncated:
            # the stream ended before Content-Length: a cut record, never passed on as if whole
            raise DamagedMember("truncated_file", f"record at offset {base_offset}+{skip} ends early")
        if member is not None and skip == 0 and not member.ends_within(LOOKAHEAD):
            # A record that opens its member (gzip per record) must end with it; if the member runs on, its data
            # is garbage from a damaged member. Records inside one whole-file member are checked when it ends.
            member.damaged(f"gzip member at offset {base_offset} runs on after its record")
        if _looks_binary(payload):
            report.quarantine("non_html_payload", base_offset, skip, url, "binary bytes in an HTML response")
            continue
        html, charset = decode_html(payload, content_type)
        yield SourceRecord(fmt=fmt, offset=base_offset, skip=skip, url=url, record_id=record_id,
                           fetch_time=record.rec_headers.get_header("WARC-Date") or "",
                           content_type=content_type, charset=charset, html=html, payload_bytes=len(payload),
                           reservation=header_reservation(record.http_headers.headers))


def _read_warc_gzip(src: Source, fmt: str, settings: ReaderSettings, report: ReadReport,
                    end: int | None = None) -> Iterator[SourceRecord]:
    """gzip-per-record (resynchronizing at the next member after damage) or one gzip member for the file; with
    `end`, only the members that start before it."""
    damaged = False  # the bytes after a damaged member are part of its damage, not counted again
    while (end is None or src.pos < end) and src.peek(len(GZIP_MAGIC)):
        if src.peek(len(GZIP_MAGIC)) != GZIP_MAGIC:
            start = src.pos
            found = scan_to_next_member(src)
            if not damaged:
                report.quarantine("corrupt_record", start, detail=f"{src.pos - start} bytes that are no gzip member")
            if not found or (end is not None and src.pos >= end):
                return
        damaged = False
        member = Member(src)
        skip = 0
        try:
            for rec in _warc_records(io.BufferedReader(member, CHUNK), fmt, member.start, member, settings, report):
                skip = rec.skip
                yield rec
            member.drain()
        except DamagedMember as e:
            report.quarantine(e.reason, member.start, skip, detail=str(e))
            damaged = True
        except Exception as e:  # noqa: BLE001 - a corrupt WARC header inside a member that decompresses
            if is_store_error(e):
                raise
            report.quarantine("corrupt_record", member.start, skip, detail=f"{type(e).__name__}: {e}")
            try:
                member.drain()
            except DamagedMember:
                pass
            damaged = True


# ------------------------------------------------------------------------------------- byte ranges of a file

# The first line of an ARC record: URL, IP address, 14-digit date, content type, length.
_ARC_RECORD = re.compile(rb"\S+ \S+ \d{14} \S+ \d+\r?\n")


def member_layout(head: bytes, whole: bool) -> str | None:
    """'warc' or 'arc' when a file whose first bytes are `head` (`whole`: the whole file) is a gzip per record
    WARC/ARC, the Common Crawl convention: its first gzip member holds exactly one record and ends within `head`,
    another member or the end of the file right behind it. Such a file can be read from any member on.
    None for anything else (one gzip stream, zstd, uncompressed, another format): it is read from its start."""
    if not head.startswith(GZIP_MAGIC):
        return None
    d = zlib.decompressobj(31)
    try:
        first = d.decompress(head, 4 * LOOKAHEAD)
    except zlib.error:
        return None
    if not d.eof or not (d.unused_data.startswith(GZIP_MAGIC) or whole and not d.unused_data):
        return None
    fmt = "warc" if _sniff(first[:4096]) else "arc" if first[:4096].startswith(b"filedesc://") else None
    if fmt is None:
        return None
    from warcio.archiveiterator import ArchiveIterator

    try:
        records = sum(1 for _ in ArchiveIterator(io.BytesIO(first), arc2warc=True, check_digests=False))
    except Exception:  # noqa: BLE001 - a first record warcio cannot parse: read the file from its start
        return None
    return fmt if records == 1 else None


def _begins_record(data: bytes, fmt: str) -> bool:
    """Whether `data` starts a gzip member whose first decompressed bytes open a WARC (or ARC) record."""
    try:
        head = zlib.decompressobj(31).decompress(data, 512)
    except zlib.error:
        return False
    return head.startswith(b"WARC/") if fmt == "warc" else _ARC_RECORD.match(head) is not None


def _seek_member(src: Source, end: int, fmt: str) -> bool:
    """Advance to the first gzip member at or after the current position and before `end` that begins a record;
    False when there is none. Only the range's own bytes are scanned (and what a candidate's check decompresses)."""
    while src.pos < end:
        data = src.peek(CHUNK)
        i = data.find(GZIP_MAGIC)
        if i < 0:
            if len(data) < CHUNK:
                return False
            src.read(len(data) - len(GZIP_MAGIC) + 1)  # a header split across two chunks is found next time
            continue
        src.read(i)
        if src.pos < end and _begins_record(src.peek(CHUNK), fmt):
            return True
        src.read(1)
    return False


def read_member_range(raw: ByteStream, start: int, end: int, fmt: str, settings: ReaderSettings,
                      report: ReadReport) -> Iterator[SourceRecord]:
    """The records of the gzip members of a gzip-per-record WARC/ARC (`member_layout`) that start in
    [start, end): `raw` streams the file from byte `start`. Reading starts at the first member at or after `start`
    that begins a record and ends with the last member that starts before `end`, so that ranges that tile a file
    read each of its records exactly once and no range decompresses another's members. Offsets are the file's.
    Damage inside the range is quarantined as when the whole file is read."""
    src = Source(raw, start)
    if start > 0 and not _seek_member(src, end, fmt):
        return
    yield from _read_warc_gzip(src, fmt, settings, report, end)


def _read_warc_plain(stream: BinaryIO, fmt: str, settings: ReaderSettings,
                     report: ReadReport) -> Iterator[SourceRecord]:
    try:
        yield from _warc_records(stream, fmt, 0, None, settings, report)
    except DamagedMember as e:
        report.quarantine(e.reason, 0, detail=str(e))
    except Exception as e:  # noqa: BLE001 - uncompressed: no member boundary to resynchronize at
        if is_store_error(e):
            raise
        report.quarantine("truncated_file", 0, detail=f"damaged after the last intact record: {type(e).__name__}: {e}")


def _sniff(head: bytes) -> bool:
    return head.startswith(b"WARC/")


def record_at(lake: RecordSource, key: str, offset: int, skip: int, max_bytes: int) -> str:
    """The raw record at (offset, skip) as text: WARC headers, HTTP headers and payload (cut at `max_bytes`)."""
    from warcio.archiveiterator import ArchiveIterator

    src = Source(lake.open(key, start=offset))
    raw: Member | SourceIO = Member(src) if src.peek(3) == GZIP_MAGIC else SourceIO(src)
    stream = io.BufferedReader(raw, CHUNK)
    while skip > 0:
        got = stream.read(min(skip, CHUNK))
        if not got:
            raise EOFError("the source ends before the record: it changed since the document was extracted")
        skip -= len(got)
    record = next(iter(ArchiveIterator(stream, arc2warc=True)))
    parts = [record.rec_headers.to_str()]
    if record.http_headers is not None:
        parts.append(record.http_headers.to_str())
    payload = record.content_stream().read(max_bytes + 1)
    parts.append(payload[:max_bytes].decode("utf-8", errors="replace") + ("\n[…]" if len(payload) > max_bytes else ""))
    return "".join(parts)


def warc_like(name: str, suffixes: tuple[str, ...], sniff) -> Format:
    """The `Format` of a WARC-like format (WARC, ARC): read, split and found again by this module."""

    def read(stream: BinaryIO, _name: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
        return _read_warc_plain(stream, name, settings, report)

    def read_members(src: Source, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
        return _read_warc_gzip(src, name, settings, report)

    def read_range(raw: ByteStream, start: int, end: int, settings: ReaderSettings,
                   report: ReadReport) -> Iterator[SourceRecord]:
        return read_member_range(raw, start, end, name, settings, report)

    return Format(name=name, suffixes=suffixes, sniff=sniff, read=read, read_members=read_members,
                  layout=member_layout, read_range=read_range, record_at=record_at)


FORMAT = warc_like("warc", (".warc", ".warc.gz", ".warc.zst"), _sniff)
