"""Byte-level BPE tokenization with the `tokenizers` library."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer, decoders, pre_tokenizers
from tokenizers import models as bpe_models

from llm_assets.core import models
from llm_assets.core.versions import short


@cache
def load_tokenizer(path: str) -> Tokenizer:
    """A `tokenizer.json` file, or a GPT-2 style folder holding encoder.json/vocab.json and vocab.bpe/merges.txt."""
    p = Path(path)
    if p.is_file():
        return Tokenizer.from_file(str(p))
    if not p.is_dir():
        raise FileNotFoundError(f"tokenizer not found at {p} (settings: tokenized.tokenizer_path)")
    if (p / "tokenizer.json").exists():
        return Tokenizer.from_file(str(p / "tokenizer.json"))
    vocab = next((p / n for n in ("encoder.json", "vocab.json") if (p / n).exists()), None)
    merges = next((p / n for n in ("vocab.bpe", "merges.txt") if (p / n).exists()), None)
    if vocab is None or merges is None:
        raise FileNotFoundError(f"{p} holds neither tokenizer.json nor GPT-2 vocab + merges files")
    tok = Tokenizer(bpe_models.BPE.from_file(str(vocab), str(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def tokenizer_hash(path: str) -> str:
    """A content hash of the tokenizer files, for lineage and code versions."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(f for f in p.iterdir() if f.is_file())
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return short(h.hexdigest())


def train_bytelevel_bpe(texts: list[str], vocab_size: int, special_tokens: list[str], path: Path,
                        min_frequency: int = 0) -> Tokenizer:
    """Train a byte-level BPE on `texts` (deterministic for the same texts) and save it as tokenizer.json."""
    from tokenizers import trainers

    tok = Tokenizer(bpe_models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens), show_progress=False,
                                  min_frequency=min_frequency,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return tok


TOKENIZER_PREFIX = "models/tokenizer/"  # <sha256>.json, content-addressed
TOKENIZER_LATEST = models.latest_key(TOKENIZER_PREFIX)


def sample_texts(lake, parts: list[str], n: int) -> list[str]:
    """A deterministic sample: the `n` documents whose doc_id hashes lowest, in that order. The same documents
    stay in the sample when others are added, unless they are outranked."""
    import polars as pl

    if not parts:
        return []
    return (lake.scan(parts).select("doc_id", "text").with_columns(h=pl.col("doc_id").hash(seed=0))
            .bottom_k(n, by=["h", "doc_id"]).sort("h", "doc_id").collect()["text"].to_list())


def publish_tokenizer(lake, tok: Tokenizer) -> tuple[str, str]:
    """Store the tokenizer as tokenizer.json under its hash and make it the latest. -> (key, sha256)"""
    return models.publish(lake, TOKENIZER_PREFIX, tok.to_str().encode(), ".json")


def resolve_tokenizer(settings, lake):
    """-> (settings, hash): the tokenized settings a run uses and its tokenizer's hash. With `source: train`, the
    tokenizer the `tokenizer` asset published last, fetched once into a local content-addressed cache."""
    if settings.source == "file":
        return settings, tokenizer_hash(str(settings.resolved_path()))
    latest = models.fetch_latest(lake, TOKENIZER_PREFIX, ".json")
    if latest is None:
        raise ValueError(f"tokenized.source is train but no tokenizer was trained ({lake.url(TOKENIZER_LATEST)}): "
                         "materialize the tokenizer asset first")
    path, sha = latest
    return settings.model_copy(update={"tokenizer_path": path}), short(sha)
