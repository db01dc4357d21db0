"""`llm-assets`: the demo, the lake's status, a look at any partition, and the embedded object store."""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
from pathlib import Path

from llm_assets import environment
from llm_assets.core.errors import InfrastructureError
from llm_assets.core.keys import CRAWL_LEVEL_SHARD
from llm_assets.core.lake import Lake, validate_crawl, validate_shard
from llm_assets.core.partition import LakeInput, committed
from llm_assets.settings import SETTINGS_ENV, Settings, settings_path

# What needs Dagster (the instance, the definitions) is imported by the commands that use it: `show`, `record` or
# `store` start without paying for it.


def _store():
    from llm_assets.embedded_store import home_store  # boto3: only for the commands that manage the store

    return home_store()


def cmd_store(args) -> int:
    if not environment.uses_embedded_store():
        print(f"LLM_ASSETS_S3_ENDPOINT points at {environment.endpoint() or 'AWS S3'}: no embedded store to manage")
        return 0 if args.action == "status" else 1
    store = _store()
    if args.action == "start":
        store.start()
        print(f"object store running at {store.endpoint} (bucket {store.bucket}, state {store.state_dir}; ports "
              f"recorded in {environment.ports_file()})")
    elif args.action == "stop":
        print("object store stopped" if store.stop() else "object store was not running")
    else:
        status = store.status()
        print(json.dumps(status) if args.json else
              f"{'running' if status['running'] else 'stopped'}: {status['endpoint']} bucket={status['bucket']}")
        return 0 if status["running"] else 3
    return 0


def cmd_cluster(args) -> int:
    """The local Dask cluster the `dask` runner uses when no runner.address is set."""
    from llm_assets.runners import local_cluster

    cluster = local_cluster()
    if args.action == "start":
        # No credentials are handed to the workers: each unit names where its process reads them.
        state = cluster.start(nodes=args.nodes, dashboard=args.dashboard)
        print(f"cluster running at {state.address}: scheduler and {len(state.workers)} workers "
              f"(state and logs in {cluster.state_dir})"
              + (f"; dashboard {state.dashboard}" if state.dashboard else ""))
    elif args.action == "stop":
        print("cluster stopped" if cluster.stop() else "no cluster was running")
    else:
        status = cluster.status()
        if args.json:
            print(json.dumps(status))
        elif status["running"]:
            print(f"running: {status['address']}, workers {', '.join(status['workers']) or 'none'}")
        else:
            print("stopped" + (f": {status['error']}" if "error" in status else ""))
        return 0 if status["running"] else 3
    return 0


def _ensure_store() -> None:
    """The embedded store, started if need be; in a deployed home (`deploy up` runs), never started here: its
    supervisor owns it, and a second store beside it would move its ports and fight over its data folder."""
    if not environment.uses_embedded_store():
        return
    from llm_assets.deploy import Layout

    store = _store()
    if Layout(environment.home()).supervisor_pid() is None:
        store.start()
    elif not store.ready():
        raise StoreNotAnswering(
            f"the deployment's object store does not answer: {store.why_not_answering()}. `llm-assets deploy up` "
            "supervises it and restarts it when it exits (`llm-assets deploy status` shows it); this command starts "
            "no store of its own in a deployed home")


class StoreNotAnswering(RuntimeError):
    pass


