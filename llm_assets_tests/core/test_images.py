"""Image-text pairs (llm_assets.core.images): one hand-made page per rule, broken input, and real crawled pages
from ../shared/data/warc read with warcio."""

from __future__ import annotations

import dataclasses
import random
from urllib.parse import urlsplit

import pyarrow as pa
import pytest
from warcio.archiveiterator import ArchiveIterator

from llm_assets.core.images import IMAGE_PAIRS_SCHEMA, ImagePairSettings, extract_image_pairs
from llm_assets_support.shared_data import shared

PAGE = "http://example.org/dir/page.html"


def pairs(body: str, page_url: str = PAGE, **settings) -> list[dict]:
    return extract_image_pairs(f"<html><body>{body}</body></html>", page_url, "doc-1", ImagePairSettings(**settings))


def urls(rows: list[dict]) -> list[str]:
    return [r["image_url"] for r in rows]


# --- settings and schema -------------------------------------------------------------------------------------


def test_settings_defaults_and_frozen():
    s = ImagePairSettings()
    assert (s.min_text_chars, s.nearby_chars, s.min_side_px, s.max_images_per_page) == (5, 300, 32, 100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.min_text_chars = 1  # type: ignore[misc]


def test_rows_fit_the_schema():
    rows = pairs('<figure><img src="a.png" alt="A red bicycle" width="640" height="480">'
                 "<figcaption>My bike</figcaption></figure>")
    assert [list(r) for r in rows] == [IMAGE_PAIRS_SCHEMA.names]
    table = pa.Table.from_pylist(rows, schema=IMAGE_PAIRS_SCHEMA)
    assert table.schema.field("width").type == pa.int32()
    assert table.to_pylist() == [{
        "page_doc_id": "doc-1", "page_url": PAGE, "image_url": "http://example.org/dir/a.png",
        "alt": "A red bicycle", "caption": "My bike", "nearby_text": None, "width": 640, "height": 480, "position": 0,
    }]


# --- image URL ---------------------------------------------------------------------------------------------------


def test_relative_urls_resolve_against_page_url():
    rows = pairs('<img src="img/a.png" alt="first image"><img src="/b.png" alt="second image">'
                 '<img src="//cdn.example.net/c.png" alt="third image"><img src="../d.png" alt="fourth image">')
    assert urls(rows) == ["http://example.org/dir/img/a.png", "http://example.org/b.png",
                          "http://cdn.example.net/c.png", "http://example.org/d.png"]


def test_base_href_wins_over_page_url():
    html = ('<html><head><base href="https://static.example.com/assets/"></head>'
            '<body><img src="a.png" alt="a picture"><img src="/root.png" alt="root picture"></body></html>')
    rows = extract_image_pairs(html, PAGE, "d")
    assert urls(rows) == ["https://static.example.com/assets/a.png", "https://static.example.com/root.png"]


def test_relative_base_href_is_itself_resolved_against_page_url():
    html = '<html><head><base href="/media/"></head><body><img src="x.jpg" alt="a picture"></body></html>'
    assert urls(extract_image_pairs(html, PAGE, "d")) == ["http://example.org/media/x.jpg"]


def test_srcset_first_candidate_when_src_missing():
    rows = pairs('<img srcset="small.jpg 480w, large.jpg 1080w" alt="a responsive picture">'
                 '<img srcset="  hi.png 2x" alt="a dense picture">')
    assert urls(rows) == ["http://example.org/dir/small.jpg", "http://example.org/dir/hi.png"]


def test_data_src_lazy_loading():
    rows = pairs('<img data-src="lazy.jpg" alt="lazy picture one">'
                 # the usual lazy-loading placeholder: a data: GIF in src, the real URL in data-src
                 '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" data-src="/real.jpg" alt="lazy picture two">')
    assert urls(rows) == ["http://example.org/dir/lazy.jpg", "http://example.org/real.jpg"]


def test_src_wins_over_data_src_and_srcset():
    rows = pairs('<img src="src.jpg" data-src="lazy.jpg" srcset="set.jpg 1x" alt="which one wins">')
    assert urls(rows) == ["http://example.org/dir/src.jpg"]


def test_data_uri_and_non_http_urls_are_skipped():
    rows = pairs('<img src="data:image/png;base64,iVBORw0KGgo=" alt="inline image">'
                 '<img src="DATA:image/png;base64,iVBORw0KGgo=" alt="inline image upper case">'
                 '<img src="javascript:void(0)" alt="script link">'
                 '<img src="mailto:a@example.org" alt="mail link">'
                 '<img src="ftp://example.org/a.png" alt="ftp picture">'
                 '<img src="http://[broken/a.png" alt="broken host">'
                 '<img alt="no source at all">'
                 '<img src="   " alt="blank source">'
                 '<img src="ok.png" alt="the only good one">')
    assert urls(rows) == ["http://example.org/dir/ok.png"]
    assert rows[0]["position"] == 8


def test_non_http_page_url_gives_no_relative_images():
    rows = extract_image_pairs('<img src="a.png" alt="a picture"><img src="https://x.org/b.png" alt="b picture">',
                               "file:///tmp/page.html", "d")
    assert urls(rows) == ["https://x.org/b.png"]


# --- texts -------------------------------------------------------------------------------------------------------


def test_alt_whitespace_is_collapsed():
    rows = pairs('<img src="a.png" alt="  A   cat\n\tsleeping  ">')
    assert rows[0]["alt"] == "A cat sleeping"


def test_figcaption_of_enclosing_figure():
    rows = pairs('<p>Intro paragraph text.</p>'
                 '<figure><div><img src="a.png"></div>'
                 '<figcaption> The   <b>Eiffel</b> tower\nat night </figcaption></figure>'
                 '<img src="b.png" alt="outside of any figure">')
    a, b = rows
    assert a["caption"] == "The Eiffel tower at night"
    assert a["alt"] is None
    # the closest block is the <div>, which holds only the image: no nearby text, the caption carries the pair
    assert a["nearby_text"] is None
    assert b["caption"] is None


def test_nearby_text_leaves_out_caption_and_scripts():
    rows = pairs('<figure><img src="a.png">Photo by Ann<script>var x = "tracking code";</script>'
                 '<style>.c{color:red}</style><figcaption>The caption</figcaption></figure>')
    assert rows[0]["caption"] == "The caption"
    assert rows[0]["nearby_text"] == "Photo by Ann"


def test_nearby_text_is_the_closest_block_collapsed_and_cut():
    words = " ".join(f"word{i}" for i in range(200))  # about 1,400 characters
    rows = pairs(f'<div>Outer text that is not closest.<p>Before  <a href="#"><img src="a.png"></a>\n after. '
                 f"{words}</p></div>")
    nearby = rows[0]["nearby_text"]
    assert nearby.startswith("Before after. word0 word1")
    assert "Outer text" not in nearby
    assert len(nearby) <= 300
    assert len(nearby) >= 290  # cut at the limit, not earlier
    short = pairs(f"<p>Before <img src='a.png'> after. {words}</p>", nearby_chars=20)[0]["nearby_text"]
    assert short == "Before after. word0"


def test_nearby_text_separates_blocks_but_not_inline_elements():
    rows = pairs('<div><img src="a.png"><p>first</p><p>second</p>un<b>broken</b> word</div>')
    assert rows[0]["nearby_text"] == "first second unbroken word"


def test_nearby_text_equal_to_alt_is_dropped():
    rows = pairs('<p><img src="a.png" alt="Mount Fuji"> Mount   Fuji</p>')
    assert rows[0]["alt"] == "Mount Fuji"
    assert rows[0]["nearby_text"] is None


def test_pair_needs_text_of_min_chars():
    rows = pairs('<img src="a.png" alt="abcd">'                     # alt too short, no block
                 '<img src="b.png" alt="abcde">'                    # alt long enough
                 '<div><img src="c.png" alt="x"> Some text</div>'   # nearby text long enough
                 '<div><img src="d.png"> tiny</div>'                # nearby too short
                 '<img src="e.png">'                                # nothing at all
                 '<figure><img src="f.png"><figcaption>Sunset</figcaption></figure>')  # caption
    assert urls(rows) == ["http://example.org/dir/b.png", "http://example.org/dir/c.png",
                          "http://example.org/dir/f.png"]
    assert urls(pairs('<img src="a.png" alt="abcd">', min_text_chars=4)) == ["http://example.org/dir/a.png"]


# --- size, duplicates, cap, position ----------------------------------------------------------------------------


def test_tracking_pixels_and_spacers_are_dropped():
    rows = pairs('<p>Some paragraph text <img src="pixel.gif" width="1" height="1" alt="tracking pixel">'
                 '<img src="spacer.gif" width="600" height="2" alt="spacer line">'
                 '<img src="icon.png" width="31px" alt="a small icon">'
                 '<img src="edge.png" width="32" height="32" alt="just big enough">'
                 '<img src="px.png" width="64px" height=" 48 " alt="sizes with px">'
                 '<img src="pct.png" width="50%" height="auto" alt="relative sizes">'
                 '<img src="big.png" width="99999999999" alt="absurd size"></p>')
    assert urls(rows) == ["http://example.org/dir/edge.png", "http://example.org/dir/px.png",
                          "http://example.org/dir/pct.png", "http://example.org/dir/big.png"]
    sizes = [(r["width"], r["height"]) for r in rows]
    assert sizes == [(32, 32), (64, 48), (None, None), (None, None)]
    assert urls(pairs('<img src="a.png" width="10" alt="small but allowed">', min_side_px=0)) == [
        "http://example.org/dir/a.png"]


def test_duplicate_image_urls_keep_the_first():
    rows = pairs('<img src="logo.png" alt="Logo in the header">'
                 '<img src="a.png" alt="another picture">'
                 '<img src="http://example.org/dir/logo.png" alt="Logo in the footer">'
                 '<img src="./logo.png" alt="Logo again">')
    assert urls(rows) == ["http://example.org/dir/logo.png", "http://example.org/dir/a.png"]
    assert rows[0]["alt"] == "Logo in the header"
    assert rows[0]["position"] == 0


def test_duplicate_without_text_does_not_block_a_later_usable_one():
    rows = pairs('<img src="a.png"><img src="a.png" alt="described the second time">')
    assert [(r["alt"], r["position"]) for r in rows] == [("described the second time", 1)]


def test_position_counts_every_img_and_cap_limits_pairs():
    body = "".join(f'<img src="i{i}.png" alt="picture number {i}">' if i % 2 else '<img src="x.gif" width="1">'
                   for i in range(20))
    rows = pairs(body)
    assert [r["position"] for r in rows] == list(range(1, 20, 2))
    capped = pairs(body, max_images_per_page=3)
    assert [r["position"] for r in capped] == [1, 3, 5]
    assert len(pairs("".join(f'<img src="{i}.png" alt="picture {i}">' for i in range(250)))) == 100


# --- broken input --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("html", [
    "",
    "   \n\t ",
    "\x00\x01\x02\x03",
    "\x00" * 1000,
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00".decode("utf-8", errors="replace"),
    bytes(range(256)).decode("utf-8", errors="replace"),
    "<",
    "<html",
    "<<<>>><img",
    '<img src="a.png" alt="',
    "\udcff\ud800 lone surrogates",
])
def test_broken_html_returns_empty(html):
    assert extract_image_pairs(html, PAGE, "d") == []


