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
from llm_assets.core.enriched import EnrichedSettings
from llm_assets.core.filtered import FilteredSettings
from llm_assets.core.gates import GateSettings
from llm_assets.core.image_text_pairs import ImagePairsSettings
from llm_assets.core.lake import StoreSettings
from llm_assets.core.ledger import CostSettings
from llm_assets.core.optouts import OptOutSettings
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
SETTINGS_ENV = "LLM_ASSETS_SETTINGS"  # the settings file of a deployment; `--settings PATH` of a command sets it
# The sections, re-exported for the Dagster layer: each lives beside the core code it configures.
__all__ = ["PROJECT_ROOT", "CostSettings", "DedupSettings", "DocumentsSettings", "FilteredSettings", "GateSettings",
           "ImagePairsSettings",
           "ReleaseSettings", "RunnerSettings", "DaskRunnerSettings", "InProcessRunnerSettings", "PoolRunnerSettings",
           "runner_settings", "Settings", "StoreSettings", "TokenizedSettings", "TokenizerTraining",
           "load_settings", "settings_path"]


class SensorSettings(Section):
    interval_seconds: int = Field(default=30, ge=1, description="Seconds between two ticks of the raw-drop sensor.")
    max_keys_per_tick: int = Field(default=100_000, ge=1, description=(
        "Keys listed under `raw/` per tick; a longer listing resumes on the next tick."))


class Settings(Section):
    shards: int = Field(default=4, ge=1, le=9999, description=(
        "Hash buckets per crawl: a raw file's shard is a stable hash of its key. Changing it re-partitions the lake."))
    partitions_per_run: int = Field(default=32, ge=1, le=1024, description=(
        "Crawl × shard partitions one run builds at most (Dagster's `BackfillPolicy.multi_run`): backfills and the "
        "raw-drop sensor build up to this many contiguous shards of a crawl per run (the same shards of crawls dropped "
        "together in one run), one after the other, so a "
        "256-shard crawl takes 8 runs per job rather than 256 (each run costs seconds of Dagster start-up). 1: a run "
        "per partition. Part of no code version."))
    runner: RunnerSettings = Field(default=PoolRunnerSettings(), description=(
        "Where a partition's work units run (`kind`: in this process, a process pool, a Dask cluster); part of no "
        "code version."))
    documents: DocumentsSettings = Field(default=DocumentsSettings(), description=(
        "The `documents` stage: raw files (WARC, WET, JSON Lines, Parquet, HTML...) to extracted text."))
    image_text_pairs: ImagePairsSettings = Field(default=ImagePairsSettings(), description=(
        "The `image_text_pairs` stage: images of the crawled pages with their alt, caption or nearby text."))
    filtered: FilteredSettings = Field(default=FilteredSettings(), description=(
        "The `filtered` stage: the filter chain, per-language values and overrides."))
    opt_outs: OptOutSettings = Field(default=OptOutSettings(), description=(
        "Reservations of text and data mining the `filtered` stage honours: robots.txt rules for AI crawlers, "
        "TDMRep, `noai`, ai.txt."))
    gates: GateSettings = Field(default=GateSettings(), description=(
        "The `filtered` stage's quality gate: a partition whose filtering departs from its crawl's is held back."))
    evals: EvalSetSettings = Field(default=EvalSetSettings(), description=(
        "Evaluation sets for decontamination (the `eval_index` asset and the `decontaminate` block)."))
    quality_classifier: QualityTraining = Field(default=QualityTraining(), description=(
        "The `quality_classifier` asset: a fastText classifier trained on labelled JSON Lines."))
    dedup: DedupSettings = Field(default=DedupSettings(), description=(
        "Deduplication across every shard of a crawl (exact, by URL, MinHash LSH; FineWeb's defaults)."))
    tokenized: TokenizedSettings = Field(default=TokenizedSettings(), description=(
        "The `tokenized` stage: which tokenizer, the EOS token, documents too short to keep."))
    enriched: EnrichedSettings = Field(default=EnrichedSettings(), description=(
        "The `enriched` asset: named entities, keywords and an extractive summary per document."))
    release: ReleaseSettings = Field(default=ReleaseSettings(), description=(
        "The training release the `release` asset writes under `releases/<name>/<version>/`."))
    sensor: SensorSettings = Field(default=SensorSettings(), description=(
        "The raw-drop sensor that finds new files under `raw/`."))
    store: StoreSettings = Field(default=StoreSettings(), description=(
        "How the lake treats its object store (retries, retention); part of no code version."))
    cost: CostSettings = Field(default=CostSettings(), description=(
        "Prices that turn the cost ledger into money (the `cost` asset and the forecasts)."))

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
    return Path(os.environ.get(SETTINGS_ENV, DEFAULT_SETTINGS))


def load_settings() -> Settings:
    """The deployment's settings (the file LLM_ASSETS_SETTINGS names, else the embedded default), read now."""
    return Settings.from_file(settings_path())
