"""Typed pipeline settings, read from one declarative YAML file per deployment.

Nothing here imports Dagster: the processing core and the work units take these models as plain values.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from llm_assets.core import filters
from llm_assets.core.lake import RetryPolicy
from llm_assets.core.minhash import MinHasher
from llm_assets.core.quality_model import QualityTraining

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SETTINGS = Path(__file__).with_name("settings.yaml")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def fingerprint(self) -> str:
        """A short stable hash of the effective values, for code versions."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


class RunnerSettings(_Section):
    """Where a partition's work units run: in this process, in a local process pool, or on a Dask cluster.

    The runner never changes what a unit computes, so it is part of no code version."""

    kind: Literal["inprocess", "pool", "dask"] = "pool"
    workers: int = Field(default=2, ge=1)  # pool: processes
    # dask: the scheduler, e.g. tls://10.0.0.5:8786. Unset: DASK_SCHEDULER_ADDRESS, else the cluster that
    # `llm-assets cluster start` runs on this machine.
    address: str | None = None
    # dask: what one unit needs, as worker resources (workers declare them: `dask worker --resources
    # "CPU=4,MEMORY=16e9"`). Unset: one unit per worker thread.
    num_cpus: float | None = Field(default=None, gt=0)
    memory_bytes: int | None = Field(default=None, gt=0)
    max_retries: int = Field(default=3, ge=0)  # dask: resubmissions of a unit lost to a node or the store
    max_in_flight: int = Field(default=64, ge=1)  # dask: units submitted and not yet collected
    connect_timeout_s: float = Field(default=30.0, gt=0)


class DocumentsSettings(_Section):
    extractor: Literal["trafilatura", "resiliparse"] = "trafilatura"
    # A larger record is quarantined (oversized) unread: an HTML or WET payload, a JSON line or array element, a
    # Parquet text.
    max_payload_bytes: int = Field(default=5_000_000, gt=0)
    # CPU seconds of the extracting thread per page, so that other processes' load does not count. CPU time still
    # grows with contention for caches and memory (the slowest shared page: 2.2 CPU-s on a quiet machine, 4.9 with
    # the other core busy), hence far above it.
    extract_timeout_s: float = Field(default=30.0, gt=0)
    max_html_chars: int = Field(default=2_000_000, gt=0)
    min_text_chars: int = Field(default=1, ge=0)
    text_field: str = "text"
    url_field: str = "url"
    id_field: str = "id"


class ImagePairsSettings(_Section):
    min_text_chars: int = Field(default=5, ge=0)
    nearby_chars: int = Field(default=300, ge=0)
    min_side_px: int = Field(default=32, ge=0)
    max_images_per_page: int = Field(default=100, ge=1)


class FilteredSettings(_Section):
    """The filter chain, in the order it runs (FineWeb's order, then the optional blocks, PII masking last)."""

    normalize: filters.Normalize = filters.Normalize()
    url: filters.URLFilter = filters.URLFilter()
    language: filters.LanguageFilter = filters.LanguageFilter()
    gopher_repetition: filters.GopherRepetition = filters.GopherRepetition()
    gopher_quality: filters.GopherQuality = filters.GopherQuality()
    c4_quality: filters.C4Quality = filters.C4Quality(filter_no_terminal_punct=False)  # as FineWeb runs it
    fineweb_quality: filters.FineWebQuality = filters.FineWebQuality()
    c4_badwords: filters.C4BadWords = filters.C4BadWords()
    profanity: filters.ProfanityFilter = filters.ProfanityFilter()
    vocabulary: filters.DomainVocabulary = filters.DomainVocabulary()
    quality_model: filters.QualityModelFilter = filters.QualityModelFilter()
    pii: filters.PIIMasker = filters.PIIMasker()

    def chain(self) -> list[filters.Block]:
        """The enabled blocks, in order."""
        return [block for name in type(self).model_fields if (block := getattr(self, name)).enabled]


