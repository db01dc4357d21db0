"""The tests mirror the code: the tests of `llm_assets/a/b.py` are `llm_assets_tests/a/test_b.py` (of a package
`llm_assets/a/b/`, the same file), those of `resources/`, `benchmarks/` and `llm_assets_support/` are under
`llm_assets_tests/resources/`, `benchmarks/` and `support/`. A module tested from several files names the aspect
after its own name: `core/test_lake_outage.py` tests `core/lake.py`. The scenarios below test the product as a
whole and say why they have no module of their own.

What tests and benchmarks both use lives in `llm_assets_support/`: no benchmark and no support module imports a
test, only the tests of the benchmarks import `benchmarks`, and the product imports none of them."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from llm_assets.settings import PROJECT_ROOT

TESTS = PROJECT_ROOT / "llm_assets_tests"

# Files that test no one module, each with the reason.
SCENARIOS = {
    "test_chaos.py": "the short fault-injection suite: whole runs killed, the store stopped or full "
                     "(`make chaos` is the long one)",
    "test_docs.py": "the README as a front door, the docs site built strictly: no broken link or anchor",
    "test_extending.py": "the docs' `Add a stage` list, followed to the letter on a throwaway stage",
    "test_imports.py": "the import graph of every module: no circle, no arrow from a lower layer to a higher one",
    "test_layout.py": "this file: where tests live",
    "test_make_targets.py": "every make target the README and the docs name exists and its tools are there",
    "test_one_stale.py": "the Dagster UI's stale marks against the stale planner, through a real webserver",
    "test_parity.py": "every filter block against datatrove's, on the shared documents",
    "test_parity_languages.py": "FineWeb-2's blocks per language against datatrove's",
    "test_pipeline.py": "one full materialization of every stage through Dagster, then the CLI reading it back",
}

# Where the mirror of a folder under llm_assets_tests/ points when it is not a package of llm_assets.
ROOTS = {"resources": "resources", "benchmarks": "benchmarks", "support": "llm_assets_support"}


def _source_dir(test_dir: Path) -> Path:
    parts = test_dir.relative_to(TESTS).parts
    if parts and parts[0] in ROOTS:
        return PROJECT_ROOT.joinpath(ROOTS[parts[0]], *parts[1:])
    return PROJECT_ROOT.joinpath("llm_assets", *parts)


def _module_of(test_file: Path) -> Path | None:
    """The module a test file mirrors: `test_<name>.py` tests `<name>.py` (or the package `<name>/`) in the mirrored
    folder, else the longest `<name>` prefix ending before an underscore (`test_lake_outage` tests `lake`)."""
    source = _source_dir(test_file.parent)
    if source == PROJECT_ROOT / "llm_assets" / "stages" and not source.is_dir():
        source = source.parent  # before the stage packages llm_assets/<stage>/ became modules of llm_assets/stages/
    words = test_file.stem.removeprefix("test_").split("_")
    for n in range(len(words), 0, -1):
        name = "_".join(words[:n])
        for candidate in (source / f"{name}.py", source / name / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


@cache
def _imports(path: Path) -> frozenset[str]:
    """Every module a file imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return frozenset(names)


def _importers_of(package: str, folders: list[str]) -> list[str]:
    files = [p for folder in folders for p in sorted((PROJECT_ROOT / folder).rglob("*.py")) if package in p.read_text()]
    return [f"{p.relative_to(PROJECT_ROOT)}: {m}" for p in files for m in sorted(_imports(p))
            if m == package or m.startswith(package + ".")]


def test_every_test_file_mirrors_a_module_or_is_a_named_scenario():
    files = _test_files()
    assert len(files) > 50, "the tests were not found"
    scenarios = {f.relative_to(TESTS).as_posix() for f in files} & SCENARIOS.keys()
    unmirrored = [f.relative_to(TESTS).as_posix() for f in files
                  if f.relative_to(TESTS).as_posix() not in scenarios and _module_of(f) is None]
    assert not unmirrored, (
        f"test files that mirror no module: {unmirrored}. The tests of llm_assets/a/b.py go to "
        "llm_assets_tests/a/test_b.py (or test_b_<aspect>.py); a scenario testing no one module is named in SCENARIOS "
        "with the reason")


def test_the_mirror_rule_finds_modules_packages_and_aspects():
    assert _module_of(TESTS / "core" / "test_lake.py") == PROJECT_ROOT / "llm_assets/core/lake.py"
    assert _module_of(TESTS / "core" / "test_lake_outage.py") == PROJECT_ROOT / "llm_assets/core/lake.py"
    assert _module_of(TESTS / "core" / "test_filters.py") == PROJECT_ROOT / "llm_assets/core/filters/__init__.py"
    assert _module_of(TESTS / "resources" / "test_io_manager.py") == PROJECT_ROOT / "resources/io_manager.py"
    assert _module_of(TESTS / "benchmarks" / "test_summary.py") == PROJECT_ROOT / "benchmarks/summary.py"
    assert _module_of(TESTS / "support" / "test_pii_names.py") == PROJECT_ROOT / "llm_assets_support/pii_names.py"
    assert _module_of(TESTS / "platform" / "test_instance_run_monitoring.py") == \
        PROJECT_ROOT / "llm_assets/platform/instance.py"
    assert _module_of(TESTS / "core" / "test_nothing_here.py") is None


def test_every_test_folder_is_a_package():
    folders = {f.parent for f in TESTS.rglob("*.py")}
    assert not [str(d.relative_to(PROJECT_ROOT)) for d in sorted(folders) if not (d / "__init__.py").is_file()]


def test_benchmarks_and_support_import_no_test_and_only_the_benchmarks_tests_import_benchmarks():
    assert not _importers_of("llm_assets_tests", ["benchmarks", "llm_assets_support"])
    others = [f"llm_assets_tests/{d.name}" for d in TESTS.iterdir()
              if d.is_dir() and d.name != "benchmarks" and (d / "__init__.py").exists()]
    importers = _importers_of("benchmarks", others) + [
        f"{p.name}: {m}" for p in sorted(TESTS.glob("*.py")) for m in sorted(_imports(p))
        if m == "benchmarks" or m.startswith("benchmarks.")]
    assert not importers, "tests of the benchmarks go to llm_assets_tests/benchmarks/"


def test_the_product_imports_neither_tests_nor_benchmarks_nor_their_support():
    for package in ("llm_assets_tests", "llm_assets_support", "benchmarks"):
        assert not _importers_of(package, ["llm_assets", "resources"]), package
