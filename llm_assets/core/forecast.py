"""What a rebuild will cost before it runs: the stale plan's partitions, priced at the rates the ledger measured.

Each stage's rates come from its ledger rows (`Rates.from_ledger`): CPU-seconds, wall-seconds and output bytes as a
line against input bytes (per byte and per unit), S3 requests per unit; a stage with no history yet takes
`DEFAULT_RATES`.
A planned partition's input bytes are, in order of preference:

- the raw files' sizes, for the stages that read raw files (`raw_files`, `documents`, `image_text_pairs`): listed
  now, mapped to shards as the raw inventory maps them, plus any hypothetical file (`extra_raw_bytes`);
- its own last build's bytes in, when it is rebuilt with the same inputs (code or thresholds changed, a failed run),
  scaled by how much its inputs grow or shrink when they are rebuilt too;
- the bytes its inputs hold (committed, or as forecast when they are rebuilt), for a partition never built, times
  what the stage read per byte its inputs wrote where it ran before (`Estimator.read_per_written`: its rates are per
  byte its units read, and a unit reads more than its input parts hold).

Only the units that will run are counted where the planner knows which: the raw readers redo only new or changed
files (a unit's id hashes the file's key and ETag), `filtered` redoes only the units that held a language whose
thresholds changed, or, after a takedown, whose part holds a requested document, and a shard stage fed part by part
(`signatures`, `deduplicated`, `tokenized`, ...) redoes only the units of the upstream parts that are rewritten.
Where it does not know: `deduplicated` is assumed to keep the units of unchanged parts when its crawl's clusters are
rebuilt for new inputs (their removals may change too: an under-count), and to redo every unit when the clusters'
own code changed. Crawl-level stages scale their last build's ledger rows (every pass, which the manifest does not
list) by their inputs' total bytes, or take that total and one unit per input part when never built.

Wall time assumes a stage's units spread evenly over the runner's slots (pool workers or the cluster's threads) and
nothing else shares them; a run's start-up and the run queue's limits are not in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

import polars as pl

from llm_assets.core.documents import shares_of
from llm_assets.core.filtered import languages_held
from llm_assets.core.inventory import is_folder_marker, rejection, shard_of
from llm_assets.core.keys import CRAWL_LEVEL_SHARD, PartitionRef, parse_raw_key, split_partition
from llm_assets.core.ledger import CostSettings, cost_of, read_ledger
from llm_assets.core.partition import Manifest, read_manifest
from llm_assets.core.takedowns import TakedownRequest, load_takedowns, requests_in
from llm_assets.core.units import UnitResult

if TYPE_CHECKING:
    from llm_assets.core.lake import Lake

Basis = Literal["ledger", "default"]
RAW_STAGES = ("raw_files", "documents", "image_text_pairs")  # their units read the raw files themselves
SPLIT_STAGES = ("documents",)  # a large WARC/ARC file is several units (`documents.shares_of`)
FORECAST_TAG = "llm_assets/forecast"  # one tag: a run shows it as one chip


@dataclass(frozen=True)
class Rate:
    """A stage's costs as a line over its units: a part per input byte and a part per unit (start-up, models
    loaded, manifests and parts opened: what dominates small units, and all there is for a stage whose units record
    no bytes read, such as `crawl_stats` counting rows through Polars' scans)."""

    cpu_s_per_byte: float
    wall_s_per_unit: float
    out_per_in: float  # bytes written per byte read
    requests_per_unit: float
    basis: Basis = "default"
    cpu_s_per_unit: float = 0.0
    out_per_unit: float = 0.0
    wall_s_per_byte: float = 0.0

    def cpu_s(self, input_bytes: int, units: int) -> float:
        return input_bytes * self.cpu_s_per_byte + units * self.cpu_s_per_unit

    def wall_s(self, input_bytes: int, units: int) -> float:
        """Of the units together, one after the other."""
        return input_bytes * self.wall_s_per_byte + units * self.wall_s_per_unit

    def bytes_out(self, input_bytes: int, units: int) -> int:
        return round(input_bytes * self.out_per_in + units * self.out_per_unit)


