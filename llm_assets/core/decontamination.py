"""Decontamination: which documents share word n-grams with an evaluation set's test text.

As GPT-3 did (Brown et al. 2020, appendix C): text is normalized to lowercase words (what whitespace, punctuation
and symbols separate, as the dedup shingles are), every 13-gram of every eval item is hashed into an index, and a
document is contaminated when at least `min_matches` of its n-grams are in the index. The index is a sorted array
of 64-bit n-gram hashes and, beside each, the eval set it came from: 10 bytes per n-gram, whatever the text, and
one binary search per document n-gram.

The n-gram adapts to the item: an item of at least three times `ngram` words (39) is indexed in `ngram`-grams, a
shorter one in `min_ngram`-grams (8), which survive in a copy with one word in ten changed (a 20-word item with one
word in 15 changed keeps no 13 words in a row). Two sizes, so documents are hashed twice, not once per length. An
item shorter than `min_ngram` words is indexed whole, as one k-gram of its k words: it counts when a document
quotes it in full. Documents are hashed in every n-gram size the index holds.

Scoring is apart from deciding: `contamination` measures (matches, benchmark, span); the filter block decides.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import polars as pl
import regex
import zstandard
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.errors import is_store_error
from llm_assets.core.minhash import shingle_hashes, words
from llm_assets.core.readers import ByteStream, decompressed
from llm_assets.core.versions import digest

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake

SEED = 13  # fixed: an index and the documents it is matched against must hash alike
CONTAMINATED = "contaminated"  # the reason code of a document the decontaminate block drops
NO_INDEX = "none"  # the index version when no eval set is dropped
INDEX_PREFIX = "models/eval_index/"
_WORD = regex.compile(r"[^\s\pP\pS]+")


SET_SUFFIXES = (".jsonl", ".json")  # JSON Lines, or a JSON array of objects
COMPRESSIONS = (".gz", ".zst")  # as raw files: the bytes say which (`readers.decompressed`)


class EvalSet(Section):
    """One eval set's own text fields, e.g. a code benchmark's prompt and solution."""

    name: str = Field(description=(
        "The set's key without the prefix and suffixes: `evals/humaneval.jsonl.gz` is `humaneval`."))
    text_fields: tuple[str, ...] = Field(description="The fields holding this set's test text.")


class EvalSetSettings(Section):
    """Evaluation sets dropped under `evals/` in the bucket (JSON Lines or a JSON array, plain, gzip or zstd): every
    text field of an item is its test text, unless `text_fields` (for every set) or `sets` (for one) narrow it."""

    prefix: str = Field(default="evals/", description=(
        "Where eval sets are dropped in the bucket (JSON Lines or a JSON array, plain, gzip or zstd)."))
    # Every string field by default: a code set's solution and tests are test text as much as its prompt, and a
    # list of field names guessed for every set indexed HumanEval's prompt alone.
    text_fields: tuple[str, ...] = Field(default=(), description=(
        "The fields holding an eval item's test text, for every set; empty: every string field of an item."))
    sets: tuple[EvalSet, ...] = Field(default=(), description=(
        "One set's own text fields, by its name, e.g. `[{name: humaneval, text_fields: [prompt, "
        "canonical_solution]}]`."))
    ngram: int = Field(default=13, ge=1, le=50, description=(
        "Words per n-gram of the eval index for items of three times as many words and more (GPT-3's 13)."))
    # 8: a copy with one word in ten changed keeps runs of nine; no shared web document or software manual is
    # flagged down to 6 (bench-decontamination).
    min_ngram: int = Field(default=8, ge=1, le=50, description=(
        "Words per n-gram for shorter items; an item shorter than this is indexed whole."))

    def fields_of(self, benchmark: str) -> tuple[str, ...]:
        return next((s.text_fields for s in self.sets if s.name == benchmark), self.text_fields)


@dataclass(frozen=True)
class EvalIndex:
    """The n-gram hashes of every eval set, sorted, with the set each came from (an index into `benchmarks`)."""

    ngram: int
    benchmarks: tuple[str, ...]
    hashes: np.ndarray  # uint64, sorted, unique per (hash, benchmark)
    owners: np.ndarray  # uint16, the benchmark of each hash
    lengths: tuple[int, ...]  # the n-gram sizes in the index, longest first (see `item_ngram`)
    fields: tuple[tuple[str, ...], ...] = ()  # per benchmark, the item fields its text came from

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.owners.nbytes)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, hashes=self.hashes, owners=self.owners,
                 meta=np.frombuffer(json.dumps({"ngram": self.ngram, "benchmarks": self.benchmarks,
                                                "lengths": self.lengths, "fields": self.fields}).encode(), np.uint8))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> EvalIndex:
        with np.load(io.BytesIO(data)) as z:
            meta = json.loads(z["meta"].tobytes())
            return cls(meta["ngram"], tuple(meta["benchmarks"]), z["hashes"], z["owners"], tuple(meta["lengths"]),
                       tuple(tuple(f) for f in meta.get("fields", ())))


def eval_items(lines: Iterable[bytes], name: str) -> Iterator[dict]:
    """The JSON object of each line: a line that is not one is an error naming the set and the line, never skipped
    silently."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"eval set {name}, line {number}: not JSON ({e})") from e
        yield _item(item, f"eval set {name}, line {number}")


