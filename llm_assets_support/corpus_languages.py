"""A multilingual corpus for the per-language parity tests, built at run time from the real text of ../shared/data:
the Universal Declaration of Human Rights (udhr2.zip, public domain) in each language, split into its paragraphs and
recombined into documents shaped like web pages (prose of every length, repeated lines and phrases, bullet lists,
headings, truncated lines, lines broken every few words, text without stop words, figures and hashtags), so that
each rule of each block meets documents on both sides of its threshold; plus the non-English pages of the shared
WARC files, extracted as the `documents` stage extracts them. Deterministic: the same documents on every run."""

from __future__ import annotations

import random
import re
import zipfile
from collections.abc import Callable, Iterator
from functools import cache

import polars as pl

from llm_assets_support.corpus import SHARED_DATA

UDHR = SHARED_DATA / "text" / "nltk-data__udhr2.zip"

# lid.176 label -> the UDHR translations in that language (the first one is the main text)
LANGUAGES: dict[str, tuple[str, ...]] = {
    "ja": ("jpn",), "zh": ("cmn_hans", "cmn_hant"), "ko": ("kor",), "th": ("tha",), "hi": ("hin",),
    "ar": ("arb",), "fa": ("pes_1",), "he": ("heb",), "ru": ("rus",), "uk": ("ukr",), "el": ("ell_monotonic",),
    "de": ("deu",), "fr": ("fra",), "es": ("spa",), "it": ("ita",), "pt": ("por_PT", "por_BR"), "nl": ("nld",),
    "pl": ("pol",), "tr": ("tur",), "sv": ("swe",), "vi": ("vie",),
}
DOCS_PER_LANGUAGE = 200
# UDHR translations in scripts no lid.176 language is written in (ISO 15924 -> file)
UNKNOWN_SCRIPTS = {"Cher": "chr", "Vaii": "vai", "Tfng": "tzm_tfng", "Mong": "khk_mong", "Yiii": "iii"}

_SPACED = re.compile(r"\S+\s*")


@cache
def paragraphs(code: str) -> tuple[str, ...]:
    """The non-blank lines of the language's UDHR texts (a lid.176 label of LANGUAGES, or a UDHR file name),
    stripped."""
    with zipfile.ZipFile(UDHR) as z:
        texts = [z.read(f"udhr2/{name}.txt").decode("utf-8") for name in LANGUAGES.get(code, (code,))]
    return tuple(line.strip() for text in texts for line in text.splitlines() if line.strip())


def _units(line: str) -> list[str]:
    """A line cut into pieces that rejoin into it: words with their trailing space where the script uses spaces,
    characters where it does not (Chinese, Japanese; Thai phrases longer than a few words)."""
    pieces = _SPACED.findall(line)
    return pieces if len(pieces) >= 4 and max(map(len, pieces)) <= 30 else list(line)


def _head(line: str, n: int) -> str:
    return "".join(_units(line)[:n]).strip()


