"""Shared fixtures: a real SeaweedFS server on loopback (free ports, a temporary state folder) and a lake on it."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

import pytest

from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.platform.embedded_store import DEFAULT_PORTS, EmbeddedStore, free_ports
from llm_assets.settings import DEFAULT_SETTINGS, Settings, load_settings


def built(*names: str, settings: Settings | None = None) -> list:
    """The named assets of the code location, built from `settings` (the default file's when None)."""
    from llm_assets.definitions import build_assets

    by_name = {a.key.path[-1]: a for a in build_assets(settings or load_settings())}
    return [by_name[n] for n in names]


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory) -> EmbeddedStore:
    store = EmbeddedStore(
        state_dir=tmp_path_factory.mktemp("seaweedfs"),
        bucket="llm-assets-test",
        access_key="test" + secrets.token_hex(6),
        secret_key=secrets.token_urlsafe(24),
        ports=dict(zip(DEFAULT_PORTS, free_ports(len(DEFAULT_PORTS)), strict=True)),
    )
    store.start()
    yield store
    store.stop()


@pytest.fixture(scope="session")
def store_config(seaweed) -> StoreConfig:
    return StoreConfig(endpoint=seaweed.endpoint, bucket=seaweed.bucket, region="us-east-1",
                       credentials_file=str(seaweed.credentials_file))


@pytest.fixture
def lake(store_config) -> Lake:
    """A lake on the shared server; each test gets its own crawl-name prefix via `crawl`."""
    return Lake(store_config)


@pytest.fixture
def crawl() -> str:
    """A crawl name no other test uses, so tests sharing the server never see each other's keys."""
    return f"TEST-{uuid.uuid4().hex[:10]}"


def point_at(monkeypatch: pytest.MonkeyPatch, seaweed: EmbeddedStore, home: Path) -> None:
    """Environment pointing llm-assets (and Dagster's EnvVar resources) at the test server."""
    monkeypatch.setenv("LLM_ASSETS_S3_ENDPOINT", seaweed.endpoint)
    monkeypatch.setenv("LLM_ASSETS_BUCKET", seaweed.bucket)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    monkeypatch.setenv("LLM_ASSETS_HOME", str(home))


def english_only_settings(path: Path) -> Path:
    """The default settings file with FineWeb's keep list, English only, written to `path`: for the tests that check
    FineWeb's English outcome on the shared crawl (the default keeps several languages)."""
    import yaml

    data = yaml.safe_load(DEFAULT_SETTINGS.read_text())
    (language,) = [b for b in data["filtered"]["chain"] if b["block"] == "language"]
    language["languages"] = ["en"]
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


@pytest.fixture
def store_env(monkeypatch, seaweed, tmp_path):
    point_at(monkeypatch, seaweed, tmp_path / "home")
    return seaweed


def object_store_on(store_config: StoreConfig, seaweed: EmbeddedStore):
    """The Dagster object-store resource on the test server (credentials passed in, as EnvVar would)."""

    from resources import ObjectStore, S3Endpoint

    return ObjectStore(
        s3=S3Endpoint(endpoint_url=store_config.endpoint, region_name=store_config.region,
                      aws_access_key_id=seaweed.access_key, aws_secret_access_key=seaweed.secret_key),
        bucket=store_config.bucket,
        credentials_file=store_config.credentials_file,
    )


@pytest.fixture
def bucket(store_config, seaweed):
    """A bucket of the test's own (what lists all of raw/, such as status or the raw-drop sensor, sees only the test's
    keys), as a lake and as the Dagster resource."""
    cfg = StoreConfig(**{**store_config.__dict__, "bucket": f"own-{uuid.uuid4().hex[:12]}"})
    lake = Lake(cfg)
    lake.s3.create_bucket(Bucket=cfg.bucket)
    return lake, object_store_on(cfg, seaweed)


@pytest.fixture
def object_store(store_config, seaweed):
    return object_store_on(store_config, seaweed)


@pytest.fixture
def instance(tmp_path):
    import dagster as dg

    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as inst:
        yield inst


# Tests that start a server of their own (an object store, a Dagster deployment, a cluster) rather than through
# the fixtures above.
_SERVER_MODULES = {"test_embedded_store", "test_lake_outage", "test_store_security", "test_chaos", "test_dask_runner",
                   "test_instance_run_monitoring", "test_demo", "test_deploy", "test_crawl"}
_SERVER_FIXTURES = {"seaweed", "instance"}


def pytest_addoption(parser):
    parser.addoption("--update-snapshots", action="store_true", default=False,
                     help="rewrite the generated snapshots (llm_assets_tests/snapshots/) instead of comparing")


# The modules that take longest, longest first: `make test` hands whole modules to its workers (`--dist loadfile`,
# so a module-scoped deployment is built once), in collection order, and one of these begun last would end the suite
# alone on one worker. Most of their time is spent waiting on a daemon's ticks or a run's process, not on a core.
_LONGEST_FIRST = ("test_demo", "test_crawl", "test_freshness", "test_deploy", "test_one_stale", "test_chaos",
                  "test_stale", "test_parity_languages", "test_dask_runner", "test_instance_run_monitoring",
                  "test_takedown")


def _module(item: pytest.Item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1]


def pytest_collection_modifyitems(items):
    """Marks each test `servers` (a real object store, Dagster instance or cluster on loopback), or else `core` (the
    processing core alone: `pytest -m core` runs in seconds) unless it is marked `corpus` (the core over whole real
    files or datatrove's blocks: minutes). Then puts the longest modules first (a stable sort: the order within a
    module and among the others is kept)."""
    items.sort(key=lambda item: _LONGEST_FIRST.index(m) if (m := _module(item)) in _LONGEST_FIRST
               else len(_LONGEST_FIRST))
    for item in items:
        if _module(item) in _SERVER_MODULES or _SERVER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.servers)
        elif item.get_closest_marker("corpus") is None:
            item.add_marker(pytest.mark.core)


def asset_metadata(result, asset: str) -> dict:
    """The metadata values of the one materialization of `asset` in a Dagster result."""
    import dagster as dg

    (m,) = [e.materialization for e in result.get_asset_materialization_events()
            if e.materialization.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in m.metadata.items()}


def png_size(markdown: str) -> tuple[int, int]:
    """(width, height) of the (first) PNG a Markdown image embeds as base64: what the metadata panel will show."""
    import base64
    import struct

    data = base64.b64decode(markdown.split("base64,", 1)[1].split(")", 1)[0], validate=True)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])
