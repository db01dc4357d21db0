from __future__ import annotations

from pathlib import Path

from llm_assets.core.filtered import STAGE_VERSION, FilteredSettings, file_sha256
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec


def _model_block(settings: FilteredSettings):
    return next((b for b in settings.blocks() if b.name == "quality_model"), None)


def model_file(settings: FilteredSettings) -> str | None:
    """The model file the quality_model block names, when it is on and names one."""
    block = _model_block(settings)
    return block.model_path if block is not None else None


def uses_trained_model(settings: FilteredSettings) -> bool:
    """The quality_model block, when on and naming no file, filters with the model quality_classifier trained
    (whose data version then marks this stage stale)."""
    return _model_block(settings) is not None and not model_file(settings)


def _file_version(path: str) -> str:
    try:
        return file_sha256(Path(path))
    except ValueError:
        return "unreadable"  # the run reports the file by name


def _version(settings) -> str:
    """The chain in order with every threshold, and the bytes of a model file it names."""
    path = model_file(settings.filtered)
    return code_version(STAGE_VERSION, settings.filtered.fingerprint(), *([_file_version(path)] if path else []))


SPEC = StageSpec("filtered", "shard", ("documents",), version=_version)
