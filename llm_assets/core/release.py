"""A training release: the tokenized documents of some crawls, packed into fixed-length sequences, shuffled
globally and written as a Megatron-LM indexed dataset, with its provenance, a manifest and a dataset card.

    releases/<name>/<version>/data.bin, data.idx   the sequences, in training order (Megatron MMapIndexedDataset);
                                                   a release of more than `sequences_per_shard` sequences is N
                                                   shards data-0000k-of-0000N.bin/.idx, consecutive ranges of that
                                                   order: read one after the other, they are the single file
                             /provenance.parquet   per sequence: the document pieces it holds (doc, crawl, url);
                                                   provenance-0000k-of-0000N.parquet per shard
                             /tokenizer.json       the tokenizer that made the ids (decode with it)
                             /text/<crawl>.parquet optional: the curated documents' text (Hugging Face datasets)
                             /manifest.json        crawls, partitions and data versions, code versions, config,
                                                   tokenizer hash, counts, the shards; written last: the commit
                             /README.md            the dataset card

Memory stays flat in the dataset size, and no machine holds the token stream: this process reads only the
documents' lengths, packs them (one row per document piece) and shuffles the sequences with a keyed Feistel
permutation; each shard is then a work unit (in-process, pool or cluster) that reads only the tokens of the
documents its sequences hold and writes its .bin/.idx, a chunk of positions at a time.
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import yaml  # type: ignore[import-untyped]
from pydantic import Field, model_validator

from llm_assets.core.config import Section
from llm_assets.core.indexed import IndexedWriter
from llm_assets.core.keys import (
    RELEASES,
    release_latest_key,
    release_name_prefix,
    release_prefix,
    release_superseded_key,
)
from llm_assets.core.lake import Lake, ObjectInfo
from llm_assets.core.packing import SEQ, PackingStats, Plan, bucket_by_length, gather_index, pack_bfd, pack_concat
from llm_assets.core.shuffle import FeistelPermutation
from llm_assets.core.units import InProcessRunner, Runner, UnitResult, WorkUnit, run_units, timed_unit
from llm_assets.core.versions import digest


class LanguageShare(Section):
    """One language's part of a release: at most `tokens` tokens of it, or a `weight`."""

    tokens: int | None = Field(default=None, ge=0, description="At most this many tokens of the language.")
    weight: float | None = Field(default=None, gt=0, description=(
        "The language's share of the release's tokens: this weight over the weights' sum."))

    @model_validator(mode="after")
    def _one(self) -> LanguageShare:
        if (self.tokens is None) == (self.weight is None):
            raise ValueError("a language of release.languages takes `tokens: N` or `weight: w`, one of them")
        return self


class ReleaseSettings(Section):
    """One training release: which crawls, how sequences are packed, the shuffle seed. The tokenizer is the
    tokenized stage's. Another config is another version; a version is never rewritten."""

    name: str = Field(default="demo", pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$", description=(
        "The release's name: `releases/<name>/<version>/`."))
    crawls: tuple[str, ...] = Field(default=(), description="The crawls released; empty: every crawl.")
    context: int = Field(default=2048, ge=1, description="Tokens per sequence.")
    packing: Literal["bfd", "concat"] = Field(default="bfd", description=(
        "`bfd`: whole documents, best-fit decreasing, padded; `concat`: concatenated and chunked, no padding."))
    seed: int = Field(default=0, description="Seed of the global shuffle.")
    include_text: bool = Field(default=True, description=(
        "Also write the curated text as Parquet (readable by Hugging Face datasets)."))
    length_buckets: tuple[int, ...] = Field(default=(), description=(
        "Token-count boundaries, e.g. `[256, 1024]`: documents are packed only with others of their bucket."))
    # Sequences per shard (one .bin/.idx pair, written by one work unit, whose memory and disk it bounds): 262,144
    # sequences of 2,048 uint16 ids are 1 GiB. A release of at most this many sequences is one shard.
    sequences_per_shard: int = Field(default=262_144, ge=1, description=(
        "Sequences per .bin/.idx shard, each written by one work unit (262,144 sequences of 2,048 uint16 ids are 1 "
        "GiB)."))
    # The language mix: empty, every language as it comes; else only the languages listed, each with a token budget
    # (`{tokens: N}`) or a weight (`{weight: w}`, its share of the release's tokens being w over the weights' sum).
    languages: dict[str, LanguageShare] = Field(default={}, description=(
        "The language mix: empty, every language as it comes; else only these, each `{tokens: N}` or `{weight: w}`."))
    tokens: int | None = Field(default=None, ge=1, description=(
        "With weights: the release's total tokens; null: the largest mix the data allows."))

    @model_validator(mode="after")
    def _one_kind_of_mix(self) -> ReleaseSettings:
        kinds = {"tokens" if share.tokens is not None else "weight" for share in self.languages.values()}
        if len(kinds) > 1:
            raise ValueError("release.languages: give every language a token budget or every one a weight, not both")
        if self.tokens is not None and kinds != {"weight"}:
            raise ValueError("release.tokens is the total the weights of release.languages share: set weights")
        return self


STAGE_VERSION = "3"  # 3: a language mix (release.languages), documents and tokens per language in the manifest
CHUNK = 4096  # output positions per step of the shuffled writer


