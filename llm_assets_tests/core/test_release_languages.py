"""A release of some languages: a token budget per language, or weights sharing the release's tokens. The mixture
its manifest records is what its sequences hold: the tokens of each language counted in the .bin through the
provenance, and every piece checked against its document's tokens. Synthetic tokenized parts on the test store."""

from __future__ import annotations

import io

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from llm_assets.core.indexed import IndexedDataset
from llm_assets.core.release import ReleaseSettings, build_release, document_rank, provenance_keys, release_shards
from llm_assets.core.units import InProcessRunner

EOS, VOCAB, CONTEXT = 50256, 50257, 128
# documents per language (a language's documents are 5 to 400 tokens long)
PLANTED = {"en": 60, "de": 40, "ja": 30, "fr": 10}


def tokenized_parts(lake, crawl: str) -> tuple[list[dict], dict[str, tuple[str, np.ndarray]]]:
    """Two shards of tokenized parts holding documents of four languages, mixed. -> the partitions as the release
    asset lists them, and every document: doc_id -> (language, tokens)."""
    rng = np.random.default_rng(5)
    languages = [lang for lang, n in PLANTED.items() for _ in range(n)]
    rng.shuffle(languages)
    docs: dict[str, tuple[str, np.ndarray]] = {}
    partitions = []
    for s, shard in enumerate(("0000", "0001")):
        parts = []
        for p in range(2):
            chunk = languages[(2 * s + p) * len(languages) // 4:(2 * s + p + 1) * len(languages) // 4]
            ids = [f"{crawl}/{shard}/{p}/{i}" for i in range(len(chunk))]
            tokens = [np.append(rng.integers(0, EOS, rng.integers(4, 400)), EOS) for _ in chunk]
            docs |= {d: (lang, t) for d, lang, t in zip(ids, chunk, tokens, strict=True)}
            table = pa.table({"doc_id": ids, "url": [f"https://example.com/{d}" for d in ids],
                              "crawl": [crawl] * len(ids), "language": chunk,
                              "n_tokens": pa.array([len(t) for t in tokens], pa.int32()),
                              "tokens": pa.array([t.tolist() for t in tokens], pa.list_(pa.uint16()))})
            buf = io.BytesIO()
            pq.write_table(table, buf, row_group_size=16)
            key = f"lake/tokenized/crawl={crawl}/shard={shard}/part-{p}.parquet"
            lake.put_bytes(key, buf.getvalue())
            parts.append(key)
        partitions.append({"crawl": crawl, "shard": shard, "data_version": f"dv-{shard}", "code_version": "cv",
                           "rows": 0, "parts": parts})
    return partitions, docs


def build(lake, partitions, tmp_path, **config):
    settings = ReleaseSettings(**{"name": "mix", "include_text": False, "context": CONTEXT, "seed": 9, **config})
    workdir = tmp_path / f"work-{settings.fingerprint()}"
    workdir.mkdir()
    (workdir / "tokenizer.json").write_text("{}")
    return build_release(lake, settings, partitions, workdir / "tokenizer.json", "tok", EOS, VOCAB, {}, {}, workdir,
                         runner=InProcessRunner())


def released_tokens_by_language(lake, release, docs, folder) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Tokens of each language in the release's .bin (every piece checked against its document's tokens), and the
    documents of each language it holds."""
    tokens: dict[str, int] = {}
    held: dict[str, set[str]] = {}
    prov = pl.concat([lake.scan([k]).collect() for k in provenance_keys(release.prefix, release.manifest)])
    for shard in release_shards(release.manifest):
        for ext in ("bin", "idx"):
            (folder / f"{shard.data}.{ext}").write_bytes(lake.get_bytes(f"{release.prefix}{shard.data}.{ext}"))
        data = IndexedDataset(folder / shard.data)
        for p in prov.filter(pl.col("position").is_between(shard.first, shard.first + shard.sequences - 1)) \
                .iter_rows(named=True):
            language, doc = docs[p["doc_id"]]
            piece = data[p["position"] - shard.first][p["offset"]:p["offset"] + p["length"]]
            assert (piece == doc[p["start_in_doc"]:p["start_in_doc"] + p["length"]]).all()
            assert p["language"] == language  # provenance names the piece's language too
            tokens[language] = tokens.get(language, 0) + int(p["length"])
            held.setdefault(language, set()).add(p["doc_id"])
    return tokens, held


def whole(docs, held) -> None:
    for language, ids in held.items():
        assert all(docs[d][0] == language for d in ids)


def test_a_token_budget_per_language_takes_whole_documents_in_hash_order_and_leaves_the_rest_out(
        lake, crawl, tmp_path):
    partitions, docs = tokenized_parts(lake, crawl)
    available = {lang: sum(len(t) for d, (l2, t) in docs.items() if l2 == lang) for lang in PLANTED}
    budgets = {"en": available["en"] // 3, "de": 2_000, "ja": 10 * available["ja"]}  # ja: more than there is
    release = build(lake, partitions, tmp_path, languages={k: {"tokens": v} for k, v in budgets.items()})
    mix = release.manifest["mixture"]
    tokens, held = released_tokens_by_language(lake, release, docs, tmp_path)
    assert set(tokens) == {"en", "de", "ja"} and "fr" in mix["left_out"]  # fr is not listed: left out
    assert mix["left_out"]["fr"] == {"documents": PLANTED["fr"], "tokens": available["fr"]}
    for lang in ("en", "de", "ja"):
        row = mix["languages"][lang]
        assert row["tokens"] == tokens[lang] <= budgets[lang] and row["documents"] == len(held[lang])
        assert row["target"] == {"tokens": budgets[lang]} and row["available_tokens"] == available[lang]
    assert held["ja"] == {d for d, (lang, _) in docs.items() if lang == "ja"}  # all of it, no more: never repeated
    # the budget is filled by the language's documents in the order of the keyed hash, up to the first that overflows
    en = sorted((d for d, (lang, _) in docs.items() if lang == "en"),
                key=lambda d: int(document_rank([d], 9)[0]))
    running = np.cumsum([len(docs[d][1]) for d in en])
    taken = int((running <= budgets["en"]).sum())
    assert held["en"] == set(en[:taken]) and running[taken] > budgets["en"]
    assert sum(r["tokens"] for r in mix["languages"].values()) == release.manifest["counts"]["tokens_in"]
    assert release.manifest["counts"]["tokens_by_language"] == tokens
    assert "## Language mix" in release.card and "| de |" in release.card and "≤ 2,000 tokens" in release.card
    # another budget is another version
    assert build(lake, partitions, tmp_path, languages={"en": {"tokens": 1_000}}).version != release.version


def test_weights_share_the_largest_mixture_the_data_allows_or_the_release_tokens(lake, crawl, tmp_path):
    partitions, docs = tokenized_parts(lake, crawl)
    available = {lang: sum(len(t) for d, (l2, t) in docs.items() if l2 == lang) for lang in PLANTED}
    weights = {"en": 2.0, "de": 1.0, "fr": 1.0}
    largest = build(lake, partitions, tmp_path, languages={k: {"weight": w} for k, w in weights.items()})
    mix = largest.manifest["mixture"]
    # fr (10 documents) limits the mixture: the total is the largest at which it still has its quarter
    total = int(min(available[lang] / (w / 4) for lang, w in weights.items()))
    assert mix["total_tokens"] == total and int(total * 0.25) <= available["fr"]
    tokens, held = released_tokens_by_language(lake, largest, docs, tmp_path)
    whole(docs, held)
    assert set(tokens) == set(weights) and set(mix["left_out"]) == {"ja"}
    biggest = max(len(t) for _, t in docs.values())
    for lang, w in weights.items():
        row = mix["languages"][lang]
        assert row["tokens"] == tokens[lang] and row["target"]["tokens"] == int(total * w / 4)
        assert int(total * w / 4) - biggest < tokens[lang] <= int(total * w / 4)  # whole documents: short of one
        assert row["share"] == pytest.approx(tokens[lang] / sum(tokens.values()), abs=1e-6)
    # a total within what the data gives: each language its share of it
    capped = build(lake, partitions, tmp_path, languages={k: {"weight": w} for k, w in weights.items()}, tokens=4_000)
    tokens, _ = released_tokens_by_language(lake, capped, docs, tmp_path)
    assert capped.manifest["mixture"]["total_tokens"] == 4_000
    assert all(tokens[lang] <= int(4_000 * w / 4) for lang, w in weights.items())
    assert "weight 2 (50.0%: 2,000 tokens)" in capped.card


def test_a_release_without_languages_keeps_every_language_and_records_the_mix(lake, crawl, tmp_path):
    partitions, docs = tokenized_parts(lake, crawl)
    release = build(lake, partitions, tmp_path)
    mix = release.manifest["mixture"]
    assert {lang: row["documents"] for lang, row in mix["languages"].items()} == PLANTED and not mix["left_out"]
    assert all("target" not in row for row in mix["languages"].values())


@pytest.mark.core
@pytest.mark.parametrize("languages, tokens", [({"en": {"tokens": 5, "weight": 1}}, None), ({"en": {}}, None),
                                               ({"en": {"tokens": 5}, "de": {"weight": 1}}, None),
                                               ({"en": {"tokens": 5}}, 100)])
def test_a_mix_is_budgets_or_weights(languages, tokens):
    with pytest.raises(ValidationError):
        ReleaseSettings(languages=languages, tokens=tokens)
