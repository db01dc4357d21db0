"""The raw-drop sensor on a real bucket: new file, same file again, changed file, removed file, new crawl."""

import json

import dagster as dg

from llm_assets.core.inventory import EMPTY_FINGERPRINT, shard_of
from llm_assets.dagster.raw_sensor import requested_fingerprints
from llm_assets.definitions import build_defs
from llm_assets.settings import Settings, load_settings

SHARDS = load_settings().shards


class Sensor:
    """Ticks the sensor like the daemon does: cursor carried over, crawls registered."""

    def __init__(self, instance, store, settings: Settings | None = None):
        self.instance, self.store, self.cursor = instance, store, None
        self.settings = settings or load_settings()
        self.defs = build_defs(self.settings)

    def tick(self) -> dg.SensorResult:
        with dg.build_sensor_context(instance=self.instance, cursor=self.cursor, definitions=self.defs,
                                     resources={"store": self.store}) as context:
            result = self.defs.resolve_sensor_def("raw_drop_sensor")(context)
        self.cursor = result.cursor
        for request in result.dynamic_partitions_requests:
            self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return result

    def requested(self) -> set[tuple[str, str]]:
        """The partitions with files a tick requests (a new crawl's empty shards are requested too)."""
        return set(with_files(self.tick().run_requests))


def partitions(requests: list) -> dict[tuple[str, str], str]:
    """(crawl, shard) -> its raw fingerprint, for every partition the run requests build."""
    return {tuple(p.split("|")): fp for r in requests for p, fp in requested_fingerprints(r).items()}


def with_files(requests: list) -> dict[tuple[str, str], str]:
    return {p: fp for p, fp in partitions(requests).items() if fp != EMPTY_FINGERPRINT}


def keys_per_tick(n: int) -> Settings:
    settings = load_settings()
    return settings.model_copy(update={"sensor": settings.sensor.model_copy(update={"max_keys_per_tick": n})})


def _shard(key):
    return shard_of(key, SHARDS)


def test_new_file_requests_exactly_its_partition_and_registers_the_crawl(instance, bucket):
    """A new crawl's other shards are requested empty, so that no partition of it stays missing."""
    lake, store = bucket
    sensor = Sensor(instance, store)
    lake.put_bytes("raw/CC-A/one.warc.gz", b"first")
    result = sensor.tick()
    shard = _shard("raw/CC-A/one.warc.gz")
    assert list(with_files(result.run_requests)) == [("CC-A", shard)]
    # the new crawl's shards are contiguous: one run builds them all
    (request,) = result.run_requests
    assert set(partitions([request])) == {("CC-A", s) for s in load_settings().shard_keys()}
    assert {p: fp for p, fp in partitions([request]).items() if p != ("CC-A", shard)} == {
        ("CC-A", s): EMPTY_FINGERPRINT for s in load_settings().shard_keys() if s != shard}
    assert instance.get_dynamic_partitions("crawl") == ["CC-A"]
    lake.put_bytes("raw/CC-A/two.warc.gz", b"second")  # a known crawl: only the partitions whose files changed
    (request,) = sensor.tick().run_requests
    assert request.partition_key.keys_by_dimension == {"crawl": "CC-A", "shard": _shard("raw/CC-A/two.warc.gz")}
    assert request.run_key.startswith(f"CC-A|{_shard('raw/CC-A/two.warc.gz')}|")


def test_same_tick_again_and_identical_reupload_request_nothing(instance, bucket):
    lake, store = bucket
    sensor = Sensor(instance, store)
    lake.put_bytes("raw/CC-A/one.warc.gz", b"first")
    assert len(sensor.requested()) == 1
    assert sensor.requested() == set()
    lake.put_bytes("raw/CC-A/one.warc.gz", b"first")  # identical content: same ETag
    assert sensor.requested() == set()


def test_a_fresh_cursor_reproduces_the_same_run_keys(instance, bucket):
    """Run keys carry the partition's fingerprint: a restarted sensor cannot launch a second run."""
    lake, store = bucket
    lake.put_bytes("raw/CC-A/one.warc.gz", b"first")
    lake.put_bytes("raw/CC-A/two.warc.gz", b"second")
    Sensor(instance, store).tick()  # registers the crawl
    first = Sensor(instance, store).tick().run_requests
    again = Sensor(instance, store).tick().run_requests
    assert [r.run_key for r in first] == [r.run_key for r in again]
    assert partitions(first) == partitions(again)


def test_changed_and_removed_files_request_their_partition(instance, bucket):
    lake, store = bucket
    sensor = Sensor(instance, store)
    keys = [f"raw/CC-A/file-{i}.warc.gz" for i in range(12)]
    for k in keys:
        lake.put_bytes(k, k.encode())
    assert sensor.requested() == {("CC-A", s) for s in {_shard(k) for k in keys}}
    lake.put_bytes(keys[3], b"new content")
    assert sensor.requested() == {("CC-A", _shard(keys[3]))}
    lake.delete([keys[5]])
    assert sensor.requested() == {("CC-A", _shard(keys[5]))}