def test_unclosed_tags_are_repaired_not_fatal():
    html = '<html><body><div><p>Unclosed paragraph <b>bold <img src="a.png" alt="still found"><table><td>cell'
    rows = extract_image_pairs(html, PAGE, "d")
    assert urls(rows) == ["http://example.org/dir/a.png"]
    assert rows[0]["nearby_text"].startswith("Unclosed paragraph bold")


def test_xml_declaration_and_nul_bytes_do_not_stop_parsing():
    html = ('<?xml version="1.0" encoding="iso-8859-1"?><html><body>'
            '<p>Caf\u00e9 \x00menu <img src="m.png" alt="Menu board"></p></body></html>')
    rows = extract_image_pairs(html, PAGE, "d")
    assert [(r["image_url"], r["nearby_text"]) for r in rows] == [("http://example.org/dir/m.png", "Café menu")]


def test_random_bytes_never_raise():
    rng = random.Random(1234)
    pieces = ["<img ", 'src="', "a.png", '" ', "alt='", "<figure>", "<figcaption>", "</", ">", "<p>", "data:",
              "srcset=", "<base href=", "\x00", "\ufffd", " ", "width=1", "<div>", "]", "http://[", "'"]
    for _ in range(300):
        if rng.random() < 0.5:
            html = bytes(rng.randrange(256) for _ in range(rng.randrange(200))).decode("utf-8", errors="replace")
        else:
            html = "".join(rng.choice(pieces) for _ in range(rng.randrange(60)))
        rows = extract_image_pairs(html, PAGE, "d")
        assert isinstance(rows, list)
        for r in rows:
            assert urlsplit(r["image_url"]).scheme in ("http", "https")


