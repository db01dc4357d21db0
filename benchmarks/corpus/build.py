"""The corpus's plan and its files: which text goes into which page of which WARC file of which crawl, what is
planted where, and the WARC files themselves, written in parallel by file.

Everything is drawn from one seeded generator in the plan (the same pages, texts and plants every time), and each
file's own choices (templates, sizes, charsets, the records around its pages) from a generator seeded by the file's
name: a file's bytes do not depend on how many processes write the corpus or in which order.
"""

from __future__ import annotations

import bisect
import hashlib
import html
import json
import os
import random
import re
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from benchmarks.corpus import templates, warc
from benchmarks.corpus.templates import SizeModel, Template
from llm_assets_support import debian_docs as sources
from llm_assets_support.debian_docs import DEBS, SourceText


@dataclass(frozen=True)
class Rates:
    """How often each kind of page or record is planted: per HTML page of the plan (pages), or per page written,
    as a record beside it (records). Common Crawl's own rates are not published per file; these are stated."""

    exact_duplicate: float = 0.03  # a page whose text is another page's, elsewhere in the crawl or in the other
    near_duplicate: float = 0.03  # another page's text with scattered words replaced (Jaccard 0.70-0.98, measured)
    boilerplate_page: float = 0.01  # one of a few short texts every such page shares (tag pages, notices)
    other_crawl: float = 0.5  # of the duplicates: the source page is in the other crawl
    comments: float = 0.10  # pages with a comment thread below the text (other texts' paragraphs; not gold)
    legacy_charset: float = 0.15  # pages of a language with a legacy charset written in it
    misdeclared_charset: float = 0.002  # written in a legacy charset, declared UTF-8 in the HTTP header
    unknown_charset: float = 0.001  # declared with a label no browser knows
    redirect: float = 0.03  # records: 301/302 with a Location header
    not_found: float = 0.015  # records: 404 pages
    server_error: float = 0.005  # records: 500/503
    image: float = 0.02  # records: PNG images
    pdf: float = 0.005  # records: PDF documents
    revisit: float = 0.02  # records: a later fetch of a page of the same file, identical payload
    oversized: float = 0.0002  # pages padded past 5 MB: half whole, half cut at 1 MiB (WARC-Truncated: length)
    damaged: float = 0.0002  # records whose gzip member is cut short (the reader quarantines and resyncs)


# A page of a language that has one is sometimes written in its legacy charset (as many sites still are).
LEGACY_CHARSETS = {
    "ru": ("windows-1251", "koi8-r"), "uk": ("windows-1251",), "ja": ("shift_jis", "euc-jp"), "zh": ("gb18030",),
    "ko": ("euc-kr",), "el": ("iso-8859-7",), "tr": ("iso-8859-9",), "pl": ("iso-8859-2",), "cs": ("iso-8859-2",),
    "sk": ("iso-8859-2",), "sl": ("iso-8859-2",), "hu": ("iso-8859-2",), "ar": ("windows-1256",),
    "fa": ("windows-1256",), "vi": ("windows-1258",), "de": ("iso-8859-1", "windows-1252"),
    "fr": ("iso-8859-1", "windows-1252"), "es": ("iso-8859-1",), "it": ("iso-8859-1",), "pt": ("iso-8859-1",),
    "nl": ("iso-8859-1",), "da": ("iso-8859-1",), "sv": ("iso-8859-1",), "fi": ("iso-8859-1",),
    "ca": ("iso-8859-1",), "en": ("iso-8859-1", "us-ascii"),
}
TAIWAN_CHARSETS = ("big5",)


NEAR_SOURCE_WORDS = 50


@dataclass(frozen=True)
class Options:
    out: Path
    seed: int = 41
    pages: int = 100_000  # HTML pages with text (originals and planted copies)
    pages_per_file: int = 2_000
    crawls: tuple[str, str] = ("BENCH-2026-A", "BENCH-2026-B")
    full: bool = True  # every source package; False: the test slice's two
    workers: int = 2
    debs: Path = DEBS  # where the packages are downloaded and unpacked (kept between builds)
    rates: Rates = field(default_factory=Rates)


@dataclass(frozen=True)
class PagePlan:
    """One HTML page with text: where it goes and what it holds."""

    page: int  # index over the whole corpus
    crawl: str
    file: str
    kind: str  # original | exact_duplicate | near_duplicate | boilerplate
    text: int  # index of its SourceText (for a copy: the source page's)
    source_page: int = -1  # for a copy: the page it copies
    jaccard: float = 1.0  # a near copy's target (the measured one is in the gold)


