"""Opt-out evidence and verdicts: Protego on RFC 9309's cases, the real robots.txt files of a 2008 crawl, TDMRep
in headers, `<meta>` tags and tdmrep.json, and damaged policy files treated as their standards say, each named."""

import io
import json
from datetime import date

import polars as pl
import pytest
from warcio.archiveiterator import ArchiveIterator

from llm_assets.core.optouts import (
    AI_AGENTS,
    Evidence,
    OptOutSettings,
    decide,
    problems_of,
    robots_verdict,
    tdmrep_verdict,
    verdict,
)
from llm_assets.core.policy_files import ROBOTS_MAX_BYTES, capture_of, header_reservation, meta_reservation
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import AUT, read


def robots(body: str | bytes, status: int = 200, host: str = "h.example", fetched: str = "2026-01-01T00:00:00Z"):
    payload = body.encode() if isinstance(body, str) else body
    return capture_of(f"http://{host}/robots.txt", status, fetched, payload, "robots/c/r.warc.gz", 0)


def allowed(body: str, agent: str, path: str) -> bool:
    return robots_verdict(robots(body), "http://h.example" + path, [agent]) is None


# RFC 9309's examples (section 5) and rules (2.2.2 matching, 2.2.3 special characters, 2.4 longest match)
EXAMPLE = """User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF"""
LONGEST = "User-agent: *\nallow: /example/page/\ndisallow: /example/page/disallowed.gif\n"
RFC_9309 = [
    (EXAMPLE, "foobot", "/example/page.html", True), (EXAMPLE, "foobot", "/example/allowed.gif", True),
    (EXAMPLE, "foobot", "/other", False), (EXAMPLE, "FooBot", "/other", False),
    (EXAMPLE, "barbot", "/example/page.html", False), (EXAMPLE, "bazbot", "/example/page.html", False),
    (EXAMPLE, "barbot", "/x.gif", True), (EXAMPLE, "barbot", "/example/other", True),
    (EXAMPLE, "quxbot", "/example/page.html", True), (EXAMPLE, "quxbot", "/a.gif", True),
    (EXAMPLE, "other", "/a.gif", False), (EXAMPLE, "other", "/a.gif?x", True), (EXAMPLE, "other", "/example/x", False),
    (EXAMPLE, "other", "/publications/x", True),
    (LONGEST, "x", "/example/page/", True), (LONGEST, "x", "/example/page/disallowed.gif", False),
    ("User-agent: *\nDisallow: /\n", "x", "/robots.txt", True),
    ("User-agent: *\nDisallow:\n", "x", "/a", True),
    ("\ufeffUser-agent: *\nDisallow: /\n", "x", "/a", False),
    ("user-agent: *\nDISALLOW: /a # comment\n", "x", "/a/b", False),
    ("Disallow: /\nUser-agent: *\nDisallow: /b\n", "x", "/a", True),
    ("User-agent: a\nDisallow: /x\n\nUser-agent: a\nDisallow: /y\n", "a", "/y", False),
    ("User-agent: a\nDisallow: /x\n\nUser-agent: a\nDisallow: /y\n", "a", "/x", False),
    ("User-agent: *\nDisallow: /path/file-with-a-%2A.html\n", "x", "/path/file-with-a-*.html", False),
    ("User-agent: *\nDisallow: /foo/bar?baz=quz\n", "x", "/foo/bar?baz=quz", False),
    ("User-agent: *\nDisallow: /foo/bar/%E3%83%84\n", "x", "/foo/bar/\u30c4", False),
    ("User-agent: *\nDisallow: /foo/bar/\u30c4\n", "x", "/foo/bar/%E3%83%84", False),
    ("User-agent: *\nDisallow: /fish\nAllow: /fish\n", "x", "/fish", True),
    ("User-agent: *\nDisallow: /*.php$\n", "x", "/index.php", False),
    ("User-agent: *\nDisallow: /*.php$\n", "x", "/index.php5", True),
    ("User-agent: *\nDisallow: /a$\n", "x", "/ab", True),
    ("User-agent: *\nDisallow: /\nAllow: /$\n", "x", "/", True),
    # the AI agents: their own group wins over `*`, either way
    ("User-agent: CCBot\nDisallow: /\n\nUser-agent: *\nDisallow:\n", "CCBot", "/a", False),
    ("User-agent: *\nDisallow: /\n\nUser-agent: CCBot\nAllow: /\n", "CCBot", "/a", True),
    ("User-agent: ccbot\nDisallow: /\n", "CCBot", "/a", False),
    ("User-agent: GPTBot\nUser-agent: CCBot\nDisallow: /\n", "CCBot", "/a", False),
    # a product token with a version, as sites write it, names the token (as Google's parser reads it)
    ("User-agent: CCBot/2.0\nDisallow: /\n", "CCBot", "/a", False),
]


