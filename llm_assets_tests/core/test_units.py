"""The work units end to end on the real SeaweedFS server: a real Common Crawl WARC goes through
documents -> filtered -> tokenized, with row accounting, provenance, rejected reasons, EOS-terminated token
rows, errors that name their input, and the same results in a process pool as in-process."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import uuid
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from llm_assets.core import documents, filtered, tokenized
from llm_assets.core.documents import ExtractUnit, extract_documents
from llm_assets.core.filtered import FilterUnit, filter_documents
from llm_assets.core.filters import FineWebQuality
from llm_assets.core.inventory import shard_of
from llm_assets.core.lake import Lake, part_key
from llm_assets.core.readers import ReaderSettings, ReadReport, read_records
from llm_assets.core.tokenize import load_tokenizer
from llm_assets.core.tokenized import TokenizeUnit, tokenize_documents
from llm_assets.core.units import PoolRunner, UnitFailed, UnitResult, run_units, unit_id
from llm_assets.platform.runners import runner_for
from llm_assets.settings import (
    DocumentsSettings,
    FilteredSettings,
    InProcessRunnerSettings,
    PoolRunnerSettings,
    Settings,
    TokenizedSettings,
)
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import gzip_members

CC_2020 = "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz"
# The default chain keeping English only (FineWeb's) without FineWeb's line rules: its one English page with body
# text (037426.cn, a table-like company page) then survives to the token stage, so the units downstream have rows to
# work on.
UNIT_FILTERS = FilteredSettings.default_with(fineweb_quality=FineWebQuality(enabled=False),
                                             language={"languages": ("en",)})
ENGLISH_THRESHOLD = 0.65  # FineWeb's, the language block's for English
SHARDS = Settings().shards
EOS = 50256


def upload(lake: Lake, crawl: str, name: str, data: bytes | None = None) -> tuple[str, int, str]:
    """Put a file under raw/<crawl>/ and return (key, size, etag), as the raw_files inventory would."""
    key = f"raw/{crawl}/{name}"
    lake.put_bytes(key, shared("warc", name).read_bytes() if data is None else data)
    obj = next(o for o in lake.list(key) if o.key == key)
    return key, obj.size, obj.etag


def extract_unit(store, crawl: str, key: str, size: int, etag: str, tag: str = "",
                 settings: DocumentsSettings | None = None, rejected: bool = False) -> ExtractUnit:
    unit = unit_id("documents", documents.STAGE_VERSION, key, etag, tag)
    shard = shard_of(key, SHARDS)
    return ExtractUnit(store=store, settings=settings or DocumentsSettings(), crawl=crawl, source=key, size=size,
                       unit=unit, part=part_key("documents", crawl, shard, unit),
                       rejected_part=part_key("documents", crawl, shard, unit, zone="rejected") if rejected else "")


def intact_records() -> list:
    """The CC-MAIN-2020-34 excerpt's HTML records, read locally with the reader."""
    with shared("warc", CC_2020).open("rb") as f:
        return list(read_records(f, CC_2020, ReaderSettings(), ReadReport()))


def filter_unit(store, crawl: str, docs: UnitResult, tag: str = "") -> FilterUnit:
    unit = unit_id("filtered", filtered.STAGE_VERSION, docs.unit, tag)
    shard = docs.part.split("shard=")[1][:4]
    return FilterUnit(store=store, settings=UNIT_FILTERS, source=docs.part, unit=unit,
                      part=part_key("filtered", crawl, shard, unit),
                      rejected_part=part_key("filtered", crawl, shard, unit, zone="rejected"))


def tokenize_unit(store, crawl: str, kept: UnitResult, tag: str = "") -> TokenizeUnit:
    unit = unit_id("tokenized", tokenized.STAGE_VERSION, kept.unit, tag)
    shard = kept.part.split("shard=")[1][:4]
    return TokenizeUnit(store=store, settings=TokenizedSettings(), source=kept.part, unit=unit,
                        part=part_key("tokenized", crawl, shard, unit))


def read(lake: Lake, key: str) -> pl.DataFrame:
    return lake.scan([key]).collect()


def balanced(r: UnitResult) -> bool:
    return r.rows_in == r.rows_out + sum(r.dropped.values())


