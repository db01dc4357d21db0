"""The training release: the tokenized documents of the configured crawls, packed, shuffled and written once."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llm_assets.core.keys import release_manifest_key
from llm_assets.core.release import STAGE_VERSION, latest_release, release_version
from llm_assets.core.tokenize import resolve_tokenizer
from llm_assets.core.versions import code_version
from llm_assets.registry import MISSING, UPSTREAM, StageSpec


def _stale(planner, crawl=None, shard=None) -> str | None:
    """The release is stale when a tokenized partition is rebuilt, or when the release its settings and the
    committed tokenized partitions make (its version) was not written yet."""
    if planner.any_planned("tokenized"):
        return f"{UPSTREAM} (tokenized is rebuilt)"
    settings = planner.settings.release
    names = list(settings.crawls) or planner.crawls
    partitions = [{"crawl": c, "shard": s, "data_version": m.data_version} for c in names
                  for s, m in planner.committed("tokenized", c).items()]
    if not partitions:
        return None
    _, tok_hash = resolve_tokenizer(planner.settings.tokenized, planner.lake)
    version = release_version(settings, tok_hash, partitions)
    return None if planner.lake.exists(release_manifest_key(settings.name, version)) else MISSING


def _latest(lake, settings) -> dict | None:
    """The version the release's name points at, with its counts."""
    prefix = latest_release(lake, settings.release.name)
    manifest = lake.get_json(prefix + "manifest.json") if prefix else None
    if manifest is None:
        return None
    counts = manifest["counts"]
    return {"version": manifest["version"], "documents": counts["documents"], "tokens": counts["tokens_in"],
            "sequences": counts["sequences"]}


SPEC = StageSpec("release", "release", ("tokenized",),
                 version=lambda s: code_version(STAGE_VERSION, s.release.fingerprint()),
                 plan=_stale, facts=_latest, group="releases", job="release_job")
SPECS = [SPEC]

if TYPE_CHECKING:
    import dagster as dg

    from llm_assets.settings import Settings


