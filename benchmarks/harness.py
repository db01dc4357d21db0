"""What every benchmark shares about its run: the conditions it was measured under (load, CPU model, commit), its
scratch folder, and how a side is run (one fresh process pinned to a core, its CPU counted) and sides compared
(interleaved rounds).

`RUN` starts when a benchmark first imports this module (through `benchmarks.summary`, which every benchmark
publishes with): its load average and commit at the start, read again when the run publishes, so that every
details file and every row of the summary states the conditions its own run saw. A benchmark that samples the load
while it runs says so with its own `Conditions` (`with Conditions() as measured: ...`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def git_commit() -> str:
    """The checked-out commit, short, with a + when tracked files differ from it (what ran is not that commit)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
    return (head.stdout.strip() or "?") + ("+" if dirty else "")


class Conditions:
    """What a run was measured under, sampled while it runs: the load average at the start, every `every` seconds
    (its largest 1-minute figure) and when asked, the CPU model, and the commit checked out when the run started
    (the code it ran: later commits or edits during a long run are not). A shared machine's load changes what wall
    times (and, less, CPU times) mean, so a report states the load its run saw, never a usual one.

        with Conditions() as measured:
            ...
            report["conditions"] = measured.now()
    """

    def __init__(self, every: float = 5.0):
        self.every = every
        self.start = os.getloadavg()
        self.peak = self.start[0]
        self.started = datetime.now(timezone.utc)
        self.commit = git_commit()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Conditions:
        self._thread = threading.Thread(target=self._sample, name="load-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, os.getloadavg()[0])

    def now(self) -> dict:
        """The conditions so far, as JSON-ready values (what `conditions_text` renders)."""
        end = os.getloadavg()
        self.peak = max(self.peak, end[0])
        return {"date": self.started.strftime("%Y-%m-%d %H:%M UTC"), "cpus": os.cpu_count() or 0,
                "cpu_model": cpu_model(), "commit": self.commit, "load_start": [round(x, 2) for x in self.start],
                "load_end": [round(x, 2) for x in end], "load_max": round(self.peak, 2), "sampled_every": self.every}


def conditions_text(c: dict) -> str:
    """One sentence of the measured conditions (`Conditions.now()`)."""
    return (f"measured {c['date']} at commit {c['commit']} on {c['cpus']} CPUs ({c['cpu_model']}); load average "
            f"(1 min) {c['load_start'][0]:.2f} at the start, {c['load_end'][0]:.2f} at the end, at most "
            + (f"{c['load_max']:.2f} sampled every {c['sampled_every']:g} s" if c['sampled_every'] else
               f"{c['load_max']:.2f} of the two; {c['load_end'][1]:.2f} and {c['load_end'][2]:.2f} over the last 5 "
               "and 15 min"))


RUN = Conditions(every=0)  # this process's run: its start, read again when it publishes (not sampled between)


# One thread everywhere: a side is measured per core.
ONE_THREAD = {k: "1" for k in ("POLARS_MAX_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                 "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")}
QUIET = {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def scratch(name: str) -> Path:
    """This run's own folder for its inputs and outputs under `.bench/<name>/` (made by the run when it starts): two
    runs in one checkout do not overwrite each other's (what runs share, a built environment, stays beside it)."""
    return ROOT / ".bench" / name / f"run-{RUN.started:%Y%m%dT%H%M%S}-{os.getpid()}"


def run_side(cmd: list[str], cpus: str | None, env: dict[str, str] | None = None) -> dict:
    """One side in a fresh process pinned to `cpus` (None: not pinned): its JSON line, plus the whole process's
    wall clock and CPU seconds (wait4: the process and every descendant it waited for)."""
    full_env = {**os.environ, **ONE_THREAD, **QUIET, **(env or {})}
    pin = ["taskset", "-c", cpus] if cpus else []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*pin, *cmd], cwd=ROOT, env=full_env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    result = json.loads(lines[-1])
    return {**result, "whole_cpu_s": usage.ru_utime + usage.ru_stime, "whole_wall_s": wall}


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def interleaved(sides: Mapping[str, list[str]], rounds: int, run: Callable[[str, list[str]], dict],
                on_side: Callable[[int, str], None] = lambda k, name: None) -> list[dict]:
    """A B A B ...: every side once per round, the order flipped every other round, so that a drift of the machine
    (load, heat, caches) falls on both; -> per round, each side's result."""
    results = []
    for k in range(rounds):
        order = list(sides.items())
        if k % 2:
            order.reverse()
        got = {}
        for name, cmd in order:
            on_side(k, name)
            got[name] = run(name, cmd)
        results.append(got)
    return results
