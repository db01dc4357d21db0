import tempfile
from pathlib import Path

import dagster as dg
from llm_assets.core.partition import committed
from llm_assets.core.release import STAGE_VERSION, build_release, point_latest, release_version
from llm_assets.core.tokenize import load_tokenizer, resolve_tokenizer
from llm_assets.core.units import peak_rss_bytes
from llm_assets.dedup.assets import DEDUPLICATED_VERSION
from llm_assets.registry import MISSING, UPSTREAM, StageSpec
from llm_assets.settings import load_settings
from llm_assets.stage import code_version
from llm_assets.tokenized.assets import CODE_VERSION as TOKENIZED_VERSION
from llm_assets.tokenized.assets import tokenized, tokenizer
from resources import ObjectStore

SETTINGS = load_settings()


def _committed(lake, asset: str, crawls: list[str]) -> list[dict]:
    return [{"crawl": crawl, "shard": shard, "data_version": m["data_version"], "code_version": m["code_version"],
             "rows": m["rows"], "parts": [u["part"] for u in m["units"] if u.get("part")]}
            for crawl in crawls for shard, m in committed(lake, asset, crawl, SETTINGS.shard_keys()).items()]


def _card_facts(lake, crawls: list[str]) -> dict:
    """Funnel per crawl (extracted → filtered → deduplicated documents), the language mix, the text parts."""
    rows = {asset: _committed(lake, asset, crawls) for asset in ("documents", "filtered", "deduplicated")}
    funnel = {c: {a: sum(p["rows"] for p in ps if p["crawl"] == c) for a, ps in rows.items()} for c in crawls}
    text_parts = {c: [part for p in rows["deduplicated"] if p["crawl"] == c for part in p["parts"]] for c in crawls}
    parts = [part for ps in text_parts.values() for part in ps]
    languages = (lake.scan(parts).group_by("language").len().sort("len", descending=True).collect().rows()
                 if parts else [])
    return {"funnel": funnel, "languages": languages, "text_parts": text_parts}


@dg.asset(
    deps=[dg.AssetDep(tokenized, partition_mapping=dg.AllPartitionMapping()), tokenizer],
    group_name="releases",
    kinds={"s3", "numpy"},
    code_version=code_version(STAGE_VERSION, SETTINGS.release.fingerprint()),
)
def release(context: dg.AssetExecutionContext, store: ObjectStore) -> dg.MaterializeResult:
    """A versioned, immutable training release under `releases/<name>/<version>/`: the tokenized documents of the
    configured crawls (settings `release`), packed into sequences of `context` tokens (best-fit-decreasing of whole
    documents, or concatenate-and-chunk), shuffled globally by a keyed Feistel permutation of the seed, written as
    a Megatron-LM indexed dataset (`data.bin` + `data.idx`) with `provenance.parquet` (the documents of every
    sequence), `tokenizer.json`, the curated text as Parquet, `manifest.json` (crawls, partitions and their data
    versions, code versions, config, tokenizer hash, counts) and a dataset card. The version hashes all of that
    input, so the same input is never written twice and another config is another version.
    """
    lake = store.lake()
    settings = SETTINGS.release
    crawls = list(settings.crawls) or sorted(context.instance.get_dynamic_partitions("crawl"))
    partitions = _committed(lake, "tokenized", crawls)
    if not partitions:
        raise dg.Failure(f"no committed tokenized partition for crawls {crawls}: run curated_job first")
    tok_settings, tok_hash = resolve_tokenizer(SETTINGS.tokenized, lake)
    tok = load_tokenizer(str(tok_settings.resolved_path()))
    eos = tok.token_to_id(SETTINGS.tokenized.eos_token)
    with tempfile.TemporaryDirectory(prefix="llm-assets-release-") as tmp:
        tokenizer_file = Path(tmp) / "tokenizer.json"
        tok.save(str(tokenizer_file))
        built = build_release(
            lake, settings, partitions, tokenizer_file, tok_hash, eos, tok.get_vocab_size(),
            code_versions={"tokenized": TOKENIZED_VERSION, "deduplicated": DEDUPLICATED_VERSION,
                           "release": STAGE_VERSION},
            card_facts=_card_facts(lake, crawls), workdir=Path(tmp))
    point_latest(lake, built)
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
            "context": counts["context"],
            "padding_pct": counts["padding_pct"],
            "truncated_pct": counts["truncated_pct"],
            "bytes": sum(built.manifest.get("files", {}).values()),
            "files": dg.MetadataValue.json(built.manifest.get("files", {})),
            "tokenizer_hash": tok_hash,
            "seconds": built.manifest["seconds"],
            "peak_rss_mib": round(peak_rss_bytes() / 2**20, 1),
            "dataset_card": dg.MetadataValue.md(built.card),
        },
        data_version=dg.DataVersion(built.version),
    )


def _stale(planner, crawl=None, shard=None) -> str | None:
    """The release is stale when a tokenized partition is rebuilt, or when the release its settings and the
    committed tokenized partitions make (its version) was not written yet."""
    if planner.any_planned("tokenized"):
        return f"{UPSTREAM} (tokenized is rebuilt)"
    settings = SETTINGS.release
    names = list(settings.crawls) or planner.crawls
    partitions = [{"crawl": c, "shard": s, "data_version": m["data_version"]} for c in names
                  for s, m in planner.committed("tokenized", c).items()]
    if not partitions:
        return None
    _, tok_hash = resolve_tokenizer(SETTINGS.tokenized, planner.lake)
    version = release_version(settings, tok_hash, partitions)
    return None if planner.lake.exists(f"releases/{settings.name}/{version}/manifest.json") else MISSING


SPEC = StageSpec("release", "release", ("tokenized",), plan=_stale)
