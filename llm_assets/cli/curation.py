"""Takedown requests: added, and where each was found and removed."""

from __future__ import annotations

import json
import sys

from llm_assets.cli.services import ensure_store
from llm_assets.core.lake import Lake
from llm_assets.platform import environment


def cmd_takedown(args) -> int:
    from datetime import date

    from llm_assets.core.takedowns import TakedownRequest
    from llm_assets.tools import takedown
    from llm_assets.tools.stale import known_crawls

    ensure_store()
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
