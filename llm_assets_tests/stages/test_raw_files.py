"""Raw keys as S3 stores them, through real Dagster runs on a real SeaweedFS bucket: names with spaces, non-ASCII
letters, a leading dot or URL punctuation are inventoried, sharded and extracted like any other, and lead back to
their record; keys that cannot be ingested are reported (raw_files metadata, `llm-assets status`), never
skipped silently, and never ingested."""

from __future__ import annotations

import json

import dagster as dg

from llm_assets import cli
from llm_assets.cli.demo import sample_warc
from llm_assets.core.inventory import RawScan, rejected_raw_keys, shard_of
from llm_assets.core.partition import LakeInput
from llm_assets.core.provenance import original_record
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import load_settings
from llm_assets.tools.status import format_summary, lake_status
from llm_assets_tests.conftest import asset_metadata, built
from resources import LakeIOManager, ObjectStore

SHARDS = load_settings().shards
CRAWL = "CC-KEYS"
WARC_NAMES = ["has space.warc.gz", "résumé.warc.gz", ".hidden.warc.gz", "sub folder/a+b%20c?#&.warc.gz"]
JSONL_NAME = "日本.jsonl"


def _materialize(instance, store: ObjectStore, crawl: str, shard: str) -> dg.ExecuteInProcessResult:
    instance.add_dynamic_partitions("crawl", [crawl])
    result = dg.materialize(built("raw_files", "documents"), partition_key=crawl_shard_key(crawl, shard),
                            instance=instance,
                            resources={"store": store, "lake_io_manager": LakeIOManager(store=store)})
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    return result


def test_names_with_spaces_non_ascii_letters_or_a_leading_dot_are_ingested(bucket, instance, store_env, monkeypatch,
                                                                           capsys):
    """Each key is listed by the sensor's scan, goes to its shard, and its documents are extracted with the key as
    their provenance; the original record is fetched back through that key (as `llm-assets record` does)."""
    lake, store = bucket
    keys = [f"raw/{CRAWL}/{name}" for name in WARC_NAMES]
    for seed, key in enumerate(keys):
        lake.put_bytes(key, sample_warc(seed, pages=2))
    jsonl = f"raw/{CRAWL}/{JSONL_NAME}"
    lake.put_bytes(jsonl, "".join(json.dumps({"url": f"https://例え.jp/{i}", "text": f"日本語の文書 {i}"},
                                             ensure_ascii=False) + "\n" for i in range(3)).encode())
    keys.append(jsonl)

    scan = RawScan()
    assert scan.step(lake, SHARDS, budget=1_000)
    assert scan.invalid == []
    assert set(scan.fingerprints()) == {f"{CRAWL}|{shard_of(k, SHARDS)}" for k in keys}

    docs = []
    for shard in sorted({shard_of(k, SHARDS) for k in keys}):
        result = _materialize(instance, store, CRAWL, shard)
        assert asset_metadata(result, "raw_files")["raw_keys_rejected"] == 0
        docs += LakeInput.load(lake, "documents", [(CRAWL, shard)]).scan().collect().to_dicts()
    per_key = {k: [d for d in docs if d["source_key"] == k] for k in keys}
    assert {k: len(v) for k, v in per_key.items()} == {**{k: 2 for k in keys[:-1]}, jsonl: 3}
    assert len({d["doc_id"] for d in docs}) == len(docs)
    for key, rows in per_key.items():
        doc = rows[0]
        record = original_record(lake, key, doc["source_format"], doc["record_offset"], doc["record_skip"])
        assert doc["url"] in record

    monkeypatch.setenv("LLM_ASSETS_BUCKET", lake.bucket)
    doc = per_key[f"raw/{CRAWL}/résumé.warc.gz"][1]
    assert cli.main(["record", doc["doc_id"], "--crawl", CRAWL]) == 0
    out = capsys.readouterr().out
    assert f"raw/{CRAWL}/résumé.warc.gz (warc)" in out and doc["url"] in out


def test_keys_that_cannot_be_ingested_are_reported_with_the_reason(bucket, instance, store_env, monkeypatch,
                                                                   capsys):
    """A control character in a file name: not ingested, listed in the raw_files metadata of the shard it hashes
    to and in `status`. An invalid crawl folder and a key directly under raw/ belong to no partition: `status`
    lists them. Text output escapes the keys; the JSON keeps them exact."""
    lake, store = bucket
    good = f"raw/{CRAWL}/good.warc.gz"
    shard = shard_of(good, SHARDS)
    control = next(k for i in range(1000) if shard_of(k := f"raw/{CRAWL}/bell\x07{i}.warc.gz", SHARDS) == shard)
    outside = ["raw/bad crawl/x.warc.gz", "raw/loose.warc.gz"]
    for seed, key in enumerate([good, control, *outside]):
        lake.put_bytes(key, sample_warc(seed, pages=2))

    result = _materialize(instance, store, CRAWL, shard)
    meta = asset_metadata(result, "raw_files")
    assert meta["raw_keys_rejected"] == 1
    assert meta["dropped_by_reason"] == {"invalid_raw_key": 1}
    (row,) = [r.data for r in meta["rejected_raw_keys"].records]
    assert row["key"] == control and "U+0007" in row["reason"] and repr(control) in row["reason"]
    docs = LakeInput.load(lake, "documents", [(CRAWL, shard)]).scan().collect()
    assert set(docs["source_key"]) == {good}

    status = lake_status(lake, load_settings())
    rejected = status["rejected_raw_keys"]
    assert rejected["count"] == 3
    assert sorted(r["key"] for r in rejected["keys"]) == sorted([control, *outside])
    reasons = {r["key"]: r["reason"] for r in rejected["keys"]}
    assert "invalid crawl name 'bad crawl'" in reasons["raw/bad crawl/x.warc.gz"]
    assert "expected raw/<crawl>/<file>" in reasons["raw/loose.warc.gz"]
    assert "3 raw keys will not be ingested" in format_summary(status)
    assert rejected_raw_keys(lake, limit=1)[0] == 3 and len(rejected_raw_keys(lake, limit=1)[1]) == 1

    monkeypatch.setenv("LLM_ASSETS_BUCKET", lake.bucket)
    assert cli.main(["status", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["rejected_raw_keys"]
    assert printed["count"] == 3 and {r["key"] for r in printed["keys"]} == {control, *outside}
    assert cli.main(["status"]) == 0
    text = capsys.readouterr().out
    assert "3 raw keys will not be ingested" in text and repr(control) in text and "\x07" not in text