def point_latest(lake: Lake, release: Release) -> None:
    """`releases/<name>/latest.json`: the version the name means now (readers may also name a version)."""
    lake.put_json(release_latest_key(release.name), {"version": release.version, "prefix": release.prefix})


def mark_superseded(lake: Lake, previous: dict | None, release: Release) -> dict | None:
    """Mark the release the name pointed at before as superseded, when the new one lacks documents that takedown
    requests or opt-outs (`kind:host`) removed since: readers are warned (or refused) that it holds them. -> the
    record written, or None."""
    if previous is None or previous["version"] == release.version:
        return None
    removed = sorted(set(release.manifest.get("takedowns", [])) - set(previous.get("takedowns", [])))
    opted_out = sorted(set((release.manifest.get("opt_outs") or {}).get("hosts", []))
                       - set((previous.get("opt_outs") or {}).get("hosts", [])))
    if not removed and not opted_out:
        return None
    record = {"version": previous["version"], "superseded_by": release.version, "takedowns": removed,
              "opt_outs": opted_out, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    lake.put_json(release_superseded_key(release.name, previous["version"]), record)
    return record


def latest_release(lake: Lake, name: str) -> str | None:
    """The prefix of the latest version of release `name`, or None."""
    pointer = lake.get_json(release_latest_key(name))
    return pointer["prefix"] if pointer else None


def release_version(settings: ReleaseSettings, tokenizer_hash: str, partitions: list[dict]) -> str:
    """A release is immutable: its version is a hash of everything that decides its bytes."""
    blob = json.dumps({"stage": STAGE_VERSION, "config": settings.model_dump(mode="json"),
                       "tokenizer": tokenizer_hash, "partitions": partitions}, sort_keys=True)
    return "v-" + digest(blob)


@dataclass
class Documents:
    """The release's documents in release order, without their tokens: where each one is stored, and its place in
    the release's token stream (document i is stream[offsets[i]:offsets[i + 1]], a stream never assembled)."""

    offsets: np.ndarray  # int64, len(docs) + 1
    docs: pl.DataFrame  # doc_id, url, n_tokens, language, crawl, shard, part (its tokenized part), row (in that part)
    # every language of the parts read, listed or not: language -> (documents, tokens)
    available: dict[str | None, tuple[int, int]] = field(default_factory=dict)


DOCUMENT_SCHEMA = pl.Schema({"doc_id": pl.String, "url": pl.String, "n_tokens": pl.Int32, "language": pl.String,
                             "crawl": pl.String, "shard": pl.String, "part": pl.String, "row": pl.Int64})


def list_documents(lake: Lake, parts: list[tuple[str, str, str]], languages: Sequence[str] = ()) -> Documents:
    """The documents of the tokenized parts ((crawl, shard, part) in order), their lengths and languages only: ~100
    bytes a document, whatever its tokens. `languages`: only those (filtered as each part is read)."""
    frames, available = [], Counter[tuple[str | None, str]]()
    for crawl, shard, part in parts:
        scan = lake.scan([part])
        if "language" not in scan.collect_schema().names():  # a part tokenized before documents kept theirs
            scan = scan.with_columns(language=pl.lit(None, pl.String))
        frame = scan.select("doc_id", "url", "n_tokens", "language").with_row_index("row").collect()
        for lang, n, t in frame.group_by("language").agg(pl.len(), pl.col("n_tokens").cast(pl.Int64).sum()).iter_rows():
            available[(lang, "documents")] += n
            available[(lang, "tokens")] += t
        if languages:
            frame = frame.filter(pl.col("language").is_in(list(languages)))
        frames.append(frame.with_columns(crawl=pl.lit(crawl), shard=pl.lit(shard), part=pl.lit(part)))
    docs = pl.concat([f.select(list(DOCUMENT_SCHEMA)).cast(DOCUMENT_SCHEMA) for f in frames]) if frames else \
        pl.DataFrame(schema=DOCUMENT_SCHEMA)
    offered = {lang: (available[(lang, "documents")], available[(lang, "tokens")]) for lang, kind in available
               if kind == "documents"}
    return Documents(offsets=_offsets(docs["n_tokens"].to_numpy()), docs=docs, available=offered)


def document_rank(doc_ids: Sequence[str], seed: int) -> np.ndarray:
    """A keyed hash of each doc_id (uint64): the order in which a language's documents are taken into a release.
    blake2b, not Polars' hash, which may change between Polars versions while the release's version would not."""
    key = str(seed).encode()
    return np.fromiter((int.from_bytes(hashlib.blake2b(d.encode(), digest_size=8, key=key).digest(), "little")
                        for d in doc_ids), np.uint64, count=len(doc_ids))


def select_mix(docs: Documents, settings: ReleaseSettings) -> tuple[Documents, dict]:
    """The documents of the configured language mix, in their order, and the mix as the manifest records it.

    Each listed language gets a token budget: `tokens: N` is N; with weights, the release's total T is
    `release.tokens` or, at most, the largest total at which every language still has its share (T = min over the
    languages of its tokens / its share), and a language's budget is its share of T. A language's documents are
    taken whole, in the order of a keyed hash of their doc_id (`document_rank`, keyed by the seed), while its total
    stays within the budget. No document is taken twice: a language is never up-sampled, so a total that the data
    cannot give at the weights' shares is cut down to the largest one it can. Without `languages`, every document
    is kept."""
    frame, available = docs.docs, docs.available
    if not settings.languages:
        return docs, mix_record(frame, {}, available, None)
    budgets: dict[str, int] = {}
    total = None
    if all(share.tokens is not None for share in settings.languages.values()):
        budgets = {lang: int(share.tokens or 0) for lang, share in settings.languages.items()}
    else:
        weights = {lang: float(share.weight or 0) for lang, share in settings.languages.items()}
        shares = {lang: w / sum(weights.values()) for lang, w in weights.items()}
        largest = min(available.get(lang, (0, 0))[1] / s for lang, s in shares.items())
        total = int(min(largest, settings.tokens) if settings.tokens else largest)
        budgets = {lang: int(total * s) for lang, s in shares.items()}
    rank = pl.Series("rank", document_rank(frame["doc_id"].to_list(), settings.seed), pl.UInt64)
    chosen = (frame.with_row_index("i").with_columns(rank)
              .filter(pl.col("language").is_in(list(budgets)))
              .sort("rank")
              .with_columns(running=pl.col("n_tokens").cast(pl.Int64).cum_sum().over("language"))
              .filter(pl.col("running") <= pl.col("language").replace_strict(budgets, return_dtype=pl.Int64)))
    # taken while the language's total stays within its budget: the prefix of its hash order, not a greedy fill
    keep = np.zeros(frame.height, bool)
    keep[chosen["i"].to_numpy()] = True
    frame = frame.filter(pl.Series(keep))
    return Documents(offsets=_offsets(frame["n_tokens"].to_numpy()), docs=frame, available=available), \
        mix_record(frame, settings.languages, available, total, budgets)


def mix_record(frame: pl.DataFrame, targets: dict, available: dict[str | None, tuple[int, int]],
               total: int | None, budgets: dict[str, int] | None = None) -> dict:
    """The language mix a release achieved (manifest `mixture`): per language its documents, tokens and share of the
    release's tokens, what the data offered, and the target (budget or weight, with the budget it came to)."""
    held = frame.group_by("language").agg(documents=pl.len(), tokens=pl.col("n_tokens").cast(pl.Int64).sum())
    got = {lang: (int(n), int(t)) for lang, n, t in held.iter_rows()}
    all_tokens = sum(t for _, t in got.values())
    weights = sum(float(s.weight or 0) for s in targets.values())
    languages = {}
    for lang in sorted(set(got) | set(targets), key=lambda k: (-got.get(k, (0, 0))[1], str(k))):
        n, t = got.get(lang, (0, 0))
        row: dict[str, object] = {"documents": n, "tokens": t, "share": round(t / all_tokens, 6) if all_tokens else 0.0,
               "available_documents": available.get(lang, (0, 0))[0],
               "available_tokens": available.get(lang, (0, 0))[1]}
        if lang in targets:
            share = targets[lang]
            row["target"] = ({"tokens": share.tokens} if share.tokens is not None else
                             {"weight": share.weight, "share": round(share.weight / weights, 6),
                              "tokens": (budgets or {}).get(lang, 0)})
        languages[lang if lang is not None else NO_LANGUAGE] = row
    left_out = {lang if lang is not None else NO_LANGUAGE: {"documents": n, "tokens": t}
                for lang, (n, t) in sorted(available.items(),
                                           key=lambda kv: str(kv[0])) if targets and lang not in targets}
    return {"rule": "every language as it comes" if not targets else
            "token budgets" if total is None else f"weights over {total:,} tokens",
            "total_tokens": total, "languages": languages, "left_out": left_out}


NO_LANGUAGE = "(none)"  # a document no language block labelled


def _offsets(lengths: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def plan_sequences(docs: Documents, settings: ReleaseSettings) -> Plan:
    pack = pack_bfd if settings.packing == "bfd" else pack_concat
    if not settings.length_buckets:
        return pack(docs.offsets, settings.context)
    # The documents are in bucket order (see by_length_bucket): each bucket is a contiguous run, packed alone.
    bucket = docs.docs["bucket"].to_numpy()
    edges = np.searchsorted(bucket, np.arange(len(settings.length_buckets) + 2))
    plans = [pack(docs.offsets[lo:hi + 1], settings.context)
             for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]
    return merge_plans(plans, settings.context)


def merge_plans(plans: list[Plan], context: int) -> Plan:
    """One plan whose sequences are those of `plans`, one after the other."""
    first = np.cumsum([0] + [p.sequences for p in plans[:-1]])
    pieces = np.concatenate([p.pieces + [s, 0, 0] for p, s in zip(plans, first, strict=True)]) if plans else \
        np.empty((0, 3), np.int64)
    total = {f: sum(getattr(p.stats, f) for p in plans)
             for f in ("sequences", "tokens_in", "tokens_out", "padding_tokens", "truncated_tokens")}
    return Plan(pieces=pieces, sequences=total["sequences"], context=context,
                stats=PackingStats(context=context, **total))


def by_length_bucket(docs: Documents, boundaries: tuple[int, ...]) -> Documents:
    """The documents in the order of their length bucket (stable inside a bucket), with `bucket`."""
    bucket = bucket_by_length(docs.offsets, np.asarray(boundaries))
    order = np.argsort(bucket, kind="stable")
    frame = docs.docs.with_columns(bucket=pl.Series(bucket, dtype=pl.Int64))[order]
    return Documents(offsets=_offsets(frame["n_tokens"].to_numpy()), docs=frame, available=docs.available)


def place_pieces(plan: Plan, perm: FeistelPermutation, docs: Documents) -> pl.DataFrame:
    """One row per document piece, in training order: the output position of its sequence and its offset there, and
    where the piece comes from (its document's row in `docs`, the offset in the document, the length)."""
    seq, start, length = plan.pieces[:, 0], plan.pieces[:, 1], plan.pieces[:, 2]
    doc = np.searchsorted(docs.offsets, start, side="right") - 1
    frame = pl.DataFrame({
        "position": perm.inverse(seq).astype(np.int64) if len(seq) else np.empty(0, np.int64),
        "sequence": seq,
        "doc": doc,
        "start_in_doc": start - docs.offsets[doc] if len(doc) else np.empty(0, np.int64),
        "length": length,
    }, schema={"position": pl.Int64, "sequence": pl.Int64, "doc": pl.Int64, "start_in_doc": pl.Int64,
               "length": pl.Int64})
    # the plan lists a sequence's pieces in the order they are laid out in it
    return frame.with_columns(offset=(pl.col("length").cum_sum() - pl.col("length")).over("sequence")) \
        .sort("position", "offset").drop("sequence")


PROVENANCE = ("position", "offset", "doc_id", "crawl", "shard", "url", "language", "start_in_doc", "length")
SHARD_WORK = ("position", "offset", "length", "group", "src")  # what a shard unit reads of its pieces


def provenance(pieces: pl.DataFrame, docs: Documents) -> pl.DataFrame:
    """The pieces with their documents: the columns of `provenance*.parquet` (doc_id, crawl, shard, URL) and where a
    shard unit finds the tokens (the tokenized part and row)."""
    return pieces.join(docs.docs.with_row_index("doc").with_columns(pl.col("doc").cast(pl.Int64)), on="doc",
                       how="left", maintain_order="left").select(*PROVENANCE, "part", "row")


@dataclass(frozen=True)
class Shard:
    """One Megatron indexed dataset of the release: output positions [first, first + sequences), in order."""

    data: str  # the prefix of its .bin and .idx in the release's folder
    provenance: str  # its provenance file in the release's folder
    first: int
    sequences: int

    @property
    def positions(self) -> range:
        return range(self.first, self.first + self.sequences)


def shards(sequences: int, per_shard: int) -> list[Shard]:
    """The release's shards: contiguous ranges of the training order, `per_shard` sequences each (the last one
    fewer). A release of one shard keeps the single-file names (data.bin, data.idx, provenance.parquet)."""
    n = max(1, -(-sequences // per_shard))
    if n == 1:
        return [Shard("data", "provenance.parquet", 0, sequences)]
    return [Shard(f"data-{k:05d}-of-{n:05d}", f"provenance-{k:05d}-of-{n:05d}.parquet", k * per_shard,
                  min(per_shard, sequences - k * per_shard)) for k in range(n)]


# The shards are written in two rounds of work units, as a MapReduce shuffle, because a global shuffle puts in every
# shard documents of nearly every tokenized part: a shard unit reading the parts it needs would read them all.
# 1. scatter: a group of consecutive tokenized parts (about a shard's tokens) is read once, and the tokens of its
#    document pieces are written in training order to one flat file, `_build/scatter-<g>.bin`;
# 2. shard: each shard's pieces then lie in one byte range of each scatter file, read with one ranged GET each.
# Each token is read twice and written twice, whatever the number of shards; a unit holds a group's or a shard's
# tokens.


@dataclass(frozen=True, kw_only=True)
class ScatterUnit(WorkUnit):
    """Copy the tokens of the document pieces of one group of tokenized parts to one flat file, in training order."""

    pieces: str  # key of its pieces (part, row, start_in_doc, length), in training order
    out: str  # key of its scatter file
    dtype: str


@dataclass(frozen=True, kw_only=True)
class ShardUnit(WorkUnit):
    """Write one shard of a release from the scatter files."""

    prefix: str  # the release's folder
    shard: Shard
    pieces: str  # key of its pieces (position, offset, length, group, src: its start in the group's scatter file)
    scatter: str  # key of scatter file g, with `{group}` for g
    context: int
    pad_id: int
    dtype: str


def document_tokens(lake: Lake, pieces: pl.DataFrame, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of the documents the pieces (part, row, start_in_doc) come from, flat, and each piece's start in
    them. Each tokenized part is streamed a batch at a time, and only the rows needed are kept."""
    import pyarrow.compute as pc  # not at the top: every process building the code location imports this module

    needed = pieces.select("part", "row").unique().sort("part", "row").with_row_index("slot")
    chunks: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    for (part,), rows in needed.group_by("part", maintain_order=True):
        wanted, seen = rows["row"].to_numpy(), 0
        for batch in lake.iter_batches(str(part), 1024, columns=["tokens"]):
            lo, hi = np.searchsorted(wanted, [seen, seen + batch.num_rows])
            if hi > lo:
                taken = batch.column("tokens").take(pa.array(wanted[lo:hi] - seen))
                chunks.append(np.asarray(taken.flatten(), dtype=dtype))
                lengths.append(np.asarray(pc.list_value_length(taken), dtype=np.int64))
            seen += batch.num_rows
    # in slot order: the parts sorted, the rows of a part ascending
    flat = np.concatenate(chunks) if chunks else np.empty(0, dtype)
    starts = _offsets(np.concatenate(lengths) if lengths else np.empty(0, np.int64))[:-1]
    slot = pieces.join(needed, on=["part", "row"], how="left", maintain_order="left")["slot"].to_numpy()
    return flat, starts[slot] + pieces["start_in_doc"].to_numpy()


@timed_unit
def scatter(unit: ScatterUnit) -> UnitResult:
    """The group's pieces' tokens, one after the other in training order, as one flat file of `dtype` ids."""
    lake, dtype = Lake(unit.store), np.dtype(unit.dtype)
    pieces = lake.scan([unit.pieces]).collect()
    flat, src = document_tokens(lake, pieces, dtype)
    lengths = pieces["length"].to_numpy()
    with tempfile.TemporaryDirectory(prefix="llm-assets-scatter-") as tmp:
        path = Path(tmp) / "scatter.bin"
        flat[gather_index(src, lengths)].tofile(path)
        lake.put_file(unit.out, path)
    return UnitResult(unit=unit.unit, source=unit.source, part=unit.out, rows_in=pieces.height,
                      rows_out=pieces.height, bytes_in=int(flat.nbytes), bytes_out=int(lengths.sum()) * dtype.itemsize)


def shard_pieces_tokens(lake: Lake, unit: ShardUnit, pieces: pl.DataFrame, dtype: np.dtype
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of the shard's pieces, flat, and each piece's start in them: one ranged read of each scatter
    file, covering exactly the shard's pieces from that group."""
    chunks, src = [], np.empty(pieces.height, np.int64)
    base = 0
    for (group,), rows in pieces.with_row_index("i").group_by("group", maintain_order=True):
        starts, ends = rows["src"].to_numpy(), (rows["src"] + rows["length"]).to_numpy()
        lo, hi = int(starts.min()), int(ends.max())
        with lake.open_arrow(unit.scatter.format(group=group)) as f:
            f.seek(lo * dtype.itemsize)
            data = f.read((hi - lo) * dtype.itemsize)
        if len(data) != (hi - lo) * dtype.itemsize:
            raise OSError(f"{unit.scatter.format(group=group)}: {len(data)} bytes at token {lo}, expected "
                          f"{(hi - lo) * dtype.itemsize}")
        chunks.append(np.frombuffer(data, dtype=dtype))
        src[rows["i"].to_numpy()] = base + starts - lo
        base += hi - lo
    return (np.concatenate(chunks) if chunks else np.empty(0, dtype)), src


@timed_unit
def write_shard(unit: ShardUnit) -> UnitResult:
    """One shard's .bin and .idx: output position j holds the sequence the permutation put there, its pieces laid
    out from the front, padded with pad_id."""
    lake, dtype, shard = Lake(unit.store), np.dtype(unit.dtype), unit.shard
    pieces = lake.scan([unit.pieces]).collect()
    flat, src = shard_pieces_tokens(lake, unit, pieces, dtype)
    local = np.column_stack([pieces["position"].to_numpy() - shard.first, src, pieces["length"].to_numpy()])
    with tempfile.TemporaryDirectory(prefix="llm-assets-shard-") as tmp:
        out = Path(tmp) / shard.data
        with IndexedWriter(out, dtype) as writer:
            for first in range(0, shard.sequences, CHUNK):
                stop = min(first + CHUNK, shard.sequences)
                lo, hi = np.searchsorted(local[:, SEQ], [first, stop])
                chunk = Plan(pieces=local[lo:hi] - [first, 0, 0], sequences=stop - first, context=unit.context,
                             stats=NO_STATS)
                writer.add_many(chunk.materialize(flat, unit.pad_id))
        sizes = {}
        for ext in ("bin", "idx"):
            lake.put_file(f"{unit.prefix}{shard.data}.{ext}", Path(f"{out}.{ext}"))
            sizes[f"{shard.data}.{ext}"] = Path(f"{out}.{ext}").stat().st_size
    return UnitResult(unit=unit.unit, source=unit.source, part=f"{unit.prefix}{shard.data}.bin",
                      rows_in=pieces.height, rows_out=shard.sequences, bytes_in=int(flat.nbytes),
                      bytes_out=sum(sizes.values()), counts=sizes)


def groups(docs: Documents, tokens: int) -> pl.DataFrame:
    """The scatter group of each tokenized part (part, group): consecutive parts, a new group once a group holds
    `tokens` tokens or more."""
    per_part = docs.docs.group_by("part", maintain_order=True).agg(pl.col("n_tokens").sum().cast(pl.Int64))
    group, held, out = 0, 0, []
    for n in per_part["n_tokens"].to_list():
        if held >= tokens:
            group, held = group + 1, 0
        out.append(group)
        held += n
    return per_part.select("part", group=pl.Series(out, dtype=pl.Int64))


def plan_scatter(lake: Lake, placed: pl.DataFrame, build: str, dtype: np.dtype) -> list[ScatterUnit]:
    """A scatter unit per group, its pieces (in training order) written to the lake for it."""
    units = []
    by_group = placed.select("group", "part", "row", "start_in_doc", "length").sort("group", maintain_order=True)
    for (group,), pieces in by_group.group_by("group", maintain_order=True):
        lake.put_bytes(f"{build}pieces-{group}.parquet", _parquet(pieces.drop("group")))
        units.append(ScatterUnit(store=lake.config, source=f"{build}scatter-{group}", dtype=dtype.name,
                                 pieces=f"{build}pieces-{group}.parquet", out=f"{build}scatter-{group}.bin"))
    return units


def by_shard(placed: pl.DataFrame, layout: list[Shard]) -> Iterator[pl.DataFrame]:
    """Each shard's pieces (placed is in training order), with `src`: where a piece's tokens start in its group's
    scatter file, which holds the group's pieces one after the other in training order."""
    placed = placed.with_columns(src=(pl.col("length").cum_sum() - pl.col("length")).over("group"))
    starts = np.searchsorted(placed["position"].to_numpy(), [s.first for s in layout] + [layout[-1].first +
                                                                                         layout[-1].sequences])
    for lo, hi in zip(starts[:-1], starts[1:], strict=True):
        yield placed.slice(int(lo), int(hi - lo))


NO_STATS = PackingStats(sequences=0, context=0, tokens_in=0, tokens_out=0, padding_tokens=0, truncated_tokens=0)


@dataclass
class Release:
    name: str
    version: str
    prefix: str  # in the bucket
    manifest: dict
    card: str
    reused: bool = False
    files: dict[str, int] = field(default_factory=dict)  # name -> bytes
    units: list[UnitResult] = field(default_factory=list)  # the scatter and shard units that wrote it


def build_release(lake: Lake, settings: ReleaseSettings, partitions: list[dict], tokenizer_file: Path,
                  tokenizer_hash: str, eos_id: int, vocab_size: int, code_versions: dict, card_facts: dict,
                  workdir: Path, takedowns: Sequence[str] = (), runner: Runner = InProcessRunner(),
                  opt_outs: dict | None = None) -> Release:
    """Build and upload one release from the committed `tokenized` partitions listed (each: crawl, shard,
    data_version, parts). This process plans the sequences and the shuffle from the documents' lengths; each shard
    is written by a work unit on `runner`, reading only the tokens it needs. An existing version is never
    rewritten: it is returned as it is. `takedowns`: the targets of the takedown requests that removed documents of
    its partitions; `opt_outs`: the opt-out coverage of its partitions (the card's)."""
    version = release_version(settings, tokenizer_hash, [{k: p[k] for k in ("crawl", "shard", "data_version")}
                                                         for p in partitions])
    prefix = release_prefix(settings.name, version)
    existing = lake.get_json(prefix + "manifest.json")
    if existing is not None:
        card = lake.get_bytes(prefix + "README.md").decode() if lake.exists(prefix + "README.md") else ""
        return Release(settings.name, version, prefix, existing, card, reused=True)

    start = time.perf_counter()
    dtype = np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)
    docs, mixture = select_mix(list_documents(lake, [(p["crawl"], p["shard"], part) for p in partitions
                                                     for part in p["parts"]], tuple(settings.languages)), settings)
    if settings.length_buckets:
        docs = by_length_bucket(docs, settings.length_buckets)
    plan = plan_sequences(docs, settings)
    placed = provenance(place_pieces(plan, FeistelPermutation(plan.sequences, settings.seed), docs), docs)
    placed = placed.join(groups(docs, settings.sequences_per_shard * settings.context), on="part", how="left",
                         maintain_order="left")
    layout = shards(plan.sequences, settings.sequences_per_shard)
    build = f"{prefix}{BUILD}"
    scatter_units = plan_scatter(lake, placed, build, dtype)
    files, shard_units = {}, []
    # provenance here, the unit's pieces in the lake
    for shard, pieces in zip(layout, by_shard(placed, layout), strict=True):
        files[shard.provenance] = workdir / shard.provenance
        pieces.select(PROVENANCE).write_parquet(files[shard.provenance])
        lake.put_bytes(f"{build}{shard.data}.parquet", _parquet(pieces.select(SHARD_WORK)))
        shard_units.append(ShardUnit(store=lake.config, source=f"{prefix}{shard.data}", prefix=prefix, shard=shard,
                                     pieces=f"{build}{shard.data}.parquet", scatter=build + "scatter-{group}.bin",
                                     context=settings.context, pad_id=eos_id, dtype=dtype.name))
    del placed
    scattered = run_units(scatter, scatter_units, runner)
    written = run_units(write_shard, shard_units, runner)
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
        "documents_by_language": {lang: row["documents"] for lang, row in mixture["languages"].items()},
        "tokens_by_language": {lang: row["tokens"] for lang, row in mixture["languages"].items()},
    }
    if settings.length_buckets:
        names = [f"≤{b}" for b in settings.length_buckets] + [f">{settings.length_buckets[-1]}"]
        counts["documents_by_length_bucket"] = {names[b]: n for b, n in
                                                docs.docs.group_by("bucket").len().sort("bucket").iter_rows()}
    data = (f"{layout[0].data}.bin + .idx" if len(layout) == 1 else
            f"{len(layout)} shards {layout[0].data} … {layout[-1].data} (.bin + .idx each), consecutive ranges of "
            "the training order")
    manifest = {
        "name": settings.name,
        "version": version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": settings.model_dump(mode="json"),
        "crawls": sorted({p["crawl"] for p in partitions}),
        "partitions": [{k: p[k] for k in ("crawl", "shard", "data_version", "code_version")} for p in partitions],
        "code_versions": code_versions,
        "tokenizer": {"hash": tokenizer_hash, "vocab_size": vocab_size, "eos_id": eos_id, "file": "tokenizer.json"},
        "format": {"data": f"Megatron-LM MMapIndexedDataset ({data}): {plan.sequences:,} sequences of "
                           f"{settings.context:,} token ids, documents packed into them ({settings.packing})",
                   "dtype": dtype.name, "pad_id": eos_id, "order": "shuffled (keyed Feistel permutation)",
                   "provenance": layout[0].provenance if len(layout) == 1 else "provenance-*.parquet, one per shard"},
        "shards": [asdict(s) for s in layout],
        "counts": counts,
        "mixture": mixture,
        "takedowns": sorted(takedowns),
        "opt_outs": opt_outs or {},
        "seconds": round(time.perf_counter() - start, 3),
    }
    card = dataset_card(manifest, card_facts)
    files["tokenizer.json"] = tokenizer_file
    if settings.include_text:
        files |= write_text(lake, partitions, card_facts.get("text_parts", {}), workdir,
                            docs.docs["doc_id"] if settings.languages else None)
    (workdir / "README.md").write_text(card)
    files["README.md"] = workdir / "README.md"
    for name, path in files.items():
        lake.put_file(prefix + name, path)
    sizes = {name: path.stat().st_size for name, path in files.items()}
    for result in written:
        sizes |= result.counts
    sizes = dict(sorted(sizes.items()))
    manifest["files"] = sizes
    lake.put_json(prefix + "manifest.json", manifest)  # last: the commit
    lake.delete(lake.keys(build))
    return Release(settings.name, version, prefix, manifest, card, files=sizes, units=scattered + written)


# In a release's folder while it is written: the units' pieces and the scatter files. A failed build leaves them
# to `vacuum_releases`.
BUILD = "_build/"


def vacuum_releases(lake: Lake, retention_s: float, names: Sequence[str] | None = None,
                    now: float | None = None) -> list[str]:
    """Delete what release builds left behind, once `retention_s` has passed: a version folder without a manifest
    (a build that failed before its commit) once nothing in it was written for the retention, so a build still
    writing keeps every file, and the `_build/` folder of a committed version (its deletion after the commit
    failed). Nothing else of a committed version is touched. `names`: the releases to vacuum; None: every one.
    Returns the deleted keys."""
    cutoff = (time.time() if now is None else now) - retention_s
    deleted: list[str] = []
    for name in lake.folders(f"{RELEASES}/") if names is None else names:
        versions: dict[str, list[ObjectInfo]] = {}
        for obj in lake.list(release_name_prefix(name)):
            version, folder, _ = obj.key.removeprefix(release_name_prefix(name)).partition("/")
            if folder:  # not latest.json
                versions.setdefault(version, []).append(obj)
        for version, objects in sorted(versions.items()):
            prefix = release_prefix(name, version)
            committed = any(o.key == prefix + "manifest.json" for o in objects)
            left = [o for o in objects if o.key.startswith(prefix + BUILD)] if committed else objects
            if not left or max(o.modified for o in left) > cutoff:
                continue
            if not committed and lake.exists(prefix + "manifest.json"):
                continue  # committed since the listing: its files are the release's now
            lake.delete(o.key for o in left)
            deleted += [o.key for o in left]
    return deleted


def _parquet(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_parquet(buf)
    return buf.getvalue()


def release_shards(manifest: dict) -> list[Shard]:
    """The shards of a committed release, in training order; a release written before shards is one."""
    listed = manifest.get("shards")
    if listed:
        return [Shard(**s) for s in listed]
    return [Shard("data", "provenance.parquet", 0, int(manifest.get("counts", {}).get("sequences", 0)))]


def provenance_keys(prefix: str, manifest: dict) -> list[str]:
    """The provenance files of a committed release, in training order (positions are the release's, not a
    shard's)."""
    return [prefix + shard.provenance for shard in release_shards(manifest)]


def write_text(lake: Lake, partitions: list[dict], text_parts: dict[str, list[str]], workdir: Path,
               released: pl.Series | None = None) -> dict:
    """The curated documents (doc_id, url, crawl, text) as Parquet, one file per crawl, for `datasets`; with a
    language mix, only the documents of the release (`released`: their doc_ids)."""
    out = {}
    for crawl, parts in sorted(text_parts.items()):
        if not parts:
            continue
        path = workdir / f"text-{crawl}.parquet"
        frame = lake.scan(parts).select("doc_id", "url", "crawl", "language", "text")
        if released is not None:
            frame = frame.filter(pl.col("doc_id").is_in(released.implode()))
        frame.sink_parquet(path)
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


def mixture_lines(mixture: dict | None) -> list[str]:
    """The card's language mix: per language the documents and tokens released, their share, the target."""
    if not mixture or not mixture.get("languages"):
        return []
    lines = ["## Language mix", "", f"Rule: {mixture['rule']}"
             + (" (release.languages; documents taken whole in the order of a keyed hash of their doc_id, never "
                "twice)" if mixture["rule"] != "every language as it comes" else "") + ".", "",
             "| language | documents | tokens | share of tokens | target | available tokens |",
             "|---|---:|---:|---:|---|---:|"]
    for lang, row in mixture["languages"].items():
        target = row.get("target")
        said = ("—" if target is None else f"≤ {target['tokens']:,} tokens" if "weight" not in target else
                f"weight {target['weight']:g} ({target['share']:.1%}: {target['tokens']:,} tokens)")
        lines.append(f"| {lang} | {row['documents']:,} | {row['tokens']:,} | {row['share']:.2%} | {said} | "
                     f"{row['available_tokens']:,} |")
    if mixture.get("left_out"):
        lines += ["", "Left out (not in release.languages): " + ", ".join(
            f"{lang} ({v['documents']:,} documents, {v['tokens']:,} tokens)"
            for lang, v in mixture["left_out"].items())]
    return lines + [""]


def opt_out_lines(opt_outs: dict) -> list[str]:
    """The card's opt-out coverage: per policy kind honoured, the documents and hosts left out and the evidence."""
    if not opt_outs.get("honoured"):
        return ["## Opt-outs", "", "No reservation of text and data mining was looked at (`opt_outs.enabled`).", ""]
    kinds, flagged = opt_outs.get("kinds", {}), opt_outs.get("flagged", {})
    left_out = "flagged in `opt_out`" if opt_outs.get("mode") == "flag" else "left out"
    lines = ["## Opt-outs honoured", "",
             f"Documents whose response, or whose host's robots.txt, tdmrep.json or ai.txt, reserves text and data "
             f"mining are {left_out}. AI agents ({opt_outs.get('agents_as_of')}): "
             f"{', '.join(opt_outs.get('agents', []))}.", "",
             "| policy | documents | hosts | flagged | evidence captured |", "|---|---:|---:|---:|---|"]
    for kind in opt_outs["honoured"]:
        k = kinds.get(kind, {})
        dates = "–".join(dict.fromkeys(d for d in (k.get("evidence_from"), k.get("evidence_to")) if d)) or "—"
        lines.append(f"| `{kind}` | {k.get('documents', 0):,} | {k.get('hosts', 0):,} | {flagged.get(kind, 0):,} | "
                     f"{dates} |")
    return [*lines, ""]


def dataset_card(manifest: dict, facts: dict) -> str:
    """The release's README.md: Hugging Face front matter, what it holds and how it was made."""
    c = manifest["counts"]
    released = (manifest.get("mixture") or {}).get("languages", {})
    languages = [lang for lang, row in released.items() if row["documents"] and lang != NO_LANGUAGE] or \
        [lang for lang, _ in facts.get("languages", []) if lang]
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
    lines += mixture_lines(manifest.get("mixture"))
    if facts.get("language_funnel"):
        lines += ["## Funnel per language", "",
                  "Documents of each language as the stages kept them (the language is lid.176's, given by the "
                  "filters), and in this release.", "",
                  "| language | filtered (kept) | deduplicated | tokenized | released | released tokens |",
                  "|---|---:|---:|---:|---:|---:|"]
        mixture = manifest.get("mixture") or {}
        released, left_out = mixture.get("languages", {}), mixture.get("left_out", {})
        for lang, f in facts["language_funnel"].items():
            r = released.get(lang, {})
            tokenized = r.get("available_documents", left_out.get(lang, {}).get("documents", 0))
            lines.append(f"| {lang} | {f.get('filtered', 0):,} | {f.get('deduplicated', 0):,} | "
                         f"{tokenized:,} | {r.get('documents', 0):,} | {r.get('tokens', 0):,} |")
        lines.append("")
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
    lines += opt_out_lines(manifest.get("opt_outs") or {})
    layout = release_shards(manifest)
    if len(layout) > 1:
        lines += ["## Shards", "",
                  f"The sequences are {len(layout)} Megatron-LM indexed datasets, each a consecutive range of the "
                  "training order: read one after the other (as `ReleaseLoader` does) they are the release in order.",
                  "", "| shard | positions | sequences |", "|---|---|---:|"]
        lines += [f"| `{s.data}` | {s.first:,}–{s.first + s.sequences - 1:,} | {s.sequences:,} |" for s in layout]
        lines.append("")
    where = ("`provenance.parquet` maps each sequence (its position in `data.bin`)" if len(layout) == 1 else
             "`provenance-*.parquet` (one per shard) map each sequence (its position in the release)")
    lines += ["## Provenance", "",
              "`manifest.json` lists every (crawl, shard) partition with its data version and the code versions of "
              f"the stages; {where} to the document pieces it holds.", "",
              "| crawl | shard | data version |", "|---|---|---|"]
    lines += [f"| {p['crawl']} | {p['shard']} | `{p['data_version']}` |" for p in manifest["partitions"]]
    lines += ["", "## Reading it", "",
              "```python", "from llm_assets.loader import ReleaseLoader",
              f"for batch in ReleaseLoader('s3://<bucket>/{release_prefix(manifest['name'], manifest['version'])}',"
              " rank=0, world_size=1, batch_size=8):", "    ...", "```", ""]
    return "\n".join(lines)
