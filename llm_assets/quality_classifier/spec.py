from llm_assets.core.quality_model import LATEST
from llm_assets.core.versions import code_version, short
from llm_assets.registry import StageSpec

STAGE_VERSION = "1"


def _published(lake, settings) -> dict | None:
    pointer = lake.get_json(LATEST)
    if pointer is None:
        return None
    return {"version": short(pointer["sha256"]), "train_examples": pointer.get("train_examples", 0)}


SPEC = StageSpec("quality_classifier", "model",
                 version=lambda s: code_version(STAGE_VERSION, s.quality_classifier.model_dump_json()),
                 facts=_published)
