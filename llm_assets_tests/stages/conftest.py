"""Fixtures of the stage tests: a bucket of a test's own on the shared server."""

from __future__ import annotations

import uuid

import pytest

from llm_assets.core.lake import Lake, StoreConfig
from llm_assets_tests.conftest import object_store_on
from resources import ObjectStore


@pytest.fixture
def bucket(store_config, seaweed) -> tuple[Lake, ObjectStore]:
    """A bucket of the test's own (what lists all of raw/, such as status or the raw-drop sensor, sees only the test's
    keys), as a lake and as the Dagster resource."""
    cfg = StoreConfig(**{**store_config.__dict__, "bucket": f"own-{uuid.uuid4().hex[:12]}"})
    lake = Lake(cfg)
    lake.s3.create_bucket(Bucket=cfg.bucket)
    return lake, object_store_on(cfg, seaweed)
