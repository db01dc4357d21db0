"""The code location loads, its asset specs are what the catalog shows (snapshot), and building it stays light."""

import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from llm_assets.definitions import defs as deployment
from llm_assets_tests.snapshot import check_snapshot

defs = deployment()

# crawl × shard observed sources: what raw_files and filtered read outside the lake's assets, one version a partition
SOURCES = {"raw_drop", "curation_scope"}
# Words each catalog description must hold (deps, groups, partitions, kinds, checks and code versions are in the
# generated snapshot, snapshots/definitions.json).
DESCRIBED = {"crawl_stats": "funnel", "cost": "ledger", "duplicate_clusters": "connected components",
             "quality_classifier": "labels/quality/", "release": "Megatron", "raw_drop": "stale",
             "curation_scope": "stale"}


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_job_def("lake_job") is not None
    for job in ("curation_job", "crawl_job", "curated_job", "release_job"):
        assert defs.resolve_job_def(job) is not None
    assert defs.resolve_sensor_def("raw_drop_sensor").job_name == "lake_job"


SNAPSHOT = Path(__file__).parent / "snapshots" / "definitions.json"


def _partitions(p) -> str | None:
    if p is None:
        return None
    if isinstance(p, dg.MultiPartitionsDefinition):
        return " × ".join(d.name for d in p.partitions_defs)
    return getattr(p, "name", None) or type(p).__name__


def definitions_snapshot(d: dg.Definitions) -> dict:
    """What the code location declares, as the catalog and the daemon see it: per asset its deps, group,
    partitions, kinds, checks, code version (default settings) and whether it has a description; the jobs and what
    they select; the sensors, schedules and resources."""
    graph = d.resolve_asset_graph()
    checks: dict[str, list[str]] = {}
    for key in graph.asset_check_keys:
        checks.setdefault(key.asset_key.to_user_string(), []).append(key.name)
    assets = {}
    for spec in sorted(d.resolve_all_asset_specs(), key=lambda s: s.key.to_user_string()):
        name = spec.key.to_user_string()
        if name.startswith("__"):
            continue
        assets[name] = {
            "deps": sorted(dep.asset_key.to_user_string() for dep in spec.deps),
            "group": spec.group_name,
            "partitions": _partitions(spec.partitions_def),
            "kinds": sorted(spec.kinds),
            "checks": sorted(checks.get(name, [])),
            "code_version": spec.code_version,
            "described": bool(spec.description),
            "observable_source": spec.key in graph.external_asset_keys,
        }
    jobs = {}
    for job in sorted(d.resolve_all_job_defs(), key=lambda j: j.name):
        if job.name.startswith("__"):
            continue
        selected = job.asset_layer.executable_asset_keys if job.asset_layer else set()
        jobs[job.name] = {"assets": sorted(k.to_user_string() for k in selected), "executor": job.executor_def.name}
    sensors = {s.name: {"jobs": sorted(t.job_name for t in s.targets), "default_status": s.default_status.value}
               for s in sorted(d.sensors or [], key=lambda s: s.name)}
    schedules = {s.name: {"job": s.job_name, "cron": s.cron_schedule}
                 for s in sorted(d.schedules or [], key=lambda s: s.name)}
    return {"assets": assets, "jobs": jobs, "sensors": sensors, "schedules": schedules,
            "resources": sorted(d.resources or {})}


@pytest.mark.snapshot
def test_definitions_snapshot(request):
    """The generated snapshot of the code location (`make snapshots` rewrites it; review its diff)."""
    check_snapshot(request, SNAPSHOT, json.dumps(definitions_snapshot(defs), indent=1, sort_keys=True))


def test_every_asset_has_a_catalog_description():
    specs = {s.key.path[-1]: s for s in defs.resolve_all_asset_specs() if not s.key.path[-1].startswith("__")}
    assert {k.path[-1] for k in defs.resolve_asset_graph().external_asset_keys} >= SOURCES
    for name, spec in specs.items():
        assert spec.description and len(spec.description) > 80, f"{name} needs a catalog description"
        assert DESCRIBED.get(name, "") in spec.description, f"{name}'s description names {DESCRIBED[name]!r}"