@dataclass
class Chain:
    crawl: str
    source: str
    size: int
    docs: UnitResult
    kept: UnitResult
    tokens: UnitResult


@pytest.fixture(scope="module")
def chain(store_config) -> Chain:
    """The CC-MAIN-2020-34 excerpt through the three stages, once for the module."""
    shared("tokenizers", "gpt2")
    lake = Lake(store_config)
    crawl = f"TEST-{uuid.uuid4().hex[:10]}"
    key, size, etag = upload(lake, crawl, CC_2020)
    docs = extract_documents(extract_unit(store_config, crawl, key, size, etag))
    kept = filter_documents(filter_unit(store_config, crawl, docs))
    tokens = tokenize_documents(tokenize_unit(store_config, crawl, kept))
    return Chain(crawl, key, size, docs, kept, tokens)


# documents

def test_documents_row_accounting(chain):
    """50 records in (warcinfo, 16 requests, 16 responses, 16 metadata, ...): rows_in = rows_out + dropped."""
    r = chain.docs
    assert r.errors == []
    assert balanced(r)
    assert r.rows_in == 50
    assert r.dropped["not_response"] == 34
    assert r.rows_out + r.dropped.get("no_text", 0) == 16
    assert r.rows_out >= 15
    assert set(r.dropped) <= {"not_response", "no_text"}
    assert (r.bytes_in, r.columns) == (chain.size, documents.SCHEMA.names)
    assert r.bytes_out > 0 and r.seconds > 0 and r.peak_rss_bytes > 0


def test_documents_provenance(chain, lake):
    """Each document names its URL, WARC record id, record offset, source key and crawl, matching the file."""
    df = read(lake, chain.docs.part)
    assert df.height == chain.docs.rows_out
    assert df.columns == documents.SCHEMA.names

    records = {r.record_id: r for r in intact_records()}
    for row in df.iter_rows(named=True):
        rec = records[row["warc_record_id"]]
        assert (row["url"], row["record_offset"], row["fetch_time"]) == (rec.url, rec.offset, rec.fetch_time)
        assert (row["source_format"], row["record_skip"], row["charset"]) == ("warc", 0, rec.charset)
        assert (row["source_key"], row["crawl"]) == (chain.source, chain.crawl)
        assert row["domain"] == urlsplit(rec.url).hostname.lower()
        assert row["doc_id"] == documents.doc_id(chain.source, rec.record_id, rec.offset)
        assert row["text"] and row["extractor"].startswith(("trafilatura ", "resiliparse "))  # routed: either
    assert df["doc_id"].n_unique() == df.height
    assert df["record_offset"].to_list() == sorted(df["record_offset"].to_list())
    assert {"01spb.ru", "0900-hovenier.nl", "06.live-radsport.ch", "037426.cn"} <= set(df["domain"])


def test_a_warc_split_into_shares_gives_the_files_documents_and_accounting_once(store_config, lake, crawl):
    """Three shares of one WARC, each reading its byte range by a ranged GET: together the same documents, drops and
    quarantined records as the file in one unit, every document in exactly one share, each share's rows balanced."""
    key, size, etag = upload(lake, crawl, CC_2020)
    whole = extract_documents(extract_unit(store_config, crawl, key, size, etag, tag="whole", rejected=True))
    unit = extract_unit(store_config, crawl, key, size, etag, rejected=True)
    shares = [extract_documents(replace(unit, share=i, shares=3, unit=f"{unit.unit[:-1]}{i}",
                                        offset=size * i // 3, size=size * (i + 1) // 3 - size * i // 3,
                                        part=unit.part.replace(unit.unit, f"{unit.unit[:-1]}{i}"),
                                        rejected_part=unit.rejected_part.replace(unit.unit, f"{unit.unit[:-1]}{i}")))
              for i in range(3)]
    assert all(balanced(r) and r.errors == [] for r in shares)
    assert all(r.rows_out > 0 for r in shares)
    assert sum(r.rows_in for r in shares) == whole.rows_in and sum(r.rows_out for r in shares) == whole.rows_out
    dropped: dict[str, int] = {}
    for r in shares:
        for reason, k in r.dropped.items():
            dropped[reason] = dropped.get(reason, 0) + k
    assert dropped == whole.dropped
    assert _rows(lake, shares).equals(_rows(lake, [whole]))
    offsets = [lake.scan([r.part]).collect()["record_offset"].to_list() for r in shares]
    assert all(max(a) < min(b) for a, b in zip(offsets, offsets[1:], strict=False))  # byte ranges: in file order
    rejected = [r.rejected_part for r in shares]
    assert lake.scan(rejected).collect().sort("record_offset").equals(
        lake.scan([whole.rejected_part]).collect().sort("record_offset"))


