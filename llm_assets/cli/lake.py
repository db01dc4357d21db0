"""What is stale and how to rebuild it, status, drops and the vacuum: the commands that plan and build."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from llm_assets.cli.services import ensure_store
from llm_assets.core.lake import Lake, validate_crawl
from llm_assets.platform import environment
from llm_assets.settings import Settings


def cmd_stale(args) -> int:
    from llm_assets.platform.instance import get_instance
    from llm_assets.tools.stale import as_json, stale_partitions

    ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    planned = stale_partitions(get_instance(), lake, args.settings)
    figures = forecast_of(lake, args.settings, planned) if args.forecast else None
    if args.json:
        print(json.dumps(as_json(planned) | ({"forecast": figures.to_json()} if figures else {})))
        return 0
    if not planned:
        print("nothing is stale")
        return 0
    _print_plan(planned)
    print(f"{len(planned)} partitions to rebuild")
    if figures:
        print(f"\n{figures.render()}")
    return 0


def existing_crawl(lake: Lake, crawl: str) -> str:
    """`crawl`, valid and known to the lake (dropped under raw/ or built): a misspelt crawl is an error naming it and
    the crawls there are, not an empty answer."""
    import difflib

    from llm_assets.tools.stale import known_crawls

    known = known_crawls(lake)
    if validate_crawl(crawl) not in known:
        close = difflib.get_close_matches(crawl, known, n=3)
        raise LookupError(f"unknown crawl {crawl!r}: the lake holds {len(known)} crawl(s)"
                          + (f"; did you mean {', '.join(close)}?" if close else "")
                          + " (`llm-assets status` lists them)")
    return crawl


def cmd_preview(args) -> int:

    from llm_assets.core.preview import parse_sample
    from llm_assets.dagster.preview import preview_change

    new = Settings.from_file(Path(args.new_settings))
    fraction = parse_sample(args.sample)
    ensure_store()
    store = environment.store_config(args.settings.store)
    lake = Lake(store)
    crawls = [existing_crawl(lake, args.crawl)] if args.crawl else None
    report = preview_change(lake, store, args.settings, new, crawls, fraction, examples=args.examples)
    print(json.dumps(report.to_json(), default=str) if args.json else report.render())
    return 0


def forecast_of(lake, settings, planned):
    from llm_assets.dagster.freshness import plan_forecast

    return plan_forecast(lake, settings, planned)


def _print_plan(planned) -> None:
    width = max(len(p.asset) for p in planned)
    for p in planned:
        print(f"{p.asset.ljust(width)}  {p.partition or '(unpartitioned)'}  {p.cause}")


def cmd_backfill(args) -> int:
    from llm_assets.dagster.freshness import launch_stale_backfill, stale_backfill, wait_backfill
    from llm_assets.platform.instance import get_instance, launched_by
    from llm_assets.tools.stale import stale_partitions

    instance = get_instance()
    if args.status is not None:
        backfill = stale_backfill(instance, args.status or None)
        if backfill is None:
            print(f"no backfill {args.status}" if args.status else "no stale backfill yet", file=sys.stderr)
            return 1
        return _report_backfill(instance, backfill)
    if not args.stale:
        print("backfill needs --stale (launch) or --status [ID] (how one went)", file=sys.stderr)
        return 2
    ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    planned = stale_partitions(instance, lake, args.settings)
    if not planned:
        print("nothing is stale; nothing to do")
        return 0
    if args.dry_run:
        _print_plan(planned)
        if args.forecast:
            print(f"\n{forecast_of(lake, args.settings, planned).render()}\n")
        print(f"{len(planned)} stale partitions would be ONE backfill (dry run: nothing launched)")
        return 0
    figures = forecast_of(lake, args.settings, planned)  # the backfill's tags carry it, printed or not
    if args.forecast:
        print(f"{figures.render()}\n", flush=True)
    backfill_id = launch_stale_backfill(instance, planned, tags=launched_by("backfill --stale"), forecast=figures)
    assert backfill_id is not None
    print(f"backfill {backfill_id}: {len(planned)} partitions "
          f"({', '.join(sorted({p.asset for p in planned}))}); the daemon's stale_backfill_sensor runs it job by job "
          f"(`make ui`: its runs are tagged llm_assets/stale_backfill={backfill_id})"
          + ("" if args.wait else f"; `llm-assets backfill --status {backfill_id}` says how it went"), flush=True)
    if not args.wait:
        return 0
    return _report_backfill(instance, wait_backfill(instance, backfill_id))


def _report_backfill(instance, backfill) -> int:
    """Each failed run of the backfill with its first error, then one line: exit 1 when it did not succeed."""
    from llm_assets.platform import failures
    from llm_assets.platform.backfills import STALE_TAG, Status, runs_of

    failed = failures.failed_runs(instance, {STALE_TAG: backfill.backfill_id})
    for f in failed:
        failures.report(f)
    runs = instance.get_runs_count(runs_of(backfill.backfill_id))
    if backfill.in_progress:
        print(f"backfill {backfill.backfill_id}: {backfill.status} (still running"
              + (f" {backfill.jobs[-1]}" if backfill.jobs else "") + f"): {runs} runs so far, {len(failed)} failed")
        return 0
    if failed:
        print(f"\n{failures.summary(f'backfill {backfill.backfill_id}', failed)}", file=sys.stderr)
        return 1
    if backfill.status != Status.SUCCEEDED:
        print(f"backfill {backfill.backfill_id} ended {backfill.status}", file=sys.stderr)
        return 1
    print(f"backfill {backfill.backfill_id}: completed, {runs} runs succeeded")
    return 0


def cmd_vacuum(args) -> int:
    from llm_assets.core.partition import vacuum

    ensure_store()
    config = environment.store_config(args.settings.store)
    retention_s = config.retention_s if args.retention_hours is None else args.retention_hours * 3600
    deleted = vacuum(Lake(config), retention_s)
    print(f"deleted {len(deleted)} superseded or orphaned objects older than {retention_s / 3600:g} h")
    return 0


def cmd_status(args) -> int:
    from llm_assets.tools.status import format_rejected, format_summary, lake_status

    ensure_store()
    status = lake_status(Lake(environment.store_config(args.settings.store)), args.settings)
    if args.json:
        print(json.dumps({k: status[k] for k in ("crawls", "assets", "held_back", "quarantined_files",
                                                 "rejected_raw_keys", "unused_eval_keys")}))
    else:
        print(format_summary(status))
        if status["rejected_raw_keys"]["count"]:
            print(format_rejected(status))
    return 0


def cmd_drop(args) -> int:
    """Upload crawl files under raw/<crawl>/, where the raw_drop_sensor finds them: every key checked first, with the
    sensor's rules, so a bad name uploads nothing; each file streamed (a multipart upload, completed whole or not at
    all), never read into memory."""

    from llm_assets.core.lake import parse_raw_key

    crawl = validate_crawl(args.crawl)
    if args.as_name and len(args.files) != 1:
        raise ValueError("--as names one file: give exactly one FILE with it")
    keys: dict[str, Path] = {}
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            raise ValueError(f"{name}: no such file")
        key = f"raw/{crawl}/{args.as_name or path.name}"
        parse_raw_key(key)
        if key in keys:
            raise ValueError(f"{name} and {keys[key]} would both be {key!r}")
        keys[key] = path
    ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    for key, path in keys.items():
        lake.put_file(key, path)
        print(f"{path} -> {lake.url(key)} ({path.stat().st_size:,} bytes)")
    print(f"{len(keys)} file{'s' * (len(keys) != 1)} dropped into crawl {crawl}; raw_drop_sensor requests their runs "
          "on its next tick (`make ui`), or `llm-assets demo` runs what it requests")
    return 0
