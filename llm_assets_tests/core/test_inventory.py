"""The raw inventory: shard assignment, order-independent fingerprints, and the incremental RawScan over a
real SeaweedFS bucket (resumable across sensor ticks) reporting new, changed and removed partitions."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from llm_assets.core.inventory import (
    EMPTY_FINGERPRINT,
    INVALID_RAW_KEY,
    RawScan,
    changed_partitions,
    fingerprint,
    partition_files,
    partition_listing,
    rejected_raw_keys,
    shard_of,
)
from llm_assets.core.lake import InvalidKey, ObjectInfo, parse_raw_key
from llm_assets.core.raw_files import InventoryUnit, observe_raw_files

SHARDS = 4


# shard_of and fingerprint

def test_shard_of_is_stable_and_in_range():
    """The same key always maps to the same four-digit shard below `shards`."""
    keys = [f"raw/CC-MAIN-2020-34/segment-{i:05d}.warc.gz" for i in range(500)]
    for shards in (1, 3, 4, 16, 9999):
        got = [shard_of(k, shards) for k in keys]
        assert got == [shard_of(k, shards) for k in keys]
        assert all(len(s) == 4 and s.isdigit() and int(s) < shards for s in got)
    assert {shard_of(k, 1) for k in keys} == {"0000"}
    # Pinned: a change here would silently move every raw file to another partition and re-run everything.
    assert shard_of("raw/CC-MAIN-2020-34/a.warc.gz", 4) == "0002"
    assert shard_of("raw/CC-MAIN-2024-22/CC-MAIN-20240522.warc.gz", 4) == "0000"
    assert (shard_of("raw/x/y", 4), shard_of("raw/x/y", 9999)) == ("0001", "7500")


def test_shard_of_spreads_keys():
    """2,000 similar keys over 4 shards: every shard gets a fair share (within 20% of even)."""
    counts = Counter(shard_of(f"raw/CC-MAIN-2024-22/CC-MAIN-{i:06d}.warc.gz", 4) for i in range(2000))
    assert sorted(counts) == ["0000", "0001", "0002", "0003"]
    assert all(400 <= n <= 600 for n in counts.values()), counts


def _objs(n: int) -> list[ObjectInfo]:
    return [ObjectInfo(f"raw/c/f{i}.warc.gz", 1000 + i, f"etag{i}") for i in range(n)]


def test_fingerprint_is_order_independent_and_additive():
    """Any order, and any split of the files, gives the same fingerprint; no files is EMPTY_FINGERPRINT."""
    files = _objs(20)
    fp = fingerprint(files)
    assert fingerprint(reversed(files)) == fp
    assert fingerprint(files[::3] + files[1::3] + files[2::3]) == fp
    assert fingerprint([]) == EMPTY_FINGERPRINT
    assert len(fp) == 32 and fp != EMPTY_FINGERPRINT


def test_fingerprint_changes_with_etag_size_key_or_membership():
    """A new ETag, a new size, a renamed key, an added or a removed file each change the fingerprint."""
    files = _objs(5)
    fp = fingerprint(files)
    first = files[0]
    variants = [
        [ObjectInfo(first.key, first.size, "other-etag")] + files[1:],
        [ObjectInfo(first.key, first.size + 1, first.etag)] + files[1:],
        [ObjectInfo(first.key + ".renamed", first.size, first.etag)] + files[1:],
        files + [ObjectInfo("raw/c/new", 1, "e")],
        files[1:],
    ]
    fps = [fingerprint(v) for v in variants]
    assert fp not in fps
    assert len(set(fps)) == len(fps)


def test_changed_partitions():
    """New, changed and removed partitions are reported with their new fingerprint; identical ones are not."""
    before = {"c|0000": "a" * 32, "c|0001": "b" * 32, "c|0002": "c" * 32}
    after = {"c|0000": "a" * 32, "c|0001": "d" * 32, "c|0003": "e" * 32}
    assert changed_partitions(before, after) == {"c|0001": "d" * 32, "c|0002": EMPTY_FINGERPRINT,
                                                 "c|0003": "e" * 32}
    assert changed_partitions(after, dict(after)) == {}
    assert changed_partitions({}, {}) == {}


# RawScan on the real server

def _upload(lake, crawl: str, n: int, sub: str = "") -> list[str]:
    keys = [f"raw/{crawl}/{sub}file-{i:03d}.warc.gz" for i in range(n)]
    for i, key in enumerate(keys):
        lake.put_bytes(key, f"content {i} of {key}".encode())
    return keys


def _mine(fps: dict[str, str], crawl: str) -> dict[str, str]:
    """RawScan covers all of raw/ (other tests write there too): keep this test's crawl only."""
    return {p: fp for p, fp in fps.items() if p.startswith(crawl + "|")}


