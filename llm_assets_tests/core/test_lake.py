"""The lake on a real SeaweedFS server: key validation, whole-or-nothing part uploads, batch reads, scans,
partition commits and reading committed partitions."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from llm_assets.core.lake import (
    InvalidKey,
    manifest_key,
    parse_raw_key,
    part_key,
    partition_prefix,
    validate_crawl,
    validate_shard,
)
from llm_assets.core.partition import LakeInput, Manifest, MissingPartition, PartitionOutput, commit, vacuum
from llm_assets.core.units import UnitResult, unit_id

SCHEMA = pa.schema([("doc_id", pa.string()), ("n", pa.int64())])


def table(start: int, stop: int) -> pa.Table:
    return pa.table({"doc_id": [f"d{i}" for i in range(start, stop)], "n": list(range(start, stop))}, schema=SCHEMA)


def write_part(lake, key: str, start: int, stop: int) -> None:
    with lake.part_writer(key, SCHEMA) as w:
        w.write(table(start, stop))


# key validation

@pytest.mark.parametrize("crawl", ["CC-MAIN-2020-34", "a", "crawl_1.b", "X" * 128])
def test_valid_crawl_names(crawl):
    assert validate_crawl(crawl) == crawl


@pytest.mark.parametrize("crawl", ["", None, "..", "a..b", "../x", "a/b", "/a", "a b", " a", ".hidden", "-x",
                                   "X" * 129, "crawl=1", "a\nb", "é"])
def test_invalid_crawl_names(crawl):
    """Traversal, separators, spaces, empty and over-long names cannot become lake keys."""
    with pytest.raises(InvalidKey):
        validate_crawl(crawl)


@pytest.mark.parametrize("shard", ["", "1", "01", "00001", "abcd", "../0", "0 01"])
def test_invalid_shards(shard):
    with pytest.raises(InvalidKey):
        validate_shard(shard)
    assert validate_shard("0003") == "0003"


def test_parse_raw_key_accepts_sub_folders():
    assert parse_raw_key("raw/CC-MAIN-2020-34/segments/a.warc.gz") == ("CC-MAIN-2020-34", "segments/a.warc.gz")
    assert parse_raw_key("raw/c/file.arc.gz") == ("c", "file.arc.gz")


@pytest.mark.parametrize("name", [
    "has space.warc.gz", " leading and trailing ", "résumé.warc.gz", "日本.jsonl", "Ελληνικά/ファイル.json",
    ".hidden", ".../x", "~tilde", "a+b=c@d,e", "q?x#y%20z&.warc", "quote\"'<>|:*", "emoji 😀.jsonl", "nbsp\u00a0x",
    "e\u0301", "x" * 1000,
])
def test_parse_raw_key_accepts_any_safe_file_name(name):
    """File names are used as they are: spaces, any script, a leading dot and punctuation are all fine."""
    assert parse_raw_key(f"raw/c/{name}") == ("c", name)


def test_raw_keys_are_not_normalized():
    """'é' composed and decomposed are two different keys, both valid, each kept exactly."""
    composed, decomposed = "raw/c/r\u00e9sum\u00e9", "raw/c/re\u0301sume\u0301"
    assert parse_raw_key(composed)[1] != parse_raw_key(decomposed)[1]
    assert parse_raw_key(decomposed)[1] == "re\u0301sume\u0301"


@pytest.mark.parametrize("key,reason", [
    ("raw/c/../x.warc.gz", "'..' path segment"), ("raw/c/./x.warc.gz", "'..' path segment"),
    ("raw/c/sub/../../x", "'..' path segment"), ("raw/c/a//b", "empty"), ("raw/c/", "empty"),
    ("raw/../x.warc.gz", "invalid crawl name"), ("raw/a..b/x", "invalid crawl name"),
    ("raw/bad crawl/x", "invalid crawl name"), ("raw/crawl=1/x", "invalid crawl name"), ("raw/.c/x", "invalid crawl"),
    ("raw/c", "expected raw/<crawl>/<file>"), ("raw", "expected"), ("lake/c/x.warc.gz", "expected"),
    ("/raw/c/x", "expected"), ("raw/x.warc.gz", "expected"),
    ("raw/c/x\\..\\y", "U+005C"), ("raw/c/tab\tx", "U+0009"), ("raw/c/nl\nx", "U+000A"), ("raw/c/cr\rx", "U+000D"),
    ("raw/c/nul\x00", "U+0000"), ("raw/c/del\x7f", "U+007F"), ("raw/c/c1\x85", "U+0085"),
    ("raw/c/esc\x1b[31m", "U+001B"),
    ("raw/c/ls\u2028x", "U+2028"), ("raw/c/rlo\u202egz.exe", "U+202E"), ("raw/c/iso\u2066x", "U+2066"),
    ("raw/c/lone\ud800", "U+D800"), ("raw/c/" + "é" * 510, "1026 bytes"),
])
def test_parse_raw_key_rejects_what_is_unsafe(key, reason):
    """No segment may be empty, '.' or '..', nor hold a control character, '\\', a line separator, a bidi control
    or a lone surrogate; the crawl stays strict; a key is at most 1,024 bytes in UTF-8. The message names the
    key (escaped) and why."""
    with pytest.raises(InvalidKey, match=re.escape(reason)) as e:
        parse_raw_key(key)
    assert str(e.value).isprintable()


def test_part_and_manifest_keys():
    """The key layout of the lake; bad unit ids and asset names are refused."""
    unit = unit_id("documents", "1", "raw/c/x")
    assert part_key("documents", "c", "0001", unit) == f"lake/documents/crawl=c/shard=0001/part-{unit}.parquet"
    assert part_key("filtered", "c", "0001", unit, zone="rejected").startswith("rejected/filtered/crawl=c/")
    assert manifest_key("documents", "c", "0001") == "lake/documents/crawl=c/shard=0001/_manifest.json"
    for bad_unit in ["", "XYZ", "abc", "../deadbeef", "deadbeef/x"]:
        with pytest.raises(InvalidKey):
            part_key("documents", "c", "0001", bad_unit)
    for bad_asset in ["Documents", "1docs", "docs/x", ""]:
        with pytest.raises(InvalidKey):
            partition_prefix("lake", bad_asset, "c", "0001")
    with pytest.raises(InvalidKey):
        part_key("documents", "../c", "0001", unit)


def test_unit_id_is_stable_and_distinguishes_inputs():
    assert unit_id("a", "b") == unit_id("a", "b")
    assert len({unit_id("a", "b"), unit_id("a", "c"), unit_id("ab"), unit_id("a", "b", "")}) == 4
    assert len(unit_id("x")) == 20


# parts

def test_part_writer_uploads_the_whole_part(lake, crawl):
    """Batches written in several calls become one object with every row, in order."""
    key = part_key("test_parts", crawl, "0000", unit_id(crawl, "whole"))
    with lake.part_writer(key, SCHEMA) as w:
        w.write(table(0, 10))
        w.write(pl.from_arrow(table(10, 25)))  # a Polars frame is accepted too
        w.write(table(25, 25))  # empty writes are no-ops
        assert not lake.exists(key), "nothing is visible before the block ends"
    assert w.rows == 25 and w.bytes > 0
    assert lake.exists(key)
    got = pl.concat([pl.from_arrow(b) for b in lake.iter_batches(key)])
    assert got["n"].to_list() == list(range(25))


def test_part_writer_uploads_nothing_when_the_block_raises(lake, crawl):
    """An error inside the with-block propagates and leaves no object, not even a partial one, nor a temp file."""
    key = part_key("test_parts", crawl, "0000", unit_id(crawl, "fails"))
    with pytest.raises(RuntimeError, match="boom"):
        with lake.part_writer(key, SCHEMA) as w:
            w.write(table(0, 100))
            raise RuntimeError("boom")
    assert lake.exists(key) is False
    assert not Path(w._path).exists()
    assert list(lake.list(f"lake/test_parts/crawl={crawl}/")) == []


def test_part_writer_rejects_data_missing_a_column(lake, crawl):
    """Data without the schema's columns fails the write, and nothing is uploaded."""
    key = part_key("test_parts", crawl, "0000", unit_id(crawl, "bad-schema"))
    with pytest.raises(KeyError):
        with lake.part_writer(key, SCHEMA) as w:
            w.write(pa.table({"doc_id": ["a"]}))
    assert lake.exists(key) is False