def eval_texts(lines: Iterable[bytes], fields: tuple[str, ...], name: str) -> Iterator[str]:
    """The test text of each JSON line (its `fields` that are present, joined; empty: every string field)."""
    for item in eval_items(lines, name):
        if text := "\n".join(item[f] for f in text_fields(item, fields)):
            yield text


def _item(item: object, where: str) -> dict:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: not a JSON object")
    return item


def text_fields(item: dict, fields: tuple[str, ...]) -> list[str]:
    """The fields of `item` whose text is test text: those of `fields` it has as strings, or every string field."""
    return [f for f in (fields or item) if isinstance(item.get(f), str)]


@dataclass(frozen=True)
class SetText:
    """One eval set's test texts (an item's fields joined) and the fields they came from, in first-seen order."""

    texts: list[str]
    fields: tuple[str, ...]


def set_texts(raw: ByteStream, fields: tuple[str, ...], name: str) -> SetText:
    """The test texts of one eval set file: JSON Lines or a JSON array of objects, plain, gzip or zstd. A file that
    does not decompress or parse, or none of whose items has one of `fields`, is an error naming it."""
    try:
        stream = decompressed(raw)
        if stream.peek(4096)[:4096].lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
            try:
                loaded = json.load(stream)
            except json.JSONDecodeError as e:
                raise ValueError(f"eval set {name}: not JSON ({e})") from e
            items = [_item(item, f"eval set {name}, item {i}") for i, item in enumerate(loaded, 1)]
        else:
            items = list(eval_items(stream, name))
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as e:
        if is_store_error(e):
            raise
        raise ValueError(f"eval set {name}: cannot decompress ({type(e).__name__}: {e})") from e
    used: dict[str, None] = {}
    texts = []
    for item in items:
        present = text_fields(item, fields)
        used.update(dict.fromkeys(present))
        if text := "\n".join(item[f] for f in present):
            texts.append(text)
    if not texts:
        raise ValueError(f"eval set {name}: no item has a text field ({', '.join(fields) or 'any string field'}); "
                         "`evals.sets` names a set's own fields")
    return SetText(texts, tuple(used))


def item_ngram(words: int, ngram: int, min_ngram: int) -> int:
    """The n-gram an item of `words` words is indexed in (an item shorter than it: one hash of its words)."""
    return ngram if words >= 3 * ngram else min(min_ngram, ngram)


def build_index(sets: dict[str, list[str]], ngram: int = 13, min_ngram: int = 8,
                fields: dict[str, tuple[str, ...]] | None = None) -> EvalIndex:
    """An index of every n-gram of every text of each named eval set, each item in its own n-gram (`item_ngram`);
    `fields` records, per set, where its texts came from."""
    names = tuple(sorted(sets))
    hashes, owners, lengths = [], [], set()
    for owner, name in enumerate(names):
        texts = pl.Series(sets[name], dtype=pl.String)
        counts = words(texts).list.len().to_numpy()
        sizes = np.array([item_ngram(int(k), ngram, min_ngram) for k in counts], np.int64)
        lengths |= {int(k) if k < n else int(n) for k, n in zip(counts, sizes, strict=True) if k > 0}
        h = np.unique(np.concatenate([np.zeros(0, np.uint64)] + [
            shingle_hashes(texts.filter(pl.Series(sizes == size)), int(size), SEED)[0]
            for size in np.unique(sizes)]))  # an item shorter than its n-gram: one hash of its words
        hashes.append(h)
        owners.append(np.full(len(h), owner, np.uint16))
    all_hashes = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    all_owners = np.concatenate(owners) if owners else np.zeros(0, np.uint16)
    order = np.argsort(all_hashes, kind="stable")
    return EvalIndex(ngram, names, all_hashes[order], all_owners[order], tuple(sorted(lengths, reverse=True)),
                     tuple((fields or {}).get(name, ()) for name in names))


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


