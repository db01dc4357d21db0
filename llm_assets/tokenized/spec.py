from __future__ import annotations

from llm_assets.core.tokenize import TOKENIZER_LATEST, tokenizer_hash
from llm_assets.core.tokenized import STAGE_VERSION, TOKENIZER_VERSION, TokenizedSettings
from llm_assets.core.versions import code_version, short
from llm_assets.registry import StageSpec


def configured_tokenizer_hash(settings: TokenizedSettings) -> str:
    """The configured tokenizer file's hash; a trained tokenizer's hash is in each unit's identity and in lineage."""
    if settings.source == "train":
        return "trained"
    try:
        return tokenizer_hash(str(settings.resolved_path()))
    except OSError:
        return "missing"  # materializing reports the missing files; the code location still loads


def tokenized_version(settings) -> str:
    return code_version(STAGE_VERSION, settings.tokenized.fingerprint(), configured_tokenizer_hash(settings.tokenized))


def tokenizer_version(settings) -> str:
    """The tokenizer's: the tokenized settings but `min_tokens`, which decides what is kept, not how it is encoded."""
    tokenization = settings.tokenized.model_copy(update={"min_tokens": 0})
    return code_version(TOKENIZER_VERSION, tokenization.fingerprint(), configured_tokenizer_hash(tokenization))


def _published(lake, settings) -> dict | None:
    pointer = lake.get_json(TOKENIZER_LATEST)
    return {"version": short(pointer["sha256"])} if pointer else None


TOKENIZER_SPEC = StageSpec("tokenizer", "model", version=tokenizer_version, facts=_published)
SPEC = StageSpec("tokenized", "shard", ("deduplicated",), version=tokenized_version)