def build(settings: "Settings", specs: "Sequence[StageSpec]") -> "dg.Definitions":
    import tempfile
    from pathlib import Path

    import dagster as dg
    import polars as pl

    from llm_assets import charts
    from llm_assets.core.filtered import TAKEDOWN_COUNT
    from llm_assets.core.gates import LANGUAGE_COUNT
    from llm_assets.core.partition import LakeInput, Manifest, committed
    from llm_assets.core.release import (
        NO_LANGUAGE,
        STAGE_VERSION,
        build_release,
        latest_release,
        mark_superseded,
        point_latest,
    )
    from llm_assets.core.tokenize import load_tokenizer, resolve_tokenizer
    from llm_assets.core.units import peak_rss_bytes
    from llm_assets.instance import FAN_IN_POOL
    from llm_assets.metadata import table
    from llm_assets.settings import Settings
    from llm_assets.stage import require_every_shard
    from llm_assets.stages.tokenized import TOKENIZER_SPEC
    from resources import ObjectStore
    from resources.io_manager import ALLOW_MISSING_PARTITIONS

    def _partition(m: Manifest) -> dict:
        """A partition as the release's manifest records it."""
        return {"crawl": m.crawl, "shard": m.shard, "data_version": m.data_version, "code_version": m.code_version,
                "rows": m.rows, "parts": m.parts}

    def _committed(lake, asset: str, crawls: list[str], shards: list[str]) -> list[dict]:
        return [_partition(m) for crawl in crawls for m in committed(lake, asset, crawl, shards).values()]

    def _card_facts(lake, settings: Settings, crawls: list[str], shards: list[str]) -> dict:
        """Funnel per crawl from the raw records (what the readers skipped, what each filter dropped, what dedup
        removed), the language mix, the filter thresholds and dedup settings in force, the text parts."""
        manifests = {a: [m for c in crawls for m in committed(lake, a, c, shards).values()]
                     for a in ("documents", "filtered", "deduplicated")}
        funnel = {c: {"raw_records": sum(u.rows_in for m in manifests["documents"] if m.crawl == c for u in m.units),
                      **{a: sum(m.rows for m in ms if m.crawl == c) for a, ms in manifests.items()}} for c in crawls}
        drops: dict[str, dict[str, int]] = {}
        for asset, ms in manifests.items():
            for m in ms:
                for u in m.units:
                    for reason, n in u.dropped.items():
                        drops.setdefault(asset, {})[reason] = drops.get(asset, {}).get(reason, 0) + n
        text_parts = {c: [part for m in manifests["deduplicated"] if m.crawl == c for part in m.parts] for c in crawls}
        parts = [part for ps in text_parts.values() for part in ps]
        languages = (lake.scan(parts).group_by("language").len().sort("len", descending=True).collect().rows()
                     if parts else [])
        # documents per language through the stages: filtered's units count what they kept per language
        language_funnel: dict[str, dict[str, int]] = {}
        for m in manifests["filtered"]:
            for u in m.units:
                for key, n in u.counts.items():
                    if key.startswith(LANGUAGE_COUNT):
                        lang = key.removeprefix(LANGUAGE_COUNT)
                        row = language_funnel.setdefault(NO_LANGUAGE if lang == "?" else lang, {})
                        row["filtered"] = row.get("filtered", 0) + n
        for lang, n in languages:
            language_funnel.setdefault(lang or NO_LANGUAGE, {})["deduplicated"] = n
        filters = [(b.name, b.model_dump(mode="json", exclude={"block", "enabled", "index_path", "model_path"}))
                   for b in settings.filtered.blocks()]
        # the targets of the takedown requests that removed documents from the filtered partitions of the crawls
        takedowns = sorted({key.removeprefix(TAKEDOWN_COUNT) for m in manifests["filtered"] for u in m.units
                            for key, n in u.counts.items() if key.startswith(TAKEDOWN_COUNT) and n})
        return {"funnel": funnel, "drops": drops, "takedowns": takedowns, "languages": languages,
                "language_funnel": dict(sorted(language_funnel.items(),
                                               key=lambda kv: (-kv[1].get("filtered", 0), kv[0]))),
                "text_parts": text_parts, "filters": filters,
                "dedup": settings.dedup.model_dump(mode="json"), "evals": settings.evals.model_dump(mode="json")}

    def _charts(lake, partitions: list[dict], mixture: dict[str, dict], counts: dict) -> dict:
        """Tokens per crawl and per language (the mix achieved, beside the weights' shares), and where the sequences'
        positions went (tokens, padding, cut)."""
        token_parts = [part for p in partitions for part in p["parts"]]
        by_crawl = (lake.scan(token_parts).group_by("crawl").agg(pl.col("n_tokens").sum()).sort("crawl").collect()
                    if token_parts else None)
        if by_crawl is None or by_crawl.is_empty():
            return {}
        return {
            "tokens_by_crawl_chart": dg.MetadataValue.md(charts.hbars(
                "tokens per crawl", by_crawl["crawl"].to_list(), by_crawl["n_tokens"].to_list(), "tokens")),
            "tokens_by_language_chart": dg.MetadataValue.md(charts.hbars(
                "tokens per language (released)", list(mixture)[:15], [r["tokens"] for r in mixture.values()][:15],
                "tokens")),
            "language_mix_chart": dg.MetadataValue.md(charts.grouped_hbars(
                "language mix: share of the release's tokens, achieved and targeted", list(mixture)[:15],
                {"achieved": [r["share"] for r in mixture.values()][:15],
                 **({"target": [(r.get("target") or {}).get("share", 0.0) for r in mixture.values()][:15]}
                    if any("share" in (r.get("target") or {}) for r in mixture.values()) else {})}, "share")),
            "positions_chart": dg.MetadataValue.md(charts.hbars(
                f"sequence positions: {counts['sequences']:,} × {counts['context']:,}",
                ["document tokens", "padding (EOS)", "cut off (truncated)"],
                [counts["tokens_out"], counts["padding_tokens"], counts["truncated_tokens"]],
                "tokens", [charts.BLUE, charts.RED, charts.RED])),
        }

    def mixture_table(mixture: dict) -> pl.DataFrame:
        """The language mix the release achieved, a row per language: documents, tokens, share, target."""
        rows = [(lang, r["documents"], r["tokens"], r["share"], (r.get("target") or {}).get("tokens"),
                 (r.get("target") or {}).get("weight"), r["available_tokens"])
                for lang, r in mixture.get("languages", {}).items()]
        return pl.DataFrame(rows, orient="row", schema={
            "language": pl.String, "documents": pl.Int64, "tokens": pl.Int64, "share": pl.Float64,
            "target_tokens": pl.Int64, "target_weight": pl.Float64, "available_tokens": pl.Int64})

    def language_funnel_table(funnel: dict[str, dict[str, int]], mixture: dict) -> pl.DataFrame:
        """Documents per language through the stages: kept by the filters, deduplicated, tokenized, released."""
        released, left_out = mixture.get("languages", {}), mixture.get("left_out", {})
        names = list(funnel) + [lang for lang in released if lang not in funnel]
        return pl.DataFrame({
            "language": names,
            "filtered": [funnel.get(lang, {}).get("filtered", 0) for lang in names],
            "deduplicated": [funnel.get(lang, {}).get("deduplicated", 0) for lang in names],
            "tokenized": [released.get(lang, {}).get("available_documents", left_out.get(lang, {}).get("documents", 0))
                          for lang in names],
            "released": [released.get(lang, {}).get("documents", 0) for lang in names],
            "released_tokens": [released.get(lang, {}).get("tokens", 0) for lang in names],
        }, schema={"language": pl.String, "filtered": pl.Int64, "deduplicated": pl.Int64, "tokenized": pl.Int64,
                   "released": pl.Int64, "released_tokens": pl.Int64})

    shards = settings.shard_keys()
    versions = {s.name: s.version(settings) for s in specs}

    @dg.asset(
        name=SPEC.name,
        # every partition of its inputs (the spec's), whatever crawl
        ins={name: dg.AssetIn(partition_mapping=dg.AllPartitionMapping(), metadata={ALLOW_MISSING_PARTITIONS: True})
             for name in SPEC.inputs},
        deps=[dg.AssetKey(TOKENIZER_SPEC.name)],
        group_name=SPEC.group,
        kinds={"s3", "numpy"},
        code_version=SPEC.version(settings),
        pool=FAN_IN_POOL,  # it reads every crawl's tokens: one such stage at a time
    )
    def release(context: dg.AssetExecutionContext, store: ObjectStore, tokenized: LakeInput) -> dg.MaterializeResult:
        """A versioned, immutable training release under `releases/<name>/<version>/`: the tokenized documents of the
        configured crawls (settings `release`), packed into sequences of `context` tokens (best-fit-decreasing of whole
        documents, or concatenate-and-chunk), shuffled globally by a keyed Feistel permutation of the seed, written as
        a Megatron-LM indexed dataset (`data.bin` + `data.idx`; a release of more than `sequences_per_shard`
        sequences as shards, each a consecutive range of the training order written by a work unit on the runner)
        with `provenance.parquet` (the documents of every sequence), `tokenizer.json`, the curated text as Parquet,
        `manifest.json` (crawls, partitions and their data versions, code versions, config, tokenizer hash, counts)
        and a dataset card. The version hashes all of that input, so the same input is never written twice and
        another config is another version. A crawl with a shard that has raw files but no committed tokenized
        partition fails it: no release of part of a crawl.
        """
        lake = store.lake()
        crawls = list(settings.release.crawls) or sorted(context.instance.get_dynamic_partitions("crawl"))
        partitions = [_partition(m) for m in sorted((m for m in tokenized.manifests if m.crawl in crawls),
                                                    key=lambda m: (crawls.index(m.crawl), m.shard))]
        if not partitions:
            raise dg.Failure(f"no committed tokenized partition for crawls {crawls}: run curated_job first")
        for crawl in crawls:
            require_every_shard(SPEC, crawl, settings, tokenized, specs)
        previous_prefix = latest_release(lake, settings.release.name)
        previous = lake.get_json(previous_prefix + "manifest.json") if previous_prefix else None
        tok_settings, tok_hash = resolve_tokenizer(settings.tokenized, lake)
        tok = load_tokenizer(str(tok_settings.resolved_path()))
        eos = tok.token_to_id(settings.tokenized.eos_token)
        if eos is None:
            raise dg.Failure(f"EOS token {settings.tokenized.eos_token!r} is not in the tokenizer's vocabulary")
        facts = _card_facts(lake, settings, crawls, shards)
        from llm_assets.runners import runner_for  # when it runs, as run_stage does: a cluster client is heavy

        with tempfile.TemporaryDirectory(prefix="llm-assets-release-") as tmp:
            tokenizer_file = Path(tmp) / "tokenizer.json"
            tok.save(str(tokenizer_file))
            built = build_release(
                lake, settings.release, partitions, tokenizer_file, tok_hash, eos, tok.get_vocab_size(),
                code_versions={"tokenized": versions["tokenized"], "deduplicated": versions["deduplicated"],
                               "release": STAGE_VERSION},
                card_facts=facts, workdir=Path(tmp), takedowns=facts["takedowns"],
                runner=runner_for(settings.runner))
        point_latest(lake, built)
        if superseded := mark_superseded(lake, previous, built):
            context.log.warning(f"release {superseded['version']} is superseded by {built.version}: it holds documents "
                                f"that takedown requests removed ({', '.join(superseded['takedowns'][:5])})")
        counts = built.manifest["counts"]
        if built.reused:
            context.log.info(f"{built.prefix} already exists: releases are immutable, nothing was rewritten")
        return dg.MaterializeResult(
            metadata={
                "release": dg.MetadataValue.text(lake.url(built.prefix)),
                "version": built.version,
                "reused": built.reused,
                "crawls": dg.MetadataValue.json(built.manifest["crawls"]),
                "partitions": len(built.manifest["partitions"]),
                "documents": counts["documents"],
                "tokens": counts["tokens_in"],
                "sequences": counts["sequences"],
                "shards": len(built.manifest.get("shards", [None])),
                "context": counts["context"],
                "padding_pct": counts["padding_pct"],
                "truncated_pct": counts["truncated_pct"],
                "bytes": sum(built.manifest.get("files", {}).values()),
                "files": dg.MetadataValue.json(built.manifest.get("files", {})),
                "tokenizer_hash": tok_hash,
                "takedowns_applied": len(built.manifest.get("takedowns", [])),
                "supersedes": superseded["version"] if superseded else "",
                "seconds": built.manifest["seconds"],
                "peak_rss_mib": round(peak_rss_bytes() / 2**20, 1),
                "units": len(built.units),  # scatter and shard units, on the runner
                "unit_peak_rss_mib": round(max((u.peak_rss_bytes for u in built.units), default=0) / 2**20, 1),
                "dataset_card": dg.MetadataValue.md(built.card),
                "language_mix": table(mixture_table(built.manifest.get("mixture", {}))),
                "language_funnel": table(language_funnel_table(facts["language_funnel"],
                                                               built.manifest.get("mixture", {}))),
                **_charts(lake, partitions, built.manifest.get("mixture", {}).get("languages", {}), counts),
            },
            data_version=dg.DataVersion(built.version),
        )

    return dg.Definitions(assets=[release])