def cmd_demo_change(args) -> int:
    """The demo's second step: one new raw file and one changed threshold; the stale plan; ONE backfill."""
    from llm_assets import demo
    from llm_assets.freshness import launch_stale_backfill
    from llm_assets.instance import get_instance, launched_by
    from llm_assets.stale import stale_partitions

    _ensure_store()
    path = demo.write_changed_settings(args.settings_path, environment.home() / "demo")
    settings = Settings.from_file(path)
    lake = Lake(environment.store_config(settings.store))
    print(f"dropped {demo.drop_late_file(lake)}; settings {path}: the gopher_quality block's min_doc_words 50 → 80")
    instance = get_instance()
    planned = stale_partitions(instance, lake, settings)
    for p in planned:
        print(f"  stale  {p.asset:<18} {p.partition or '(unpartitioned)':<24} {p.cause}")
    figures = _forecast(lake, settings, planned)
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
    from llm_assets import demo, failures
    from llm_assets.instance import get_instance

    _ensure_store()
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
    from llm_assets import demo, failures
    from llm_assets.instance import get_instance
    from llm_assets.status import format_summary, lake_status

    _ensure_store()
    instance = get_instance()
    # Without ../shared/data: a generated sample, and the settings pointed at a tokenizer trained on it.
    files, settings = demo.demo_files(environment.home() / "demo", args.settings)
    lake = Lake(environment.store_config(settings.store))
    if evals := demo.drop_eval_sets(lake, settings):
        print(f"dropped the eval set {evals[0]}: documents quoting it are dropped as contaminated")
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


def _show_release(args) -> int:
    """The first sequences of a release in training order, decoded, with the documents each one holds."""
    import polars as pl
    from tokenizers import Tokenizer

    from llm_assets.core.release import latest_release, provenance_keys, release_prefix
    from llm_assets.loader import ReleaseLoader

    config = environment.store_config(args.settings.store)
    lake = Lake(config)
    name = args.name or args.settings.release.name
    prefix = release_prefix(name, args.version) if args.version else latest_release(lake, name)
    manifest = lake.get_json(prefix + "manifest.json") if prefix else None
    if prefix is None or manifest is None:
        print(f"no release {name!r}" + (f" version {args.version!r}" if args.version else ""), file=sys.stderr)
        return 1
    tok = Tokenizer.from_str(lake.get_bytes(prefix + "tokenizer.json").decode())
    prov = lake.scan(provenance_keys(prefix, manifest)).filter(pl.col("position") < args.limit).collect()
    loader = ReleaseLoader(f"s3://{config.bucket}/{prefix}", batch_size=1, storage_options=config.boto_options())
    rows = []
    for position, batch in enumerate(loader):
        if position >= args.limit:
            break
        ids = batch[0].tolist()
        docs = prov.filter(pl.col("position") == position).drop("position").to_dicts()
        rows.append({"release": name, "version": prefix.rstrip("/").rsplit("/", 1)[1], "position": position,
                     "n_tokens": len(ids), "documents": docs, "text": tok.decode(ids, skip_special_tokens=False)})
    for row in rows:
        print(json.dumps(row, ensure_ascii=False) if args.json else
              f"--- sequence {row['position']} ({row['n_tokens']} tokens) from "
              f"{', '.join(map(_piece_source, row['documents']))}\n{row['text'][:2000]}")
    return 0


def _piece_source(doc: dict) -> str:
    """A sequence's document as `show release` names it: its URL (or doc id) and its language."""
    return (doc["url"] or doc["doc_id"]) + (f" ({doc['language']})" if doc.get("language") else "")


def cmd_stale(args) -> int:
    from llm_assets.instance import get_instance
    from llm_assets.stale import as_json, stale_partitions

    _ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    planned = stale_partitions(get_instance(), lake, args.settings)
    figures = _forecast(lake, args.settings, planned) if args.forecast else None
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

    from llm_assets.stale import known_crawls

    known = known_crawls(lake)
    if validate_crawl(crawl) not in known:
        close = difflib.get_close_matches(crawl, known, n=3)
        raise LookupError(f"unknown crawl {crawl!r}: the lake holds {len(known)} crawl(s)"
                          + (f"; did you mean {', '.join(close)}?" if close else "")
                          + " (`llm-assets status` lists them)")
    return crawl


def cmd_preview(args) -> int:

    from llm_assets.core.preview import parse_sample
    from llm_assets.preview import preview_change

    new = Settings.from_file(Path(args.new_settings))
    fraction = parse_sample(args.sample)
    _ensure_store()
    store = environment.store_config(args.settings.store)
    lake = Lake(store)
    crawls = [existing_crawl(lake, args.crawl)] if args.crawl else None
    report = preview_change(lake, store, args.settings, new, crawls, fraction, examples=args.examples)
    print(json.dumps(report.to_json(), default=str) if args.json else report.render())
    return 0


