"""`core.keys`, the one owner of lake keys: partition references and every key builder validate what they are given,
and no other module builds or splits a `crawl|shard` key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llm_assets.core import keys
from llm_assets.core.keys import CRAWL_LEVEL_SHARD, InvalidKey, PartitionRef, split_partition

ROOT = Path(__file__).resolve().parents[2]


def test_a_partition_ref_is_dagsters_multi_partition_key():
    ref = PartitionRef("CC-MAIN-2024-22", "0003")
    assert ref.key == str(ref) == "CC-MAIN-2024-22|0003"
    assert PartitionRef.parse(ref.key) == ref and not ref.is_crawl_level
    assert {ref: 1}[PartitionRef.parse("CC-MAIN-2024-22|0003")] == 1  # frozen: hashable, equal by value


def test_a_crawl_level_partition_is_its_crawls_one_shard_keyed_by_the_crawl():
    ref = PartitionRef.crawl_level("CC-1")
    assert (ref.crawl, ref.shard, ref.key, ref.is_crawl_level) == ("CC-1", CRAWL_LEVEL_SHARD, "CC-1", True)
    assert PartitionRef.parse("CC-1") == ref
    assert split_partition("CC-1|0001") == ("CC-1", "0001")
    assert split_partition("CC-1") == ("CC-1", CRAWL_LEVEL_SHARD)
    assert split_partition("") == ("", "")  # an unpartitioned asset (release, model)


@pytest.mark.parametrize("key, names", [
    ("CC-1|1", "shard '1'"), ("CC-1|0001|x", "shard '0001|x'"), ("|0001", "crawl name ''"), ("../x|0001", "crawl"),
    ("CC-1|all", "crawl-level partition's key is its crawl alone"), ("", "crawl name ''"),
])
def test_a_bad_partition_key_is_refused_naming_what_is_wrong(key, names):
    with pytest.raises(InvalidKey, match=f"invalid partition key {re.escape(repr(key))}: .*{re.escape(names)}"):
        PartitionRef.parse(key)


def test_every_key_builder_validates_its_names():
    assert keys.part_key("documents", "CC-1", "0000", "ab" * 8) == \
        "lake/documents/crawl=CC-1/shard=0000/part-abababababababab.parquet"
    assert keys.manifest_key("duplicate_clusters", "CC-1", CRAWL_LEVEL_SHARD) == \
        "lake/duplicate_clusters/crawl=CC-1/shard=all/_manifest.json"
    assert keys.ledger_key("filtered", "CC-1", 1.5, "ab12") == \
        "ledger/costs/filtered/crawl=CC-1/000000000001500-ab12.parquet"
    assert keys.ledger_prefix("release") == "ledger/costs/release/unpartitioned/"
    assert keys.release_prefix("demo", "v1") == "releases/demo/v1/"
    assert keys.release_latest_key("demo") == "releases/demo/latest.json"
    assert keys.release_manifest_key("demo", "v1") == "releases/demo/v1/manifest.json"
    assert keys.release_superseded_key("demo", "v1") == "releases/demo/v1/superseded.json"
    for build in (lambda: keys.part_key("documents", "CC 1", "0000", "ab" * 8),
                  lambda: keys.part_key("Documents", "CC-1", "0000", "ab" * 8),
                  lambda: keys.manifest_key("documents", "CC-1", "12"),
                  lambda: keys.ledger_key("filtered", "CC-1", 1.5, "a/b"),
                  lambda: keys.release_prefix("demo", "../v1"),
                  lambda: keys.release_latest_key("a/b")):
        with pytest.raises(InvalidKey):
            build()


# What building or splitting a partition key by hand looks like; only `core/keys.py` may.
HAND_BUILT = re.compile(r"""(?:\bp|partition|key)\)?\.(?:split|partition)\(["']\|["']\)|\{c\}\|\{|crawl\W{0,3}\}\|\{""")


def test_no_module_but_keys_builds_or_splits_a_partition_key():
    sources = [p for folder in ("llm_assets", "resources", "benchmarks") for p in (ROOT / folder).rglob("*.py")]
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in sources if p.name != "keys.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if HAND_BUILT.search(line)]
    assert not found, "build partition keys with core.keys.PartitionRef:\n" + "\n".join(found)
    for hand_built in ('f"{crawl}|{shard}"', 'f"{c}|{s}"', "f\"{stop['crawl']}|{stop['shard']}\"", 'p.split("|")',
                       'p.partition.split("|")[0]', 'str(partition_key).partition("|")'):
        assert HAND_BUILT.search(hand_built), hand_built


def test_a_thresholds_key_holds_a_language_label_and_a_fingerprint_only():
    assert keys.thresholds_key("de", "ea017cb25e5cfbce2cc6") == "thresholds/de/ea017cb25e5cfbce2cc6.json"
    assert keys.thresholds_key("de_Latn", "ea017cb2") == "thresholds/de_Latn/ea017cb2.json"
    for language in ("../x", "de/..", "DE", "", "d", "deutsch", "de\n"):
        with pytest.raises(InvalidKey, match=f"invalid language {re.escape(repr(language))}"):
            keys.thresholds_key(language, "ea017cb25e5cfbce2cc6")
    for fingerprint in ("", "../x", "EA017CB2", "abc"):
        with pytest.raises(InvalidKey, match="invalid thresholds fingerprint"):
            keys.thresholds_key("de", fingerprint)


def test_a_runs_label_names_its_crawls():
    from llm_assets.core.keys import crawls_named

    assert crawls_named("CC-A|0001") == crawls_named("CC-A") == crawls_named("CC-A|0000..0031") == ["CC-A"]
    assert crawls_named("CC-A..CC-B") == crawls_named("CC-A..CC-B|0000..0003") == ["CC-A", "CC-B"]
