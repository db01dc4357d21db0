"""Fixtures of the stage tests: a bucket of a test's own on the shared server."""

from __future__ import annotations

import uuid

import pytest

from llm_assets.core.lake import Lake, StoreConfig
from resources import ObjectStore, S3Endpoint


@pytest.fixture
def bucket(store_config) -> tuple[Lake, ObjectStore]:
    """A bucket of the test's own (what lists all of raw/, such as status or the raw-drop sensor, sees only the test's
    keys), as a lake and as the Dagster resource."""
    cfg = StoreConfig(**{**store_config.__dict__, "bucket": f"own-{uuid.uuid4().hex[:12]}"})
    lake = Lake(cfg)
    lake.s3.create_bucket(Bucket=cfg.bucket)
    store = ObjectStore(s3=S3Endpoint(endpoint_url=cfg.endpoint, region_name=cfg.region,
                                      aws_access_key_id=lake.credentials.access_key,
                                      aws_secret_access_key=lake.credentials.secret_key),
                        bucket=cfg.bucket)
    return lake, store