def test_part_writer_with_no_rows_writes_an_empty_part(lake, crawl):
    """A unit that keeps nothing still writes a readable part with the schema and zero rows."""
    key = part_key("test_parts", crawl, "0000", unit_id(crawl, "empty"))
    with lake.part_writer(key, SCHEMA) as w:
        pass
    assert w.rows == 0 and lake.exists(key)
    assert lake.scan([key]).collect().schema == pl.Schema({"doc_id": pl.String, "n": pl.Int64})
    assert lake.scan([key]).collect().height == 0


def test_iter_batches_reads_in_bounded_batches(lake, crawl):
    """iter_batches yields every row in order, at most batch_rows at a time, and only the asked columns."""
    key = part_key("test_parts", crawl, "0000", unit_id(crawl, "batches"))
    write_part(lake, key, 0, 2500)
    batches = list(lake.iter_batches(key, batch_rows=1000))
    assert [b.num_rows for b in batches] == [1000, 1000, 500]
    assert pa.Table.from_batches(batches)["n"].to_pylist() == list(range(2500))
    only_n = list(lake.iter_batches(key, batch_rows=4096, columns=["n"]))
    assert [b.schema.names for b in only_n] == [["n"]]


def test_scan_of_many_parts(lake, crawl):
    """A lazy scan over many parts sees every row of every part; an empty key list gives the schema, no rows."""
    keys = [part_key("test_parts", crawl, "0001", unit_id(crawl, str(i))) for i in range(12)]
    for i, key in enumerate(keys):
        write_part(lake, key, i * 100, i * 100 + 100)
    df = lake.scan(keys).collect()
    assert df.height == 1200
    assert sorted(df["n"].to_list()) == list(range(1200))
    assert lake.scan(keys).filter(pl.col("n") >= 1150).select(pl.len()).collect().item() == 50
    empty = lake.scan([], SCHEMA).collect()
    assert empty.height == 0 and empty.columns == ["doc_id", "n"]


