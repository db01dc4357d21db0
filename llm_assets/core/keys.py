"""Every key of the lake, in one place: a partition's reference (`PartitionRef`, `crawl|shard`), the lake's zones
(`lake/`, `rejected/`, `index/`, `scratch/`), the ledger's and the releases' objects. Each builder validates the
names it is given (crawl, shard, asset, unit, token), so a key built from user input is never another key.

Nothing here does I/O or imports more than the standard library."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A crawl name is a Dagster partition key and a lake key segment (`crawl=<c>`), so it stays strict: Dagster refuses
# '...' and control characters in partition keys and joins multi-partition keys with '|'; '=' and '/' are lake syntax.
CRAWL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
CRAWL_LEVEL_SHARD = "all"  # the shard a crawl-level asset's partition is stored under
SHARD_RE = re.compile(rf"^(?:[0-9]{{4}}|{CRAWL_LEVEL_SHARD})$")
ASSET_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
UNIT_RE = re.compile(r"^[0-9a-f]{8,64}$")
# What a raw file name may not hold. Anything else goes (spaces, any script, a leading dot): a raw key only ever
# appears as data (hashed into unit ids and part names, stored in Parquet columns, passed to boto3), used as it is,
# without Unicode normalization.
RAW_NAME_FORBIDDEN_RE = re.compile(
    r"[\x00-\x1f\x7f-\x9f"  # control characters: they break log lines and terminals
    r"\\"  # a path separator to Windows tools; SeaweedFS stores it as '/', so the key would change
    r"\u2028\u2029"  # line and paragraph separators: line breaks to many readers
    r"\u202a-\u202e\u2066-\u2069"  # bidi embeddings, overrides and isolates: they reorder how text is displayed
    r"\ud800-\udfff]"  # lone surrogates: not encodable in UTF-8
)
RAW_KEY_MAX_BYTES = 1024  # S3's limit for a whole key, in UTF-8


class InvalidKey(ValueError):
    """A crawl, shard or file name that cannot be a lake key."""


def validate_crawl(crawl: str) -> str:
    if not CRAWL_RE.fullmatch(crawl or "") or ".." in crawl:
        raise InvalidKey(f"invalid crawl name {crawl!r}: use letters, digits, '.', '_' or '-' (max 128)")
    return crawl


def validate_shard(shard: str) -> str:
    if not SHARD_RE.fullmatch(shard or ""):
        raise InvalidKey(f"invalid shard {shard!r}: expected four digits such as '0003' "
                         "(or 'all' for a crawl-level asset)")
    return shard


def parse_raw_key(key: str) -> tuple[str, str]:
    """`raw/<crawl>/<path>` -> (crawl, path). Sub-folders are allowed; every segment is validated: the crawl
    strictly (it becomes a partition key), file names only against what is unsafe (RAW_NAME_FORBIDDEN_RE)."""
    parts = key.split("/")
    if len(parts) < 3 or parts[0] != "raw":
        raise InvalidKey(f"invalid raw key {key!r}: expected raw/<crawl>/<file>")
    try:
        validate_crawl(parts[1])
    except InvalidKey as e:
        raise InvalidKey(f"invalid raw key {key!r}: {e}") from None
    for segment in parts[2:]:
        if segment in ("", ".", ".."):
            raise InvalidKey(f"invalid raw key {key!r}: empty, '.' or '..' path segment")
        if bad := RAW_NAME_FORBIDDEN_RE.search(segment):
            raise InvalidKey(f"invalid raw key {key!r}: {bad.group()!r} (U+{ord(bad.group()):04X}) in {segment!r}; "
                             "file names may not hold control characters, '\\', line separators or bidi controls")
    if (size := len(key.encode("utf-8"))) > RAW_KEY_MAX_BYTES:
        raise InvalidKey(f"invalid raw key {key[:80]!r}…: {size} bytes in UTF-8, over S3's {RAW_KEY_MAX_BYTES}")
    return parts[1], "/".join(parts[2:])


def partition_prefix(zone: str, asset: str, crawl: str, shard: str) -> str:
    if not ASSET_RE.fullmatch(asset):
        raise InvalidKey(f"invalid asset name {asset!r}")
    return f"{zone}/{asset}/crawl={validate_crawl(crawl)}/shard={validate_shard(shard)}/"


def part_key(asset: str, crawl: str, shard: str, unit: str, zone: str = "lake") -> str:
    if not UNIT_RE.fullmatch(unit):
        raise InvalidKey(f"invalid unit id {unit!r}")
    return f"{partition_prefix(zone, asset, crawl, shard)}part-{unit}.parquet"


def manifest_key(asset: str, crawl: str, shard: str) -> str:
    return partition_prefix("lake", asset, crawl, shard) + "_manifest.json"


SCRATCH_PREFIX = "scratch/preview/"  # what a preview writes: never listed by a manifest, removed after it
SCRATCH_ID_RE = re.compile(r"^[0-9a-f]{16}$")
SCRATCH_PART_RE = re.compile(r"^(?P<prefix>scratch/preview/[0-9a-f]{16}/)(?P<part>(?:lake|rejected)/.+)$")


def scratch_prefix(preview_id: str) -> str:
    """The prefix a preview writes its parts under (`scratch/preview/<id>/`, then the zones `lake/`, `rejected/`,
    `index/`): nothing under `lake/` or `rejected/`, so no reader of committed data ever sees them."""
    if not SCRATCH_ID_RE.fullmatch(preview_id):
        raise InvalidKey(f"invalid preview id {preview_id!r}: expected 16 hex digits")
    return f"{SCRATCH_PREFIX}{preview_id}/"


def id_index_key(part: str) -> str:
    """Where the small index of a part's URLs, domains and doc ids is kept (`core.takedowns.IdIndex`): beside the
    lake, under `index/`, named by the part (parts are immutable, so is their index). A rejected part's index (what
    documents set aside, by URL) is under `index/rejected/`. A scratch part's (`scratch/preview/<id>/lake/...`) is
    under its own scratch prefix, so it goes with it."""
    if (scratch := SCRATCH_PART_RE.match(part)) is not None:
        return scratch["prefix"] + id_index_key(scratch["part"])
    if not part.startswith(("lake/", "rejected/")) or not part.endswith(".parquet"):
        raise InvalidKey(f"not a lake or rejected part: {part!r}")
    return "index/" + part.removeprefix("lake/").removesuffix(".parquet") + ".ids.npz"


def partition_index_key(asset: str, crawl: str, shard: str, data_version: str, zone: str = "lake") -> str:
    """The union of a committed partition's part indexes (or its rejected parts' indexes): one read says whether any
    of its parts may hold a URL."""
    prefix = partition_prefix(zone, asset, crawl, shard).removeprefix("lake/")
    return f"index/{prefix}partition-{data_version}.ids.npz"


def contamination_key(asset: str, crawl: str, shard: str, data_version: str, index_version: str) -> str:
    """Where the documents of a committed partition an eval index flags are kept once checked."""
    return f"index/contamination/{partition_prefix('lake', asset, crawl, shard).removeprefix('lake/')}" \
           f"{data_version}-{index_version}.json"


def tombstone_key(asset: str, crawl: str, shard: str, committed_at: float, token: str) -> str:
    """Where a commit records the parts it superseded, for the vacuum to delete once the retention has passed."""
    return partition_prefix("lake", asset, crawl, shard) + f"_superseded/{int(committed_at * 1000):015d}-{token}.json"



THRESHOLDS = "thresholds"
# A language label as the language block gives it (lid.176's: ISO 639-1 or -3 and a few of Wikipedia's codes, and
# `und`), optionally with an ISO 15924 script as FineWeb-2 names its configs (`de_Latn`). Settings name languages:
# user input.
LANGUAGE_RE = re.compile(r"^[a-z]{2,3}(?:_[A-Z][a-z]{3})?$")
FINGERPRINT_RE = re.compile(r"^[0-9a-f]{8,64}$")


def thresholds_key(language: str, fingerprint: str) -> str:
    """Where the thresholds that applied to one language are recorded, named by their fingerprint
    (`FilteredSettings.language_fingerprint`, which a filtered manifest records per language it held): written once,
    never changed."""
    if not LANGUAGE_RE.fullmatch(language or ""):
        raise InvalidKey(f"invalid language {language!r} for a thresholds key: expected a label such as 'de' or "
                         "'zh' (2-3 lowercase letters, optionally '_' and a script such as 'Latn')")
    if not FINGERPRINT_RE.fullmatch(fingerprint or ""):
        raise InvalidKey(f"invalid thresholds fingerprint {fingerprint!r}: expected hex digits")
    return f"{THRESHOLDS}/{language}/{fingerprint}.json"


@dataclass(frozen=True)
class PartitionRef:
    """One partition of a crawl × shard asset: `crawl|shard`, Dagster's multi-partition key; a crawl-level asset's
    partition is its crawl's `CRAWL_LEVEL_SHARD`, whose key is the crawl alone (its Dagster partition key)."""

    crawl: str
    shard: str

    def __post_init__(self) -> None:
        validate_crawl(self.crawl)
        validate_shard(self.shard)

    @classmethod
    def crawl_level(cls, crawl: str) -> PartitionRef:
        return cls(crawl, CRAWL_LEVEL_SHARD)

    @classmethod
    def parse(cls, key: str) -> PartitionRef:
        """`crawl|shard`, or a crawl alone (a crawl-level partition); InvalidKey for anything else."""
        crawl, sep, shard = str(key).partition("|")
        if sep and shard == CRAWL_LEVEL_SHARD:
            raise InvalidKey(f"invalid partition key {key!r}: a crawl-level partition's key is its crawl alone")
        try:
            return cls(crawl, shard) if sep else cls.crawl_level(crawl)
        except InvalidKey as e:
            raise InvalidKey(f"invalid partition key {key!r}: {e}") from None

    @property
    def is_crawl_level(self) -> bool:
        return self.shard == CRAWL_LEVEL_SHARD

    @property
    def key(self) -> str:
        return self.crawl if self.is_crawl_level else f"{self.crawl}|{self.shard}"

    def __str__(self) -> str:
        return self.key


