import dagster as dg

from llm_assets.core.filtered import SCHEMA, FilterUnit, filter_documents, with_quality_model
from llm_assets.core.lake import part_key
from llm_assets.core.partition import LakeInput, PartitionOutput
from llm_assets.core.units import unit_id
from llm_assets.filtered.spec import SPEC, uses_trained_model
from llm_assets.metadata import block_funnel
from llm_assets.settings import Settings
from llm_assets.stage import partition_of, run_stage, stage_asset
from resources import ObjectStore


def build(settings: Settings) -> list[dg.AssetsDefinition]:
    code = SPEC.version(settings)
    chain = [block.name for block in settings.filtered.blocks()]

    def report(out: PartitionOutput) -> dict:
        return {
            "filter_funnel": dg.MetadataValue.md(block_funnel(chain, out.rows_in, out.dropped())),
            "pii_masked": dg.MetadataValue.json(out.counts()),
            "pii_masked_total": sum(out.counts().values()),
        }

    @stage_asset(SPEC, settings, metadata={"filter_chain": " → ".join(chain)},
                 deps=[dg.AssetKey("quality_classifier")] if uses_trained_model(settings.filtered) else None)
    def filtered(context: dg.AssetExecutionContext, store: ObjectStore, documents: LakeInput):
        """Documents that pass the filter chain of the settings, in FineWeb's order: text normalization (NFC,
        control characters, mojibake, whitespace), URL block lists, fastText lid.176 language ID (English ≥ 0.65 by
        default), Gopher repetition, Gopher quality, C4 quality (its line cleanup rewrites the text), FineWeb
        quality, the optional C4 bad-words, profanity, domain-vocabulary and model-based quality blocks, and PII
        masking (e-mails, public IPs, phone numbers, Luhn-valid cards, IBANs become typed placeholders).

        Adds `language`, `language_score`, `n_words`, `pii` (masked per type) and the optional blocks' densities and
        quality score.
        Every dropped document is kept under `rejected/filtered/` with the block and reason code that dropped it.
        One work unit per upstream documents part.
        """
        crawl, shard = partition_of(context)
        filters, model = with_quality_model(settings.filtered, store.lake())
        units = []
        for source in documents.parts:
            unit = unit_id("filtered", code, source, *([model] if model else []))
            units.append(FilterUnit(store=store.config(), settings=filters, source=source, unit=unit,
                                    part=part_key("filtered", crawl, shard, unit),
                                    rejected_part=part_key("filtered", crawl, shard, unit, zone="rejected")))
        yield from run_stage(context, filter_documents, units, code, SCHEMA.names, settings.runner, report=report,
                             metadata={"quality_model_sha256": model} if model else None,
                             inputs={"documents": documents.data_version, **({"quality_model": model} if model else {})})

    return [filtered]