def test_only_large_warc_and_arc_files_are_split_and_their_units_do_not_depend_on_the_workers():
    from llm_assets.core.documents import MAX_SHARES, SHARE_BYTES, extract_units, shares_of

    assert shares_of("raw/c/a.warc.gz", SHARE_BYTES) == 1 and shares_of("raw/c/a.warc.gz", SHARE_BYTES + 1) == 2
    assert shares_of("raw/c/a.arc.gz", 100 * SHARE_BYTES) == MAX_SHARES
    assert shares_of("raw/c/a.warc.wet.gz", 10 * SHARE_BYTES) == shares_of("raw/c/a.jsonl.gz", 10 * SHARE_BYTES) == 1
    size = 3 * SHARE_BYTES - 7
    units = extract_units(None, DocumentsSettings(), "C", "0000", "raw/C/a.warc.gz", size, "e", "v", "trafilatura")
    assert [(u.share, u.shares) for u in units] == [(0, 3), (1, 3), (2, 3)]
    assert [u.offset for u in units] == [0, units[0].size, units[0].size + units[1].size]
    assert sum(u.size for u in units) == size and len({u.unit for u in units}) == len({u.part for u in units}) == 3
    assert units == extract_units(None, DocumentsSettings(), "C", "0000", "raw/C/a.warc.gz", size, "e", "v",
                                  "trafilatura")
    [one] = extract_units(None, DocumentsSettings(), "C", "0000", "raw/C/b.jsonl.gz", size, "e", "v", "trafilatura")
    assert one.unit == unit_id("documents", "v", "trafilatura", "raw/C/b.jsonl.gz", "e") and one.shares == 1


# filtered

def test_filtered_row_accounting_and_rejections(chain, lake):
    """Every document is either kept or in rejected/ with a reason; the counts match the unit's report."""
    r = chain.kept
    assert r.errors == []
    assert balanced(r)
    assert r.rows_in == chain.docs.rows_out
    assert r.rejected_part.startswith(f"rejected/filtered/crawl={chain.crawl}/")

    kept, rejected = read(lake, r.part), read(lake, r.rejected_part)
    assert kept.height == r.rows_out >= 1
    assert rejected.height == sum(r.dropped.values())
    assert rejected["reason"].null_count() == 0
    assert {f"{b}/{why}": n for b, why, n in rejected.group_by("filter", "reason").len().iter_rows()} == r.dropped
    # Two pages are English: 037426.cn (123 words, kept) and 077678u.info, whose main text is a 7-word copyright
    # line; the Chinese, Russian, German and Dutch pages are dropped for their language.
    assert r.dropped == {"language/language": r.rows_in - 2, "gopher_repetition/top_2_gram": 1}
    assert kept["url"].to_list() == ["http://037426.cn/"]
    docs = read(lake, chain.docs.part)
    assert sorted(kept["doc_id"].to_list() + rejected["doc_id"].to_list()) == sorted(docs["doc_id"].to_list())


def test_filtered_keeps_what_the_settings_allow(chain, lake):
    """Kept documents are English at or above the threshold and within the word limits; provenance survives."""
    s = FilteredSettings()
    kept = read(lake, chain.kept.part)
    assert kept.columns == filtered.SCHEMA.names
    assert set(kept["language"]) == {"en"}
    assert (kept["language_score"] >= ENGLISH_THRESHOLD).all()
    assert kept["n_words"].is_between(s.block("gopher_quality").min_doc_words,
                                      s.block("gopher_quality").max_doc_words).all()
    docs = read(lake, chain.docs.part)
    # the text itself is rewritten (normalization, C4's line cleanup, PII masking); its provenance is not
    provenance = ["doc_id", "url", "warc_record_id", "record_offset", "source_key", "crawl"]
    assert kept.select(provenance).join(docs.select(provenance), on=provenance, how="anti").height == 0


