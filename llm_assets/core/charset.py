"""Bytes of a web page -> text: the HTTP header's charset, then <meta>, then detection.

Labels are read as browsers read them (WHATWG Encoding Standard): a page labelled gb2312 is decoded as GB18030,
ISO-8859-1 as windows-1252, Shift_JIS as cp932. A declared charset that fails strict decoding is still
preferred, with undecodable bytes replaced, over a guess: one stray byte must not turn a page into mojibake.
Nothing here raises on any input.
"""

from __future__ import annotations

import codecs
import re

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
DETECT_BYTES = 64 * 1024

_SUPERSETS = {
    "gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "gb_2312-80": "gb18030",
    "iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "ascii": "cp1252", "us-ascii": "cp1252",
    "shift_jis": "cp932", "sjis": "cp932", "x-sjis": "cp932", "windows-31j": "cp932",
    "euc-kr": "cp949", "big5": "big5hkscs",
}


_NOT_PAGE_ENCODINGS = {"undefined", "idna", "punycode", "raw-unicode-escape", "unicode-escape", "palmos", "mbcs",
                       "oem", "charmap"}


def normalize_label(label: str | None) -> str | None:
    """A charset label as a Python codec name browsers would use, or None when unknown."""
    if not label:
        return None
    label = _SUPERSETS.get(label.strip().lower(), label.strip().lower())
    try:
        info = codecs.lookup(label)
    except LookupError:
        return None
    # base64, hex, rot13, idna… are codecs but no text encodings a page can be written in
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_PAGE_ENCODINGS:
        return None
    return label


def header_charset(content_type: str) -> str | None:
    m = _HEADER_CHARSET.search(content_type or "")
    return normalize_label(m.group(1)) if m else None


def meta_charset(payload: bytes) -> str | None:
    m = _META_CHARSET.search(payload[:4096])
    return normalize_label(m.group(1).decode("ascii", "ignore")) if m else None


def detect_charset(payload: bytes) -> str | None:
    from charset_normalizer import from_bytes

    best = from_bytes(payload[:DETECT_BYTES]).best()
    return normalize_label(best.encoding) if best else None


def decode_html(payload: bytes, content_type: str) -> tuple[str, str]:
    """-> (text, charset used)."""
    for bom, charset in _BOMS:
        if payload.startswith(bom):
            return payload.decode(charset, errors="replace"), charset
    declared = [c for c in (header_charset(content_type), meta_charset(payload)) if c]
    for charset in [*declared, "utf-8"]:
        try:
            return payload.decode(charset), charset
        except (UnicodeError, LookupError):
            continue
    for fallback in [*declared, detect_charset(payload), "cp1252"]:
        if fallback:
            try:
                return payload.decode(fallback, errors="replace"), fallback
            except (UnicodeError, LookupError):
                continue
    return payload.decode("latin-1"), "latin-1"  # every byte is a latin-1 character: cannot fail
