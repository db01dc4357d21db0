"""Screenshots of the Dagster UI over this checkout's lake, as a curator sees it after `make demo`: the asset graph,
a shard partition's filter funnel, a crawl's stats and the release's charts.

    make screenshots [SCREENSHOTS=folder]    (default: .llm-assets/screenshots)
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from llm_assets import environment
from llm_assets.core.lake import Lake
from llm_assets.embedded_store import free_ports
from llm_assets.settings import load_settings
from llm_assets.stale import known_crawls
from llm_assets_tests.browser import _poll, chromium

# (file, page, chart to open or the text to wait for)
PAGES = [
    ("catalog.png", "/assets", "partitions"),
    ("lake-group.png", "/locations/llm_assets/asset-groups/lake", "signatures"),
    ("filtered-partition.png", "/assets/filtered?view=partitions&partition={crawl}|{shard}", "filter_funnel_chart"),
    ("tokenized-partition.png", "/assets/tokenized?view=partitions&partition={crawl}|{shard}", "tokens_chart"),
    ("crawl-stats.png", "/assets/crawl_stats?view=partitions&partition={crawl}", "language_chart"),
    ("release.png", "/assets/release", "tokens_by_crawl_chart"),
]


def main(out: Path) -> None:
    settings = load_settings()
    crawl, shard = known_crawls(Lake(environment.store_config(settings.store)))[0], settings.shard_keys()[0]
    out.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    ui = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "llm-assets"), "ui", "--port", str(port)],
                          stdout=open(out / "webserver.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _poll(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2), timeout=180)
        with chromium() as page:
            for name, path, chart in PAGES:
                page.goto(f"http://127.0.0.1:{port}{path.format(crawl=crawl, shard=shard)}")
                if chart.endswith("_chart"):
                    width, _ = page.show_chart(chart)
                    print(f"{name}: {chart} shown, {width} px wide")
                else:
                    page.wait_for(f"document.body.innerText.includes('{chart}')")
                    for _ in range(2):  # the modal may open once the page has loaded
                        page.skip_modal()
                        page.settle()
                page.screenshot(out / name)
                print(f"wrote {out / name}")
    finally:
        os.killpg(ui.pid, 15)
        ui.wait(timeout=60)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else environment.home() / "screenshots")
