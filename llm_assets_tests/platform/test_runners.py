"""Runners built from their settings: one settings class per `runner.kind` in a discriminated union, each built into
its runner by `RUNNERS`; the README's "Add a runner" list names what a new one takes."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import yaml

from llm_assets.core.units import InProcessRunner, PoolRunner, RunnerSettings, UnitResult
from llm_assets.platform.runners import RUNNERS, runner_for, runner_slots
from llm_assets.settings import DaskRunnerSettings, PoolRunnerSettings, Settings, runner_settings

ROOT = Path(__file__).resolve().parents[2]
UNION, DISCRIMINATOR = typing.get_args(RunnerSettings)
SETTINGS_CLASSES = tuple(typing.get_args(member)[0] for member in typing.get_args(UNION))


def kinds() -> list[str]:
    return [cls.model_fields["kind"].default for cls in SETTINGS_CLASSES]


def test_every_kind_has_its_settings_class_and_its_runner():
    assert kinds() == ["inprocess", "pool", "dask"]
    assert [typing.get_args(member)[1].tag for member in typing.get_args(UNION)] == kinds()  # each tagged by its kind
    assert set(RUNNERS) == set(SETTINGS_CLASSES)
    for cls in SETTINGS_CLASSES:
        assert runner_settings(kind=cls.model_fields["kind"].default) == cls()
        for name, field in cls.model_fields.items():
            assert field.description, f"{cls.__name__}.{name} has no description"


def test_each_runner_is_built_from_its_settings():
    assert isinstance(runner_for(runner_settings(kind="inprocess")), InProcessRunner)
    assert runner_for(PoolRunnerSettings(workers=3)) == PoolRunner(3)
    dask = runner_for(DaskRunnerSettings(address="tcp://127.0.0.1:1", max_in_flight=8, num_cpus=2))
    assert (type(dask).__name__, dask.address, dask.max_in_flight, dask.resources) == \
        ("DaskRunner", "tcp://127.0.0.1:1", 8, {"CPU": 2})


def test_the_built_runner_runs_units():
    units = [type("Unit", (), {"source": f"s{i}"})() for i in range(3)]
    results = runner_for(runner_settings(kind="inprocess")).run(
        lambda u: UnitResult(unit=u.source, source=u.source, part=None, rows_in=1, rows_out=1), units)
    assert [r.source for r in results] == ["s0", "s1", "s2"]


def test_slots_without_a_cluster_come_from_each_kinds_settings():
    assert runner_slots(runner_settings(kind="inprocess")) == (1, "in-process runner (1 slot)")
    assert runner_slots(PoolRunnerSettings(workers=5)) == (5, "pool of 5 workers")
    # a cluster is asked first (`llm_assets_tests/test_cluster.py`); unreached, its settings' count
    assert DaskRunnerSettings(workers=7).slots()[0] == 7


@pytest.mark.parametrize("runner, error", [
    ({"kind": "ray"}, r"runner\n  unknown runner.kind: expected one of 'inprocess', 'pool', 'dask'.*'ray'"),
    ({"kind": "pool", "address": "tcp://127.0.0.1:8786"}, r"runner\.pool\.address\n.*Extra inputs"),
    ({"kind": None}, r"runner\n  unknown runner.kind"),
])
def test_an_unknown_kind_or_another_kinds_setting_is_an_error_naming_the_setting(tmp_path, runner, error):
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"runner": runner}))
    with pytest.raises(ValueError, match=f"(?s)invalid settings in {re.escape(str(path))}.*{error}"):
        Settings.from_file(path)


def test_the_readme_list_and_its_example_name_every_kind():
    text = (ROOT / "docs" / "extending.md").read_text()
    section = text.split("## Add a runner\n", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d\. (.*(?:\n   .*)*)", section, re.M)
    assert len(steps) == 3
    for path in re.findall(r"`((?:llm_assets|llm_assets_tests)/[^`]+)`", section):
        assert (ROOT / path).exists(), path
    assert "RunnerSettings" in steps[0] and "RUNNERS" in steps[1]
    assert "llm_assets_tests/platform/test_runners.py" in steps[2]
    example = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert re.search(r"kind: \w+ +# (.*)", example).group(1).split(" | ") == kinds()
    assert isinstance(Settings.model_validate(yaml.safe_load(example)).runner, PoolRunnerSettings)


def test_a_runner_section_without_a_kind_is_the_default_pool():
    assert Settings.model_validate({"runner": {"workers": 4}}).runner == PoolRunnerSettings(workers=4)
    assert Settings().runner == PoolRunnerSettings()
