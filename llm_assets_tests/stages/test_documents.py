"""A record `documents` sets aside for its content (a page with no text, an error status, not HTML) never became a
document, yet `why URL` and `trace URL` find it with the stage and the reason: the rejected part holds it by URL and
doc id, and is indexed like a documents part. Real WARC records plus such pages, through the real stage."""

from __future__ import annotations

import gzip
import io
import json

import dagster as dg
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from llm_assets import cli
from llm_assets.core.inventory import shard_of
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import load_settings
from llm_assets_support.shared_data import shared
from llm_assets_tests.conftest import built
from resources import LakeIOManager

DEEP = "http://deep.example/nested"  # 100,000 nested <div>s: the extractor finds no text
MISSING = "http://deep.example/missing"  # a 404
IMAGE = "http://deep.example/logo.png"  # not HTML


def _response(url: str, status: str, content_type: str, body: bytes) -> bytes:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    http = StatusAndHeaders(status, [("Content-Type", content_type)], protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))
    return out.getvalue()


def test_why_and_trace_find_a_page_documents_set_aside(store_env, object_store, instance, crawl, capsys):
    warc = shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz").read_bytes()
    deep = b"<html><body>" + b"<div>" * 100_000 + b"</div>" * 100_000 + b"</body></html>"
    data = (warc + _response(DEEP, "200 OK", "text/html", deep)
            + _response(MISSING, "404 Not Found", "text/html", b"<html><body><p>Not here</p></body></html>")
            + _response(IMAGE, "200 OK", "image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64))
    assert gzip.decompress(data)  # one valid gzip-per-record WARC
    key = f"raw/{crawl}/pages.warc.gz"
    object_store.lake().put_bytes(key, data)
    shard = shard_of(key, load_settings().shards)
    instance.add_dynamic_partitions("crawl", [crawl])
    result = dg.materialize(built("raw_files", "documents"), partition_key=crawl_shard_key(crawl, shard),
                            instance=instance, resources={"store": object_store,
                                                          "lake_io_manager": LakeIOManager(store=object_store)})
    assert result.success
    (event,) = [e for e in result.get_asset_materialization_events()
                if e.materialization.asset_key == dg.AssetKey("documents")]
    dropped = event.materialization.metadata["dropped_by_reason"].value
    assert dropped["no_text"] >= 1 and dropped["non_2xx"] == 1 and dropped["non_html"] == 1

    assert cli.main(["why", DEEP, "--crawl", crawl]) == 0
    said = capsys.readouterr().out
    assert f"dropped at documents in {crawl}|{shard}: documents/no_text" in said, said
    assert cli.main(["trace", DEEP, "--crawl", crawl, "--json"]) == 0
    (step,) = json.loads(capsys.readouterr().out)["steps"]
    assert (step["stage"], step["outcome"], step["facts"]["reason"]) == ("documents", "dropped", "no_text")
    assert len(step["doc_id"]) == 32  # the id it would have had: `why DOC_ID` finds it too
    assert cli.main(["why", step["doc_id"], "--crawl", crawl]) == 0
    assert "documents/no_text" in capsys.readouterr().out
    for url, reason in ((MISSING, "non_2xx"), (IMAGE, "non_html")):
        assert cli.main(["trace", url, "--crawl", crawl]) == 0
        out = capsys.readouterr().out
        assert "documents" in out and "dropped" in out and f'"reason": "{reason}"' in out, out
    # a page that became a document is still found as kept, and an unknown URL is not found
    assert cli.main(["trace", "http://deep.example/never-crawled", "--crawl", crawl]) == 1
    assert "not found" in capsys.readouterr().out
