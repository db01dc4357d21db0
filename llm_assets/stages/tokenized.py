"""The tokenizer and the tokenized stage: every deduplicated document as token ids, EOS at its end."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llm_assets.core.tokenize import TOKENIZER_LATEST, tokenizer_hash
from llm_assets.core.tokenized import STAGE_VERSION, TOKENIZER_VERSION, TokenizedSettings
from llm_assets.core.versions import code_version, short
from llm_assets.registry import StageSpec


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


TOKENIZER_SPEC = StageSpec("tokenizer", "model", version=tokenizer_version, facts=_published, group="models",
                           job="release_job")
SPEC = StageSpec("tokenized", "shard", ("deduplicated",), version=tokenized_version, group="curated",
                 job="curated_job", documents=True)
SPECS = [TOKENIZER_SPEC, SPEC]

if TYPE_CHECKING:
    import dagster as dg

    from llm_assets.settings import Settings


def build(settings: "Settings", specs: "Sequence[StageSpec]") -> "dg.Definitions":
    import tempfile
    import time
    from pathlib import Path

    import dagster as dg
    import polars as pl

    from llm_assets import charts
    from llm_assets.core.lake import part_key
    from llm_assets.core.partition import LakeInput, PartitionOutput, committed
    from llm_assets.core.tokenize import (
        load_tokenizer,
        publish_tokenizer,
        resolve_tokenizer,
        sample_texts,
        train_bytelevel_bpe,
    )
    from llm_assets.core.tokenized import DOCUMENTS_COUNT, TOKENS_COUNT, TokenizeUnit, schema, tokenize_documents
    from llm_assets.core.units import peak_rss_bytes, unit_id
    from llm_assets.core.versions import short
    from llm_assets.metadata import Metadata, table
    from llm_assets.stage import partition_of, run_stage, stage_asset
    from llm_assets.stages.dedup import DEDUPLICATED_SPEC
    from resources import ObjectStore

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

    tokenization = settings.tokenized
    trains = tokenization.source == "train"
    code = SPEC.version(settings)

    @dg.asset(
        name=TOKENIZER_SPEC.name,
        deps=[dg.AssetDep(DEDUPLICATED_SPEC.name, partition_mapping=dg.AllPartitionMapping())] if trains else None,
        group_name=TOKENIZER_SPEC.group,
        kinds={"huggingface", "s3"},
        code_version=TOKENIZER_SPEC.version(settings),
    )
    def tokenizer(context: dg.AssetExecutionContext, store: ObjectStore) -> dg.MaterializeResult:
        """The tokenizer of the tokenized stage, published as `models/tokenizer/<sha256>.json`; its hash is in the
        lineage of every tokenized partition and release. With `tokenized.source: file`, the configured one (GPT-2's
        vocab + merges by default); with `train`, a byte-level BPE trained with `tokenizers` (vocab size, minimum
        frequency and special tokens in the settings) on a deterministic sample of deduplicated documents: those
        whose doc_id hashes lowest, so the sample is stable as crawls grow.
        """
        start = time.perf_counter()
        lake = store.lake()
        metadata: Metadata = {"source": tokenization.source}
        if trains:
            train = tokenization.train
            crawls = list(train.crawls) or sorted(context.instance.get_dynamic_partitions("crawl"))
            parts = [part for c in crawls
                     for m in committed(lake, DEDUPLICATED_SPEC.name, c, settings.shard_keys()).values()
                     for part in m.parts]
            texts = sample_texts(lake, parts, train.sample_documents)
            if not texts:
                raise dg.Failure(f"no deduplicated documents in crawls {crawls} to train a tokenizer on")
            with tempfile.TemporaryDirectory() as tmp:
                tok = train_bytelevel_bpe(texts, train.vocab_size, list(train.special_tokens),
                                          Path(tmp) / "tokenizer.json", min_frequency=train.min_frequency)
            metadata |= {"sample_documents": len(texts), "sample_chars": sum(map(len, texts)),
                         "crawls": dg.MetadataValue.json(crawls)}
        else:
            tok = load_tokenizer(str(tokenization.resolved_path()))
            metadata |= {"path": str(tokenization.tokenizer_path)}
        key, sha = publish_tokenizer(lake, tok)
        eos = tok.token_to_id(tokenization.eos_token)
        if eos is None:
            raise dg.Failure(f"EOS token {tokenization.eos_token!r} is not in the tokenizer's vocabulary")
        metadata |= {"tokenizer": dg.MetadataValue.text(lake.url(key)), "sha256": sha,
                     "vocab_size": tok.get_vocab_size(), "eos_id": eos,
                     "seconds": round(time.perf_counter() - start, 3),
                     "peak_rss_mib": round(peak_rss_bytes() / 2**20, 1)}
        return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(short(sha)))

    @stage_asset(SPEC, settings, specs,
                 metadata={"tokenizer_hash": configured_tokenizer_hash(tokenization)},
                 deps=[tokenizer])  # configured or trained, the tokenizer is in the lineage of every token
    def tokenized(context: dg.AssetExecutionContext, store: ObjectStore, deduplicated: LakeInput):
        """Token ids of every deduplicated document with the configured byte-level BPE tokenizer (GPT-2 by
        default, or the one the `tokenizer` asset trained), EOS appended as the document boundary: the list column
        is a flat token stream plus document offsets, uint16 ids when the vocabulary fits, else uint32.

        One work unit per upstream deduplicated part; the tokenizer's hash is part of each unit's identity. With
        `tokenized.min_tokens`, documents with fewer tokens (EOS not counted) are set aside as `too_few_tokens`
        under `rejected/tokenized/` (`llm-assets show rejected --stage tokenized`).
        """
        crawl, shard = partition_of(context)
        resolved, tok_hash = resolve_tokenizer(tokenization, store.lake())
        vocab_size = load_tokenizer(str(resolved.resolved_path())).get_vocab_size()
        units = []
        for source in deduplicated.parts:
            unit = unit_id("tokenized", code, source, tok_hash)
            units.append(TokenizeUnit(store=store.config(), settings=resolved, source=source, unit=unit,
                                      part=part_key("tokenized", crawl, shard, unit),
                                      rejected_part=part_key("tokenized", crawl, shard, unit, zone="rejected")
                                      if resolved.min_tokens else ""))
        lake = store.lake()

        def report(out: PartitionOutput) -> dict:
            parts = [u.part for u in out.units if u.part and u.rows_out]
            n_tokens = (lake.scan(parts).select("n_tokens").collect()["n_tokens"] if parts
                        else pl.Series([], dtype=pl.Int32))
            return {"tokens": int(n_tokens.sum() or 0),
                    "languages": table(languages_table(out.units)),
                    "tokens_chart": dg.MetadataValue.md(charts.histogram(
                        "tokens per document (EOS included)", n_tokens.to_list(), "tokens per document"))}

        yield from run_stage(context, tokenize_documents, units, code, schema(vocab_size).names, settings.runner,
                             metadata={"tokenizer_sha": tok_hash}, inputs={"deduplicated": deduplicated.data_version},
                             report=report)

    return dg.Definitions(assets=[tokenizer, tokenized])
