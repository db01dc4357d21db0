import dagster as dg

from llm_assets.core.filtered import SCHEMA, STAGE_VERSION, FilterUnit, filter_documents
from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput, PartitionOutput
from llm_assets.core.units import unit_id
from llm_assets.settings import load_settings
from llm_assets.stage import code_version, partition_of, run_stage, stage_asset
from resources import ObjectStore

SETTINGS = load_settings().filtered
CODE_VERSION = code_version(STAGE_VERSION, SETTINGS.fingerprint())
CHAIN = [block.name for block in SETTINGS.chain()]


def _block_funnel(rows_in: int, dropped: dict[str, int]) -> str:
    """In → dropped by each block, in chain order → out, with the documents left after each block."""
    lines = ["| block | dropped | left | reasons |", "|---|---:|---:|---|", f"| in | | {rows_in:,} | |"]
    left = rows_in
    for block in CHAIN:
        reasons = {k.split("/", 1)[1]: n for k, n in dropped.items() if k.split("/", 1)[0] == block}
        left -= sum(reasons.values())
        detail = ", ".join(f"`{r}` {n:,}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        lines.append(f"| {block} | {sum(reasons.values()):,} | {left:,} | {detail} |")
    return "\n".join(lines)


@stage_asset(CODE_VERSION, metadata={"filter_chain": " → ".join(CHAIN)})
def filtered(context: dg.AssetExecutionContext, store: ObjectStore, documents: LakeInput):
    """Documents that pass the filter chain of the settings, in FineWeb's order: text normalization (NFC, control
    characters, mojibake, whitespace), URL block lists, fastText lid.176 language ID (English ≥ 0.65 by default),
    Gopher repetition, Gopher quality, C4 quality (its line cleanup rewrites the text), FineWeb quality, the optional
    C4 bad-words, profanity and domain-vocabulary blocks, and PII masking (e-mails, public IPs, phone numbers,
    Luhn-valid cards, IBANs become typed placeholders).

    Adds `language`, `language_score`, `n_words`, `pii` (masked per type) and the optional blocks' densities.
    Every dropped document is kept under `rejected/filtered/` with the block and reason code that dropped it.
    One work unit per upstream documents part.
    """
    crawl, shard = partition_of(context)
    units = []
    for source in documents.parts:
        unit = unit_id("filtered", CODE_VERSION, source)
        units.append(FilterUnit(store=store.config(), settings=SETTINGS, source=source, unit=unit,
                                part=part_key("filtered", crawl, shard, unit),
                                rejected_part=part_key("filtered", crawl, shard, unit, zone="rejected")))
    yield from run_stage(context, filter_documents, units, CODE_VERSION, SCHEMA.names, report=_report)


def _report(out: PartitionOutput) -> dict:
    return {
        "filter_funnel": dg.MetadataValue.md(_block_funnel(out.rows_in, out.dropped())),
        "pii_masked": dg.MetadataValue.json(out.counts()),
        "pii_masked_total": sum(out.counts().values()),
    }
