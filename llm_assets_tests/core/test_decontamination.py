"""Decontamination on the GSM8K test set and the real shared documents: every planted passage is found, whole or
lightly edited; the untouched documents are not flagged."""

import json
import random

import polars as pl
import pytest
import regex

from llm_assets.core.decontamination import (
    EvalIndex,
    EvalSet,
    EvalSetSettings,
    SetText,
    benchmark_name,
    build_index,
    contamination,
    eval_texts,
    item_ngram,
    set_texts,
)
from llm_assets_support.corpus import lightly_edited, planted, shared_documents
from llm_assets_support.shared_data import shared

GSM8K = "openai-grade-school-math__gsm8k_test.jsonl"


@pytest.fixture(scope="module")
def gsm8k() -> list[str]:
    with open(shared("evals", GSM8K), "rb") as fh:
        return list(eval_texts(fh, ("question", "answer"), GSM8K))


@pytest.fixture(scope="module")
def index(gsm8k) -> EvalIndex:
    return build_index({"gsm8k": gsm8k})


@pytest.mark.corpus
def test_every_planted_passage_is_found_and_no_clean_document_is_flagged(gsm8k, index):
    rng = random.Random(7)
    docs = shared_documents()["text"].to_list()
    clean = contamination(index, pl.Series(docs))
    assert clean["contaminated_ngrams"].sum() == 0 and clean["benchmark"].null_count() == len(docs)

    hosts = [docs[rng.randrange(len(docs))] for _ in range(200)]
    passages = rng.sample(gsm8k, 200)
    whole = contamination(index, pl.Series(planted(hosts, passages, rng)))
    assert (whole["contaminated_ngrams"] > 0).all() and set(whole["benchmark"]) == {"gsm8k"}
    edited = contamination(index, pl.Series(planted(hosts, [lightly_edited(p, rng) for p in passages], rng)))
    assert (edited["contaminated_ngrams"] > 0).all()
    assert edited["contaminated_ngrams"].sum() < whole["contaminated_ngrams"].sum()  # the edits cost n-grams


def test_the_span_points_at_the_quoted_words(gsm8k, index):
    question = gsm8k[0].split("\n")[0]
    text = "Some unrelated words come first here. " + question + " And the end."
    (row,) = contamination(index, pl.Series([text])).to_dicts()
    assert row["benchmark"] == "gsm8k" and row["contaminated_ngrams"] > 0
    quoted = text[row["match_start"]:row["match_end"]]
    assert quoted in question and len(regex.findall(r"[^\s\pP\pS]+", quoted)) == index.ngram  # "Janet’s": 2 words


def test_a_short_item_is_one_ngram_and_counts_when_quoted_whole():
    index = build_index({"tiny": ["What is two plus two?"], "other": ["a b c d e f g h i j k l m n o"]})
    found = contamination(index, pl.Series(["Q: what is two plus two? A: four", "what is two plus three"]))
    assert found["benchmark"].to_list() == ["tiny", None]


def test_an_item_under_three_times_thirteen_words_is_indexed_in_eight_grams():
    assert [item_ngram(w, 13, 8) for w in (3, 8, 20, 38, 39, 200)] == [8, 8, 8, 8, 13, 13]
    index = build_index({"tiny": ["What is two plus two?"], "short": [SHORT_ITEM], "long": ["word " * 40]})
    assert index.lengths == (13, 8, 5)  # long, SHORT_ITEM's 20 words, and the tiny item whole


# a 20-word item, as short as the code benchmark's shortest: with one word in 15 changed no 13 words stay in a row
SHORT_ITEM = ("Write a function that returns the largest prime factor of a positive integer n greater than one and "
              "not prime")


def test_a_short_item_edited_one_word_in_ten_is_still_found():
    words = SHORT_ITEM.split()
    assert len(words) == 20
    edited = " ".join(["for" if i in (4, 13) else w for i, w in enumerate(words)])  # runs of 4, 8 and 6 words
    document = pl.Series([f"Exercise 4. {edited}. Hint: trial division is enough."])
    assert contamination(build_index({"code": [SHORT_ITEM]}), document)["benchmark"].to_list() == ["code"]
    thirteen = build_index({"code": [SHORT_ITEM]}, ngram=13, min_ngram=13)  # GPT-3's fixed 13-grams
    assert contamination(thirteen, document)["benchmark"].to_list() == [None]


