import dagster as dg
import polars as pl

from llm_assets import charts
from llm_assets.core.filtered import (NO_LANGUAGE, SCHEMA, TAKEDOWN_COUNT, filter_documents, filter_units,
                                     language_funnels, with_eval_index, with_quality_model)
from llm_assets.core.gates import GateResult, Profile, evaluate
from llm_assets.core.partition import LakeInput, PartitionOutput, read_manifest
from llm_assets.core.takedowns import load_takedowns, takedowns_version
from llm_assets.filtered.spec import SPEC, chain_version, language_inputs, uses_trained_model
from llm_assets.metadata import block_funnel, language_funnel_table
from llm_assets.settings import Settings
from llm_assets.stage import observed_source, partition_of, run_stage, stage_asset
from resources import ObjectStore


LANGUAGES_SHOWN = 20  # in the per-language funnel's table and chart, the languages with most documents


def label(language: str) -> str:
    return charts.NO_LANGUAGE if language == NO_LANGUAGE else language


def build(settings: Settings) -> list[dg.AssetsDefinition]:
    code, unit_code = SPEC.version(settings), chain_version(settings)
    chain = [block.name for block in settings.filtered.blocks()]

    def gate(lake, crawl: str, shard: str, out: PartitionOutput) -> GateResult:
        """This partition against the other partitions of its crawl that passed theirs."""
        others = [Profile.of(s, m.rows_in, m.dropped(), m.counts()) for s in settings.shard_keys() if s != shard
                  and (m := read_manifest(lake, "filtered", crawl, s)) is not None and not m.held_back]
        return evaluate(Profile.of(shard, out.rows_in, out.dropped(), out.counts()), others, chain, settings.gates)

    def report(lake, out: PartitionOutput) -> dict:
        pii = {k: n for k, n in out.counts().items() if k.startswith("pii_")}
        removed = {k.removeprefix(TAKEDOWN_COUNT): n for k, n in out.counts().items() if k.startswith(TAKEDOWN_COUNT)}
        by_block = {b: sum(n for k, n in out.dropped().items() if k.split("/", 1)[0] == b)
                    for b in dict.fromkeys(["takedown", *chain])}
        kept = lake.scan(out_parts).select("language", "n_words").collect() if (out_parts := [
            u.part for u in out.units if u.part and u.rows_out]) else pl.DataFrame({"language": [], "n_words": []})
        languages = kept.group_by("language").len().sort("len", descending=True).head(15)
        funnels = language_funnels(out.counts())[:LANGUAGES_SHOWN]
        return {
            "filter_funnel": dg.MetadataValue.md(block_funnel(["takedown", *chain], out.rows_in, out.dropped())),
            "filter_funnel_chart": dg.MetadataValue.md(charts.funnel(
                "documents in, dropped by each block (chain order), kept", out.rows_in,
                [(b, n) for b, n in by_block.items() if n], out.rows_out)),
            "language_chart": dg.MetadataValue.md(charts.hbars(
                "language of the kept documents (fastText lid.176)", languages["language"].fill_null(charts.NO_LANGUAGE).to_list(),
                languages["len"].to_list(), "documents")),
            "length_chart": dg.MetadataValue.md(charts.histogram(
                "length of the kept documents", kept["n_words"].to_list(), "words per document")),
            "language_funnel": language_funnel_table(funnels, ["takedown", *chain]),
            "language_funnel_chart": dg.MetadataValue.md(charts.stacked(
                "documents per language: kept, dropped by each block", [label(f.language) for f in funnels],
                {"kept": [f.kept for f in funnels],
                 **{b: [f.dropped.get(b, 0) for f in funnels] for b in by_block if by_block[b]}}, "documents")),
            "pii_masked": dg.MetadataValue.json(pii),
            "pii_masked_total": sum(pii.values()),
            "takedowns_applied": dg.MetadataValue.json(removed),
        }

    # The takedown requests and eval sets reach it through its observed source (`curation_scope`, which depends on
    # `takedowns` and `eval_index`): a new request makes stale the partitions it touches, not every partition.
    @stage_asset(SPEC, settings, metadata={"filter_chain": " → ".join(chain)}, gated=settings.gates.enabled,
                 deps=[dg.AssetKey("quality_classifier")] if uses_trained_model(settings.filtered) else [])
    def filtered(context: dg.AssetExecutionContext, store: ObjectStore, documents: LakeInput):
        """Documents that no takedown request names (under `takedowns/`) and that pass the filter chain of the
        settings, in FineWeb's order: text normalization (NFC,
        control characters, mojibake, whitespace), URL block lists, fastText lid.176 language ID (the settings' keep
        list, each language at its own minimum score; a script lid.176 does not know is `und`, dropped), then, with
        each language's thresholds (FineWeb-2's per-language configs; English keeps FineWeb's), Gopher
        repetition, Gopher quality, C4 quality (its line cleanup rewrites the text; not for FineWeb-2's languages), FineWeb
        quality, the optional C4 bad-words, profanity, domain-vocabulary and model-based quality blocks, and PII
        masking (e-mails, public IPs, phone numbers, Luhn-valid cards, IBANs become typed placeholders), and last
        decontamination against the eval sets under `evals/` (13-gram overlap in the final text or in the text as
        extracted, before C4's line cleanup or PII masks rewrote it; drops, or flags by setting).

        Adds `language`, `language_score`, `n_words`, `pii` (masked per type), `contamination` and the optional
        blocks' densities and quality score.
        Every dropped document is kept under `rejected/filtered/` with the block and reason code that dropped it
        (`takedown` with the request, `contaminated` with the benchmark and the matched span). Every block measures
        every document, kept or dropped before it; each unit keeps those scores beside its part (`scores-<unit>`),
        so a change of thresholds only is decided again over the whole crawl without a re-run.
        One work unit per upstream documents part; a takedown reruns only the units whose part held the document,
        and a change of one language's thresholds (`filtered.overrides`, the language table, the languages kept) only
        the units that held a document in that language. `language_funnel` (table and chart) gives each language's
        own funnel: documents in, kept, dropped by each block.

        Quality gate (`gates:`): a partition whose blocks' fail rates (from the scores) or language mix depart from
        the other partitions of its crawl is committed held back: its `quality_gate` check fails and downstream
        stages keep what they were built from until a rebuild passes.
        """
        crawl, shard = partition_of(context)
        lake = store.lake()
        filters, model = with_quality_model(settings.filtered, lake)
        filters, evals = with_eval_index(filters, lake, settings.evals)
        built = read_manifest(lake, "filtered", crawl, shard)
        units, named = filter_units(lake, store.config(), filters, settings.filtered, crawl, shard, documents.parts,
                                    unit_code, [*([model] if model else []), evals], load_takedowns(lake),
                                    {u.source: u for u in built.units} if built is not None else {})
        yield from run_stage(context, filter_documents, units, code, SCHEMA.names, settings.runner,
                             report=lambda out: report(lake, out),
                             metadata={"eval_index": evals or "off", **({"quality_model_sha256": model} if model else {})},
                             inputs={"documents": documents.data_version, "takedowns": takedowns_version(named),
                                     **({"evals": evals} if evals else {}), **({"quality_model": model} if model else {})},
                             gate=(lambda out: gate(lake, crawl, shard, out)) if settings.gates.enabled else None,
                             outcome_inputs=lambda out: language_inputs(settings.filtered, out.counts()))

    return [observed_source(SPEC, settings), filtered]
