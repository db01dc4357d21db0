"""The tokenizer and the tokenized stage: every deduplicated document as token ids, EOS at its end."""

import tempfile
import time
from pathlib import Path

import polars as pl

from llm_assets import charts
from llm_assets.core.lake import part_key
from llm_assets.core.partition import PartitionOutput, committed
from llm_assets.core.stage_names import DEDUPLICATED, TOKENIZED, TOKENIZER
from llm_assets.core.tokenize import (
    TOKENIZER_LATEST,
    load_tokenizer,
    publish_tokenizer,
    resolve_tokenizer,
    sample_texts,
    tokenizer_hash,
    train_bytelevel_bpe,
)
from llm_assets.core.tokenized import (
    DOCUMENTS_COUNT,
    STAGE_VERSION,
    TOKENIZER_VERSION,
    TOKENS_COUNT,
    TokenizedSettings,
    TokenizeUnit,
    schema,
    tokenize_documents,
)
from llm_assets.core.units import WorkUnit, peak_rss_bytes, unit_id
from llm_assets.core.versions import code_version, short
from llm_assets.registry import StageSpec
from llm_assets.report import Markdown, Report, Url
from llm_assets.stage import AssetStage, Materialized, Partition, ShardStage, StageFailure
from llm_assets.stages.dedup import DEDUPLICATED_SPEC


def configured_tokenizer_hash(settings: TokenizedSettings) -> str:
    """The configured tokenizer file's hash; a trained tokenizer's hash is in each unit's identity and in lineage."""
    if settings.source == "train":
        return "trained"
    try:
        return tokenizer_hash(str(settings.resolved_path()))
    except OSError:
        return "missing"  # materializing reports the missing files; the code location still loads


def tokenized_version(settings) -> str:
    return code_version(STAGE_VERSION, settings.tokenized.fingerprint(), configured_tokenizer_hash(settings.tokenized))


def tokenizer_version(settings) -> str:
    """The tokenizer's: the tokenized settings but `min_tokens`, which decides what is kept, not how it is encoded."""
    tokenization = settings.tokenized.model_copy(update={"min_tokens": 0})
    return code_version(TOKENIZER_VERSION, tokenization.fingerprint(), configured_tokenizer_hash(tokenization))


def _published(lake, settings) -> dict | None:
    pointer = lake.get_json(TOKENIZER_LATEST)
    return {"version": short(pointer["sha256"])} if pointer else None


TOKENIZER_SPEC = StageSpec(TOKENIZER, "model", version=tokenizer_version, facts=_published, group="models",
                           job="release_job")
SPEC = StageSpec(TOKENIZED, "shard", (DEDUPLICATED,), version=tokenized_version, group="curated",
                 job="curated_job", documents=True)


class Tokenizer(AssetStage):
    """The tokenizer of the tokenized stage, published as `models/tokenizer/<sha256>.json`; its hash is in the
    lineage of every tokenized partition and release. With `tokenized.source: file`, the configured one (GPT-2's
    vocab + merges by default); with `train`, a byte-level BPE trained with `tokenizers` (vocab size, minimum
    frequency and special tokens in the settings) on a deterministic sample of deduplicated documents: those
    whose doc_id hashes lowest, so the sample is stable as crawls grow.
    """

    spec = TOKENIZER_SPEC
    kinds = frozenset({"huggingface", "s3"})

    def deps(self, settings, specs) -> list[str]:
        return [DEDUPLICATED_SPEC.name] if settings.tokenized.source == "train" else []

    def build(self, p: Partition) -> Materialized:
        start, tokenization = time.perf_counter(), p.settings.tokenized
        report: Report = {"source": tokenization.source}
        if tokenization.source == "train":
            tok, sample = self.trained(p)
            report |= sample
        else:
            tok = load_tokenizer(str(tokenization.resolved_path()))
            report |= {"path": str(tokenization.tokenizer_path)}
        key, sha = publish_tokenizer(p.lake, tok)
        eos = tok.token_to_id(tokenization.eos_token)
        if eos is None:
            raise StageFailure(f"EOS token {tokenization.eos_token!r} is not in the tokenizer's vocabulary")
        report |= {"tokenizer": Url(p.lake.url(key)), "sha256": sha, "vocab_size": tok.get_vocab_size(),
                   "eos_id": eos, "seconds": round(time.perf_counter() - start, 3),
                   "peak_rss_mib": round(peak_rss_bytes() / 2**20, 1)}
        return Materialized(report, short(sha))

    @staticmethod
    def trained(p: Partition):
        """A byte-level BPE trained on the sample of the configured crawls' deduplicated documents, and what the
        sample was."""
        train = p.settings.tokenized.train
        crawls = p.crawls(train.crawls)
        parts = [part for c in crawls
                 for m in committed(p.lake, DEDUPLICATED_SPEC.name, c, p.settings.shard_keys()).values()
                 for part in m.parts]
        texts = sample_texts(p.lake, parts, train.sample_documents)
        if not texts:
            raise StageFailure(f"no deduplicated documents in crawls {crawls} to train a tokenizer on")
        with tempfile.TemporaryDirectory() as tmp:
            tok = train_bytelevel_bpe(texts, train.vocab_size, list(train.special_tokens),
                                      Path(tmp) / "tokenizer.json", min_frequency=train.min_frequency)
        return tok, {"sample_documents": len(texts), "sample_chars": sum(map(len, texts)), "crawls": crawls}


