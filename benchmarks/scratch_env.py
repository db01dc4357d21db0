"""Environments of tools that are not dependencies of the product (datatrove, Ray), made with uv on first use.

The project's environment has no uv (the Makefile installs uv for the Python that runs it, not into `.venv`), so
the Makefile passes its own as `LLM_ASSETS_UV`; run directly, a `uv` on the PATH is used."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


def uv_command() -> list[str]:
    """How to run uv: `LLM_ASSETS_UV` (the Makefile's), else `uv` on the PATH, else this interpreter's uv module."""
    if command := os.environ.get("LLM_ASSETS_UV"):
        return shlex.split(command)
    if path := shutil.which("uv"):
        return [path]
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    raise SystemExit("uv not found: run this benchmark through make (it passes LLM_ASSETS_UV), put uv on the PATH, "
                     "or set LLM_ASSETS_UV to the command that runs it")


def scratch_venv(venv: Path, *requirements: str) -> Path:
    """A Python 3.11 environment at `venv` with `requirements` installed from PyPI; its interpreter. An existing one
    gets what it lacks (uv refuses to create an environment over another)."""
    uv = uv_command()
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([*uv, "venv", "--quiet", "--python", "3.11", str(venv)], check=True)
    subprocess.run([*uv, "pip", "install", "--quiet", "--python", str(python), *requirements], check=True)
    return python