def _forecast(lake, settings, planned):
    from llm_assets.freshness import plan_forecast

    return plan_forecast(lake, settings, planned)


def _print_plan(planned) -> None:
    width = max(len(p.asset) for p in planned)
    for p in planned:
        print(f"{p.asset.ljust(width)}  {p.partition or '(unpartitioned)'}  {p.cause}")


def cmd_backfill(args) -> int:
    from llm_assets.freshness import launch_stale_backfill, stale_backfill, wait_backfill
    from llm_assets.instance import get_instance, launched_by
    from llm_assets.stale import stale_partitions

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
    _ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    planned = stale_partitions(instance, lake, args.settings)
    if not planned:
        print("nothing is stale; nothing to do")
        return 0
    if args.dry_run:
        _print_plan(planned)
        if args.forecast:
            print(f"\n{_forecast(lake, args.settings, planned).render()}\n")
        print(f"{len(planned)} stale partitions would be ONE backfill (dry run: nothing launched)")
        return 0
    figures = _forecast(lake, args.settings, planned)  # the backfill's tags carry it, printed or not
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
    from llm_assets import failures
    from llm_assets.backfills import STALE_TAG, Status, runs_of

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


def cmd_takedown(args) -> int:
    from datetime import date

    from llm_assets import takedown
    from llm_assets.core.takedowns import TakedownRequest
    from llm_assets.stale import known_crawls

    _ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    if args.action == "add":
        targets = {k: v for k, v in (("url", args.url), ("domain", args.domain), ("doc_id", args.doc_id)) if v}
        if len(targets) != 1 or not args.reason:
            print("takedown add needs exactly one of --url, --domain, --doc-id, and --reason", file=sys.stderr)
            return 2
        request = TakedownRequest(**targets, reason=args.reason, requested_by=args.requested_by,
                                  date=args.date or date.today())
        key = takedown.add(lake, request)
        print(f"{request.target}: written to {lake.url(key)}; `llm-assets stale` plans the partitions that hold it, "
              "`llm-assets backfill --stale` rebuilds them and the release")
        return 0
    statuses = takedown.status(lake, args.settings, known_crawls(lake))
    print(json.dumps(takedown.as_json(statuses)) if args.json else takedown.format_status(statuses))
    return 0


def cmd_vacuum(args) -> int:
    from llm_assets.core.partition import vacuum

    _ensure_store()
    config = environment.store_config(args.settings.store)
    retention_s = config.retention_s if args.retention_hours is None else args.retention_hours * 3600
    deleted = vacuum(Lake(config), retention_s)
    print(f"deleted {len(deleted)} superseded or orphaned objects older than {retention_s / 3600:g} h")
    return 0


def cmd_status(args) -> int:
    from llm_assets.status import format_rejected, format_summary, lake_status

    _ensure_store()
    status = lake_status(Lake(environment.store_config(args.settings.store)), args.settings)
    if args.json:
        print(json.dumps({k: status[k] for k in ("crawls", "assets", "held_back", "quarantined_files",
                                                 "rejected_raw_keys", "unused_eval_keys")}))
    else:
        print(format_summary(status))
        if status["rejected_raw_keys"]["count"]:
            print(format_rejected(status))
    return 0