def line(x: pl.Series, y: pl.Series) -> tuple[float, float]:
    """(per x, per row) of the least-squares line through the rows, neither negative: y = a·x + b."""
    n, sx, sy = len(x), float(x.sum()), float(y.sum())
    mx, my = sx / n, sy / n
    var = float(((x - mx) ** 2).sum())
    a = float(((x - mx) * (y - my)).sum()) / var if var > 0 else (sy / sx if sx > 0 else 0.0)
    b = my - a * mx if var > 0 else (0.0 if sx > 0 else my)
    if a < 0:
        return 0.0, my
    if b < 0:
        return (sy / sx if sx > 0 else 0.0), 0.0
    return a, b


# Before any history: each stage's rates on a crawl of real size, `make bench-crawl` (benchmarks/results/crawl.md,
# "Per stage", 2026-11-29, commit 8fc5408: 1.04 GB of WARC files in 50 files, 107,455 pages, 400 units a stage):
# CPU-s and bytes out per byte in, wall-s and requests per unit, from that table's sums. crawl_stats and cost record
# no bytes in (they read rows and the ledger): theirs are per byte of their inputs' output, and per unit. They were
# 3-18× higher than the round figures before them (enriched 18×, duplicate_clusters 17×, documents 2.7×), which is
# why a first forecast fell far short; `make bench-forecast` judges them on the shared WARCs, which they were not
# taken from ("first crawl, from the default rates").
DEFAULT_RATE = Rate(cpu_s_per_byte=1e-6, wall_s_per_unit=2.0, out_per_in=0.5, requests_per_unit=6)
DEFAULT_RATES: dict[str, Rate] = {
    "raw_files": Rate(6.2e-9, 1.0, 1.4e-5, 2),
    "documents": Rate(2.7e-6, 8.2, 0.10, 6),
    "image_text_pairs": Rate(3.4e-7, 7.3, 0.007, 2),
    "filtered": Rate(3.3e-6, 1.3, 0.25, 6),
    "signatures": Rate(1.0e-6, 0.2, 0.48, 6),
    "crawl_stats": Rate(2.3e-7, 0.5, 0.0, 1, out_per_unit=7_200),
    "duplicate_clusters": Rate(8.3e-7, 0.1, 0.08, 10),
    "deduplicated": Rate(6.3e-7, 0.2, 0.41, 5),
    "tokenized": Rate(7.7e-7, 0.2, 0.40, 4),
    "enriched": Rate(1.8e-5, 2.4, 0.20, 4),
    "release": Rate(2e-7, 2.0, 1.0, 20),
    "cost": Rate(0.0, 1.0, 0.0, 55, cpu_s_per_unit=1.9, out_per_unit=6_000),
}


@dataclass(frozen=True)
class Rates:
    """Each stage's rates: measured (the ledger) or `DEFAULT_RATES`."""

    by_stage: Mapping[str, Rate] = field(default_factory=dict)

    @classmethod
    def from_ledger(cls, ledger: pl.DataFrame) -> Rates:
        """Per asset, a line through its ledger rows (one per unit that ran): CPU-s, wall-s and bytes out against
        bytes in (per byte and per unit), and requests per unit."""
        def rate(rows: pl.DataFrame) -> Rate:
            x = rows["bytes_in"].cast(pl.Float64)
            (cpu_b, cpu_u), (wall_b, wall_u), (out_b, out_u) = (
                line(x, rows[c].cast(pl.Float64)) for c in ("cpu_s", "wall_s", "bytes_out"))
            return Rate(cpu_s_per_byte=cpu_b, wall_s_per_unit=wall_u, out_per_in=out_b,
                        requests_per_unit=float(rows["requests"].sum()) / rows.height, basis="ledger",
                        cpu_s_per_unit=cpu_u, out_per_unit=out_u, wall_s_per_byte=wall_b)

        return cls({str(asset): rate(rows) for (asset,), rows in ledger.group_by("asset")})

    def of(self, asset: str) -> Rate:
        return self.by_stage.get(asset) or DEFAULT_RATES.get(asset, DEFAULT_RATE)


