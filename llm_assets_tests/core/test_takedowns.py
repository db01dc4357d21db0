"""Takedown requests: parsed strictly, matched by URL, by domain (subdomains included) and by doc id."""

import json
import re

import polars as pl
import pytest

from llm_assets.core.takedowns import TakedownRequest, read_takedowns, takedown_matches

BASE = {"reason": "owner request", "requested_by": "legal@example.org", "date": "2026-11-20"}
DOCS = pl.DataFrame({
    "doc_id": [f"{i:032x}" for i in range(5)],
    "url": ["https://a.example.com/x", "https://a.example.com/y", "https://news.b.org/1", "https://b.org/2",
            "https://notb.org/3"],
    "domain": ["a.example.com", "a.example.com", "news.b.org", "b.org", "notb.org"],
})


def lines(*requests: dict) -> list[bytes]:
    return [json.dumps({**BASE, **r}).encode() for r in requests]


def test_each_kind_of_request_removes_exactly_what_it_names():
    requests = read_takedowns(lines({"url": "https://a.example.com/y"}, {"domain": "b.org"},
                                    {"doc_id": f"{0:032x}"}), "takedowns/t.jsonl")
    found = takedown_matches(requests, DOCS)
    # the domain covers news.b.org, not notb.org
    assert found.rows() == [(f"{0:032x}", 2), (f"{1:032x}", 0), (f"{2:032x}", 1), (f"{3:032x}", 1)]
    assert [r.target for r in requests] == ["url=https://a.example.com/y", "domain=b.org", f"doc_id={0:032x}"]


def test_a_document_named_twice_is_removed_by_the_first_request():
    requests = read_takedowns(lines({"domain": "example.com"}, {"url": "https://a.example.com/x"}), "t")
    assert takedown_matches(requests, DOCS).filter(pl.col("doc_id") == f"{0:032x}")["request"].to_list() == [0]


@pytest.mark.parametrize("request_, message", [
    ({"url": "https://a/x", "domain": "a"}, "exactly one of url, domain, doc_id"),
    ({}, "exactly one of url, domain, doc_id"),
    ({"doc_id": "../etc"}, "not 32 hex digits"),
    ({"domain": "Bad Domain"}, "not a lower-case host name"),
    ({"url": "file:///etc/passwd"}, "not an http(s) URL"),
    ({"url": "https://a/x", "reason": None}, "valid string"),
    ({"url": "https://a/x", "colour": "red"}, "Extra inputs"),
])
def test_a_bad_line_is_an_error_naming_the_file_and_the_line(request_, message):
    with pytest.raises(ValueError, match=f"takedown list takedowns/x.jsonl, line 2: .*{re.escape(message)}"):
        read_takedowns([*lines({"url": "https://ok.example/"}), json.dumps({**BASE, **request_}).encode()],
                       "takedowns/x.jsonl")


def test_nothing_to_match_is_an_empty_frame():
    assert takedown_matches([], DOCS).is_empty()
    assert takedown_matches([TakedownRequest(url="https://x.org/", **BASE)], DOCS.clear()).is_empty()


def test_a_parts_id_index_holds_its_urls_domains_with_parents_and_doc_ids():
    from llm_assets.core.takedowns import IdIndex

    index = IdIndex.from_bytes(IdIndex.of(DOCS).to_bytes())
    held = [{"url": "https://a.example.com/x"}, {"domain": "example.com"}, {"domain": "news.b.org"},
            {"doc_id": f"{4:032x}"}]
    absent = [{"url": "https://a.example.com/z"}, {"domain": "c.org"}, {"domain": "a.b.org"}, {"doc_id": f"{9:032x}"}]
    assert all(index.holds(TakedownRequest(**r, **BASE)) for r in held)
    assert not any(index.holds(TakedownRequest(**r, **BASE)) for r in absent)


def test_the_filtered_stage_removes_named_documents_first_with_the_request_as_detail():
    from llm_assets.core.filtered import FilteredSettings, filter_batch

    docs = DOCS.with_columns(text=pl.lit("A plain sentence that is long enough to keep. " * 40))
    request = TakedownRequest(domain="b.org", **BASE)
    kept, rejected = filter_batch(docs, FilteredSettings.default_with(language={"enabled": False}), (request,))
    removed = rejected.filter(pl.col("reason") == "takedown")
    assert sorted(removed["doc_id"]) == [f"{2:032x}", f"{3:032x}"]
    assert set(removed["filter"]) == {"takedown"}
    assert {json.loads(d)["domain"] for d in removed["detail"]} == {"b.org"}
    assert not set(kept["doc_id"]) & set(removed["doc_id"])
