"""`llm-assets takedown`: add a request, and say per request where its documents were, when they were removed and
which release first lacks them. Reads the lake alone (no Dagster)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from llm_assets.core.filtered import TAKEDOWN_COUNT
from llm_assets.core.keys import PartitionRef, release_manifest_key, release_name_prefix, release_superseded_key
from llm_assets.core.lake import Lake
from llm_assets.core.partition import committed
from llm_assets.core.takedowns import PREFIX, TakedownRequest, load_takedowns, requests_in_partition, takedowns_version
from llm_assets.core.versions import digest
from llm_assets.settings import Settings


def add(lake: Lake, request: TakedownRequest) -> str:
    """Write the request as a list of its own under takedowns/; -> its key."""
    line = request.to_line()
    key = f"{PREFIX}cli-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{digest(line)[:8]}.jsonl"
    lake.put_bytes(key, (line + "\n").encode())
    return key


@dataclass
class RequestStatus:
    target: str
    reason: str
    requested_by: str
    date: str
    removed: dict[str, int] = field(default_factory=dict)  # "crawl|shard" -> documents removed there
    removed_at: str = ""  # when the last partition holding it was rebuilt without it
    pending: list[str] = field(default_factory=list)  # partitions that hold it, not rebuilt yet
    first_release_without: str = ""  # the first release version built without its documents
    superseded: list[str] = field(default_factory=list)  # release versions marked superseded by it

    @property
    def state(self) -> str:
        if self.pending:
            return "pending"
        return "removed" if self.removed else "not found"


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def status(lake: Lake, settings: Settings, crawls: list[str]) -> list[RequestStatus]:
    requests = load_takedowns(lake)
    shards = settings.shard_keys()
    out = {r.target: RequestStatus(r.target, r.reason, r.requested_by, str(r.date)) for r in requests}
    for crawl in crawls:
        filtered = committed(lake, "filtered", crawl, shards)
        for shard, docs in committed(lake, "documents", crawl, shards).items():
            built = filtered.get(shard)
            applied = {} if built is None else {k.removeprefix(TAKEDOWN_COUNT): n for u in built.units
                                                for k, n in u.counts.items() if k.startswith(TAKEDOWN_COUNT)}
            named = requests_in_partition(lake, docs, requests)
            current = built is not None and built.inputs.get("documents") == docs.data_version \
                and built.inputs.get("takedowns") == takedowns_version(named)
            for target in {r.target for r in named}:
                s = out[target]
                if not current:
                    s.pending.append(PartitionRef(crawl, shard).key)
                elif target in applied and built is not None:  # else only a hash of the index matched: nothing removed
                    s.removed[PartitionRef(crawl, shard).key] = applied[target]
                    s.removed_at = max(s.removed_at, _utc(built.committed_at))
    name = settings.release.name
    releases = sorted((m for v in lake.folders(release_name_prefix(name))
                       if (m := lake.get_json(release_manifest_key(name, v)))),
                      key=lambda m: m["created_at"])
    for manifest in releases:
        marker = lake.get_json(release_superseded_key(name, manifest["version"])) or {}
        for target in manifest.get("takedowns", []):
            if target in out and not out[target].first_release_without:
                out[target].first_release_without = manifest["version"]
        for target in marker.get("takedowns", []):
            if target in out:
                out[target].superseded.append(manifest["version"])
    return list(out.values())


def as_json(statuses: list[RequestStatus]) -> dict:
    return {"requests": [{**asdict(s), "state": s.state} for s in statuses]}


def format_status(statuses: list[RequestStatus]) -> str:
    if not statuses:
        return f"no takedown requests under {PREFIX}"
    lines = []
    for s in statuses:
        lines.append(f"{s.target}  [{s.state}]  {s.reason} (by {s.requested_by}, {s.date})")
        if s.removed:
            where = ", ".join(f"{p} ({n} docs)" for p, n in sorted(s.removed.items()))
            lines.append(f"  removed from {where} at {s.removed_at}")
        if s.pending:
            lines.append(f"  still held by {', '.join(sorted(s.pending))}: run `llm-assets backfill --stale`")
        if s.first_release_without:
            lines.append(f"  first release without it: {s.first_release_without}"
                         + (f"; superseded: {', '.join(s.superseded)}" if s.superseded else ""))
        elif s.removed:
            lines.append("  no release built since: materialize `release`")
    return "\n".join(lines)
