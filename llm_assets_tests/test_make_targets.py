"""Every make target the README and the docs name exists and expands on this checkout, and the tools its recipes
call are there: a fresh clone's `make bench-compare` failed at once because it ran uv from the project's
environment, which has none. (What each benchmark measures is checked by running it; here, that each can start.)"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest

from llm_assets.settings import PROJECT_ROOT
from llm_assets_tests.test_docs import docs_text

README_TARGETS = sorted(set(re.findall(r"`make ([a-z][a-z-]*)", docs_text())))


def _dry_run(target: str) -> str:
    done = subprocess.run(["make", "-n", target], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"make -n {target}: {done.stderr}"
    return done.stdout


def test_the_readme_names_the_targets_it_documents():
    assert {"demo", "test", "test-core", "lint", "bench-compare", "demo-cluster", "clean"} <= set(README_TARGETS)


@pytest.mark.parametrize("target", README_TARGETS)
def test_every_readme_target_expands(target):
    assert _dry_run(target).strip()


@pytest.mark.parametrize("target", ["bench-compare", "bench-engine-bakeoff", "bench-dump-scale",
                                    "bench-dedup-path"])
def test_the_benchmarks_that_build_environments_get_a_uv_that_runs(target):
    """They make their scratch environment with uv: the Makefile's own, passed to them, not the project's
    environment's (it has no uv)."""
    (line,) = [line for line in _dry_run(target).splitlines() if "-m benchmarks." in line]
    assert "LLM_ASSETS_UV=" in line, line
    uv = shlex.split(shlex.split(line)[0].split("=", 1)[1])
    done = subprocess.run([*uv, "--version"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("uv "), done.stderr


@pytest.mark.corpus  # against datatrove, in its own environment
def test_bench_compare_smoke_runs_as_make_would(tmp_path):
    """The cheapest comparison of `make bench-compare`, quick, with the uv the Makefile passes: the anchor's
    environment is built on first use (from uv's cache afterwards: seconds) and the comparison reports a figure."""
    (line,) = [line for line in _dry_run("bench-compare").splitlines() if "-m benchmarks." in line]
    uv = shlex.split(line)[0].split("=", 1)[1]
    out = tmp_path / "compare.json"
    done = subprocess.run([str(PROJECT_ROOT / ".venv" / "bin" / "python"), "-m", "benchmarks.compare", "--quick",
                           "--only", "startup", "--no-profile", "--no-quality", "--json", str(out)],
                          cwd=PROJECT_ROOT, env={**os.environ, "LLM_ASSETS_UV": uv}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())["results"]
    assert "error" not in results["startup"], results["startup"]
