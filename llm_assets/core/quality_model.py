"""The optional model-based quality filter's classifier: fastText (supervised, word n-grams) trained on labelled
JSON Lines, as DCLM's fastText quality filter is. One line per example, `{"text": ..., "label": "hq"}` (field names
in the settings); gzip or zstd compressed or plain. A line that is not a JSON object with a string text and label is
quarantined, named by file and line, and the other lines still train.

A fixed share of the examples, chosen by a hash of their text (so the split does not move when files are added),
is held out; the model is scored on it at the filter's threshold.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import zstandard
from pydantic import BaseModel, ConfigDict, Field

from llm_assets.core import models

LABEL_PREFIX = "__label__"
MODEL_PREFIX = "models/quality_classifier/"  # <sha256>.bin, content-addressed, never overwritten
LATEST = models.latest_key(MODEL_PREFIX)  # which one the quality_model block uses when it names no file


class QualityTraining(BaseModel):
    """How the classifier is trained. fastText's own defaults except word bigrams (DCLM's setting) hashed into
    200k buckets instead of 2M (an 80 MB model instead of 800 MB, for the same accuracy on up to a few million
    distinct bigrams); one thread and a fixed seed so that the same examples give the same model, byte for byte."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    labels_prefix: str = Field(default="labels/quality/", pattern=r"^labels/(?:[A-Za-z0-9_-]+/)*$", description=(
        "Where labelled JSON Lines are dropped in the bucket, one `{\"text\", \"label\"}` per line."))
    text_field: str = Field(default="text", description="The field holding the text.")
    label_field: str = Field(default="label", description="The field holding the label.")
    positive_label: str = Field(default="hq", description="The label of good documents.")
    holdout: float = Field(default=0.1, ge=0.0, lt=1.0, description=(
        "Share (0..1) of the labelled documents, by a hash of their text, held out for precision and recall."))
    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description=(
        "The score at which held-out precision and recall are reported."))
    epoch: int = Field(default=5, ge=1, description="Training epochs (fastText's default).")
    lr: float = Field(default=0.1, gt=0.0, description="Learning rate (fastText's default).")
    word_ngrams: int = Field(default=2, ge=1, description="Word n-grams (DCLM's bigrams).")
    bucket: int = Field(default=200_000, ge=1, description=(
        "Hashed n-gram rows (fastText: 2M; 200k keeps the model at 80 MB for the same accuracy)."))
    dim: int = Field(default=100, ge=1, description="Vector dimensions (fastText's default).")
    min_count: int = Field(default=1, ge=1, description=(
        "Occurrences a word needs to be in the vocabulary (fastText's default)."))
    seed: int = Field(default=0, description="Seed of the training (with one thread: reproducible).")


@dataclass
class Examples:
    """Labelled examples read from one or more files, and what could not be read."""

    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    quarantined: Counter = field(default_factory=Counter)  # reason -> lines
    errors: list[str] = field(default_factory=list)  # "<file>:<line>: <reason>", the first few

    MAX_ERRORS = 20

    def reject(self, name: str, line: int, reason: str, detail: str = "") -> None:
        self.quarantined[reason] += 1
        if len(self.errors) < self.MAX_ERRORS:
            self.errors.append(f"{name}:{line}: {reason}" + (f" ({detail})" if detail else ""))


def _lines(data: bytes) -> Iterator[bytes]:
    stream: io.BufferedIOBase | zstandard.ZstdDecompressionReader
    if data[:2] == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=io.BytesIO(data))
    elif data[:4] == b"\x28\xb5\x2f\xfd":
        stream = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    else:
        stream = io.BytesIO(data)
    yield from io.BufferedReader(stream)