@dataclass(frozen=True)
class UnusedKey:
    """A key under the eval sets' prefix that is not read, and why."""

    key: str
    size: int
    reason: str

    def to_dict(self) -> dict:
        return {"key": self.key, "size": self.size, "reason": self.reason}


@dataclass(frozen=True)
class EvalKeys:
    sources: list[tuple[str, str]]  # (key, etag) of every eval set read, in key order
    unused: list[UnusedKey]  # every other key under the prefix, with the reason


def eval_keys(lake: Lake, settings: EvalSetSettings) -> EvalKeys:
    """Every key under the prefix, from one listing: the eval sets read, and the keys that are not (none is ignored
    silently). Of two keys of one benchmark (`x.jsonl` and `x.jsonl.gz`), the first in key order is read."""
    sources: list[tuple[str, str]] = []
    unused: list[UnusedKey] = []
    read: dict[str, str] = {}
    for o in sorted(lake.list(settings.prefix), key=lambda o: o.key):
        if o.key.endswith("/") and o.size == 0:  # a console's folder marker: no file
            continue
        name = benchmark_name(o.key, settings.prefix)
        if name is None:
            unused.append(UnusedKey(o.key, o.size, "not an eval set: JSON Lines or JSON is read, named .jsonl or "
                                                   ".json, optionally compressed (.gz, .zst)"))
        elif o.size == 0:
            unused.append(UnusedKey(o.key, o.size, "empty file"))
        elif name in read:
            unused.append(UnusedKey(o.key, o.size, f"benchmark {name} is read from {read[name]}"))
        else:
            read[name] = o.key
            sources.append((o.key, o.etag))
    return EvalKeys(sources, unused)


def eval_sources(lake: Lake, settings: EvalSetSettings) -> list[tuple[str, str]]:
    """(key, etag) of every eval set under the prefix, in key order."""
    return eval_keys(lake, settings).sources


def index_version(settings: EvalSetSettings, sources: list[tuple[str, str]]) -> str:
    """The eval index's identity: its sets' contents (etags) and the settings it is built with."""
    return digest("eval-index", settings.model_dump_json(), *(f"{k}:{e}" for k, e in sources)) if sources else NO_INDEX


def benchmark_name(key: str, prefix: str) -> str | None:
    """`evals/openai-grade-school-math__gsm8k_test.jsonl` -> `openai-grade-school-math__gsm8k_test`, and
    `evals/humaneval.jsonl.gz` -> `humaneval`; None for a key that is not named as an eval set."""
    name = key.removeprefix(prefix)
    name = next((name.removesuffix(c) for c in COMPRESSIONS if name.endswith(c)), name)
    stem = next((name.removesuffix(s) for s in SET_SUFFIXES if name.endswith(s)), "")
    return stem or None


@dataclass(frozen=True)
class StoredIndex:
    version: str
    path: Path | None  # a local copy, None when no eval set is dropped
    benchmarks: tuple[str, ...] = ()
    ngrams: int = 0
    nbytes: int = 0
    built: bool = False  # by this call
    fields: tuple[tuple[str, ...], ...] = ()  # per benchmark, the item fields indexed
    lengths: tuple[int, ...] = ()  # the n-gram sizes


def eval_index(lake: Lake, settings: EvalSetSettings) -> StoredIndex:
    """The index of the eval sets under the prefix now: built and stored under models/eval_index/<version>.npz the
    first time these sets are seen, then fetched once per machine."""
    version = index_version(settings, sources := eval_sources(lake, settings))
    if version == NO_INDEX:
        return StoredIndex(NO_INDEX, None)
    built = False
    if not lake.exists(key := f"{INDEX_PREFIX}{version}.npz"):
        names = {k: cast(str, benchmark_name(k, settings.prefix)) for k, _ in sources}  # named as eval sets
        sets = {name: set_texts(lake.open(k), settings.fields_of(name), k) for k, name in names.items()}
        index = build_index({name: s.texts for name, s in sets.items()}, settings.ngram, settings.min_ngram,
                            {name: s.fields for name, s in sets.items()})
        lake.put_bytes(key, index.to_bytes())
        built = True
    path = _local_copy(lake, version)
    assert path is not None
    index = load_index(str(path))
    return StoredIndex(version, path, index.benchmarks, len(index.hashes), index.nbytes, built, index.fields,
                       index.lengths)


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
