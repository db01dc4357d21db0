"""The quality classifier: a fastText model trained on the labelled examples dropped under `labels/quality/`."""

import time

from llm_assets import charts
from llm_assets.core.quality_model import LATEST, publish, read_examples, train
from llm_assets.core.stage_names import QUALITY_CLASSIFIER
from llm_assets.core.units import peak_rss_bytes
from llm_assets.core.versions import code_version, short
from llm_assets.registry import StageSpec
from llm_assets.report import MIB, Markdown, Report, Url
from llm_assets.stage import AssetStage, Materialized, Partition, StageFailure

STAGE_VERSION = "1"


def _published(lake, settings) -> dict | None:
    pointer = lake.get_json(LATEST)
    if pointer is None:
        return None
    return {"version": short(pointer["sha256"]), "train_examples": pointer.get("train_examples", 0)}


SPEC = StageSpec(QUALITY_CLASSIFIER, "model",
                 version=lambda s: code_version(STAGE_VERSION, s.quality_classifier.model_dump_json()),
                 facts=_published, group="models")


class QualityClassifier(AssetStage):
    """A fastText quality classifier (word bigrams, DCLM-style) trained on the labelled JSON Lines under
    `labels/quality/` in the bucket: one `{"text": ..., "label": "hq" | ...}` per line, gzip, zstd or plain.

    The model is stored under `models/quality_classifier/<sha256>.bin` and becomes the one the optional
    `quality_model` filter block uses (unless that block names its own file). A hash of each text holds out a
    share of the examples; the metadata reports held-out precision and recall at the threshold. Lines that are
    not a JSON object with a string text and label are quarantined and counted, named by file and line.
    """

    spec = SPEC
    kinds = frozenset({"fasttext", "s3"})

    def build(self, p: Partition) -> Materialized:
        start, lake, training = time.perf_counter(), p.lake, p.settings.quality_classifier
        keys = [o.key for o in lake.list(training.labels_prefix) if not o.key.endswith("/")]
        if not keys:
            raise StageFailure(f"no labelled JSON Lines under {lake.url(training.labels_prefix)}: drop files with "
                               f'one {{"{training.text_field}": ..., "{training.label_field}": ...}} per line there')
        examples = read_examples(((k, lake.get_bytes(k)) for k in keys), training)
        for error in examples.errors:
            p.log.warning(f"quarantined {error}")
        try:
            model = train(examples, training)
        except ValueError as e:
            raise StageFailure(f"quality_classifier: {e} (from {len(keys)} files under {training.labels_prefix})"
                               ) from e
        ev = model.evaluation
        record = {"files": len(keys), "train_examples": model.train_examples, "labels": model.labels,
                  "held_out": ev.__dict__ if ev else None}
        key = publish(lake, model, record)
        report: Report = {
            "model": Url(lake.url(key)),
            "model_sha256": model.sha256,
            "model_bytes": len(model.data),
            "files": len(keys),
            "train_examples": model.train_examples,
            "labels": Markdown(charts.hbars("training examples by label", list(model.labels),
                                            list(model.labels.values()), "examples")),
            "quarantined": sum(examples.quarantined.values()),
            "quarantined_by_reason": dict(examples.quarantined),
            "seconds": round(time.perf_counter() - start, 3),
            "peak_rss_mib": round(peak_rss_bytes() / MIB, 1),
        }
        if ev:
            report |= {"held_out_examples": ev.examples, "held_out_precision": ev.precision,
                       "held_out_recall": ev.recall, "held_out_accuracy": ev.accuracy,
                       "threshold": training.threshold}
        if examples.errors:
            report["quarantined_lines"] = Markdown("\n".join(f"- {e}" for e in examples.errors))
        return Materialized(report, short(model.sha256))


STAGES = [QualityClassifier()]
