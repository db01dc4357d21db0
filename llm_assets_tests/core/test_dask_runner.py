"""Work units on a real Dask cluster: a scheduler and two worker nodes, separate processes on 127.0.0.1.

A partition built on the cluster equals the in-process build; a worker node killed mid-partition costs nothing;
bad input is quarantined by file as on the other runners, a bug fails the run naming its input, a unit lost to the
store is tried again; an unreachable cluster is named; nothing listens or connects outside loopback; no secret
reaches a task, the engine's logs or Dagster's event log.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import threading
import uuid
from pathlib import Path

import cloudpickle
import dagster as dg
import psutil
import pytest

import llm_assets_tests.cluster_units as cluster_units
from llm_assets.core.dask_runner import DaskRunner
from llm_assets.core.documents import extract_documents
from llm_assets.core.errors import ClusterUnavailable
from llm_assets.core.inventory import shard_of
from llm_assets.core.lake import Lake
from llm_assets.core.partition import LakeInput
from llm_assets.core.units import InProcessRunner, UnitFailed, run_units
from llm_assets.platform.embedded_store import free_ports
from llm_assets.platform.local_cluster import LocalCluster, Node
from llm_assets.platform.runners import runner_for
from llm_assets.settings import DaskRunnerSettings, load_settings, runner_settings
from llm_assets_support.shared_data import shared
from llm_assets_tests.cluster_units import Probe
from llm_assets_tests.core.test_units import CC_2020, RUNNER_FILES, extract_unit, upload
from resources import LakeIOManager, ObjectStore, S3Endpoint

# Workers cannot import the test package: its unit functions travel with the task.
cloudpickle.register_pickle_by_value(cluster_units)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> LocalCluster:
    """The cluster `llm-assets cluster start --nodes 3` runs, under a home of its own. It must start: no skip."""
    home = tmp_path_factory.mktemp("cluster-home")
    cluster = LocalCluster(home / "cluster")
    cluster.start(nodes=3)
    yield cluster
    cluster.stop()
    assert not any(n.alive() for n in _nodes(cluster))


def _nodes(cluster: LocalCluster) -> list[Node]:
    if not cluster.state_file.exists():
        return []
    return [Node(**n) for n in json.loads(cluster.state_file.read_text())["nodes"]]


def runner(cluster: LocalCluster, **options) -> DaskRunner:
    return DaskRunner(cluster.state().address, cluster.security(), **options)


@pytest.fixture
def cluster_home(monkeypatch, cluster):
    """The local cluster is found through LLM_ASSETS_HOME, as `cluster start` leaves it."""
    monkeypatch.setenv("LLM_ASSETS_HOME", str(cluster.state_dir.parent))


def test_runner_for_finds_the_local_cluster_and_names_what_is_missing(cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_ASSETS_HOME", str(cluster.state_dir.parent))
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    found = runner_for(DaskRunnerSettings(max_in_flight=8))
    assert found.address == cluster.state().address and found.security is not None and found.max_in_flight == 8
    monkeypatch.setenv("LLM_ASSETS_HOME", str(tmp_path))  # no cluster there
    with pytest.raises(RuntimeError, match="llm-assets cluster start"):
        runner_for(DaskRunnerSettings())


def test_a_partition_on_the_cluster_equals_the_in_process_build(store_env, seaweed, store_config, instance, crawl,
                                                                 cluster_home, cluster, monkeypatch):
    """lake_job for one crawl × shard, once with units in-process and once on the 3-node cluster, each in a bucket
    of its own: every asset's manifest holds the same rows and the same data version, and the rows are equal."""
    from llm_assets.definitions import build_defs

    warc = shared("warc", CC_2020)
    key = f"raw/{crawl}/{warc.name}"
    shards = load_settings().shards
    shard = shard_of(key, shards)
    # English pages that pass the filter chain, under a name that lands in the same shard
    english = next(k for i in range(1000) if shard_of(k := f"raw/{crawl}/dolma-{i}.warc.gz", shards)
                   == shard)
    partition = dg.MultiPartitionKey({"crawl": crawl, "shard": shard})
    instance.add_dynamic_partitions("crawl", [crawl])
    manifests = {}
    for kind in ("inprocess", "dask"):
        defs = build_defs(load_settings().model_copy(update={"runner": runner_settings(kind=kind)}))
        bucket = f"cluster-{kind}-{uuid.uuid4().hex[:8]}"
        lake = Lake(store_config.__class__(**{**store_config.__dict__, "bucket": bucket}))
        lake.s3.create_bucket(Bucket=bucket)
        lake.put_file(key, warc)
        lake.put_file(english, shared("warc", "dolma__sample-0000.warc.gz"))
        store = ObjectStore(s3=S3Endpoint(endpoint_url=seaweed.endpoint, region_name="us-east-1",
                                          aws_access_key_id=seaweed.access_key,
                                          aws_secret_access_key=seaweed.secret_key),
                            bucket=bucket, credentials_file=store_config.credentials_file)
        job = defs.resolve_job_def("lake_job")
        result = job.execute_in_process(partition_key=partition, instance=instance,
                                        resources={"store": store, "lake_io_manager": LakeIOManager(store=store)})
        assert result.success
        manifests[kind] = {asset: LakeInput.load(lake, asset, [(crawl, shard)])
                           for asset in ("documents", "filtered", "signatures")}
        logs = "\n".join(str(e.message) for e in instance.all_logs(result.run_id))
        assert seaweed.secret_key not in logs and seaweed.access_key not in logs
    for asset, built in manifests["dask"].items():
        reference = manifests["inprocess"][asset]
        assert built.rows == reference.rows > 0, asset
        assert built.data_version == reference.data_version, asset
        sort = "doc_id"
        assert built.scan().collect().sort(sort).equals(reference.scan().collect().sort(sort)), asset
    _assert_no_secret_in_engine_logs(cluster, seaweed)