def languages_table(units) -> pl.DataFrame:
    """Documents and tokens kept per language, from the units' counts: exact, without reading a part."""
    rows: dict[str, list[int]] = {}
    for u in units:
        for key, n in u.counts.items():
            for i, prefix in enumerate((DOCUMENTS_COUNT, TOKENS_COUNT)):
                if key.startswith(prefix):
                    rows.setdefault(key.removeprefix(prefix) or charts.NO_LANGUAGE, [0, 0])[i] += n
    total = sum(t for _, t in rows.values()) or 1
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1][1], kv[0]))
    return pl.DataFrame({"language": [k for k, _ in ordered], "documents": [v[0] for _, v in ordered],
                         "tokens": [v[1] for _, v in ordered], "share": [v[1] / total for _, v in ordered]},
                        schema={"language": pl.String, "documents": pl.Int64, "tokens": pl.Int64,
                                "share": pl.Float64})


class Tokenized(ShardStage):
    """Token ids of every deduplicated document with the configured byte-level BPE tokenizer (GPT-2 by
    default, or the one the `tokenizer` asset trained), EOS appended as the document boundary: the list column
    is a flat token stream plus document offsets, uint16 ids when the vocabulary fits, else uint32.

    One work unit per upstream deduplicated part; the tokenizer's hash is part of each unit's identity. With
    `tokenized.min_tokens`, documents with fewer tokens (EOS not counted) are set aside as `too_few_tokens`
    under `rejected/tokenized/` (`llm-assets show rejected --stage tokenized`).
    """

    spec = SPEC
    work = staticmethod(tokenize_documents)

    def deps(self, settings, specs) -> list[str]:
        return [TOKENIZER_SPEC.name]  # configured or trained, the tokenizer is in the lineage of every token

    def definition_metadata(self, settings) -> Report:
        return {"tokenizer_hash": configured_tokenizer_hash(settings.tokenized)}

    def units(self, p: Partition) -> list[WorkUnit]:
        resolved, tok_hash = resolve_tokenizer(p.settings.tokenized, p.lake)
        p.notes["tokenizer"] = (tok_hash, load_tokenizer(str(resolved.resolved_path())).get_vocab_size())
        code, units = SPEC.version(p.settings), list[WorkUnit]()
        for source in p.inputs[DEDUPLICATED_SPEC.name].parts:
            unit = unit_id(SPEC.name, code, source, tok_hash)
            units.append(TokenizeUnit(store=p.lake.config, settings=resolved, source=source, unit=unit,
                                      part=part_key(SPEC.name, p.crawl, p.shard, unit),
                                      rejected_part=part_key(SPEC.name, p.crawl, p.shard, unit, zone="rejected")
                                      if resolved.min_tokens else ""))
        return units

    def columns(self, p: Partition) -> list[str]:
        return schema(p.notes["tokenizer"][1]).names

    def metadata(self, p: Partition) -> Report:
        return {"tokenizer_sha": p.notes["tokenizer"][0]}

    def report(self, p: Partition, out: PartitionOutput) -> Report:
        """Tokens in the partition, per language, and per document (chart)."""
        parts = [u.part for u in out.units if u.part and u.rows_out]
        n_tokens = p.lake.scan(parts).select("n_tokens").collect()["n_tokens"] if parts else \
            pl.Series([], dtype=pl.Int32)
        return {"tokens": int(n_tokens.sum() or 0), "languages": languages_table(out.units),
                "tokens_chart": Markdown(charts.histogram(
                    "tokens per document (EOS included)", n_tokens.to_list(), "tokens per document"))}


STAGES = [Tokenizer(), Tokenized()]
