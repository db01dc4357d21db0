from llm_assets.core.partition import Manifest, units_version
from llm_assets.registry import StageSpec

CODE_VERSION = "3"  # 3: a funnel and kept words per language; 2: a document without a language is named


def stats_version(manifests: list[Manifest]) -> str:
    """The stats' data version: every filtered unit they summarise."""
    return units_version(CODE_VERSION, manifests)


SPEC = StageSpec("crawl_stats", "crawl", ("filtered",), version=lambda s: CODE_VERSION,
                 expected_version=lambda planner, crawl: stats_version(list(planner.committed("filtered", crawl).values())))
