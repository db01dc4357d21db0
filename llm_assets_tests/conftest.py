"""Shared fixtures: a real SeaweedFS server on loopback (free ports, a temporary state folder) and a lake on it."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

import pytest

from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.embedded_store import DEFAULT_PORTS, EmbeddedStore, free_ports
from llm_assets.settings import PROJECT_ROOT

SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


def shared(*parts: str) -> Path:
    """A file of ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data holds the real crawl files)")
    return path


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory) -> EmbeddedStore:
    store = EmbeddedStore(
        state_dir=tmp_path_factory.mktemp("seaweedfs"),
        bucket="llm-assets-test",
        access_key="test" + secrets.token_hex(6),
        secret_key=secrets.token_urlsafe(24),
        ports=dict(zip(DEFAULT_PORTS, free_ports(len(DEFAULT_PORTS)))),
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


@pytest.fixture
def store_env(monkeypatch, seaweed, tmp_path):
    """Environment pointing llm-assets (and Dagster's EnvVar resources) at the test server."""
    monkeypatch.setenv("LLM_ASSETS_S3_ENDPOINT", seaweed.endpoint)
    monkeypatch.setenv("LLM_ASSETS_BUCKET", seaweed.bucket)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    monkeypatch.setenv("LLM_ASSETS_HOME", str(tmp_path / "home"))
    return seaweed


@pytest.fixture
def object_store(store_config, seaweed):
    """The Dagster object-store resource on the test server (credentials passed in, as EnvVar would)."""
    from dagster_aws.s3 import S3Resource

    from resources import ObjectStore

    return ObjectStore(
        s3=S3Resource(endpoint_url=store_config.endpoint, region_name=store_config.region,
                      aws_access_key_id=seaweed.access_key, aws_secret_access_key=seaweed.secret_key),
        bucket=store_config.bucket,
        credentials_file=store_config.credentials_file,
    )


@pytest.fixture
def instance(tmp_path):
    import dagster as dg

    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as inst:
        yield inst
