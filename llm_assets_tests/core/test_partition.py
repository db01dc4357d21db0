"""Commits on the real SeaweedFS server: snapshot isolation for readers, conditional writes for concurrent
committers, parts checked before a manifest may list them, reuse only of parts still stored, and the vacuum."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from llm_assets.core.lake import CommitConflict, manifest_key, part_key
from llm_assets.core.partition import (
    LakeInput,
    MissingParts,
    PartitionOutput,
    commit,
    data_version,
    reusable_units,
    vacuum,
)
from llm_assets.core.units import UnitResult, unit_id

SCHEMA = pa.schema([("n", pa.int64())])
ASSET = "numbers"


def write_part(lake, crawl: str, name: str, rows: int, shard: str = "0000") -> UnitResult:
    unit = unit_id(name)
    key = part_key(ASSET, crawl, shard, unit)
    with lake.part_writer(key, SCHEMA) as w:
        w.write(pa.table({"n": list(range(rows))}, schema=SCHEMA))
    return UnitResult(unit=unit, source=name, part=key, rows_in=rows, rows_out=rows, columns=["n"])


def output(*units: UnitResult) -> PartitionOutput:
    return PartitionOutput(units=list(units), code_version="c1", data_version=data_version(list(units)))


def stored(lake, crawl: str) -> set[str]:
    return {o.key for o in lake.list(f"lake/{ASSET}/crawl={crawl}/") if o.key.endswith(".parquet")}


def test_a_reader_holding_the_previous_manifest_finishes_its_read(lake, crawl):
    """Recommitting drops nothing a reader of the previous manifest still needs."""
    commit(lake, ASSET, crawl, "0000", output(write_part(lake, crawl, "a", 5), write_part(lake, crawl, "b", 7)))
    before = LakeInput.load(lake, ASSET, [(crawl, "0000")])
    commit(lake, ASSET, crawl, "0000", output(write_part(lake, crawl, "c", 3)))
    assert before.scan().collect().height == 12
    assert LakeInput.load(lake, ASSET, [(crawl, "0000")]).scan().collect().height == 3


def test_vacuum_keeps_superseded_parts_for_the_retention_then_deletes_them(lake, crawl):
    a, b = write_part(lake, crawl, "a", 5), write_part(lake, crawl, "b", 7)
    commit(lake, ASSET, crawl, "0000", output(a, b))
    c = write_part(lake, crawl, "c", 3)
    commit(lake, ASSET, crawl, "0000", output(b, c))
    tombstones = [o.key for o in lake.list(f"lake/{ASSET}/crawl={crawl}/shard=0000/_superseded/")]
    assert len(tombstones) == 1 and lake.get_json(tombstones[0])["parts"] == [a.part]

    assert vacuum(lake, retention_s=3600, partitions=[(ASSET, crawl, "0000")]) == []
    assert stored(lake, crawl) == {a.part, b.part, c.part}
    deleted = vacuum(lake, retention_s=0, partitions=[(ASSET, crawl, "0000")])
    assert sorted(deleted) == sorted([a.part, *tombstones])
    assert stored(lake, crawl) == {b.part, c.part}


def test_vacuum_deletes_a_killed_runs_orphan_parts_after_the_retention(lake, crawl):
    """A run killed after uploading parts but before its commit leaves parts no manifest lists."""
    live = write_part(lake, crawl, "live", 2)
    commit(lake, ASSET, crawl, "0000", output(live))
    orphan = write_part(lake, crawl, "orphan", 4)
    never_committed = write_part(lake, crawl, "elsewhere", 1, shard="0001")  # a partition with no manifest at all
    assert vacuum(lake, retention_s=3600, partitions=[(ASSET, crawl, "0000"), (ASSET, crawl, "0001")]) == []
    vacuum(lake, retention_s=0, partitions=[(ASSET, crawl, "0000"), (ASSET, crawl, "0001")])
    assert stored(lake, crawl) == {live.part}
    assert orphan.part not in stored(lake, crawl) and never_committed.part not in stored(lake, crawl)


def test_a_manifest_never_lists_a_missing_part(lake, crawl):
    """A part that is not in the store (deleted by someone, or never uploaded) fails the commit; the previous
    manifest stays."""
    good = write_part(lake, crawl, "good", 2)
    commit(lake, ASSET, crawl, "0000", output(good))
    ghost = UnitResult(unit=unit_id("ghost"), source="ghost", part=part_key(ASSET, crawl, "0000", unit_id("ghost")))
    with pytest.raises(MissingParts, match="not in the store"):
        commit(lake, ASSET, crawl, "0000", output(good, ghost))
    assert [u["unit"] for u in lake.get_json(manifest_key(ASSET, crawl, "0000"))["units"]] == [good.unit]


def test_reuse_skips_units_whose_parts_are_gone_so_a_rerun_repairs(lake, crawl):
    a, b = write_part(lake, crawl, "a", 2), write_part(lake, crawl, "b", 3)
    commit(lake, ASSET, crawl, "0000", output(a, b))
    lake.delete([b.part])  # e.g. a vacuum of an older generation, or an operator's mistake
    assert set(reusable_units(lake, ASSET, crawl, "0000", {a.unit, b.unit})) == {a.unit}


def test_a_conditional_write_loses_to_a_commit_in_between(lake, crawl):
    commit(lake, ASSET, crawl, "0000", output(write_part(lake, crawl, "a", 1)))
    _, etag = lake.get_json_versioned(manifest_key(ASSET, crawl, "0000"))
    commit(lake, ASSET, crawl, "0000", output(write_part(lake, crawl, "b", 1)))
    with pytest.raises(CommitConflict):
        lake.put_json(manifest_key(ASSET, crawl, "0000"), {"stale": True}, if_match=etag)
    with pytest.raises(CommitConflict):
        lake.put_json(manifest_key(ASSET, crawl, "0000"), {"stale": True}, if_absent=True)


def test_concurrent_commits_of_one_partition_lose_no_part(lake, crawl):
    """Two committers racing on one partition: whatever the interleaving, the last manifest lists only stored
    parts, and every part any commit listed is live or in a tombstone (so the vacuum, not a racing commit, decides
    when it goes)."""
    listed: list[str] = []
    errors: list[BaseException] = []

    def committer(name: str) -> None:
        try:
            for i in range(8):
                u = write_part(lake, crawl, f"{name}-{i}", i + 1)
                listed.append(u.part)
                commit(lake, ASSET, crawl, "0000", output(u))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=committer, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    manifest = lake.get_json(manifest_key(ASSET, crawl, "0000"))
    live = {u["part"] for u in manifest["units"]}
    assert live <= stored(lake, crawl)
    superseded = {p for o in lake.list(f"lake/{ASSET}/crawl={crawl}/shard=0000/_superseded/")
                  for p in lake.get_json(o.key)["parts"]}
    assert set(listed) <= live | superseded


def test_data_versions_differ_when_a_unit_wrote_fewer_rows():
    """The same units with another outcome (a shorter part) never share a version."""
    full = UnitResult(unit="ab" * 10, source="s", part="p", rows_in=30, rows_out=30)
    short = UnitResult(unit="ab" * 10, source="s", part="p", rows_in=15, rows_out=15)
    assert data_version([full]) != data_version([short])
    assert data_version([full]) == data_version([UnitResult(**full.to_dict())])


def test_the_vacuum_job_runs_on_the_lake(object_store, instance):
    """The scheduled garbage collection, as the daemon runs it: with the default retention nothing recent goes."""
    from llm_assets.dagster.vacuum import vacuum_job

    result = vacuum_job.execute_in_process(resources={"store": object_store}, instance=instance)
    assert result.success and result.output_for_node("vacuum_lake") == 0
