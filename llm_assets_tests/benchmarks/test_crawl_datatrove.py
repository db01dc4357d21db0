"""benchmarks/crawl_datatrove.py: datatrove's FineWeb pipeline, stage by stage, over the shared WARC files as two
crawls, in the anchor's own environment."""

import json
import os
from pathlib import Path

import pytest

from benchmarks.crawl_datatrove import STAGES, run_anchor, shared_data

WARC = shared_data() / "warc"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def records(folder: Path) -> set[tuple[str, str, str, str]]:
    """(crawl, WARC file name, WARC-Record-ID, target URI) of every response record under folder/<crawl>/."""
    from warcio.archiveiterator import ArchiveIterator

    out = set()
    for path in sorted(folder.glob("*/*.warc.gz")):
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response":
                    out.add((path.parent.name, path.name, rec.rec_headers["WARC-Record-ID"],
                             rec.rec_headers.get("WARC-Target-URI")))
    return out


def kept(path: Path) -> list[tuple[str, str, str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["crawl"], r["warc_file"], r["record_id"], r["url"]) for r in rows]


@pytest.mark.corpus  # datatrove's whole pipeline in its own environment: minutes
def test_the_anchor_runs_finewebs_pipeline_over_two_crawls(tmp_path):
    """Every stage runs and is measured; the documents one stage hands on are those the next one reads; what it kept
    names real response records of the input, in the crawl they came from; it tokenized something."""
    from benchmarks.compare import anchor_python

    files = sorted(WARC.glob("*.warc.gz"))
    if not files:
        pytest.skip(f"no shared WARC files in {WARC}")
    try:
        python = anchor_python()
    except SystemExit as err:  # no uv to make the anchor's environment with: CI has one (the Makefile installs it)
        if os.environ.get("CI"):
            pytest.fail(f"the anchor's environment cannot be made: {err}")
        pytest.skip(str(err))
    inp = tmp_path / "input"
    for i, f in enumerate(files):  # two crawls, each with large and small files
        crawl = inp / ("CC-TEST-A" if i % 2 == 0 else "CC-TEST-B")
        crawl.mkdir(parents=True, exist_ok=True)
        (crawl / f.name).symlink_to(f)
    # A generous per-page limit: under load datatrove's 1 s (wall time) drops pages, and a crawl left with nothing
    # would test less.
    r = run_anchor(inp, tmp_path / "work", workers=2, python=python, extract_timeout=60)

    assert list(r.stages) == list(STAGES)
    s = r.stages
    for name, fig in s.items():
        assert fig.cpu_s > 0 and fig.wall_s > 0 and fig.peak_rss_mib > 0, name
        assert r.raw["stages"][name]["killed_strays"] == [], name  # every process of the stage was reaped
    responses = records(inp)
    assert 0 < s["filter"].docs_in <= len(responses)
    assert 0 < s["filter"].docs_out < s["filter"].docs_in
    # The documents flow: what filtering wrote is what MinHash signs and what its filter reads; the documents it
    # drops are those the clusters stage listed for removal; tokenization reads what dedup wrote.
    assert s["filter"].docs_out == s["signatures"].docs_in == s["signatures"].docs_out == s["dedup"].docs_in
    assert s["buckets"].docs_in is s["clusters"].docs_out is None
    clusters = next(v for k, v in r.raw["stages"]["clusters"]["blocks"].items() if "stage 3" in k)
    assert s["dedup"].docs_in - s["dedup"].docs_out == clusters.get("to_remove", 0)
    assert s["dedup"].docs_out == s["tokenize"].docs_in == s["tokenize"].docs_out > 0
    assert r.total.docs_in == s["filter"].docs_in and r.total.docs_out == s["tokenize"].docs_out
    assert r.total.cpu_s == pytest.approx(sum(f.cpu_s for f in s.values()))
    for name in ("filter", "signatures", "dedup", "tokenize"):
        assert s[name].bytes_out > 0, name

    after_filter, after_dedup = kept(r.kept_filtered), kept(r.kept_dedup)
    # English only, as FineWeb ran its LanguageFilter (datatrove 0.10.1's own default keeps every language)
    assert {json.loads(line)["language"] for line in r.kept_filtered.read_text().splitlines()} == {"en"}
    assert len(after_filter) == len(set(after_filter)) == s["filter"].docs_out
    assert len(after_dedup) == s["dedup"].docs_out
    assert set(after_filter) <= responses and set(after_dedup) <= set(after_filter)
    assert {c for c, *_ in after_filter} <= {"CC-TEST-A", "CC-TEST-B"}
    # Each document a block removed is listed once, with the block: as many as the blocks counted.
    dropped = [json.loads(line) for line in r.dropped.read_text().splitlines()]
    by_block: dict[str, int] = {}
    for row in dropped:
        by_block[row["block"]] = by_block.get(row["block"], 0) + 1
    counted = {name: int(row.get("dropped", 0)) for name, row in r.raw["stages"]["filter"]["blocks"].items()
               if "FILTER" in name and row.get("dropped")}
    assert sum(v for k, v in by_block.items() if k != "minhash") == sum(counted.values())
    assert by_block.get("minhash", 0) == s["dedup"].docs_in - s["dedup"].docs_out
    identities = {(d["crawl"], d["warc_file"], d["record_id"], d["url"]) for d in dropped}
    assert identities <= responses and not identities & set(after_dedup)
    assert r.settings["trafilatura_timeout_s"] == 60

    assert r.tokens > s["tokenize"].docs_out  # one <|endoftext|> per document, and text
    token_files = [p for p in (tmp_path / "work" / "tokens").rglob("*") if p.is_file() and p.suffix == ".ds"]
    assert sum(os.path.getsize(p) for p in token_files) == 2 * r.tokens  # uint16 ids, GPT-2's vocabulary
    assert r.versions["datatrove"] == "0.10.1"