def crawls_named(label: str) -> list[str]:
    """The crawls a run's partitions are named by, from its label (`crawl|shard`, `crawl`, a range of shards
    `crawl|first..last`, a range of crawls `first..last`, or shards of a range of crawls `first..last|first..last`:
    its first and last crawl)."""
    first, _, last = label.split("|", 1)[0].partition("..")
    return [PartitionRef.parse(crawl).crawl for crawl in (first, last) if crawl]


def split_partition(key: str) -> tuple[str, str]:
    """(crawl, shard) of a planned or Dagster partition key: `crawl|shard`, a crawl alone (a crawl-level partition:
    its `CRAWL_LEVEL_SHARD`) or "" (an unpartitioned asset: ("", ""))."""
    if not key:
        return "", ""
    ref = PartitionRef.parse(key)
    return ref.crawl, ref.shard


# ------------------------------------------------------------------------------------------------------ ledger

LEDGER_PREFIX = "ledger/costs/"
UNPARTITIONED = "unpartitioned"  # the key segment of an asset without crawls (crawl "" in its rows)


def ledger_asset_prefix(asset: str) -> str:
    if not ASSET_RE.fullmatch(asset or ""):
        raise InvalidKey(f"invalid asset name {asset!r} for a ledger key")
    return f"{LEDGER_PREFIX}{asset}/"


