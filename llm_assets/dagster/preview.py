"""`llm-assets preview` and the `preview` job: what a new settings file would change, before anything is rebuilt.

`preview_change` plans what the new settings make stale (the stale planner with their code versions, nothing reported
to Dagster) and builds the report of `core.preview`: over the stored scores for a change of `filtered` thresholds
only, else on a sample of the stale shard stages' units, built by the same functions the assets use. The `preview`
job runs it from the Launchpad (run config: the new settings, the sample, the crawl) and shows the report
as its op's output metadata.
"""


from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import dagster as dg
import polars as pl

from llm_assets import charts
from llm_assets.core import preview as core
from llm_assets.core.keys import split_partition
from llm_assets.core.lake import Lake, StoreConfig
from llm_assets.core.partition import read_manifest
from llm_assets.core.units import Runner
from llm_assets.settings import Settings, load_settings
from resources import ObjectStore

SAMPLED = ("documents", "filtered")  # the shard stages a sample runs, in order


def settings_from(data: Any, name: str) -> Settings:
    """Settings from a mapping (a YAML document, the job's run config), errors naming where it came from."""
    try:
        return Settings.model_validate(data or {})
    except ValueError as e:
        raise ValueError(f"invalid settings in {name}:\n{e}") from e


def thresholds_only(current: Settings, new: Settings) -> str | None:
    """None when the change is one of `filtered` thresholds that the stored scores re-decide; else why not."""
    if current.model_copy(update={"filtered": new.filtered}) != new:
        changed = [name for name in Settings.model_fields if getattr(current, name) != getattr(new, name)]
        return f"settings other than filtered changed ({', '.join(changed)})"
    if current.filtered == new.filtered:
        return "filtered did not change"
    from llm_assets.core.scores import threshold_only

    return threshold_only(current.filtered, new.filtered)


def preview_change(lake: Lake, store: StoreConfig, current: Settings, new: Settings,
                   crawls: Sequence[str] | None = None,
                   fraction: float = core.DEFAULT_SAMPLE, runner: Runner | None = None,
                   examples: int = core.EXAMPLES) -> core.PreviewReport:
    from llm_assets.stages import SPECS, code_versions
    from llm_assets.tools.stale import known_crawls, planned_of, planning

    crawls = list(crawls) if crawls else known_crawls(lake)
    planned = planned_of(planning(lake, new, crawls, code_versions(new), SPECS))
    levels = {s.name: s.level for s in SPECS}
    counts = dict(Counter(p.asset for p in planned))
    # what reads every shard of a crawl (or every crawl) is not sampled: its forecast is the preview
    crawl_level = [a for a in counts if levels[a] != "shard"]
    chain = [b.name for b in new.filtered.blocks()]
    notes = []
    if later := [a for a in counts if levels[a] == "shard" and a not in SAMPLED]:
        notes.append(f"not run on the sample, forecast only: {', '.join(later)}")
    forecast_text, forecast_json = _forecast(lake, new, planned)
    why_not = thresholds_only(current, new)
    if why_not is None and (unscored := _unscored(lake, new, crawls)):
        why_not = (f"{unscored} committed filtered partition{'s' * (unscored > 1)} hold no scores (built before they "
                   "were stored): a sample is run instead")
    if why_not is None:
        from llm_assets.core.scores import read_scores, redecide

        before, after = [], []
        for crawl in crawls:
            scores = read_scores(lake, crawl).collect()
            urls = scores.select("doc_id", "url")
            before.append(redecide(scores, current.filtered).join(urls, on="doc_id", how="left"))
            after.append(redecide(scores, new.filtered).join(urls, on="doc_id", how="left"))
        notes.append("tokens not counted: the stored scores hold no text")
        report = core.thresholds_report(pl.concat(before, how="diagonal_relaxed"),
                                         pl.concat(after, how="diagonal_relaxed"), crawls, counts, chain, crawl_level,
                                         examples, notes)
    else:
        stale = {(p.asset, *split_partition(p.partition)) for p in planned if p.asset in SAMPLED}
        # each partition's sample starts at its first stale stage: its raw files, or its committed documents parts
        extract = sorted((c, s) for a, c, s in stale if a == "documents")
        inputs = _inputs(lake, "documents", extract) + _inputs(lake, "filtered", sorted(
            (c, s) for a, c, s in stale if a == "filtered" and (c, s) not in set(extract)))
        if not inputs:
            report = core.PreviewReport("nothing", tuple(crawls), tuple(counts.items()), not_thresholds=why_not,
                                        crawl_level=tuple(crawl_level), notes=(
                                            *notes, f"a sample runs {' and '.join(SAMPLED)}: neither is stale"))
        else:
            if runner is None:
                from llm_assets.platform.runners import runner_for

                runner = runner_for(new.runner)
            encoder = _encoder(lake, new, notes)
            with core.scratch(lake) as prefix:
                outcome = core.run_sample(lake, inputs, fraction, _stages(lake, store, new), runner, prefix, encoder)
            report = core.sample_report(outcome, crawls, counts, chain, crawl_level, why_not, examples, notes)
    return _with_forecast(report, forecast_text, forecast_json)