def test_the_index_round_trips_and_costs_ten_bytes_per_ngram(index):
    again = EvalIndex.from_bytes(index.to_bytes())
    assert again.benchmarks == ("gsm8k",) and again.ngram == 13
    assert (again.hashes == index.hashes).all() and (again.owners == index.owners).all()
    assert index.nbytes == 10 * len(index.hashes)


def test_a_line_that_is_not_a_json_object_names_the_set_and_the_line():
    with pytest.raises(ValueError, match="eval set x.jsonl, line 2: not JSON"):
        list(eval_texts([b'{"question": "a"}', b"{broken"], ("question",), "x.jsonl"))
    assert list(eval_texts([b'{"question": "a", "answer": "b", "id": 3}', b""], ("question", "answer"), "x")) == [
        "a\nb"]


def test_the_block_drops_or_flags_with_the_benchmark_and_must_run_last(gsm8k, index, tmp_path):
    from llm_assets.core.filtered import FilteredSettings
    from llm_assets.core.filters import Decontaminate, PIIMasker, apply_filters

    path = tmp_path / "index.npz"
    path.write_bytes(index.to_bytes())
    docs = pl.DataFrame({"doc_id": ["clean", "quoting"],
                         "text": ["Nothing to see here at all.", "Intro. " + gsm8k[3] + " Outro."]})
    kept, dropped = apply_filters(docs, [Decontaminate(index_path=str(path))])
    assert kept["doc_id"].to_list() == ["clean"] and dropped["reason"].to_list() == ["contaminated"]
    assert json.loads(dropped["detail"][0])["benchmark"] == "gsm8k"
    kept, dropped = apply_filters(docs, [Decontaminate(index_path=str(path), mode="flag")])
    assert dropped.is_empty() and kept["contamination"].struct.field("benchmark").to_list() == [None, "gsm8k"]
    kept, _ = apply_filters(docs, [Decontaminate()])  # no eval set dropped: nothing to check against
    assert kept.height == 2
    with pytest.raises(ValueError, match="decontaminate must be the last"):
        FilteredSettings(chain=(Decontaminate(), PIIMasker()))


# A code benchmark in HumanEval's shape, its items written for this test: most of their lines have fewer than 3 words
# (or no words), so C4's line cleanup deletes them and no 13 words of an item stay in a row.
CODE_SET = [
    {"task_id": "Code/0", "prompt": 'def fizz_buzz_word(number):\n    """ Say FizzBuzz for a number\n    """\n',
     "canonical_solution": "    if number % 15 == 0:\n        return 'FizzBuzz'\n    if number % 3 == 0:\n"
                           "        return 'Fizz'\n    if number % 5 == 0:\n        return 'Buzz'\n"
                           "    return str(number)\n"},
    {"task_id": "Code/1", "prompt": 'def odd_squares(values):\n    """ Sum the squares of odd values\n    """\n',
     "canonical_solution": "    total=0\n    for value in values:\n        if value % 2:\n"
                           "            total += value * value\n        else:\n            continue\n"
                           "    return total\n"},
    {"task_id": "Code/2", "prompt": 'def first_repeated(items):\n    """ The first item seen twice, or None\n    """\n',
     "canonical_solution": "    seen=set()\n    for item in items:\n        if item in seen:\n            return item\n"
                           "        seen.add(item)\n    return None\n"},
]


def documents_frame(texts: list[str]) -> pl.DataFrame:
    from llm_assets.core import documents

    schema = pl.DataFrame(documents.SCHEMA.empty_table()).schema
    return pl.DataFrame([dict.fromkeys(schema) | {"doc_id": f"d{i}", "text": t, "url": "", "domain": "",
                                                  "source_key": "raw/C/code.jsonl"} for i, t in enumerate(texts)],
                        schema=schema)


