"""The enriched stage: named entities, keywords and a summary of every deduplicated document."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llm_assets.core.enrich import STAGE_VERSION
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec


def _version(settings) -> str:
    return code_version(STAGE_VERSION, settings.enriched.fingerprint())


SPEC = StageSpec("enriched", "shard", ("deduplicated",), version=_version, group="enrichment", job="enrich_job")
SPECS = [SPEC]

if TYPE_CHECKING:
    import dagster as dg

    from llm_assets.settings import Settings


def build(settings: "Settings", specs: "Sequence[StageSpec]") -> "dg.Definitions":
    import dagster as dg
    import polars as pl

    from llm_assets import charts
    from llm_assets.core.enrich import ENTITY_COUNT, SCHEMA, SKIPPED_COUNT, EnrichUnit, enrich_documents
    from llm_assets.core.lake import part_key
    from llm_assets.core.partition import LakeInput, PartitionOutput
    from llm_assets.core.units import unit_id
    from llm_assets.metadata import table
    from llm_assets.stage import partition_of, run_stage, stage_asset
    from resources import ObjectStore

    TOP = 15

    code = SPEC.version(settings)
    enrich = settings.enriched

    @stage_asset(SPEC, settings, specs,
                 metadata={"entities": f"{enrich.entities.model} on {', '.join(enrich.entities.languages)}"
                                       if enrich.entities.enabled else "off",
                           "keywords": "YAKE" if enrich.keywords.enabled else "off",
                           "summary": f"TextRank, {enrich.summary.sentences} sentences"
                                      if enrich.summary.enabled else "off"})
    def enriched(context: dg.AssetExecutionContext, store: ObjectStore, deduplicated: LakeInput):
        """Features of every deduplicated document, for building mixtures and auditing what a corpus talks about:
        named entities (spaCy's en_core_web_sm: text, OntoNotes label, mentions; English documents only), keywords
        (YAKE, with the document language's stop words) and an extractive summary (TextRank, the most central
        sentences in document order). What a document did not get is in `skipped` ("entities: no model for de")
        and counted per partition. Each part has an off switch under `enriched:` in the settings; the code version
        follows them.

        Not read by the release: a separate group (`enrich_job`), joined on `doc_id` by whoever needs it.
        """
        crawl, shard = partition_of(context)
        lake = store.lake()
        units = []
        for source in deduplicated.parts:
            unit = unit_id("enriched", code, source)
            units.append(EnrichUnit(store=store.config(), settings=enrich, source=source, unit=unit,
                                    part=part_key("enriched", crawl, shard, unit)))

        def report(out: PartitionOutput) -> dict:
            parts = [u.part for u in out.units if u.part and u.rows_out]
            rows = lake.scan(parts).select("entities", "keywords").collect() if parts else pl.DataFrame(
                schema={"entities": pl.List(pl.Struct({"text": pl.String, "label": pl.String, "count": pl.UInt32})),
                        "keywords": pl.List(pl.Struct({"keyword": pl.String, "score": pl.Float32}))})
            ents = rows.select(pl.col("entities").explode()).unnest("entities").drop_nulls("text")
            top_entities = (ents.group_by("text", "label").agg(pl.col("count").sum(), docs=pl.len())
                            .sort("docs", "count", descending=True).head(TOP))
            words = rows.select(pl.col("keywords").explode()).unnest("keywords").drop_nulls("keyword")
            top_words = (words.group_by(pl.col("keyword").str.to_lowercase()).agg(docs=pl.len())
                         .sort("docs", "keyword", descending=[True, False]).head(TOP))
            labels = {k.removeprefix(ENTITY_COUNT): n for k, n in sorted(out.counts().items(), key=lambda kv: -kv[1])
                      if k.startswith(ENTITY_COUNT)}
            skipped = {k.removeprefix(SKIPPED_COUNT): n for k, n in out.counts().items() if k.startswith(SKIPPED_COUNT)}
            return {
                "top_entities_chart": dg.MetadataValue.md(charts.hbars(
                    "entities in the most documents", [f"{t} ({lab})" for t, lab in
                                                       zip(top_entities["text"], top_entities["label"], strict=True)],
                    top_entities["docs"].to_list(), "documents")),
                "top_entities": table(top_entities.select(
                    entity="text", label="label", documents="docs", mentions=pl.col("count").cast(pl.Int64))),
                "entity_types_chart": dg.MetadataValue.md(charts.hbars(
                    "entity mentions by type (OntoNotes labels)", list(labels), list(labels.values()), "mentions")),
                "top_keywords_chart": dg.MetadataValue.md(charts.hbars(
                    "keywords in the most documents (YAKE)", top_words["keyword"].to_list(),
                    top_words["docs"].to_list(), "documents")),
                "entity_mentions": sum(labels.values()),
                "skipped": dg.MetadataValue.json(skipped),
            }

        yield from run_stage(context, enrich_documents, units, code, SCHEMA.names, settings.runner, report=report,
                             inputs={"deduplicated": deduplicated.data_version})

    return dg.Definitions(assets=[enriched])
