"""Fixtures shared by the benchmarks' tests: the corpus builder's slice (two Debian packages, a few hundred pages),
built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.corpus.__main__ import main as corpus_main
from llm_assets_support.shared_data import shared

SLICE = ["--slice", "--pages", "240", "--pages-per-file", "60"]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """A slice of the bench-crawl corpus: the German and Japanese LibreOffice help in 240 pages, 4 files a crawl."""
    out = tmp_path_factory.mktemp("corpus")
    corpus_main([*SLICE, "--out", str(out), "--workers", "2", "--warc-dir", str(shared("warc"))])
    return out
