"""Decontamination: which documents share word n-grams with an evaluation set's test text.

As GPT-3 did (Brown et al. 2020, appendix C): text is normalized to lowercase words (what whitespace, punctuation
and symbols separate, as the dedup shingles are), every 13-gram of every eval item is hashed into an index, and a
document is contaminated when at least `min_matches` of its 13-grams are in the index. The index is a sorted array
of 64-bit n-gram hashes and, beside each, the eval set it came from: 10 bytes per n-gram, whatever the text, and
one binary search per document n-gram. An eval item shorter than n words is indexed whole, as one k-gram of its k
words, and documents are also hashed in k-grams for each such k: a short question counts when a document quotes it
in full.

Scoring is apart from deciding: `contamination` measures (matches, benchmark, span); the filter block decides.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import regex
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.minhash import shingle_hashes, words
from llm_assets.core.versions import digest

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake

SEED = 13  # fixed: an index and the documents it is matched against must hash alike
CONTAMINATED = "contaminated"  # the reason code of a document the decontaminate block drops
NO_INDEX = "none"  # the index version when no eval set is dropped
INDEX_PREFIX = "models/eval_index/"
_WORD = regex.compile(r"[^\s\pP\pS]+")


class EvalSetSettings(Section):
    """Evaluation sets dropped under `evals/` in the bucket (JSON Lines): which fields hold their test text."""

    prefix: str = "evals/"
    text_fields: tuple[str, ...] = ("question", "answer", "text", "prompt", "completion")
    ngram: int = Field(default=13, ge=1, le=50)


@dataclass(frozen=True)
class EvalIndex:
    """The n-gram hashes of every eval set, sorted, with the set each came from (an index into `benchmarks`)."""

    ngram: int
    benchmarks: tuple[str, ...]
    hashes: np.ndarray  # uint64, sorted, unique per (hash, benchmark)
    owners: np.ndarray  # uint16, the benchmark of each hash
    lengths: tuple[int, ...]  # the n-gram sizes in the index: `ngram`, and the word counts of shorter items

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.owners.nbytes)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, hashes=self.hashes, owners=self.owners,
                 meta=np.frombuffer(json.dumps({"ngram": self.ngram, "benchmarks": self.benchmarks,
                                                "lengths": self.lengths}).encode(), np.uint8))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> EvalIndex:
        with np.load(io.BytesIO(data)) as z:
            meta = json.loads(z["meta"].tobytes())
            return cls(meta["ngram"], tuple(meta["benchmarks"]), z["hashes"], z["owners"], tuple(meta["lengths"]))


def eval_texts(lines: Iterable[bytes], fields: tuple[str, ...], name: str) -> Iterator[str]:
    """The test text of each JSON line (its `fields` that are present, joined): a line that is not a JSON object
    is an error naming the set and the line, never skipped silently."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"eval set {name}, line {number}: not JSON ({e})") from e
        if not isinstance(item, dict):
            raise ValueError(f"eval set {name}, line {number}: not a JSON object")
        text = "\n".join(str(item[f]) for f in fields if isinstance(item.get(f), str))
        if text:
            yield text


def build_index(sets: dict[str, list[str]], ngram: int = 13) -> EvalIndex:
    """An index of every n-gram of every text of each named eval set."""
    names = tuple(sorted(sets))
    hashes, owners, lengths = [], [], {ngram}
    for owner, name in enumerate(names):
        texts = pl.Series(sets[name], dtype=pl.String)
        h, _ = shingle_hashes(texts, ngram, SEED)  # an item shorter than n words: one hash of its words
        lengths |= {k for k in words(texts).list.len().to_list() if 0 < k < ngram}
        h = np.unique(h)
        hashes.append(h)
        owners.append(np.full(len(h), owner, np.uint16))
    all_hashes = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    all_owners = np.concatenate(owners) if owners else np.zeros(0, np.uint16)
    order = np.argsort(all_hashes, kind="stable")
    return EvalIndex(ngram, names, all_hashes[order], all_owners[order], tuple(sorted(lengths, reverse=True)))


CONTAMINATION_SCHEMA = {"contaminated_ngrams": pl.UInt32, "benchmark": pl.String, "match_start": pl.Int32,
                        "match_end": pl.Int32}


