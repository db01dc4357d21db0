"""The short fault-injection suite (the full one is `make chaos`): runs SIGKILLed at a random point of lake_job,
crawl_job and release_job, the store killed for 10 s in the middle of a lake_job run, two runs of one partition at
once, a reader while the partition is recommitted, a store whose disk fills up. After each: nothing partial is
visible, nothing is committed short, a rerun commits exactly what a clean run does, and the vacuum leaves no orphan.

One private SeaweedFS for the module (it is stopped and killed on purpose); the real WARC files of ../shared/data as
one small crawl in 2 shards; every job in a worker subprocess. CHAOS_SEED=<n> replays the fault points of a run
(the seed is in every failure message).
"""

from __future__ import annotations

import os

import pytest

from llm_assets_support.chaos import SHORT_LAYOUT, WARC, Chaos, Tally

pytestmark = pytest.mark.skipif(not WARC.is_dir(), reason=f"{WARC} is absent (../shared/data holds the real crawls)")


@pytest.fixture(scope="module")
def chaos(tmp_path_factory):
    seed = int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else None
    # No skip if the store cannot start: __enter__ raises, and every test here errors.
    with Chaos(tmp_path_factory.mktemp("chaos"), SHORT_LAYOUT, seed) as session:
        session.build_reference()
        yield session


def held(chaos: Chaos, t: Tally) -> str:
    return f"seed {chaos.seed}, {t.scenario}: " + "; ".join(t.problems + t.notes)


@pytest.mark.parametrize("job, partition", [("lake_job", "CHAOS-2024|0000"), ("crawl_job", "CHAOS-2024"),
                                            ("release_job", None)])
def test_a_run_killed_at_a_random_point_leaves_no_partial_or_short_partition_and_a_rerun_is_clean(
        chaos, job, partition):
    t = chaos.kill_run(job, partition, window=(0.25, 1.0))
    assert t.ok, held(chaos, t)
    assert t.kills + t.runs >= 2


def test_the_store_killed_for_10_s_mid_run_is_waited_out_and_the_partition_is_complete(chaos):
    t = chaos.outage(duration=10, budget_s=300, mode="kill")
    assert t.ok, held(chaos, t)
    assert t.outages == 1 and t.failed_runs == 0, held(chaos, t)


def test_the_store_down_longer_than_the_budget_fails_the_run_naming_the_store_and_commits_nothing_short(chaos):
    t = chaos.outage(duration=10, budget_s=3, mode="stop")
    assert t.ok, held(chaos, t)
    assert t.outages == 1 and t.failed_runs == 1, held(chaos, t)
    assert "StoreUnavailable" in t.error and "bucket work" in t.error


def test_two_runs_of_one_partition_at_once_leave_one_complete_partition(chaos):
    t = chaos.concurrent()
    assert t.ok, held(chaos, t)


def test_a_reader_during_recommits_always_reads_a_complete_partition(chaos):
    t = chaos.reader_during_recommit(recommits=3)
    assert t.ok, held(chaos, t)
    assert t.reads > 0


@pytest.fixture(scope="module")
def full_store(chaos):
    if os.geteuid() != 0:
        pytest.skip("a full store needs a tmpfs, and mounting one needs root")
    return chaos.full_store()


def test_a_full_store_fails_the_run_naming_the_store_and_commits_nothing_short(chaos, full_store):
    assert full_store.ok, held(chaos, full_store)
    assert full_store.outages == 1 and full_store.failed_runs == 1, held(chaos, full_store)


def test_a_full_store_is_reported_as_full(full_store):
    """SeaweedFS answers a write to a full disk with a bare 500 InternalError; the lake, knowing the embedded
    store's data folder, sees the disk is full and says so instead of retrying."""
    assert "StoreFull" in full_store.error and "object store full" in full_store.error