def test_small_objects_and_listing(lake, crawl):
    """put/get bytes and JSON, exists, listing by prefix with start_after, delete; a missing JSON is None."""
    prefix = f"raw/{crawl}/"
    for name in ("a", "b", "c"):
        lake.put_bytes(prefix + name, name.encode() * 3)
    assert lake.get_bytes(prefix + "b") == b"bbb"
    assert [o.key for o in lake.list(prefix)] == [prefix + n for n in "abc"]
    assert [o.key for o in lake.list(prefix, start_after=prefix + "a")] == [prefix + "b", prefix + "c"]
    assert {o.size for o in lake.list(prefix)} == {3}
    lake.put_json(prefix + "m.json", {"x": [1, 2]})
    assert lake.get_json(prefix + "m.json") == {"x": [1, 2]}
    assert lake.get_json(prefix + "missing.json") is None
    lake.delete([prefix + "a", prefix + "m.json"])
    assert [o.key for o in lake.list(prefix)] == [prefix + "b", prefix + "c"]
    assert lake.exists(prefix + "a") is False


def test_lake_pickles_without_its_client(lake, crawl):
    """Process-pool workers get a Lake by pickling: the copy opens its own client and works."""
    key = f"raw/{crawl}/pickled"
    lake.put_bytes(key, b"x")
    copy = pickle.loads(pickle.dumps(lake))
    assert copy.get_bytes(key) == b"x"
    assert "s3" not in copy.__dict__ or copy.s3 is not lake.s3


# commits

def _result(lake, crawl: str, shard: str, name: str, rows: int, rejected: bool = False) -> UnitResult:
    unit = unit_id(crawl, shard, name)
    key = part_key("test_stage", crawl, shard, unit)
    write_part(lake, key, 0, rows)
    rejected_key = None
    if rejected:
        rejected_key = part_key("test_stage", crawl, shard, unit, zone="rejected")
        write_part(lake, rejected_key, 0, 1)
    return UnitResult(unit=unit, source=f"raw/{crawl}/{name}", part=key, rejected_part=rejected_key,
                      rows_in=rows + int(rejected), rows_out=rows, dropped={"x": 1} if rejected else {})