def _unscored(lake: Lake, settings: Settings, crawls: Sequence[str]) -> int:
    """The committed `filtered` partitions of these crawls with a unit that stored no scores."""
    return sum(1 for crawl in crawls for shard in settings.shard_keys()
               if (m := read_manifest(lake, "filtered", crawl, shard)) is not None
               and any(u.rows_in and "scores" not in u.side_parts for u in m.units))


def _with_forecast(report: core.PreviewReport, text: str, data: dict | None) -> core.PreviewReport:
    from dataclasses import replace

    return replace(report, forecast=text, forecast_json=data)


def _forecast(lake: Lake, new: Settings, planned) -> tuple[str, dict | None]:
    """The forecast of rebuilding what the new settings make stale, on the runner they choose."""
    if not planned:
        return "", None
    from llm_assets.dagster.freshness import plan_forecast

    predicted = plan_forecast(lake, new, planned)
    return predicted.render(), predicted.to_json()


def _encoder(lake: Lake, new: Settings, notes: list[str]) -> core.Encoder | None:
    """The release's tokenizer, counting the kept documents' tokens; None (tokens not counted) when there is none."""
    from llm_assets.core.tokenize import batch_encoder, resolve_tokenizer

    try:
        tokenized, _ = resolve_tokenizer(new.tokenized, lake)
        return batch_encoder(str(tokenized.resolved_path()))
    except (ValueError, OSError) as e:
        notes.append(f"tokens not counted: {e}")
        return None


def _inputs(lake: Lake, stage: Literal["documents", "filtered"], partitions: Sequence[tuple[str, str]]
            ) -> list[core.Input]:
    """A stage's inputs in these partitions, as its asset reads them: the committed raw inventory's files for
    `documents`, the committed documents parts for `filtered`."""
    out = []
    for crawl, shard in partitions:
        if stage == "documents":
            raw = read_manifest(lake, "raw_files", crawl, shard)
            if raw is None or not raw.parts:
                continue
            for key, size, etag in lake.scan(raw.parts).select("key", "size", "etag").collect().iter_rows():
                out.append(core.Input(stage, crawl, shard, key, size, etag))
        else:
            docs = read_manifest(lake, "documents", crawl, shard)
            out += [core.Input(stage, crawl, shard, u.part, u.bytes_out) for u in (docs.units if docs else ())
                    if u.part]
    return out


def _stages(lake: Lake, store: StoreConfig, new: Settings) -> core.SampleStages:
    """The units of `documents` and `filtered` under the new settings, built as their assets build them."""
    from llm_assets.core.documents import extract_documents, extract_units
    from llm_assets.core.filtered import filter_documents, filter_units, with_eval_index, with_quality_model
    from llm_assets.core.takedowns import load_takedowns
    from llm_assets.stages.documents import SPEC as DOCUMENTS
    from llm_assets.stages.filtered import chain_version

    filters, model = with_quality_model(new.filtered, lake)
    filters, evals = with_eval_index(filters, lake, new.evals)
    requests, documents_code, unit_code = load_takedowns(lake), DOCUMENTS.version(new), chain_version(new)

    def documents(item: core.Input, prefix: str):
        return extract_units(store, new.documents, item.crawl, item.shard, item.key, item.size, item.etag,
                             documents_code, new.documents.extractor, prefix)

    def filtered(crawl: str, shard: str, parts: Sequence[str], prefix: str):
        return filter_units(lake, store, filters, new.filtered, crawl, shard, parts, unit_code,
                            [*([model] if model else []), evals], requests, {}, prefix=prefix)[0]

    return core.SampleStages(documents, filtered, extract_documents, filter_documents)


