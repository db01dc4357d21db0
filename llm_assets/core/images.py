"""Image-text pairs for multimodal training: every `<img>` of a page with the text that describes it.

`extract_image_pairs` parses a page once with lxml and returns one row (IMAGE_PAIRS_SCHEMA) per usable image:
its absolute URL, its alt text, the caption of its `<figure>`, the text of the block around it and its declared
size. Pure: no Dagster, no network, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import pyarrow as pa

IMAGE_PAIRS_SCHEMA = pa.schema(
    [
        pa.field("page_doc_id", pa.string(), nullable=False),
        pa.field("page_url", pa.string(), nullable=False),
        pa.field("image_url", pa.string(), nullable=False),
        pa.field("alt", pa.string()),
        pa.field("caption", pa.string()),
        pa.field("nearby_text", pa.string()),
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("position", pa.int32(), nullable=False),
    ]
)


@dataclass(frozen=True)
class ImagePairSettings:
    min_text_chars: int = 5
    """A pair needs alt, caption or nearby text of at least this many characters (after collapsing whitespace)."""
    nearby_chars: int = 300
    """Nearby text is cut to this many characters."""
    min_side_px: int = 32
    """Images whose declared width or height is below this are dropped (tracking pixels, spacers, bullets)."""
    max_images_per_page: int = 100
    """At most this many pairs per page, so that galleries and sprite-heavy pages do not dominate the data."""


# Ancestors whose text counts as "nearby" an image: the closest one is taken.
NEARBY_BLOCKS = frozenset({"p", "figure", "div", "li", "td", "section", "article"})
# Subtrees whose text is never nearby text: code and styling, and the caption (already its own column).
_SKIP_TEXT = frozenset({"script", "style", "noscript", "template", "figcaption"})
# Elements whose boundaries separate words: "<td>a</td><td>b</td>" reads "a b", not "ab".
_WORD_BREAKS = NEARBY_BLOCKS | {"br", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "th", "ul", "ol", "dd", "dt",
                                "header", "footer", "aside", "nav", "main", "blockquote", "pre", "table"}
_INT32_MAX = 2**31 - 1
_PX = re.compile(r"\s*(\d+)\s*(?:px)?\s*$", re.IGNORECASE)


def extract_image_pairs(
    html: str, page_url: str, page_doc_id: str, settings: ImagePairSettings = ImagePairSettings()
) -> list[dict]:
    """The image-text pairs of one HTML page, as rows of IMAGE_PAIRS_SCHEMA, in page order.

    Rules, and why:
    - Image URL: `src`, else `data-src`, else the first candidate of `srcset`; the first of these that is
      neither empty nor a `data:` URI wins. Lazy-loading pages put the real URL in `data-src`/`srcset` and a
      `data:` placeholder (or nothing) in `src`; inline `data:` images are not fetchable URLs.
    - The URL is resolved against `<base href>` when the page has one (that is what a browser does), else against
      `page_url`; anything that is not absolute http(s) afterwards (javascript:, about:, mailto:, broken) is
      skipped, since a training pipeline must be able to download it.
    - `alt` is the alt attribute with whitespace collapsed: the author's own description of the image.
    - `caption` is the `<figcaption>` of the enclosing `<figure>`: an explicit, visible description.
    - `nearby_text` is the text of the closest ancestor block (p, figure, div, li, td, section, article),
      whitespace collapsed and cut to `nearby_chars`; script/style and the figcaption are left out (the caption
      has its own column), and it is null when it only repeats the alt. It gives context when alt is missing.
    - A pair needs alt, caption or nearby text of at least `min_text_chars`: an image with no text is no pair.
    - An image whose `width` or `height` attribute (integer pixels, optional `px`) is below `min_side_px` is
      dropped: tracking pixels, spacers and icons. Sizes in %, em or missing are unknown and kept (null).
    - An image URL already kept on the page is skipped (logos, icons and repeated banners), first kept wins.
    - At most `max_images_per_page` pairs per page.
    - `position` is the index of the `<img>` among all `<img>` elements of the page, in document order.

    The page is parsed once; text of a block shared by several images is computed once. Never raises on
    broken input: unparseable HTML (empty, binary junk) gives [], and lxml repairs unclosed tags.
    """
    try:
        root = _parse(html)
        if root is None:
            return []
        return _pairs(root, page_url, page_doc_id, settings)
    except Exception:  # noqa: BLE001 - a broken page must never stop a batch
        return []


def _parse(html: str):
    if not html or not html.strip():
        return None
    import lxml.html  # here: building the code location imports this module (settings), not lxml

    data = html.replace("\x00", "").encode("utf-8", errors="replace")
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True)
    try:
        return lxml.html.document_fromstring(data, parser=parser)
    except Exception:  # noqa: BLE001 - "Document is empty" and other libxml2 failures
        return None


def _pairs(root, page_url: str, page_doc_id: str, settings: ImagePairSettings) -> list[dict]:
    base_url = page_url
    base = root.find(".//base[@href]")
    if base is not None:
        href = (base.get("href") or "").strip()
        if href:
            try:
                base_url = urljoin(page_url, href)
            except ValueError:
                pass

    rows: list[dict] = []
    seen: set[str] = set()
    block_texts: dict = {}  # block element -> its nearby text, computed once per block
    for position, img in enumerate(root.iter("img")):
        if len(rows) >= settings.max_images_per_page:
            break
        image_url = _image_url(img, base_url)
        if image_url is None or image_url in seen:
            continue
        width, height = _px(img.get("width")), _px(img.get("height"))
        if (width is not None and width < settings.min_side_px) or (
            height is not None and height < settings.min_side_px
        ):
            continue

        block = figure = None
        for ancestor in img.iterancestors():
            tag = ancestor.tag
            if block is None and tag in NEARBY_BLOCKS:
                block = ancestor
            if figure is None and tag == "figure":
                figure = ancestor
            if block is not None and figure is not None:
                break

        alt = _collapse(img.get("alt")) or None
        caption = None
        if figure is not None:
            figcaption = next(figure.iter("figcaption"), None)
            if figcaption is not None:
                caption = _collapse(figcaption.text_content()) or None
        nearby = None
        if block is not None:
            if block not in block_texts:
                block_texts[block] = _block_text(block, settings.nearby_chars)
            nearby = block_texts[block] or None
            if nearby is not None and nearby == alt:
                nearby = None

        if not any(t is not None and len(t) >= settings.min_text_chars for t in (alt, caption, nearby)):
            continue
        seen.add(image_url)
        rows.append(
            {
                "page_doc_id": page_doc_id,
                "page_url": page_url,
                "image_url": image_url,
                "alt": alt,
                "caption": caption,
                "nearby_text": nearby,
                "width": width,
                "height": height,
                "position": position,
            }
        )
    return rows


def _image_url(img, base_url: str) -> str | None:
    srcset = (img.get("srcset") or "").strip()
    first_srcset = srcset.split(",")[0].split()[0] if srcset.split(",")[0].strip() else ""
    for raw in (img.get("src"), img.get("data-src"), first_srcset):
        candidate = (raw or "").strip()
        if not candidate or candidate[:5].lower() == "data:":
            continue
        try:
            url = urljoin(base_url, candidate)
            parts = urlsplit(url)
        except ValueError:  # e.g. an unbalanced "[" in the host
            return None
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            return None
        return url
    return None


def _px(value: str | None) -> int | None:
    """An integer pixel size ("120", "120px"); None when absent or not in pixels ("50%", "auto", "1.5em")."""
    if not value:
        return None
    match = _PX.match(value)
    if match is None:
        return None
    number = int(match.group(1))
    return number if number <= _INT32_MAX else None


def _collapse(text: str | None) -> str:
    return " ".join(text.split()) if text else ""


def _block_text(block, limit: int) -> str:
    """Collapsed text of `block` without script/style/figcaption subtrees, cut to `limit` characters.

    Walks the subtree iteratively (deep broken pages would overflow recursion) and stops once `limit`
    non-space characters are gathered, so a huge block costs no more than a small one.
    """
    pieces: list[str] = []
    solid = 0  # non-whitespace characters gathered: a lower bound of the collapsed length
    stack: list = [block]
    while stack and solid < limit:
        item = stack.pop()
        if isinstance(item, str):
            text = item
        else:
            tag = item.tag
            if not isinstance(tag, str) or tag in _SKIP_TEXT:
                continue
            for child in reversed(item):
                if child.tail:
                    stack.append(child.tail)
                if child.tag in _WORD_BREAKS:
                    stack.append(" ")
                stack.append(child)
            text = item.text
            if tag in _WORD_BREAKS:
                pieces.append(" ")
        if text:
            pieces.append(text)
            solid += len("".join(text.split()))
    return _collapse("".join(pieces))[:limit].rstrip()
