"""The enriched stage: named entities, keywords and a summary of every deduplicated document."""

import polars as pl

from llm_assets import charts
from llm_assets.core.enriched import ENTITY_COUNT, SCHEMA, SKIPPED_COUNT, STAGE_VERSION, EnrichUnit, enrich_documents
from llm_assets.core.lake import part_key
from llm_assets.core.partition import PartitionOutput
from llm_assets.core.stage_names import DEDUPLICATED, ENRICHED
from llm_assets.core.units import unit_id
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec
from llm_assets.report import Markdown, Report
from llm_assets.stage import Partition, ShardStage

TOP = 15  # entities and keywords in the report's charts and tables


def _version(settings) -> str:
    return code_version(STAGE_VERSION, settings.enriched.fingerprint())


SPEC = StageSpec(ENRICHED, "shard", (DEDUPLICATED,), version=_version, group="enrichment", job="enrich_job")


class Enriched(ShardStage):
    """Features of every deduplicated document, for building mixtures and auditing what a corpus talks about:
    named entities (spaCy's en_core_web_sm: text, OntoNotes label, mentions; English documents only), keywords
    (YAKE, with the document language's stop words) and an extractive summary (TextRank, the most central
    sentences in document order). What a document did not get is in `skipped` ("entities: no model for de")
    and counted per partition. Each part has an off switch under `enriched:` in the settings; the code version
    follows them.

    Not read by the release: a separate group (`enrich_job`), joined on `doc_id` by whoever needs it.
    """

    spec = SPEC
    work = staticmethod(enrich_documents)

    def unit(self, p: Partition, source: str) -> EnrichUnit:
        unit = unit_id(SPEC.name, SPEC.version(p.settings), source)
        return EnrichUnit(store=p.lake.config, settings=p.settings.enriched, source=source, unit=unit,
                          part=part_key(SPEC.name, p.crawl, p.shard, unit))

    def columns(self, p: Partition) -> list[str]:
        return SCHEMA.names

    def definition_metadata(self, settings) -> Report:
        enrich = settings.enriched
        return {"entities": f"{enrich.entities.model} on {', '.join(enrich.entities.languages)}"
                            if enrich.entities.enabled else "off",
                "keywords": "YAKE" if enrich.keywords.enabled else "off",
                "summary": f"TextRank, {enrich.summary.sentences} sentences" if enrich.summary.enabled else "off"}

    def report(self, p: Partition, out: PartitionOutput) -> Report:
        """The entities and keywords in the most documents, and the mentions per entity type."""
        parts = [u.part for u in out.units if u.part and u.rows_out]
        rows = p.lake.scan(parts).select("entities", "keywords").collect() if parts else pl.DataFrame(
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
        return {
            "top_entities_chart": Markdown(charts.hbars(
                "entities in the most documents", [f"{t} ({lab})" for t, lab in
                                                   zip(top_entities["text"], top_entities["label"], strict=True)],
                top_entities["docs"].to_list(), "documents")),
            "top_entities": top_entities.select(
                entity="text", label="label", documents="docs", mentions=pl.col("count").cast(pl.Int64)),
            "entity_types_chart": Markdown(charts.hbars(
                "entity mentions by type (OntoNotes labels)", list(labels), list(labels.values()), "mentions")),
            "top_keywords_chart": Markdown(charts.hbars(
                "keywords in the most documents (YAKE)", top_words["keyword"].to_list(), top_words["docs"].to_list(),
                "documents")),
            "entity_mentions": sum(labels.values()),
            "skipped": {k.removeprefix(SKIPPED_COUNT): n for k, n in out.counts().items()
                        if k.startswith(SKIPPED_COUNT)},
        }


STAGES = [Enriched()]
