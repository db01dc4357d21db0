"""Typed pipeline settings, read from one declarative YAML file per deployment.

Each section is defined beside the core code it configures (`core.documents.DocumentsSettings`, the filter chain in
`core.filtered`, ...); this module only composes them into `Settings` and loads the file. Nothing here imports
Dagster: the processing core and the work units take these models as plain values.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import Field

from llm_assets.core.config import PROJECT_ROOT, Section
from llm_assets.core.decontamination import EvalSetSettings
from llm_assets.core.dedup import DedupSettings
from llm_assets.core.documents import DocumentsSettings
from llm_assets.core.enrich import EnrichedSettings
from llm_assets.core.filtered import FilteredSettings
from llm_assets.core.gates import GateSettings
from llm_assets.core.image_text_pairs import ImagePairsSettings
from llm_assets.core.lake import StoreSettings
from llm_assets.core.ledger import CostSettings
from llm_assets.core.quality_model import QualityTraining
from llm_assets.core.release import ReleaseSettings
from llm_assets.core.tokenized import TokenizedSettings, TokenizerTraining
from llm_assets.core.units import (
    DaskRunnerSettings,
    InProcessRunnerSettings,
    PoolRunnerSettings,
    RunnerSettings,
    runner_settings,
)

DEFAULT_SETTINGS = Path(__file__).with_name("settings.yaml")
# The sections, re-exported for the Dagster layer: each lives beside the core code it configures.
__all__ = ["PROJECT_ROOT", "CostSettings", "DedupSettings", "DocumentsSettings", "FilteredSettings", "GateSettings", "ImagePairsSettings",
           "ReleaseSettings", "RunnerSettings", "DaskRunnerSettings", "InProcessRunnerSettings", "PoolRunnerSettings",
           "runner_settings", "Settings", "StoreSettings", "TokenizedSettings", "TokenizerTraining",
           "load_settings", "settings_path"]


class SensorSettings(Section):
    interval_seconds: int = Field(default=30, ge=1)
    max_keys_per_tick: int = Field(default=100_000, ge=1)


class Settings(Section):
    shards: int = Field(default=4, ge=1, le=9999)
    runner: RunnerSettings = PoolRunnerSettings()
    documents: DocumentsSettings = DocumentsSettings()
    image_text_pairs: ImagePairsSettings = ImagePairsSettings()
    filtered: FilteredSettings = FilteredSettings()
    gates: GateSettings = GateSettings()
    evals: EvalSetSettings = EvalSetSettings()
    quality_classifier: QualityTraining = QualityTraining()
    dedup: DedupSettings = DedupSettings()
    tokenized: TokenizedSettings = TokenizedSettings()
    enriched: EnrichedSettings = EnrichedSettings()
    release: ReleaseSettings = ReleaseSettings()
    sensor: SensorSettings = SensorSettings()
    store: StoreSettings = StoreSettings()
    cost: CostSettings = CostSettings()

    @classmethod
    def from_file(cls, path: Path) -> Settings:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except OSError as e:
            raise ValueError(f"cannot read settings file {path}: {e}") from e
        try:
            return cls.model_validate(data)
        except ValueError as e:
            raise ValueError(f"invalid settings in {path}:\n{e}") from e

    def shard_keys(self) -> list[str]:
        return [f"{i:04d}" for i in range(self.shards)]


def settings_path() -> Path:
    return Path(os.environ.get("LLM_ASSETS_SETTINGS", DEFAULT_SETTINGS))


def load_settings() -> Settings:
    """The deployment's settings (the file LLM_ASSETS_SETTINGS names, else the embedded default), read now."""
    return Settings.from_file(settings_path())
