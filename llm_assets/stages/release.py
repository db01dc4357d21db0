"""The training release: the tokenized documents of the configured crawls, packed, shuffled and written once."""

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from tokenizers import Tokenizer

from llm_assets import charts
from llm_assets.core.filtered import OPT_OUT_FLAGGED, TAKEDOWN_COUNT
from llm_assets.core.gates import LANGUAGE_COUNT
from llm_assets.core.keys import release_manifest_key
from llm_assets.core.lake import Lake
from llm_assets.core.optouts import OPT_OUT, coverage
from llm_assets.core.partition import LakeInput, Manifest, committed
from llm_assets.core.release import (
    NO_LANGUAGE,
    STAGE_VERSION,
    Release,
    build_release,
    latest_release,
    mark_superseded,
    point_latest,
    release_version,
)
from llm_assets.core.stage_names import RELEASE, TOKENIZED
from llm_assets.core.tokenize import load_tokenizer, resolve_tokenizer
from llm_assets.core.units import peak_rss_bytes
from llm_assets.core.versions import code_version
from llm_assets.registry import MISSING, UPSTREAM, StageSpec
from llm_assets.report import MIB, Markdown, Report, Url
from llm_assets.settings import Settings
from llm_assets.stage import AssetStage, Materialized, Partition, StageFailure
from llm_assets.stages.tokenized import TOKENIZER_SPEC

CARD_STAGES = ("documents", "filtered", "deduplicated")  # the stages whose funnel the dataset card shows
CHARTED = 15  # languages in the release's charts


def _stale(planner, crawl=None, shard=None) -> str | None:
    """The release is stale when a tokenized partition is rebuilt, or when the release its settings and the
    committed tokenized partitions make (its version) was not written yet."""
    if planner.any_planned(TOKENIZED):
        return f"{UPSTREAM} (tokenized is rebuilt)"
    settings = planner.settings.release
    names = list(settings.crawls) or planner.crawls
    partitions = [{"crawl": c, "shard": s, "data_version": m.data_version} for c in names
                  for s, m in planner.committed(TOKENIZED, c).items()]
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


SPEC = StageSpec(RELEASE, "release", (TOKENIZED,),
                 version=lambda s: code_version(STAGE_VERSION, s.release.fingerprint()),
                 plan=_stale, facts=_latest, group="releases", job="release_job")


def _partition(m: Manifest) -> dict:
    """A partition as the release's manifest records it."""
    return {"crawl": m.crawl, "shard": m.shard, "data_version": m.data_version, "code_version": m.code_version,
            "rows": m.rows, "parts": m.parts}


def _crawl_funnel(manifests: dict[str, list[Manifest]], crawls: list[str]) -> dict[str, dict[str, int]]:
    """Per crawl: the raw records the readers saw, and the rows each stage kept."""
    return {c: {"raw_records": sum(u.rows_in for m in manifests["documents"] if m.crawl == c for u in m.units),
                **{a: sum(m.rows for m in ms if m.crawl == c) for a, ms in manifests.items()}} for c in crawls}


def _drops(manifests: dict[str, list[Manifest]]) -> dict[str, dict[str, int]]:
    """What each stage dropped, by reason (what the readers skipped, what each filter dropped, what dedup
    removed)."""
    drops: dict[str, dict[str, int]] = {}
    for asset, ms in manifests.items():
        for m in ms:
            for u in m.units:
                for reason, n in u.dropped.items():
                    drops.setdefault(asset, {})[reason] = drops.get(asset, {}).get(reason, 0) + n
    return drops


def _language_funnel(filtered: list[Manifest], languages: list) -> dict[str, dict[str, int]]:
    """Documents per language kept by the filters and left by dedup, the languages the filters kept most first."""
    # filtered's units count what they kept per language
    funnel: dict[str, dict[str, int]] = {}
    for m in filtered:
        for u in m.units:
            for key, n in u.counts.items():
                if key.startswith(LANGUAGE_COUNT):
                    lang = key.removeprefix(LANGUAGE_COUNT)
                    row = funnel.setdefault(NO_LANGUAGE if lang == "?" else lang, {})
                    row["filtered"] = row.get("filtered", 0) + n
    for lang, n in languages:
        funnel.setdefault(lang or NO_LANGUAGE, {})["deduplicated"] = n
    return dict(sorted(funnel.items(), key=lambda kv: (-kv[1].get("filtered", 0), kv[0])))


