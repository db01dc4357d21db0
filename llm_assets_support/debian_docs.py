"""Real text in many languages from Debian's documentation packages: fetched with `apt-get download` (never
installed) into `DEBS`, unpacked with `dpkg-deb -x`, and read into documents of text blocks (headings, paragraphs,
list items). The benchmark crawl (`make corpus`) and the real-prose parity corpus (`corpus_prose`) read them.

Three layouts are read:
- `lo_help`: LibreOffice's help, one package per language (`libreoffice-help-<lang>`, 35 languages): one document
  per help page, the blocks of its `#DisplayArea`;
- `handbook`: the Debian Administrator's Handbook (`debian-handbook`, 26 languages): its chapter pages cut at their
  section headings into documents of at least `MIN_SECTION_WORDS` words;
- `pydoc`: Python's documentation (`python3.11-doc`, English): each page's `div.body`, cut the same way.

A package's language is its own (the help of `libreoffice-help-fr` is French), recorded as the document's gold
language; a translation can hold passages left in English, as the real pages do.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import regex

# The languages of LibreOffice's help packages on Debian 12 (`apt-cache search --names-only ^libreoffice-help-`).
LO_HELP_LANGUAGES = ("ca", "cs", "da", "de", "dz", "el", "en-gb", "en-us", "es", "et", "eu", "fi", "fr", "gl", "hi",
                     "hu", "id", "it", "ja", "km", "ko", "nl", "om", "pl", "pt", "pt-br", "ru", "sk", "sl", "sv", "tr",
                     "vi", "zh-cn", "zh-tw")

# A package's language tag -> (ISO 639-1 code as lid.176 labels it, script).
LANGUAGES: dict[str, tuple[str, str]] = {
    "ar-ma": ("ar", "Arab"), "ca": ("ca", "Latn"), "ca-es": ("ca", "Latn"), "cs": ("cs", "Latn"),
    "cs-cz": ("cs", "Latn"), "da": ("da", "Latn"), "da-dk": ("da", "Latn"), "de": ("de", "Latn"),
    "de-de": ("de", "Latn"), "dz": ("dz", "Tibt"), "el": ("el", "Grek"), "el-gr": ("el", "Grek"),
    "en-gb": ("en", "Latn"), "en-us": ("en", "Latn"), "en": ("en", "Latn"), "es": ("es", "Latn"),
    "es-es": ("es", "Latn"), "et": ("et", "Latn"), "eu": ("eu", "Latn"), "fa-ir": ("fa", "Arab"),
    "fi": ("fi", "Latn"), "fr": ("fr", "Latn"), "fr-fr": ("fr", "Latn"), "gl": ("gl", "Latn"),
    "hi": ("hi", "Deva"), "hr-hr": ("hr", "Latn"), "hu": ("hu", "Latn"), "id": ("id", "Latn"),
    "id-id": ("id", "Latn"), "it": ("it", "Latn"), "it-it": ("it", "Latn"), "ja": ("ja", "Jpan"),
    "ja-jp": ("ja", "Jpan"), "km": ("km", "Khmr"), "ko": ("ko", "Kore"), "ko-kr": ("ko", "Kore"),
    "nb-no": ("no", "Latn"), "nl": ("nl", "Latn"), "nl-nl": ("nl", "Latn"), "om": ("om", "Latn"),
    "pl": ("pl", "Latn"), "pl-pl": ("pl", "Latn"), "pt": ("pt", "Latn"), "pt-br": ("pt", "Latn"),
    "ro-ro": ("ro", "Latn"), "ru": ("ru", "Cyrl"), "ru-ru": ("ru", "Cyrl"), "sk": ("sk", "Latn"),
    "sl": ("sl", "Latn"), "sv": ("sv", "Latn"), "sv-se": ("sv", "Latn"), "tr": ("tr", "Latn"),
    "tr-tr": ("tr", "Latn"), "vi": ("vi", "Latn"), "vi-vn": ("vi", "Latn"), "zh-cn": ("zh", "Hans"),
    "zh-tw": ("zh", "Hant"),
}

# A script's letters (Jpan: kana and kanji; Kore: hangul and hanja), to measure how much of a text is written in it.
_SCRIPT_PATTERNS = {script: regex.compile(pattern) for script, pattern in {
    "Latn": r"\p{Latin}", "Cyrl": r"\p{Cyrillic}", "Grek": r"\p{Greek}", "Arab": r"\p{Arabic}",
    "Deva": r"[\p{Devanagari}]", "Hans": r"\p{Han}", "Hant": r"\p{Han}", "Jpan": r"[\p{Han}\p{Hiragana}\p{Katakana}]",
    "Kore": r"[\p{Hangul}\p{Han}]", "Khmr": r"\p{Khmer}", "Tibt": r"\p{Tibetan}"}.items()}
_LETTER = regex.compile(r"\p{L}")
# where packages are downloaded and unpacked, kept between runs (never committed)
DEBS = Path(__file__).resolve().parents[1] / ".bench" / "corpus" / "debs"
MIN_SECTION_WORDS = 150  # a handbook or pydoc section shorter than this joins the next one
_BLOCK_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "dt", "dd", "pre", "blockquote"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_NAV_CLASSES = frozenset({"docnav", "navheader", "navfooter", "related", "sphinxsidebar", "footer"})
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Package:
    """A Debian package that ships documentation, and how its pages are laid out."""

    name: str
    layout: str  # lo_help | handbook | pydoc


# The licence of the text each layout's pages hold, as its package's copyright file states it (read when the source
# was added; the manifest also records that file's sha256, so a change shows).
LICENCES = {"lo_help": "MPL-2.0 (LibreOffice help content)", "handbook": "GPL-2.0+ or CC-BY-SA-3.0",
            "pydoc": "PSF-2.0 (Python documentation)"}


@dataclass(frozen=True)
class PackageInfo:
    """What the corpus manifest records of a package: where its text came from, under which licence."""

    name: str
    version: str
    sha256: str
    licence: str
    copyright_sha256: str


@dataclass(frozen=True)
class Block:
    kind: str  # heading | paragraph | item
    text: str


@dataclass(frozen=True)
class SourceText:
    """One document of real text: the blocks of one page (or one section of a page)."""

    package: str
    path: str  # inside the package, with `#<n>` for a section of a page
    tag: str  # the package's language tag (pt-br, zh-tw, fa-ir, ...)
    title: str
    blocks: tuple[Block, ...]

    @property
    def language(self) -> str:
        return LANGUAGES[self.tag][0]

    @property
    def script(self) -> str:
        return LANGUAGES[self.tag][1]

    @property
    def script_share(self) -> float:
        """The share of the letters written in the language's script: a translation keeps some passages in English
        (LibreOffice's Khmer help more than most), which the gold language does not say."""
        text = "".join(b.text for b in self.blocks)
        letters = len(_LETTER.findall(text))
        return len(_SCRIPT_PATTERNS[self.script].findall(text)) / letters if letters else 0.0

    @property
    def chars(self) -> int:
        return sum(len(b.text) for b in self.blocks)

    @property
    def words(self) -> int:
        return sum(words(b.text) for b in self.blocks)


def words(text: str) -> int:
    """Words of a block, roughly: spaces split Latin, Cyrillic or Greek text; a sixth of the characters stands in
    for the words of a script written without spaces (zh, ja, km, ...)."""
    return max(len(text.split()), len(text) // 6)


def packages(full: bool = True) -> tuple[Package, ...]:
    """Every package the corpus reads (`full`), or the two the test slice reads."""
    if not full:
        return (Package("libreoffice-help-de", "lo_help"), Package("libreoffice-help-ja", "lo_help"))
    return (*(Package(f"libreoffice-help-{lang}", "lo_help") for lang in LO_HELP_LANGUAGES),
            Package("debian-handbook", "handbook"), Package("python3.11-doc", "pydoc"))


def fetch(wanted: tuple[Package, ...], cache: Path) -> dict[str, Path]:
    """Package name -> its .deb in `cache`, downloaded with `apt-get download` when absent. A machine whose package
    lists were never fetched gets them once (`apt-get update`) and the download is tried again."""
    cache.mkdir(parents=True, exist_ok=True)

    def found() -> dict[str, Path]:
        debs = {}
        for p in wanted:
            matches = sorted(cache.glob(f"{p.name}_*.deb"))
            if matches:
                debs[p.name] = matches[-1]
        return debs

    missing = [p.name for p in wanted if p.name not in found()]
    if missing:
        download = ["apt-get", "download", *missing]
        if subprocess.run(download, cwd=cache, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
            done = subprocess.run(download, cwd=cache, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"apt-get download {' '.join(missing)} failed: {done.stderr.strip()}")
    return found()


def unpack(deb: Path, into: Path) -> Path:
    """The package's files under `into/<deb name>/` (unpacked once)."""
    target = into / deb.stem
    if not (target / ".unpacked").exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
        (target / ".unpacked").touch()
    return target


def package_info(package: Package, deb: Path, root: Path) -> PackageInfo:
    version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True,
                             text=True).stdout.strip()
    copyright_files = sorted((root / "usr" / "share" / "doc").glob("*/copyright"))
    return PackageInfo(name=package.name, version=version, sha256=sha256_file(deb), licence=LICENCES[package.layout],
                       copyright_sha256=sha256_file(copyright_files[0]) if copyright_files else "")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cached_texts(package: Package, root: Path, deb: Path) -> list[SourceText]:
    """`texts`, kept beside the package: read again only when the package or this module's code changes."""
    key = hashlib.sha256(deb.name.encode() + Path(__file__).read_bytes()).hexdigest()[:16]
    cache = deb.parent / "texts" / f"{package.name}-{key}.pickle"
    if cache.exists():
        with open(cache, "rb") as f:
            return pickle.load(f)
    found = texts(package, root)
    cache.parent.mkdir(exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        pickle.dump(found, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, cache)
    return found


def texts(package: Package, root: Path) -> list[SourceText]:
    """The documents of an unpacked package, in a stable order (sorted paths)."""
    if package.layout == "lo_help":
        lang = package.name.removeprefix("libreoffice-help-")
        # one folder per language (zh-CN, pt-BR, en-GB, ...) beside the shared `media`
        (base,) = [d for d in (root / "usr" / "share" / "libreoffice" / "help").iterdir() if d.name.lower() == lang]
        return [t for path in sorted(base.rglob("*.html"))
                for t in _page(package.name, root, path, lang, "DisplayArea", split=False)]
    if package.layout == "handbook":
        base = root / "usr" / "share" / "doc" / "debian-handbook" / "html"
        return [t for lang_dir in sorted(base.iterdir()) if lang_dir.name.lower() in LANGUAGES
                for path in sorted(lang_dir.glob("*.html"))
                for t in _page(package.name, root, path, lang_dir.name.lower(), "body", split=True)]
    if package.layout == "pydoc":
        base = root / "usr" / "share" / "doc" / "python3.11" / "html"
        return [t for path in sorted(base.rglob("*.html")) if "_static" not in path.parts
                for t in _page(package.name, root, path, "en", "body", split=True)]
    raise ValueError(f"unknown layout {package.layout!r} of {package.name}")


def _page(package: str, root: Path, path: Path, tag: str, main: str, split: bool) -> Iterator[SourceText]:
    import lxml.html

    try:
        tree = lxml.html.parse(str(path))
    except (OSError, ValueError):  # an empty or unreadable page: nothing to take
        return
    doc = tree.getroot()
    if doc is None:
        return
    found = doc.xpath(f'//*[@id="{main}"]') or doc.xpath(f'//div[contains(concat(" ", @class, " "), " {main} ")]') \
        or doc.xpath("//body")
    if not found:
        return
    title = _SPACE.sub(" ", (doc.findtext(".//title") or "")).strip()
    blocks = list(_blocks(found[0]))
    rel = str(path.relative_to(root))
    if not split:
        if blocks:
            yield SourceText(package, rel, tag, title, tuple(blocks))
        return
    for n, section in enumerate(_sections(blocks)):
        head = next((b.text for b in section if b.kind == "heading"), title)
        yield SourceText(package, f"{rel}#{n}", tag, head, tuple(section))


def _blocks(root) -> Iterator[Block]:
    """Leaf text blocks in document order: a block holding other blocks gives only those."""
    for el in root.iter():
        if not isinstance(el.tag, str) or el.tag not in _BLOCK_TAGS and not _is_para_div(el):
            continue
        if any(isinstance(d.tag, str) and (d.tag in _BLOCK_TAGS or _is_para_div(d)) for d in el.iterdescendants()):
            continue
        if any(_is_navigation(a) for a in el.iterancestors()):
            continue
        text = _SPACE.sub(" ", el.text_content()).replace("\u00b6", "").strip()
        if not text:
            continue
        kind = "heading" if el.tag in _HEADINGS else "item" if el.tag in ("li", "dd", "dt") else "paragraph"
        yield Block(kind, text)


def _is_navigation(el) -> bool:
    """The pages' own navigation: links to the previous and next page, banners, headers and footers."""
    return el.tag in ("nav", "header", "footer", "script", "style") or el.get("id") in ("banner", "title") \
        or bool(_NAV_CLASSES.intersection((el.get("class") or "").split()))


def _is_para_div(el) -> bool:
    return el.tag == "div" and "para" in (el.get("class") or "").split()


def _sections(blocks: list[Block]) -> Iterator[list[Block]]:
    """Blocks cut before each heading into sections of at least MIN_SECTION_WORDS words (a short one joins the
    next; the last short one joins the one before)."""
    sections: list[list[Block]] = []
    current: list[Block] = []
    for block in blocks:
        if block.kind == "heading" and current and sum(words(b.text) for b in current) >= MIN_SECTION_WORDS:
            sections.append(current)
            current = []
        current.append(block)
    if current:
        if sections and sum(words(b.text) for b in current) < MIN_SECTION_WORDS:
            sections[-1].extend(current)
        else:
            sections.append(current)
    yield from sections
