"""The optional model-based quality filter: labelled JSON Lines read with bad lines quarantined, a deterministic
fastText classifier with held-out scores, the filter block, and the quality_classifier asset on a real store."""

import gzip
import json

import dagster as dg
import polars as pl
import pytest
import yaml
import zstandard

from llm_assets.core.filtered import filter_batch, with_quality_model
from llm_assets.core.filters import QualityModelFilter
from llm_assets.core.quality_model import LATEST, QualityTraining, load_model, positive_scores, read_examples, train
from llm_assets.settings import FilteredSettings
from llm_assets_support.corpus import shared_documents
from llm_assets_support.quality_labels import labelled, spam, wikitext_paragraphs
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import built

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
# More passes than fastText's default 5: a test set of 1,200 examples is tiny; small buckets keep the model small.
SETTINGS = QualityTraining(epoch=25, bucket=20_000)


def jsonl(rows: list) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode()


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    model = train(read_examples([("labels.jsonl", jsonl(labelled(1200)))], SETTINGS), SETTINGS)
    path = tmp_path_factory.mktemp("model") / "quality.bin"
    path.write_bytes(model.data)
    return path


def test_examples_come_from_plain_gzip_and_zstd_files():
    rows = labelled(20)
    files = [("a.jsonl", jsonl(rows[:6])), ("b.jsonl.gz", gzip.compress(jsonl(rows[6:12]))),
             ("c.jsonl.zst", zstandard.ZstdCompressor().compress(jsonl(rows[12:])))]
    examples = read_examples(files, SETTINGS)
    assert examples.texts == [r["text"] for r in rows] and examples.labels == [r["label"] for r in rows]
    assert not examples.quarantined


def test_bad_lines_are_quarantined_by_file_and_line_and_the_rest_still_read():
    lines = [{"text": "good text", "label": "hq"}, "{not json", {"text": "", "label": "hq"}, ["a", "list"],
             {"text": "no label"}, {"text": "two words", "label": "h q"}, "", {"text": "also good", "label": "lq"}]
    examples = read_examples([("labels/x.jsonl", jsonl(lines)), ("broken.gz", b"\x1f\x8b\x08\x00garbage")], SETTINGS)
    assert examples.texts == ["good text", "also good"]
    assert examples.quarantined == {"corrupt_json": 1, "missing_text": 2, "bad_label": 2,
                                    "unreadable_file": 1}
    assert examples.errors[:2] == ["labels/x.jsonl:2: corrupt_json", "labels/x.jsonl:3: missing_text"]
    assert examples.errors[-1].startswith("broken.gz:0: unreadable_file (")


@pytest.mark.corpus
def test_training_is_deterministic_and_scores_the_held_out_share():
    examples = read_examples([("labels.jsonl", jsonl(labelled(1200)))], SETTINGS)
    first, second = train(examples, SETTINGS), train(examples, SETTINGS)
    assert first.data == second.data and first.sha256 == second.sha256
    ev = first.evaluation
    assert ev.examples + first.train_examples == 1200 and 80 <= ev.examples <= 160  # about 10% by text hash
    assert ev.precision >= 0.9 and ev.recall >= 0.9 and ev.accuracy >= 0.9
    assert set(first.labels) == {"hq", "lq"}


@pytest.mark.parametrize("labels, message", [(["lq", "lq"], "no example is labelled 'hq'"),
                                             (["hq", "hq"], "needs two labels")])
def test_training_refuses_examples_that_cannot_make_a_classifier(labels, message):
    """The error names what is missing."""
    examples = read_examples([("l.jsonl", jsonl([{"text": f"text {i}", "label": lab}
                                                 for i, lab in enumerate(labels)]))], SETTINGS)
    with pytest.raises(ValueError, match=message):
        train(examples, SETTINGS)


@pytest.mark.corpus
def test_the_block_scores_every_document_and_drops_below_the_threshold(model_path):
    good, bad = wikitext_paragraphs()[-1], spam(wikitext_paragraphs()[-2], 1)  # neither was trained on
    df = pl.DataFrame({"text": [good, bad, "multi\nline\ntext with several words"]})
    block = QualityModelFilter(enabled=True, model_path=str(model_path), threshold=0.5)
    out, reasons = block.apply(df)
    scores = out["quality_score"].to_list()
    assert scores[0] >= 0.5 > scores[1] and all(0.0 <= s <= 1.0 for s in scores)
    assert reasons.to_list()[:2] == [None, "low_quality"]
    strict, reasons = QualityModelFilter(enabled=True, model_path=str(model_path), threshold=1.0).apply(df)
    assert reasons.null_count() == sum(s >= 1.0 for s in strict["quality_score"])


