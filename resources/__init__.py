"""Dagster resources of llm-assets: the object store, the lake IO manager."""

from resources.io_manager import LakeIOManager
from resources.object_store import ObjectStore, object_store_from_env

__all__ = ["LakeIOManager", "ObjectStore", "object_store_from_env"]