def _scan(lake, budget: int, resume_via_json: bool = True, max_steps: int = 10_000) -> tuple[RawScan, int]:
    scan, steps = RawScan(), 0
    while True:
        steps += 1
        assert steps <= max_steps, f"the scan does not advance: still after {scan.after!r}"
        done = scan.step(lake, SHARDS, budget)
        if done:
            return scan, steps
        if resume_via_json:  # a sensor keeps the scan in its cursor between ticks
            scan = RawScan.from_json(json.loads(json.dumps(scan.to_json())))


def test_one_step_and_many_small_steps_agree(lake, crawl):
    """A pass in one step and a pass resumed from JSON every 3 keys give identical fingerprints, equal to
    fingerprinting each partition's listed files directly."""
    keys = _upload(lake, crawl, 17) + _upload(lake, crawl, 4, sub="nested/")
    whole, steps = _scan(lake, budget=1_000_000)
    assert steps == 1
    resumed, steps = _scan(lake, budget=3)
    assert steps > len(keys) // 3

    mine = _mine(whole.fingerprints(), crawl)
    assert mine == _mine(resumed.fingerprints(), crawl)
    expected_partitions = {f"{crawl}|{shard_of(k, SHARDS)}" for k in keys}
    assert set(mine) == expected_partitions
    for p, fp in mine.items():
        files = partition_files(lake, crawl, p.split("|")[1], SHARDS)
        assert fp == fingerprint(files)
    assert sum(len(partition_files(lake, crawl, s, SHARDS)) for s in ("0000", "0001", "0002", "0003")) == len(keys)


def test_scan_state_survives_json(lake, crawl):
    """to_json/from_json keep the resume point and running sums exactly."""
    _upload(lake, crawl, 5)
    scan = RawScan()
    scan.step(lake, SHARDS, 2)
    copy = RawScan.from_json(json.loads(json.dumps(scan.to_json())))
    assert (copy.after, copy.sums) == (scan.after, scan.sums)
    assert RawScan.from_json({}).after == "" and RawScan.from_json({}).sums == {}


def test_changes_between_passes(lake, crawl):
    """Between two passes: an identical re-upload changes nothing; a changed object, a new partition and an
    emptied partition are each reported, and nothing else of this crawl."""
    keys = _upload(lake, crawl, 12)
    by_shard: dict[str, list[str]] = {}
    for k in keys:
        by_shard.setdefault(shard_of(k, SHARDS), []).append(k)
    assert len(by_shard) >= 2, "12 keys should cover at least 2 of 4 shards"
    first_all = _scan(lake, budget=5)[0].fingerprints()
    first = _mine(first_all, crawl)

    # identical re-upload: same ETag and size
    lake.put_bytes(keys[0], f"content 0 of {keys[0]}".encode())
    assert changed_partitions(first, _mine(_scan(lake, budget=5)[0].fingerprints(), crawl)) == {}

    shards = sorted(by_shard)
    changed_shard, removed_shard = shards[0], shards[1]
    lake.put_bytes(by_shard[changed_shard][0], b"new content")
    lake.delete(by_shard[removed_shard])
    other = f"{crawl}-b"
    new_key = _upload(lake, other, 1)[0]

    second_scan, _ = _scan(lake, budget=4)
    second = _mine(second_scan.fingerprints(), crawl)
    changes = changed_partitions(first, second)
    assert changes == {f"{crawl}|{changed_shard}": second[f"{crawl}|{changed_shard}"],
                       f"{crawl}|{removed_shard}": EMPTY_FINGERPRINT}
    assert f"{crawl}|{changed_shard}" in second and f"{crawl}|{removed_shard}" not in second
    # the crawl that did not exist in the first pass shows up as a new partition
    new_partition = f"{other}|{shard_of(new_key, SHARDS)}"
    second_all = second_scan.fingerprints()
    assert new_partition not in first_all
    assert changed_partitions(_mine(first_all, other), _mine(second_all, other)) == {
        new_partition: second_all[new_partition]}


SAFE_NAMES = ["has space.warc.gz", "résumé.warc.gz", "日本.jsonl", ".hidden", "sub/~tilde", "a+b%20c?#&.warc"]
UNSAFE_NAMES = ["ctl\x01.warc.gz", "line\nbreak.jsonl", "rlo\u202egz.exe", "sub/tab\there"]