# --- real crawled pages ----------------------------------------------------------------------------------------

REAL_FILES = ["dolma__sample-0000.warc.gz", "aut__example.IAH-2008-archive.org.warc.gz"]


def real_pages(name: str) -> list[tuple[str, str]]:
    """(url, html) of every response record with a text/html content type, payload decoded as UTF-8."""
    pages = []
    with shared("warc", name).open("rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type != "response" or record.http_headers is None:
                continue
            if "text/html" not in (record.http_headers.get_header("Content-Type") or "").lower():
                continue
            html = record.content_stream().read().decode("utf-8", errors="replace")
            pages.append((record.rec_headers.get_header("WARC-Target-URI"), html))
    return pages


@pytest.fixture(scope="module")
def real_pairs() -> dict[str, dict[str, list[dict]]]:
    """file -> page url -> pairs."""
    out: dict[str, dict[str, list[dict]]] = {}
    for name in REAL_FILES:
        pages = real_pages(name)
        out[name] = {url: extract_image_pairs(html, url, f"{name}#{i}") for i, (url, html) in enumerate(pages)}
    return out


def test_real_pages_counts(real_pairs):
    # Counted by running over the files: 22 HTML responses in the dolma sample, 140 in the archive.org crawl
    # (including its 404s and redirects, which are text/html too).
    dolma, aut = real_pairs[REAL_FILES[0]], real_pairs[REAL_FILES[1]]
    assert (len(dolma), len(aut)) == (22, 140)
    assert sum(map(len, dolma.values())) == 90
    assert sum(map(len, aut.values())) == 314
    assert sum(1 for rows in dolma.values() if rows) == 12


def test_real_pairs_invariants(real_pairs):
    settings = ImagePairSettings()
    for pages in real_pairs.values():
        for page_url, rows in pages.items():
            assert len(rows) <= settings.max_images_per_page
            assert len({r["image_url"] for r in rows}) == len(rows), page_url
            positions = [r["position"] for r in rows]
            assert positions == sorted(set(positions)), page_url
            pa.Table.from_pylist(rows, schema=IMAGE_PAIRS_SCHEMA)  # types and non-null columns hold
            for r in rows:
                parts = urlsplit(r["image_url"])
                assert parts.scheme in ("http", "https") and parts.netloc, r
                assert r["page_url"] == page_url
                assert max(len(r[k] or "") for k in ("alt", "caption", "nearby_text")) >= settings.min_text_chars
                assert len(r["nearby_text"] or "") <= settings.nearby_chars
                assert r["width"] is None or r["width"] >= settings.min_side_px
                assert r["height"] is None or r["height"] >= settings.min_side_px


def by_url(rows: list[dict]) -> dict[str, dict]:
    return {r["image_url"]: r for r in rows}


def test_real_known_images(real_pairs):
    dolma, aut = real_pairs[REAL_FILES[0]], real_pairs[REAL_FILES[1]]

    # soldaini.net: <img src=/alt.webp alt="A raccoon ..."> followed by a caption paragraph in the same <div>.
    raccoon = by_url(dolma["https://soldaini.net/"])["https://soldaini.net/alt.webp"]
    assert raccoon["alt"] == ("A raccoon wearing a top hat and holding a pizza slice. "
                              "Luca sometimes uses this image as their online profile picture.")
    assert raccoon["nearby_text"] == "DALL•E 2 generation (April 2022)"
    assert raccoon["position"] == 1

    # amyxzhang.wordpress.com: a <figure> with no alt, described only by its <figcaption>.
    chat = by_url(dolma["https://amyxzhang.wordpress.com/"])[
        "https://amyxzhang.wordpress.com/wp-content/uploads/2019/01/a79ef-0boxzvmrh5_j1d8jw.png?w=500&h=522"]
    assert (chat["alt"], chat["caption"], chat["nearby_text"]) == (
        None, "Remember opening your chat after a vacation?", None)

    # archive.org home page (2008): relative src, declared size 84x70.
    logo = aut["http://www.archive.org/index.php"][0]
    assert (logo["image_url"], logo["alt"], logo["width"], logo["height"], logo["position"]) == (
        "http://www.archive.org/images/logo.jpg", "(logo)", 84, 70, 0)
    assert len(aut["http://www.archive.org/index.php"]) == 14


def test_real_small_images_are_dropped(real_pairs):
    dolma, aut = real_pairs[REAL_FILES[0]], real_pairs[REAL_FILES[1]]
    # maria-antoniak.github.io: its only image is a 25x25 avatar -> no pair.
    assert dolma["https://maria-antoniak.github.io/"] == []
    # semanticscholar: 18x18 menu icons and a 12px "Icon - Account" (alt of 14 chars, still dropped for size).
    s2 = urls(dolma["https://www.semanticscholar.org/research/research-team"])
    assert len(s2) == 38
    assert not any("menu-icon-" in u or "icon-account" in u for u in s2)
    # archive.org/web/web.php: 13x11 arrows.
    assert not any(u.endswith("/images/arrow.gif") for u in urls(aut["http://www.archive.org/web/web.php"]))