def _takedowns_applied(filtered: list[Manifest]) -> list[str]:
    """The targets of the takedown requests that removed documents from the filtered partitions."""
    return sorted({key.removeprefix(TAKEDOWN_COUNT) for m in filtered for u in m.units
                   for key, n in u.counts.items() if key.startswith(TAKEDOWN_COUNT) and n})


def _opt_outs_applied(lake: Lake, settings: Settings, filtered: list[Manifest]) -> dict:
    """Opt-out coverage of the filtered partitions: per policy kind, the documents and hosts an opt-out removed (or
    flagged) and the dates of the evidence; `hosts` as `kind:host`, which a later release compares; the agents."""
    s = settings.opt_outs
    rejected = [part for m in filtered for part in m.rejected_parts]
    columns = {"reason": pl.String, "domain": pl.String, "detail": pl.String}
    removed = lake.scan(rejected).filter(pl.col("filter") == OPT_OUT).select(list(columns)).collect() \
        if rejected else pl.DataFrame(schema=columns)
    flagged = {k.removeprefix(OPT_OUT_FLAGGED): n for m in filtered for u in m.units for k, n in u.counts.items()
               if k.startswith(OPT_OUT_FLAGGED)}
    kinds = {row.pop("kind"): row for row in coverage(removed.rename({"domain": "host"})).iter_rows(named=True)
             if row["documents"]}
    return {"kinds": kinds, "flagged": flagged, "agents": list(s.agents), "agents_as_of": s.agents_as_of.isoformat(),
            "honoured": list(s.honour) if s.enabled else [], "mode": s.mode,
            "hosts": sorted({f"{r}:{d}" for r, d in removed.select("reason", "domain").unique().iter_rows()})}


def _card_facts(lake: Lake, settings: Settings, crawls: list[str], shards: list[str]) -> dict:
    """Funnel per crawl from the raw records (what the readers skipped, what each filter dropped, what dedup
    removed), the language mix, the filter thresholds and dedup settings in force, the text parts."""
    manifests = {a: [m for c in crawls for m in committed(lake, a, c, shards).values()] for a in CARD_STAGES}
    text_parts = {c: [part for m in manifests["deduplicated"] if m.crawl == c for part in m.parts] for c in crawls}
    parts = [part for ps in text_parts.values() for part in ps]
    languages = (lake.scan(parts).group_by("language").len().sort("len", descending=True).collect().rows()
                 if parts else [])
    filters = [(b.name, b.model_dump(mode="json", exclude={"block", "enabled", "index_path", "model_path"}))
               for b in settings.filtered.blocks()]
    return {"funnel": _crawl_funnel(manifests, crawls), "drops": _drops(manifests),
            "takedowns": _takedowns_applied(manifests["filtered"]), "languages": languages,
            "opt_outs": _opt_outs_applied(lake, settings, manifests["filtered"]),
            "language_funnel": _language_funnel(manifests["filtered"], languages),
            "text_parts": text_parts, "filters": filters,
            "dedup": settings.dedup.model_dump(mode="json"), "evals": settings.evals.model_dump(mode="json")}


