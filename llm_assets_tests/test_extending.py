"""The docs' "Add a stage": a stage added by following its list, and nothing else, is in the code location, its job,
the stale planner, `status`, `trace`, `export`, the cost report and the definitions snapshot."""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from llm_assets.settings import PROJECT_ROOT, load_settings
from llm_assets.stage import Stage
from llm_assets.stages import SPECS, STAGES, specs_of
from llm_assets_tests.test_definitions import SNAPSHOT, definitions_snapshot

EXTENDING = PROJECT_ROOT / "docs" / "extending.md"
NAME = "word_counts"

# Step 1: the processing, Dagster-free.
CORE = '''
from dataclasses import dataclass

from llm_assets.core.units import UnitResult, WorkUnit

COLUMNS = ["doc_id", "words"]


@dataclass(frozen=True)
class CountUnit(WorkUnit):
    pass


def count_words(unit: CountUnit) -> UnitResult:
    return UnitResult(unit=unit.unit, source=unit.source)
'''

# Step 2: the spec and the stage object.
STAGE = '''
"""Words per filtered document: the docs' example of a stage."""

from llm_assets.core.stage_names import FILTERED
from llm_assets.core.versions import code_version
from llm_assets.registry import StageSpec
from llm_assets.stage import ShardStage
from word_counts_core import COLUMNS, CountUnit, count_words

WORD_COUNTS = "word_counts"  # a throwaway stage's: in llm_assets/core/stage_names.py for a real one
SPEC = StageSpec(WORD_COUNTS, "shard", (FILTERED,), version=lambda settings: code_version("1"), job="lake_job",
                 documents=True)


class WordCounts(ShardStage):
    """The number of words of every filtered document: a stage added by following the docs' list, one work unit
    per filtered part."""

    spec = SPEC
    work = staticmethod(count_words)

    def unit(self, p, source):
        return CountUnit(store=p.lake.config, source=source)

    def columns(self, p):
        return COLUMNS


STAGES = [WordCounts()]
'''