@dataclass(frozen=True)
class StageForecast:
    """One stage's planned partitions, or the whole plan's ("total")."""

    asset: str
    partitions: int
    units: int
    input_bytes: int
    cpu_hours: float
    wall_hours: float
    bytes_out: int
    requests: int
    cost: float
    basis: str  # "ledger" | "default" ("ledger+default" in the total when both)


@dataclass(frozen=True)
class Forecast:
    stages: list[StageForecast]
    runner: str  # "pool of 2 workers", "dask cluster of 8 threads", ...
    slots: int
    currency: str = "USD"
    priced: bool = False

    @property
    def total(self) -> StageForecast:
        s = self.stages
        bases = sorted({x.basis for x in s})
        return StageForecast("total", sum(x.partitions for x in s), sum(x.units for x in s),
                             sum(x.input_bytes for x in s), sum(x.cpu_hours for x in s), sum(x.wall_hours for x in s),
                             sum(x.bytes_out for x in s), sum(x.requests for x in s), sum(x.cost for x in s),
                             "+".join(bases) if bases else "ledger")

    def render(self) -> str:
        head = (f"{'stage':<20}{'partitions':>11}{'units':>8}{'input':>11}{'CPU-hours':>11}{'wall-hours':>11}"
                f"{'output':>11}{'requests':>10}{'cost':>12}  basis")
        lines = [f"forecast on the {self.runner} (wall time: units spread over {self.slots} slots)", head,
                 "-" * len(head)]
        for s in [*self.stages, self.total]:
            cost = f"{s.cost:.2f} {self.currency}" if self.priced else "unpriced"
            lines.append(f"{s.asset:<20}{s.partitions:>11}{s.units:>8}{human_bytes(s.input_bytes):>11}"
                         f"{hours(s.cpu_hours):>11}{hours(s.wall_hours):>11}{human_bytes(s.bytes_out):>11}"
                         f"{s.requests:>10}{cost:>12}  {s.basis}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"runner": self.runner, "slots": self.slots, "currency": self.currency, "priced": self.priced,
                "stages": [asdict(s) for s in self.stages], "total": asdict(self.total)}

    def to_tags(self) -> dict[str, str]:
        """The forecast's total as the one tag a backfill's runs carry (Dagster tag values are strings)."""
        t = self.total
        cost = f" · {t.cost:.2f} {self.currency}" if self.priced else ""
        return {FORECAST_TAG: f"{hours(t.cpu_hours)} CPU-h · {hours(t.wall_hours)} h wall · "
                              f"{human_bytes(t.bytes_out)} out · {t.requests} requests{cost} ({t.basis})"}


def hours(h: float) -> str:
    """Two decimals from an hour on, else six: a small rebuild's seconds still show (0.000139 is half a second)."""
    return f"{h:.2f}" if h >= 1 else f"{h:.6f}"


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


class PlannedLike(Protocol):
    """A planned partition (`llm_assets.tools.stale.Planned`)."""

    @property
    def asset(self) -> str: ...

    @property
    def partition(self) -> str: ...

    @property
    def cause(self) -> str: ...


