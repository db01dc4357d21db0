"""What people drop to change the curated data after it is built: takedown requests and evaluation sets.

Both are read from the bucket where they are dropped (`takedowns/`, `evals/`) by every run of `filtered` and by
the stale planner, so a dropped list plans its rebuild at once; their assets show what is in force."""

from __future__ import annotations

from llm_assets.core.decontamination import INDEX_PREFIX, NO_INDEX, eval_sources, index_version
from llm_assets.core.takedowns import load_takedowns, takedowns_version
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec

STAGE_VERSION = "1"


def _takedowns(lake, settings) -> dict:
    # The list in force is what is under takedowns/ (the asset writes nothing else): no request is an empty list,
    # in force like any other, not an asset never built.
    try:
        requests = load_takedowns(lake)
    except ValueError as e:  # a bad line: status says which, and goes on
        return {"error": str(e)}
    return {"version": takedowns_version(requests), "requests": len(requests)} if requests else {"requests": 0}


def _eval_index(lake, settings) -> dict | None:
    sources = eval_sources(lake, settings.evals)
    version = index_version(settings.evals, sources)
    if version == NO_INDEX:
        return None
    return {"version": version, "eval_sets": len(sources), "built": lake.exists(f"{INDEX_PREFIX}{version}.npz")}


TAKEDOWNS_SPEC = StageSpec("takedowns", "model", facts=_takedowns)
EVAL_INDEX_SPEC = StageSpec("eval_index", "model", facts=_eval_index,
                            version=lambda s: code_version(STAGE_VERSION, s.evals.model_dump_json()))