def _show_rejected(args) -> int:
    from llm_assets import trace
    from llm_assets.status import STAGES

    if args.stage not in STAGES or not args.crawl:
        print(f"show rejected needs --stage (one of: {', '.join(STAGES)}) and --crawl", file=sys.stderr)
        return 2
    shards = [validate_shard(args.shard)] if args.shard else args.settings.shard_keys()
    lake = Lake(environment.store_config(args.settings.store))
    frame = trace.rejected(lake, args.stage, existing_crawl(lake, args.crawl), shards, args.reason)
    if frame is None:
        print(f"{args.stage} set nothing aside in crawl {args.crawl}", file=sys.stderr)
        return 1
    df = _filtered(frame, args).head(args.limit).collect()
    if args.json:
        sys.stdout.write(df.write_ndjson())
    else:
        print(_records(df))
        if args.stage == "filtered" and (lines := trace.rejected_thresholds(lake, args.settings, args.crawl, df)):
            print("\n".join(lines))
    return 0


def _filtered(frame, args):
    """The rows of `frame` that --url, --doc-id and --where select."""
    import polars as pl

    if args.url:
        frame = frame.filter(pl.col("url") == args.url)
    if args.doc_id:
        frame = frame.filter(pl.col("doc_id") == args.doc_id)
    if args.where:
        try:
            frame = frame.filter(pl.sql_expr(args.where))
        except Exception as e:  # Polars raises several kinds for a bad expression: the message says which
            raise ValueError(f"--where {args.where!r}: {e}") from e
    return frame


def cmd_trace(args) -> int:
    from llm_assets import trace
    from llm_assets.stale import known_crawls

    _ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    crawls = [existing_crawl(lake, args.crawl)] if args.crawl else known_crawls(lake)
    found = trace.trace(lake, args.settings, crawls, args.key)
    if args.command == "why":
        print(json.dumps(trace.why_record(found, args.settings), default=str) if args.json
              else trace.why(found, args.settings))
    elif args.json:
        print(json.dumps(trace.trace_record(found, args.settings), default=str))
    else:
        print(trace.format_trace(found, args.settings))
    return 0 if found.steps else 1


def cmd_show(args) -> int:
    from llm_assets.status import CRAWL_LEVEL, STAGES

    if args.asset == "release":
        return _show_release(args)
    if args.asset == "rejected":
        _ensure_store()
        return _show_rejected(args)
    if args.asset not in STAGES + CRAWL_LEVEL:
        print(f"unknown asset {args.asset!r}; one of: {', '.join(STAGES + CRAWL_LEVEL)}", file=sys.stderr)
        return 2
    if not args.crawl:
        print(f"show {args.asset} needs --crawl", file=sys.stderr)
        return 2
    validate_crawl(args.crawl)
    if args.asset in CRAWL_LEVEL:
        shards = [CRAWL_LEVEL_SHARD]
    else:
        shards = [validate_shard(args.shard)] if args.shard else args.settings.shard_keys()
    lake = Lake(environment.store_config(args.settings.store))
    existing_crawl(lake, args.crawl)
    manifests = list(committed(lake, args.asset, args.crawl, shards).values())
    if not manifests:
        print(f"{args.asset} has no committed partition for crawl {args.crawl}"
              + (f" shard {args.shard}" if args.shard else ""), file=sys.stderr)
        return 1
    df = _filtered(LakeInput(lake, args.asset, manifests).scan(), args).head(args.limit).collect()
    if args.json:
        sys.stdout.write(df.write_ndjson())
    elif args.asset == "enriched":
        from llm_assets.demo import describe_enriched

        print("\n\n".join("\n".join([f"{row['url']}  ({row['language']}, {row['doc_id']})",
                                      *describe_enriched(row, "  ")]) for row in df.iter_rows(named=True)))
    else:
        print(_records(df))
    return 0


def cmd_export(args) -> int:
    """A stage's documents or token ids, streamed out of the lake to JSON Lines or Parquet (llm_assets/export.py)."""
    from llm_assets.export import export

    validate_crawl(args.crawl)
    shards = [validate_shard(args.shard)] if args.shard else args.settings.shard_keys()
    _ensure_store()
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    lake = Lake(environment.store_config(args.settings.store))
    result = export(lake, args.asset, existing_crawl(lake, args.crawl), shards, args.out, args.format, columns)
    if result.missing_shards:
        print(f"{args.asset} crawl={args.crawl}: shard(s) {', '.join(result.missing_shards)} not committed, "
              "not exported", file=sys.stderr)
    print(result.summary(), file=sys.stderr if result.destination == "-" else sys.stdout)
    return 0