def _charts(lake: Lake, partitions: list[dict], mixture: dict[str, dict], counts: dict) -> Report:
    """Tokens per crawl and per language (the mix achieved, beside the weights' shares), and where the sequences'
    positions went (tokens, padding, cut)."""
    token_parts = [part for p in partitions for part in p["parts"]]
    by_crawl = (lake.scan(token_parts).group_by("crawl").agg(pl.col("n_tokens").sum()).sort("crawl").collect()
                if token_parts else None)
    if by_crawl is None or by_crawl.is_empty():
        return {}
    shown, rows = list(mixture)[:CHARTED], list(mixture.values())[:CHARTED]
    targeted = any("share" in (r.get("target") or {}) for r in mixture.values())
    return {
        "tokens_by_crawl_chart": Markdown(charts.hbars(
            "tokens per crawl", by_crawl["crawl"].to_list(), by_crawl["n_tokens"].to_list(), "tokens")),
        "tokens_by_language_chart": Markdown(charts.hbars(
            "tokens per language (released)", shown, [r["tokens"] for r in rows], "tokens")),
        "language_mix_chart": Markdown(charts.grouped_hbars(
            "language mix: share of the release's tokens, achieved and targeted", shown,
            {"achieved": [r["share"] for r in rows],
             **({"target": [(r.get("target") or {}).get("share", 0.0) for r in rows]} if targeted else {})},
            "share")),
        "positions_chart": Markdown(charts.hbars(
            f"sequence positions: {counts['sequences']:,} × {counts['context']:,}",
            ["document tokens", "padding (EOS)", "cut off (truncated)"],
            [counts["tokens_out"], counts["padding_tokens"], counts["truncated_tokens"]],
            "tokens", [charts.BLUE, charts.RED, charts.RED])),
    }


def opt_out_table(opt_outs: dict) -> pl.DataFrame:
    """The release's opt-out coverage, a row per policy kind honoured."""
    kinds = opt_outs.get("kinds", {})
    rows = [{"kind": k, "documents": kinds.get(k, {}).get("documents", 0), "hosts": kinds.get(k, {}).get("hosts", 0),
             "flagged": opt_outs.get("flagged", {}).get(k, 0),
             "evidence_from": kinds.get(k, {}).get("evidence_from"), "evidence_to": kinds.get(k, {}).get("evidence_to")}
            for k in opt_outs.get("honoured", [])]
    return pl.DataFrame(rows, schema={"kind": pl.String, "documents": pl.Int64, "hosts": pl.Int64,
                                      "flagged": pl.Int64, "evidence_from": pl.String, "evidence_to": pl.String})


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


def _release_report(lake: Lake, built: Release, partitions: list[dict], tok_hash: str, superseded: dict | None,
                    language_funnel: dict[str, dict[str, int]]) -> Report:
    """What the release holds (crawls, partitions, documents, tokens, sequences, files), what it cost, its card,
    the language mix and funnel, and the charts."""
    counts, mixture = built.manifest["counts"], built.manifest.get("mixture", {})
    return {
        "release": Url(lake.url(built.prefix)),
        "version": built.version,
        "reused": built.reused,
        "crawls": built.manifest["crawls"],
        "partitions": len(built.manifest["partitions"]),
        "documents": counts["documents"],
        "tokens": counts["tokens_in"],
        "sequences": counts["sequences"],
        "shards": len(built.manifest.get("shards", [None])),
        "context": counts["context"],
        "padding_pct": counts["padding_pct"],
        "truncated_pct": counts["truncated_pct"],
        "bytes": sum(built.manifest.get("files", {}).values()),
        "files": built.manifest.get("files", {}),
        "tokenizer_hash": tok_hash,
        "takedowns_applied": len(built.manifest.get("takedowns", [])),
        "opt_outs": opt_out_table(built.manifest.get("opt_outs") or {}),
        "supersedes": superseded["version"] if superseded else "",
        "seconds": built.manifest["seconds"],
        "peak_rss_mib": round(peak_rss_bytes() / MIB, 1),
        "units": len(built.units),  # scatter and shard units, on the runner
        "unit_peak_rss_mib": round(max((u.peak_rss_bytes for u in built.units), default=0) / MIB, 1),
        "dataset_card": Markdown(built.card),
        "language_mix": mixture_table(mixture),
        "language_funnel": language_funnel_table(language_funnel, mixture),
        **_charts(lake, partitions, mixture.get("languages", {}), counts),
    }


@dataclasses.dataclass
class _Tokenizer:
    """The tokenizer a release is written with: the loaded tokenizer, its hash, its EOS token's id."""

    tokenizer: Tokenizer
    hash: str
    eos: int