@pytest.fixture
def new_stage(tmp_path, monkeypatch):
    """The stage module of steps 1 and 2, importable; step 3 is appending its stages to (a copy of) STAGES."""
    (tmp_path / "word_counts_core.py").write_text(CORE)
    (tmp_path / "word_counts_stage.py").write_text(STAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import word_counts_stage

    yield word_counts_stage
    for module in ("word_counts_stage", "word_counts_core"):
        sys.modules.pop(module, None)


def readme_steps() -> list[str]:
    section = EXTENDING.read_text().split("## Add a stage\n", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\d+\. (.*?)(?=\n\d+\. |\n\n)", section, re.M | re.S)


def test_the_readme_list_names_exactly_the_steps():
    steps = readme_steps()
    assert [re.findall(r"`([^`]+)`", step)[0] for step in steps] == [
        "llm_assets/core/<stage>.py", "llm_assets/stages/<stage>.py", "llm_assets/stages/__init__.py",
        "llm_assets_tests/core/test_<stage>.py", "make snapshots"]
    assert "ShardStage" in steps[1] and "STAGES" in steps[1] and "STAGES" in steps[2]
    # every stage is shaped as step 2 says: an object of a module of llm_assets/stages/, with its spec
    for stage in STAGES:
        module = sys.modules[type(stage).__module__]
        assert Path(module.__file__ or "").parent == PROJECT_ROOT / "llm_assets" / "stages"
        assert stage in module.STAGES and isinstance(stage, Stage) and stage.spec.name, module.__name__


def test_no_function_of_a_stage_module_is_over_60_lines():
    """A stage reads like the stage: its pieces are small and named."""
    import ast

    long = [f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"  # type: ignore[operator]
            for path in sorted((PROJECT_ROOT / "llm_assets" / "stages").glob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 60]
    assert long == []


def test_a_stage_added_by_the_list_is_in_the_code_location_its_job_and_the_snapshot(new_stage):
    import dagster as dg

    from llm_assets.definitions import build_defs

    defs = build_defs(load_settings(), stages=[*STAGES, *new_stage.STAGES])
    dg.Definitions.validate_loadable(defs)
    spec = next(s for s in defs.resolve_all_asset_specs() if s.key.path[-1] == NAME)
    assert [d.asset_key.path[-1] for d in spec.deps] == ["filtered"] and spec.group_name == "lake"
    assert dg.AssetKey(NAME) in defs.resolve_job_def("lake_job").asset_layer.executable_asset_keys

    kept, now = json.loads(SNAPSHOT.read_text()), definitions_snapshot(defs)
    assert set(now["assets"]) - set(kept["assets"]) == {NAME}
    assert now["assets"][NAME]["checks"] == ["row_accounting", "schema"]
    changed = {name for name in kept["assets"] if kept["assets"][name] != now["assets"][name]}
    assert changed == {"cost"} and now["assets"]["cost"]["deps"] == sorted([*kept["assets"]["cost"]["deps"], NAME])
    assert {job for job in kept["jobs"] if kept["jobs"][job] != now["jobs"][job]} == {"lake_job"}


def test_a_stage_added_by_the_list_is_planned(new_stage, lake, crawl):
    from llm_assets.core.inventory import shard_of
    from llm_assets.stages import code_versions
    from llm_assets.tools.stale import plan_stale

    settings = load_settings()
    key = f"raw/{crawl}/a.warc.gz"
    lake.put_bytes(key, b"not read: planning lists the raw files")
    shard = shard_of(key, settings.shards)
    specs = specs_of([*STAGES, *new_stage.STAGES])
    planned = {(p.asset, p.partition): p.cause for p in plan_stale(
        lake, settings, [crawl], code_versions(settings) | {NAME: new_stage.SPEC.version(settings)}, specs)}
    assert planned[(NAME, f"{crawl}|{shard}")] == "upstream data changed (filtered is rebuilt)"
    assert planned[("cost", crawl)].startswith("upstream data changed")


def test_status_trace_and_export_follow_the_list(new_stage, tmp_path):
    """What appending the module's stages to STAGES does to the modules that read the list, in a fresh
    interpreter."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import word_counts_stage
        from llm_assets import stages
        stages.STAGES.extend(word_counts_stage.STAGES)
        stages.SPECS[:] = stages.specs_of(stages.STAGES)
        from llm_assets.tools import export, status, trace
        print(json.dumps({{"status": status.STAGES, "trace": list(trace.STAGES), "export": list(export.EXPORTABLE)}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=PROJECT_ROOT).stdout
    seen = json.loads(out.splitlines()[-1])
    assert all(NAME in names for names in seen.values()), seen
    assert [s.name for s in SPECS if s.documents] == [n for n in seen["trace"] if n != NAME]


def test_an_asset_takes_exactly_its_specs_inputs(new_stage):
    """The edges are the spec's: the adapter gives the asset function the spec's inputs, by name, and nothing else."""
    from llm_assets.dagster.adapter import shard_asset

    (stage,) = new_stage.STAGES
    asset = shard_asset(stage, load_settings(), [*SPECS, stage.spec])
    assert [d.asset_key.path[-1] for d in next(iter(asset.specs)).deps] == ["filtered"]
    assert list(asset.keys_by_input_name) == ["filtered"]


# The stages whose processing is not one core module of their name, and where it is.
CORE_ELSEWHERE = {"quality_classifier": "core/quality_model.py", "cost": "core/ledger.py",
                  "curation": "core/takedowns.py and core/decontamination.py"}


def test_a_stage_module_and_its_core_module_share_its_name():
    stages = {p.stem for p in (PROJECT_ROOT / "llm_assets" / "stages").glob("*.py")} - {"__init__"}
    core = {p.stem for p in (PROJECT_ROOT / "llm_assets" / "core").glob("*.py")}
    assert sorted(stages - core) == sorted(CORE_ELSEWHERE)
    assert all((PROJECT_ROOT / "llm_assets" / path).exists()
               for paths in CORE_ELSEWHERE.values() for path in paths.split(" and "))


def test_specs_name_their_stages_and_inputs_by_the_constants_the_type_checker_sees():
    """`llm_assets/core/stage_names.py`: a spec's name and inputs, and a partition's inputs, are constants, so that
    a misspelt stage fails the type check instead of a run."""
    import ast

    from llm_assets.core import stage_names

    assert sorted(v for k, v in vars(stage_names).items() if k.isupper()) == sorted(s.name for s in SPECS)
    literals = []
    for path in sorted((PROJECT_ROOT / "llm_assets" / "stages").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            named = []
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "StageSpec":
                named = node.args[:1] + [e for a in node.args[2:3] if isinstance(a, ast.Tuple) for e in a.elts]
            elif isinstance(node, ast.Subscript) and getattr(node.value, "attr", "") == "inputs":
                named = [node.slice]
            literals += [f"{path.name}:{n.lineno}" for n in named if isinstance(n, ast.Constant)]
    assert literals == []