def _records(df, width: int = 240) -> str:
    """One block per row, `column: value`, long values cut: readable for wide documents, like psql's \\x."""
    name_width = max((len(c) for c in df.columns), default=0)
    blocks = []
    for i, row in enumerate(df.iter_rows(named=True)):
        lines = [f"-[ row {i + 1} ]" + "-" * 40]
        for name, value in row.items():
            text = " ".join(str(value).split())
            lines.append(f"{name.ljust(name_width)} | {text[:width] + ('…' if len(text) > width else '')}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) if blocks else "(no rows)"


def cmd_record(args) -> int:
    import polars as pl

    from llm_assets.core.provenance import original_record

    validate_crawl(args.crawl)
    if not all(c in "0123456789abcdef" for c in args.doc_id) or not args.doc_id:
        raise ValueError(f"invalid doc_id {args.doc_id!r}: expected hex digits")
    lake = Lake(environment.store_config(args.settings.store))
    existing_crawl(lake, args.crawl)
    from llm_assets.stages.documents import SPEC as DOCUMENTS

    manifests = list(committed(lake, DOCUMENTS.name, args.crawl, args.settings.shard_keys()).values())
    found = (LakeInput(lake, DOCUMENTS.name, manifests).scan()
             .filter(pl.col("doc_id") == args.doc_id)
             .select("source_key", "source_format", "record_offset", "record_skip", "url").collect())
    if found.is_empty():
        print(f"no document {args.doc_id} in crawl {args.crawl}", file=sys.stderr)
        return 1
    key, fmt, offset, skip, url = found.row(0)
    print(f"# {url}\n# {key} ({fmt}) at offset {offset}" + (f" + {skip}" if skip else ""))
    print(original_record(lake, key, fmt, offset, skip, args.max_bytes))
    return 0


def cmd_ui(args) -> int:
    """Dagster's webserver, daemon and code server on this home's instance, as separate supervised processes reading
    workspace.yaml (what `deploy up` runs, without PostgreSQL); Ctrl-C stops them."""
    import signal
    import threading

    from llm_assets import deploy
    from llm_assets.instance import dagster_home

    layout = deploy.Layout(environment.home())
    if layout.supervisor_pid() is not None:
        print("`llm-assets deploy up` runs on this home: its UI is the one `llm-assets deploy status` names")
        return deploy.print_status(environment.home())
    _ensure_store()
    home = dagster_home()
    code_port = deploy.free_port()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    services = deploy.dagster_services(code_port, args.port, webserver_host=args.host)
    supervisor = deploy.Supervisor(environment.home() / "ui", services,
                                   {**os.environ, **deploy.dagster_env(home, code_port)})
    try:
        print(f"starting the code server (port {code_port}), the daemon and the webserver; logs in "
              f"{supervisor.logs}", flush=True)
        supervisor.start()
        print(f"UI: http://{args.host}:{args.port} (instance {home}); Ctrl-C stops it", flush=True)
        stop.wait()
    finally:
        supervisor.stop()
    return 0


def cmd_deploy(args) -> int:
    from llm_assets import deploy

    home = environment.home()
    if args.action == "up":
        return deploy.up(home, nodes=args.nodes, webserver_port=args.port)
    if args.action == "down":
        return deploy.down(home)
    return deploy.print_status(home, as_json=args.json)


def cmd_settings(args) -> int:
    import yaml

    if args.reference:
        from llm_assets.settings_reference import render

        sys.stdout.write(render())
        return 0
    print(f"# {args.settings_path}")
    sys.stdout.write(yaml.safe_dump(args.settings.model_dump(mode="json"), sort_keys=False, allow_unicode=True))
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
    _ensure_store()
    lake = Lake(environment.store_config(args.settings.store))
    for key, path in keys.items():
        lake.put_file(key, path)
        print(f"{path} -> {lake.url(key)} ({path.stat().st_size:,} bytes)")
    print(f"{len(keys)} file{'s' * (len(keys) != 1)} dropped into crawl {crawl}; raw_drop_sensor requests their runs "
          "on its next tick (`make ui`), or `llm-assets demo` runs what it requests")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llm-assets", description=__doc__)
    sub = _Commands(parser.add_subparsers(dest="command", required=True))

    p = sub.add_parser("demo", help="drop the demo crawls, run the sensor's requests, print a summary")
    p.add_argument("--change", action="store_true",
                   help="the second step: drop one new file, change one threshold, plan and launch one backfill")
    p.add_argument("--takedown", action="store_true",
                   help="a takedown end to end: one released URL removed, planned, rebuilt, re-released")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("status", help="materialized partitions and rows per asset; raw keys that will not be ingested")
    p.add_argument("--json", action="store_true",
                   help='{"crawls", "assets": {asset: {"materialized", "total", "rows", ...}}, "held_back", '
                        '"quarantined_files": {crawl: raw files not read}, "rejected_raw_keys", "unused_eval_keys"}')
    p.set_defaults(fn=cmd_status)

    p = sub.add_parser("stale", help="every stale, missing or failed partition per asset, with its cause")
    p.add_argument("--json", action="store_true",
                   help='{"partitions": [{"asset", "partition", "cause"}, ...]} (and "forecast" with --forecast)')
    p.add_argument("--forecast", action="store_true",
                   help="then what rebuilding them costs per stage: CPU-hours, wall time on the runner, bytes, "
                        "requests, money (rates from the cost ledger)")
    p.set_defaults(fn=cmd_stale)

    p = sub.add_parser("preview", help="what new settings would change, before a rebuild: re-decided over the stored "
                                       "scores (thresholds only) or run on a sample of the stale units (scratch)")
    p.add_argument("new_settings", metavar="NEW.yaml", help="the settings file to preview against the deployment's")
    p.add_argument("--sample", default="1%", help="a change other than thresholds: the share of the stale units run "
                                                  "(ordered by a hash of their input; at least one per crawl; "
                                                  "default 1%%)")
    p.add_argument("--crawl", help="only this crawl (default: every crawl)")
    p.add_argument("--examples", type=int, default=5, help="documents newly dropped and newly kept shown, each")
    p.add_argument("--json", action="store_true", help="one JSON object: the report")
    p.set_defaults(fn=cmd_preview)

    p = sub.add_parser("backfill", help="launch ONE Dagster backfill of exactly the stale partitions; say how one went")
    p.add_argument("--stale", action="store_true", help="launch a backfill of the partitions `stale` lists")
    p.add_argument("--dry-run", action="store_true", help="list the partitions with their causes; launch nothing")
    p.add_argument("--forecast", action="store_true",
                   help="print the plan's forecast (as `stale --forecast`) before launching (the backfill's "
                        "llm_assets/forecast_* tags carry it either way)")
    p.add_argument("--wait", action="store_true",
                   help="wait until the daemon has run it; print each failed run with its first error; exit 1 if "
                        "any failed")
    p.add_argument("--status", nargs="?", const="", metavar="ID",
                   help="how a backfill went (default: the latest stale backfill): each failed run with its first "
                        "error; exit 1 if any failed")
    p.set_defaults(fn=cmd_backfill)

    p = sub.add_parser("show", help="rows of one asset's partition(s), like head; `show release` decodes sequences; "
                                    "`show rejected --stage S` what a stage set aside")
    p.add_argument("asset", help="a stage (documents, filtered, ...), a crawl-level asset, release or rejected")
    p.add_argument("--stage", help="rejected: the stage (documents, filtered, deduplicated, ...)")
    p.add_argument("--reason", help="rejected: only this reason code")
    p.add_argument("--url", help="only the rows of this URL")
    p.add_argument("--doc-id", help="only the rows of this doc id")
    p.add_argument("--where", help="only the rows this SQL expression selects, e.g. \"language_score < 0.7\"")
    p.add_argument("--crawl", help="the crawl (every asset but release)")
    p.add_argument("--name", help="release: its name (default: the settings' release.name)")
    p.add_argument("--version", help="release: a version (default: the latest)")
    p.add_argument("--shard", help="one shard, e.g. 0001 (default: every shard of the crawl)")
    p.add_argument("--limit", type=int, default=10, help="at most this many rows (default 10)")
    p.add_argument("--json", action="store_true", help="JSON Lines, one object per row")
    p.set_defaults(fn=cmd_show)

    p = sub.add_parser("export", help="stream a stage's documents (text + provenance) or token ids to JSON Lines "
                                      "or Parquet: a file, s3://bucket/key, or - (stdout)")
    p.add_argument("asset", help="documents, filtered, deduplicated or tokenized")
    p.add_argument("--crawl", required=True, help="the crawl to export")
    p.add_argument("--shard", help="one shard (default: every committed shard of the crawl)")
    p.add_argument("--format", choices=["jsonl", "parquet"],
                   help="default: parquet for a .parquet name, else jsonl (.gz / .zst names are compressed)")
    p.add_argument("--out", help="a path, s3://bucket/key or - (default: ASSET-CRAWL[-SHARD].jsonl|parquet here)")
    p.add_argument("--columns", help="comma-separated columns to export (default: all)")
    p.set_defaults(fn=cmd_export)

    for name, text in (
            ("trace", "every stage one URL or doc id reached, in every crawl, and the releases holding it"),
            ("why", "where one URL or doc id stopped: the block, the reason, its scores and the thresholds")):
        p = sub.add_parser(name, help=text)
        p.add_argument("key", help="a URL (http...) or a doc id")
        p.add_argument("--crawl", help="only this crawl (default: every crawl)")
        p.add_argument("--json", action="store_true", help="one JSON object")
        p.set_defaults(fn=cmd_trace)

    p = sub.add_parser("record", help="the original raw record a document came from")
    p.add_argument("doc_id", help="the document's doc_id (32 hex digits)")
    p.add_argument("--crawl", required=True, help="the crawl holding it")
    p.add_argument("--max-bytes", type=int, default=1 << 20, help="cut the payload after this many bytes")
    p.set_defaults(fn=cmd_record)

    p = sub.add_parser("takedown", help="add a takedown request; per request, where it was found and removed")
    p.add_argument("action", choices=["add", "status"],
                   help="add: write one request under takedowns/; status: where each request was found and removed")
    p.add_argument("--url", help="add: one URL, exactly as crawled")
    p.add_argument("--domain", help="add: the domain and its subdomains")
    p.add_argument("--doc-id", help="add: one document's doc_id")
    p.add_argument("--reason", help="add: why (e.g. 'dmca', 'gdpr erasure')")
    p.add_argument("--requested-by", default=os.environ.get("USER", "cli"), help="add: who asked (default: $USER)")
    p.add_argument("--date", help="add: the request's date, YYYY-MM-DD (default: today)")
    p.add_argument("--json", action="store_true", help="status: one JSON object")
    p.set_defaults(fn=cmd_takedown)

    p = sub.add_parser("vacuum", help="delete parts no committed manifest needs, past the retention")
    p.add_argument("--retention-hours", type=float, help="default: the settings' store.retention_hours")
    p.set_defaults(fn=cmd_vacuum)

    p = sub.add_parser("store", help="the embedded object store (SeaweedFS on 127.0.0.1)")
    p.add_argument("action", choices=["start", "stop", "status"], help="start, stop, or say whether it runs")
    p.add_argument("--json", action="store_true", help="status: one JSON object")
    p.set_defaults(fn=cmd_store)

    p = sub.add_parser("cluster", help="a local Dask cluster on 127.0.0.1 for runner.kind: dask")
    p.add_argument("action", choices=["start", "stop", "status"], help="start, stop, or say whether it runs")
    p.add_argument("--nodes", type=int, default=3, help="start: the scheduler plus NODES-1 workers (default 3)")
    p.add_argument("--dashboard", action="store_true", help="start: serve Dask's dashboard on 127.0.0.1")
    p.add_argument("--json", action="store_true", help="status: one JSON object")
    p.set_defaults(fn=cmd_cluster)

    p = sub.add_parser("deploy", help="PostgreSQL, the object store, the Dask cluster, Dagster's code server, daemon "
                                      "and webserver as separate supervised processes on 127.0.0.1")
    p.add_argument("action", choices=["up", "down", "status"], help="start (in the background), stop, or list them")
    p.add_argument("--nodes", type=int, default=3,
                   help="up: the Dask cluster's scheduler plus NODES-1 workers; 0: no cluster (default 3)")
    p.add_argument("--port", type=int, help="up: the webserver's port (default: the last one, else 3000 when free)")
    p.add_argument("--json", action="store_true", help="status: one JSON object")
    p.set_defaults(fn=cmd_deploy)

    p = sub.add_parser("ui",
                       help="Dagster's webserver, daemon and code server on this home's instance (workspace.yaml)")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=3000, help="the webserver's port (default 3000)")
    p.set_defaults(fn=cmd_ui)

    p = sub.add_parser("settings", help="the effective settings (YAML), or with --reference every setting documented")
    p.add_argument("--reference", action="store_true",
                   help="the settings reference (Markdown, docs/settings.md): every key, its type, default and meaning")
    p.set_defaults(fn=cmd_settings)

    p = sub.add_parser("drop", help="upload crawl files under raw/<crawl>/ for the raw_drop_sensor (streamed)")
    p.add_argument("files", nargs="+", metavar="FILE", help="WARC, ARC, WET, JSON Lines, JSON, Parquet or HTML files")
    p.add_argument("--crawl", required=True, help="the crawl they belong to (letters, digits, '.', '_', '-')")
    p.add_argument("--as", dest="as_name", metavar="NAME",
                   help="one FILE's name under raw/<crawl>/, sub-folders allowed (default: the file's own name)")
    p.set_defaults(fn=cmd_drop)
    return parser


