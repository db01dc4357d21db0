"""`llm-assets`: the demo, the lake's status, a look at any partition, and the embedded object store.

This module parses the command line; each command is in the module of its group (services, lake, read, curation,
the demo's). What needs Dagster (the instance, the definitions) is imported by the commands that use it: `show`,
`record` or `store` start without paying for it."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from pathlib import Path

from llm_assets.cli.curation import cmd_takedown
from llm_assets.cli.demo_commands import cmd_demo
from llm_assets.cli.lake import cmd_backfill, cmd_drop, cmd_preview, cmd_stale, cmd_status, cmd_vacuum
from llm_assets.cli.read import cmd_export, cmd_record, cmd_show, cmd_trace
from llm_assets.cli.services import cmd_cluster, cmd_deploy, cmd_settings, cmd_store, cmd_ui
from llm_assets.core.errors import InfrastructureError
from llm_assets.settings import SETTINGS_ENV, Settings, settings_path


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