def test_rejected_rows_carry_their_scores(chain, lake):
    """A rejected document keeps its language label; those rejected for language are not English-and-sure."""
    rejected = read(lake, chain.kept.rejected_part)
    assert rejected.columns == filtered.REJECTED_SCHEMA.names
    by_language = rejected.filter(pl.col("reason") == "language")
    assert by_language["language"].null_count() == 0
    assert not ((by_language["language"] == "en") & (by_language["language_score"] >= ENGLISH_THRESHOLD)).any()
    assert (rejected.filter(pl.col("filter") == "gopher_quality")["language"] == "en").all()


# tokenized

def test_tokenized_rows_end_with_eos(chain, lake):
    """One row per kept document: its GPT-2 ids followed by <|endoftext|> (50256), n_tokens counting both."""
    r = chain.tokens
    assert r.errors == []
    assert balanced(r) and r.rows_in == r.rows_out == chain.kept.rows_out
    toks = read(lake, r.part)
    assert toks.columns == tokenized.schema(50257).names
    assert toks.schema["tokens"] == pl.List(pl.UInt16)
    tok = load_tokenizer(str(TokenizedSettings().resolved_path()))
    texts = dict(read(lake, chain.kept.part).select("doc_id", "text").iter_rows())
    assert set(toks["doc_id"]) == set(texts)
    for row in toks.iter_rows(named=True):
        assert row["tokens"][-1] == EOS
        assert EOS not in row["tokens"][:-1]
        assert row["n_tokens"] == len(row["tokens"])
        assert row["tokens"] == tok.encode(texts[row["doc_id"]], add_special_tokens=False).ids + [EOS]
        assert row["crawl"] == chain.crawl


# errors

def test_missing_source_fails_the_unit_by_name(store_config, lake, crawl):
    """A raw file gone between the inventory and the read is no bad record to quarantine: the unit fails, naming
    its input, and writes nothing (the sensor sees the removal and requests the partition again)."""
    unit = extract_unit(store_config, crawl, f"raw/{crawl}/missing.warc.gz", 1, "etag")
    with pytest.raises(UnitFailed, match=f"raw/{crawl}/missing.warc.gz: .*(NoSuchKey|404)"):
        extract_documents(unit)
    assert lake.exists(unit.part) is False


def test_missing_upstream_parts_fail_the_unit_by_name(store_config, lake, crawl):
    """Filter and tokenize units on a part that does not exist fail, naming the part: a committed partition never
    silently loses an upstream part's rows."""
    ghost = UnitResult(unit=unit_id("ghost"), source="x", part=part_key("documents", crawl, "0000", unit_id("ghost")))
    for fn, unit in ((filter_documents, filter_unit(store_config, crawl, ghost)),
                     (tokenize_documents, tokenize_unit(store_config, crawl, ghost))):
        with pytest.raises(UnitFailed, match=f"{ghost.part}: "):
            fn(unit)
        assert lake.exists(unit.part) is False


def test_missing_tokenizer_fails_the_unit_with_the_path(chain, store_config, tmp_path):
    """A tokenizer path that does not exist is a configuration error, named with the path."""
    unit = tokenize_unit(store_config, chain.crawl, chain.kept, tag="bad-tokenizer")
    unit = replace(unit, settings=TokenizedSettings(tokenizer_path=tmp_path / "nowhere"))
    with pytest.raises(UnitFailed, match="FileNotFoundError") as failed:
        tokenize_documents(unit)
    assert str(tmp_path / "nowhere") in str(failed.value)


def _documents_of(lake: Lake, r: UnitResult) -> pl.DataFrame:
    return read(lake, r.part).select("doc_id", "url", "record_offset", "text").sort("record_offset")


def _expected(lake: Lake, chain: Chain, keep) -> pl.DataFrame:
    """The intact file's documents (the chain's part) whose record_offset satisfies `keep`."""
    docs = _documents_of(lake, chain.docs)
    return docs.filter(pl.Series([keep(o) for o in docs["record_offset"]], dtype=pl.Boolean))


