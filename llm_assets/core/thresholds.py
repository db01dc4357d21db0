"""The thresholds that applied to one language, as a filtered build recorded them: what `why`, `trace` and `show`
print for a document, whatever the settings say today.

A filtered partition's manifest records, for each language it held, the fingerprint of that language's thresholds
(`FilteredSettings.language_fingerprint`); the values behind the fingerprint are kept once in the lake under
`thresholds/<language>/<fingerprint>.json` (`keys.thresholds_key`), written before the manifest that names them is
committed. Stop-word lists are long: they stay out of the manifests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_assets.core.filtered import FilteredSettings
from llm_assets.core.keys import thresholds_key
from llm_assets.core.lake import CommitConflict, Lake

CHAIN, TABLE, OVERRIDE = "chain", "fineweb2", "override"  # where a threshold that applied comes from
# A block's settings that are no threshold: machine paths, and the language block's keep list (every language's;
# whether this one is kept is `keeps`).
NOT_THRESHOLDS = frozenset({"block", "enabled", "index_path", "model_path", "languages"})


@dataclass(frozen=True)
class AppliedThresholds:
    """Per enabled block, the values a document in `language` was filtered with, and where each one that is not the
    chain's came from (`fineweb2`: the language table's row; `override`: the settings')."""

    language: str
    fingerprint: str
    keeps: bool  # whether the language block kept the language
    values: Mapping[str, Mapping[str, Any]]  # block -> field -> value (JSON)
    sources: Mapping[str, Mapping[str, str]]  # block -> field -> source, for the fields not the chain's

    @classmethod
    def of(cls, settings: FilteredSettings, language: str) -> AppliedThresholds:
        values = {block: {k: v for k, v in fields.items() if k not in NOT_THRESHOLDS}
                  for block, fields in settings.applied_thresholds(language).items()}
        sources = {block: {k: s for k, s in fields.items() if k in values.get(block, {})}
                   for block, fields in settings.threshold_sources(language).items()}
        return cls(language, settings.language_fingerprint(language), settings.keeps(language), values,
                   {block: fields for block, fields in sources.items() if fields})

    def block(self, name: str) -> tuple[dict[str, Any], dict[str, str]]:
        """One block's values and the source of each (`chain` where neither the table nor an override set it)."""
        values = dict(self.values.get(name, {}))
        return values, {k: self.sources.get(name, {}).get(k, CHAIN) for k in values}

    def changed(self, other: AppliedThresholds) -> list[tuple[str, str]]:
        """The (block, field) pairs whose value or source differs in `other`, in block order."""
        out = []
        for name in dict.fromkeys([*self.values, *other.values]):
            (mine, mine_from), (theirs, theirs_from) = self.block(name), other.block(name)
            out += [(name, k) for k in dict.fromkeys([*mine, *theirs])
                    if mine.get(k) != theirs.get(k) or mine_from.get(k) != theirs_from.get(k)]
        return out

    def to_json(self) -> dict[str, Any]:
        # the values as [name, ...] pairs: the lake writes objects with sorted keys, and they print in chain order
        return {"language": self.language, "fingerprint": self.fingerprint, "keeps": self.keeps,
                "values": [[block, [[k, v] for k, v in fields.items()]] for block, fields in self.values.items()],
                "sources": self.sources}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AppliedThresholds:
        return cls(data["language"], data["fingerprint"], bool(data["keeps"]),
                   {block: dict(fields) for block, fields in data["values"]}, data["sources"])


def record_thresholds(lake: Lake, settings: FilteredSettings, languages: Iterable[str]) -> list[str]:
    """Keep the thresholds of each language in the lake, once per (language, fingerprint): one HEAD per language
    already recorded. -> the keys written."""
    written = []
    for language in languages:
        applied = AppliedThresholds.of(settings, language)
        key = thresholds_key(language, applied.fingerprint)
        if lake.exists(key):
            continue
        try:
            lake.put_json(key, applied.to_json(), if_absent=True)
        except CommitConflict:  # another partition's commit recorded the same thresholds first
            continue
        written.append(key)
    return written


def recorded_thresholds(lake: Lake, language: str, fingerprint: str) -> AppliedThresholds | None:
    """The thresholds a build recorded for the language under that fingerprint; None if it recorded none (a
    partition committed before builds recorded them)."""
    data = lake.get_json(thresholds_key(language, fingerprint))
    return AppliedThresholds.from_json(data) if data is not None else None