def plan(opts: Options, texts: list[SourceText]) -> list[PagePlan]:
    rng = random.Random(opts.seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    boiler = sorted((i for i, t in enumerate(texts) if 5 <= t.words <= 30), key=lambda i: texts[i].path)[:12]
    half = opts.pages // 2
    pages: list[PagePlan] = []
    originals: dict[str, list[int]] = {c: [] for c in opts.crawls}
    long_originals: dict[str, list[int]] = {c: [] for c in opts.crawls}
    next_text = 0
    r = opts.rates
    for n in range(opts.pages):
        crawl = opts.crawls[0] if n < half else opts.crawls[1]
        index_in_crawl = n if n < half else n - half
        file = f"{crawl}-{index_in_crawl // opts.pages_per_file:05d}.warc.gz"
        draw = rng.random()
        other = opts.crawls[1] if crawl == opts.crawls[0] else opts.crawls[0]
        if draw < r.exact_duplicate + r.near_duplicate and long_originals[crawl]:
            near = draw >= r.exact_duplicate
            # a near copy of a text of a few words is no near copy: its sources have NEAR_SOURCE_WORDS or more
            sources_ = long_originals if near else originals
            pool = sources_[other] if rng.random() < r.other_crawl and sources_[other] else sources_[crawl]
            source = pages[rng.choice(pool)]
            pages.append(PagePlan(n, crawl, file, "near_duplicate" if near else "exact_duplicate", source.text,
                                  source.page, round(rng.uniform(0.70, 0.98), 3) if near else 1.0))
            continue
        if draw < r.exact_duplicate + r.near_duplicate + r.boilerplate_page and boiler:
            pages.append(PagePlan(n, crawl, file, "boilerplate", rng.choice(boiler)))
            continue
        if next_text >= len(order):  # every text used once: the corpus is as large as its sources allow
            break
        pages.append(PagePlan(n, crawl, file, "original", order[next_text]))
        originals[crawl].append(n)
        if texts[order[next_text]].words >= NEAR_SOURCE_WORDS:
            long_originals[crawl].append(n)
        next_text += 1
    return pages


def near_copy(blocks: list[tuple[str, str]], target: float, rng: random.Random,
              ngram: int = 5) -> tuple[list[tuple[str, str]], float]:
    """The blocks with words replaced at scattered places so that the Jaccard similarity of the texts' word
    `ngram`-gram sets is about `target`; -> (the copy's blocks, the similarity measured)."""
    words = [text.split(" ") for _, text in blocks]
    places = [(b, w) for b, ws in enumerate(words) for w in range(len(ws))]
    n = max(1, len(places) - ngram + 1)
    # each replaced word, far enough from the others, changes `ngram` shingles: J = (n - g k) / (n + g k)
    k = max(1, round(n * (1 - target) / (ngram * (1 + target))))
    original = "\n".join(t for _, t in blocks)
    state = rng.getstate()
    for _ in range(2):  # a second pass corrects k by what the first measured (nearby replacements overlap)
        rng.setstate(state)
        edited = [list(ws) for ws in words]
        for b, w in rng.sample(places, min(k, len(places))):
            edited[b][w] = rng.choice(("indeed", "perhaps", "certainly", "however", "meanwhile", "notably"))
        copy = [(kind, " ".join(ws)) for (kind, _), ws in zip(blocks, edited, strict=True)]
        measured = jaccard(original, "\n".join(t for _, t in copy), ngram)
        if measured in (0.0, 1.0):
            break
        k = max(1, round(k * ((1 - target) / (1 + target)) / ((1 - measured) / (1 + measured))))
    return copy, measured


def jaccard(a: str, b: str, ngram: int = 5) -> float:
    def shingles(s: str) -> set[tuple[str, ...]]:
        w = s.split()
        return {tuple(w[i:i + ngram]) for i in range(max(1, len(w) - ngram + 1))}

    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


# What every worker process holds, loaded once by `_init`.
_STATE: dict = {}


@dataclass(frozen=True)
class FileResult:
    crawl: str
    name: str
    bytes: int
    sha256: str
    records: dict[str, int]
    gold: list[dict]
    page_sizes: list[int]


def _init(opts: Options, texts: list[SourceText], extras: dict) -> None:
    _STATE.update(opts=opts, texts=texts, **extras)


def write_file(crawl: str, name: str, pages: list[PagePlan]) -> FileResult:
    """Writes one WARC file (to a temporary name, renamed when complete)."""
    opts: Options = _STATE["opts"]
    texts: list[SourceText] = _STATE["texts"]
    tmpl: list[Template] = _STATE["templates"]
    pool: list[str] = _STATE["pool"]
    size_model: SizeModel = _STATE["size_model"]
    images: list[bytes] = _STATE["images"]
    rng = random.Random(f"{opts.seed}/{name}")
    r = opts.rates
    ids = _Ids(rng)
    base = datetime(2026, 10, 1, tzinfo=timezone.utc) + timedelta(days=30 * opts.crawls.index(crawl))
    info_id = ids.next()
    out = bytearray(warc.gzip_member(warc.warcinfo(info_id, name, _date(base), [
        ("software", "llm-assets corpus builder (benchmarks/corpus)"), ("format", "WARC File Format 1.1"),
        ("conformsTo", "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"),
        ("isPartOf", crawl), ("description", f"seed {opts.seed}: real text in real page templates"),
        ("robots", "checked via crawler-commons (1.4-SNAPSHOT)")]).to_bytes()))
    records: Counter[str] = Counter(warcinfo=1)
    gold: list[dict] = []
    sizes: list[int] = []
    written: list[tuple[str, str, str, warc.HttpResponse]] = []  # (url, date, response id, response) for revisits

    def emit(capture: warc.Capture) -> None:
        for rec in capture.records(info_id):
            member = warc.gzip_member(rec.to_bytes())
            if rec.type == "response" and rng.random() < r.damaged:
                member = member[: len(member) // 2]
                records["damaged"] += 1
            out.extend(member)
            records[rec.type] += 1

    for p in pages:
        t = texts[p.text]
        when = base + timedelta(seconds=p.page * 37 % (28 * 86400))
        target = size_model.draw(rng)
        template = _template(tmpl, _STATE["template_sizes"], target - t.chars, rng)
        url = f"https://{template.host}/{t.tag}/{_slug(t.title)}-{p.page}.html"
        blocks = [(b.kind, b.text) for b in t.blocks]
        measured = 1.0
        if p.kind == "near_duplicate":
            blocks, measured = near_copy(blocks, p.jaccard, rng)
        main = _main_html(blocks)
        if rng.random() < r.comments:
            main += _comments(rng, texts, t.language)
        payload_text = _page(template, t, main, target, pool, rng)
        oversized = rng.random() < r.oversized
        if oversized:
            payload_text = payload_text.replace("</body>", "<!-- " + "x" * 6_000_000 + " -->\n</body>", 1)
        charset, declared, where = _charset(rng, r, t)
        payload_text = _declare(payload_text, declared if where in ("meta", "both") else None)
        payload = payload_text.encode(charset, "xmlcharrefreplace")
        truncated = oversized and rng.random() < 0.5
        if truncated:
            payload = payload[: warc.CC_TRUNCATE_BYTES]
        content_type = f"text/html; charset={declared}" if where in ("header", "both") else "text/html"
        response = warc.HttpResponse(200, "OK", [*template.headers, ("Content-Type", content_type),
                                                 ("Content-Length", str(len(payload)))], payload, truncated)
        capture = _capture(ids, url, when, template, response, t.language, charset)
        before = records["damaged"]
        emit(capture)
        written.append((url, _date(when), capture.response_id, response))
        sizes.append(len(payload))
        gold.append({
            "crawl": crawl, "file": name, "warc_record_id": capture.response_id, "url": url, "page": p.page,
            "kind": p.kind, "source_page": p.source_page, "jaccard": measured, "package": t.package,
            "source_path": t.path, "tag": t.tag, "language": t.language, "script": t.script,
            "script_share": round(t.script_share, 3), "charset": charset, "declared_charset": declared,
            "declared_in": where, "payload_bytes": len(payload), "truncated": truncated, "oversized": oversized,
            "damaged": records["damaged"] > before, "text": "\n".join(b for _, b in blocks)})
        _others(rng, r, ids, emit, records, written, template, when, t, images, out, info_id)
    data = bytes(out)
    tmp = opts.out / "crawls" / crawl / f".{name}.tmp"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(data)
    os.replace(tmp, tmp.with_name(name))
    return FileResult(crawl, name, len(data), hashlib.sha256(data).hexdigest(), dict(records), gold, sizes)


def _others(rng, r: Rates, ids, emit, records, written, template: Template, when, t: SourceText, images, out,
            info_id) -> None:
    """The records a crawl holds beside its pages: redirects, errors, images, PDFs, revisits."""
    host = template.host
    if rng.random() < r.redirect:
        status = rng.choice((301, 302))
        target = f"https://{host}/{t.tag}/{ids.short()}.html"
        body = f'<html><head><title>Moved</title></head><body><a href="{target}">here</a></body></html>'.encode()
        emit(_capture(ids, f"http://{host}/{ids.short()}", when, template, warc.HttpResponse(
            status, "Moved Permanently" if status == 301 else "Found",
            [("Location", target), ("Content-Type", "text/html"), ("Content-Length", str(len(body)))], body),
            t.language, "utf-8"))
        records["redirect"] += 1
    if rng.random() < r.not_found:
        body = (template.head + "<h1>404 Not Found</h1><p>The page you requested could not be found.</p>"
                + template.tail).encode("utf-8", "xmlcharrefreplace")
        emit(_capture(ids, f"https://{host}/{t.tag}/{ids.short()}", when, template, warc.HttpResponse(
            404, "Not Found", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))],
            body), t.language, "utf-8"))
        records["not_found"] += 1
    if rng.random() < r.server_error:
        status = rng.choice((500, 503))
        body = b"<html><body><h1>Service Unavailable</h1></body></html>"
        emit(_capture(ids, f"https://{host}/{ids.short()}", when, template, warc.HttpResponse(
            status, "Internal Server Error" if status == 500 else "Service Unavailable",
            [("Content-Type", "text/html"), ("Content-Length", str(len(body)))], body), t.language, "utf-8"))
        records["server_error"] += 1
    if rng.random() < r.image and images:
        body = rng.choice(images)
        emit(_capture(ids, f"https://{host}/images/{ids.short()}.png", when, template, warc.HttpResponse(
            200, "OK", [("Content-Type", "image/png"), ("Content-Length", str(len(body)))], body), t.language, ""))
        records["image"] += 1
    if rng.random() < r.pdf:
        body = _pdf(" ".join(b.text for b in t.blocks)[:2000])
        emit(_capture(ids, f"https://{host}/docs/{ids.short()}.pdf", when, template, warc.HttpResponse(
            200, "OK", [("Content-Type", "application/pdf"), ("Content-Length", str(len(body)))], body),
            t.language, ""))
        records["pdf"] += 1
    if rng.random() < r.revisit and written:
        url, date, refers_to, response = rng.choice(written)
        out.extend(warc.gzip_member(warc.revisit(ids.next(), url, _date(when + timedelta(hours=1)), info_id,
                                                 refers_to, url, date, response).to_bytes()))
        records["revisit"] += 1