def _damage_error(key: str, r: UnitResult) -> str:
    n = r.dropped.get("truncated_file", 0) + r.dropped.get("corrupt_record", 0)
    assert n >= 1
    return f"{key}: {n} damaged record(s) quarantined; intact records kept"


def test_damaged_raw_file_quarantines_the_damage_and_recovers_the_rest(chain, store_config, lake, crawl):
    """Bytes overwritten mid-file (inside the 6th page's gzip member): that record is quarantined, the reader
    resynchronizes at the next member, and every other document is written, identical to the intact file's;
    the error names the file."""
    data = bytearray(shared("warc", CC_2020).read_bytes())
    (damaged_member,) = [s for s, e in gzip_members(bytes(data)) if s < 48_600 and 48_400 < e]
    data[48_400:48_600] = bytes(200)
    key, size, etag = upload(lake, crawl, "damaged.warc.gz", bytes(data))
    r = extract_documents(extract_unit(store_config, crawl, key, size, etag))
    assert r.dropped.get("corrupt_record", 0) >= 1 and "truncated_file" not in r.dropped
    assert r.errors == [_damage_error(key, r)]
    assert balanced(r)
    expected = _expected(lake, chain, lambda o: o != damaged_member)
    assert expected.height == chain.docs.rows_out - 1  # the damaged member held one page with main text
    assert _documents_of(lake, r).equals(expected)
    assert r.rows_out == expected.height


def test_truncated_raw_file_keeps_what_precedes_the_cut_and_is_reported(chain, store_config, lake, crawl):
    """A raw file cut short (an interrupted upload): the documents whose gzip member ends before the cut are
    written, the cut record is quarantined as truncated_file, and the error names the file."""
    data = shared("warc", CC_2020).read_bytes()
    cut = len(data) // 2
    member_end = dict(gzip_members(data))
    key, size, etag = upload(lake, crawl, "truncated.warc.gz", data[:cut])
    r = extract_documents(extract_unit(store_config, crawl, key, size, etag))
    assert r.dropped["truncated_file"] == 1
    assert r.errors == [f"{key}: 1 damaged record(s) quarantined; intact records kept"]
    assert balanced(r)
    expected = _expected(lake, chain, lambda o: member_end[o] <= cut)
    assert 1 <= expected.height < chain.docs.rows_out
    assert _documents_of(lake, r).equals(expected)


def test_rejected_part_holds_the_quarantined_records(store_config, lake, crawl):
    """With a rejected part, every quarantined record is a row with its reason, offset and (where known) URL:
    here the damaged member of a corrupted copy, and the pages over a lowered max_payload_bytes; and so is every
    page set aside for its content (`no_text`), with the doc id it would have had."""
    data = bytearray(shared("warc", CC_2020).read_bytes())
    data[48_400:48_600] = bytes(200)
    records = intact_records()
    limit = sorted(rec.payload_bytes for rec in records)[-4]  # the 3 biggest pages are over it
    big = [rec for rec in records if rec.payload_bytes > limit and not 48_321 <= rec.offset < 48_600]
    key, size, etag = upload(lake, crawl, "damaged.warc.gz", bytes(data))
    settings = DocumentsSettings(max_payload_bytes=limit)
    r = extract_documents(extract_unit(store_config, crawl, key, size, etag, settings=settings, rejected=True))
    assert r.rejected_part and r.rejected_part.startswith(f"rejected/documents/crawl={crawl}/")
    rejected = read(lake, r.rejected_part)
    assert rejected.columns == documents.REJECTED_SCHEMA.names
    assert set(rejected["source_key"]) == {key}
    counts = dict(rejected["reason"].value_counts().iter_rows())
    assert counts == {reason: n for reason, n in r.dropped.items()
                      if reason in ("oversized", "corrupt_record", "no_text", "non_html", "non_2xx")}
    assert rejected.filter(pl.col("reason") == "no_text")["doc_id"].str.len_chars().to_list() == [32] * counts.get(
        "no_text", 0)
    assert counts["oversized"] == len(big) >= 2
    oversized = rejected.filter(pl.col("reason") == "oversized").sort("record_offset")
    assert oversized.select("url", "record_offset", "record_skip").rows() == [(rec.url, rec.offset, 0) for rec in big]
    corrupt = rejected.filter(pl.col("reason") == "corrupt_record")
    assert corrupt["record_offset"].min() == 48_321 and corrupt["detail"].str.len_chars().min() > 0
    assert not set(read(lake, r.part)["url"]) & {rec.url for rec in big}
    assert balanced(r)


