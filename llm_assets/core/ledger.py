"""The cost ledger: what every work unit that ran cost, kept in the lake as a table that only grows.

Each commit of a partition appends one small Parquet object under `ledger/costs/`, one row per unit that ran for it
(units reused from the previous commit were paid for then, and are not charged again). Objects are never rewritten
or deleted (the vacuum only looks under `lake/`, `rejected/` and `releases/`), so the ledger is the history of what
the lake cost to build, per stage, crawl, shard and runner. `read_ledger` reads it back as one frame; the `cost` asset
and the backfill forecasts (`core.forecast`) are built from it.

Requests are the S3 HTTP requests a unit's process sent through the lake's boto3 client while the unit ran (every
attempt, multipart parts included); Parquet scans through Polars' own object store client are not counted.
"""

from __future__ import annotations

import io
import secrets
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass, fields

import polars as pl
import pyarrow as pa
from pydantic import Field

from llm_assets.core.config import Section
from llm_assets.core.keys import ASSET_RE, LEDGER_PREFIX, ledger_asset_prefix, ledger_key, ledger_prefix
from llm_assets.core.lake import Lake
from llm_assets.core.units import UnitResult


@dataclass(frozen=True)
class LedgerRow:
    """One work unit that ran in a commit: where it ran and what it cost."""

    asset: str
    crawl: str  # "" for an unpartitioned asset
    shard: str  # "" for an unpartitioned asset, "all" for a crawl-level one
    unit: str
    source: str
    runner: str
    committed_at: float  # epoch seconds of the commit that recorded it
    cpu_s: float
    wall_s: float
    peak_rss_bytes: int
    bytes_in: int
    bytes_out: int
    requests: int
    rows_in: int
    rows_out: int


_TYPES = {"str": pa.string(), "float": pa.float64(), "int": pa.int64()}  # the annotations, as strings
LEDGER_SCHEMA = pa.schema([pa.field(f.name, _TYPES[str(f.type)], nullable=False) for f in fields(LedgerRow)])
LEDGER_COLUMNS: tuple[str, ...] = tuple(LEDGER_SCHEMA.names)


def ledger_rows(asset: str, crawl: str, shard: str, units: Iterable[UnitResult], runner: str,
                committed_at: float, reused: Collection[str] = frozenset()) -> list[LedgerRow]:
    """The rows of a commit: its units that ran (not those in `reused`, taken from the previous commit)."""
    return [LedgerRow(asset=asset, crawl=crawl, shard=shard, unit=u.unit, source=u.source, runner=runner,
                      committed_at=committed_at, cpu_s=u.cpu_seconds, wall_s=u.seconds,
                      peak_rss_bytes=u.peak_rss_bytes, bytes_in=u.bytes_in, bytes_out=u.bytes_out,
                      requests=u.requests, rows_in=u.rows_in, rows_out=u.rows_out)
            for u in units if not (u.unit and u.unit in reused)]


def append_ledger(lake: Lake, rows: Sequence[LedgerRow]) -> str | None:
    """Write the rows of one commit as one new object; nothing when no unit ran. Returns its key. Every row is of
    the same asset and crawl (one commit's)."""
    if not rows:
        return None
    if len({(r.asset, r.crawl) for r in rows}) != 1:
        raise ValueError("one ledger object holds the rows of one commit: one asset and crawl")
    import pyarrow.parquet as pq

    first = rows[0]
    key = ledger_key(first.asset, first.crawl, max(r.committed_at for r in rows), secrets.token_hex(4))
    buffer = io.BytesIO()
    pq.write_table(_table(rows), buffer, compression="zstd")
    lake.put_bytes(key, buffer.getvalue())
    return key


def _table(rows: Iterable[LedgerRow]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(LEDGER_COLUMNS, astuple(r), strict=True)) for r in rows],
                                schema=LEDGER_SCHEMA)


def ledger_frame(rows: Iterable[LedgerRow]) -> pl.DataFrame:
    """Rows as a frame with the ledger's columns (what `read_ledger` returns)."""
    return pl.DataFrame(pl.from_arrow(_table(rows)))


def empty_ledger() -> pl.DataFrame:
    return ledger_frame([])


def ledger_keys(lake: Lake, assets: Collection[str] | None = None, crawls: Collection[str] | None = None
                ) -> list[str]:
    """The ledger's objects of these assets and crawls (None: all), oldest first within each asset and crawl.
    Filtering by crawl leaves unpartitioned assets out unless `""` is among `crawls`."""
    # a folder no commit could have written (not an asset name) is not the ledger's: skipped, not an error
    names = [n for n in lake.folders(LEDGER_PREFIX) if ASSET_RE.fullmatch(n)] if assets is None else sorted(assets)
    prefixes = [ledger_asset_prefix(a) for a in names] if crawls is None else [
        ledger_prefix(a, c) for a in names for c in sorted(crawls)]
    return [o.key for prefix in prefixes for o in lake.list(prefix) if o.key.endswith(".parquet")]


def read_ledger(lake: Lake, assets: Collection[str] | None = None, crawls: Collection[str] | None = None
                ) -> pl.DataFrame:
    """Every ledger row of these assets and crawls (None: all), with `LEDGER_COLUMNS`; empty with them when none."""
    return scan_ledger(lake, ledger_keys(lake, assets, crawls)).collect()


