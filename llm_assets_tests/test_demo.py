"""The demo as the README runs it: `make demo` and `make demo-cluster` from a clean state, each in a home of its own,
and a demo whose runs fail.

Each command runs in an environment holding none of the variables that point llm-assets at a store or carry
credentials, so nothing works only because a process happened to inherit them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from llm_assets.settings import PROJECT_ROOT

LLM_ASSETS = str(Path(sys.executable).with_name("llm-assets"))
# What a release holds, byte for byte; its manifest and card also name the run and the time that wrote it.
RUN_SPECIFIC = ("manifest.json", "README.md")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items()
                 if not k.startswith(("AWS_", "LLM_ASSETS_", "DAGSTER_", "DASK_", "MAKE", "MFLAGS"))}
    return {**inherited, "LLM_ASSETS_HOME": str(home), **extra}


@dataclass
class Demo:
    home: Path
    env: dict[str, str]
    result: subprocess.CompletedProcess

    @property
    def out(self) -> str:
        return self.result.stdout

    def release(self) -> dict[str, str]:
        """Every object of the release, by key, as sha256 (the run-specific manifest and card left out)."""
        from llm_assets.core.lake import Lake, StoreConfig

        store = self.home / "store"
        port = json.loads((store / "ports.json").read_text())["s3.port"]
        lake = Lake(StoreConfig(endpoint=f"http://127.0.0.1:{port}", bucket="llm-assets", region="us-east-1",
                                credentials_file=str(store / "credentials.env")))
        return {key: hashlib.sha256(lake.get_bytes(key)).hexdigest() for key in sorted(lake.keys("releases/"))
                if not key.endswith(RUN_SPECIFIC)}


def make(*targets: str, env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *targets], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def run_demo(home: Path, *targets: str) -> Demo:
    env = clean_env(home)
    return Demo(home, env, make(*targets, env=env))


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """The README's two demos, each from a clean state in a home of its own: `make clean && make demo` (the
    process pool) and `make clean && make demo-cluster` (every unit on a local Dask cluster)."""
    homes = {name: tmp_path_factory.mktemp(name) / "state" for name in ("pool", "cluster")}
    started: list[Path] = []
    try:
        out = {}
        for name, target in (("pool", "demo"), ("cluster", "demo-cluster")):
            assert make("clean", env=clean_env(homes[name])).returncode == 0
            started.append(homes[name])
            out[name] = run_demo(homes[name], target)
        yield out
    finally:
        for home in started:
            make("clean", env=clean_env(home), timeout=300)


def _report(demo: Demo) -> str:
    return f"exit {demo.result.returncode}\n--- stdout\n{demo.out[-4000:]}\n--- stderr\n{demo.result.stderr[-4000:]}"


def test_the_cluster_demo_from_a_clean_state_releases_what_the_pool_demo_releases(demos):
    pool, cluster = demos["pool"], demos["cluster"]
    assert pool.result.returncode == 0, _report(pool)
    assert cluster.result.returncode == 0, _report(cluster)
    assert "NoCredentialsError" not in cluster.result.stderr
    assert re.search(r"\d+ work units on DaskRunner", cluster.result.stderr), "no unit ran on the cluster"
    released = pool.release()
    assert any(key.endswith("/data.bin") for key in released), released
    assert cluster.release() == released  # the same version, the same tokens, documents and provenance


def test_the_cluster_workers_were_given_no_credentials(demos):
    """The workers read the store's credentials file each unit names; none is in their environment."""
    cluster = demos["cluster"]
    status = subprocess.run([LLM_ASSETS, "cluster", "status", "--json"], env=cluster.env, capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    workers = [n for n in json.loads(status.stdout)["nodes"] if n["role"] == "worker"]
    assert workers and all(n["alive"] for n in workers)
    for node in workers:
        environ = Path(f"/proc/{node['pid']}/environ").read_bytes().split(b"\0")
        assert not [v for v in environ if v.startswith((b"AWS_ACCESS_KEY_ID=", b"AWS_SECRET_ACCESS_KEY="))]
    stop = make("cluster-stop", env=cluster.env, timeout=300)
    assert stop.returncode == 0 and "cluster stopped" in stop.stdout, stop.stdout + stop.stderr


@pytest.mark.parametrize("which", ["pool", "cluster"])
def test_the_stage_table_comes_after_every_run_the_release_included(demos, which):
    out = demos[which].out
    table = out.index("\nstage ")
    assert out.index("\nrelease_job") < table
    assert out.index("\nrelease s3://") < table
    # every asset the demo built, the release and the (empty) takedown list included; the quality classifier is
    # trained on demand from labels/quality/, not by the demo
    shown = [line for line in out[table:].split("\n\n")[0].splitlines()
             if "not materialized" in line and not line.startswith("quality_classifier ")]
    assert not shown, shown
    assert "FAILED" not in out + demos[which].result.stderr


def test_a_demo_whose_runs_fail_says_so(seaweed, tmp_path):
    """A runner that cannot reach its cluster: every run fails. Each is marked with its first error and its run
    id, nothing is shown of what was not built, and the demo exits non-zero with one line saying so."""
    from llm_assets.core.lake import Lake, StoreConfig
    from llm_assets.embedded_store import free_ports

    bucket = f"demo-fails-{os.getpid()}"
    Lake(StoreConfig(endpoint=seaweed.endpoint, bucket=bucket, region="us-east-1",
                     credentials_file=str(seaweed.credentials_file))).s3.create_bucket(Bucket=bucket)
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"runner:\n  kind: dask\n  address: tcp://127.0.0.1:{free_ports(1)[0]}\n"
                        "  connect_timeout_s: 1\n")
    env = clean_env(tmp_path / "home", LLM_ASSETS_S3_ENDPOINT=seaweed.endpoint, LLM_ASSETS_BUCKET=bucket,
                    AWS_ACCESS_KEY_ID=seaweed.access_key, AWS_SECRET_ACCESS_KEY=seaweed.secret_key,
                    LLM_ASSETS_SETTINGS=str(settings))
    result = subprocess.run([LLM_ASSETS, "demo"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                            timeout=1200, stdin=subprocess.DEVNULL)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    planned = re.findall(r"^\[\d+/\d+\] (lake_job \S+)$", result.stdout, re.MULTILINE)
    marked = re.findall(r"^  FAILED (lake_job \S+): raw_files: ClusterUnavailable: cannot reach the Dask scheduler "
                        r"at tcp://127\.0\.0\.1:\d+.*\n    run ([0-9a-f-]{36}): ", result.stderr, re.MULTILINE)
    said = "\n".join(line for line in result.stderr.splitlines() if line.startswith(("  FAILED", "    run ")))
    assert len(planned) >= 8 and {name for name, _ in marked} == set(planned), said
    # said once each: a demo does not retry its own failures (the stale planner lists them as failed)
    names = re.findall(r"^  FAILED (\S+ \S+):", result.stderr, re.MULTILINE)
    assert len(names) == len(set(names)), said
    assert " (stale)" not in result.stdout
    # no crawl-level partition is built over shards that were never committed
    crawls = sorted({name.split()[1].split("|")[0] for name in planned})
    refused = dict(re.findall(r"^  FAILED crawl_job (\S+): \w+: MissingPartition: \w+ \1: \w+ has no committed "
                              r"partition for shards? ([\d, ]+) of crawl \1, which ha", result.stderr, re.MULTILINE))
    assert sorted(refused) == crawls, said
    rows = {line.split()[0]: line for line in result.stdout[result.stdout.index("\nstage "):].splitlines()[3:] if line}
    for asset in ("crawl_stats", "duplicate_clusters"):
        assert rows[asset].rstrip().endswith(f"0 rows, 0/{len(crawls)} partitions"), rows[asset]
    assert "not materialized" not in rows["takedowns"], rows["takedowns"]  # curation_job built it
    assert "image–text pairs, for example" not in result.stdout and "enriched documents, for" not in result.stdout
    assert "ColumnNotFoundError" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"demo failed: \d+ runs failed \(lake_job ×\d+.*\); each is marked FAILED above with its "
                        r"first error and run id", last), last
