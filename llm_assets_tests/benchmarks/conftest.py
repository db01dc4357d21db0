"""Fixtures shared by the benchmarks' tests: the corpus builder's slice (two Debian packages, a few hundred pages),
built once per session, and a whole `make bench-crawl` run on two shared WARC files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.corpus.__main__ import main as corpus_main
from llm_assets.settings import DEFAULT_SETTINGS, PROJECT_ROOT
from llm_assets_support.shared_data import shared

SLICE = ["--slice", "--pages", "240", "--pages-per-file", "60"]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """A slice of the bench-crawl corpus: the German and Japanese LibreOffice help in 240 pages, 4 files a crawl."""
    out = tmp_path_factory.mktemp("corpus")
    corpus_main([*SLICE, "--out", str(out), "--workers", "2", "--warc-dir", str(shared("warc"))])
    return out


CRAWLS = {"TEST-A": "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz", "TEST-B": "dolma__sample-0000.warc.gz"}


@pytest.fixture(scope="session")
def run(tmp_path_factory):
    """`python -m benchmarks.crawl` without datatrove on a corpus of two shared WARC files, one crawl each, one
    shard: (its results, its BENCHMARKS.md, the finished process); its work folder is `tmp/work`."""
    tmp = tmp_path_factory.mktemp("bench-crawl")
    corpus = tmp / "corpus"
    manifest = {"crawls": {}, "counts": {}}
    for crawl, name in CRAWLS.items():
        (corpus / "crawls" / crawl).mkdir(parents=True)
        (corpus / "crawls" / crawl / name).symlink_to(shared("warc", name))
        manifest["crawls"][crawl] = [f"crawls/{crawl}/{name}"]
    (corpus / "manifest.json").write_text(json.dumps(manifest))  # counts: none recorded, tolerated
    settings = yaml.safe_load(DEFAULT_SETTINGS.read_text())
    settings["shards"] = 1
    (tmp / "settings.yaml").write_text(yaml.safe_dump(settings, sort_keys=False, allow_unicode=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LLM_ASSETS_", "DAGSTER_", "DASK_"))}
    env["LLM_ASSETS_SETTINGS"] = str(tmp / "settings.yaml")
    output = tmp / "BENCHMARKS.md"
    done = subprocess.run([sys.executable, "-m", "benchmarks.crawl", "--corpus", str(corpus), "--work",
                           str(tmp / "work"), "--no-anchor", "--output", str(output), "--json", str(tmp / "r.json")],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1800,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((tmp / "r.json").read_text()), output, done, tmp
