"""Byte-level BPE tokenization with the `tokenizers` library, and tiktoken's encoder where it gives the same ids."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
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


# Texts both encoders must agree on before tiktoken's is used: contractions, digits, runs of spaces and newlines,
# accents, scripts without spaces, emoji, bytes that are not a whole character in UTF-8 alone.
_PROBES = (
    "Hello world! It's 2026, isn't it? They'll've  gone   home.\n\n\tTabs\r\nand CRLF ",
    "naïve café — “quotes” ½ 3.14159 1,000,000 x²  ",
    "日本語のテキスト、中文文本。한국어 텍스트 😀👍🏽 \u200b zero\u00a0width",
    "<|endoftext|> is plain text here; so is <|startoftext|>",
    "",
    " " * 40 + "x" + "\n" * 7,
)


def batch_encoder(path: str) -> Callable[[list[str]], list[list[int]]]:
    """texts -> their token ids (no special tokens added). For a GPT-2 style folder (encoder.json + vocab.bpe)
    whose ids are its merge ranks, tiktoken's encoder: the same ids for about half the CPU time of `tokenizers`
    (BENCHMARKS.md), checked on probe texts when loaded. Otherwise, or if they ever disagree, `tokenizers`."""
    threads = 1 if os.environ.get("TOKENIZERS_PARALLELISM", "").lower() in ("false", "0") else \
        max(1, len(os.sched_getaffinity(0)))
    return _batch_encoder(path, threads)


def _batch_encoder(path: str, threads: int) -> Callable[[list[str]], list[list[int]]]:
    encoding = _checked_tiktoken(path)
    if encoding is None:
        return _with_tokenizers(load_tokenizer(path))

    def with_tiktoken(texts: list[str]) -> list[list[int]]:
        return encoding.encode_ordinary_batch(texts, num_threads=threads)

    return with_tiktoken


def warm(path: str) -> None:
    """Load the tokenizer at `path` and its encoder into this process's caches. The process pool's fork server
    does, so that its workers start with them (`units.Warmup`); it encodes nothing on more than one thread, so no
    thread pool is forked half-alive."""
    load_tokenizer(path)
    _checked_tiktoken(path)


def _with_tokenizers(tok: Tokenizer) -> Callable[[list[str]], list[list[int]]]:
    def with_tokenizers(texts: list[str]) -> list[list[int]]:
        # encode_batch_fast skips offsets and alignments: the same ids at about twice the speed of encode_batch
        return [e.ids for e in tok.encode_batch_fast(texts, add_special_tokens=False)]

    return with_tokenizers


@cache
def _checked_tiktoken(path: str):
    """tiktoken's Encoding of the tokenizer at `path` if it gives the tokenizer's ids on the probe texts, else None.
    Cached per path, whatever the threads an encoder later uses."""
    encoding = _tiktoken_encoding(Path(path))
    if encoding is None:
        return None
    probes = list(_PROBES)
    # the tokenizer's own encoder on one probe at a time: its batch call would start its thread pool
    reference = [load_tokenizer(path).encode(text, add_special_tokens=False).ids for text in probes]
    return encoding if encoding.encode_ordinary_batch(probes, num_threads=1) == reference else None


def _tiktoken_encoding(folder: Path):
    """tiktoken's Encoding of a GPT-2 style folder, or None: not such a folder, or its ids are not the ranks of its
    merges (tiktoken merges by id), or tiktoken is not installed."""
    try:
        import tiktoken
        from tiktoken_ext.openai_public import r50k_pat_str  # GPT-2's pre-tokenizer pattern, as `ByteLevel` splits
    except ImportError:
        return None
    vocab, merges = folder / "encoder.json", folder / "vocab.bpe"
    if not (vocab.is_file() and merges.is_file()):
        return None
    byte_of = _gpt2_byte_decoder()
    ids = {bytes(byte_of[c] for c in token): i for token, i in json.loads(vocab.read_text("utf-8")).items()
           if not (token.startswith("<|") and token.endswith("|>"))}
    ranks = {bytes([b]): i for i, b in enumerate(sorted(byte_of.values(), key=lambda b: ids.get(bytes([b]), -1)))}
    for line in merges.read_text("utf-8").split("\n")[1:]:
        if line.strip():
            first, second = line.split()
            ranks[bytes(byte_of[c] for c in first + second)] = len(ranks)
    if ranks != ids:
        return None
    return tiktoken.Encoding(f"bpe-{folder.name}", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={})


@cache
def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte (the byte-level alphabet) -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_ins = {b: chr(b) for b in printable}
    stand_ins.update((b, chr(256 + n)) for n, b in enumerate(b for b in range(256) if b not in stand_ins))
    return {c: b for b, c in stand_ins.items()}


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
