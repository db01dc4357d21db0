"""JSON arrays (`llm_assets.core.readers.json`): one record per element, split as a stream like json.loads splits
it, cut short or followed by garbage, and an element over the payload cap."""

from __future__ import annotations

import json

import pytest

from llm_assets.core import readers
from llm_assets.core.readers import ReadReport
from llm_assets_tests.core.readers.helpers import ccnet_rows, read, wikitext


def test_json_array_document():
    """A JSON (not JSON Lines) array of objects: one record per object, `offset` its index. An array cut short
    keeps the elements before the cut and counts the damage as `truncated_file`; bytes after the array are
    `corrupt_json`."""
    rows = ccnet_rows()
    data = json.dumps(rows[:4] + ["a string"] + rows[4:], indent=1).encode()
    records, report = read(data, name="corpus.jsonl.gz")
    assert [(r.fmt, r.text, r.record_id) for r in records] == [("json", row["text"], row["id"]) for row in rows]
    assert [r.offset for r in records] == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [("corrupt_json", 4)]

    records, report = read(data[:-10])
    assert [r.record_id for r in records] == [row["id"] for row in rows[:-1]]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [
        ("corrupt_json", 4), ("truncated_file", 10)]
    records, report = read(data + b"\n[]\n")
    assert len(records) == 10 and report.quarantined[-1]["reason"] == "corrupt_json"
    assert read(b" [ ] \n") == ([], ReadReport())


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64 * 1024])
@pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "utf-8"])
def test_json_array_is_split_like_json_loads_reads_it(monkeypatch, chunk, ensure_ascii):
    """The streaming split of a JSON array (strings, escapes, nesting, followed across chunk boundaries) gives the
    elements json.loads gives: the CCNet rows (nested metadata, quotes, newlines, non-ASCII text), plus
    strings and objects made of the bytes that matter ([ ] { } " , and backslashes)."""
    monkeypatch.setattr(readers.json, "CHUNK", chunk)  # the JSON format module's chunk
    tricky = ['x\\', '\\"', '"]},[{', '\\\\,', 'é😀\n\t']
    rows = ccnet_rows()[:3] + [{"id": f"t{i}", "text": t, "meta": {"a": [t, {"b": [t]}]}}
                                for i, t in enumerate(tricky)]
    data = json.dumps(rows, ensure_ascii=ensure_ascii).encode()
    records, report = read(data)
    assert [(r.offset, r.text, r.record_id) for r in records] == [(i, r["text"], r["id"]) for i, r in enumerate(rows)]
    assert report.quarantined == []


@pytest.mark.corpus
def test_an_oversized_json_array_element_is_quarantined_and_its_neighbours_kept():
    """A 60 MB element of a JSON array is quarantined as `oversized` at its index, never held; the others are
    yielded with their indexes."""
    rows = ccnet_rows()
    elements = [json.dumps(r).encode() for r in rows]
    elements.insert(3, json.dumps({"id": "big", "text": wikitext(60_000_000)}).encode())
    records, report = read(b"[" + b",\n".join(elements) + b"]")
    assert [(r.offset, r.record_id, r.text) for r in records] == [
        (i + (i >= 3), row["id"], row["text"]) for i, row in enumerate(rows)]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [("oversized", 3)]
