"""Parquet (`llm_assets.core.readers.parquet`): read with random access, a row per record, null and oversized
texts quarantined at their row."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from llm_assets.core.readers import ReaderSettings, ReadReport, UnreadableFile, is_parquet, read_parquet
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import CCNET, SETTINGS, ccnet_rows, read_path


def test_parquet_with_text_url_and_id_columns(tmp_path):
    """A Parquet file (several row groups) is read with random access by read_parquet; `offset` is the row number.
    A null text is quarantined as `missing_text`; a file without the text column, or a Parquet file handed to the
    streaming reader, is UnreadableFile."""
    rows = ccnet_rows()
    table = pa.table({"id": [r["id"] for r in rows], "url": [r["metadata"]["url"] for r in rows],
                      "body": [None if i == 2 else r["text"] for i, r in enumerate(rows)],
                      "source": [r["source"] for r in rows]})
    path = tmp_path / "docs.jsonl"
    pq.write_table(table, path, row_group_size=3)
    assert is_parquet(path.read_bytes()[:4]) and not is_parquet(shared("text", CCNET).read_bytes()[:4])

    report = ReadReport()
    records = list(read_parquet(path, ReaderSettings(text_field="body"), report))
    assert [(r.fmt, r.offset, r.url, r.record_id, r.text) for r in records] == [
        ("parquet", i, r["metadata"]["url"], r["id"], r["text"]) for i, r in enumerate(rows) if i != 2]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [("missing_text", 2)]

    with pytest.raises(UnreadableFile, match="text"):
        list(read_parquet(path, SETTINGS, ReadReport()))
    with pytest.raises(UnreadableFile):
        read_path(path)


def test_parquet_texts_over_the_cap_are_quarantined(tmp_path):
    """Parquet texts longer than max_payload_bytes (here the median CCNet text) are quarantined as `oversized` at
    their row; the others are yielded."""
    rows = ccnet_rows()
    cap = sorted(len(r["text"].encode()) for r in rows)[len(rows) // 2]
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}), path,
                   row_group_size=4)
    report = ReadReport()
    records = list(read_parquet(path, ReaderSettings(max_payload_bytes=cap), report))
    small = [i for i, r in enumerate(rows) if len(r["text"].encode()) <= cap]
    assert [(r.offset, r.text) for r in records] == [(i, rows[i]["text"]) for i in small]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [
        ("oversized", i) for i in range(len(rows)) if i not in small]