def ledger_prefix(asset: str, crawl: str = "") -> str:
    """Where an asset's ledger objects are kept (for one crawl, or for an unpartitioned asset with crawl "")."""
    return f"{ledger_asset_prefix(asset)}{f'crawl={validate_crawl(crawl)}' if crawl else UNPARTITIONED}/"


def ledger_key(asset: str, crawl: str, committed_at: float, token: str) -> str:
    """One commit's object: named by its time (ms, sortable) and a random token, so two commits never collide."""
    if not token.isalnum():
        raise InvalidKey(f"invalid ledger token {token!r}")
    return f"{ledger_prefix(asset, crawl)}{int(committed_at * 1000):015d}-{token}.parquet"


# ---------------------------------------------------------------------------------------------------- releases

RELEASES = "releases"
SUPERSEDED = "superseded.json"  # in a release's folder once a later version removed documents it holds


def release_name_prefix(name: str) -> str:
    """`releases/<name>/`: every version of a release, and its `latest.json`."""
    if not name or "/" in name or name in (".", ".."):
        raise InvalidKey(f"invalid release name {name!r}")
    return f"{RELEASES}/{name}/"


def release_prefix(name: str, version: str) -> str:
    if not version or "/" in version or version in (".", ".."):
        raise InvalidKey(f"invalid release version {version!r}")
    return f"{release_name_prefix(name)}{version}/"


def release_latest_key(name: str) -> str:
    """The pointer to the version a release's name means now."""
    return release_name_prefix(name) + "latest.json"


def release_manifest_key(name: str, version: str) -> str:
    return release_prefix(name, version) + "manifest.json"


def release_superseded_key(name: str, version: str) -> str:
    return release_prefix(name, version) + SUPERSEDED
