"""Reading HTML responses out of WARC/ARC files, streaming, one record at a time."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from warcio.archiveiterator import ArchiveIterator

from llm_assets.core.units import DropCounter

HTML_TYPES = ("text/html", "application/xhtml+xml")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


@dataclass(frozen=True)
class HtmlRecord:
    url: str
    record_id: str
    offset: int
    fetch_time: str
    content_type: str
    charset: str
    html: str
    payload_bytes: int


def _header_charset(content_type: str) -> str | None:
    m = re.search(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", content_type, re.I)
    return m.group(1).lower() if m else None


# Labels browsers decode as a superset (WHATWG Encoding Standard): pages labelled gb2312 are GBK in practice.
_SUPERSETS = {
    "gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "gb_2312-80": "gb18030",
    "iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "ascii": "cp1252", "us-ascii": "cp1252",
    "shift_jis": "cp932", "sjis": "cp932", "x-sjis": "cp932", "euc-kr": "cp949", "big5": "big5hkscs",
}


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = _SUPERSETS.get(label, label)
    try:
        codecs.lookup(label)
    except LookupError:
        return None
    return label


def decode_html(payload: bytes, content_type: str) -> tuple[str, str]:
    """HTTP header charset, then <meta>, then UTF-8, then cp1252.

    A declared charset that fails strict decoding is still preferred (with undecodable bytes replaced) over a
    guess: one stray byte must not turn a whole page into mojibake.
    """
    m = _META_CHARSET.search(payload[:4096])
    declared = [c for c in (_codec(_header_charset(content_type)),
                            _codec(m.group(1).decode("ascii", "ignore").lower()) if m else None) if c]
    for charset in [*declared, "utf-8"]:
        try:
            return payload.decode(charset), charset
        except UnicodeDecodeError:
            continue
    charset = declared[0] if declared else "cp1252"
    return payload.decode(charset, errors="replace"), charset


def iter_html_records(stream: BinaryIO, drops: DropCounter, max_payload_bytes: int) -> Iterator[HtmlRecord]:
    """Yield HTML 2xx responses; count every other record in `drops` by reason.

    A file damaged part-way (truncated gzip, corrupt header) keeps the records read before the damage and
    counts the damage as `truncated_file`.
    """
    it = ArchiveIterator(stream, arc2warc=True)
    try:
        for record in it:
            if record.rec_type == "revisit":
                drops.drop("revisit")
                continue
            if record.rec_type != "response" or record.http_headers is None:
                drops.drop("not_response")
                continue
            status = record.http_headers.get_statuscode() or ""
            if not status.startswith("2"):
                drops.drop("non_2xx")
                continue
            content_type = record.http_headers.get_header("Content-Type") or ""
            if not content_type.lower().split(";")[0].strip() in HTML_TYPES:
                drops.drop("non_html")
                continue
            payload = record.content_stream().read(max_payload_bytes + 1)
            if len(payload) > max_payload_bytes:
                drops.drop("oversized")
                continue
            if getattr(record.raw_stream, "limit", 0) > 0:
                # warcio ends a cut gzip stream quietly: fewer bytes than Content-Length promised.
                drops.drop("truncated_file")
                return
            html, charset = decode_html(payload, content_type)
            yield HtmlRecord(
                url=record.rec_headers.get_header("WARC-Target-URI") or "",
                record_id=record.rec_headers.get_header("WARC-Record-ID") or "",
                offset=it.get_record_offset(),
                fetch_time=record.rec_headers.get_header("WARC-Date") or "",
                content_type=content_type,
                charset=charset,
                html=html,
                payload_bytes=len(payload),
            )
    except Exception:  # noqa: BLE001 - damage ends the file, not the shard
        drops.drop("truncated_file")
