"""Damaged and truncated compressed streams (`llm_assets.core.readers.compression`): a gzip-per-record file
truncated, bytes flipped or overwritten must never raise and must lose no more than the damaged gzip member; a
whole-file gzip, zstd or uncompressed stream cut short keeps what came before; a broken zstd header is
unreadable."""

from __future__ import annotations

import gzip
import io
import random

import pytest
import zstandard
from warcio.archiveiterator import ArchiveIterator

from llm_assets.core.readers import UnreadableFile
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import (
    CC_2020,
    CCNET,
    IANA,
    WHIRLWIND,
    ccnet_rows,
    content,
    damage,
    first_record,
    intact,
    read,
    same,
)


def test_damaged_zstd_header_is_unreadable_not_a_zstd_error():
    """zstd magic followed by garbage: UnreadableFile (reported by the stage), never zstandard.ZstdError."""
    with pytest.raises(UnreadableFile):
        read(b"\x28\xb5\x2f\xfd" + random.Random(3).randbytes(300))


@pytest.mark.parametrize("how", ["truncated", "overwritten"])
def test_damaged_gzip_json_lines_keep_the_rows_before_the_damage(how):
    """dolma's CCNet JSON Lines cut in half, or with 300 bytes zeroed: the rows before the damage are yielded and
    the damage is counted, as for a WARC."""
    data = shared("text", CCNET).read_bytes()
    damaged = data[: len(data) // 2] if how == "truncated" else data[:5000] + bytes(300) + data[5300:]
    records, report = read(damaged)
    assert [r.record_id for r in records] == [r["id"] for r in ccnet_rows()[: len(records)]]
    assert damage(report) >= 1


@pytest.mark.parametrize("compression", ["uncompressed", "zstd"])
def test_truncated_stream_keeps_the_records_before_the_cut(compression):
    """An uncompressed or zstd WARC cut short (no member boundary to resynchronize at) keeps the records before
    the cut, identical to the intact read, and counts the damage as one `truncated_file`."""
    data, _, full = intact(CC_2020)
    plain = gzip.decompress(data)
    it = ArchiveIterator(io.BytesIO(plain))
    starts = [it.get_record_offset() for _ in it]
    record_end = {first_record(plain, s).rec_headers.get_header("WARC-Record-ID"): e
                  for s, e in zip(starts, starts[1:] + [len(plain)], strict=True)}
    packed = plain if compression == "uncompressed" else zstandard.ZstdCompressor().compress(plain)
    for fraction in (0.3, 0.5, 0.99):
        cut = int(len(packed) * fraction)
        records, report = read(packed[:cut])
        assert content(records) == content(list(full.values())[: len(records)])
        assert report.drops["truncated_file"] == 1
        if compression == "uncompressed":  # every HTML record that ends before the cut is kept
            assert len(records) == sum(record_end[r.record_id] <= cut for r in full.values())
        else:
            assert len(records) >= 1


# ------------------------------------------------------------------------------- damaged gzip-per-record files


FUZZ_FILES = [CC_2020, "dolma__sample-0000.warc.gz", IANA, "dolma__sample-0001.warc.gz", WHIRLWIND]


@pytest.mark.corpus
@pytest.mark.parametrize("name", FUZZ_FILES)
def test_truncated_anywhere(name):
    """The file cut at 100 random offsets (and at, and just after, member starts): never raises; exactly the
    HTML records whose gzip member ends before the cut are yielded, each identical to the intact read; damage is
    counted unless the cut falls on a member boundary."""
    data, spans, full = intact(name)
    member_end = dict(spans)
    boundaries = {s for s, _ in spans}
    rng = random.Random(f"truncate/{name}")
    cuts = sorted(rng.sample(range(1, len(data)), 100)) + [s + k for s, _ in spans[1:4] for k in (0, 1, 2, 5)]
    for cut in cuts:
        records, report = read(data[:cut])
        assert [r.offset for r in records] == [o for o in full if member_end[o] <= cut], cut
        assert all(same(r, full[r.offset]) for r in records), cut
        assert (damage(report) > 0) == (cut not in boundaries), (cut, dict(report.drops))


@pytest.mark.parametrize(("name", "start", "end"), [("dolma__sample-0001.warc.gz", 70_083, 70_472),
                                                   (CC_2020, 131_309, 131_646), (CC_2020, 119_322, 119_559)])
def test_a_member_that_decodes_on_as_garbage_loses_only_itself(name, start, end):
    """Zeros over the end of a member (and the start of the next): the damaged members' records are quarantined,
    never yielded altered, and every other record is recovered."""
    data, spans, full = intact(name)
    records, _ = read(data[:start] + bytes(end - start) + data[end:])
    hit = {s for s, e in spans if s < end and start < e}
    assert all(same(r, full[r.offset]) for r in records)
    assert [r.offset for r in records] == [o for o in full if o not in hit]


def _damaged_copies(name: str, n: int = 100):
    """n copies of the file, each with one byte flipped or a range overwritten (zeros or random), outside the first
    member (damage there is test_damage_in_the_first_member_keeps_the_rest). -> (start, end, bytes)."""
    data, spans, _ = intact(name)
    rng = random.Random(f"damage/{name}")
    for i in range(n):
        pos = rng.randrange(spans[0][1], len(data))
        damaged = bytearray(data)
        if i % 2 == 0:
            damaged[pos] ^= rng.randrange(1, 256)
            end = pos + 1
        else:
            end = min(len(data), pos + rng.randrange(2, 400))
            damaged[pos:end] = rng.randbytes(end - pos) if i % 4 == 1 else bytes(end - pos)
        yield pos, end, bytes(damaged)


@pytest.mark.corpus
@pytest.mark.parametrize("name", FUZZ_FILES)
def test_damaged_bytes_anywhere_lose_only_their_member(name):
    """100 copies with a flipped byte or an overwritten range: never raises; every record outside the damaged
    member(s) is recovered (resync at the next gzip member); nothing yielded differs from the intact read; and
    whenever a record is lost the damage is counted (truncated_file or corrupt_record quarantined)."""
    _, spans, full = intact(name)
    for start, end, damaged in _damaged_copies(name):
        records, report = read(damaged)
        hit = {s for s, e in spans if s < end and start < e}
        lost = set(full) - {r.offset for r in records}
        assert lost <= hit, (start, end, sorted(lost - hit))
        assert all(r.offset in full and same(r, full[r.offset]) for r in records), (start, end)
        if lost:
            assert damage(report) >= 1, (start, end)


@pytest.mark.parametrize("at", [1, 10, 200])
def test_damage_in_the_first_member_keeps_the_rest(at):
    """A byte flipped in the first gzip member (the warcinfo record): every HTML record is still read."""
    data, _, full = intact(CC_2020)
    damaged = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
    records, report = read(damaged)
    assert content(records) == content(list(full.values()))
    assert damage(report) >= 1


def _zero_inside_a_response_member(data: bytes, spans, full) -> tuple[bytes, int]:
    start, end = next((s, e) for s, e in spans if s in full and e - s > 1000)
    return data[:start + 50] + bytes(200) + data[start + 250:], start


def test_damaged_member_mid_file_is_quarantined_and_the_rest_recovered():
    """Zeros inside the first HTML response's gzip member: that record is quarantined (corrupt_record, at the
    member's offset) and every other record is read, identical to the intact read."""
    data, spans, full = intact(CC_2020)
    damaged, start = _zero_inside_a_response_member(data, spans, full)
    records, report = read(damaged)
    assert content(records) == content([r for o, r in full.items() if o != start])
    assert report.quarantined[0]["reason"] == "corrupt_record"
    assert report.quarantined[0]["record_offset"] == start


def test_one_damaged_member_is_counted_once():
    """Zeros inside one response member: one quarantined record, at the member's offset."""
    data, spans, full = intact(CC_2020)
    damaged, start = _zero_inside_a_response_member(data, spans, full)
    _, report = read(damaged)
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [("corrupt_record", start)]


def test_cut_mid_payload_is_never_yielded_as_whole():
    """The record the cut falls inside is damaged: it never reaches the documents stage as a complete page, and
    the cut counts as one `truncated_file` at the member's offset."""
    data, spans, full = intact(CC_2020)
    start, end = next((s, e) for s, e in spans if s in full and full[s].url == "http://01spb.ru/company/")
    records, report = read(data[: (start + end) // 2])
    assert [r.offset for r in records] == [o for o in full if o < start]
    assert [(q["reason"], q["record_offset"]) for q in report.quarantined] == [("truncated_file", start)]
    assert report.drops["truncated_file"] == 1
