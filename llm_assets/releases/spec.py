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
    return None if planner.lake.exists(f"releases/{settings.name}/{version}/manifest.json") else MISSING


def _latest(lake, settings) -> dict | None:
    """The version the release's name points at, with its counts."""
    prefix = latest_release(lake, settings.release.name)
    manifest = lake.get_json(prefix + "manifest.json") if prefix else None
    if manifest is None:
        return None
    counts = manifest["counts"]
    return {"version": manifest["version"], "documents": counts["documents"], "tokens": counts["tokens_in"],
            "sequences": counts["sequences"]}


SPEC = StageSpec("release", "release", ("tokenized",), version=lambda s: code_version(STAGE_VERSION, s.release.fingerprint()),
                 plan=_stale, facts=_latest)
