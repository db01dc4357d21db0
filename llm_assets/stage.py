"""What a stage is: an object with a fixed, Dagster-free surface, which `llm_assets.dagster.adapter` turns into an
asset.

Three shapes, after what a partition of the stage is:

- `ShardStage`: one crawl × shard partition, built by work units on the runner. It says which units the partition
  needs (by default one per part of its single input, `unit`), the function that runs one (`work`), its columns,
  what its manifest records it was built from, its own report, and for a gated stage its quality gate. The adapter
  adds the rest: reused units, the runner, the common report (rows in and out, drops by reason, bytes, seconds,
  peak memory), the row-accounting and schema checks, a run of many partitions.
- `CrawlStage`: one partition per crawl over every shard of its inputs: `build` returns the output and its report.
- `AssetStage`: unpartitioned (a model, a release): `build` returns its report and data version.

A stage's report is plain values (Dagster shows dicts and lists as JSON), `Markdown` (charts, funnels), `Url`, or
a Polars frame (a table): `llm_assets.report`. A stage fails a build by raising `StageFailure`, whose message is
all a reader needs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from llm_assets.core.inventory import shards_with_files
from llm_assets.core.partition import FrameOutput, LakeInput, MissingPartition, PartitionOutput, read_manifest
from llm_assets.registry import StageSpec
from llm_assets.report import Report

if TYPE_CHECKING:
    from pydantic import BaseModel

    from llm_assets.core.gates import GateResult
    from llm_assets.core.lake import Lake
    from llm_assets.core.units import UnitResult, WorkUnit
    from llm_assets.settings import Settings


class StageFailure(Exception):
    """A build that cannot go on for a reason its message says (no committed input, a bad list line): the run fails
    with that message, and nothing is committed."""


class Log(Protocol):
    def info(self, msg: str) -> None: ...
    def warning(self, msg: str) -> None: ...
    def error(self, msg: str) -> None: ...


@dataclass
class Partition:
    """What a stage reads while it builds one partition: where it is, under which settings, its inputs (committed
    partitions of the assets its spec names), the run's options, and where to log. `shard` is the crawl-level shard
    for a crawl stage and empty for an unpartitioned one; `registered_crawls()` asks the instance for every crawl."""

    crawl: str
    shard: str
    settings: Settings
    lake: Lake
    specs: Sequence[StageSpec]
    log: Log
    registered_crawls: Callable[[], list[str]]
    run_id: str = ""
    inputs: Mapping[str, LakeInput] = field(default_factory=dict)
    options: Any = None  # the stage's `Options`, as the run's config set them
    notes: dict[str, Any] = field(default_factory=dict)  # what `units` learned, for the partition's report

    def crawls(self, configured: Sequence[str] = ()) -> list[str]:
        """The crawls a setting names, or every registered crawl when it names none."""
        return list(configured) or sorted(self.registered_crawls())

    def require_every_shard(self, spec: StageSpec, read: LakeInput) -> None:
        """A stage over every shard of the crawl is built over every one, or not at all: a shard that has raw files
        but no committed partition of `read` (its run failed, or never ran) fails it before anything is committed,
        naming those shards. A shard without raw files has nothing to build, and one a quality gate holds back, on
        this input or upstream, keeps what downstream was built from: neither is missing."""
        present = {m.shard for m in read.manifests if m.crawl == self.crawl}
        missing = [s for s in sorted(shards_with_files(read.lake, self.crawl, self.settings.shards) - present)
                   if not _held_back(read.lake, read.asset, self.crawl, s, self.specs)]
        if missing:
            s = "s" * (len(missing) > 1)
            raise MissingPartition(
                f"{spec.name} {self.crawl}: {read.asset} has no committed partition for shard{s} {', '.join(missing)} "
                f"of crawl {self.crawl}, which {'have' if s else 'has'} raw files; {spec.name} reads every shard, so "
                "nothing is committed until each is built (`llm-assets stale` lists them, `llm-assets backfill "
                "--stale` builds them)")


def _held_back(lake: Lake, asset: str, crawl: str, shard: str, registry: Sequence[StageSpec]) -> bool:
    specs = {s.name: s for s in registry}
    chain, seen = [asset], set()
    while chain:
        name = chain.pop()
        if name in seen or specs[name].level != "shard":
            continue
        seen.add(name)
        if (m := read_manifest(lake, name, crawl, shard)) is not None and m.held_back:
            return True
        chain += specs[name].inputs
    return False


class Stage:
    """One asset of the code location. Its class docstring is the catalog's description."""

    spec: ClassVar[StageSpec]
    kinds: ClassVar[frozenset[str]] = frozenset({"s3", "parquet"})

    def deps(self, settings: Settings, specs: Sequence[StageSpec]) -> list[str]:
        """Assets it follows in lineage beyond the inputs it reads (a model whose hash is in its units), among the
        stages of the code location."""
        return []

    def definition_metadata(self, settings: Settings) -> Report:
        """What the catalog shows of the asset under these settings, before any build."""
        return {}


class ShardStage(Stage):
    """A crawl × shard stage built by work units (see the module's docstring)."""

    work: ClassVar[Callable[..., UnitResult]]  # runs one unit, on the runner: a module-level function
    row_accounting: ClassVar[bool] = True  # rows in = rows out + rows dropped, per unit (not: one page, many pairs)
    Options: ClassVar[type[BaseModel] | None] = None  # what a run may choose, in its config

    def columns(self, p: Partition) -> Sequence[str]:
        raise NotImplementedError

    def units(self, p: Partition) -> Sequence[WorkUnit]:
        """The partition's units: by default one per part of the stage's input."""
        (only,) = self.spec.inputs
        return [self.unit(p, source) for source in p.inputs[only].parts]

    def unit(self, p: Partition, source: str) -> WorkUnit:
        """The unit of one upstream part, for the default `units`."""
        raise NotImplementedError(f"{self.spec.name}: a shard stage gives `units` or `unit`")

    def recorded_inputs(self, p: Partition) -> dict[str, str]:
        """What the manifest records the partition was built from (the stale planner compares it): by default each
        input's data version."""
        return {name: read.data_version for name, read in p.inputs.items()}

    def outcome_inputs(self, p: Partition, out: PartitionOutput) -> dict[str, str]:
        """What it was built from that only the units' outcome tells."""
        return {}

    def metadata(self, p: Partition) -> Report:
        """What the partition is built with, reported before its units run."""
        return {}

    def report(self, p: Partition, out: PartitionOutput) -> Report:
        """The stage's own report of a built partition, beside the common one."""
        return {}

    def gated(self, settings: Settings) -> bool:
        """Whether a quality gate judges each partition (`gate`)."""
        return False

    def gate(self, p: Partition, out: PartitionOutput) -> GateResult:
        raise NotImplementedError


@dataclass
class Built:
    """A crawl stage's build: what is committed, and its report."""

    output: PartitionOutput | FrameOutput
    report: Report


class CrawlStage(Stage):
    """One partition per crawl, reading every committed shard of the crawl of each input (see the module's
    docstring). In the `fan_in` pool unless `fan_in` is off: these stages hold the most memory and move the most
    lake bytes, and two at once would compete for both."""

    fan_in: ClassVar[bool] = True

    def build(self, p: Partition) -> Built:
        raise NotImplementedError


@dataclass
class Materialized:
    """An unpartitioned stage's build: its report and data version."""

    report: Report
    data_version: str


class AssetStage(Stage):
    """An unpartitioned stage, reading every partition of its inputs (see the module's docstring)."""

    fan_in: ClassVar[bool] = False

    def build(self, p: Partition) -> Materialized:
        raise NotImplementedError
