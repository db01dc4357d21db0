"""Screenshots of the Dagster UI over this checkout's lake, as a curator sees it after `make demo`: the asset graph,
a shard partition's filter funnel and its funnel per language, a crawl's stats and its funnel per language, the
release's charts and language mix, what a crawl cost, the demo's runs under their jobs (the Overview's timeline, the
Runs page), and (after a plan under the demo's changed settings) the
asset graph marking the assets with stale partitions, and why on an asset's Checks tab.

    make screenshots [SCREENSHOTS=folder]    (default: .llm-assets/screenshots)
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from llm_assets.core.lake import Lake, manifest_key
from llm_assets.core.partition import read_manifest
from llm_assets.platform import environment
from llm_assets.platform.embedded_store import free_ports
from llm_assets.platform.instance import get_instance
from llm_assets.settings import Settings, load_settings
from llm_assets.tools.stale import known_crawls, stale_partitions
from llm_assets_support.browser import _poll, chromium

# (file, page, the chart to open or the text to wait for): `duplicate_clusters`' chart is `cluster_sizes`
CHARTS = {"cluster_sizes"}
PAGES = [
    ("catalog.png", "/assets", "partitions"),
    ("lake-group.png", "/locations/llm_assets/asset-groups/lake", "signatures"),
    ("filtered-partition.png", "/assets/filtered?view=partitions&partition={crawl}|{shard}", "filter_funnel_chart"),
    # the partition the demo's robots.txt capture touched: the opt-outs in its funnel, and their table
    ("filtered-opt-outs.png", "/assets/filtered?view=partitions&partition={crawl}|{opt_out_shard}",
     "filter_funnel_chart"),
    ("filtered-opt-outs-metadata.png", "/assets/filtered?view=partitions&partition={crawl}|{opt_out_shard}",
     "opt_outs"),
    ("tokenized-partition.png", "/assets/tokenized?view=partitions&partition={crawl}|{shard}", "tokens_chart"),
    ("crawl-stats.png", "/assets/crawl_stats?view=partitions&partition={crawl}", "language_chart"),
    ("duplicate-clusters.png", "/assets/duplicate_clusters?view=partitions&partition={dup_crawl}", "cluster_sizes"),
    ("duplicate-clusters-metadata.png", "/assets/duplicate_clusters?view=partitions&partition={dup_crawl}",
     "lsh_rejected"),
    ("release.png", "/assets/release", "tokens_by_crawl_chart"),
    ("release-metadata.png", "/assets/release", "shards"),
    ("filtered-language-funnel.png", "/assets/filtered?view=partitions&partition={crawl}|{languages_shard}",
     "language_funnel_chart"),
    ("crawl-stats-language-funnels.png", "/assets/crawl_stats?view=partitions&partition={crawl}",
     "language_funnel_chart"),
    ("crawl-stats-language-mix.png", "/assets/crawl_stats?view=partitions&partition={crawl}", "language_mix_chart"),
    ("release-language-mix.png", "/assets/release", "language_mix_chart"),
    ("cost.png", "/assets/cost?view=partitions&partition={crawl}", "cost_chart"),
    ("cost-metadata.png", "/assets/cost?view=partitions&partition={crawl}", "by_stage"),
    ("preview-launchpad.png", "/locations/llm_assets/jobs/preview_job/playground", "core_hour"),
    # the demo's runs under their jobs, its stale backfill's (crawl_job, curated_job, ...) included
    ("overview-timeline.png", "/overview/activity/timeline", "curated_job"),
    ("runs.png", "/runs", "cost_job"),
]
# After a plan under the demo's changed settings (`llm-assets demo --change` would build it): each asset's
# `not_stale` check, failed with the partitions the plan holds and why.
STALE_PAGES = [
    ("lake-group-stale.png", "/locations/llm_assets/asset-groups/lake", "signatures"),
    ("filtered-not-stale.png", "/assets/filtered?view=checks", "stale_partitions"),
]


def with_duplicates(lake: Lake, crawls: list[str]) -> str:
    """The first crawl whose clusters removed a document (the demo's first crawl has none, so no chart)."""
    return next((c for c in crawls if (lake.get_json(manifest_key("duplicate_clusters", c, "all")) or {})
                 .get("rows")), crawls[0])


def most_languages(lake: Lake, crawl: str, shards: list[str]) -> str:
    """The shard of the crawl whose `filtered` partition kept the most languages other than English (the first shard
    when none did): the one whose funnel per language shows more than English."""
    from llm_assets.core.filtered import language_funnels

    def kept(shard: str) -> int:
        manifest = read_manifest(lake, "filtered", crawl, shard)
        return sum(1 for f in language_funnels(manifest.counts() if manifest else {}) if f.kept and f.language != "en")

    return max(shards, key=kept)


def with_opt_outs(lake: Lake, crawl: str, shards: list[str]) -> str:
    """The shard of the crawl whose `filtered` partition left out the most documents as opt-outs (the first shard
    when none did)."""
    def opted_out(shard: str) -> int:
        manifest = read_manifest(lake, "filtered", crawl, shard)
        return sum(n for k, n in (manifest.dropped() if manifest else {}).items() if k.startswith("opt_out/"))

    return max(shards, key=opted_out)


def main(out: Path) -> None:
    settings = load_settings()
    lake = Lake(environment.store_config(settings.store))
    crawls, shard = known_crawls(lake), settings.shard_keys()[0]
    crawl, dup_crawl = crawls[0], with_duplicates(lake, crawls)
    languages_shard = most_languages(lake, crawl, settings.shard_keys())
    opt_out_shard = with_opt_outs(lake, crawl, settings.shard_keys())
    environment.private_dir(out)
    (port,) = free_ports(1)
    ui = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "llm-assets"), "ui", "--port", str(port)],
                          stdout=open(out / "webserver.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _poll(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2), timeout=180)
        with chromium() as page:
            for name, path, chart in PAGES:
                path = path.format(crawl=crawl, shard=shard, dup_crawl=dup_crawl, languages_shard=languages_shard,
                                   opt_out_shard=opt_out_shard)
                shoot(page, f"http://127.0.0.1:{port}{path}", chart, out / name)
            # A curator changes the settings and asks what is stale: the asset graph marks the assets it plans
            changed = environment.home() / "demo" / "changed-settings.yaml"
            if changed.exists():
                instance = get_instance()
                stale_partitions(instance, lake, Settings.from_file(changed))
                try:
                    for name, path, text in STALE_PAGES:
                        shoot(page, f"http://127.0.0.1:{port}{path}", text, out / name)
                finally:  # the deployment's own plan again
                    stale_partitions(instance, lake, settings)
    finally:
        os.killpg(ui.pid, 15)
        ui.wait(timeout=60)


def shoot(page, url: str, chart: str, path: Path) -> None:
    """A screenshot of the page at `url` once `chart` is shown (a chart) or its text is on the page (scrolled to
    the metadata row so named)."""
    page.goto(url)
    if chart.endswith("_chart") or chart in CHARTS:
        width, _ = page.show_chart(chart)
        print(f"{path.name}: {chart} shown, {width} px wide")
    else:
        page.wait_for(f"document.body.innerText.includes('{chart}')")
        for _ in range(2):  # the modal may open once the page has loaded
            page.skip_modal()
            page.settle()
        # a metadata row named so (e.g. `lsh_rejected`, `shards`) is scrolled into view
        page.js(f"""[...document.querySelectorAll('tr')]
                   .find(r => r.innerText.trim().split(/\\s/)[0] == '{chart}')
                   ?.scrollIntoView({{block: 'center'}})""")
        page.settle()
    page.screenshot(path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else environment.home() / "screenshots")
