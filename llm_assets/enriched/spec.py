from llm_assets.core.enrich import STAGE_VERSION
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec


def _version(settings) -> str:
    return code_version(STAGE_VERSION, settings.enriched.fingerprint())


SPEC = StageSpec("enriched", "shard", ("deduplicated",), version=_version)
