"""Charset decoding (`llm_assets.core.charset`): known texts in five charsets with and without a declaration, the
order declarations are trusted in, labels that are wrong or no text codec, and bytes that decode nowhere."""

from __future__ import annotations

import codecs
import random

import pytest

from llm_assets.core.charset import decode_html, detect_charset, normalize_label
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.readers.helpers import AUT, payloads, read, warc_file

# Known text in each charset, long enough for detection (Natsume Soseki, Kawabata, Romance of the Three Kingdoms,
# Anna Karenina, Proust).
KNOWN = {
    "EUC-JP": "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
              "何でも薄暗いじめじめした所でニャーニャー泣いていた事"
              "だけは記憶している。吾輩はここで始めて人間というものを見た。",
    "Shift_JIS": "国境の長いトンネルを抜けると雪国であった。夜の底が白くなった。信号所に汽車が止まった。"
                 "向側の座席から娘が立って来て、"
                 "島村の前のガラス窓を落した。雪の冷気が流れこんだ。",
    "GB18030": "天下大势，分久必合，合久必分。周末七国分争，并入于秦。及秦灭之后，楚、汉分争，又并入于汉。"
               "汉朝自高祖斩白蛇而起义，"
               "一统天下，后来光武中兴，传至献帝，遂分为三国。",
    "windows-1251": "Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему. Всё "
                    "смешалось в доме Облонских. Жена узнала, что муж был в связи с бывшею в их доме гувернанткой.",
    "windows-1252": "Longtemps, je me suis couché de bonne heure. Parfois, à peine ma bougie éteinte, mes yeux se "
                    "fermaient si vite que je n’avais pas le temps de me dire : « Je m’endors. » Et, une demi-heure "
                    "après, la pensée qu’il était temps de chercher le sommeil m’éveillait.",
}


def _page(text: str) -> str:
    return f"<html><head><title>t</title></head><body><p>{text}</p></body></html>"


@pytest.mark.parametrize("label", sorted(KNOWN))
@pytest.mark.parametrize("declared", ["header", "meta", "none"])
def test_known_text_decodes_with_and_without_a_declared_charset(label, declared):
    """A page encoded in `label` decodes to its text from the HTTP header, from <meta>, or (undeclared) by
    detection; the charset reported is a codec that really decodes those bytes to that text."""
    page = _page(KNOWN[label])
    payload = page.encode(label)
    assert payload.decode("utf-8", errors="replace") != page  # not UTF-8 by accident
    meta = f'<meta charset="{label}">'.encode() if declared == "meta" else b""
    content_type = f"text/html; charset={label}" if declared == "header" else "text/html"
    html, charset = decode_html(meta + payload, content_type)
    assert html == meta.decode() + page
    assert (meta + payload).decode(charset) == html
    if declared != "none":
        assert charset == normalize_label(label)


def test_undeclared_charsets_inside_a_warc():
    """Responses without any charset (header or <meta>) in five encodings, in one WARC: each decodes to its text."""
    records, report = read(warc_file([(f"http://example.com/{label}", "text/html", _page(text).encode(label))
                                      for label, text in KNOWN.items()]))
    assert [r.html for r in records] == [_page(text) for text in KNOWN.values()]
    assert [r.url for r in records] == [f"http://example.com/{label}" for label in KNOWN]
    assert report.quarantined == []


def test_header_charset_wins():
    """The HTTP Content-Type charset is used first, even when a <meta> tag says otherwise."""
    payload = '<meta charset="utf-8"><p>Привет, мир</p>'.encode("windows-1251")
    assert decode_html(payload, 'text/html; charset="Windows-1251"') == (
        '<meta charset="utf-8"><p>Привет, мир</p>', "windows-1251")
    # ISO-8859-1 is decoded as its superset windows-1252, as browsers do
    assert decode_html(b"caf\xe9 \x93quoted\x94", "text/html; charset=ISO-8859-1") == ("café “quoted”", "cp1252")