class _Commands:
    """The subcommands, each with the options every command shares (`--settings`)."""

    def __init__(self, sub: argparse._SubParsersAction) -> None:
        self._sub = sub
        self._common = argparse.ArgumentParser(add_help=False)
        self._common.add_argument("--settings", dest="settings_file", metavar="PATH",
                                  help=f"the settings file (default: ${SETTINGS_ENV}, else the embedded "
                                       "llm_assets/settings.yaml); the processes the command starts read it too")

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        return self._sub.add_parser(name, parents=[self._common], **kwargs)


def _exit_on(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # A command stopped by SIGTERM or SIGHUP (`timeout`, a closed terminal) unwinds as Ctrl-C does: the services it
    # started (the demo's code server and daemon, `ui`'s) are stopped by its `finally`, not left running.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on)
    try:
        if args.settings_file:
            # through the variable every process reads: the code server, the daemon's runs and the workers a
            # command starts use the same file
            os.environ[SETTINGS_ENV] = str(Path(args.settings_file).resolve())
        args.settings_path = settings_path()
        args.settings = Settings.from_file(args.settings_path)
        return args.fn(args)
    except (ValueError, RuntimeError, LookupError, InfrastructureError) as e:
        print(f"llm-assets: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # BrokenPipeError, or Polars' plain OSError("[Errno 32] Broken pipe") without an errno
        if e.errno != errno.EPIPE and f"[Errno {errno.EPIPE}]" not in str(e):
            raise
        # The reader went away (`| head`): stop quietly, as Unix tools do. stdout is pointed at /dev/null so that
        # the interpreter's last flush has nowhere to fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool SIGPIPE ended


if __name__ == "__main__":
    sys.exit(main())