def test_safe_names_are_files_and_unsafe_ones_are_reported(lake, crawl):
    """Names with spaces, non-ASCII letters, a leading dot or URL punctuation are listed, sharded and
    fingerprinted like any file; unsafe names and an invalid crawl folder are in `invalid` with the reason (the
    key, escaped), counted against the budget, and never in a partition."""
    good = _upload(lake, crawl, 3) + [f"raw/{crawl}/{name}" for name in SAFE_NAMES]
    bad = [f"raw/{crawl}/{name}" for name in UNSAFE_NAMES] + [f"raw/{crawl}..x/f", f"raw/{crawl} x/f"]
    for key in good[3:] + bad:
        lake.put_bytes(key, key.encode())

    scan, _ = _scan(lake, budget=2, resume_via_json=False)
    reported = [m for m in scan.invalid if crawl in m]
    assert len(reported) == len(bad)
    for key in bad:
        assert any(repr(key) in m for m in reported), key
    assert all(m.isprintable() for m in reported)
    mine = _mine(scan.fingerprints(), crawl)
    assert mine == {f"{crawl}|{s}": fingerprint(partition_files(lake, crawl, s, SHARDS))
                    for s in {shard_of(k, SHARDS) for k in good}}
    listed = [partition_listing(lake, crawl, f"{s:04d}", SHARDS) for s in range(SHARDS)]
    assert sorted(f.key for files, _ in listed for f in files) == sorted(good)
    rejected = [r for _, rs in listed for r in rs]
    assert sorted(r.obj.key for r in rejected) == sorted(bad[:len(UNSAFE_NAMES)])  # other crawls are not its own
    assert all(shard_of(r.obj.key, SHARDS) == f"{s:04d}" for s, (_, rs) in enumerate(listed) for r in rs)


def test_folder_markers_are_neither_files_nor_rejected(lake, crawl):
    """An empty key ending in '/' (what S3 consoles create for a folder) is ignored, wherever the store lists it."""
    key = _upload(lake, crawl, 1)[0]
    lake.put_bytes(f"raw/{crawl}/folder/", b"")
    files, rejected = partition_listing(lake, crawl, "0000", shards=1)
    assert [f.key for f in files] == [key] and rejected == []
    assert not any(crawl in r.obj.key for r in rejected_raw_keys(lake, limit=1_000_000)[1])


def test_observe_raw_files_inventories_one_partition(store_config, lake, crawl):
    """The raw_files unit writes one row per raw file of its shard; its unit id is the partition fingerprint.
    Keys of the shard that cannot be ingested are dropped as `invalid_raw_key` and kept in its rejected part
    with the reason; they do not change the fingerprint."""
    keys = _upload(lake, crawl, 8)
    shard = shard_of(keys[0], SHARDS)
    bad = next(k for i in range(1000) if shard_of(k := f"raw/{crawl}/bad\x01name-{i}", SHARDS) == shard)
    lake.put_bytes(bad, b"x")
    mine = sorted(k for k in keys if shard_of(k, SHARDS) == shard)

    result = observe_raw_files(InventoryUnit(store=store_config, source=f"raw/{crawl}/", crawl=crawl, shard=shard,
                                             shards=SHARDS))

    assert result.errors == []
    assert (result.rows_in, result.rows_out, result.dropped) == (len(mine) + 1, len(mine), {INVALID_RAW_KEY: 1})
    assert result.unit == fingerprint(partition_files(lake, crawl, shard, SHARDS))
    df = lake.scan([result.part]).collect()
    assert df["key"].to_list() == mine
    assert df["file"].to_list() == [k.split("/", 2)[2] for k in mine]
    assert df["size"].to_list() == [len(f"content {keys.index(k)} of {k}") for k in mine]
    (rejected,) = lake.scan([result.rejected_part]).collect().to_dicts()
    assert (rejected["key"], rejected["size"]) == (bad, 1)
    assert repr(bad) in rejected["reason"] and "U+0001" in rejected["reason"]


def _is_valid(key: str) -> bool:
    try:
        parse_raw_key(key)
        return True
    except InvalidKey:
        return False


@pytest.mark.parametrize("budget", [1, 2, 7])
def test_budget_limits_each_step(lake, crawl, budget):
    """An unfinished step has listed exactly `budget` keys, valid or not (the budget bounds the listing),
    continuing where the previous one stopped in the server's listing order (SeaweedFS lists folder by folder,
    not in S3's byte order)."""
    _upload(lake, crawl, 7)
    for name in UNSAFE_NAMES[:2]:
        lake.put_bytes(f"raw/{crawl}/{name}", b"x")
    listing = [o.key for o in lake.list("raw/")]
    position = {key: i for i, key in enumerate(listing)}
    scan, start = RawScan(), -1
    while not scan.step(lake, SHARDS, budget):
        assert scan.after in position, f"the scan does not advance: still after {scan.after!r}"
        end = position[scan.after]
        assert end - start == budget
        start = end
    assert len(scan.invalid) == sum(not _is_valid(k) for k in listing if not k.endswith("/"))
    assert _mine(scan.fingerprints(), crawl) == _mine(_scan(lake, budget=1_000_000)[0].fingerprints(), crawl)


def test_partition_files_are_in_key_order(lake, crawl):
    """The raw files of a partition come back sorted by key, whatever order the store lists them in."""
    keys = [f"raw/{crawl}/{name}" for name in ("a-b.warc.gz", "a.c.warc.gz", "a/x.warc.gz", "b.warc.gz")]
    for key in keys:
        lake.put_bytes(key, b"x")
    got = [f.key for f in partition_files(lake, crawl, "0000", shards=1)]  # one shard: every file
    assert got == sorted(keys)