@pytest.mark.parametrize("meta", [b'<meta charset="windows-1251">', b"<META CHARSET=windows-1251 />",
                                  b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'])
def test_meta_charset_when_the_header_has_none(meta):
    """Without a header charset, the <meta> charset (either form, any case) decodes the page."""
    body = "<p>Стратегия пожарной безопасности</p>"
    html, charset = decode_html(meta + body.encode("windows-1251"), "text/html")
    assert (html.endswith(body), charset) == (True, "windows-1251")


def test_unknown_labels_fall_through():
    """A charset label Python does not know is skipped, not fatal."""
    assert decode_html('<meta charset="x-nonsense">café'.encode(), "text/html; charset=bogus") == (
        '<meta charset="x-nonsense">café', "utf-8")
    assert normalize_label("bogus") is None and normalize_label("") is None and normalize_label(None) is None


def test_undeclared_utf8_and_invalid_bytes():
    """No declaration: UTF-8 when it decodes; bytes that are UTF-8 nowhere are never an exception."""
    assert decode_html("日本語".encode(), "text/html") == ("日本語", "utf-8")
    assert decode_html(b"", "text/html") == ("", "utf-8")
    html, charset = decode_html(b"na\xefve \x81\x8d ok", "text/html")
    assert html.startswith("na") and html.endswith(" ok") and b"na\xefve \x81\x8d ok".decode(charset, "replace") == html


def test_gb2312_label_decodes_gbk_pages():
    """Pages labelled gb2312 routinely use GBK characters (real case: 096355.com in the CC-MAIN-2020-34 file)."""
    text = "正在播放，請使用"
    html, charset = decode_html(b'<meta http-equiv="Content-Type" content="text/html; charset=gb2312" />'
                                + text.encode("gbk"), "text/html")
    assert html.endswith(text) and charset == "gb18030"


def test_declared_utf8_with_one_stray_byte_keeps_its_characters():
    """A stray byte becomes U+FFFD; the page's other characters stay as the declared charset says."""
    html, _ = decode_html("Café – 中文 ".encode() + b"\xff", "text/html; charset=utf-8")
    assert html == "Café – 中文 \ufffd"


def test_bom_decides():
    """A byte-order mark outranks any declaration."""
    assert decode_html(codecs.BOM_UTF16_LE + "Привет".encode("utf-16-le"), "text/html; charset=utf-8") == (
        "Привет", "utf-16")
    assert decode_html(codecs.BOM_UTF8 + "café".encode(), "text/html; charset=windows-1251")[0] == "café"


LABELS = ["utf-8", "UTF-8", "windows-1251", "EUC-JP", "Shift_JIS", "gb2312", "GB18030", "big5", "euc-kr", "utf-16",
          "utf-32", "iso-2022-jp", "koi8-r", "ISO-8859-1", "x-nonsense", ""]


def test_undecodable_bytes_never_raise():
    """Random bytes and real binary payloads, under every common label (header or meta) and none: always a str,
    and the bytes decode with the charset reported."""
    rng = random.Random(20240522)
    blobs = [rng.randbytes(rng.randrange(1, 3000)) for _ in range(40)]
    blobs += [p for _, p in payloads(shared("warc", AUT).read_bytes(), "image/")[:10]]
    for i, blob in enumerate(blobs):
        label = LABELS[i % len(LABELS)]
        meta = f"<meta charset={label}>".encode()
        for content_type, prefix in ((f"text/html; charset={label}", b""), ("text/html", meta), ("", b"")):
            html, charset = decode_html(prefix + blob, content_type)
            assert isinstance(html, str) and (prefix + blob).decode(charset, errors="replace") == html
    assert detect_charset(b"") is None or isinstance(detect_charset(b""), str)


@pytest.mark.parametrize("label", ["base64", "hex", "rot13", "undefined", "idna"])
def test_non_text_codec_labels_never_raise(label):
    """A label naming a codec that is no text encoding is an unknown label: no exception."""
    for payload in (b"<p>caf\xc3\xa9</p>", b"<p>caf\xe9</p>"):
        html, _ = decode_html(payload, f"text/html; charset={label}")
        assert html.startswith("<p>caf") and html.endswith("</p>")


@pytest.mark.parametrize("compress", [True, False], ids=["gzip per record", "uncompressed"])
def test_a_page_declaring_a_non_text_codec_is_read_like_the_others(compress):
    """One page declaring charset=hex between two ordinary pages: all three are read."""
    data = warc_file([("http://a.example/", "text/html; charset=utf-8", b"<p>one</p>"),
                      ("http://b.example/", "text/html; charset=hex", b"<p>two</p>"),
                      ("http://c.example/", "text/html", b"<p>three</p>")], compress)
    records, report = read(data)
    assert [r.html for r in records] == ["<p>one</p>", "<p>two</p>", "<p>three</p>"]
    assert report.quarantined == []