def code_planted_documents() -> list[str]:
    """Real web text (the CCNet documents of the shared data), each with one code item planted between two of its
    lines."""
    import gzip

    rng = random.Random(1)
    out = []
    with gzip.open(shared("text", "dolma__cc_en_head-0091.ccnet.jsonl.gz"), "rt") as f:
        for i, line in enumerate(f):
            lines = json.loads(line)["text"].split("\n")
            item = CODE_SET[i % len(CODE_SET)]
            at = rng.randrange(len(lines) + 1)
            out.append("\n".join(lines[:at] + [(item["prompt"] + item["canonical_solution"]).rstrip("\n")]
                                 + lines[at:]))
    return out


def test_a_code_benchmark_is_found_in_the_text_as_extracted_after_c4_deleted_its_lines(tmp_path):
    """The default chain over real web text with code items planted: C4's line cleanup leaves no 13-gram of them in
    the final text, yet every planted document that passes the other blocks is dropped as contaminated, the match
    found in its text as extracted (or flagged, in `flag` mode)."""
    from llm_assets.core.filtered import FilteredSettings, filter_batch

    lines = [json.dumps(item).encode() for item in CODE_SET]
    # 13-grams for these short items too (8 by default): C4 must break every match for the check to matter
    index = build_index({"code": list(eval_texts(lines, ("prompt", "canonical_solution"), "code.jsonl"))},
                        min_ngram=13)
    (path := tmp_path / "index.npz").write_bytes(index.to_bytes())
    docs = documents_frame(code_planted_documents())
    assert (contamination(index, docs["text"])["contaminated_ngrams"] >= 13).all()

    unchecked, _ = filter_batch(docs, FilteredSettings.default_with(decontaminate={"enabled": False}))
    assert unchecked.height >= 5  # the planted documents that reach decontamination
    assert contamination(index, unchecked["text"])["contaminated_ngrams"].sum() == 0  # C4 broke every match

    kept, dropped = filter_batch(docs, FilteredSettings.default_with(decontaminate={"index_path": str(path)}))
    assert kept.height == 0
    contaminated = dropped.filter(pl.col("filter") == "decontaminate")
    assert sorted(contaminated["doc_id"]) == sorted(unchecked["doc_id"])
    assert set(contaminated["reason"]) == {"contaminated"}
    details = [json.loads(d) for d in contaminated["detail"]]
    assert {d["benchmark"] for d in details} == {"code"} and {d["text"] for d in details} == {"extracted"}
    # the span indexes the text as extracted: it holds the quoted code
    by_id = dict(zip(docs["doc_id"], docs["text"], strict=True))
    for doc_id, d in zip(contaminated["doc_id"], details, strict=True):
        assert any(by_id[doc_id][d["match_start"]:d["match_end"]] in item["prompt"] + item["canonical_solution"]
                   for item in CODE_SET)

    flagged, dropped = filter_batch(docs, FilteredSettings.default_with(
        decontaminate={"index_path": str(path), "mode": "flag"}))
    assert dropped.filter(pl.col("filter") == "decontaminate").is_empty()
    assert flagged["text"].to_list() == unchecked["text"].to_list()
    assert set(flagged["contamination"].struct.field("text")) == {"extracted"}


# --- eval set files --------------------------------------------------------------------------------------------

def test_an_eval_set_is_read_plain_gzip_or_zstd_as_json_lines_or_a_json_array():
    import gzip
    import io

    import zstandard

    lines = "".join(json.dumps(item) + "\n" for item in CODE_SET).encode()
    array = json.dumps(CODE_SET, indent=2).encode()
    expected = [item["prompt"] + "\n" + item["canonical_solution"] for item in CODE_SET]
    fields = ("prompt", "canonical_solution")
    for data in (lines, gzip.compress(lines), gzip.compress(lines[:100]) + gzip.compress(lines[100:]),
                 zstandard.ZstdCompressor().compress(lines), array, gzip.compress(array)):
        assert set_texts(io.BytesIO(data), fields, "evals/code") == SetText(expected, fields)
    assert set_texts(io.BytesIO(lines), ("prompt",), "evals/code").texts == [item["prompt"] for item in CODE_SET]
    every = set_texts(io.BytesIO(lines), (), "evals/code")  # no fields named: every string field, in item order
    assert every.fields == ("task_id", "prompt", "canonical_solution")
    assert every.texts == [item["task_id"] + "\n" + text for item, text in zip(CODE_SET, expected, strict=True)]


