"""A training release: the tokenized documents of some crawls, packed into fixed-length sequences, shuffled
globally and written as a Megatron-LM indexed dataset, with its provenance, a manifest and a dataset card.

    releases/<name>/<version>/data.bin, data.idx   the sequences, in training order (Megatron MMapIndexedDataset)
                             /provenance.parquet   per sequence: the document pieces it holds (doc, crawl, url)
                             /tokenizer.json       the tokenizer that made the ids (decode with it)
                             /text/part-*.parquet  optional: the curated documents' text (Hugging Face datasets)
                             /manifest.json        crawls, partitions and data versions, code versions, config,
                                                   tokenizer hash, counts; written last: its presence is the commit
                             /README.md            the dataset card

Memory stays flat in the dataset size: the token stream is spooled to a local file and memory-mapped; packing keeps
one row per document piece; the shuffle is a keyed Feistel permutation evaluated a chunk of positions at a time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

import numpy as np
import polars as pl
import yaml  # type: ignore[import-untyped]
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.indexed import IndexedWriter
from llm_assets.core.lake import Lake
from llm_assets.core.packing import PackingStats, Plan, bucket_by_length, pack_bfd, pack_concat
from llm_assets.core.shuffle import FeistelPermutation
from llm_assets.core.versions import digest


class ReleaseSettings(Section):
    """One training release: which crawls, how sequences are packed, the shuffle seed. The tokenizer is the
    tokenized stage's. Another config is another version; a version is never rewritten."""

    name: str = Field(default="demo", pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    crawls: tuple[str, ...] = ()  # empty: every crawl
    context: int = Field(default=2048, ge=1)
    packing: Literal["bfd", "concat"] = "bfd"  # best-fit-decreasing of whole documents, or concatenate and chunk
    seed: int = 0
    include_text: bool = True  # the curated text as Parquet too, readable by Hugging Face datasets
    length_buckets: tuple[int, ...] = ()  # token-count boundaries: documents are packed only with their bucket


STAGE_VERSION = "1"
RELEASES = "releases"
CHUNK = 4096  # output positions per step of the shuffled writer


def release_prefix(name: str, version: str) -> str:
    return f"{RELEASES}/{name}/{version}/"


def point_latest(lake: Lake, release: Release) -> None:
    """`releases/<name>/latest.json`: the version the name means now (readers may also name a version)."""
    lake.put_json(f"{RELEASES}/{release.name}/latest.json", {"version": release.version, "prefix": release.prefix})


SUPERSEDED = "superseded.json"  # in a release's folder once a later version removed documents it holds


def mark_superseded(lake: Lake, previous: dict | None, release: Release) -> dict | None:
    """Mark the release the name pointed at before as superseded, when the new one lacks documents that takedown
    requests removed since: readers are warned (or refused) that it holds them. -> the record written, or None."""
    if previous is None or previous["version"] == release.version:
        return None
    removed = sorted(set(release.manifest.get("takedowns", [])) - set(previous.get("takedowns", [])))
    if not removed:
        return None
    record = {"version": previous["version"], "superseded_by": release.version, "takedowns": removed,
              "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    lake.put_json(release_prefix(release.name, previous["version"]) + SUPERSEDED, record)
    return record


def latest_release(lake: Lake, name: str) -> str | None:
    """The prefix of the latest version of release `name`, or None."""
    pointer = lake.get_json(f"{RELEASES}/{name}/latest.json")
    return pointer["prefix"] if pointer else None


def release_version(settings: ReleaseSettings, tokenizer_hash: str, partitions: list[dict]) -> str:
    """A release is immutable: its version is a hash of everything that decides its bytes."""
    blob = json.dumps({"stage": STAGE_VERSION, "config": settings.model_dump(mode="json"),
                       "tokenizer": tokenizer_hash, "partitions": partitions}, sort_keys=True)
    return "v-" + digest(blob)


@dataclass
class Documents:
    """The release's documents in a fixed order, their tokens spooled to a local file."""

    tokens: np.ndarray  # memory-mapped flat stream, every document ending with EOS
    offsets: np.ndarray  # int64, len(docs) + 1
    docs: pl.DataFrame  # doc_id, url, crawl, shard, n_tokens


def spool_tokens(lake: Lake, parts: list[tuple[str, str, str]], dtype: np.dtype, workdir: Path) -> Documents:
    """Read the tokenized parts ((crawl, shard, part) in order) into one flat token file."""
    path = workdir / "tokens.bin"
    meta = []
    with path.open("wb") as f:
        for crawl, shard, part in parts:
            for batch in lake.iter_batches(part, 1024, columns=["doc_id", "url", "n_tokens", "tokens"]):
                np.asarray(batch.column("tokens").flatten(), dtype=dtype).tofile(f)
                meta.append(cast(pl.DataFrame, pl.from_arrow(batch.select(["doc_id", "url", "n_tokens"])))
                            .with_columns(crawl=pl.lit(crawl), shard=pl.lit(shard)))
    docs = pl.concat(meta) if meta else pl.DataFrame(schema={"doc_id": pl.String, "url": pl.String,
                                                            "n_tokens": pl.Int32, "crawl": pl.String,
                                                            "shard": pl.String})
    offsets = np.concatenate([[0], np.cumsum(docs["n_tokens"].to_numpy(), dtype=np.int64)]).astype(np.int64)
    size = int(offsets[-1])
    tokens = np.memmap(path, dtype=dtype, mode="r", shape=(size,)) if size else np.empty(0, dtype)
    return Documents(tokens=tokens, offsets=offsets, docs=docs)


def plan_sequences(docs: Documents, settings: ReleaseSettings) -> Plan:
    pack = pack_bfd if settings.packing == "bfd" else pack_concat
    if not settings.length_buckets:
        return pack(docs.offsets, settings.context)
    # The documents are in bucket order (see by_length_bucket): each bucket is a contiguous run, packed alone.
    bucket = docs.docs["bucket"].to_numpy()
    edges = np.searchsorted(bucket, np.arange(len(settings.length_buckets) + 2))
    plans = [pack(docs.offsets[lo:hi + 1], settings.context) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
    return merge_plans(plans, settings.context)


def merge_plans(plans: list[Plan], context: int) -> Plan:
    """One plan whose sequences are those of `plans`, one after the other."""
    first = np.cumsum([0] + [p.sequences for p in plans[:-1]])
    pieces = np.concatenate([p.pieces + [s, 0, 0] for p, s in zip(plans, first)]) if plans else \
        np.empty((0, 3), np.int64)
    total = {f: sum(getattr(p.stats, f) for p in plans)
             for f in ("sequences", "tokens_in", "tokens_out", "padding_tokens", "truncated_tokens")}
    return Plan(pieces=pieces, sequences=total["sequences"], context=context,
                stats=PackingStats(context=context, **total))


def by_length_bucket(docs: Documents, boundaries: tuple[int, ...], workdir: Path) -> Documents:
    """The documents re-spooled in the order of their length bucket (stable inside a bucket), with `bucket`."""
    bucket = bucket_by_length(docs.offsets, np.asarray(boundaries))
    order = np.argsort(bucket, kind="stable")
    path = workdir / "tokens-by-bucket.bin"
    with path.open("wb") as f:
        for d in order:  # one copy per document: sequential writes, the token file stays on disk
            docs.tokens[docs.offsets[d]:docs.offsets[d + 1]].tofile(f)
    lengths = np.diff(docs.offsets)[order]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    size = int(offsets[-1])
    tokens = np.memmap(path, dtype=docs.tokens.dtype, mode="r", shape=(size,)) if size else docs.tokens
    frame = docs.docs.with_columns(bucket=pl.Series(bucket, dtype=pl.Int64))[order]
    return Documents(tokens=tokens, offsets=offsets, docs=frame)


def provenance(plan: Plan, perm: FeistelPermutation, docs: Documents) -> pl.DataFrame:
    """One row per document piece: the output position of its sequence and its offset there, and where the piece
    comes from (document, crawl, shard, URL, offset in the document)."""
    seq, start, length = plan.pieces[:, 0], plan.pieces[:, 1], plan.pieces[:, 2]
    doc = np.searchsorted(docs.offsets, start, side="right") - 1
    frame = pl.DataFrame({
        "position": perm.inverse(seq).astype(np.int64) if len(seq) else np.empty(0, np.int64),
        "sequence": seq,
        "doc": doc,
        "start_in_doc": start - docs.offsets[doc] if len(doc) else np.empty(0, np.int64),
        "length": length,
    })
    # the plan lists a sequence's pieces in the order they are laid out in it
    frame = frame.with_columns(offset=(pl.col("length").cum_sum() - pl.col("length")).over("sequence"))
    return frame.join(docs.docs.with_row_index("doc").with_columns(pl.col("doc").cast(pl.Int64)), on="doc",
                      how="left").sort("position", "offset").select(
        "position", "offset", "doc_id", "crawl", "shard", "url", "start_in_doc", "length")


def write_sequences(plan: Plan, perm: FeistelPermutation, docs: Documents, pad_id: int, dtype: np.dtype,
                    prefix: Path) -> None:
    """The packed sequences in shuffled order: output position j holds sequence perm(j)."""
    with IndexedWriter(prefix, dtype) as out:
        for first in range(0, plan.sequences, CHUNK):
            for source in perm(np.arange(first, min(first + CHUNK, plan.sequences), dtype=np.int64)):
                out.add(plan.sequence(int(source), docs.tokens, pad_id))


@dataclass
class Release:
    name: str
    version: str
    prefix: str  # in the bucket
    manifest: dict
    card: str
    reused: bool = False
    files: dict[str, int] = field(default_factory=dict)  # name -> bytes


def build_release(lake: Lake, settings: ReleaseSettings, partitions: list[dict], tokenizer_file: Path,
                  tokenizer_hash: str, eos_id: int, vocab_size: int, code_versions: dict, card_facts: dict,
                  workdir: Path, takedowns: Sequence[str] = ()) -> Release:
    """Build and upload one release from the committed `tokenized` partitions listed (each: crawl, shard,
    data_version, parts). An existing version is never rewritten: it is returned as it is. `takedowns`: the targets
    of the takedown requests that removed documents of its partitions."""
    version = release_version(settings, tokenizer_hash, [{k: p[k] for k in ("crawl", "shard", "data_version")}
                                                         for p in partitions])
    prefix = release_prefix(settings.name, version)
    existing = lake.get_json(prefix + "manifest.json")
    if existing is not None:
        card = lake.get_bytes(prefix + "README.md").decode() if lake.exists(prefix + "README.md") else ""
        return Release(settings.name, version, prefix, existing, card, reused=True)

    start = time.perf_counter()
    dtype = np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)
    parts = [(p["crawl"], p["shard"], part) for p in partitions for part in p["parts"]]
    docs = spool_tokens(lake, parts, dtype, workdir)
    if settings.length_buckets:
        docs = by_length_bucket(docs, settings.length_buckets, workdir)
    plan = plan_sequences(docs, settings)
    perm = FeistelPermutation(plan.sequences, settings.seed)
    write_sequences(plan, perm, docs, eos_id, dtype, workdir / "data")
    prov = provenance(plan, perm, docs)
    prov.write_parquet(workdir / "provenance.parquet")
    stats = plan.stats
    counts = {
        "documents": docs.docs.height,
        "tokens_in": int(stats.tokens_in),
        "sequences": int(plan.sequences),
        "context": settings.context,
        "tokens_out": int(stats.tokens_out),
        "padding_tokens": int(stats.padding_tokens),
        "padding_pct": round(stats.padding_pct, 4),
        "truncated_tokens": int(stats.truncated_tokens),
        "truncated_pct": round(stats.truncated_pct, 4),
        "documents_by_crawl": dict(docs.docs.group_by("crawl").len().sort("crawl").iter_rows()),
    }
    if settings.length_buckets:
        names = [f"≤{b}" for b in settings.length_buckets] + [f">{settings.length_buckets[-1]}"]
        counts["documents_by_length_bucket"] = {names[b]: n for b, n in
                                                docs.docs.group_by("bucket").len().sort("bucket").iter_rows()}
    manifest = {
        "name": settings.name,
        "version": version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": settings.model_dump(mode="json"),
        "crawls": sorted({p["crawl"] for p in partitions}),
        "partitions": [{k: p[k] for k in ("crawl", "shard", "data_version", "code_version")} for p in partitions],
        "code_versions": code_versions,
        "tokenizer": {"hash": tokenizer_hash, "vocab_size": vocab_size, "eos_id": eos_id, "file": "tokenizer.json"},
        "format": {"data": f"Megatron-LM MMapIndexedDataset (data.bin + data.idx): {plan.sequences:,} sequences of "
                           f"{settings.context:,} token ids, documents packed into them ({settings.packing})",
                   "dtype": dtype.name, "pad_id": eos_id, "order": "shuffled (keyed Feistel permutation)",
                   "provenance": "provenance.parquet"},
        "counts": counts,
        "takedowns": sorted(takedowns),
        "seconds": round(time.perf_counter() - start, 3),
    }
    card = dataset_card(manifest, card_facts)
    files = {"data.bin": workdir / "data.bin", "data.idx": workdir / "data.idx",
             "provenance.parquet": workdir / "provenance.parquet", "tokenizer.json": tokenizer_file}
    if settings.include_text:
        files |= write_text(lake, partitions, card_facts.get("text_parts", {}), workdir)
    (workdir / "README.md").write_text(card)
    files["README.md"] = workdir / "README.md"
    for name, path in files.items():
        lake.put_file(prefix + name, path)
    sizes = {name: path.stat().st_size for name, path in files.items()}
    manifest["files"] = sizes
    lake.put_json(prefix + "manifest.json", manifest)  # last: the commit
    return Release(settings.name, version, prefix, manifest, card, files=sizes)


def write_text(lake: Lake, partitions: list[dict], text_parts: dict[str, list[str]], workdir: Path) -> dict:
    """The curated documents (doc_id, url, crawl, text) as Parquet, one file per crawl, for `datasets`."""
    out = {}
    for crawl, parts in sorted(text_parts.items()):
        if not parts:
            continue
        path = workdir / f"text-{crawl}.parquet"
        lake.scan(parts).select("doc_id", "url", "crawl", "language", "text").sink_parquet(path)
        out[f"text/{crawl}.parquet"] = path
    return out


def _size_category(n: int) -> str:
    """Hugging Face's size_categories bucket of a document count."""
    for bound, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                        (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")):
        if n < bound:
            return name
    return "n>1B"


def card_front_matter(manifest: dict, languages: list[str]) -> str:
    """The YAML header the Hugging Face Hub reads: license (a placeholder), languages, size, the text configs."""
    crawls = manifest["crawls"]
    header = {
        "license": "other",
        "license_name": "set-me",  # the crawled pages' terms decide; llm-assets cannot know them
        "language": languages or ["en"],
        "size_categories": [_size_category(manifest["counts"]["documents"])],
        "task_categories": ["text-generation"],
        "pretty_name": f"{manifest['name']} {manifest['version']}",
        "tags": ["llm-assets", "pretraining", "web-crawl"],
        "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": "text/*.parquet"}]}]
        + [{"config_name": c, "data_files": [{"split": "train", "path": f"text/{c}.parquet"}]} for c in crawls],
    }
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n"


