"""Languages as data: one row per label of the language identifier (fastText lid.176), with the thresholds FineWeb-2
filters that language with, read from the generated `fineweb2.json` (see its `source`; regenerate with
`python -m llm_assets.core.languages.generate`).

A row's `overrides` are block name -> {field: value} in the chain's own terms (`language.threshold`,
`gopher_quality.stop_words`, ...): the settings' chain gives every value, a row replaces some for its language, and
the settings' per-language `overrides` come last (`FilteredSettings.chain_for`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from llm_assets.core.versions import digest

TABLE = Path(__file__).with_name("fineweb2.json")
# FineWeb-2's minimum language scores re-derived for lid.176 (method, sample and figures inside; written by
# `python -m benchmarks.lid_calibration`)
CALIBRATION = Path(__file__).with_name("lid176.json")
UNKNOWN = "und"  # the language of a document in a script the identifier does not know (BCP 47's "undetermined")


@dataclass(frozen=True)
class Language:
    code: str  # the identifier's label: "de", "zh", "als"
    name: str
    fineweb2: str | None  # FineWeb-2's config, "deu_Latn"; None: the chain's own values (English: FineWeb's)
    script: str  # ISO 15924: Latn, Cyrl, Hani, Jpan, Hang, ...
    word_tokenizer: str  # datatrove's for the language: "spacy:fr", "indicnlp:hi", "kiwi", ... (`segment`)
    overrides: Mapping[str, Mapping[str, Any]]  # block name -> {field: value}; shared: not to be changed

    def __hash__(self) -> int:
        return hash(self.code)


@cache
def _raw() -> tuple[bytes, dict]:
    data = TABLE.read_bytes()
    return data, json.loads(data)


@cache
def language_table() -> Mapping[str, Language]:
    """Every label of the language identifier, by label."""
    rows = _raw()[1]["languages"]
    return MappingProxyType({
        code: Language(code, r["name"], r["fineweb2"], r["script"], r["word_tokenizer"], r["overrides"])
        for code, r in rows.items()
    })


@cache
def lid176_thresholds() -> Mapping[str, float]:
    """Language -> its minimum lid.176 score, re-derived from FineWeb-2's (`CALIBRATION`); only the languages of
    the calibration sample."""
    rows = json.loads(CALIBRATION.read_text())["languages"]
    return MappingProxyType({code: r["threshold"] for code, r in rows.items()})


def table_version() -> str:
    """A hash of the table's bytes."""
    return digest(_raw()[0].decode())


def known_scripts() -> frozenset[str]:
    """The scripts (ISO 15924) of the languages the identifier knows."""
    return frozenset(lang.script for lang in language_table().values())


__all__ = ["CALIBRATION", "Language", "UNKNOWN", "known_scripts", "language_table", "lid176_thresholds",
           "table_version"]