class _Shapes:
    """Document shapes over one language's paragraphs; each method returns one document."""

    def __init__(self, paras: tuple[str, ...], stop_words: tuple[str, ...], rng: random.Random):
        self.p, self.stop, self.rng = paras, stop_words, rng
        self.long = [p for p in paras if len(_units(p)) >= 12] or list(paras)
        self.short = [p for p in paras if len(_units(p)) < 6] or list(paras)

    def window(self, k: int) -> list[str]:
        start = self.rng.randrange(max(1, len(self.p) - k + 1))
        return list(self.p[start:start + k])

    def prose(self) -> str:
        return "\n".join(self.window(self.rng.choice((1, 2, 3, 4, 6, 9, 14, 20, 30, 60))))

    def paragraphs(self) -> str:
        return "\n\n".join(self.window(self.rng.choice((2, 4, 8, 16))))

    def repeated_lines(self) -> str:
        lines = self.window(self.rng.choice((4, 6, 10, 16)))
        extra = round(len(lines) * self.rng.choice((0.05, 0.15, 0.25, 0.35, 0.45, 0.6, 1.0)))
        for _ in range(extra):
            lines.insert(self.rng.randrange(len(lines) + 1), self.rng.choice(lines[: max(1, len(lines) // 2)]))
        return "\n".join(lines)

    def repeated_phrase(self) -> str:
        phrase = _head(self.rng.choice(self.long), self.rng.choice((2, 3, 4, 6, 8)))
        sep = "" if len(_units(phrase)) > 8 else " "
        times = self.rng.choice((2, 3, 4, 6, 10))
        lines = self.window(self.rng.choice((1, 2, 4, 8)))
        lines.insert(self.rng.randrange(len(lines) + 1), sep.join([phrase] * times))
        return "\n".join(lines)

    def bullets(self) -> str:
        lines = self.window(self.rng.choice((4, 8, 12, 20)))
        share = self.rng.choice((0.3, 0.6, 0.85, 0.95, 1.0))
        mark = self.rng.choice(("- ", "• ", "  - ", "-"))
        return "\n".join(mark + _head(line, self.rng.choice((3, 6, 40))) if self.rng.random() < share else line
                         for line in lines)

    def headings(self) -> str:
        out = []
        share = self.rng.choice((0.2, 0.5, 0.8, 1.0))
        for line in self.window(self.rng.choice((3, 6, 12))):
            if self.rng.random() < share:
                out.append(self.rng.choice(self.short).rstrip(".。:："))
            out.append(line if self.rng.random() > share / 2 else _head(line, 5))
        return "\n".join(out)

    def ellipses(self) -> str:
        share = self.rng.choice((0.1, 0.25, 0.35, 0.6, 0.9))
        mark = self.rng.choice(("...", "…", " ...", "…\u00a0"))
        return "\n".join(_head(line, self.rng.choice((4, 10, 20))) + mark if self.rng.random() < share else line
                         for line in self.window(self.rng.choice((4, 8, 16))))

    def dotted(self) -> str:
        """Ellipses inside the lines ("und... so... weiter..."): the ellipsis-per-word rule."""
        every = self.rng.choice((1, 2, 4, 8, 16))
        mark = self.rng.choice(("...", "…"))
        units = _units("\n".join(self.window(self.rng.choice((1, 3, 6)))))
        return "".join(u.rstrip() + mark + u[len(u.rstrip()):] if i % every == every - 1 else u
                       for i, u in enumerate(units))

    def glued(self) -> str:
        """Lines with their spaces taken out (slugs, hashtags, tables pasted without separators): long words."""
        share = self.rng.choice((0.1, 0.3, 0.6, 1.0))
        return "\n".join(line.replace(" ", "") if self.rng.random() < share else line
                         for line in self.window(self.rng.choice((1, 3, 6, 12))))

    def broken_lines(self) -> str:
        """Prose re-wrapped every few pieces, as lists and menus are: newlines per word on both sides of the rule."""
        width = self.rng.choice((1, 2, 3, 4, 6, 8, 12, 20))
        text = " ".join(self.window(self.rng.choice((2, 4, 8))))
        units = _units(text)
        return "\n".join("".join(units[i:i + width]).strip() for i in range(0, len(units), width))

    def without_stop_words(self) -> str:
        text = "\n".join(self.window(self.rng.choice((2, 5, 10))))
        keep = self.rng.choice((0, 0, 1, 2))  # how many stop words survive
        for word in self.stop[keep:]:
            text = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", "", text) if " " in text else text.replace(word, "")
        return re.sub(r"[ \t]{2,}", " ", text)

    def figures(self) -> str:
        lines = self.window(self.rng.choice((2, 4, 8)))
        for _ in range(self.rng.choice((1, 3, 6, 12, 30))):
            row = " ".join(str(self.rng.randrange(10 ** self.rng.randrange(1, 6)))
                           for _ in range(self.rng.randrange(1, 8)))
            lines.insert(self.rng.randrange(len(lines) + 1),
                         self.rng.choice((row, f"{row} %", f"({row})", f"{row} — €")))
        return "\n".join(lines)

    def hashtags(self) -> str:
        lines = self.window(self.rng.choice((1, 3, 6)))
        tags = " ".join("#" + _head(self.rng.choice(self.long), 1).strip(",.;:")
                        for _ in range(self.rng.choice((1, 4, 10, 30))))
        lines.insert(self.rng.randrange(len(lines) + 1), tags)
        return "\n".join(lines)

    def fragment(self) -> str:
        return _head(self.rng.choice(self.long), self.rng.choice((1, 3, 8, 20, 40)))


SHAPES: dict[str, Callable[[_Shapes], str]] = {
    "prose": _Shapes.prose, "paragraphs": _Shapes.paragraphs, "repeated_lines": _Shapes.repeated_lines,
    "repeated_phrase": _Shapes.repeated_phrase, "bullets": _Shapes.bullets, "headings": _Shapes.headings,
    "ellipses": _Shapes.ellipses, "dotted": _Shapes.dotted, "glued": _Shapes.glued,
    "broken_lines": _Shapes.broken_lines, "without_stop_words": _Shapes.without_stop_words,
    "figures": _Shapes.figures, "hashtags": _Shapes.hashtags, "fragment": _Shapes.fragment,
}


def udhr_documents(code: str, stop_words: tuple[str, ...] = (), n: int = DOCS_PER_LANGUAGE) -> pl.DataFrame:
    """doc_id (`udhr/<code>/<i>-<shape>`), shape, text: `n` documents of the language, the shapes in turn."""
    shapes = _Shapes(paragraphs(code), stop_words, random.Random(f"udhr/{code}"))
    names = list(SHAPES)
    rows = []
    for i in range(n):
        name = names[i % len(names)]
        rows.append({"doc_id": f"udhr/{code}/{i}-{name}", "shape": name, "text": SHAPES[name](shapes)})
    return pl.DataFrame(rows, schema={"doc_id": pl.String, "shape": pl.String, "text": pl.String})


def unknown_script_documents(per_script: int = 8) -> pl.DataFrame:
    """doc_id (`udhr/<file>/<i>`), script, text: prose in the scripts of UNKNOWN_SCRIPTS."""
    rows = []
    for script, name in UNKNOWN_SCRIPTS.items():
        shapes = _Shapes(paragraphs(name), (), random.Random(f"udhr/{name}"))
        rows += [{"doc_id": f"udhr/{name}/{i}", "script": script, "text": shapes.prose()} for i in range(per_script)]
    return pl.DataFrame(rows, schema={"doc_id": pl.String, "script": pl.String, "text": pl.String})


def crawl_documents(languages: set[str]) -> Iterator[tuple[str, str, str]]:
    """(language, doc_id, text) of the shared WARC pages lid.176 labels with one of `languages`."""
    from llm_assets.core.filters.language import language_model
    from llm_assets_support.corpus import shared_documents

    docs = shared_documents()
    labels, _ = language_model().predict(docs["text"].str.replace_all("\n", " ", literal=True).to_list(), k=1)
    for (doc, text), label in zip(docs.select("doc_id", "text").iter_rows(), labels, strict=True):
        language = label[0].removeprefix("__label__")
        if language in languages:
            yield language, doc, text