def dataset_card(manifest: dict, facts: dict) -> str:
    """The release's README.md: Hugging Face front matter, what it holds and how it was made."""
    c = manifest["counts"]
    languages = [lang for lang, _ in facts.get("languages", []) if lang]
    lines = [
        card_front_matter(manifest, languages),
        f"# {manifest['name']} {manifest['version']}", "",
        f"Training sequences of {c['context']:,} tokens from crawls {', '.join(manifest['crawls']) or '(none)'}, "
        f"made by llm-assets on {manifest['created_at']}.", "",
        "## Size", "",
        "| | |", "|---|---:|",
        f"| documents | {c['documents']:,} |",
        f"| tokens (documents, EOS included) | {c['tokens_in']:,} |",
        f"| sequences × context | {c['sequences']:,} × {c['context']:,} |",
        f"| packing | {manifest['config']['packing']} |",
        f"| padding | {c['padding_pct']:.2f}% ({c['padding_tokens']:,} tokens) |",
        f"| truncated | {c['truncated_pct']:.2f}% ({c['truncated_tokens']:,} tokens) |",
        f"| shuffle seed | {manifest['config']['seed']} |",
        f"| tokenizer | `{manifest['tokenizer']['hash']}`, {manifest['tokenizer']['vocab_size']:,} ids, "
        f"EOS {manifest['tokenizer']['eos_id']} |", "",
    ]
    if facts.get("languages"):
        lines += ["## Language mix (documents kept by the filters)", "", "| language | documents |", "|---|---:|"]
        lines += [f"| {lang} | {n:,} |" for lang, n in facts["languages"]] + [""]
    if facts.get("funnel"):
        lines += ["## Funnel", "", "| crawl | raw records | extracted | filtered | deduplicated | dedup rate |",
                  "|---|---:|---:|---:|---:|---:|"]
        for crawl, f in sorted(facts["funnel"].items()):
            rate = 1 - f["deduplicated"] / f["filtered"] if f["filtered"] else 0.0
            lines.append(f"| {crawl} | {f.get('raw_records', 0):,} | {f['documents']:,} | {f['filtered']:,} | "
                         f"{f['deduplicated']:,} | {rate:.1%} |")
        lines.append("")
    if facts.get("drops"):
        lines += ["### What each stage set aside", "", "| stage | reason | records |", "|---|---|---:|"]
        for asset, reasons in facts["drops"].items():
            lines += [f"| {asset} | `{r}` | {n:,} |" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
        lines.append("")
    if facts.get("filters"):
        lines += ["## Filters in force, in order", "", "| block | thresholds |", "|---|---|"]
        lines += [f"| `{name}` | {', '.join(f'{k}={v}' for k, v in config.items()) or '(defaults)'} |"
                  for name, config in facts["filters"]] + [""]
    if facts.get("dedup"):
        lines += ["## Deduplication", "", ", ".join(f"{k}={v}" for k, v in facts["dedup"].items()), ""]
    if manifest.get("takedowns"):
        lines += ["## Takedowns applied", ""] + [f"- `{t}`" for t in manifest["takedowns"]] + [""]
    lines += ["## Provenance", "",
              "`manifest.json` lists every (crawl, shard) partition with its data version and the code versions of "
              "the stages; `provenance.parquet` maps each sequence (its position in `data.bin`) to the document "
              "pieces it holds.", "",
              "| crawl | shard | data version |", "|---|---|---|"]
    lines += [f"| {p['crawl']} | {p['shard']} | `{p['data_version']}` |" for p in manifest["partitions"]]
    lines += ["", "## Reading it", "",
              "```python", "from llm_assets.loader import ReleaseLoader",
              f"for batch in ReleaseLoader('s3://<bucket>/{release_prefix(manifest['name'], manifest['version'])}',"
              " rank=0, world_size=1, batch_size=8):", "    ...", "```", ""]
    return "\n".join(lines)
