"""What people drop to change the curated data after it is built: takedown requests and evaluation sets.

Both are read from the bucket where they are dropped (`takedowns/`, `evals/`) by every run of `filtered` and by
the stale planner, so a dropped list plans its rebuild at once; their assets show what is in force."""

import time

import polars as pl

from llm_assets.core.decontamination import INDEX_PREFIX, NO_INDEX, eval_index, eval_keys, eval_sources, index_version
from llm_assets.core.stage_names import EVAL_INDEX, TAKEDOWNS
from llm_assets.core.takedowns import PREFIX, load_takedowns, takedowns_version
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec
from llm_assets.report import Url
from llm_assets.stage import AssetStage, Materialized, Partition, StageFailure

STAGE_VERSION = "1"
LISTED = 200  # requests in the takedowns' `list` table; `requests` counts them all


def _takedowns(lake, settings) -> dict:
    # The list in force is what is under takedowns/ (the asset writes nothing else): no request is an empty list,
    # in force like any other, not an asset never built.
    try:
        requests = load_takedowns(lake)
    except ValueError as e:  # a bad line: status says which, and goes on
        return {"error": str(e)}
    return {"version": takedowns_version(requests), "requests": len(requests)} if requests else {"requests": 0}


def _eval_index(lake, settings) -> dict | None:
    sources = eval_sources(lake, settings.evals)
    version = index_version(settings.evals, sources)
    if version == NO_INDEX:
        return None
    return {"version": version, "eval_sets": len(sources), "built": lake.exists(f"{INDEX_PREFIX}{version}.npz")}


TAKEDOWNS_SPEC = StageSpec(TAKEDOWNS, "model", facts=_takedowns, group="curation", job="curation_job")
EVAL_INDEX_SPEC = StageSpec(EVAL_INDEX, "model", facts=_eval_index,
                            version=lambda s: code_version(STAGE_VERSION, s.evals.model_dump_json()),
                            group="curation", job="curation_job")


class Takedowns(AssetStage):
    """The takedown requests in force: every JSON Lines file under `takedowns/` in the bucket (or written by
    `llm-assets takedown add`), one request per line naming exactly one `url`, `domain` (with its subdomains) or
    `doc_id`, with `reason`, `requested_by` and `date`. A bad line fails this asset naming the file and line.

    `filtered` removes every document a request names (reason `takedown`, kept under `rejected/` with the
    request); `llm-assets stale` plans exactly the partitions that hold one, through each part's id index, and
    the release that includes them. `llm-assets takedown status` says where each was found and which release
    first lacks it.
    """

    spec = TAKEDOWNS_SPEC
    kinds = frozenset({"s3"})

    def build(self, p: Partition) -> Materialized:
        try:
            requests = load_takedowns(p.lake)
        except ValueError as e:
            raise StageFailure(str(e)) from e
        kinds = {k: sum(1 for r in requests if getattr(r, k)) for k in ("url", "domain", "doc_id")}
        listed = pl.DataFrame([{"target": r.target, "reason": r.reason, "requested_by": r.requested_by,
                                "date": str(r.date)} for r in requests[:LISTED]],
                              schema=dict.fromkeys(["target", "reason", "requested_by", "date"], pl.String))
        return Materialized({"requests": len(requests), "by_kind": kinds, "list": listed,
                             "prefix": Url(p.lake.url(PREFIX))}, takedowns_version(requests))


class EvalIndex(AssetStage):
    """The n-gram index of the evaluation sets under `evals/` in the bucket (JSON Lines or a JSON array, plain,
    gzip or zstd; the text fields are the `evals` settings, per set where `evals.sets` names them): every
    13-gram of normalized words (n is a setting, as GPT-3 did), hashed to 64 bits, sorted, with the set it came
    from: 10 bytes per n-gram whatever the text. Stored under `models/eval_index/<version>.npz`, the version
    hashing the sets' contents and the settings. Every other key under `evals/` is listed with the reason it is
    not read (`unused_keys`, the run's log, `llm-assets status`).

    The `decontaminate` block, last in `filtered`'s chain, drops (or flags) documents sharing n-grams with it,
    with reason `contaminated`, the benchmark and the matched span. A new or changed set makes stale exactly the
    partitions whose curated documents it flags differently.
    """

    spec = EVAL_INDEX_SPEC
    kinds = frozenset({"numpy", "s3"})

    def build(self, p: Partition) -> Materialized:
        start, lake, evals = time.perf_counter(), p.lake, p.settings.evals
        keys = eval_keys(lake, evals)
        for unused in keys.unused:
            p.log.warning(f"{lake.url(unused.key)} is not used as an eval set: {unused.reason}")
        try:
            index = eval_index(lake, evals)
        except ValueError as e:
            raise StageFailure(str(e)) from e
        if index.path is None:
            p.log.warning(f"no eval set under {lake.url(evals.prefix)}: decontamination checks nothing")
        for benchmark, fields in zip(index.benchmarks, index.fields, strict=False):
            p.log.info(f"eval set {benchmark}: indexed fields {', '.join(fields) or '(not recorded)'}")
        return Materialized({
            "eval_sets": [k for k, _ in keys.sources],
            "unused_keys": [u.to_dict() for u in keys.unused],
            "benchmarks": list(index.benchmarks),
            "fields": dict(zip(index.benchmarks, index.fields, strict=False)),
            "ngram_sizes": list(index.lengths),
            "ngram": evals.ngram, "ngrams": index.ngrams, "index_bytes": index.nbytes,
            "bytes_per_million_ngrams": round(index.nbytes / index.ngrams * 1e6) if index.ngrams else 0,
            "built_now": index.built, "seconds": round(time.perf_counter() - start, 3)}, index.version)


STAGES = [Takedowns(), EvalIndex()]