def test_an_eval_set_that_cannot_be_read_is_an_error_naming_it():
    import gzip
    import io

    lines = "".join(json.dumps(item) + "\n" for item in CODE_SET).encode()
    with pytest.raises(ValueError, match="eval set evals/code.jsonl.gz: cannot decompress"):
        set_texts(io.BytesIO(gzip.compress(lines)[:60]), ("prompt",), "evals/code.jsonl.gz")
    with pytest.raises(ValueError, match=r"eval set evals/code.jsonl: no item has a text field \(question, answer\)"):
        set_texts(io.BytesIO(lines), ("question", "answer"), "evals/code.jsonl")
    with pytest.raises(ValueError, match="eval set evals/a.json, item 2: not a JSON object"):
        set_texts(io.BytesIO(b'[{"question": "a"}, 3]'), ("question",), "evals/a.json")


def test_a_benchmark_is_named_by_its_key_without_suffixes_and_may_have_its_own_fields():
    names = {k: benchmark_name(k, "evals/") for k in (
        "evals/gsm8k_test.jsonl", "evals/humaneval.jsonl.gz", "evals/mbpp.json.zst", "evals/a.b.json",
        "evals/README.md", "evals/data.csv.gz", "evals/x.gz", "evals/.jsonl")}
    assert names == {"evals/gsm8k_test.jsonl": "gsm8k_test", "evals/humaneval.jsonl.gz": "humaneval",
                     "evals/mbpp.json.zst": "mbpp", "evals/a.b.json": "a.b", "evals/README.md": None,
                     "evals/data.csv.gz": None, "evals/x.gz": None, "evals/.jsonl": None}
    import yaml

    settings = EvalSetSettings.model_validate(  # as the README and settings.yaml write it
        {"sets": yaml.safe_load("[{name: humaneval, text_fields: [prompt, canonical_solution]}]")})
    assert settings.sets == (EvalSet(name="humaneval", text_fields=("prompt", "canonical_solution")),)
    assert settings.fields_of("humaneval") == ("prompt", "canonical_solution")
    assert settings.fields_of("gsm8k_test") == EvalSetSettings().text_fields == ()  # every string field


# --- on a real store -------------------------------------------------------------------------------------------

@pytest.fixture
def own_bucket(store_config, seaweed):
    """A bucket of its own: the eval sets dropped here change no other test's eval index."""
    import uuid

    from llm_assets.core.lake import Lake, StoreConfig
    from resources import ObjectStore, S3Endpoint

    cfg = StoreConfig(**{**store_config.__dict__, "bucket": f"evals-{uuid.uuid4().hex[:12]}"})
    lake = Lake(cfg)
    lake.s3.create_bucket(Bucket=cfg.bucket)
    return lake, ObjectStore(s3=S3Endpoint(endpoint_url=cfg.endpoint, region_name=cfg.region,
                                           aws_access_key_id=seaweed.access_key,
                                           aws_secret_access_key=seaweed.secret_key), bucket=cfg.bucket)


