"""Text normalization: repair mojibake, compose Unicode, drop invisible control characters, tidy whitespace.

Web text arrives with UTF-8 read as cp1252 ("donâ€™t"), decomposed accents, byte-order marks, Windows line ends
and layout whitespace. Left alone, the same sentence has many spellings, which hurts deduplication, the
quality heuristics and the tokenizer. The block only rewrites how text is encoded and laid out, never what it
says: code indentation and paragraph breaks survive, quotes, ellipses and HTML entities stay as they are.
A document left empty is dropped with reason `empty`.
"""

from __future__ import annotations

import unicodedata
from typing import Literal

import polars as pl
from pydantic import Field

from .base import Block, Rule

# The bytes 0x80-0xBF of a UTF-8 sequence as cp1252 (or latin-1, hence the C1 range) renders them.
_CONT = "\x80-\xbf€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ"
# A UTF-8 lead byte as a character followed by continuation bytes as characters ("Ã©", "â€™", "Â\xa0"):
# common in broken pages, rare in real text, so only these rows pay for ftfy.
MOJIBAKE = f"[\xc2-\xdf][{_CONT}]|[\xe0-\xef][{_CONT}]{{2}}|[\xf0-\xf4][{_CONT}]{{3}}"
# C0 controls except \t \n (\r, \v and \f are line breaks, handled first), DEL, C1, BOM and zero-width space.
CONTROL = "[\x00-\x08\x0e-\x1f\x7f-\x9f\ufeff\u200b]"
HSPACE = r"[ \t\p{Zs}]"


class Normalize(Block):
    name = "normalize"
    block: Literal["normalize"] = Field(default="normalize", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    rewrites_text = True
    measured_by = ("nfc", "fix_mojibake", "strip_control", "whitespace")

    nfc: bool = Field(default=True, description="Unicode NFC normalization of the text.")
    fix_mojibake: bool = Field(default=True, description=(
        "Repair mojibake (UTF-8 read as Latin-1/cp1252) with ftfy, only in the texts that show it."))
    strip_control: bool = Field(default=True, description=(
        "Remove invisible control characters (C0 but tab and newline, DEL, C1, BOM, zero-width space); line ends "
        "become `\\n`."))
    whitespace: bool = Field(default=True, description=(
        "Tidy whitespace: a run of spaces after a visible character becomes one, trailing spaces go, 3+ newlines "
        "become 2; indentation is kept."))

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        if self.fix_mojibake:
            df = df.with_columns(repair_mojibake(df["text"]))
        expr = pl.col("text")
        if self.strip_control:
            # \v and \f separate lines or pages: deleting them would glue the words on either side.
            expr = expr.str.replace_all(r"\r\n?|[\v\f]", "\n").str.replace_all(CONTROL, "")
        if self.nfc:
            df = df.with_columns(nfc(df.select(expr)["text"]))
            expr = pl.col("text")
        if self.whitespace:
            expr = (
                # Only runs after a visible character: the indentation at the start of a line is kept. A single
                # space there is left alone, so only longer runs and other spaces match (each match costs a
                # capture, and single spaces are most of them).
                expr.str.replace_all(rf"(\S)(?:{HSPACE}{{2,}}|[\t\p{{Zs}}--[ ]]{HSPACE}*)", "${1} ")
                .str.replace_all(rf"(?m){HSPACE}+$", "")
                .str.replace_all(r"\n{3,}", "\n\n")
                .str.strip_chars("\n")
            )
        df = df.with_columns(expr)
        return df, df.select(bytes=pl.col("text").str.len_bytes().fill_null(0))

    def rules(self) -> list[Rule]:
        return [Rule(pl.col("bytes") == 0, "empty")]


def nfc(text: pl.Series) -> pl.Series:
    """NFC composition of the rows that need it: a text whose characters all come before U+0300, the first combining
    mark, has nothing to compose or replace, and of the others only those that fail Python's NFC quick check
    (`unicodedata.is_normalized`, a scan in C several times cheaper than normalizing) are rewritten: web text has
    curly quotes and dashes everywhere, composable pairs rarely."""
    rows = text.str.contains(r"[^\x00-\x{2ff}]").fill_null(False).arg_true()
    rows = rows.filter(pl.Series([not unicodedata.is_normalized("NFC", t) for t in text.gather(rows).to_list()],
                                 dtype=pl.Boolean))
    if rows.len() == 0:
        return text
    return text.scatter(rows, text.gather(rows).str.normalize("NFC"))


def repair_mojibake(text: pl.Series) -> pl.Series:
    """ftfy's encoding repair on the rows the vectorized pre-check flags; the other rows are not touched."""
    import ftfy  # here: importing the settings does not pay for it

    rows = text.str.contains(MOJIBAKE).fill_null(False).arg_true()
    if rows.len() == 0:
        return text
    # fix_encoding only undoes encoding mix-ups: unlike fix_text it leaves quotes, entities and line breaks. It is
    # slow on long texts, so only the flagged lines of the flagged documents go through it.
    lines = text.gather(rows).str.split("\n").to_frame("line").with_row_index("doc").explode("line")
    flagged = lines["line"].str.contains(MOJIBAKE).arg_true()
    fixed = lines["line"].scatter(flagged, [ftfy.fix_encoding(t) for t in lines["line"].gather(flagged).to_list()])
    rebuilt = lines.with_columns(fixed).group_by("doc", maintain_order=True).agg(pl.col("line").str.join("\n"))
    return text.clone().scatter(rows, rebuilt["line"])
