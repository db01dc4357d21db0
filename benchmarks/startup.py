"""Process start-up: what a command costs before it does anything, with and without compiled bytecode.

Every Dagster step process, cluster worker and CLI command imports Dagster and the code location. Where
PYTHONDONTWRITEBYTECODE is set (CI images, many containers) nothing is cached, so each process compiles them again
unless the environment was installed with its bytecode (`uv sync --compile-bytecode`, as the Makefile does).
"Without bytecode" points Python at an empty cache folder (PYTHONPYCACHEPREFIX) and forbids writing one.
Interleaved runs, wall seconds, median of `--repeat`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import write_hand_section

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
CLI = str(ROOT / ".venv" / "bin" / "llm-assets")
COMMANDS = {
    "`import dagster`": [PYTHON, "-c", "import dagster"],
    "the code location (`definitions.defs()`)": [PYTHON, "-c", "from llm_assets.definitions import defs; defs()"],
    "`llm-assets status` (the demo's lake)": [CLI, "status"],
    "`llm-assets stale` (the demo's lake)": [CLI, "stale"],
}
HEADING = "## Process start-up"


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    subprocess.run([CLI, "store", "start"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as empty:
        cold = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty}
        warm = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        rows = []
        for label, cmd in COMMANDS.items():
            times: dict[str, list[float]] = {"cold": [], "warm": []}
            for _ in range(args.repeat):  # A B A B: both see the same machine
                for kind, env in (("cold", cold), ("warm", warm)):
                    times[kind].append(wall(cmd, env))
            cold_s, warm_s = statistics.median(times["cold"]), statistics.median(times["warm"])
            rows.append(f"| {label} | {cold_s:.2f} | {warm_s:.2f} | {cold_s / warm_s:.1f}× |")
            print(rows[-1], flush=True)
    section = "\n".join([
        f"{HEADING} (`make bench-startup`; not part of `make bench`)",
        "",
        "Wall seconds of a whole process (the imports alone, the code location built, two CLI commands start to "
        "finish on the demo's lake), median of "
        f"{args.repeat} interleaved runs (`{Path(sys.argv[0]).name}`, {time.strftime('%Y-%m-%d')}): without "
        "compiled bytecode (PYTHONDONTWRITEBYTECODE=1 and an empty PYTHONPYCACHEPREFIX: every process compiles "
        "Dagster again) and with the bytecode `make` installs (`uv sync --compile-bytecode` and `compileall` of the "
        "project). `status` reads the lake alone and imports no Dagster (before this release it read the Dagster "
        "instance and imported the definitions: 7.2-9.7 s); `stale` reads the Dagster instance for its crawls.",
        "",
        "| command | without bytecode (s) | with (s) | |",
        "|---|---:|---:|---:|",
        *rows,
    ])
    write_hand_section(HEADING, section)


if __name__ == "__main__":
    main()
