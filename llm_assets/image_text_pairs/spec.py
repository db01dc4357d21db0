from llm_assets.core.image_text_pairs import STAGE_VERSION
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec

# The pairs come from the same reader as documents: its settings are theirs too.
SPEC = StageSpec("image_text_pairs", "shard", ("raw_files",),
                 version=lambda s: code_version(STAGE_VERSION, s.image_text_pairs.fingerprint(),
                                                s.documents.fingerprint()))