def contamination(index: EvalIndex, texts: pl.Series) -> pl.DataFrame:
    """Per text: how many of its n-grams are in the index, the benchmark of the first one found, and the character
    span (start, end) of that n-gram in the text; 0 and nulls when none."""
    texts = texts.fill_null("")
    n = len(texts)
    matches = np.zeros(n, np.uint32)
    benchmark: list[str | None] = [None] * n
    start: list[int | None] = [None] * n
    end: list[int | None] = [None] * n
    for size in index.lengths:  # the longest first: the span of a full n-gram is the one reported
        hashes, counts = shingle_hashes(texts, size, SEED)
        if not len(index.hashes) or not len(hashes):
            continue
        pos = np.minimum(np.searchsorted(index.hashes, hashes), len(index.hashes) - 1)
        found = index.hashes[pos] == hashes
        doc = np.repeat(np.arange(n), counts)
        matches += np.bincount(doc[found], minlength=n).astype(np.uint32)
        offsets = np.cumsum(counts) - counts
        for d in np.unique(doc[found]):  # the few contaminated documents only
            if benchmark[d] is not None:
                continue
            first = int(np.nonzero(found[offsets[d]:offsets[d] + counts[d]])[0][0])
            benchmark[d] = index.benchmarks[index.owners[pos[offsets[d] + first]]]
            start[d], end[d] = _span(texts[int(d)], first, size)
    return pl.DataFrame({"contaminated_ngrams": matches, "benchmark": benchmark, "match_start": start,
                         "match_end": end}, schema=CONTAMINATION_SCHEMA)


def _span(text: str, first_word: int, ngram: int) -> tuple[int | None, int | None]:
    """The characters of words first_word .. first_word + ngram - 1 (as the n-gram hashing splits them)."""
    found = list(_WORD.finditer(text.lower()))
    if not found:
        return None, None
    last = min(first_word + ngram, len(found)) - 1
    return found[min(first_word, len(found) - 1)].start(), found[last].end()


def eval_sources(lake: Lake, settings: EvalSetSettings) -> list[tuple[str, str]]:
    """(key, etag) of every eval set under the prefix, in key order."""
    return sorted((o.key, o.etag) for o in lake.list(settings.prefix) if o.key.endswith((".jsonl", ".json")))


def index_version(settings: EvalSetSettings, sources: list[tuple[str, str]]) -> str:
    """The eval index's identity: its sets' contents (etags) and the settings it is built with."""
    return digest("eval-index", settings.model_dump_json(), *(f"{k}:{e}" for k, e in sources)) if sources else NO_INDEX


def benchmark_name(key: str, prefix: str) -> str:
    """`evals/openai-grade-school-math__gsm8k_test.jsonl` -> `openai-grade-school-math__gsm8k_test`."""
    return key.removeprefix(prefix).rsplit(".", 1)[0]


@dataclass(frozen=True)
class StoredIndex:
    version: str
    path: Path | None  # a local copy, None when no eval set is dropped
    benchmarks: tuple[str, ...] = ()
    ngrams: int = 0
    nbytes: int = 0
    built: bool = False  # by this call


def eval_index(lake: Lake, settings: EvalSetSettings) -> StoredIndex:
    """The index of the eval sets under the prefix now: built and stored under models/eval_index/<version>.npz the
    first time these sets are seen, then fetched once per machine."""
    version = index_version(settings, sources := eval_sources(lake, settings))
    if version == NO_INDEX:
        return StoredIndex(NO_INDEX, None)
    built = False
    if not lake.exists(key := f"{INDEX_PREFIX}{version}.npz"):
        sets = {benchmark_name(k, settings.prefix): list(eval_texts(lake.get_bytes(k).splitlines(),
                                                                    settings.text_fields, k))
                for k, _ in sources}
        lake.put_bytes(key, build_index(sets, settings.ngram).to_bytes())
        built = True
    path = _local_copy(lake, version)
    assert path is not None
    index = load_index(str(path))
    return StoredIndex(version, path, index.benchmarks, len(index.hashes), index.nbytes, built)


def _local_copy(lake: Lake, version: str) -> Path | None:
    """The stored index of that version, fetched once into a local cache the processes of a machine share."""
    local = Path(os.environ.get("LLM_ASSETS_MODEL_CACHE", Path(tempfile.gettempdir()) / "llm-assets-models"))
    path = local / f"eval_index-{version}.npz"
    if not path.exists():
        if not lake.exists(key := f"{INDEX_PREFIX}{version}.npz"):
            return None
        local.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(lake.get_bytes(key))
        tmp.replace(path)  # atomic: a concurrent reader sees the whole file or none
    return path


@cache
def load_index(path: str) -> EvalIndex:
    return EvalIndex.from_bytes(Path(path).read_bytes())


def stored_index(lake: Lake, version: str) -> EvalIndex | None:
    """An index built earlier, by version (None for no index, or when it is gone from the store)."""
    path = None if version == NO_INDEX else _local_copy(lake, version)
    return load_index(str(path)) if path is not None else None


def contaminated_ids(index: EvalIndex | None, docs: pl.DataFrame, min_matches: int) -> list[str]:
    """`benchmark:doc_id` of every document (doc_id, text) sharing at least `min_matches` n-grams with the index."""
    if index is None or docs.is_empty():
        return []
    found = pl.concat([docs.select("doc_id"), contamination(index, docs["text"])], how="horizontal")
    hits = found.filter(pl.col("contaminated_ngrams") >= min_matches)
    return sorted(f"{b}:{d}" for d, b in hits.select("doc_id", "benchmark").iter_rows())