@pytest.mark.parametrize("kind", ["png", "text"])
def test_unreadable_raw_file_is_reported_not_raised(store_config, lake, crawl, kind):
    """A raw file that is no archive or document format: reason `unreadable_file` (also in the rejected part),
    an error naming the key, no documents, and no exception."""
    text = shared("text", "pytorch-examples__wikitext-2-v1.valid.txt").read_bytes()[:50_000]
    png = b"\x89PNG\r\n\x1a\n" + random.Random(7).randbytes(4000)
    key, size, etag = upload(lake, crawl, f"notes-{kind}.warc.gz", {"png": png, "text": text}[kind])
    r = extract_documents(extract_unit(store_config, crawl, key, size, etag, rejected=True))
    assert isinstance(r, UnitResult)
    assert (r.rows_out, r.dropped) == (0, {"unreadable_file": 1})
    assert len(r.errors) == 1 and r.errors[0].startswith(f"{key}: unreadable")
    assert balanced(r)
    assert read(lake, r.part).height == 0
    assert read(lake, r.rejected_part).select("source_key", "reason").rows() == [(key, "unreadable_file")]


def test_text_sources_are_sniffed_not_named(store_config, lake, crawl):
    """dolma's CCNet JSON Lines uploaded under a WARC name, and the same rows as Parquet under a JSON name: both
    give the 10 documents with their text, `source_format` the format found, and no extraction."""
    blob = shared("text", "dolma__cc_en_head-0091.ccnet.jsonl.gz").read_bytes()
    rows = [json.loads(line) for line in gzip.decompress(blob).splitlines()]
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [row["id"] for row in rows], "text": [row["text"] for row in rows],
                             "url": [row["metadata"]["url"] for row in rows]}), buf)
    for name, data, fmt in (("cc.warc.gz", blob, "jsonl"), ("cc.json", buf.getvalue(), "parquet")):
        key, size, etag = upload(lake, crawl, name, data)
        r = extract_documents(extract_unit(store_config, crawl, key, size, etag))
        assert (r.errors, r.rows_out, r.dropped) == ([], 10, {})
        df = read(lake, r.part)
        assert df["text"].to_list() == [row["text"] for row in rows]
        assert df["url"].to_list() == [row["metadata"]["url"] for row in rows]
        assert set(df["source_format"]) == set(df["extractor"]) == {fmt}
        assert df["doc_id"].n_unique() == 10


# runners

RUNNER_FILES = [CC_2020, "dolma__sample-0000.warc.gz", "whirlwind__CC-MAIN-2024-22.warc.gz"]


def _outcome(r: UnitResult) -> tuple:
    return (r.rows_in, r.rows_out, r.dropped, r.errors, r.columns, r.part is not None)


def _rows(lake: Lake, results: list[UnitResult], sort_by: str = "doc_id") -> pl.DataFrame:
    return lake.scan([r.part for r in results]).collect().sort(sort_by)


def test_pool_runner_gives_the_same_results_as_inprocess(store_config, lake, crawl):
    """Three real WARCs through all three stages with a 2-worker process pool and in-process: same unit
    outcomes in input order, and the same rows in every stage's output."""
    raws = [upload(lake, crawl, name) for name in RUNNER_FILES]
    outputs = {}
    for kind in ("inprocess", "pool"):
        runner = runner_for(PoolRunnerSettings(workers=2) if kind == "pool" else InProcessRunnerSettings())
        docs = run_units(extract_documents, [extract_unit(store_config, crawl, *raw, tag=kind) for raw in raws],
                         runner)
        kept = run_units(filter_documents, [filter_unit(store_config, crawl, d, tag=kind) for d in docs], runner)
        toks = run_units(tokenize_documents, [tokenize_unit(store_config, crawl, k, tag=kind) for k in kept], runner)
        outputs[kind] = (docs, kept, toks)

    for stage in range(3):
        a, b = outputs["inprocess"][stage], outputs["pool"][stage]
        assert [_outcome(r) for r in b] == [_outcome(r) for r in a]
        assert all(r.errors == [] and balanced(r) for r in a + b)
        assert _rows(lake, b).equals(_rows(lake, a))
        assert {r.part for r in a}.isdisjoint({r.part for r in b})
    docs = outputs["pool"][0]
    assert [r.source for r in docs] == [raw[0] for raw in raws]
    assert sum(r.rows_out for r in outputs["pool"][2]) >= 10  # dolma's English pages reach the token stage


