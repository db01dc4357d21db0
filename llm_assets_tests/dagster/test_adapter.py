"""The quality gate on a real store and Dagster instance: a crawl of four shards of real English manuals, one of
them planted bad (every document cut to its first dozen words, as a broken extractor would leave them). The bad
shard's `quality_gate` check fails, its downstream steps skip, it is committed held back (downstream neither reads
nor plans it), and wider bounds promote it without filtering it again."""

import gzip
import json
import uuid

import dagster as dg
import pytest

from llm_assets.core.gates import GateSettings
from llm_assets.core.inventory import shard_of
from llm_assets.core.partition import HeldBack, LakeInput, read_manifest
from llm_assets.dagster.adapter import QUALITY_GATE
from llm_assets.platform.partitions import crawl_shard_key
from llm_assets.settings import load_settings
from llm_assets.stages import SPECS, code_versions
from llm_assets.tools.stale import plan_stale
from llm_assets.tools.status import lake_status
from llm_assets_support.shared_data import shared
from llm_assets_tests.core.test_dedup import lake_defs, run
from llm_assets_tests.tools.test_takedown import instance, object_store, store_env  # noqa: F401

pytestmark = pytest.mark.skipif(not shared().exists(), reason="needs ../shared/data")
GOOD, BAD = ("0000", "0001", "0002"), "0003"
ROWS = 250


def jsonl_in_shard(crawl: str, shard: str, shards: int) -> str:
    return next(key for i in range(10_000) if shard_of(key := f"raw/{crawl}/manuals-{i}.jsonl.gz", shards) == shard)


@pytest.fixture(scope="module")
def crawl(store_env, object_store, instance, tmp_path_factory):  # noqa: F811
    """Four shards of 250 distinct seed-paper manuals each; the last one's documents cut to 12 words."""
    name = f"GATE-{uuid.uuid4().hex[:8]}"
    texts = list(dict.fromkeys(json.loads(line)["text"] for line in gzip.open(
        shared("bench", "seed003_input.jsonl.gz"), "rt")))
    folder, lake = tmp_path_factory.mktemp("gate"), object_store.lake()
    for i, shard in enumerate((*GOOD, BAD)):
        rows = texts[i * ROWS:(i + 1) * ROWS]
        if shard == BAD:
            rows = [" ".join(t.split()[:12]) for t in rows]
        path = folder / f"{shard}.jsonl.gz"
        with gzip.open(path, "wt") as f:
            f.writelines(json.dumps({"id": f"{shard}-{n}", "text": t, "url": f"https://manuals.example/{shard}/{n}"})
                         + "\n" for n, t in enumerate(rows))
        lake.put_file(jsonl_in_shard(name, shard, load_settings().shards), path)
    instance.add_dynamic_partitions("crawl", [name])
    return name


def lake_job(defs, crawl, shard, instance):  # noqa: F811
    return defs.resolve_job_def("lake_job").execute_in_process(
        partition_key=crawl_shard_key(crawl, shard), instance=instance, raise_on_error=False)


def gate_of(result) -> dg.AssetCheckEvaluation:
    return next(e for e in result.get_asset_check_evaluations() if e.check_name == QUALITY_GATE)


def test_a_planted_bad_shard_is_held_back_until_the_bounds_admit_it(crawl, object_store, instance):  # noqa: F811
    settings, lake = load_settings(), object_store.lake()
    defs = lake_defs(object_store, settings)
    for shard in GOOD:
        result = lake_job(defs, crawl, shard, instance)
        assert result.success and gate_of(result).passed
    assert "not judged" in gate_of(result).metadata["note"].value  # two siblings are no reference yet

    result = lake_job(defs, crawl, BAD, instance)
    gate = gate_of(result)
    assert not result.success and not gate.passed
    assert gate.metadata["judged"].value and "fail rate: gopher_repetition" in gate.metadata["held_back"].value
    built = {e.materialization.asset_key.path[-1] for e in result.get_asset_materialization_events()}
    assert "filtered" in built and "signatures" not in built  # the blocking check stopped the run there

    held = read_manifest(lake, "filtered", crawl, BAD)
    assert held is not None and held.rows_in == ROWS and "gopher_repetition" in held.held_back
    with pytest.raises(HeldBack, match=f"filtered crawl={crawl} shard={BAD} is held back"):
        LakeInput.load(lake, "filtered", [(crawl, BAD)])
    assert [m.shard for m in LakeInput.load(lake, "filtered", [(crawl, s) for s in (*GOOD, BAD)],
                                            allow_missing=True).manifests] == list(GOOD)

    shown = [h for h in lake_status(lake, settings, rejected=False)["held_back"] if h["crawl"] == crawl]
    assert [(h["asset"], h["shard"]) for h in shown] == [("filtered", BAD)] and shown[0]["why"] == held.held_back
    planned = {(p.asset, p.partition) for p in plan_stale(lake, settings, [crawl], code_versions(settings), SPECS)}
    assert not {p for p in planned if p[1] == f"{crawl}|{BAD}"}, "nothing downstream of a held partition is planned"
    stats = run(defs, "crawl_job", crawl, instance)["crawl_stats"]
    assert (stats["shards"], stats["documents_in"]) == (3, 3 * ROWS)  # the three promoted shards
    curated = defs.resolve_job_def("curated_job").execute_in_process(
        partition_key=crawl_shard_key(crawl, BAD), instance=instance, raise_on_error=False)
    assert not curated.success
    failure = next(e for e in curated.all_events if e.is_step_failure)
    assert "is held back by its quality gate" in str(failure.step_failure_data.error)

    wider = settings.model_copy(update={"gates": GateSettings(max_drop_rate_shift=1, max_language_shift=1)})
    planned = {(p.asset, p.partition): p.cause for p in plan_stale(lake, wider, [crawl], code_versions(wider), SPECS)}
    assert planned[("filtered", f"{crawl}|{BAD}")] == "code or config changed"
    result = lake_job(lake_defs(object_store, wider), crawl, BAD, instance)
    assert result.success and gate_of(result).passed
    promoted = read_manifest(lake, "filtered", crawl, BAD)
    assert promoted.held_back == "" and promoted.data_version == held.data_version
    assert {e.materialization.asset_key.path[-1]: e.materialization.metadata["reused_units"].value
            for e in result.get_asset_materialization_events()}["filtered"] == 1  # judged again, not filtered again
    assert read_manifest(lake, "signatures", crawl, BAD) is not None


def test_the_adapter_is_the_only_maker_of_assets():
    """No module of the package but the adapter calls `dg.asset` (or `multi_asset`): a stage is an object the
    adapter turns into its asset."""
    import ast

    from llm_assets.settings import PROJECT_ROOT

    makers = {"asset", "multi_asset", "graph_asset", "graph_multi_asset"}
    callers = set()
    for path in sorted((PROJECT_ROOT / "llm_assets").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in makers and isinstance(node.value, ast.Name) \
                    and node.value.id in ("dg", "dagster"):
                callers.add(path.relative_to(PROJECT_ROOT).as_posix())
    assert callers == {"llm_assets/dagster/adapter.py"}
