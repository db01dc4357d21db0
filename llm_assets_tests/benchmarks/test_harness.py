"""A generated report states the conditions measured during its run (load average, CPU model, commit), never a
fixed sentence about them: `benchmarks.harness.Conditions` samples them, and the dump-scale report renders them."""

from __future__ import annotations

import subprocess
import time

import pytest

from benchmarks import harness

pytestmark = pytest.mark.core


def test_the_conditions_are_sampled_while_the_run_goes_on(monkeypatch):
    loads = iter([(0.5, 0.4, 0.3), (7.25, 3.0, 1.0), (2.0, 2.5, 1.5)])
    last = [(2.0, 2.5, 1.5)]

    def getloadavg():
        last[0] = next(loads, last[0])
        return last[0]

    monkeypatch.setattr(harness.os, "getloadavg", getloadavg)
    monkeypatch.setattr(harness, "cpu_model", lambda: "Test CPU @ 1.00GHz")
    monkeypatch.setattr(harness, "git_commit", lambda: "abc1234+")
    with harness.Conditions(every=0.01) as measured:
        deadline = time.monotonic() + 5
        while measured.peak < 7.25 and time.monotonic() < deadline:
            time.sleep(0.01)
        got = measured.now()
    # the peak is a sample taken between the start and the end, neither of which saw it
    assert got["load_start"] == [0.5, 0.4, 0.3] and got["load_end"] == [2.0, 2.5, 1.5] and got["load_max"] == 7.25
    text = harness.conditions_text(got)
    for value in ("0.50 at the start", "2.00 at the end", "at most 7.25", "Test CPU @ 1.00GHz", "abc1234+",
                  got["date"]):
        assert value in text


def test_the_commit_is_this_checkout_s_with_a_plus_when_it_differs():
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=harness.ROOT, capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=harness.ROOT,
                           capture_output=True, text=True).stdout.strip()
    assert harness.git_commit() == head + ("+" if dirty else "")


def test_the_dump_scale_report_states_its_run_s_measured_conditions():
    from benchmarks.dump_scale import run_line

    conditions = {"date": "2026-11-29 08:00 UTC", "cpus": 2, "cpu_model": "Some CPU", "commit": "1234abc",
                  "load_start": [3.21, 2.0, 1.0], "load_end": [6.54, 4.0, 2.0], "load_max": 9.87, "sampled_every": 5.0}
    line = run_line({"command": ".venv/bin/python -m benchmarks.dump_scale", "seconds": 12.0,
                     "sizes": ["1000000"], "conditions": conditions})
    for value in ("3.21", "6.54", "9.87", "Some CPU", "1234abc", "2026-11-29 08:00 UTC", "2 CPUs"):
        assert value in line
    assert "usual" not in line