def scan_ledger(lake: Lake, keys: Sequence[str]) -> pl.LazyFrame:
    """A lazy frame over these ledger objects (`ledger_keys`), with `LEDGER_COLUMNS`."""
    if not keys:
        return empty_ledger().lazy()
    return lake.scan(list(keys)).select(LEDGER_COLUMNS)


class CostSettings(Section):
    """Prices, to turn the ledger into money (`cost:` in the settings). 0 = unpriced: the `cost` asset and the
    forecasts then show CPU-hours, bytes and requests, and no money."""

    core_hour: float = Field(default=0.0, ge=0, description=(
        "Price per CPU core-hour (a unit's CPU-second is 1/3600 of one); 0: unpriced."))
    gib_month: float = Field(default=0.0, ge=0, description="Price per GiB stored for a month; 0: unpriced.")
    thousand_requests: float = Field(default=0.0, ge=0, description="Price per 1,000 S3 requests; 0: unpriced.")
    currency: str = Field(default="USD", min_length=1, max_length=8, description="The prices' currency, as shown.")

    @property
    def priced(self) -> bool:
        return bool(self.core_hour or self.gib_month or self.thousand_requests)


def cost_of(cpu_s: float, bytes_stored: float, requests: float, settings: CostSettings) -> float:
    """Money for `cpu_s` CPU-seconds, `bytes_stored` bytes kept for one month and `requests` S3 requests."""
    return (cpu_s / 3600 * settings.core_hour + bytes_stored / 2**30 * settings.gib_month
            + requests / 1000 * settings.thousand_requests)


def stage_costs(ledger: pl.DataFrame, stored_bytes: Mapping[str, int], settings: CostSettings,
                order: Sequence[str] = ()) -> pl.DataFrame:
    """Per stage (`asset`), then a `total` row: units charged, CPU- and wall-hours, the highest peak memory, bytes
    read and written, requests, rows (documents) read, CPU-hours per million of them, the bytes the stage keeps
    committed now (`stored_bytes`, by asset), and, when `settings` prices anything, money: CPU, a month of storage,
    requests, total. Stages in `order` first, in that order."""
    rank = {name: i for i, name in enumerate(order)}
    names = sorted({*ledger["asset"].unique().to_list(), *stored_bytes}, key=lambda a: (rank.get(a, len(rank)), a))
    sums = ledger.group_by("asset").agg(
        units=pl.len(), cpu_s=pl.col("cpu_s").sum(), wall_s=pl.col("wall_s").sum(),
        peak_rss_bytes=pl.col("peak_rss_bytes").max(), bytes_in=pl.col("bytes_in").sum(),
        bytes_out=pl.col("bytes_out").sum(), requests=pl.col("requests").sum(), rows_in=pl.col("rows_in").sum())
    frame = (pl.DataFrame({"asset": names, "stored_bytes": [int(stored_bytes.get(a, 0)) for a in names]},
                          schema={"asset": pl.String, "stored_bytes": pl.Int64})
             .join(sums, on="asset", how="left").fill_null(0))
    total = frame.select(pl.lit("total").alias("asset"), pl.col("peak_rss_bytes").max(),
                         *(pl.col(c).sum() for c in frame.columns if c not in ("asset", "peak_rss_bytes")))
    frame = pl.concat([frame, total.select(frame.columns).cast(frame.schema)])
    frame = frame.select(
        "asset", pl.col("units").cast(pl.Int64), cpu_hours=pl.col("cpu_s") / 3600, wall_hours=pl.col("wall_s") / 3600,
        peak_rss_bytes=pl.col("peak_rss_bytes").cast(pl.Int64), bytes_in=pl.col("bytes_in").cast(pl.Int64),
        bytes_out=pl.col("bytes_out").cast(pl.Int64), requests=pl.col("requests").cast(pl.Int64),
        rows_in=pl.col("rows_in").cast(pl.Int64),
        cpu_hours_per_million_docs=pl.when(pl.col("rows_in") > 0)
        .then(pl.col("cpu_s") / 3600 / pl.col("rows_in") * 1e6).otherwise(None),
        stored_bytes=pl.col("stored_bytes"))
    if not settings.priced:
        return frame
    money = [cost_of(cpu, 0, 0, settings) for cpu in frame["cpu_hours"] * 3600], \
        [cost_of(0, stored, 0, settings) for stored in frame["stored_bytes"]], \
        [cost_of(0, 0, n, settings) for n in frame["requests"]]
    return frame.with_columns(cost_cpu=pl.Series(money[0]), cost_storage=pl.Series(money[1]),
                              cost_requests=pl.Series(money[2])).with_columns(
        cost_total=pl.col("cost_cpu") + pl.col("cost_storage") + pl.col("cost_requests"))


def runner_costs(ledger: pl.DataFrame) -> pl.DataFrame:
    """Per stage and runner: units, CPU- and wall-hours, requests (one runner's rates against another's)."""
    return (ledger.group_by("asset", "runner")
            .agg(units=pl.len(), cpu_hours=pl.col("cpu_s").sum() / 3600, wall_hours=pl.col("wall_s").sum() / 3600,
                 requests=pl.col("requests").sum(), rows_in=pl.col("rows_in").sum())
            .with_columns(pl.col("units").cast(pl.Int64)).sort("asset", "runner"))