def test_pool_runner_fails_the_run_on_a_failing_unit(store_config, lake, crawl):
    """One missing input among good ones: the pool raises that unit's failure, by name, instead of returning a
    partition that silently lacks it."""
    good = upload(lake, crawl, "whirlwind__CC-MAIN-2024-22.warc.gz")
    units = [extract_unit(store_config, crawl, *good),
             extract_unit(store_config, crawl, f"raw/{crawl}/gone.warc.gz", 10, "x")]
    with pytest.raises(UnitFailed, match=f"raw/{crawl}/gone.warc.gz: "):
        run_units(extract_documents, units, PoolRunner(2))


def test_progress_says_units_records_rate_and_eta_at_its_cadence_and_at_the_end():
    from llm_assets.core.units import Progress, UnitResult

    now = [0.0]
    said: list[str] = []
    progress = Progress(4, said.append, every_s=10.0, clock=lambda: now[0])
    for t in (4.0, 12.0, 15.0, 40.0):  # a line at 12 s (10 s since the start), none at 15 s, the last at 40 s
        now[0] = t
        progress(UnitResult(unit="u", source="s", part=None, rows_in=600, rows_out=500))
    assert said == ["2/4 units, 1,200 records read, 100 records/s, ETA 12s",
                    "4/4 units, 2,400 records read, 60 records/s, done"]


def test_every_local_runner_reports_each_unit_as_it_ends():
    from llm_assets.core.units import InProcessRunner
    from llm_assets_tests.cluster_units import Probe, one_row

    units = [Probe(source=f"s{i}") for i in range(5)]
    for runner in (InProcessRunner(), PoolRunner(workers=2)):
        seen: list[str] = []
        results = run_units(one_row, units, runner, lambda r, seen=seen: seen.append(r.source))
        assert [r.source for r in results] == [u.source for u in units] and sorted(seen) == [u.source for u in units]


@dataclass(frozen=True)
class EnvProbe:
    source: str  # the value the caller gave ENV_PROBE


ENV_PROBE = "LLM_ASSETS_TEST_ENV_PROBE"


def read_environment(u: EnvProbe) -> UnitResult:
    """Says, in its counts, whether the worker saw the caller's value and whether its encoder runs on one thread."""
    import os

    return UnitResult(unit="", source=u.source, counts={
        "caller's value": int(os.environ.get(ENV_PROBE) == u.source),
        "one encoder thread": int(os.environ.get("TOKENIZERS_PARALLELISM") == "false"),
        # neither in its environment nor in the process image it was forked from (the fork server's)
        "no database password": int(DB_PASSWORD not in os.environ
                                    and DB_PASSWORD.encode() not in open("/proc/self/environ", "rb").read())})


DB_PASSWORD = "DAGSTER_PG_PASSWORD"


def test_pool_workers_see_the_callers_environment_of_when_the_pool_starts(monkeypatch):
    """Workers fork from a long-lived server, yet see the environment the caller has when each pool starts, as
    spawned workers did; the tokenizer's encoder runs on one thread in each (the workers are the parallelism). The
    Dagster instance's database password, which a run worker holds, reaches neither the workers nor their server."""
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    monkeypatch.setenv(DB_PASSWORD, "not-for-units")
    for value in ("first", "second"):  # the second pool's workers come from the server the first started
        monkeypatch.setenv(ENV_PROBE, value)
        results = run_units(read_environment, [EnvProbe(value), EnvProbe(value)], PoolRunner(2))
        assert [r.counts for r in results] == [
            {"caller's value": 1, "one encoder thread": 1, "no database password": 1}] * 2
    assert os.environ[DB_PASSWORD] == "not-for-units"  # the caller's own is left as it was
