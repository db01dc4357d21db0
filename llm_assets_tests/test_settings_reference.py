"""The settings reference page is generated from the models, and the page in the repository is that page."""

from __future__ import annotations

import pytest

from llm_assets import cli
from llm_assets.core.config import PROJECT_ROOT
from llm_assets.settings_reference import render
from llm_assets_tests.snapshot import check_snapshot

PAGE = PROJECT_ROOT / "docs" / "settings.md"


@pytest.mark.snapshot
def test_docs_settings_md_is_the_generated_reference(request):
    check_snapshot(request, PAGE, render())


def test_the_reference_lists_every_key_with_its_default(capsys):
    assert cli.main(["settings", "--reference"]) == 0
    page = capsys.readouterr().out
    assert page == render()
    # a nested section, a union member of the chain (its discriminator first), a map of sections, a list of them
    assert "| `documents.routing.max_tags` | integer \\| null | `5000` | HTML with more tags" in page
    block = page.split("#### `filtered.chain` block: `gopher_quality`")[1].split("####")[0]
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `filtered.chain[gopher_quality].block` | `gopher_quality` | `\"gopher_quality\"`")
    assert "| `filtered.chain[gopher_quality].min_doc_words` | integer | `50` |" in block
    assert "| `release.languages.<name>.weight` | number \\| null | `null` |" in page
    assert "| `evals.sets[].name` | string | required |" in page
    assert page.count("#### `filtered.chain` block: ") == 13


def test_the_settings_page_example_is_valid_settings():
    """The settings page shows a deployment's file instead of a table of keys: it must load."""
    import yaml

    from llm_assets.settings import Settings

    page = (PROJECT_ROOT / "docs" / "configuring.md").read_text()
    example = page.split("# Settings\n")[1].split("```yaml\n")[1].split("```")[0]
    settings = Settings.model_validate(yaml.safe_load(example))
    assert settings.shards == 8 and settings.filtered.block("gopher_quality").min_doc_words == 80
    assert "](settings.md)" in page.split("# Settings\n")[1].split("\n## ")[0]
