"""The documentation: README.md is the front door (at most 300 lines, every page it links exists), and the site built
from docs/ with MkDocs --strict has no broken link or anchor and leaves no page out of its navigation."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from llm_assets.settings import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
DOCS = PROJECT_ROOT / "docs"


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})


def test_the_site_builds_strictly_with_every_page(tmp_path):
    done = build(PROJECT_ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "settings" / "index.html").is_file()
    config = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text())
    in_nav = {page for entry in config["nav"] for page in entry.values()}
    assert in_nav == {p.name for p in DOCS.glob("*.md")}


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    """The check the site relies on: a copy of the docs with one broken link, then one broken anchor, does not
    build."""
    for n, broken in enumerate(("[gone](no-such-page.md)", "[gone](using.md#no-such-section)")):
        docs = tmp_path / str(n) / "docs"
        shutil.copytree(DOCS, docs)
        (docs / "index.md").write_text((docs / "index.md").read_text() + f"\n{broken}\n")
        config = (PROJECT_ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs}")
        (docs.parent / "mkdocs.yml").write_text(config)
        done = build(docs.parent / "mkdocs.yml", docs.parent / "site")
        assert done.returncode != 0 and ("no-such" in done.stderr), broken


def test_the_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    for heading in ("## Two commands", "## The first ten minutes", "## Where to go next"):
        assert heading in text
    linked = set(re.findall(r"\]\((docs/[^)#]+)", text))
    assert linked and all((PROJECT_ROOT / page).is_file() for page in linked)
    assert {f"docs/{p.name}" for p in DOCS.glob("*.md")} - {"docs/index.md"} <= linked  # every page reachable


def docs_text() -> str:
    """The README and every docs page, for tests that check what the documentation names."""
    return "\n".join(p.read_text() for p in [README, *sorted(DOCS.glob("*.md"))])
