"""Dagster's own controls where they exist: the concurrency pool of the stages that read a whole crawl, and a step
retry for a partition whose units failed on the store, never for one that failed on its input. (Run retries and a
killed worker's process pool: test_instance_run_monitoring.py, on a real daemon.)"""

from dataclasses import dataclass

import dagster as dg
import pytest
import yaml

from llm_assets.core.errors import StoreUnavailable
from llm_assets.core.units import UnitResult, timed_unit
from llm_assets.dagster import adapter
from llm_assets.platform.instance import FAN_IN_POOL, configure_pools
from llm_assets.registry import StageSpec
from llm_assets.settings import PROJECT_ROOT, load_settings
from llm_assets.stage import Partition, ShardStage
from llm_assets_tests.conftest import built


def test_the_stages_that_read_a_whole_crawl_share_one_pool():
    assets = built("duplicate_clusters", "crawl_stats", "release", "documents", "filtered", settings=load_settings())
    assert {a.key.path[-1]: a.op.pool for a in assets} == {
        "duplicate_clusters": FAN_IN_POOL, "crawl_stats": FAN_IN_POOL, "release": FAN_IN_POOL,
        "documents": None, "filtered": None}


def test_the_instance_enforces_pools_per_run(tmp_path):
    (tmp_path / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        config = instance.get_concurrency_config()
        assert config.pool_config.pool_granularity.value == "run"  # a blocked run waits in the queue, holding no slot
        assert config.pool_config.default_pool_limit == 1
        assert config.run_queue_config.max_concurrent_runs == 2
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 0
        assert not instance.run_retries_retry_on_asset_or_op_failure

        def limits():
            return {pool.name: pool.limit for pool in instance.event_log_storage.get_pool_limits()}

        configure_pools(instance)  # before any run is queued, so that the first two runs of the pool wait too
        assert limits() == {FAN_IN_POOL: 1}
        instance.event_log_storage.set_concurrency_slots(FAN_IN_POOL, 3)  # `dagster instance concurrency set`
        configure_pools(instance)
        assert limits() == {FAN_IN_POOL: 3}  # a limit set by hand is kept
    instance = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    assert "tag_concurrency_limits" in instance["concurrency"]["runs"]


@dataclass(frozen=True)
class FlakyUnit:
    source: str
    fail: str  # "store": the store is down on the first try; "input": always a bug or bad input
    unit: str = ""  # redone on every try, as an inventory's


CALLS: list[str] = []


@timed_unit
def flaky(unit: FlakyUnit) -> UnitResult:
    CALLS.append(unit.source)
    if unit.fail == "input":
        raise ValueError("not a WARC record")
    if CALLS.count(unit.source) == 1:
        raise StoreUnavailable("object store http://127.0.0.1:1 (bucket b) failing for 300 s")
    return UnitResult(unit="", source=unit.source, rows_in=1, rows_out=1)


class Flaky(ShardStage):
    """One unit that fails on the store once, or on its input every time."""

    work = staticmethod(flaky)

    def __init__(self, fail: str):
        self.spec, self.fail = StageSpec(f"flaky_{fail}", "shard"), fail  # type: ignore[misc]

    def units(self, p: Partition) -> list[FlakyUnit]:
        return [FlakyUnit(source="raw/a.warc.gz", fail=self.fail)]

    def columns(self, p: Partition) -> list[str]:
        return []


def _asset(fail: str):
    stage = Flaky(fail)

    @dg.asset(name=stage.spec.name, check_specs=adapter.stage_check_specs(stage.spec.name))
    def flaky_asset(context: dg.AssetExecutionContext):
        p = Partition(crawl="", shard="", settings=load_settings(), lake=None, specs=[stage.spec],  # type: ignore
                      log=context.log, registered_crawls=list)
        yield from adapter.run_alone(context, adapter.run_stage(context, stage, p, "v1"))

    return flaky_asset


@pytest.fixture
def no_pause(monkeypatch):
    monkeypatch.setattr(adapter, "STORE_STEP_RETRY_WAIT_S", 0)
    CALLS.clear()


def test_a_partition_that_failed_on_the_store_is_tried_once_more(no_pause):
    result = dg.materialize([_asset("store")])
    assert result.success
    retries = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(retries) == 1 and "failing for 300 s" in str(retries[0].event_specific_data.error.cause)
    assert CALLS == ["raw/a.warc.gz", "raw/a.warc.gz"]


def test_a_partition_that_failed_on_its_input_is_not_retried(no_pause):
    result = dg.materialize([_asset("input")], raise_on_error=False)
    assert not result.success
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert CALLS == ["raw/a.warc.gz"]