def read_examples(files: Iterable[tuple[str, bytes]], settings: QualityTraining) -> Examples:
    """Examples from (name, content) pairs of labelled JSON Lines files."""
    out = Examples()
    for name, data in files:
        try:
            for n, line in enumerate(_lines(data), start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    out.reject(name, n, "corrupt_json")
                    continue
                text = obj.get(settings.text_field) if isinstance(obj, dict) else None
                label = obj.get(settings.label_field) if isinstance(obj, dict) else None
                if not isinstance(text, str) or not text.strip():
                    out.reject(name, n, "missing_text")
                elif not isinstance(label, str) or not label or any(c.isspace() for c in label):
                    out.reject(name, n, "bad_label")
                else:
                    out.texts.append(text)
                    out.labels.append(label)
        except (OSError, EOFError, zstandard.ZstdError) as e:
            out.reject(name, 0, "unreadable_file", f"{type(e).__name__}: {e}")  # lines read before it are kept
    return out


def one_line(text: str) -> str:
    """fastText reads one example per line and refuses newlines when predicting."""
    return " ".join(text.split())


def held_out(text: str, share: float) -> bool:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64 < share


@dataclass(frozen=True)
class Evaluation:
    examples: int
    positives: int
    precision: float
    recall: float
    accuracy: float


@dataclass(frozen=True)
class TrainedModel:
    data: bytes
    sha256: str
    train_examples: int
    labels: dict[str, int]  # label -> training examples
    evaluation: Evaluation | None


def positive_scores(model, texts: list[str], positive_label: str) -> list[float]:
    """P(positive label) of each text, batched through fastText."""
    labels, probs = model.predict([one_line(t) for t in texts], k=-1)
    target = LABEL_PREFIX + positive_label
    return [float(next((p for lab, p in zip(ls, ps, strict=True) if lab == target), 0.0))
            for ls, ps in zip(labels, probs, strict=True)]


# fastText initializes only the first tenth of its input matrix when it trains on one thread (DenseMatrix::
# uniformThread splits the matrix in ten blocks, one per thread); the rest is whatever the allocator returns:
# stale heap memory gives a different model per run and, often, "Encountered NaN". A fresh process whose large
# allocations are always fresh (zeroed) pages makes the rest zero: trainable, and the same model every time.
_FIT = """
import json, sys, fasttext
args = json.loads(sys.argv[1])
fasttext.train_supervised(**args["params"]).save_model(args["output"])
"""


def _fit(examples: Path, output: Path, settings: QualityTraining) -> None:
    params = dict(input=str(examples), epoch=settings.epoch, lr=settings.lr, wordNgrams=settings.word_ngrams,
                  bucket=settings.bucket, dim=settings.dim, minCount=settings.min_count, thread=1,
                  seed=settings.seed, verbose=0)
    run = subprocess.run([sys.executable, "-c", _FIT, json.dumps({"params": params, "output": str(output)})],
                         capture_output=True, text=True, env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})
    if run.returncode:
        detail = (run.stderr.strip().splitlines() or ["no message"])[-1]
        raise ValueError(f"fastText training failed: {detail} (lr {settings.lr})")


def train(examples: Examples, settings: QualityTraining) -> TrainedModel:
    """Train on the examples outside the held-out share; score on the rest. Raises ValueError naming what is
    missing when the examples cannot make a classifier."""
    import fasttext

    counts = Counter(examples.labels)
    if settings.positive_label not in counts:
        raise ValueError(f"no example is labelled {settings.positive_label!r} (labels seen: {dict(counts)})")
    if len(counts) < 2:
        raise ValueError(f"a classifier needs two labels; every example is {settings.positive_label!r}")
    split = [held_out(t, settings.holdout) for t in examples.texts]
    train_rows = [(t, lab) for t, lab, h in zip(examples.texts, examples.labels, split, strict=True) if not h]
    test_rows = [(t, lab) for t, lab, h in zip(examples.texts, examples.labels, split, strict=True) if h]
    with tempfile.TemporaryDirectory(prefix="llm-assets-quality-") as tmp:
        path = Path(tmp) / "train.txt"
        path.write_text("".join(f"{LABEL_PREFIX}{lab} {one_line(t)}\n" for t, lab in train_rows), encoding="utf-8")
        _fit(path, Path(tmp) / "model.bin", settings)
        data = (Path(tmp) / "model.bin").read_bytes()
        model = fasttext.load_model(str(Path(tmp) / "model.bin"))
    evaluation = None
    if test_rows:
        scores = positive_scores(model, [t for t, _ in test_rows], settings.positive_label)
        truth = [lab == settings.positive_label for _, lab in test_rows]
        said = [s >= settings.threshold for s in scores]
        tp = sum(t and s for t, s in zip(truth, said, strict=True))
        evaluation = Evaluation(
            examples=len(test_rows), positives=sum(truth),
            precision=round(tp / sum(said), 4) if any(said) else 0.0,
            recall=round(tp / sum(truth), 4) if any(truth) else 0.0,
            accuracy=round(sum(t == s for t, s in zip(truth, said, strict=True)) / len(truth), 4))
    return TrainedModel(data=data, sha256=hashlib.sha256(data).hexdigest(), train_examples=len(train_rows),
                        labels=dict(Counter(lab for _, lab in train_rows)), evaluation=evaluation)


def publish(lake, model: TrainedModel, record: dict) -> str:
    """Store the model under its hash and make it the one the quality_model block uses."""
    return models.publish(lake, MODEL_PREFIX, model.data, ".bin", record)[0]


def latest_model(lake) -> tuple[Path, str]:
    """-> (local path, sha256) of the model `quality_classifier` published last."""
    latest = models.fetch_latest(lake, MODEL_PREFIX, ".bin")
    if latest is None:
        raise ValueError(f"quality_model: no trained model at {lake.url(LATEST)}; materialize quality_classifier "
                         "or set model_path in the quality_model block of filtered.chain")
    return latest


@cache
def load_model(path: str):
    import fasttext

    return fasttext.load_model(path)
