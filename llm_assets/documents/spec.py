from llm_assets.core.documents import STAGE_VERSION
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec

SPEC = StageSpec("documents", "shard", ("raw_files",),
                 version=lambda s: code_version(STAGE_VERSION, s.documents.fingerprint()))