def test_commit_then_load_round_trip(lake, crawl):
    """The manifest lists the parts and rows; LakeInput.load reads it back and scans exactly those parts."""
    units = [_result(lake, crawl, "0000", "a", 10), _result(lake, crawl, "0000", "b", 5, rejected=True)]
    stray = part_key("test_stage", crawl, "0000", unit_id("not committed"))
    write_part(lake, stray, 0, 1000)  # e.g. left by an interrupted run: readers must never see it

    manifest = commit(lake, "test_stage", crawl, "0000", PartitionOutput(units, code_version="cv", data_version="dv"))
    assert manifest.rows == 15
    assert lake.get_json(manifest_key("test_stage", crawl, "0000")) == manifest.to_json()
    assert Manifest.from_json(manifest.to_json()) == manifest

    loaded = LakeInput.load(lake, "test_stage", [(crawl, "0000")])
    assert loaded.rows == 15
    assert loaded.parts == [u.part for u in units]
    assert loaded.scan().collect().height == 15
    assert list(loaded.manifests[0].units) == units
    assert (loaded.manifests[0].code_version, loaded.manifests[0].data_version) == ("cv", "dv")


def test_load_spans_several_partitions(lake, crawl):
    """Loading two shards scans the parts of both."""
    for shard, rows in (("0000", 3), ("0001", 4)):
        commit(lake, "test_stage", crawl, shard, PartitionOutput([_result(lake, crawl, shard, "a", rows)]))
    loaded = LakeInput.load(lake, "test_stage", [(crawl, "0000"), (crawl, "0001")])
    assert loaded.rows == 7 and loaded.scan().collect().height == 7


def test_commit_leaves_dropped_parts_to_the_vacuum(lake, crawl):
    """Parts (and rejected parts) the previous manifest listed and the new one does not stay until the vacuum
    runs past the retention; then they go, with uncommitted strays, while reused and new parts stay."""
    old_only = _result(lake, crawl, "0000", "old", 4, rejected=True)
    kept = _result(lake, crawl, "0000", "kept", 3)
    commit(lake, "test_stage", crawl, "0000", PartitionOutput([old_only, kept]))
    new = _result(lake, crawl, "0000", "new", 2)
    stray = part_key("test_stage", crawl, "0000", unit_id("stray"))
    write_part(lake, stray, 0, 1)

    commit(lake, "test_stage", crawl, "0000", PartitionOutput([kept, new]))
    assert lake.exists(old_only.part) and lake.exists(old_only.rejected_part) and lake.exists(stray)

    vacuum(lake, retention_s=0, partitions=[("test_stage", crawl, "0000")])
    assert lake.exists(old_only.part) is False
    assert lake.exists(old_only.rejected_part) is False
    assert lake.exists(stray) is False
    assert lake.exists(kept.part) and lake.exists(new.part)
    assert LakeInput.load(lake, "test_stage", [(crawl, "0000")]).rows == 5


def test_commit_of_an_empty_partition(lake, crawl):
    """A partition whose units kept nothing commits with zero rows and no parts."""
    commit(lake, "test_stage", crawl, "0002", PartitionOutput([UnitResult(unit="u", source="s")]))
    loaded = LakeInput.load(lake, "test_stage", [(crawl, "0002")])
    assert loaded.rows == 0 and loaded.parts == []


def test_loading_a_missing_partition_names_it(lake, crawl):
    """A partition that was never committed raises MissingPartition naming the asset, crawl and shard."""
    with pytest.raises(MissingPartition, match=rf"test_stage.*crawl={crawl} shard=0007"):
        LakeInput.load(lake, "test_stage", [(crawl, "0007")])


def test_the_outage_clock_is_one_per_run_and_ends_with_the_outage(tmp_path):
    """Clients sharing a clock file count one outage from its first failure; a success ends it, and so does a quiet
    spell longer than quiet_s (an outage whose end nobody saw)."""
    import time

    from llm_assets.core.lake import OutageClock

    path = tmp_path / "outage"
    now = time.time()
    path.write_text(f"{now - 100} {now - 1}")  # failing for 100 s, last seen failing 1 s ago
    assert OutageClock("a", str(path), quiet_s=120).failing_for() >= 100
    assert OutageClock("b", str(path), quiet_s=120).elapsed() >= 100  # another client, the same outage
    OutageClock("c", str(path), quiet_s=120).recovered()
    assert not path.exists()
    assert OutageClock("d", str(path), quiet_s=120).elapsed() == 0

    path.write_text(f"{now - 100} {now - 60}")  # nobody saw it fail for a minute: that outage is over
    assert OutageClock("e", str(path), quiet_s=30).failing_for() < 100