class TrainingRelease(AssetStage):
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

    spec = SPEC
    kinds = frozenset({"s3", "numpy"})
    fan_in = True  # it reads every crawl's tokens: one such stage at a time

    def deps(self, settings: Settings, specs: Sequence[StageSpec]) -> list[str]:
        return [TOKENIZER_SPEC.name]

    def build(self, p: Partition) -> Materialized:
        lake, settings = p.lake, p.settings
        crawls = p.crawls(settings.release.crawls)
        partitions = self.partitions(p, p.inputs[TOKENIZED], crawls)
        previous_prefix = latest_release(lake, settings.release.name)
        previous = lake.get_json(previous_prefix + "manifest.json") if previous_prefix else None
        tokenizer = self.tokenizer(p)
        facts = _card_facts(lake, settings, crawls, settings.shard_keys())
        built = self.write(p, partitions, tokenizer, facts)
        point_latest(lake, built)
        if superseded := mark_superseded(lake, previous, built):
            p.log.warning(f"release {superseded['version']} is superseded by {built.version}: it holds documents "
                          f"that takedown requests or opt-outs removed "
                          f"({', '.join([*superseded['takedowns'], *superseded.get('opt_outs', [])][:5])})")
        if built.reused:
            p.log.info(f"{built.prefix} already exists: releases are immutable, nothing was rewritten")
        return Materialized(_release_report(lake, built, partitions, tokenizer.hash, superseded,
                                            facts["language_funnel"]), built.version)

    @staticmethod
    def partitions(p: Partition, tokenized: LakeInput, crawls: list[str]) -> list[dict]:
        """The committed tokenized partitions of the crawls, in the crawls' order then by shard; none, or a crawl
        with a shard that has raw files and no committed partition, fails the release."""
        partitions = [_partition(m) for m in sorted((m for m in tokenized.manifests if m.crawl in crawls),
                                                    key=lambda m: (crawls.index(m.crawl), m.shard))]
        if not partitions:
            raise StageFailure(f"no committed tokenized partition for crawls {crawls}: run curated_job first")
        for crawl in crawls:  # the release is unpartitioned: each crawl is checked as its own partition would be
            dataclasses.replace(p, crawl=crawl).require_every_shard(SPEC, tokenized)
        return partitions

    @staticmethod
    def tokenizer(p: Partition) -> _Tokenizer:
        """The tokenizer the tokenized stage used, its hash, and its EOS token's id (a tokenizer without it fails
        the release)."""
        tok_settings, tok_hash = resolve_tokenizer(p.settings.tokenized, p.lake)
        tok = load_tokenizer(str(tok_settings.resolved_path()))
        eos = tok.token_to_id(p.settings.tokenized.eos_token)
        if eos is None:
            raise StageFailure(f"EOS token {p.settings.tokenized.eos_token!r} is not in the tokenizer's vocabulary")
        return _Tokenizer(tok, tok_hash, eos)

    @staticmethod
    def write(p: Partition, partitions: list[dict], tokenizer: _Tokenizer, facts: dict) -> Release:
        """Build and upload the release from the partitions (or return the version written before, as it is)."""
        settings, tok = p.settings, tokenizer.tokenizer
        versions = {s.name: s.version(settings) for s in p.specs}
        from llm_assets.platform.runners import runner_for  # when it runs, as run_stage does: a cluster client is heavy

        with tempfile.TemporaryDirectory(prefix="llm-assets-release-") as tmp:
            tokenizer_file = Path(tmp) / "tokenizer.json"
            tok.save(str(tokenizer_file))
            return build_release(
                p.lake, settings.release, partitions, tokenizer_file, tokenizer.hash, tokenizer.eos,
                tok.get_vocab_size(),
                code_versions={"tokenized": versions["tokenized"], "deduplicated": versions["deduplicated"],
                               "release": STAGE_VERSION},
                card_facts=facts, workdir=Path(tmp), takedowns=facts["takedowns"], opt_outs=facts["opt_outs"],
                runner=runner_for(settings.runner))

STAGES = [TrainingRelease()]
