import dagster as dg

from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput
from llm_assets.core.tokenize import load_tokenizer, tokenizer_hash
from llm_assets.core.tokenized import STAGE_VERSION, TokenizeUnit, schema, tokenize_documents
from llm_assets.core.units import unit_id
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

SETTINGS = load_settings().tokenized
try:
    TOKENIZER_HASH = tokenizer_hash(str(SETTINGS.resolved_path()))
except OSError:
    TOKENIZER_HASH = "missing"  # materializing reports the missing files; the code location still loads
CODE_VERSION = code_version(STAGE_VERSION, SETTINGS.fingerprint(), TOKENIZER_HASH)


@stage_asset(CODE_VERSION, group_name="curated", metadata={"tokenizer_hash": TOKENIZER_HASH})
def tokenized(context: dg.AssetExecutionContext, store: ObjectStore, deduplicated: LakeInput):
    """Token ids of every deduplicated document with the configured byte-level BPE tokenizer (GPT-2 by default),
    EOS appended as the document boundary; uint16 ids when the vocabulary fits, else uint32.

    One work unit per upstream deduplicated part; the tokenizer's hash is part of this asset's code version.
    """
    crawl, shard = partition_of(context)
    vocab_size = load_tokenizer(str(SETTINGS.resolved_path())).get_vocab_size()
    units = []
    for source in deduplicated.parts:
        unit = unit_id("tokenized", CODE_VERSION, source)
        units.append(TokenizeUnit(store=store.config(), settings=SETTINGS, source=source, unit=unit,
                                  part=part_key("tokenized", crawl, shard, unit)))
    yield from run_stage(context, tokenize_documents, units, CODE_VERSION, schema(vocab_size).names)
