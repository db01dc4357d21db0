"""Raw crawl files -> source records, streaming, whatever the format.

The format is sniffed from the bytes, not taken from the file name: gzip or zstd compression, then WARC, ARC,
JSON Lines, JSON, Parquet or a loose HTML page. Memory is bounded by a record or a batch, never a file.

Every record a reader passes over is accounted for: yielded, counted under a skip reason (`report.skip`; a
response skipped for what it holds, `report.set_aside`, also keeps its URL so that it can be looked up), or
quarantined with its offset and what is wrong (`report.quarantine`). Damage never ends the shard: a
gzip-per-record file resynchronizes at the next gzip member; other damage ends the file, keeping what came
before it. A record over `max_payload_bytes` (an HTML or WET payload, a JSON line or array element, a Parquet
text) is quarantined as `oversized` without being held whole.

Only the input's faults are quarantined: an error of the store or the machine while the raw bytes stream in (the
store unreachable, a connection reset, a key gone; see `errors.is_store_error`) propagates, so that the unit fails
instead of committing a file that looks damaged.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

import zstandard

from llm_assets.core.charset import decode_html
from llm_assets.core.errors import is_store_error
from llm_assets.core.units import DropCounter

GZIP_MAGIC = b"\x1f\x8b\x08"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"
HTML_TYPES = ("text/html", "application/xhtml+xml")
CHUNK = 64 * 1024
LOOKAHEAD = 1 << 20
# Payloads that start like these are not HTML, whatever their Content-Type says.
BINARY_MAGICS = (b"%PDF", b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"PK\x03\x04", b"\x1f\x8b", b"RIFF", b"\x00\x00\x01\x00",
                 b"OggS", b"ID3", b"\x7fELF", b"wOFF", b"wOF2")


@dataclass
class SourceRecord:
    """One document's raw material: HTML to extract, or text a WET/JSON/Parquet source already holds."""

    fmt: str  # warc | arc | wet | jsonl | json | parquet | html
    offset: int  # compressed offset of the record's gzip member, or of the record in an uncompressed stream
    skip: int = 0  # uncompressed bytes from `offset` to the record (records inside one big gzip member)
    url: str = ""
    record_id: str = ""
    fetch_time: str = ""
    content_type: str = ""
    charset: str = ""
    html: str | None = None
    text: str | None = None
    title: str | None = None
    payload_bytes: int = 0


@dataclass
class ReadReport:
    """What a reader passed over: skips by reason, quarantined records, file-level errors, and the records set
    aside for what they hold (a reader drains `set_aside` as it goes, so it is bounded by a batch)."""

    drops: DropCounter = field(default_factory=DropCounter)
    quarantined: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    set_aside_records: list[dict] = field(default_factory=list)
    max_quarantined: int = 10_000
    keep_set_aside: bool = True  # False for a report that is only counted, then discarded

    def skip(self, reason: str) -> None:
        self.drops.drop(reason)

    def set_aside(self, reason: str, offset: int, skip: int, url: str, record_id: str, detail: str = "") -> None:
        """A record skipped for its content (not HTML, an error status, no text): counted like a skip, and kept
        by URL and record id, so that `why URL` finds it."""
        self.drops.drop(reason)
        if self.keep_set_aside:
            self.set_aside_records.append({"record_offset": offset, "record_skip": skip, "url": url,
                                           "record_id": record_id, "reason": reason, "detail": detail[:500]})

    def quarantine(self, reason: str, offset: int, skip: int = 0, url: str = "", detail: str = "") -> None:
        self.drops.drop(reason)
        if len(self.quarantined) < self.max_quarantined:
            self.quarantined.append({"record_offset": offset, "record_skip": skip, "url": url, "reason": reason,
                                     "detail": detail[:500]})


@dataclass(frozen=True)
class ReaderSettings:
    max_payload_bytes: int = 5_000_000  # per record: HTML/WET payload, JSON line or array element, Parquet text
    text_field: str = "text"
    url_field: str = "url"
    id_field: str = "id"


class UnreadableFile(ValueError):
    """A file that is no archive or document format this platform reads."""


# ---------------------------------------------------------------------------------------------------- streams