def _template(tmpl: list[Template], sizes: list[int], room: int, rng) -> Template:
    """A template that leaves the text `room` (`tmpl` sorted by size, `sizes` theirs): any that fits, else a small
    one."""
    fits = bisect.bisect_right(sizes, room)
    return tmpl[rng.randrange(max(fits, min(20, len(tmpl))))]


def _capture(ids, url: str, when: datetime, template: Template, response: warc.HttpResponse, language: str,
             charset: str) -> warc.Capture:
    ip = ".".join(str(b) for b in hashlib.sha1(template.host.encode()).digest()[:4])
    meta = [("fetchTimeMs", str(50 + len(response.payload) // 2000))]
    if charset:
        meta.append(("charset-detected", charset.upper()))
        cld2 = f'{{"reliable":true,"languages":[{{"code":"{language}","text-covered":0.97}}]}}'
        meta.append(("languages-cld2", cld2))
    return warc.Capture(url, _date(when), ip, ids.next(), ids.next(), ids.next(), response, metadata=meta)


def _charset(rng, r: Rates, t: SourceText) -> tuple[str, str, str]:
    """-> (the codec the page is written in, the label it declares, where: header | meta | both | none)."""
    where = rng.choices(("header", "both", "meta", "none"), weights=(50, 30, 15, 5))[0]
    legacy = TAIWAN_CHARSETS if t.tag == "zh-tw" else LEGACY_CHARSETS.get(t.language, ())
    draw = rng.random()
    if draw < r.unknown_charset:
        return "utf-8", "x-unknown-charset", "header"
    if legacy and draw < r.unknown_charset + r.misdeclared_charset:
        return rng.choice(legacy), "utf-8", "header"
    if legacy and draw < r.unknown_charset + r.misdeclared_charset + r.legacy_charset:
        codec = rng.choice(legacy)
        return codec, codec, where if where != "none" else "header"
    return "utf-8", "" if where == "none" else "utf-8", where


_META_CHARSET = re.compile(r"<meta[^>]*charset[^>]*>", re.I)


def _declare(page: str, charset: str | None) -> str:
    """The template's own charset declarations removed (they named the template's charset), and ours added."""
    page = _META_CHARSET.sub("", page)
    if charset:
        page = re.sub(r"<head[^>]*>", lambda m: m.group(0) + f'<meta charset="{charset}">', page, count=1, flags=re.I)
    return page


def _page(template: Template, t: SourceText, main: str, target: int, pool: list[str], rng) -> str:
    """The template around the text, retitled, relabelled, and padded with boilerplate up to the drawn size."""
    head = re.sub(r"<title>.*?</title>", f"<title>{html.escape(t.title)}</title>", template.head, count=1,
                  flags=re.I | re.S)
    head = re.sub(r"<html[^>]*>", f'<html lang="{t.tag}">', head, count=1, flags=re.I)
    tail = template.tail
    size = len(head) + len(main) + len(tail)
    padding = []
    while size < target and pool:
        fragment = rng.choice(pool)
        padding.append(fragment)
        size += len(fragment)
    if padding:
        at = tail.lower().rfind("</body>")
        at = at if at >= 0 else len(tail)
        tail = tail[:at] + "\n".join(padding) + tail[at:]
    return head + main + tail


def _main_html(blocks: list[tuple[str, str]]) -> str:
    parts, items = ['<article class="post">'], []
    for kind, text in blocks:
        if kind != "item" and items:
            parts.append("<ul>" + "".join(items) + "</ul>")
            items = []
        if kind == "item":
            items.append(f"<li>{html.escape(text)}</li>")
        elif kind == "heading":
            parts.append(f"<h2>{html.escape(text)}</h2>")
        else:
            parts.append(f"<p>{html.escape(text)}</p>")
    if items:
        parts.append("<ul>" + "".join(items) + "</ul>")
    return "".join(parts) + "</article>"


def _comments(rng, texts: list[SourceText], language: str) -> str:
    """A comment thread of 1-4 paragraphs of other texts (same language where the draw finds one quickly)."""
    out = ['<section class="comments" id="comments"><h3>Comments</h3>']
    for _ in range(rng.randint(1, 4)):
        other = texts[rng.randrange(len(texts))]
        for _ in range(8):
            if other.language == language:
                break
            other = texts[rng.randrange(len(texts))]
        para = next((b.text for b in other.blocks if b.kind == "paragraph"), other.blocks[0].text)
        out.append(f'<div class="comment"><span class="comment-author">{html.escape(_slug(other.title)[:20])}</span>'
                   f'<p>{html.escape(para)}</p><a class="reply" href="#comments">Reply</a></div>')
    return "".join(out) + "</section>"


def _pdf(text: str) -> bytes:
    """A one-page PDF showing `text` (Latin-1, one line per 90 characters)."""
    safe = text.encode("latin-1", "replace").decode("latin-1").replace("\\", "\\\\").replace("(", "\\(")
    safe = safe.replace(")", "\\)")
    lines = [safe[i:i + 90] for i in range(0, min(len(safe), 90 * 40), 90)]
    stream = "BT /F1 10 Tf 40 800 Td 12 TL " + " ".join(f"({line}) '" for line in lines) + " ET"
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R"
               " >> >> >>", f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    body, offsets = "%PDF-1.4\n", []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(body.encode("latin-1")))
        body += f"{i} 0 obj\n{obj}\nendobj\n"
    xref = len(body.encode("latin-1"))
    body += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n" + "".join(f"{o:010d} 00000 n \n" for o in offsets)
    body += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return body.encode("latin-1")


class _Ids:
    """WARC record ids from the file's generator."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def next(self) -> str:
        import uuid

        return f"<urn:uuid:{uuid.UUID(int=self.rng.getrandbits(128), version=4)}>"

    def short(self) -> str:
        return f"{self.rng.getrandbits(40):010x}"


def _date(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _slug(title: str) -> str:
    return re.sub(r"[^\w]+", "-", title.lower()).strip("-")[:60] or "page"


def load_texts(opts: Options) -> tuple[list[SourceText], list[sources.PackageInfo], list[bytes]]:
    """Every source text (package order, then path order), the packages' records, and the PNG images they ship."""
    cache = opts.debs
    wanted = sources.packages(opts.full)
    debs = sources.fetch(wanted, cache)
    roots = {p.name: sources.unpack(debs[p.name], cache / "unpacked") for p in wanted}
    with ProcessPoolExecutor(opts.workers) as ex:
        per_package = list(ex.map(sources.cached_texts, wanted, [roots[p.name] for p in wanted],
                                  [debs[p.name] for p in wanted]))
    infos = [sources.package_info(p, debs[p.name], roots[p.name]) for p in wanted]
    images = [path.read_bytes() for p in wanted for path in sorted(roots[p.name].rglob("*.png"))
              if path.stat().st_size <= 200_000][:200]
    return [t for texts in per_package for t in texts], infos, images


def build(opts: Options, warc_dir: Path) -> dict:
    """Writes the corpus under `opts.out`, its manifest last (its presence says the corpus is whole), and returns the
    manifest."""
    started = time.monotonic()
    texts, infos, images = load_texts(opts)
    tmpl, pool = templates.load(warc_dir)
    tmpl.sort(key=lambda t: t.size)
    size_model = SizeModel.fit(templates.cc_page_sizes(warc_dir))
    pages = plan(opts, texts)
    by_file: dict[tuple[str, str], list[PagePlan]] = {}
    for p in pages:
        by_file.setdefault((p.crawl, p.file), []).append(p)
    extras = {"templates": tmpl, "template_sizes": [t.size for t in tmpl], "pool": pool, "size_model": size_model,
              "images": images}
    with ProcessPoolExecutor(opts.workers, initializer=_init, initargs=(opts, texts, extras)) as ex:
        results = list(ex.map(write_file, [c for c, _ in by_file], [f for _, f in by_file], by_file.values()))
    built = manifest(opts, infos, tmpl, size_model, results) | {"build_seconds": round(time.monotonic() - started, 1)}
    tmp = opts.out / "manifest.json.tmp"
    tmp.write_text(json.dumps(built, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(opts.out / "manifest.json")
    return built


def manifest(opts: Options, infos, tmpl: list[Template], size_model: SizeModel, results: list[FileResult]) -> dict:
    import polars as pl

    gold = pl.DataFrame([row for res in results for row in res.gold])
    gold_path = opts.out / "gold.parquet"
    gold.write_parquet(gold_path, compression="zstd", statistics=False)
    records: Counter[str] = Counter()
    for res in results:
        records.update(res.records)
    sizes = sorted(s for res in results for s in res.page_sizes)

    def quantiles(xs) -> dict[str, int]:
        xs = sorted(xs)
        return {f"p{q}": xs[min(len(xs) - 1, int(len(xs) * q / 100))] for q in (10, 25, 50, 75, 90, 99)} | {
            "max": xs[-1]} if xs else {}

    digest = hashlib.sha256()
    for res in results:
        digest.update(f"{res.crawl}/{res.name} {res.sha256}\n".encode())
    digest.update(hashlib.sha256(gold.sort("page").drop("text").write_csv().encode()).digest())
    return {
        "seed": opts.seed, "pages_planned": opts.pages, "pages_per_file": opts.pages_per_file, "full": opts.full,
        "rates": asdict(opts.rates),
        "sources": [asdict(i) for i in infos],
        "templates": {"count": len(tmpl), "from": "../shared/data/warc (200 HTML responses)"},
        "page_sizes": {"model": {"lognormal_mu": round(size_model.mu, 4), "lognormal_sigma": round(size_model.sigma, 4),
                                 "cc_sample_bytes": list(size_model.sample)},
                       "cc_sample": quantiles(size_model.sample), "corpus": quantiles(sizes)},
        "crawls": {c: [f"crawls/{c}/{r.name}" for r in results if r.crawl == c] for c in opts.crawls},
        "files": [{"path": f"crawls/{r.crawl}/{r.name}", "bytes": r.bytes, "sha256": r.sha256, "records": r.records}
                  for r in results],
        "counts": {"html_pages": gold.height, "records": dict(sorted(records.items())),
                   **{f"{col}s": dict(Counter(gold[col].to_list())) for col in ("kind", "language", "script")},
                   "bytes": sum(r.bytes for r in results)},
        "sha256": digest.hexdigest(),
    }
