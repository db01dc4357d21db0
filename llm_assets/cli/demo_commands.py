"""`llm-assets demo` and its two further steps."""

from __future__ import annotations

import sys

from llm_assets.cli.lake import forecast_of
from llm_assets.cli.services import ensure_store
from llm_assets.core.lake import Lake
from llm_assets.platform import environment
from llm_assets.settings import Settings


def cmd_demo_change(args) -> int:
    """The demo's second step: one new raw file and one changed threshold; the stale plan; ONE backfill."""
    from llm_assets.cli import demo
    from llm_assets.dagster.freshness import launch_stale_backfill
    from llm_assets.platform.instance import get_instance, launched_by
    from llm_assets.tools.stale import stale_partitions

    ensure_store()
    path = demo.write_changed_settings(args.settings_path, environment.home() / "demo")
    settings = Settings.from_file(path)
    lake = Lake(environment.store_config(settings.store))
    print(f"dropped {demo.drop_late_file(lake)}; settings {path}: the gopher_quality block's min_doc_words 50 → 80")
    instance = get_instance()
    planned = stale_partitions(instance, lake, settings)
    for p in planned:
        print(f"  stale  {p.asset:<18} {p.partition or '(unpartitioned)':<24} {p.cause}")
    figures = forecast_of(lake, settings, planned)
    print(f"\n{figures.render()}\n", flush=True)
    backfill_id = launch_stale_backfill(instance, planned, tags=launched_by("demo --change"), forecast=figures)
    print(f"backfill {backfill_id}: {len(planned)} partitions. Run it with the changed settings:\n"
          f"  LLM_ASSETS_SETTINGS={path} make ui     # the daemon's stale_backfill_sensor runs it, job by job\n"
          f"then `.venv/bin/llm-assets backfill --status {backfill_id}` says how it went (each failed run with its "
          f"first error; exit 1 if any failed),\n"
          f"and `LLM_ASSETS_SETTINGS={path} .venv/bin/llm-assets stale` lists nothing.")
    return 0


def cmd_demo_takedown(args) -> int:
    """The demo's takedown step: one released document's URL taken down, planned, rebuilt, re-released."""
    from llm_assets.cli import demo
    from llm_assets.platform import failures
    from llm_assets.platform.instance import get_instance

    ensure_store()
    _, settings = demo.demo_files(environment.home() / "demo", args.settings)
    failed = demo.takedown_step(get_instance(), Lake(environment.store_config(settings.store)), settings)
    if failed:
        print(f"\n{failures.summary('demo', failed)}", file=sys.stderr)
    return 1 if failed else 0


def cmd_demo(args) -> int:
    if args.change:
        return cmd_demo_change(args)
    if args.takedown:
        return cmd_demo_takedown(args)
    from llm_assets.cli import demo
    from llm_assets.platform import failures
    from llm_assets.platform.instance import get_instance
    from llm_assets.tools.status import format_summary, lake_status

    ensure_store()
    instance = get_instance()
    # Without ../shared/data: a generated sample, and the settings pointed at a tokenizer trained on it.
    files, settings = demo.demo_files(environment.home() / "demo", args.settings)
    lake = Lake(environment.store_config(settings.store))
    if evals := demo.drop_eval_sets(lake, settings):
        print(f"dropped the eval set {evals[0]}: documents quoting it are dropped as contaminated")
    if robots := demo.drop_robots(lake):
        crawl, host, body = demo.DEMO_ROBOTS
        print(f"dropped {robots}, a robots.txt capture made for the demo ({body.strip()!r} for {host}): its pages "
              "are left out as opt-outs (reason robots_txt)")
    failed = demo.run_demo(instance, lake, settings, files)
    print()
    print(format_summary(lake_status(lake, settings)))  # after every run, the release's included
    for examples in (demo.image_pair_examples(lake, settings, list(files)),
                     demo.enrichment_examples(lake, settings, list(files))):
        if examples:  # none of what was not built
            print(f"\n{examples}")
    if funnel := demo.format_language_funnel(demo.language_funnel(lake, settings, list(files))):
        print(f"\n{funnel}")
    if not failed:  # what the next step would cost, before it changes anything
        path, figures = demo.change_forecast(lake, args.settings_path, environment.home() / "demo")
        print(f"\nnext, `llm-assets demo --change` (the late file {', '.join(demo.late_file_bytes())} and the "
              f"settings {path}) would rebuild:\n{figures.render()}")
    if failed:
        print(f"\n{failures.summary('demo', failed)}", file=sys.stderr)
        return 1
    return 0