@pytest.mark.parametrize(("body", "agent", "path", "expected"), RFC_9309)
def test_the_parser_follows_rfc_9309(body, agent, path, expected):
    assert allowed(body, agent, path) is expected


def test_a_verdict_names_the_rule_line_that_decides():
    capture = robots(EXAMPLE)
    found = robots_verdict(capture, "http://h.example/example/x", ["CCBot"])
    assert (found.kind, found.agent, found.rule) == ("robots_txt", "CCBot", "line 3: Disallow: /example/")
    found = robots_verdict(capture, "http://h.example/other", ["foobot"])
    assert found.rule == "line 7: Disallow:/"
    detail = json.loads(found.detail())
    assert detail["capture"] == "robots/c/r.warc.gz@0" and detail["fetched"] == "2026-01-01T00:00:00Z"


def test_the_real_robots_files_of_a_2008_crawl():
    """The archive.org crawl's 38 robots.txt responses, read as the documents stage reads them: the storage
    nodes and web.archive.org bar every agent, www.archive.org bars none of its pages."""
    _, report = read(shared("warc", AUT).read_bytes())
    captures = {c.url: c for c in report.policy_files}
    assert len(report.policy_files) == 38 and all(c.file == "robots.txt" for c in captures.values())
    node = captures["http://ia331306.us.archive.org/robots.txt"]
    assert robots_verdict(node, "http://ia331306.us.archive.org/any/file", ["CCBot"]).rule == "line 2: Disallow: /"
    web = captures["http://web.archive.org/robots.txt"]
    assert robots_verdict(web, "http://web.archive.org/web/2008/http://x/", AI_AGENTS) is not None
    www = captures["http://www.archive.org/robots.txt"]
    assert robots_verdict(www, "http://www.archive.org/details/texts", AI_AGENTS) is None
    # PayPal lets named search engines in but one path, and bars every other agent (CCBot by `*`)
    paypal = captures["https://www.paypal.com/robots.txt"]
    assert robots_verdict(paypal, "https://www.paypal.com/xclick-auction/1", ["GoogleBot"]) is not None
    assert robots_verdict(paypal, "https://www.paypal.com/cgi-bin/home", ["GoogleBot"]) is None
    assert robots_verdict(paypal, "https://www.paypal.com/cgi-bin/home", ["CCBot"]).rule == "line 26: Disallow: /"
    assert all(c.problems == "" for c in captures.values())


