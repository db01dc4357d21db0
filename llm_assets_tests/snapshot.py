"""Generated snapshots: a test renders what it checks as text and compares it with a file kept in the repository.

`pytest --update-snapshots` (or `make snapshots`) rewrites the files instead of comparing; the diff then goes through
review like any other change.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

UPDATE_OPTION = "--update-snapshots"
MAX_DIFF_LINES = 60


def check_snapshot(request: pytest.FixtureRequest, path: Path, text: str) -> None:
    """Fail with a short unified diff when `text` differs from the file at `path`; rewrite the file instead when
    pytest runs with `--update-snapshots`."""
    if not text.endswith("\n"):
        text += "\n"
    if request.config.getoption(UPDATE_OPTION):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"snapshot {path} is absent: run `make snapshots` (pytest {UPDATE_OPTION}) to write it")
    expected = path.read_text()
    if expected == text:
        return
    diff = list(difflib.unified_diff(expected.splitlines(), text.splitlines(), f"{path.name} (kept)",
                                     f"{path.name} (now)", lineterm="", n=2))
    shown = diff[:MAX_DIFF_LINES]
    if len(diff) > MAX_DIFF_LINES:
        shown.append(f"... {len(diff) - MAX_DIFF_LINES} more lines")
    pytest.fail(f"snapshot {path} differs; if the change is meant, run `make snapshots` (pytest {UPDATE_OPTION}) "
                "and review the diff:\n" + "\n".join(shown), pytrace=False)