def test_code_version_follows_settings():
    """A threshold of the chain changes the filtered stage's code version (what applies per language does not: see
    test_languages)."""
    from llm_assets.core.filters import GopherQuality
    from llm_assets.settings import FilteredSettings, Settings
    from llm_assets.stages import code_versions

    default = code_versions(Settings())
    stricter = code_versions(Settings(filtered=FilteredSettings.default_with(
        gopher_quality=GopherQuality(min_doc_words=80))))
    *blocks, last = FilteredSettings().chain  # decontaminate stays last
    reordered = code_versions(Settings(filtered=FilteredSettings(chain=(*reversed(blocks), last))))
    assert default == code_versions(Settings())
    assert len({default["filtered"], stricter["filtered"], reordered["filtered"]}) == 3
    # only the stage the setting belongs to: the others' partitions see it as an upstream change
    assert {k for k in default if default[k] != stricter[k]} == {"filtered"}
    gated = code_versions(Settings(gates={"max_language_shift": 0.5}))
    assert {k for k in default if default[k] != gated[k]} == {"filtered"}
    # one language's thresholds: hashed per partition over the languages it holds, not in the code version
    german = FilteredSettings(overrides={"de": {"gopher_quality.min_stop_words": 3}})
    assert code_versions(Settings(filtered=german)) == default


def test_the_definitions_declare_the_registry_code_versions():
    from llm_assets.settings import load_settings
    from llm_assets.stages import code_versions

    assert {s.key.path[-1]: s.code_version for s in defs.resolve_all_asset_specs()
            if s.key.path[-1] not in SOURCES} == code_versions(load_settings())


# Libraries only a step's work needs (extraction, filtering, models, statistics, charts, the Dask runner, the
# embedded store's management, the S3 client), and what only an instance or the monitoring daemon needs (Dagster's
# SQL storage: SQLAlchemy, Alembic; psutil; dagster-aws, whose package imports both and boto3): a process that builds
# the code location (every run worker, the code server, the CLI commands that plan or launch runs) must not import
# them, or every run pays for them before it starts.
NOT_AT_START_UP = [
    "alembic", "boto3", "dagster_aws", "dask", "datasketch", "distributed", "duckdb", "fasttext", "ftfy", "lxml",
    "matplotlib", "psutil", "pyarrow.compute", "pyarrow.parquet", "resiliparse", "scipy", "sklearn", "spacy",
    "sqlalchemy", "tldextract", "torch", "trafilatura", "warcio", "yake",
    "llm_assets.platform.embedded_store", "llm_assets.platform.local_cluster", "llm_assets.platform.runners",
]


def test_building_the_code_location_imports_no_heavy_library():
    # A fresh interpreter: this test process has imported everything already.
    code = ("import json, sys\nfrom llm_assets.definitions import defs\ndefs()\n"
            f"print(json.dumps(sorted(m for m in {NOT_AT_START_UP!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert json.loads(out.splitlines()[-1]) == []


def test_every_job_runs_its_steps_in_the_run_process():
    # A process per step would start an interpreter and build the code location again before each step.
    assert {job.name: job.executor_def.name for job in defs.resolve_all_job_defs()} == {
        job.name: "in_process" for job in defs.resolve_all_job_defs()}


def test_the_store_resource_holds_the_names_of_its_keys_and_a_run_gets_their_values(monkeypatch, tmp_path):
    # Its own S3 endpoint resource, not dagster-aws's: the keys stay Dagster EnvVars (names in the run's config,
    # values read by the run's process) and reach the lake client.
    from llm_assets.core.lake import StoreSettings
    from resources import ObjectStore, object_store_from_env

    monkeypatch.setenv("LLM_ASSETS_HOME", str(tmp_path))
    monkeypatch.setenv("LLM_ASSETS_S3_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "the-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-secret")
    store = object_store_from_env(StoreSettings())
    assert isinstance(store.s3.aws_secret_access_key, dg.EnvVar) and "the-secret" not in repr(store)
    seen = {}

    @dg.asset
    def probe(store: ObjectStore) -> None:
        lake = store.lake()
        seen.update(endpoint=lake.config.endpoint, key=lake.credentials.access_key, secret=lake.credentials.secret_key)

    assert dg.materialize([probe], resources={"store": store}).success
    assert seen == {"endpoint": "http://127.0.0.1:9", "key": "the-key-id", "secret": "the-secret"}