@pytest.mark.corpus
def test_the_stage_keeps_exactly_the_documents_scoring_at_least_the_threshold(model_path):
    docs = shared_documents()
    block = QualityModelFilter(enabled=True, model_path=str(model_path), threshold=0.5)
    without = FilteredSettings.default_with(language={"enabled": False}, pii={"enabled": False})
    kept, rejected = filter_batch(docs, without.replaced("quality_model", block))
    assert kept["quality_score"].min() >= 0.5
    low = rejected.filter(pl.col("filter") == "quality_model")
    assert (low["quality_score"] < 0.5).all() and set(low["reason"]) == {"low_quality"}
    # exactly the documents the rest of the chain keeps and the model scores low
    reached, _ = filter_batch(docs, without)
    scores = positive_scores(load_model(str(model_path)), reached["text"].to_list(), "hq")
    assert low.height == sum(s < 0.5 for s in scores) > 0 and kept.height == reached.height - low.height


def test_a_named_model_file_is_its_own_identity(model_path, lake):
    block = QualityModelFilter(enabled=True, model_path=str(model_path))
    settings, identity = with_quality_model(FilteredSettings.default_with(quality_model=block), lake)
    assert settings.block("quality_model").model_path == str(model_path) and len(identity) == 64
    assert with_quality_model(FilteredSettings(), lake) == (FilteredSettings(), "")
    with pytest.raises(ValueError, match="cannot read model_path /nonexistent.bin"):
        with_quality_model(FilteredSettings.default_with(
            quality_model=QualityModelFilter(enabled=True, model_path="/nonexistent.bin")), lake)


def test_quality_classifier_asset_trains_publishes_and_the_stage_uses_it(object_store, instance, tmp_path,
                                                                         monkeypatch):
    from llm_assets.settings import load_settings

    monkeypatch.setenv("LLM_ASSETS_MODEL_CACHE", str(tmp_path / "cache"))
    (quality_classifier,) = built("quality_classifier",
                                  settings=load_settings().model_copy(update={"quality_classifier": SETTINGS}))
    lake = object_store.lake()
    rows = labelled(1200)
    lake.put_bytes("labels/quality/part-0.jsonl.gz", gzip.compress(jsonl(rows[:600])))
    lake.put_bytes("labels/quality/part-1.jsonl", jsonl(rows[600:] + ["{broken"]))
    result = dg.materialize([quality_classifier], instance=instance, resources={"store": object_store})
    assert result.success
    (event,) = result.get_asset_materialization_events()
    meta = {k: v.value for k, v in event.materialization.metadata.items()}
    assert meta["files"] == 2 and meta["quarantined"] == 1
    assert "part-1.jsonl:601: corrupt_json" in meta["quarantined_lines"]
    assert meta["held_out_precision"] >= 0.9 and meta["held_out_recall"] >= 0.9
    assert event.materialization.tags["dagster/data_version"] == meta["model_sha256"][:20]
    assert lake.get_json(LATEST)["sha256"] == meta["model_sha256"]

    settings, identity = with_quality_model(FilteredSettings.default_with(quality_model={"enabled": True}), lake)
    assert identity == meta["model_sha256"]
    path = settings.block("quality_model").model_path
    assert path.startswith(str(tmp_path / "cache"))
    good = wikitext_paragraphs()[-1]
    assert positive_scores(load_model(path), [good], "hq")[0] >= 0.5


def test_the_stage_depends_on_the_classifier_only_when_it_uses_the_trained_model(tmp_path):
    from llm_assets.settings import Settings

    path = tmp_path / "settings.yaml"
    chain = FilteredSettings.default_with(quality_model={"enabled": True})
    path.write_text(yaml.safe_dump({"filtered": chain.model_dump(mode="json")}))
    (filtered,) = built("filtered", settings=Settings.from_file(path))
    lists = {"curation_scope"}  # the takedown and eval lists, as the versions of the partitions they touch
    assert {k.to_user_string() for k in filtered.dependency_keys} == {"documents", "quality_classifier"} | lists
    assert filtered.metadata_by_key[filtered.key]["filter_chain"].endswith("quality_model → pii → decontaminate")
    (filtered,) = built("filtered")
    assert {k.to_user_string() for k in filtered.dependency_keys} == {"documents"} | lists