class StageLike(Protocol):
    """What the forecast needs of a stage's spec (`llm_assets.registry.StageSpec`)."""

    @property
    def name(self) -> str: ...

    @property
    def level(self) -> str: ...

    @property
    def inputs(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Work:
    """A planned partition's forecast: the units that run and their bytes, and what the partition holds after."""

    units: int
    input_bytes: int
    bytes_out: int  # written by the units that run
    total_out: int  # the partition's bytes after the rebuild (reused units' included): what its readers read
    total_units: int  # its units after the rebuild: a stage fed part by part has one unit per part
    cpu_scale: float = 1.0  # how this partition's units ran against its stage's line, so far (1: no history)


@dataclass(frozen=True)
class RawFile:
    key: str
    size: int
    etag: str


class Estimator:
    """One forecast pass over the lake: manifests and raw listings read once."""

    def __init__(self, lake: Lake, shards: int, rates: Rates, stages: Mapping[str, StageLike],
                 extra_raw_bytes: Mapping[str, int] | None, ledger: pl.DataFrame):
        self.lake, self.shards, self.rates, self.stages, self.ledger = lake, shards, rates, stages, ledger
        self.extra = dict(extra_raw_bytes or {})
        self.work: dict[tuple[str, str, str], Work] = {}
        self.causes: dict[tuple[str, str, str], str] = {}
        self._takedowns: list[TakedownRequest] | None = None
        self._manifests: dict[tuple[str, str, str], Manifest | None] = {}
        self._raw: dict[str, dict[str, list[RawFile]]] = {}
        self._read_per_written: dict[tuple[str, tuple[str, ...]], float] = {}

    def manifest(self, asset: str, crawl: str, shard: str) -> Manifest | None:
        key = (asset, crawl, shard)
        if key not in self._manifests:
            self._manifests[key] = read_manifest(self.lake, asset, crawl, shard)
        return self._manifests[key]

    def raw_files(self, crawl: str, shard: str) -> list[RawFile]:
        """The partition's raw files now, plus the hypothetical ones of `extra_raw_bytes` (keys under raw/)."""
        if crawl not in self._raw:
            by_shard: dict[str, list[RawFile]] = {}
            extra = {k: v for k, v in self.extra.items() if k.startswith(f"raw/{crawl}/")}
            for obj in self.lake.list(f"raw/{crawl}/"):
                if not is_folder_marker(obj) and rejection(obj) is None and obj.key not in extra:
                    by_shard.setdefault(shard_of(obj.key, self.shards), []).append(RawFile(obj.key, obj.size, obj.etag))
            for key, size in extra.items():
                by_shard.setdefault(shard_of(key, self.shards), []).append(RawFile(key, size, "hypothetical"))
            self._raw[crawl] = by_shard
        return self._raw[crawl].get(shard, [])

    def inventory(self, crawl: str, shard: str) -> set[tuple[str, str]]:
        """(key, ETag) of the files the committed raw inventory listed: what the raw readers were built from."""
        built = self.manifest("raw_files", crawl, shard)
        if built is None or not built.parts:
            return set()
        frame = self.lake.scan(built.parts).select("key", "etag").collect()
        return set(frame.iter_rows())

    # -- what a partition holds, before and after the rebuild ---------------------------------------------------

    def out_before(self, asset: str, crawl: str, shard: str) -> int:
        built = self.manifest(asset, crawl, shard)
        return sum(u.bytes_out for u in built.units) if built else 0

    def out_after(self, asset: str, crawl: str, shard: str) -> int:
        w = self.work.get((asset, crawl, shard))
        return w.total_out if w else self.out_before(asset, crawl, shard)

    def units_after(self, asset: str, crawl: str, shard: str) -> int:
        w = self.work.get((asset, crawl, shard))
        if w:
            return w.total_units
        built = self.manifest(asset, crawl, shard)
        return sum(1 for u in built.units if u.part) if built else 0

    def read_per_written(self, asset: str, inputs: Sequence[str]) -> float:
        """Bytes the stage's units read (their `bytes_in`, which its rates are per) per byte its inputs wrote, in the
        crawls where both ran; 1.0 without that history. A unit reads more than its input parts hold (footers and
        row groups in separate requests, columns read again for the report): 1.2-2.0x here, so the bytes of a
        never-built partition's inputs, taken as they are, priced enriched at a quarter of its cost at size."""
        key = (asset, tuple(inputs))
        if key not in self._read_per_written:
            mine = self.ledger.filter(pl.col("asset") == asset)
            theirs = self.ledger.filter(pl.col("asset").is_in(list(inputs)) & pl.col("crawl").is_in(mine["crawl"]))
            read = int(mine.filter(pl.col("crawl").is_in(theirs["crawl"]))["bytes_in"].sum())
            written = int(theirs["bytes_out"].sum())
            self._read_per_written[key] = read / written if read > 0 and written > 0 else 1.0
        return self._read_per_written[key]

    # -- the rules ------------------------------------------------------------------------------------------------

    def last_commit(self, asset: str, crawl: str, shard: str) -> pl.DataFrame:
        """The ledger rows of the partition's latest commit: the units that ran then."""
        rows = self.ledger.filter((pl.col("asset") == asset) & (pl.col("crawl") == crawl) & (pl.col("shard") == shard))
        return rows.filter(pl.col("committed_at") == rows["committed_at"].max()) if rows.height else rows

    def cpu_scale(self, rate: Rate, asset: str, crawl: str, shard: str) -> float:
        """The partition's CPU so far against what its stage's line gives for the same units: its pages, languages
        and documents are its own (a rebuild with the same inputs repeats them)."""
        rows = self.ledger.filter((pl.col("asset") == asset) & (pl.col("crawl") == crawl) & (pl.col("shard") == shard))
        line_s = sum(rate.cpu_s(b, 1) for b in rows["bytes_in"].to_list())
        return float(rows["cpu_s"].sum()) / line_s if rows.height and line_s > 0 else 1.0

    def with_takedowns(self, units: Sequence[UnitResult]) -> list[UnitResult]:
        """The units whose part holds a document some takedown request names (through the parts' id indexes)."""
        if self._takedowns is None:
            self._takedowns = load_takedowns(self.lake)
        return [u for u in units if requests_in(self.lake, u.source, self._takedowns)]

    def estimate(self, asset: str, crawl: str, shard: str, cause: str) -> Work:
        self.causes[(asset, crawl, shard)] = cause
        rate = self.rates.of(asset)
        level = self.stages[asset].level if asset in self.stages else "shard"
        if asset in RAW_STAGES:
            work = self.raw_stage(asset, crawl, shard, cause, rate)
        elif level == "crawl":
            work = self.crawl_stage(asset, crawl, rate)
        elif level == "shard":
            work = self.shard_stage(asset, crawl, shard, cause, rate)
        else:
            work = self.whole_stage(asset, rate)
        if rate.basis == "ledger" and asset not in RAW_STAGES:  # a raw file is new work: its stage's line only
            work = replace(work, cpu_scale=self.cpu_scale(rate, asset, crawl, shard))
        self.work[(asset, crawl, shard)] = work
        return work

    def raw_stage(self, asset: str, crawl: str, shard: str, cause: str, rate: Rate) -> Work:
        files = self.raw_files(crawl, shard)
        built = self.manifest(asset, crawl, shard)
        if asset == "raw_files":  # one unit lists the files; it reads their sizes, not their bytes
            size = sum(f.size for f in files)
            return Work(1, size, rate.bytes_out(size, 1), rate.bytes_out(size, 1), 1)
        if built is not None and _same_code(cause):
            listed = self.inventory(crawl, shard)
            run = [f for f in files if (f.key, f.etag) not in listed]
            kept = {f.key for f in files} - {f.key for f in run}
            kept_out = sum(u.bytes_out for u in built.units if u.source in kept)
        else:
            run, kept_out = files, 0
        units = sum(shares_of(f.key, f.size) if asset in SPLIT_STAGES else 1 for f in run)
        size = sum(f.size for f in run)
        out = rate.bytes_out(size, units)
        total_units = sum(shares_of(f.key, f.size) if asset in SPLIT_STAGES else 1 for f in files)
        return Work(units, size, out, kept_out + out, total_units)

    def shard_stage(self, asset: str, crawl: str, shard: str, cause: str, rate: Rate) -> Work:
        spec = self.stages[asset]
        shard_inputs = [i for i in spec.inputs if self._level(i) == "shard"]
        crawl_inputs = [i for i in spec.inputs if self._level(i) == "crawl"]
        built = self.manifest(asset, crawl, shard)
        # A crawl-level input rebuilt for its own code changes every unit; rebuilt for new inputs, the units of the
        # parts that did not change are assumed to keep what they read from it (deduplicated: their removals).
        crawl_changed = any(not _same_code(self.causes.get((i, crawl, CRAWL_LEVEL_SHARD), UPSTREAM))
                            for i in crawl_inputs
                            if (i, crawl, CRAWL_LEVEL_SHARD) in self.work)
        fed = [self.work[(i, crawl, shard)] for i in shard_inputs if (i, crawl, shard) in self.work]
        if built is None:
            size = round(sum(self.out_after(i, crawl, shard) for i in shard_inputs)
                         * self.read_per_written(asset, shard_inputs))
            units = sum(self.units_after(i, crawl, shard) for i in shard_inputs) or (1 if size else 0)
            out = rate.bytes_out(size, units)
            return Work(units, size, out, out, units)
        before_out = sum(u.bytes_out for u in built.units)
        # What this partition writes per byte it reads is its own more than its stage's (its languages, its pages)
        own = _ratio(before_out, sum(u.bytes_in for u in built.units))

        def written(size: int, units: int) -> int:
            return round(size * own) if own is not None else rate.bytes_out(size, units)

        if cause.startswith(LANGUAGES) or (cause == TAKEDOWNS and asset == "filtered"):
            if cause == TAKEDOWNS:  # only the parts that hold a requested document
                run = self.with_takedowns(built.units)
            else:  # only the units that held a language whose thresholds changed
                changed = set(cause.partition("(")[2].rstrip(")").replace(" ", "").split(","))
                run = [u for u in built.units if changed & set(languages_held(u.counts))]
            size = sum(u.bytes_in for u in run)
            out = written(size, len(run))
            return Work(len(run), size, out, before_out - sum(u.bytes_out for u in run) + out, len(built.units))
        ratio = _ratio(sum(self.out_after(i, crawl, shard) for i in shard_inputs),
                       sum(self.out_before(i, crawl, shard) for i in shard_inputs))
        if not crawl_changed and _same_code(cause) and (fed or cause.endswith(" is rebuilt)")):
            # Fed part by part: only the units of rewritten upstream parts run; the others are reused. What they
            # read and write follows the upstream bytes rewritten, as the partition's last build followed its input.
            fed_out, units = sum(w.bytes_out for w in fed), sum(w.units for w in fed)
            upstream = sum(self.out_before(i, crawl, shard) for i in shard_inputs)
            if upstream > 0:
                share = fed_out / upstream
                size, out = round(sum(u.bytes_in for u in built.units) * share), round(before_out * share)
            else:
                size = round(fed_out * self.read_per_written(asset, shard_inputs))
                out = written(size, units)
            return Work(units, size, out, round(before_out * ratio) if ratio is not None else out,
                        sum(self.units_after(i, crawl, shard) for i in shard_inputs))
        # Every unit runs again, on inputs that may have grown or shrunk.
        size = round(sum(u.bytes_in for u in built.units) * (1.0 if ratio is None else ratio))
        units = max(1, round(len(built.units) * (1.0 if ratio is None else ratio))) if built.units else 0
        out = round(before_out * (1.0 if ratio is None else ratio))
        return Work(units, size, out, out, units)

    def crawl_stage(self, asset: str, crawl: str, rate: Rate) -> Work:
        spec = self.stages[asset]
        shards = [f"{i:04d}" for i in range(self.shards)]
        after = sum(self.out_after(i, crawl, s) for i in spec.inputs for s in shards)
        before = sum(self.out_before(i, crawl, s) for i in spec.inputs for s in shards)
        built = self.manifest(asset, crawl, CRAWL_LEVEL_SHARD)
        ratio = _ratio(after, before)
        last = self.last_commit(asset, crawl, CRAWL_LEVEL_SHARD)
        if built is not None and last.height and (ratio is not None or not after):
            # its last build's units (its passes: the ledger has them all, the manifest only what it keeps)
            size = round(int(last["bytes_in"].sum()) * (1.0 if ratio is None else ratio))
            own = _ratio(int(last["bytes_out"].sum()), int(last["bytes_in"].sum()))
            out = round(size * own) if own is not None else rate.bytes_out(size, last.height)
            return Work(last.height, size, out, out, last.height)
        # never built: its inputs' bytes, as many units as its commits ran (else one per input part)
        size = round(after * self.read_per_written(asset, spec.inputs))
        commits = self.ledger.filter(pl.col("asset") == asset).group_by("crawl", "committed_at").len()
        per_commit = sorted(commits["len"].to_list())
        units = (per_commit[len(per_commit) // 2] if per_commit
                 else sum(self.units_after(i, crawl, s) for i in spec.inputs for s in shards) or 1)
        out = rate.bytes_out(size, units)
        return Work(units, size, out, out, units)

    def whole_stage(self, asset: str, rate: Rate) -> Work:
        """An unpartitioned asset (the release): every crawl's committed or rebuilt input."""
        spec = self.stages.get(asset)
        size = 0
        for name in spec.inputs if spec else ():
            for folder in self.lake.folders(f"lake/{name}/"):
                crawl = folder.removeprefix("crawl=")
                size += sum(self.out_after(name, crawl, f"{i:04d}") for i in range(self.shards))
        size = round(size * self.read_per_written(asset, spec.inputs if spec else ()))
        out = rate.bytes_out(size, 1)
        return Work(1, size, out, out, 1)

    def _level(self, asset: str) -> str:
        return self.stages[asset].level if asset in self.stages else "shard"


# The planner's causes (`llm_assets.registry`, which sits above the core): the one naming languages, and those
# after which no unit of the previous build is reused.
LANGUAGES = "language thresholds changed"
RAW = "new or changed raw data"
UPSTREAM = "upstream data changed"
TAKEDOWNS = f"{UPSTREAM} (takedowns)"
_OTHER_CODE = ("code or config changed", "failed", "missing")


def _same_code(cause: str) -> bool:
    """Whether units of the previous build can be reused: not when the code changed, nor after a failed run or
    for a partition never built."""
    return not cause.startswith(_OTHER_CODE)


def _ratio(after: int, before: int) -> float | None:
    return after / before if before > 0 else None


def forecast(lake: Lake, settings, planned: Sequence[PlannedLike], extra_raw_bytes: Mapping[str, int] | None = None,
             *, stages: Sequence[StageLike], ledger: pl.DataFrame | None = None,
             slots: int | None = None, runner: str | None = None) -> Forecast:
    """The cost of rebuilding `planned` (the stale plan, in build order) under `settings` (`llm_assets.settings.
    Settings`). `extra_raw_bytes`: raw key -> size of files not dropped yet, as if they were. `ledger`: the rows to
    take the rates from (default: the lake's ledger); `stages`: the registry (`llm_assets.stages.SPECS`);
    `slots`/`runner`: the runner's parallelism and its name (default: from `settings.runner`, a Dask cluster
    counted as `runner.workers` slots: `llm_assets.platform.runners.runner_slots` asks the cluster)."""
    if ledger is None:
        ledger = read_ledger(lake, assets={p.asset for p in planned} | (set(RAW_STAGES) if extra_raw_bytes else set()))
    rates = Rates.from_ledger(ledger)
    if slots is None or runner is None:
        slots, runner = default_slots(settings.runner)
    est = Estimator(lake, settings.shards, rates, {s.name: s for s in stages}, extra_raw_bytes, ledger)
    per_stage: dict[str, list[Work]] = {}
    for asset, partition, cause in with_raw_drops(planned, extra_raw_bytes or {}, settings.shards, stages):
        crawl, shard = split_partition(partition)
        per_stage.setdefault(asset, []).append(est.estimate(asset, crawl, shard, cause))
    cost: CostSettings = settings.cost
    out = []
    for asset, works in per_stage.items():
        rate = rates.of(asset)
        units, size, written = sum(w.units for w in works), sum(w.input_bytes for w in works), sum(
            w.bytes_out for w in works)
        cpu_s = sum(rate.cpu_s(w.input_bytes, w.units) * w.cpu_scale for w in works)
        requests = round(units * rate.requests_per_unit)
        wall_s = sum(rate.wall_s(w.input_bytes, w.units) / min(slots, w.units) for w in works if w.units)
        out.append(StageForecast(asset, len(works), units, size, cpu_s / 3600, wall_s / 3600, written, requests,
                                 cost_of(cpu_s, written, requests, cost), rate.basis))
    return Forecast(out, runner, slots, cost.currency, cost.priced)


def with_raw_drops(planned: Sequence[PlannedLike], extra_raw_bytes: Mapping[str, int], shards: int,
                   stages: Sequence[StageLike]) -> list[tuple[str, str, str]]:
    """(asset, partition, cause) of the plan, in build order, with the raw stages' partitions that hypothetical raw
    files would add (the stages after them must be in the plan already, as a settings change puts them)."""
    rows = [(p.asset, p.partition, p.cause) for p in planned]
    have = {(a, p) for a, p, _ in rows}
    for key in extra_raw_bytes:
        crawl = parse_raw_key(key)[0]  # InvalidKey names a key the raw stage would refuse
        partition = PartitionRef(crawl, shard_of(key, shards)).key
        rows += [(a, partition, RAW) for a in RAW_STAGES if (a, partition) not in have]
        have |= {(a, partition) for a in RAW_STAGES}
    order = [s.name for s in stages]
    return sorted(rows, key=lambda r: (order.index(r[0]) if r[0] in order else len(order), r[1]))


def default_slots(runner) -> tuple[int, str]:
    """(slots, description) of a runner's settings without asking a cluster."""
    return runner.slots()


def with_actuals(fc: Forecast, actual: pl.DataFrame) -> pl.DataFrame:
    """Forecast against what ran, per stage: `actual` is the ledger rows the rebuild appended. Wall time is counted
    as the forecast counts it: per partition, its units' wall seconds spread over the runner's slots. Errors are
    forecast / actual - 1 (null where nothing ran)."""
    per_partition = actual.group_by("asset", "crawl", "shard").agg(
        units=pl.len(), cpu_s=pl.col("cpu_s").sum(), wall_s=pl.col("wall_s").sum() / pl.min_horizontal(
            pl.len(), pl.lit(fc.slots)), bytes_out=pl.col("bytes_out").sum(), requests=pl.col("requests").sum())
    got = per_partition.group_by("asset").agg(pl.col("units", "cpu_s", "wall_s", "bytes_out", "requests").sum())
    by = {r["asset"]: r for r in got.iter_rows(named=True)}
    rows = []
    for s in fc.stages:
        a = by.get(s.asset, {})
        rows.append({"asset": s.asset, "basis": s.basis, "units_forecast": s.units, "units_actual": a.get("units", 0),
                     "cpu_s_forecast": s.cpu_hours * 3600, "cpu_s_actual": float(a.get("cpu_s", 0.0)),
                     "wall_s_forecast": s.wall_hours * 3600, "wall_s_actual": float(a.get("wall_s", 0.0)),
                     "bytes_out_forecast": s.bytes_out, "bytes_out_actual": a.get("bytes_out", 0),
                     "requests_forecast": s.requests, "requests_actual": a.get("requests", 0)})
    frame = pl.DataFrame(rows, schema_overrides={"cpu_s_actual": pl.Float64, "wall_s_actual": pl.Float64,
                                                 "cpu_s_forecast": pl.Float64, "wall_s_forecast": pl.Float64})
    return frame.with_columns(*(relative_error(f"{m}_forecast", f"{m}_actual").alias(f"{m}_error")
                                for m in ("cpu_s", "wall_s", "bytes_out", "requests")))


def relative_error(forecast_col: str, actual_col: str) -> pl.Expr:
    return (pl.when(pl.col(actual_col) > 0)
            .then(pl.col(forecast_col) / pl.col(actual_col) - 1).otherwise(None))


__all__ = ["DEFAULT_RATE", "DEFAULT_RATES", "Forecast", "Rate", "Rates", "StageForecast", "forecast", "with_actuals"]