def test_damaged_robots_files_are_treated_as_rfc_9309_says_and_named():
    assert robots_verdict(robots("", status=503), "http://h.example/a", ["CCBot"]).rule.startswith(
        "HTTP 503: unreachable, a complete disallow")
    assert robots_verdict(robots("User-agent: *\nDisallow: /\n", status=404), "http://h.example/a", ["CCBot"]) is None
    assert robots_verdict(robots("", status=503), "http://h.example/a", ["CCBot"], "ai_txt") is None  # RFC 9309 only
    moved = robots("User-agent: *\nDisallow: /\n", status=301)
    assert robots_verdict(moved, "http://h.example/a", ["CCBot"]) is None and "redirect" in moved.problems
    # not UTF-8: the bad line is skipped, the rest parsed, and the file says why
    bad = robots(b"User-agent: *\nDisallow: /\xff\xfe\nDisallow: /b\n")
    assert "not UTF-8" in bad.problems and robots_verdict(bad, "http://h.example/b", ["CCBot"]) is not None
    # huge: the first 500 KiB are parsed (RFC 9309 2.5), a rule after them is not
    huge = robots("User-agent: *\nDisallow: /a\n" + "# padding\n" * (ROBOTS_MAX_BYTES // 10) + "Disallow: /b\n")
    assert len(huge.body.encode()) == ROBOTS_MAX_BYTES and "parsed to 512000" in huge.problems
    assert robots_verdict(huge, "http://h.example/a", ["CCBot"]) and not robots_verdict(huge, "http://h.example/b",
                                                                                        ["CCBot"])
    # garbage lines are ignored; a file of garbage reserves nothing
    assert robots_verdict(robots("<html>not a robots file</html>\n\x00\x01"), "http://h.example/a", ["CCBot"]) is None
    assert problems_of(Evidence.of([bad, huge])) == [
        f"robots/c/r.warc.gz@0 (http://h.example/robots.txt): {c.problems}" for c in (bad, huge)]


def tdmrep(body: bytes, status: int = 200):
    return capture_of("http://h.example/.well-known/tdmrep.json", status, "2026-02-01", body, "k", 7)


def test_tdmrep_json_reserves_the_locations_its_rules_name():
    rules = [{"location": "/news/*", "tdm-reservation": 1, "tdm-policy": "https://h.example/policy.json"},
             {"location": "/*", "tdm-reservation": 0}]
    capture = tdmrep(json.dumps(rules).encode())
    found = tdmrep_verdict(capture, "http://h.example/news/2026/a.html")
    assert found.kind == "tdm_reservation" and found.rule == (
        "rule 1: location /news/*, tdm-policy https://h.example/policy.json")
    assert tdmrep_verdict(capture, "http://h.example/blog/a.html") is None
    for body, problem in ((b"{not json", "is not JSON"), (b'{"location": "/"}', "not an array of rules")):
        broken = tdmrep(body)
        assert problem in broken.problems and tdmrep_verdict(broken, "http://h.example/news/a") is None


def real_headers() -> list[tuple[str, str]]:
    """The HTTP headers of a real HTML response of the 2020 Common Crawl sample."""
    with shared("warc", "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz").open("rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type == "response" and "html" in (record.http_headers.get_header("Content-Type") or ""):
                return list(record.http_headers.headers)
    raise AssertionError("no HTML response")


def test_a_response_reserves_itself_by_header_or_meta_tag():
    headers = real_headers()
    assert header_reservation(headers) is None
    found = json.loads(header_reservation([*headers, ("TDM-Reservation", "1"), ("TDM-Policy", "https://p.example")]))
    assert found == {"kind": "tdm_reservation", "source": "header", "value": "tdm-reservation: 1",
                     "policy": "https://p.example"}
    assert header_reservation([*headers, ("tdm-reservation", "0")]) is None
    assert json.loads(header_reservation([*headers, ("X-Robots-Tag", "noai, noimageai")]))["kind"] == "noai"
    assert json.loads(header_reservation([("X-Robots-Tag", "CCBot: noai")]))["agent"] == "CCBot"
    assert header_reservation([("X-Robots-Tag", "noindex, nofollow")]) is None

    page = '<html><head><title>t</title><meta name="tdm-reservation" content="1"></head><body>x</body></html>'
    assert json.loads(meta_reservation(page))["source"] == "meta"
    assert json.loads(meta_reservation("<head><META CONTENT='noai' NAME='robots'></head>"))["kind"] == "noai"
    assert meta_reservation('<head><meta name="robots" content="noindex"></head>') is None
    assert meta_reservation('<head><meta name="tdm-reservation" content="0"></head>') is None


def docs(*rows) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["doc_id", "url", "domain", "fetch_time", "reservation"], orient="row")


def test_decide_covers_documents_by_their_own_evidence_and_their_hosts():
    evidence = Evidence.of([robots("User-agent: GPTBot\nDisallow: /private\n", host="a.example"),
                            robots("", status=500, host="down.example")])
    batch = docs(("1", "http://a.example/private/x", "a.example", "2026-03-01T00:00:00Z", None),
                 ("2", "http://a.example/public", "a.example", "2026-03-01T00:00:00Z", None),
                 ("3", "http://down.example/", "down.example", "2026-03-01T00:00:00Z", None),
                 ("4", "http://b.example/", "b.example", "2026-03-01T00:00:00Z",
                  header_reservation([("tdm-reservation", "1")])),
                 ("5", "http://b.example/x", "b.example", "2026-03-01T00:00:00Z",
                  header_reservation([("X-Robots-Tag", "SomeOtherBot: noai")])))
    decided = decide(batch, evidence, OptOutSettings())
    assert dict(decided.select("doc_id", "reason").iter_rows()) == {
        "1": "robots_txt", "3": "robots_txt", "4": "tdm_reservation"}
    # a setting that drops the agent, or the kind, covers fewer
    assert decide(batch, evidence, OptOutSettings(agents=("CCBot",)))["doc_id"].to_list() == ["3", "4"]
    assert decide(batch, evidence, OptOutSettings(honour=("robots_txt",)))["doc_id"].to_list() == ["1", "3"]
    assert decide(batch, evidence, OptOutSettings(enabled=False)).is_empty()


def test_which_capture_holds_retroactive_or_as_of_the_fetch_and_before_the_cutoff():
    old = robots("User-agent: *\nDisallow: /\n", fetched="2025-01-01T00:00:00Z")
    new = robots("User-agent: *\nDisallow:\n", fetched="2026-06-01T00:00:00Z")
    url, host = "http://h.example/a", "h.example"
    settings = OptOutSettings()
    assert verdict(url, host, "2025-03-01", None, Evidence.of([old, new]), settings) is None  # the newest holds
    as_of_fetch = settings.model_copy(update={"retroactive": False})
    assert verdict(url, host, "2025-03-01", None, Evidence.of([old, new]), as_of_fetch).capture == old
    assert verdict(url, host, "2024-12-01", None, Evidence.of([old, new]), as_of_fetch) is None
    before_cutoff = Evidence.of([old, new], cutoff=date(2026, 1, 1))
    assert verdict(url, host, "2026-08-01", None, before_cutoff, settings).capture == old
    # a new capture that covers the same documents leaves the evidence of other hosts as it was
    other = robots("User-agent: *\nDisallow: /\n", host="other.example")
    assert Evidence.of([old, other]).version(["h.example"]) == Evidence.of([old]).version(["h.example"])


def test_the_reader_keeps_policy_files_with_their_status_and_sets_them_aside():
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for url, status, body in (("http://a.example/robots.txt", "503 Service Unavailable", b""),
                              ("http://a.example/.well-known/tdmrep.json", "200 OK", b"[]"),
                              ("http://a.example/ai.txt", "200 OK", b"User-Agent: *\nDisallow: *.html\n")):
        http = StatusAndHeaders(status, [("Content-Type", "text/plain")], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))
    records, report = read(buf.getvalue())
    assert records == [] and report.drops["policy_file"] == 3
    assert [(c.file, c.status) for c in report.policy_files] == [("robots.txt", 503), ("tdmrep.json", 200),
                                                                  ("ai.txt", 200)]
    ai = report.policy_files[2]
    assert robots_verdict(ai, "http://a.example/page.html", ["CCBot"], "ai_txt").kind == "ai_txt"
