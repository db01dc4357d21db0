"""The base of every typed settings section: frozen, unknown keys are errors, a fingerprint for code versions.

Sections live beside the core code they configure; `llm_assets.settings` only composes them and loads the YAML."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from llm_assets.core.versions import digest

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent  # relative paths in settings are from here


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def fingerprint(self) -> str:
        """A short stable hash of the effective values, for code versions."""
        return digest(json.dumps(self.model_dump(mode="json"), sort_keys=True))
