import tempfile
import time
from pathlib import Path

import dagster as dg

from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput, committed
from llm_assets.core.tokenize import (load_tokenizer, publish_tokenizer, resolve_tokenizer, sample_texts,
                                      tokenizer_hash, train_bytelevel_bpe)
from llm_assets.core.tokenized import STAGE_VERSION, TokenizeUnit, schema, tokenize_documents
from llm_assets.core.units import peak_rss_bytes, unit_id
from llm_assets.dedup.assets import deduplicated
from llm_assets.registry import StageSpec
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

SETTINGS = load_settings().tokenized
TRAINS = SETTINGS.source == "train"
if TRAINS:
    TOKENIZER_HASH = "trained"  # the trained tokenizer's hash is in each unit's identity and in lineage
else:
    try:
        TOKENIZER_HASH = tokenizer_hash(str(SETTINGS.resolved_path()))
    except OSError:
        TOKENIZER_HASH = "missing"  # materializing reports the missing files; the code location still loads
CODE_VERSION = code_version(STAGE_VERSION, SETTINGS.fingerprint(), TOKENIZER_HASH)


@dg.asset(
    deps=[dg.AssetDep(deduplicated, partition_mapping=dg.AllPartitionMapping())] if TRAINS else None,
    group_name="models",
    kinds={"huggingface", "s3"},
    code_version=code_version(STAGE_VERSION, SETTINGS.fingerprint(), TOKENIZER_HASH),
)
def tokenizer(context: dg.AssetExecutionContext, store: ObjectStore) -> dg.MaterializeResult:
    """The tokenizer of the tokenized stage, published as `models/tokenizer/<sha256>.json`; its hash is in the
    lineage of every tokenized partition and release. With `tokenized.source: file`, the configured one (GPT-2's
    vocab + merges by default); with `train`, a byte-level BPE trained with `tokenizers` (vocab size, minimum
    frequency and special tokens in the settings) on a deterministic sample of deduplicated documents: those whose
    doc_id hashes lowest, so the sample is stable as crawls grow.
    """
    start = time.perf_counter()
    lake = store.lake()
    metadata = {"source": SETTINGS.source}
    if TRAINS:
        train = SETTINGS.train
        crawls = list(train.crawls) or sorted(context.instance.get_dynamic_partitions("crawl"))
        shards = load_settings().shard_keys()
        parts = [u["part"] for c in crawls for m in committed(lake, "deduplicated", c, shards).values()
                 for u in m["units"] if u.get("part")]
        texts = sample_texts(lake, parts, train.sample_documents)
        if not texts:
            raise dg.Failure(f"no deduplicated documents in crawls {crawls} to train a tokenizer on")
        with tempfile.TemporaryDirectory() as tmp:
            tok = train_bytelevel_bpe(texts, train.vocab_size, list(train.special_tokens),
                                      Path(tmp) / "tokenizer.json", min_frequency=train.min_frequency)
        metadata |= {"sample_documents": len(texts), "sample_chars": sum(map(len, texts)),
                     "crawls": dg.MetadataValue.json(crawls)}
    else:
        tok = load_tokenizer(str(SETTINGS.resolved_path()))
        metadata |= {"path": str(SETTINGS.tokenizer_path)}
    key, sha = publish_tokenizer(lake, tok)
    eos = tok.token_to_id(SETTINGS.eos_token)
    if eos is None:
        raise dg.Failure(f"EOS token {SETTINGS.eos_token!r} is not in the tokenizer's vocabulary")
    metadata |= {"tokenizer": dg.MetadataValue.text(lake.url(key)), "sha256": sha, "vocab_size": tok.get_vocab_size(),
                 "eos_id": eos, "seconds": round(time.perf_counter() - start, 3),
                 "peak_rss_mib": round(peak_rss_bytes() / 2**20, 1)}
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(sha[:16]))


@stage_asset(CODE_VERSION, group_name="curated", metadata={"tokenizer_hash": TOKENIZER_HASH},
             deps=[tokenizer])  # configured or trained, the tokenizer is in the lineage of every token
def tokenized(context: dg.AssetExecutionContext, store: ObjectStore, deduplicated: LakeInput):
    """Token ids of every deduplicated document with the configured byte-level BPE tokenizer (GPT-2 by default,
    or the one the `tokenizer` asset trained), EOS appended as the document boundary: the list column is a flat
    token stream plus document offsets, uint16 ids when the vocabulary fits, else uint32.

    One work unit per upstream deduplicated part; the tokenizer's hash is part of each unit's identity.
    """
    crawl, shard = partition_of(context)
    settings, tok_hash = resolve_tokenizer(SETTINGS, store.lake())
    vocab_size = load_tokenizer(str(settings.resolved_path())).get_vocab_size()
    units = []
    for source in deduplicated.parts:
        unit = unit_id("tokenized", CODE_VERSION, source, tok_hash)
        units.append(TokenizeUnit(store=store.config(), settings=settings, source=source, unit=unit,
                                  part=part_key("tokenized", crawl, shard, unit)))
    yield from run_stage(context, tokenize_documents, units, CODE_VERSION, schema(vocab_size).names,
                         metadata={"tokenizer_sha": tok_hash}, inputs={"deduplicated": deduplicated.data_version})


SPEC = StageSpec("tokenized", "shard", ("deduplicated",))
