"""Dagster resources of llm-assets: the object store, the lake IO manager."""

from resources.io_manager import LakeIOManager
from resources.object_store import SENSOR_RETRY_BUDGET_S, ObjectStore, S3Endpoint, object_store_from_env

__all__ = ["SENSOR_RETRY_BUDGET_S", "LakeIOManager", "ObjectStore", "S3Endpoint", "object_store_from_env"]
