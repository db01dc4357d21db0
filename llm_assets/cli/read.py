"""The commands that read the lake back: rows of a partition, a release decoded, a URL traced, a stage exported, a
raw record."""

from __future__ import annotations

import json
import sys

from llm_assets.cli.lake import existing_crawl
from llm_assets.cli.services import ensure_store
from llm_assets.core.keys import CRAWL_LEVEL_SHARD
from llm_assets.core.lake import Lake, validate_crawl, validate_shard
from llm_assets.core.partition import LakeInput, committed
from llm_assets.platform import environment


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


def cmd_show(args) -> int:
    from llm_assets.tools.status import CRAWL_LEVEL, STAGES

    if args.asset == "release":
        return _show_release(args)
    if args.asset == "rejected":
        ensure_store()
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
        from llm_assets.cli.demo import describe_enriched

        print("\n\n".join("\n".join([f"{row['url']}  ({row['language']}, {row['doc_id']})",
                                      *describe_enriched(row, "  ")]) for row in df.iter_rows(named=True)))
    else:
        print(_records(df))
    return 0


def _show_rejected(args) -> int:
    from llm_assets.tools import trace
    from llm_assets.tools.status import STAGES

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
    from llm_assets.tools import trace
    from llm_assets.tools.stale import known_crawls

    ensure_store()
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


def cmd_export(args) -> int:
    """A stage's documents or token ids, streamed out of the lake to JSON Lines or Parquet
    (llm_assets/tools/export.py)."""
    from llm_assets.tools.export import export

    validate_crawl(args.crawl)
    shards = [validate_shard(args.shard)] if args.shard else args.settings.shard_keys()
    ensure_store()
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