BURN = '''
import multiprocessing, time

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def burn(data, rank, world_size):
    spin(1.0)
    child = multiprocessing.Process(target=spin, args=(1.0,), daemon=True)  # as datatrove's extraction child
    child.start()
    child.join()
    stray = multiprocessing.Process(target=spin, args=(30.0,), daemon=True)  # killed, never joined: a timeout's
    stray.start()
    time.sleep(0.5)
    stray.kill()
    return iter(())
'''

STAGE = '''
import json, sys
sys.path[:0] = [{benchmarks!r}, {here!r}]
import burn, crawl_anchor
from datatrove.executor import LocalPipelineExecutor

if __name__ == "__main__":
    if {reap!r}:
        crawl_anchor.become_subreaper()
    LocalPipelineExecutor([burn.burn], tasks=2, workers=2, logging_dir={logs!r}, skip_completed=False).run()
    print(json.dumps(crawl_anchor.reap_all() if {reap!r} else []))
'''


@pytest.mark.corpus  # datatrove's executor, its forkserver and pool
def test_a_stages_cpu_counts_the_executors_workers_and_their_children(tmp_path):
    """LocalPipelineExecutor's workers are children of its forkserver, which the stage's process never waits for:
    wait4 of that process sees the workers' CPU (and their extraction children's) only because the stage becomes
    a subreaper and reaps every descendant before it exits."""
    import subprocess
    import sys

    pytest.importorskip("datatrove")
    (tmp_path / "burn.py").write_text(BURN)
    cpu = {}
    for reap in (True, False):
        script = tmp_path / f"stage_{reap}.py"
        script.write_text(STAGE.format(benchmarks=str(BENCHMARKS), here=str(tmp_path), reap=reap,
                                       logs=str(tmp_path / f"logs_{reap}")))
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert proc.stdout is not None and json.loads(proc.stdout.read()) == []  # nothing left to kill
        cpu[reap] = usage.ru_utime + usage.ru_stime
    # 2 tasks x (1 s in the worker + 1 s in its child); the killed child's share on top
    assert cpu[True] >= 3.6
    assert cpu[True] - cpu[False] >= 3.6  # what a stage without the subreaper would not have counted
