from pathlib import Path

import dagster as dg

from llm_assets.core.filtered import (SCHEMA, STAGE_VERSION, FilterUnit, file_sha256, filter_documents,
                                   with_quality_model)
from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput, PartitionOutput
from llm_assets.core.units import unit_id
from llm_assets.quality_classifier.assets import quality_classifier
from llm_assets.registry import StageSpec
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

SETTINGS = load_settings().filtered


def _file_version(path: str) -> str:
    try:
        return file_sha256(Path(path))
    except ValueError:
        return "unreadable"  # the run reports the file by name
CHAIN = [block.name for block in SETTINGS.blocks()]
# The quality_model block, when on and naming no file, filters with the model quality_classifier trained (whose
# data version then marks this stage stale); a model file it names is part of the code version.
_MODEL = next((b for b in SETTINGS.blocks() if b.name == "quality_model"), None)
USES_TRAINED_MODEL = _MODEL is not None and not _MODEL.model_path
MODEL_FILE = _MODEL.model_path if _MODEL is not None else None
CODE_VERSION = code_version(STAGE_VERSION, SETTINGS.fingerprint(), *([_file_version(MODEL_FILE)] if MODEL_FILE else []))


def _block_funnel(rows_in: int, dropped: dict[str, int]) -> str:
    """In → dropped by each block, in chain order → out, with the documents left after each block."""
    lines = ["| block | dropped | left | reasons |", "|---|---:|---:|---|", f"| in | | {rows_in:,} | |"]
    left = rows_in
    for block in dict.fromkeys(CHAIN):  # a block listed twice reports once: its drops share its name
        reasons = {k.split("/", 1)[1]: n for k, n in dropped.items() if k.split("/", 1)[0] == block}
        left -= sum(reasons.values())
        detail = ", ".join(f"`{r}` {n:,}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {block} | {sum(reasons.values()):,} | {left:,} | {detail} |")
    return "\n".join(lines)


@stage_asset(CODE_VERSION, metadata={"filter_chain": " → ".join(CHAIN)},
             deps=[quality_classifier] if USES_TRAINED_MODEL else None)
def filtered(context: dg.AssetExecutionContext, store: ObjectStore, documents: LakeInput):
    """Documents that pass the filter chain of the settings, in FineWeb's order: text normalization (NFC, control
    characters, mojibake, whitespace), URL block lists, fastText lid.176 language ID (English ≥ 0.65 by default),
    Gopher repetition, Gopher quality, C4 quality (its line cleanup rewrites the text), FineWeb quality, the optional
    C4 bad-words, profanity, domain-vocabulary and model-based quality blocks, and PII masking (e-mails, public IPs, phone numbers,
    Luhn-valid cards, IBANs become typed placeholders).

    Adds `language`, `language_score`, `n_words`, `pii` (masked per type) and the optional blocks' densities and
    quality score.
    Every dropped document is kept under `rejected/filtered/` with the block and reason code that dropped it.
    One work unit per upstream documents part.
    """
    crawl, shard = partition_of(context)
    settings, model = with_quality_model(SETTINGS, store.lake())
    units = []
    for source in documents.parts:
        unit = unit_id("filtered", CODE_VERSION, source, *([model] if model else []))
        units.append(FilterUnit(store=store.config(), settings=settings, source=source, unit=unit,
                                part=part_key("filtered", crawl, shard, unit),
                                rejected_part=part_key("filtered", crawl, shard, unit, zone="rejected")))
    yield from run_stage(context, filter_documents, units, CODE_VERSION, SCHEMA.names, report=_report,
                         metadata={"quality_model_sha256": model} if model else None,
                         inputs={"documents": documents.data_version, **({"quality_model": model} if model else {})})


def _report(out: PartitionOutput) -> dict:
    return {
        "filter_funnel": dg.MetadataValue.md(_block_funnel(out.rows_in, out.dropped())),
        "pii_masked": dg.MetadataValue.json(out.counts()),
        "pii_masked_total": sum(out.counts().values()),
    }


SPEC = StageSpec("filtered", "shard", ("documents",))
