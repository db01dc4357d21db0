"""The `cost` stage in the stage registry: one partition per crawl, built from the cost ledger, not from parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_assets.core.ledger import ledger_keys
from llm_assets.core.versions import code_version, digest
from llm_assets.registry import CODE, MISSING, UPSTREAM, StageSpec

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake
    from llm_assets.settings import Settings
    from llm_assets.stale import Planner

NAME = "cost"
STAGE_VERSION = "1"
LEDGER = "cost ledger"  # what a new ledger row makes stale: "upstream data changed (cost ledger)"


def cost_version(settings: Settings) -> str:
    """The stage and its prices: a new price is new money figures."""
    return code_version(STAGE_VERSION, settings.cost.fingerprint())


def charged(specs) -> list[str]:
    """The stages whose units the ledger charges per crawl: every shard and crawl stage but this one."""
    return [s.name for s in specs if s.level in ("shard", "crawl") and s.name != NAME]


def ledger_version(lake: Lake, crawl: str, assets: list[str]) -> tuple[str, list[str]]:
    """The version of a crawl's ledger (its objects' keys: appended, never rewritten) and those keys."""
    keys = ledger_keys(lake, assets, [crawl])
    return digest(*keys), keys


def _plan(planner: Planner, crawl: str | None, _shard: str | None) -> str | None:
    """Stale when the crawl's ledger has objects the last build did not aggregate, or will have: a stage of the crawl
    is planned (its rebuild appends to the ledger; the backfill builds this stage after it, its dependency)."""
    assert crawl is not None
    if rebuilt := next((a for a, p in planner.planned if a != NAME and p.split("|")[0] == crawl), None):
        return f"{UPSTREAM} ({rebuilt} is rebuilt)"
    now, keys = planner.memo((NAME, crawl), lambda: ledger_version(
        planner.lake, crawl, charged(planner.specs.values())))
    built = planner.manifest(NAME, crawl, "all")
    if built is None:
        return MISSING if keys else None
    if planner.code_changed(NAME, built):
        return CODE
    return f"{UPSTREAM} ({LEDGER})" if built.data_version != now else None


# Last in the registry: it is planned after every stage whose rebuild it waits for.
SPEC = StageSpec(NAME, "crawl", version=cost_version, plan=_plan)
