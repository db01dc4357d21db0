"""The local Dagster instance: DAGSTER_HOME under the state folder, configured by the repository's dagster.yaml."""

from __future__ import annotations

import os
from pathlib import Path

from llm_assets import environment
from llm_assets.settings import PROJECT_ROOT


def dagster_home() -> Path:
    """Point DAGSTER_HOME at the state folder (unless already set) with the project's dagster.yaml in it."""
    home = Path(os.environ.get("DAGSTER_HOME") or environment.home() / "dagster")
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    source = PROJECT_ROOT / "dagster.yaml"
    if not config.exists() and source.exists():
        config.symlink_to(source)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def get_instance():
    import dagster as dg

    dagster_home()
    return dg.DagsterInstance.get()
