"""The code location loads, its asset specs are what the catalog shows (snapshot), and building it stays light."""

import json
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg

from llm_assets.definitions import defs as deployment

defs = deployment()

EXPECTED = {
    "raw_files": ["raw_drop"],
    "documents": ["raw_files"],
    "image_text_pairs": ["raw_files"],
    "filtered": ["curation_scope", "documents"],
    "signatures": ["filtered"],
    "deduplicated": ["duplicate_clusters", "filtered"],
    "tokenized": ["deduplicated", "tokenizer"],
    "enriched": ["deduplicated"],
}
GROUPS = {"deduplicated": "curated", "tokenized": "curated", "enriched": "enrichment"}  # the rest of EXPECTED: "lake"
# crawl-level: every shard of the crawl fans in
REPORTS = {"crawl_stats": ["filtered"], "duplicate_clusters": ["signatures"],
           # what building the crawl cost: from the ledger, after every stage it charges
           "cost": sorted({*EXPECTED, "crawl_stats", "duplicate_clusters"})}
# unpartitioned; `filtered` depends on the classifier only when its block uses it; the tokenizer (configured or
# trained) is upstream of every token
MODELS = {"quality_classifier": [], "tokenizer": [], "release": ["tokenized", "tokenizer"]}
# unpartitioned lists people drop, read by every filtered run
CURATION = {"takedowns": [], "eval_index": []}
# crawl × shard observed sources: what raw_files and filtered read outside the lake's assets, one version a partition
SOURCES = {"raw_drop": [], "curation_scope": ["eval_index", "takedowns"]}


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_job_def("lake_job") is not None
    for job in ("curation_job", "crawl_job", "curated_job", "release_job"):
        assert defs.resolve_job_def(job) is not None
    assert defs.resolve_sensor_def("raw_drop_sensor").job_name == "lake_job"


def test_asset_specs_snapshot():
    specs = {s.key.path[-1]: s for s in defs.resolve_all_asset_specs() if not s.key.path[-1].startswith("__")}
    assert {k: sorted(d.asset_key.path[-1] for d in s.deps) for k, s in specs.items()} == EXPECTED | REPORTS | MODELS | CURATION | SOURCES
    stats = specs.pop("crawl_stats")
    assert stats.group_name == "reports" and stats.partitions_def.name == "crawl"
    assert stats.description and "funnel" in stats.description
    cost = specs.pop("cost")
    assert cost.group_name == "reports" and cost.partitions_def.name == "crawl"
    assert cost.description and "ledger" in cost.description
    clusters = specs.pop("duplicate_clusters")
    assert clusters.group_name == "dedup" and clusters.partitions_def.name == "crawl"
    assert clusters.description and "connected components" in clusters.description
    classifier = specs.pop("quality_classifier")
    assert classifier.group_name == "models" and classifier.partitions_def is None
    assert classifier.description and "labels/quality/" in classifier.description
    assert specs.pop("tokenizer").group_name == "models"
    for name in CURATION:
        spec = specs.pop(name)
        assert spec.group_name == "curation" and spec.partitions_def is None and len(spec.description or "") > 80
    for name in SOURCES:
        spec = specs.pop(name)
        assert spec.group_name == "lake" and spec.partitions_def.partition_dimension_names == ["crawl", "shard"]
        assert spec.description and "stale" in spec.description
    assert {k.path[-1] for k in defs.resolve_asset_graph().external_asset_keys} >= set(SOURCES)
    release = specs.pop("release")
    assert release.group_name == "releases" and release.partitions_def is None
    assert release.description and "Megatron" in release.description
    for name, spec in specs.items():
        assert spec.group_name == GROUPS.get(name, "lake")
        assert spec.description and len(spec.description) > 80, f"{name} needs a catalog description"
        assert isinstance(spec.partitions_def, dg.MultiPartitionsDefinition)
        assert spec.partitions_def.partition_dimension_names == ["crawl", "shard"]
        assert re.fullmatch(r"\d+-[0-9a-f]{20}", spec.code_version or "")
    checks = {(k.asset_key.path[-1], k.name) for k in defs.resolve_asset_graph().asset_check_keys}
    assert checks == {(a, "schema") for a in EXPECTED} | {
        (a, "row_accounting") for a in EXPECTED if a != "image_text_pairs"} | {("filtered", "quality_gate")}


def test_code_version_follows_settings():
    """A threshold of the chain changes the filtered stage's code version (what applies per language does not: see
    test_languages)."""
    from llm_assets.core.filters import GopherQuality
    from llm_assets.pipeline import code_versions
    from llm_assets.settings import FilteredSettings, Settings

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
    from llm_assets.pipeline import code_versions
    from llm_assets.settings import load_settings

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
    "llm_assets.embedded_store", "llm_assets.local_cluster", "llm_assets.runners",
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