class DedupSettings(_Section):
    """FineWeb's MinHash deduplication defaults: word 5-grams, 14 bands × 8 rows (112 hashes)."""

    exact: bool = True  # same normalized text (lowercase words, punctuation and spacing ignored)
    by_url: bool = False  # also one document per URL
    near: bool = True  # MinHash LSH
    ngram: int = Field(default=5, ge=1)
    bands: int = Field(default=14, ge=1)
    rows: int = Field(default=8, ge=1)
    seed: int = 1
    keep: Literal["earliest", "longest", "first"] = "earliest"  # fetch time, text length, or doc_id order
    cross_crawl: bool = False  # also drop documents already in an earlier crawl
    crawl_order: tuple[str, ...] = ()  # earliest first; empty: crawl names sorted (Common Crawl's sort by date)

    def hasher(self) -> MinHasher:
        return MinHasher(bands=self.bands, rows=self.rows, ngram=self.ngram, seed=self.seed)

    def earlier_crawls(self, crawl: str, known: list[str]) -> list[str]:
        """The crawls `crawl` is deduplicated against, in order, when `cross_crawl` is on."""
        if not self.cross_crawl:
            return []
        order = list(self.crawl_order) or sorted(known)
        return order[: order.index(crawl)] if crawl in order else []


class TokenizerTraining(_Section):
    """A byte-level BPE trained by the `tokenizer` asset on a deterministic sample of deduplicated documents."""

    vocab_size: int = Field(default=32_000, ge=260)
    min_frequency: int = Field(default=2, ge=1)
    special_tokens: tuple[str, ...] = ("<|endoftext|>",)
    sample_documents: int = Field(default=100_000, ge=1)  # the documents whose doc_id hashes lowest
    crawls: tuple[str, ...] = ()  # empty: every crawl


class TokenizedSettings(_Section):
    source: Literal["file", "train"] = "file"  # the tokenizer at tokenizer_path, or one the tokenizer asset trains
    tokenizer_path: Path = Path("../shared/data/tokenizers/gpt2")
    eos_token: str = "<|endoftext|>"
    train: TokenizerTraining = TokenizerTraining()

    def resolved_path(self) -> Path:
        path = self.tokenizer_path
        return path if path.is_absolute() else (PROJECT_ROOT / path).resolve()


class ReleaseSettings(_Section):
    """One training release: which crawls, how sequences are packed, the shuffle seed. The tokenizer is the
    tokenized stage's. Another config is another version; a version is never rewritten."""

    name: str = Field(default="demo", pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    crawls: tuple[str, ...] = ()  # empty: every crawl
    context: int = Field(default=2048, ge=1)
    packing: Literal["bfd", "concat"] = "bfd"  # best-fit-decreasing of whole documents, or concatenate and chunk
    seed: int = 0
    include_text: bool = True  # the curated text as Parquet too, readable by Hugging Face datasets
    length_buckets: tuple[int, ...] = ()  # token-count boundaries: documents are packed only with their bucket


class StoreSettings(_Section):
    """How the lake treats its object store. Not part of any code version: it changes how long a run waits for
    a failing store, never what a partition holds."""

    retry_budget_s: float = Field(default=300.0, gt=0)  # keep retrying a failing store this long, then fail
    retry_base_s: float = Field(default=0.5, gt=0)  # first backoff; doubles up to retry_max_s, with full jitter
    retry_max_s: float = Field(default=20.0, gt=0)
    retention_hours: float = Field(default=24.0, ge=0)  # superseded parts outlive the manifest that dropped them

    def retry(self) -> RetryPolicy:
        return RetryPolicy(budget_s=self.retry_budget_s, base_s=self.retry_base_s, max_s=self.retry_max_s)


class SensorSettings(_Section):
    interval_seconds: int = Field(default=30, ge=1)
    max_keys_per_tick: int = Field(default=100_000, ge=1)


class Settings(_Section):
    shards: int = Field(default=4, ge=1, le=9999)
    runner: RunnerSettings = RunnerSettings()
    documents: DocumentsSettings = DocumentsSettings()
    image_text_pairs: ImagePairsSettings = ImagePairsSettings()
    filtered: FilteredSettings = FilteredSettings()
    quality_classifier: QualityTraining = QualityTraining()
    dedup: DedupSettings = DedupSettings()
    tokenized: TokenizedSettings = TokenizedSettings()
    release: ReleaseSettings = ReleaseSettings()
    sensor: SensorSettings = SensorSettings()
    store: StoreSettings = StoreSettings()

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


@cache
def load_settings() -> Settings:
    """The deployment's settings (LLM_ASSETS_SETTINGS, else the embedded default)."""
    return Settings.from_file(settings_path())