def _assert_no_secret_in_engine_logs(cluster: LocalCluster, seaweed) -> None:
    logs = "".join(p.read_text(errors="replace") for p in cluster.state_dir.glob("*.log"))
    assert logs  # the nodes do log
    assert seaweed.secret_key not in logs and seaweed.access_key not in logs


def test_units_carry_no_credentials(store_config, crawl, seaweed):
    unit = extract_unit(store_config, crawl, f"raw/{crawl}/x.warc.gz", 1, "etag")
    blob = pickle.dumps(unit) + cloudpickle.dumps(unit)
    assert seaweed.secret_key.encode() not in blob and seaweed.access_key.encode() not in blob


def test_a_worker_node_killed_mid_partition_costs_nothing(tmp_path, store_config, lake, crawl):
    """SIGKILL one of the two worker nodes (worker and nanny) while it runs a unit: the scheduler gives its units
    to the other node, and the results equal an in-process run's."""
    cluster = LocalCluster(tmp_path / "cluster")
    cluster.start(nodes=3)
    try:
        raws = [upload(lake, crawl, name) for name in RUNNER_FILES * 2]
        units = [extract_unit(store_config, crawl, *raw, tag=f"{i}") for i, raw in enumerate(raws)]
        reference = run_units(extract_documents, units, InProcessRunner())
        victim = next(n for n in cluster.state().workers if n.name == "worker-1")
        victim_pids = {p.pid for p in psutil.Process(victim.pid).children(recursive=True)} | {victim.pid}
        started = tmp_path / "started"
        started.mkdir()
        killed = threading.Event()

        def kill_once_the_victim_runs_a_unit():
            while not killed.is_set():
                if any(int(p.name.split("-")[0]) in victim_pids for p in started.iterdir()):
                    _assert_loopback_only(cluster)
                    cluster.kill_node("worker-1")
                    killed.set()
                threading.Event().wait(0.05)

        watcher = threading.Thread(target=kill_once_the_victim_runs_a_unit, daemon=True)
        watcher.start()
        results = runner(cluster, max_in_flight=4).run(cluster_units.announced_extract,
                                                        [cluster_units.Announced(u, str(started)) for u in units])
        killed.set()
        watcher.join()
        assert not psutil.pid_exists(victim.pid) or psutil.Process(victim.pid).status() == psutil.STATUS_ZOMBIE
        assert [(r.unit, r.rows_out, r.dropped, r.errors, r.part) for r in results] == \
            [(r.unit, r.rows_out, r.dropped, r.errors, r.part) for r in reference]
    finally:
        cluster.stop()


def _assert_loopback_only(cluster: LocalCluster) -> None:
    """Every socket of every cluster process (nodes, nannies, workers): listening on and talking to 127.0.0.1."""
    pids = set()
    for node in cluster.state().nodes:
        pids |= {node.pid} | {p.pid for p in psutil.Process(node.pid).children(recursive=True)}
    lines = [line for flags in ("-tanpH", "-uanpH")
             for line in subprocess.run(["ss", flags], capture_output=True, text=True, check=True).stdout.splitlines()
             if any(f"pid={pid}," in line for pid in pids)]
    assert any("LISTEN" in line for line in lines)
    for line in lines:
        local, peer = line.split()[3:5]
        assert local.startswith("127.0.0.1:") and peer.rsplit(":", 1)[0] in ("127.0.0.1", "0.0.0.0", "*"), line


