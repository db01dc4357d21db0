"""The real files of ../shared/data (beside the checkout): read where they are, never copied into the repository."""

from __future__ import annotations

from pathlib import Path

from llm_assets.settings import PROJECT_ROOT

SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


def shared(*parts: str) -> Path:
    """A file of ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        import pytest

        pytest.skip(f"{path} is absent (../shared/data holds the real crawl files)")
    return path