def test_new_crawl_is_added_and_only_its_partitions_requested(instance, bucket):
    lake, store = bucket
    sensor = Sensor(instance, store)
    lake.put_bytes("raw/CC-A/one.warc.gz", b"a")
    sensor.tick()
    lake.put_bytes("raw/CC-B/two.warc.gz", b"b")
    result = sensor.tick()
    assert {crawl for crawl, _ in partitions(result.run_requests)} == {"CC-B"}
    assert sorted(instance.get_dynamic_partitions("crawl")) == ["CC-A", "CC-B"]


def test_invalid_keys_are_logged_not_fatal(instance, bucket, capsys):
    lake, store = bucket
    lake.put_bytes("raw/bad crawl/x.warc.gz", b"x")
    lake.put_bytes("raw/CC-A/bell\x07.warc.gz", b"x")
    lake.put_bytes("raw/CC-A/ok.warc.gz", b"y")
    assert Sensor(instance, store).requested() == {("CC-A", _shard("raw/CC-A/ok.warc.gz"))}
    logged = [line for line in capsys.readouterr().err.splitlines() if "ignored raw key" in line]  # Dagster's log
    assert len(logged) == 2 and any("'raw/CC-A/bell\\x07.warc.gz'" in m for m in logged)
    assert instance.get_dynamic_partitions("crawl") == ["CC-A"]


def test_names_with_spaces_non_ascii_letters_or_a_leading_dot_request_their_partitions(instance, bucket):
    """Any name the validator allows is a file: its partition is requested with the fingerprint that includes it."""
    lake, store = bucket
    keys = [f"raw/CC-A/{name}" for name in ("has space.warc.gz", "résumé.warc.gz", "日本.jsonl", ".hidden.jsonl")]
    for k in keys:
        lake.put_bytes(k, k.encode())
    sensor = Sensor(instance, store)
    assert sensor.requested() == {("CC-A", _shard(k)) for k in keys}
    lake.put_bytes(keys[1], b"changed")
    assert sensor.requested() == {("CC-A", _shard(keys[1]))}


def test_listing_resumes_across_ticks(instance, bucket, monkeypatch):
    """With a budget smaller than the drop, the pass spans ticks and requests runs only when complete."""
    lake, store = bucket
    keys = [f"raw/CC-A/f{i:02d}.warc.gz" for i in range(10)]
    for k in keys:
        lake.put_bytes(k, k.encode())
    sensor = Sensor(instance, store, keys_per_tick(4))
    ticks = [sensor.tick() for _ in range(3)]
    assert [len(t.run_requests) for t in ticks[:2]] == [0, 0]
    assert json.loads(ticks[1].cursor)["scan"]["after"] == keys[7]
    assert {shard for _, shard in with_files(ticks[2].run_requests)} == {_shard(k) for k in keys}


def test_a_thousand_files_in_bursts_across_three_crawls_are_each_requested_once_across_a_restart(
        instance, bucket, monkeypatch):
    """1,000 files land in 4 bursts over 3 crawls while the listing budget makes passes span several ticks; the
    daemon "restarts" mid-way (a new Sensor object with only the stored cursor). Every file's partition is requested
    after its burst with the fingerprint that includes it, no run key is ever requested twice, and once everything
    is in, ticks request nothing."""
    from concurrent.futures import ThreadPoolExecutor

    from llm_assets.core.inventory import fingerprint

    lake, store = bucket
    crawls = ["CC-2024-10", "CC-2024-18", "CC-2024-22"]
    keys = [f"raw/{crawls[i % 3]}/file-{i:04d}.jsonl" for i in range(1000)]
    sensor = Sensor(instance, store, keys_per_tick(300))
    run_keys: list[str] = []
    for burst in range(4):
        batch = keys[burst * 250:(burst + 1) * 250]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: lake.put_bytes(k, f'{{"text": "{k}"}}\n'.encode()), batch))
        if burst == 2:
            sensor = _restarted(sensor, instance, store)
        requested = {}
        for _ in range(10):  # a pass over raw/ takes ceil(keys / 300) ticks
            result = sensor.tick()
            requested.update(partitions(result.run_requests))
            run_keys += [r.run_key for r in result.run_requests]
            skip = result.skip_reason.skip_message if result.skip_reason else ""
            if result.run_requests or (skip or "").startswith("no new"):
                break
        touched = {(k.split("/")[1], _shard(k)) for k in batch}
        assert set(requested) == touched
        landed = keys[:(burst + 1) * 250]
        for (crawl, shard), fp in requested.items():  # the fingerprint covers every file landed so far
            files = sorted((o for o in lake.list(f"raw/{crawl}/") if _shard(o.key) == shard), key=lambda o: o.key)
            assert {o.key for o in files} == {k for k in landed if k.split("/")[1] == crawl and _shard(k) == shard}
            assert fp == fingerprint(files)
    assert len(run_keys) == len(set(run_keys))
    for _ in range(5):
        assert sensor.tick().run_requests == []
    assert sorted(instance.get_dynamic_partitions("crawl")) == crawls


def _restarted(sensor: "Sensor", instance, store) -> "Sensor":
    """A daemon restart: a new evaluator that only has the cursor the old one stored."""
    fresh = Sensor(instance, store, sensor.settings)
    fresh.cursor = json.loads(json.dumps(sensor.cursor))
    return fresh