def test_nothing_listens_or_connects_outside_loopback(cluster):
    runner(cluster).run(cluster_units.store_fails_once, [])  # an empty run connects nothing
    _assert_loopback_only(cluster)


def test_bad_input_is_quarantined_by_file_and_a_missing_input_fails_the_run(cluster, store_config, lake, crawl,
                                                                           seaweed):
    good = upload(lake, crawl, "whirlwind__CC-MAIN-2024-22.warc.gz")
    corrupt = upload(lake, crawl, "corrupt.warc.gz", data=b"\x1f\x8b\x08\x00 this is not gzip at all" * 50)
    results = runner(cluster).run(extract_documents,
                                  [extract_unit(store_config, crawl, *raw) for raw in (good, corrupt)])
    assert results[0].rows_out > 0 and results[0].errors == []
    assert results[1].rows_out == 0 and results[1].errors and f"raw/{crawl}/corrupt.warc.gz" in results[1].errors[0]
    gone = extract_unit(store_config, crawl, f"raw/{crawl}/gone.warc.gz", 10, "x")
    with pytest.raises(UnitFailed, match=f"raw/{crawl}/gone.warc.gz"):
        runner(cluster, max_retries=0).run(extract_documents, [extract_unit(store_config, crawl, *good), gone])
    _assert_no_secret_in_engine_logs(cluster, seaweed)


def test_a_unit_lost_to_the_store_is_retried_and_a_bug_is_not(cluster, tmp_path):
    probes = [Probe(str(tmp_path / f"flaky-{i}")) for i in range(3)]
    results = runner(cluster, max_retries=2).run(cluster_units.store_fails_once, probes)
    assert [r.source for r in results] == [p.source for p in probes]
    assert [Path(p.source).read_text() for p in probes] == ["2", "2", "2"]
    with pytest.raises(UnitFailed, match="(?s)bug: ValueError: a bug while processing "):
        runner(cluster, max_retries=2).run(cluster_units.buggy, [Probe(str(tmp_path / "bug"))])
    assert (tmp_path / "bug").read_text() == "1"
    with pytest.raises(UnitFailed, match=r"(?s)once: StoreUnavailable: .*\(failed 1 times\)"):
        runner(cluster, max_retries=0).run(cluster_units.store_fails_once, [Probe(str(tmp_path / "once"))])


def test_an_unreachable_cluster_is_named(cluster):
    (port,) = free_ports(1)
    for address, security in ((f"tls://127.0.0.1:{port}", cluster.security()), (f"tcp://127.0.0.1:{port}", None)):
        with pytest.raises(ClusterUnavailable, match=f"cannot reach the Dask scheduler at {address}"):
            DaskRunner(address, security, connect_timeout_s=2).run(cluster_units.buggy, [Probe("x")])
    with pytest.raises(ClusterUnavailable, match="speaks TLS, but no certificates are configured"):
        DaskRunner(f"tls://127.0.0.1:{port}").run(cluster_units.buggy, [Probe("x")])


def test_a_unit_needing_resources_no_worker_offers_is_refused(cluster):
    with pytest.raises(ClusterUnavailable, match="offers"):
        runner(cluster, num_cpus=64).run(cluster_units.buggy, [Probe("x")])


