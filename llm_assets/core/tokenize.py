"""Byte-level BPE tokenization with the `tokenizers` library."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers


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
    tok = Tokenizer(models.BPE.from_file(str(vocab), str(merges)))
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
    return h.hexdigest()[:16]


def train_bytelevel_bpe(texts: list[str], vocab_size: int, special_tokens: list[str], path: Path) -> Tokenizer:
    """Train a byte-level BPE on `texts` (deterministic for the same texts) and save it as tokenizer.json."""
    from tokenizers import trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return tok