class ByteStream(Protocol):
    """What the readers need of a raw file: reads from the front. Asking for a BinaryIO would exclude a store's
    object stream and a stream with bytes put back in front."""

    def read(self, n: int, /) -> bytes | None: ...


class _Source:
    """The compressed byte stream with its position and a push-back buffer."""

    def __init__(self, raw: ByteStream, pos: int = 0):
        self.raw, self.pos, self.buf = raw, pos, b""

    def read(self, n: int) -> bytes:
        data, self.buf = self.buf[:n], self.buf[n:]
        if len(data) < n:
            data += self.raw.read(n - len(data)) or b""
        self.pos += len(data)
        return data

    def unread(self, data: bytes) -> None:
        if data:
            self.buf = data + self.buf
            self.pos -= len(data)

    def peek(self, n: int) -> bytes:
        data = self.read(n)
        self.unread(data)
        return data


class DamagedMember(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class _Member(io.RawIOBase):
    """The decompressed bytes of one gzip member. Raises DamagedMember on corrupt data or an early end.

    The member's compressed bytes are kept (up to RESYNC_LIMIT) so that after damage the scan for the next
    member starts right after this member's first byte: a corrupt member can decode into garbage for a while and
    swallow the bytes of intact members behind it.
    """

    RESYNC_LIMIT = 32 << 20

    def __init__(self, src: _Source):
        self.src, self.start = src, src.pos
        self._d = zlib.decompressobj(31)
        self._out = b""
        self._raw = bytearray()
        self._chunk = b""
        self.done = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        """Decompress the next piece onto the end of the output buffer."""
        if self._d.unconsumed_tail:
            data = self._d.unconsumed_tail
        else:
            self._chunk = data = self.src.read(CHUNK)
            if not data:
                # cut short, or damaged so that it decoded on to the end: members after it may still be intact
                self.damaged(f"file ends inside the gzip member at offset {self.start}", "truncated_file")
            if len(self._raw) <= self.RESYNC_LIMIT:
                self._raw += data
        try:
            self._out += self._d.decompress(data, CHUNK)
        except zlib.error as e:
            self.damaged(f"gzip member at offset {self.start}: {e}")
        if self._d.eof:
            self.src.unread(self._d.unused_data)
            self.done = True

    def readinto(self, b) -> int:
        while not self._out and not self.done:
            self._fill()
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def damaged(self, detail: str, reason: str = "corrupt_record"):
        """Give back the bytes after this member's first byte, for the scan to the next member, and raise."""
        if not self.done:
            if len(self._raw) <= self.RESYNC_LIMIT:
                self.src.unread(bytes(self._raw[1:]))
            else:  # too big to keep: the next member may still start in the last chunk
                self.src.unread(self._chunk[1:])
            self.done = True
        raise DamagedMember(reason, detail)

    def ends_within(self, limit: int) -> bool:
        """Decompress ahead (without consuming) until the member ends, checking its CRC, or `limit` bytes."""
        while not self.done and len(self._out) < limit:
            self._fill()
        return self.done

    def drain(self) -> None:
        while not self.done:
            self._out = b""
            self._fill()


def _scan_to_next_member(src: _Source) -> bool:
    """Skip to the next gzip header. False at the end of the file."""
    tail = b""
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return False
        data = tail + chunk
        i = data.find(GZIP_MAGIC)
        if i >= 0:
            src.unread(data[i:])
            return True
        tail = data[-(len(GZIP_MAGIC) - 1):]  # a header split across two chunks


# ------------------------------------------------------------------------------------------------------- WARC


def _looks_binary(payload: bytes) -> bool:
    head = payload[:1024].lstrip()
    return head.startswith(BINARY_MAGICS) or b"\x00" in head


def _warc_records(stream: BinaryIO, fmt: str, base_offset: int, member: _Member | None, settings: ReaderSettings,
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
                           content_type=content_type, charset=charset, html=html, payload_bytes=len(payload))


def _read_warc_gzip(src: _Source, fmt: str, settings: ReaderSettings, report: ReadReport,
                    end: int | None = None) -> Iterator[SourceRecord]:
    """gzip-per-record (resynchronizing at the next member after damage) or one gzip member for the file; with
    `end`, only the members that start before it."""
    damaged = False  # the bytes after a damaged member are part of its damage, not counted again
    while (end is None or src.pos < end) and src.peek(len(GZIP_MAGIC)):
        if src.peek(len(GZIP_MAGIC)) != GZIP_MAGIC:
            start = src.pos
            found = _scan_to_next_member(src)
            if not damaged:
                report.quarantine("corrupt_record", start, detail=f"{src.pos - start} bytes that are no gzip member")
            if not found or (end is not None and src.pos >= end):
                return
        damaged = False
        member = _Member(src)
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
    fmt = sniff_format(first[:4096])
    if fmt not in ("warc", "arc"):
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


def _seek_member(src: _Source, end: int, fmt: str) -> bool:
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
    src = _Source(raw, start)
    if start > 0 and not _seek_member(src, end, fmt):
        return
    yield from _read_warc_gzip(src, fmt, settings, report, end)


def _read_warc_plain(stream: BinaryIO, fmt: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    try:
        yield from _warc_records(stream, fmt, 0, None, settings, report)
    except DamagedMember as e:
        report.quarantine(e.reason, 0, detail=str(e))
    except Exception as e:  # noqa: BLE001 - uncompressed: no member boundary to resynchronize at
        if is_store_error(e):
            raise
        report.quarantine("truncated_file", 0, detail=f"damaged after the last intact record: {type(e).__name__}: {e}")


# ----------------------------------------------------------------------------------------- JSON, Parquet, HTML


def _json_record(obj, fmt: str, offset: int, settings: ReaderSettings, report: ReadReport) -> SourceRecord | None:
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


def _read_jsonl(stream: BinaryIO, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
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
        if (rec := _json_record(obj, "jsonl", start, settings, report)) is not None:
            yield rec


def _skip_line(stream: BinaryIO) -> int:
    """Read on to the end of the current line, a chunk at a time; the number of bytes skipped."""
    skipped = 0
    while chunk := stream.readline(CHUNK):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


def _read_json(stream: BinaryIO, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    """A JSON array of objects, streamed element by element; `offset` is the element's index. An element over
    max_payload_bytes is quarantined as `oversized` without being held; an array cut short keeps the elements
    before the cut."""
    cap = settings.max_payload_bytes
    for index, item in _json_array_items(stream, cap, report):
        if item is None:
            report.quarantine("oversized", index, detail=f"JSON array element over {cap} bytes")
            continue
        try:
            obj = json.loads(item)
        except ValueError as e:
            report.quarantine("corrupt_json", index, detail=str(e))
            continue
        if (rec := _json_record(obj, "json", index, settings, report)) is not None:
            yield rec


# Outside strings only these bytes matter; a string runs to the next quote that no backslash escapes.
_JSON_STRUCTURE = re.compile(rb'[][{}",]')
_JSON_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)


def _json_array_items(stream: BinaryIO, cap: int, report: ReadReport) -> Iterator[tuple[int, bytes | None]]:
    """(index, bytes) of each element of the JSON array `stream` holds, split by following strings and nesting
    a chunk at a time, so that only one element is ever held; bytes is None for an element over `cap` bytes."""
    chunk = stream.read(CHUNK).lstrip(b"\xef\xbb\xbf \t\r\n")
    if not chunk.startswith(b"["):
        raise UnreadableFile("not a JSON array")
    pos, depth, in_string, escaped = 1, 1, False, False
    item, oversized, index = bytearray(), False, 0
    while chunk:
        start = pos  # the current element's bytes in this chunk begin here
        while pos < len(chunk):
            if escaped:  # the byte after a backslash that ended the previous chunk
                pos, escaped = pos + 1, False
            elif in_string:
                rest = _JSON_STRING_REST.match(chunk, pos)
                assert rest is not None  # the pattern matches the empty string too
                end = rest.end()
                if end == len(chunk):
                    pos = end
                elif chunk[end] == ord('"'):
                    pos, in_string = end + 1, False
                else:  # a backslash is the chunk's last byte
                    pos, escaped = len(chunk), True
            elif (match := _JSON_STRUCTURE.search(chunk, pos)) is None:
                pos = len(chunk)
            else:
                pos, byte = match.end(), match.group()
                if byte == b'"':
                    in_string = True
                elif byte in (b"[", b"{"):
                    depth += 1
                elif depth > 1 and byte in (b"]", b"}"):
                    depth -= 1
                elif depth == 1 and byte in (b",", b"]"):
                    if not oversized:
                        item += chunk[start:match.start()]
                    last = byte == b"]"
                    if not (last and index == 0 and not item.strip()):  # not the empty array
                        yield index, None if oversized or len(item) > cap else bytes(item)
                    index, item, oversized, start = index + 1, bytearray(), False, pos
                    if last:
                        _check_trailing(chunk[pos:], stream, index, report)
                        return
        if not oversized:
            item += chunk[start:]
            if len(item) > cap:
                item, oversized = bytearray(), True
        chunk, pos = stream.read(CHUNK), 0
    report.quarantine("truncated_file", index, detail=f"the JSON array ends inside element {index}")


def _check_trailing(rest: bytes, stream: BinaryIO, index: int, report: ReadReport) -> None:
    """Quarantine what follows the end of the JSON array, unless it is only whitespace."""
    while rest:
        if rest.strip():
            report.quarantine("corrupt_json", index, detail="data after the end of the JSON array")
            return
        rest = stream.read(CHUNK)


def read_parquet(file, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    """A Parquet file (random access), batch by batch; `offset` is the row number. A text over max_payload_bytes
    is quarantined as `oversized` before it becomes a Python string (the batch itself is in memory already)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(file)
    names = set(pf.schema_arrow.names)
    field = settings.text_field
    if field not in names:
        raise UnreadableFile(f"Parquet file has no column {field!r} (settings: documents.text_field)")
    text_type = pf.schema_arrow.field(field).type
    measurable = pa.types.is_string(text_type) or pa.types.is_large_string(text_type)
    columns = [c for c in (field, settings.url_field, settings.id_field) if c in names]
    cap = settings.max_payload_bytes
    row = 0
    for batch in pf.iter_batches(batch_size=1024, columns=columns):
        oversized = [False] * batch.num_rows
        if measurable:
            texts = batch.column(field)
            over = pc.fill_null(pc.greater(pc.binary_length(texts), cap), False)
            if pc.any(over).as_py():
                oversized = over.to_pylist()
                batch = batch.set_column(batch.schema.get_field_index(field), field,
                                         pc.if_else(over, pa.scalar(None, texts.type), texts))
        for obj, too_big in zip(batch.to_pylist(), oversized):
            if too_big:
                report.quarantine("oversized", row, detail=f"text over {cap} bytes")
            elif (rec := _json_record(obj, "parquet", row, settings, report)) is not None:
                yield rec
            row += 1


def _read_html(stream: BinaryIO, name: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    payload = stream.read(settings.max_payload_bytes + 1)
    if len(payload) > settings.max_payload_bytes:
        report.quarantine("oversized", 0, detail=f"HTML file over {settings.max_payload_bytes} bytes")
        return
    html, charset = decode_html(payload, "")
    yield SourceRecord(fmt="html", offset=0, url=name, content_type="text/html", charset=charset, html=html,
                       payload_bytes=len(payload))


# ------------------------------------------------------------------------------------------------- sniffing


def sniff_format(head: bytes) -> str | None:
    """warc | arc | jsonl | json | html | None, from the first decompressed bytes."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"WARC/"):
        return "warc"
    if text.startswith(b"filedesc://"):
        return "arc"
    if text.startswith(b"{"):
        return "jsonl"
    if text.startswith(b"["):
        return "json"
    lower = text[:2048].lower()
    if lower.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<!--", b"<meta", b"<title")) or (
        lower.startswith(b"<") and (b"<html" in lower or b"<body" in lower or b"<div" in lower or b"<p>" in lower)
    ):
        return "html"
    return None


def read_records(raw: ByteStream, name: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
    """Records of one raw file (a streaming, non-seekable byte stream). Parquet needs random access: callers
    detect it with `is_parquet` and use `read_parquet`. Raises UnreadableFile for what is no known format."""
    src = _Source(raw)
    magic = src.peek(4)
    if not magic:
        raise UnreadableFile("empty file")
    if magic.startswith(GZIP_MAGIC):
        fmt = sniff_format(_gzip_head(src))
        if fmt in ("warc", "arc"):
            yield from _read_warc_gzip(src, fmt, settings, report)
            return
        # typeshed wants a fileobj that can seek; GzipFile seeks it only when itself rewound, never done here
        stream = io.BufferedReader(gzip.GzipFile(fileobj=src), CHUNK)  # type: ignore[call-overload]
    elif magic == ZSTD_MAGIC:
        # zstandard reads any object with read(); its stub asks for a whole IO[bytes]
        stream = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(
            src, read_across_frames=True), CHUNK)  # type: ignore[arg-type]
    elif magic == PARQUET_MAGIC:
        raise UnreadableFile("Parquet needs random access: read it with read_parquet")
    elif GZIP_MAGIC in src.peek(LOOKAHEAD) and (fmt := sniff_format(_gzip_head(src))) in ("warc", "arc"):
        # gzip members after a damaged start (the first member's own header is broken)
        yield from _read_warc_gzip(src, fmt, settings, report)
        return
    else:
        stream = io.BufferedReader(_SourceIO(src), CHUNK)
    if magic == ZSTD_MAGIC or not magic.startswith(GZIP_MAGIC):
        try:
            fmt = sniff_format(stream.peek(4096)[:4096])
        except (OSError, EOFError, zstandard.ZstdError) as e:
            if is_store_error(e):
                raise
            raise UnreadableFile(f"cannot decompress: {e}") from e
    if fmt in ("warc", "arc"):
        records = _read_warc_plain(stream, fmt, settings, report)
    elif fmt == "jsonl":
        records = _read_jsonl(stream, settings, report)
    elif fmt == "json":
        records = _read_json(stream, settings, report)
    elif fmt == "html":
        records = _read_html(stream, name, settings, report)
    else:
        raise UnreadableFile("not a WARC, ARC, WET, JSON Lines, JSON, Parquet or HTML file")
    try:
        yield from records
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as e:
        if is_store_error(e):  # e.g. a connection reset: says nothing about the file
            raise
        # a whole-file gzip or zstd stream damaged part-way: what was read before the damage is kept
        report.quarantine("truncated_file", 0, detail=f"damaged after the last intact record: {type(e).__name__}: {e}")


def is_parquet(head: bytes) -> bool:
    return head[:4] == PARQUET_MAGIC


def decompressed(raw: ByteStream) -> io.BufferedReader:
    """A whole file's bytes, streaming: gzip (any number of members) or zstd (any number of frames) decompressed
    when its first bytes say so, as the raw readers sniff them, else as they are. For small files read whole (eval
    sets); raw crawl files go through `read_records`, which also resynchronizes after damage."""
    src = _Source(raw)
    magic = src.peek(4)
    if magic.startswith(GZIP_MAGIC):
        # typeshed wants a fileobj that can seek; GzipFile seeks it only when itself rewound, never done here
        return io.BufferedReader(gzip.GzipFile(fileobj=src), CHUNK)  # type: ignore[call-overload]
    if magic == ZSTD_MAGIC:
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(
            src, read_across_frames=True), CHUNK)  # type: ignore[arg-type]
    return io.BufferedReader(_SourceIO(src), CHUNK)


def _gzip_head(src: _Source) -> bytes:
    """The first decompressed bytes, without consuming the source. When the first member is damaged, the first
    one of the next members (within the first MiB) that decompresses stands in for it."""
    data = src.peek(LOOKAHEAD)
    start = 0
    while start >= 0:
        try:
            head = zlib.decompressobj(31).decompress(data[start:], 4096)
            if sniff_format(head):
                return head
        except zlib.error:
            pass
        start = data.find(GZIP_MAGIC, start + 1)
    return b""


class _SourceIO(io.RawIOBase):
    def __init__(self, src: _Source):
        self.src = src

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.src.read(len(b))
        b[: len(data)] = data
        return len(data)
