"""JSON: one array of objects, streamed element by element (the objects as in JSON Lines)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import BinaryIO

from llm_assets.core.readers.base import Format, ReaderSettings, ReadReport, SourceRecord, UnreadableFile
from llm_assets.core.readers.compression import CHUNK
from llm_assets.core.readers.jsonl import json_record


def read_json(stream: BinaryIO, _name: str, settings: ReaderSettings, report: ReadReport) -> Iterator[SourceRecord]:
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
        if (rec := json_record(obj, "json", index, settings, report)) is not None:
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


def _sniff(head: bytes) -> bool:
    return head.startswith(b"[")


FORMAT = Format(name="json", suffixes=(".json", ".json.gz", ".json.zst"), sniff=_sniff, read=read_json)
