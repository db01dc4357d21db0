"""The full fault-injection suite (`make chaos`); its figures go into
benchmarks/results/chaos.md and a row of BENCHMARKS.md's summary table.

    .venv/bin/python -m benchmarks.chaos [--seed N] [--no-write]

What runs (the harness and its invariants are in llm_assets_support/chaos.py; the short version is
llm_assets_tests/test_chaos.py, in CI): the real WARC files of ../shared/data/warc as one crawl in 2 shards, every
job run once cleanly as the reference, then lake_job, crawl_job, curated_job and release_job SIGKILLed at random
points (22 kills), the store stopped, SIGKILLed or paused (SIGSTOP) for 10 s and for 120 s in the middle of a
lake_job run with retry budgets longer and shorter than the outage, two runs of one partition at once, a reader
during recommits, and a store whose disk fills up mid-run. About 30 minutes on 2 cores. Needs root (the full store is
a tmpfs). The seed is printed and written: `--seed` draws the same fault points again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.report import write_hand_section
from benchmarks.summary import Row, details_path, update_rows, verdict
from llm_assets.core.keys import split_partition
from llm_assets.settings import PROJECT_ROOT
from llm_assets_support.chaos import CRAWL, FULL_LAYOUT, Chaos, CodeChanged, Tally

BENCHMARKS = PROJECT_ROOT / "BENCHMARKS.md"
HEADING = "## Reliability: fault injection"
COMMAND = ".venv/bin/python -m benchmarks.chaos"  # `make chaos`
KILLS = {"lake_job": 8, "crawl_job": 5, "curated_job": 3, "release_job": 6}
# (mode, outage seconds, retry budget seconds): budgets longer than the outage must be waited out, shorter ones
# must fail the run naming the store. A paused store does not refuse connections: calls hang until botocore's
# read timeout (60 s), so only the 120 s pause can exhaust a budget.
OUTAGES = [("kill", 10, 300), ("stop", 10, 3), ("pause", 10, 300), ("pause", 10, 3), ("kill", 120, 300),
           ("pause", 120, 30)]


def run(chaos: Chaos) -> list[Tally]:
    tallies: list[Tally] = []

    def do(scenario, *args, **kwargs) -> Tally:
        try:
            t = scenario(*args, **kwargs)
        except CodeChanged as e:
            # Someone edited a stage in the working tree: compare with a reference of the code as it is now.
            print(f"{e}: rebuilding the reference", flush=True)
            chaos.rebuilds += 1
            chaos.build_reference()
            t = scenario(*args, **kwargs)
        tallies.append(t)
        print(f"{'ok  ' if t.ok else 'FAIL'} {t.scenario}: runs {t.runs}, kills {t.kills}, outages {t.outages}, "
              f"failed {t.failed_runs}, short {t.short}, mismatches {t.mismatches}, partial {t.partial}, "
              f"orphans {t.orphans}, hangs {t.hangs}", flush=True)
        return t

    parts = chaos.partitions()
    for job, target in KILLS.items():
        kills, attempt = 0, 0
        while kills < target and attempt < 2 * target:
            partition = {"lake_job": parts[attempt % 2], "curated_job": parts[attempt % 2], "crawl_job": CRAWL}.get(job)
            # every other pair of lake_job kills interrupts a rebuild over partitions made with the other extractor
            previous = "resiliparse" if job == "lake_job" and attempt % 4 >= 2 else "none"
            kills += do(chaos.kill_run, job, partition, previous=previous).kills
            attempt += 1
    for mode, duration, budget in OUTAGES:
        do(chaos.outage, duration=duration, budget_s=budget, mode=mode)
    do(chaos.concurrent, parts[0])
    do(chaos.concurrent, parts[1])
    do(chaos.concurrent, parts[0], mixed=True)
    do(chaos.reader_during_recommit, recommits=6)
    do(chaos.full_store)
    return tallies


def render(chaos: Chaos, tallies: list[Tally], seconds: float, load: tuple) -> str:
    groups: dict[str, Tally] = {}
    for t in tallies:
        groups.setdefault(t.scenario, Tally(t.scenario)).add(t)
    total = Tally("**total**")
    for g in groups.values():
        total.add(g)
    columns = ["scenario", "runs", "kills", "store outages", "failed runs", "committed short",
               "data-version mismatches", "partial visible", "orphans after GC", "hangs"]
    rows = [[g.scenario, g.runs, g.kills, g.outages, g.failed_runs, g.short, g.mismatches, g.partial, g.orphans,
             g.hangs] for g in [*groups.values(), total]]
    table = "\n".join(["| " + " | ".join(columns) + " |", "|---" + "|---:" * (len(columns) - 1) + "|",
                       *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)])
    points = Counter(f"{k} of {n}" for k, n in total.kill_points)
    by_partitions = ", ".join(f"{p} ({points[p]}×)" for p in sorted(points))
    failures = sorted({n.split(": failed after", 1)[1].split(": ", 1)[1][:160] for t in tallies for n in t.notes
                       if ": failed after" in n and ": " in n.split(": failed after", 1)[1]})
    findings = sorted({n for t in tallies for n in t.notes
                       if n.startswith(("not reported as a full store", "a step failed with an error that is not"))})
    readers = [n for t in tallies for n in t.notes if "whole reads" in n]
    files = ", ".join(f"shard {s}: " + " + ".join(f"`{f}`" for f in names) for s, names in chaos.layout.items())
    durations = ", ".join(f"{job} {split_partition(partition)[1]} {s:.1f} s".replace("  ", " ")
                          for (job, partition), s in chaos.durations.items())
    rebuilt = (f" The stages' code versions changed in the working tree during the run: the reference was rebuilt "
               f"{chaos.rebuilds} time(s) and later scenarios compared with it." if chaos.rebuilds else "")
    verdict = ("every invariant held" if total.ok else
               f"**{len(total.problems)} invariant violations** (listed below)")
    lines = [
        f"{HEADING} (`make chaos`; not part of `make bench`)",
        "",
        f"`{COMMAND}` ({time.strftime('%Y-%m-%d', time.gmtime())}, seed {chaos.seed}, {seconds / 60:.0f} min on "
        f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at the start). A private SeaweedFS on loopback; the real "
        f"WARC files as crawl `{CRAWL}` in 2 shards ({files}); every job in a worker subprocess, SIGKILLed with its "
        "process group. The clean reference is every job run once without faults (seconds: "
        f"{durations}). After each fault: **nothing partial visible** (every manifest lists parts that exist and "
        "hold the rows it says; `latest.json` of a release names a release whose files are all there), **no silent "
        "loss** (every committed partition has the clean run's rows and data version, or is still what it was before "
        "the fault: never a third, short state), **reruns equal to a clean run**, and **no orphan after GC** "
        "(`vacuum(lake, 0)` leaves no part, tombstone or release folder that nothing lists). Result: " + verdict + "."
        + rebuilt,
        "",
        table,
        "",
        f"- Kill points: the delay is drawn from 0–110% of the job's clean run (attempts whose run ended first are "
        f"runs, not kills). Partitions of the job already committed when each of the {total.kills} kills landed: "
        f"{by_partitions}.",
        "- Outages: `kill` = SIGKILL of the store, `stop` = SIGTERM, both restarted on the same state after the "
        "outage; `pause` = SIGSTOP then SIGCONT (connections hang instead of being refused). A run whose retry budget "
        "outlasts the outage completes with the clean partition; a shorter budget fails the run with "
        "`StoreUnavailable` naming the endpoint and bucket, and nothing short is committed.",
        *(f"- Reader: {r}." for r in readers),
        "- Full store: the store's data folder is a 160 MB tmpfs filled by a ballast file mid-run; after it is "
        "removed, the rerun is clean.",
    ]
    if failures:
        lines += ["- How the failed runs failed (first error): " + "; ".join(f"`{f}`" for f in failures[:6]) + "."]
    lines += [f"- Finding: {f}" for f in findings]
    lines += [f"- **Violation**: {p}" for p in total.problems[:30]]
    return "\n".join(lines) + "\n"


def summary(tallies: list[Tally]) -> Row:
    """The row of BENCHMARKS.md's summary table: the whole suite's totals."""
    total = Tally("total")
    for t in tallies:
        total.add(t)
    bad = (total.short, total.partial, total.orphans, total.hangs)
    return Row("chaos:total", "fault injection: runs, kills, outages → committed short, partial visible, orphans, "
               "hangs", f"{total.runs} runs, {total.kills} kills, {total.outages} outages → "
               + ", ".join(map(str, bad)), COMMAND, "chaos.md", "0 bad outcomes", verdict(total.ok and not any(bad)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="draw the fault points of an earlier run again")
    parser.add_argument("--no-write", action="store_true",
                        help="print the section, do not write benchmarks/results/chaos.md")
    parser.add_argument("--keep", action="store_true", help="keep the session folder (worker logs) afterwards")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("make chaos needs root: the full-store scenario mounts a tmpfs")
    root = Path(tempfile.mkdtemp(prefix="llm-assets-chaos-"))
    start, load = time.monotonic(), os.getloadavg()
    try:
        with Chaos(root, FULL_LAYOUT, args.seed) as chaos:
            chaos.rebuilds = 0
            chaos.build_reference()
            tallies = run(chaos)
            section = render(chaos, tallies, time.monotonic() - start, load)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"session folder: {root}")
    print("\n" + section)
    if not args.no_write:
        write_hand_section(HEADING, section, details_path(BENCHMARKS, "chaos"))
        update_rows(BENCHMARKS, [summary(tallies)])
        print(f"written to {details_path(BENCHMARKS, 'chaos')} and the summary table of {BENCHMARKS}")
    if not all(t.ok for t in tallies):
        sys.exit(1)


if __name__ == "__main__":
    main()