# -- the Dagster job ---------------------------------------------------------------------------------------------


class PreviewConfig(dg.Config):
    """What to preview: the new settings (the whole settings file as structured config, which the Launchpad shows as
    YAML: a path on the launching machine means nothing to the code server), the sample of the stale units a
    non-threshold change runs on, and the crawl."""

    # any mapping: the settings' own model checks it when the run starts, with errors naming the setting
    settings: dict[str, Any]
    sample: str = "1%"
    crawl: str = ""


def report_metadata(report: core.PreviewReport) -> dict:
    """The report as a run's metadata: tables as Markdown, the examples, a chart of per-block drop rates."""
    meta: dict = {
        "mode": report.mode,
        "crawls": dg.MetadataValue.json(list(report.crawls)),
        "stale": dg.MetadataValue.json(dict(report.planned)),
        "kept": dg.MetadataValue.md(report.kept_table()),
        "drop_rates": dg.MetadataValue.md(report.blocks_table()),
        "examples": dg.MetadataValue.md(report.examples_table()),
        "report": dg.MetadataValue.md(f"```\n{report.render()}\n```"),
    }
    if report.blocks:
        meta["drop_rates_chart"] = dg.MetadataValue.md(charts.grouped_hbars(
            "documents dropped by each block, share of those in (before / after the change)",
            [b.block for b in report.blocks],
            {"before": [b.rate_before * 100 for b in report.blocks],
             "after": [b.rate_after * 100 for b in report.blocks]},
            "% of documents"))
    if report.sample is not None:
        meta |= {"sample_units": dg.MetadataValue.json(list(report.sample.units)),
                 "sample_fraction_of_input_bytes": round(report.sample.fraction, 6),
                 "scaled_to_crawl": dg.MetadataValue.md(report.scaled_table())}
    if report.not_thresholds:
        meta["not_thresholds_only"] = report.not_thresholds
    if report.crawl_level:
        meta["forecast_only"] = dg.MetadataValue.json({a: core.CRAWL_LEVEL_NOTE for a in report.crawl_level})
    if report.forecast:
        meta["forecast"] = dg.MetadataValue.md(f"```\n{report.forecast}\n```")
    if report.notes:
        meta["notes"] = dg.MetadataValue.md("\n".join(f"- {n}" for n in report.notes))
    return meta


@dg.op(out=dg.Out(dg.Nothing))
def preview_settings(context: dg.OpExecutionContext, config: PreviewConfig, store: ObjectStore) -> dg.Output:
    """Preview the settings of the run config against the deployment's: the report is this op's output metadata."""
    from llm_assets.core.lake import validate_crawl

    new = settings_from(config.settings, "the run config's `settings`")
    crawls = [validate_crawl(config.crawl)] if config.crawl else None
    report = preview_change(store.lake(), store.config(), load_settings(), new, crawls,
                            core.parse_sample(config.sample))
    context.log.info(report.render())
    return dg.Output(None, metadata={**report_metadata(report), "report_json": dg.MetadataValue.json(report.to_json())})


def settings_config(settings: Settings) -> dict[str, Any]:
    """Settings as the run config's `settings` takes them: every field, defaults included (settings hold no
    credentials: those come from the environment)."""
    return settings.model_dump(mode="json")


def build_preview_job(settings: Settings | None = None) -> dg.JobDefinition:
    """The preview job. Given the deployment's settings, its Launchpad opens with them as `settings`, to edit."""

    def preview_job():
        preview_settings()

    # without settings, no `config` at all: an empty one is still a config mapping, with a schema of its own
    defaults: dict[str, Any] = {"config": {"ops": {"preview_settings": {"config": {
        "settings": settings_config(settings)}}}}} if settings else {}
    # the executor the definitions give every job, named here: the defaults are resolved against it
    return dg.job(name="preview_job", **defaults, executor_def=dg.in_process_executor, description=(
        "Preview a change of settings before running it: edit the settings under `settings` (the whole settings "
        "file, as YAML in the Launchpad); a change of filter thresholds only is re-decided over every document's "
        "stored scores, any other runs the stale stages on a sample (`sample`, default 1%) into a scratch prefix that "
        "is removed after. The report (documents and tokens kept per language, drop rates per block before and after, "
        "examples, the forecast) is the metadata of the op's output."))(preview_job)


preview_job = build_preview_job()