def test_cluster_cli_start_status_stop(tmp_path, monkeypatch, capsys):
    from llm_assets import cli

    monkeypatch.setenv("LLM_ASSETS_HOME", str(tmp_path))
    assert cli.main(["cluster", "status"]) == 3
    assert cli.main(["cluster", "start", "--nodes", "2"]) == 0
    try:
        assert "scheduler and 1 workers" in capsys.readouterr().out
        assert cli.main(["cluster", "status", "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["running"] and status["workers"] == ["worker-1"] and status["address"].startswith("tls://127.0.0.1:")
    finally:
        assert cli.main(["cluster", "stop"]) == 0
    assert cli.main(["cluster", "status"]) == 3


def test_duplicate_clusters_on_the_cluster_equal_the_single_process_clusters(tmp_path, store_config, lake, crawl):
    """Planted signatures (exact, near, URL, rejected candidates, cross-crawl copies, chains that join only
    across buckets) written to the lake as parts of two crawls: the clustering's units on the cluster, with a
    worker node SIGKILLed as the components phase starts, remove what the single-process clustering does, in the
    parts of 3 keep units."""
    import polars as pl

    from llm_assets.core.clusters import cluster_lake, write_star
    from llm_assets.core.dedup import REMOVED_SCHEMA, find_clusters
    from llm_assets.core.lake import part_key
    from llm_assets.core.units import unit_id
    from llm_assets.settings import DedupSettings
    from llm_assets_tests.core.test_clusters import planted, split_parts, write_signatures

    earlier_crawl = f"{crawl}-A"
    earlier, _ = planted(earlier_crawl, 800, seed=1)
    later, _ = planted(crawl, 1600, seed=2, copies_of=earlier)
    settings = DedupSettings(cross_crawl=True, by_url=True, buckets=6, merge_rows=150, keep_parts=3)
    # a part belongs to one shard
    frames = [frame.with_columns(shard=pl.lit(f"{i % 4:04d}"))
              for i, frame in enumerate(split_parts(later, 4) + split_parts(earlier, 2))]
    parts = write_signatures(lake, frames, crawl)

    cluster = LocalCluster(tmp_path / "cluster")
    cluster.start(nodes=3)
    try:
        dask, killed = runner(cluster, max_in_flight=4), []

        def run(fn, units):
            if fn is write_star and not killed:
                cluster.kill_node("worker-1")
                killed.append("worker-1")
            return run_units(fn, units, dask)

        clusters, done = cluster_lake(store_config, parts, settings, crawl, run,
                                      lambda step, identity: part_key("duplicate_clusters", crawl, "all",
                                                                      unit_id(step, identity)), REMOVED_SCHEMA)
    finally:
        cluster.stop()
    assert killed and len(done.starts) > 1 and [len(done.steps[s]) for s in ("edges", "components", "members",
                                                                                "keep")] == \
        [6, len(done.starts) * (2 * done.rounds - 1), 6, 3]
    whole = find_clusters(pl.concat(frames), settings, crawl)
    removed = lake.scan([r.part for r in done.steps["keep"]]).collect().sort("shard", "doc_id", "source_key")
    assert removed.height > 200 and removed.equals(whole.removed)
    assert set(removed["reason"]) == {"exact", "near", "url", "cross_crawl"}
    assert clusters.removed_by.equals(whole.removed_by) and clusters.sizes.equals(whole.sizes) and \
        clusters.largest.equals(whole.largest)
    assert (clusters.documents, clusters.index_documents, clusters.rejected) == \
        (whole.documents, whole.index_documents, whole.rejected) and clusters.rejected > 0


def test_a_release_sharded_on_the_cluster_equals_the_single_file_release(cluster, lake, crawl, store_config,
                                                                        tmp_path):
    """The release's scatter and shard units on the cluster: its shards, read one after the other, are the
    sequences of the release of the same input written as one file in-process, with the same provenance."""
    import numpy as np

    from llm_assets.core.release import provenance_keys, release_shards
    from llm_assets_tests.core.test_release import build, sequences, tokenized_parts

    partitions = tokenized_parts(lake, crawl)
    single = build(lake, partitions, tmp_path, InProcessRunner())
    sharded = build(lake, partitions, tmp_path, runner(cluster), sequences_per_shard=13)
    assert len(sharded.units) > len(release_shards(sharded.manifest)) > 1
    assert np.array_equal(sequences(lake, single, tmp_path), sequences(lake, sharded, tmp_path))
    assert lake.scan(provenance_keys(single.prefix, single.manifest)).collect().equals(
        lake.scan(provenance_keys(sharded.prefix, sharded.manifest)).collect())


def test_crawl_stats_counted_on_the_cluster_equal_the_whole_crawl(cluster, lake, crawl):
    """crawl_stats' units (one per filtered part) on the cluster: the summed counts are the whole crawl's."""
    from llm_assets.core.crawl_stats import crawl_stats, summarize
    from llm_assets_tests.core.test_crawl_stats import BLOCKS, planted_manifests

    manifests, (kept, rejected) = planted_manifests(lake, crawl)
    stats = crawl_stats(lake.config, manifests, BLOCKS, runner(cluster))
    assert stats.frame().equals(summarize(kept, rejected, kept.num_rows + rejected.num_rows, BLOCKS).frame())