def test_compressed_eval_sets_are_read_every_other_key_is_listed_and_a_code_set_is_found_after_c4(
        own_bucket, store_env, instance, crawl, monkeypatch, capsys):
    """A code benchmark dropped as `evals/humaneval.jsonl.gz` (its fields named in `evals.sets`) and GSM8K items as
    zstd are read; a README, a second copy of a set and an empty file are listed with the reason in the index's
    metadata, its log and `llm-assets status`. Through the real stages, the planted code items are dropped as
    contaminated although C4's line cleanup removed them from the final text."""
    import gzip

    import dagster as dg
    import zstandard

    from llm_assets import cli
    from llm_assets.core.inventory import shard_of
    from llm_assets.core.lake import manifest_key
    from llm_assets.platform.partitions import crawl_shard_key
    from llm_assets.settings import load_settings
    from llm_assets_tests.conftest import built
    from resources import LakeIOManager

    lake, store = own_bucket
    code = "".join(json.dumps(item) + "\n" for item in CODE_SET).encode()
    with open(shared("evals", GSM8K), "rb") as fh:
        gsm8k = b"".join(fh.readlines()[:50])
    lake.put_bytes("evals/humaneval.jsonl.gz", gzip.compress(code))
    lake.put_bytes("evals/gsm8k_head.jsonl.zst", zstandard.ZstdCompressor().compress(gsm8k))
    lake.put_bytes("evals/README.md", b"# what the sets are\n")
    lake.put_bytes("evals/gsm8k_head.jsonl.zst.bak", b"x")
    lake.put_bytes("evals/humaneval.jsonl.zst", zstandard.ZstdCompressor().compress(code))  # a second copy
    lake.put_bytes("evals/empty.jsonl", b"")
    unused = {"evals/README.md": "not an eval set", "evals/gsm8k_head.jsonl.zst.bak": "not an eval set",
              "evals/humaneval.jsonl.zst": "benchmark humaneval is read from evals/humaneval.jsonl.gz",
              "evals/empty.jsonl": "empty file"}
    base = load_settings()
    settings = base.model_copy(update={"evals": base.evals.model_copy(update={"sets": (
        EvalSet(name="humaneval", text_fields=("prompt", "canonical_solution")),), "min_ngram": 13})})  # as above
    resources = {"store": store, "lake_io_manager": LakeIOManager(store=store)}

    result = dg.materialize(built("eval_index", settings=settings), instance=instance, resources=resources)
    (m,) = [e.materialization for e in result.get_asset_materialization_events()]
    assert m.metadata["benchmarks"].value == ["gsm8k_head", "humaneval"]
    listed = {u["key"]: u["reason"] for u in m.metadata["unused_keys"].value}
    assert set(listed) == set(unused) and all(listed[k].startswith(r) for k, r in unused.items())
    logged = " ".join(e.user_message for e in instance.all_logs(result.run_id))
    assert all(f"{k} is not used as an eval set" in logged for k in unused)
    # the fields each set was indexed from: its own as `evals.sets` names them, else every string field
    assert "eval set humaneval: indexed fields prompt, canonical_solution" in logged
    assert "eval set gsm8k_head: indexed fields question, answer" in logged
    assert m.metadata["fields"].value == {"gsm8k_head": ["question", "answer"],
                                          "humaneval": ["prompt", "canonical_solution"]}

    monkeypatch.setenv("LLM_ASSETS_BUCKET", lake.bucket)
    assert cli.main(["status", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["unused_eval_keys"]
    assert printed["count"] == 4 and {u["key"]: u["reason"] for u in printed["keys"]} == listed
    assert cli.main(["status"]) == 0
    text = capsys.readouterr().out
    assert "4 keys under evals/ not used as eval sets:" in text
    assert all(f"{k!r}: {r}" in text for k, r in listed.items())

    planted = code_planted_documents()
    name = next(n for i in range(10_000) if shard_of(f"raw/{crawl}/{(n := f'code-{i}.jsonl')}",
                                                    settings.shards) == "0000")
    lake.put_bytes(f"raw/{crawl}/{name}", "".join(json.dumps({"id": f"p{i}", "text": t}) + "\n"
                                                 for i, t in enumerate(planted)).encode())
    instance.add_dynamic_partitions("crawl", [crawl])
    assert dg.materialize(built("raw_files", "documents", "filtered", settings=settings), instance=instance,
                          partition_key=crawl_shard_key(crawl, "0000"), resources=resources).success
    manifest = lake.get_json(manifest_key("filtered", crawl, "0000"))
    parts = [u["rejected_part"] for u in manifest["units"] if u.get("rejected_part")]
    rejected = lake.scan(parts).collect()
    contaminated = rejected.filter(pl.col("reason") == "contaminated")
    assert contaminated.height >= 5 and rejected.height - contaminated.height <= 5  # the others: Gopher's rules
    assert {json.loads(d)["text"] for d in contaminated["detail"]} == {"extracted"}
    assert {json.loads(d)["benchmark"] for d in contaminated["detail"]} == {"humaneval"}
    assert sum(u["rows_out"] for u in manifest["units"]) == 0
