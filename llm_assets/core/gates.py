"""Quality gates: a partition whose filtering departs from its crawl's own distribution is held back.

A broken extractor, a crawl segment of parked domains or a mis-sharded language shows up as one shard whose filter
drop rates or language mix are unlike its siblings'. The gate compares each partition with the other partitions of
its crawl that passed (the reference): a block's drop rate against the reference's median rate, the language mix
of the kept documents against the reference's pooled mix (total variation distance). A block's rate is the share of
the documents its rules fail, measured on every document from the scores (`fails:<block>` counts): unlike the
cascade's drop counts, it does not depend on what the blocks before it dropped. A chain measuring `until_dropped`
measures a block only on the documents that reached it (`reached:<block>` counts): its rate is then the share of
those, compared only with partitions measured alike. Partitions committed before the scores existed give their drop
counts; they are compared only with each other. A partition outside the
bounds is committed but held back: downstream stages neither plan nor read it until it is rebuilt within bounds
(new data, or wider bounds).

Too few documents make rates noise: partitions under `min_documents` are neither judged nor used as reference, and
a partition is judged only against at least `min_reference` others.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import Field

from llm_assets.core.config import Section

LANGUAGE_COUNT = "language:"  # a filtered unit's counts: kept documents per language
FAILS = "fails:"  # a filtered unit's counts: documents whose measures fail a block's rules, per block
REACHED = "reached:"  # a filtered unit's counts, `filtered.measure: until_dropped`: documents a block measured


class GateSettings(Section):
    """Bounds of the filtered stage's quality gate (absolute differences of shares, 0..1)."""

    enabled: bool = Field(default=True, description="Judge each `filtered` partition; off, none is held back.")
    # |block's rate - reference median|: the share of documents failing its rules (its drop rate before the scores)
    max_drop_rate_shift: float = Field(default=0.25, ge=0, le=1, description=(
        "Share (0..1): a block's drop rate may differ this much from the crawl's median before the partition is held "
        "back."))
    drop_rate_shifts: dict[str, float] = Field(default={}, description=(
        "Per block name, its own bound instead of `max_drop_rate_shift`, e.g. `{language: 0.4}`."))
    max_language_shift: float = Field(default=0.3, ge=0, le=1, description=(
        "Total variation distance (0..1) of the language mix from the crawl's above which the partition is held back."))
    min_documents: int = Field(default=200, ge=1, description=(
        "Documents in: smaller partitions are neither judged nor used as reference."))
    min_reference: int = Field(default=3, ge=1, description=(
        "Other partitions of the crawl a partition is compared with, at least."))


@dataclass(frozen=True)
class Profile:
    """What the gate compares of one filtered partition: documents in, failed per block (or dropped, before the
    scores), kept per language."""

    partition: str
    rows_in: int
    dropped: Mapping[str, int]  # block -> documents whose measures fail its rules (`scored`), or it dropped
    languages: Mapping[str, int]  # language -> documents kept
    scored: bool = False  # `dropped` counts every document failing the block, from the scores
    # block -> documents it measured, where the chain measured until_dropped (empty: every document in)
    reached: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, partition: str, rows_in: int, dropped: Mapping[str, int], counts: Mapping[str, int]) -> Profile:
        """From a partition's unit counts (`fails:<block>`, `language:<code>`), or, for a partition committed
        before the scores, its drops by `block/reason`."""
        blocks = {k.removeprefix(FAILS): n for k, n in counts.items() if k.startswith(FAILS)}
        scored = bool(blocks)
        if not scored:
            for key, n in dropped.items():
                block = key.split("/", 1)[0]
                blocks[block] = blocks.get(block, 0) + n
        languages = {k.removeprefix(LANGUAGE_COUNT): n for k, n in counts.items() if k.startswith(LANGUAGE_COUNT)}
        reached = {k.removeprefix(REACHED): n for k, n in counts.items() if k.startswith(REACHED)}
        return cls(partition, rows_in, blocks, languages, scored, reached)

    def drop_rate(self, block: str) -> float:
        """The share of the documents the block measured that its rules fail (or that it dropped)."""
        measured = self.reached.get(block, 0) if self.reached else self.rows_in
        return self.dropped.get(block, 0) / measured if measured else 0.0

    @property
    def measure(self) -> str:
        return ("fail rate of the documents that reached it" if self.reached else "fail rate") if self.scored \
            else "drop rate"

    def language_shares(self) -> dict[str, float]:
        kept = sum(self.languages.values())
        return {lang: n / kept for lang, n in self.languages.items()} if kept else {}


@dataclass(frozen=True)
class Finding:
    """One measure of the partition against its reference."""

    measure: str  # "fail rate: gopher_quality" ("drop rate" before the scores), "language mix"
    value: float
    reference: float
    shift: float
    bound: float

    @property
    def failed(self) -> bool:
        return self.shift > self.bound

    def __str__(self) -> str:
        return (f"{self.measure} {self.value:.3f} vs the crawl's {self.reference:.3f} (shift {self.shift:.3f} > "
                f"{self.bound:g})")


@dataclass(frozen=True)
class GateResult:
    judged: bool  # False: too few documents or reference partitions; the partition passes
    note: str
    reference: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]

    def held_back(self) -> str:
        """Why the partition is held back, "" when it passed."""
        return "; ".join(str(f) for f in self.failures)


def evaluate(profile: Profile, others: Iterable[Profile], blocks: Iterable[str], settings: GateSettings) -> GateResult:
    """The gate of one partition against the other partitions of its crawl that passed theirs."""
    if profile.rows_in < settings.min_documents:
        return GateResult(False, f"not judged: {profile.rows_in} documents in (< min_documents "
                                 f"{settings.min_documents})")
    reference = [p for p in others if p.partition != profile.partition and p.rows_in >= settings.min_documents
                 and p.measure == profile.measure]  # failure rates and drop rates are not alike
    if len(reference) < settings.min_reference:
        return GateResult(False, f"not judged: {len(reference)} other partitions of the crawl with at least "
                                 f"{settings.min_documents} documents (< min_reference {settings.min_reference})")
    findings = []
    for block in blocks:
        median = statistics.median(p.drop_rate(block) for p in reference)
        value = profile.drop_rate(block)
        bound = settings.drop_rate_shifts.get(block, settings.max_drop_rate_shift)
        findings.append(Finding(f"{profile.measure}: {block}", value, median, abs(value - median), bound))
    pooled: dict[str, int] = {}
    for p in reference:
        for lang, n in p.languages.items():
            pooled[lang] = pooled.get(lang, 0) + n
    mine, theirs = profile.language_shares(), Profile("", 0, {}, pooled).language_shares()
    if mine and theirs:
        distance = sum(abs(mine.get(k, 0.0) - theirs.get(k, 0.0)) for k in mine.keys() | theirs.keys()) / 2
        top = max(theirs, key=theirs.__getitem__)
        findings.append(Finding(f"language mix (share of {top})", mine.get(top, 0.0), theirs[top], distance,
                                settings.max_language_shift))
    names = ", ".join(p.partition for p in reference)
    return GateResult(True, f"judged against {len(reference)} partitions: {names}",
                      tuple(p.partition for p in reference), tuple(findings))
