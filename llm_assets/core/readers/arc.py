"""ARC, the Internet Archive's format before WARC: read, split and found again as WARC (warcio converts its
records), its records having no stable id."""

from __future__ import annotations

from llm_assets.core.readers.warc import warc_like


def _sniff(head: bytes) -> bool:
    return head.startswith(b"filedesc://")


FORMAT = warc_like("arc", (".arc", ".arc.gz"), _sniff)
