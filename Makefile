# llm-assets. `make demo` and `make test` work on a fresh machine: the environment is created when absent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
UV := $(PYTHON) -m uv
BIN := $(VENV)/bin
# Local state (the embedded store, the cluster, Dagster's instance): every command reads LLM_ASSETS_HOME, and so
# does `make clean`.
STATE := $(or $(LLM_ASSETS_HOME),.llm-assets)

.PHONY: corpus demo docs demo-cluster cluster-start cluster-stop test test-core snapshots lint browser postgres ui deploy-up deploy-down deploy-status screenshots bench bench-startup bench-dedup bench-decontamination bench-enrich bench-pii-names bench-segmenters bench-trace bench-forecast bench-run-overhead bench-demo bench-seed-paper bench-lake-io bench-oversized bench-cluster bench-engine-bakeoff bench-compare bench-dump-scale bench-dedup-path bench-extraction-quality bench-extractors bench-crawl bench-crawl-scaling store-start store-stop clean

# uv itself comes from PyPI; the environment is built from the lock file, exactly. Its bytecode is compiled once
# here: every process of a run (Dagster's step processes, cluster workers, the webserver) imports Dagster and the
# code location, and where PYTHONDONTWRITEBYTECODE is set each of them would compile it all again (4 s → 1.4 s for
# `import dagster` on a CI machine).
$(VENV)/.synced: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet "uv==0.13.8"
	$(UV) sync --frozen --compile-bytecode
	@touch $@

# The project's own modules change between runs: compiled before each command that starts processes.
COMPILE = $(BIN)/python -m compileall -q -j0 llm_assets resources benchmarks llm_assets_support >/dev/null

demo: $(VENV)/.synced
	@$(COMPILE)
	$(BIN)/llm-assets demo

# Two workers, each given whole modules (a module's deployment is built once), the longest first (conftest.py): most
# of the suite waits on servers, daemons and run processes, so two at once take about half the time on two cores.
PYTEST_WORKERS ?= 2
# pytest rewrites each test module's asserts on import and caches the result only where bytecode may be written:
# with PYTHONDONTWRITEBYTECODE set, every worker of every run rewrote them all again (~5 s each).
PYTEST = PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest
test: lint browser postgres
	@$(COMPILE)
	$(PYTEST) -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Debian's headless Chromium: the UI tests look at the charts in Dagster's webserver as a person would.
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Debian's PostgreSQL server, for `make deploy-up` and its tests. No cluster of its own (`deploy up` makes one under
# the state home): Debian's default "main" cluster is not created.
postgres:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
		mkdir -p /etc/postgresql-common && echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			-o Dpkg::Options::=--force-confold postgresql >/dev/null; }

# The processing core's tests alone: no object store, no Dagster instance.
test-core: $(VENV)/.synced
	$(PYTEST) -m core -n $(PYTEST_WORKERS) --dist loadfile

# The generated snapshots (llm_assets_tests/snapshots/), rewritten from the code, and BENCHMARKS.md's table with its
# marks of rows whose measured code changed since their run: review the diff before committing.
snapshots: $(VENV)/.synced
	$(PYTEST) -m snapshot --update-snapshots -p no:cacheprovider -q
	$(BIN)/python -m benchmarks.summary

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or anchor fails (test_docs.py builds
# it in `make test` too).
docs: $(VENV)/.synced
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(VENV)/.synced
	$(BIN)/ruff check llm_assets resources benchmarks llm_assets_tests llm_assets_support
	$(BIN)/mypy llm_assets resources

UI_PORT ?= 3000
ui: $(VENV)/.synced
	@$(COMPILE)
	$(BIN)/llm-assets ui --port $(UI_PORT)

# The production topology on this machine (docs/service.md): PostgreSQL, the object store, the Dask
# cluster (NODES), Dagster's code server, daemon and webserver (UI_PORT), each a supervised process on 127.0.0.1.
deploy-up: $(VENV)/.synced postgres
	@$(COMPILE)
	$(BIN)/llm-assets deploy up --nodes $(NODES) --port $(UI_PORT)

deploy-down: $(VENV)/.synced
	$(BIN)/llm-assets deploy down

deploy-status: $(VENV)/.synced
	$(BIN)/llm-assets deploy status

# The UI as a curator sees it after `make demo`: the asset graph and the charts of a partition, a crawl and the release.
SCREENSHOTS ?= $(STATE)/screenshots
screenshots: $(VENV)/.synced browser
	@$(COMPILE)
	$(BIN)/python -m llm_assets_support.screenshots $(SCREENSHOTS)

bench: $(VENV)/.synced
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.dedup
	$(BIN)/python -m benchmarks.seed_paper

# The benchmark crawl (benchmarks/corpus/): about 1 GB of Common Crawl-shaped WARC files in two crawls, real text of
# Debian's documentation packages (apt-get download, no install) in real page templates, with gold text and planted
# copies; under .bench/corpus/, the same bytes for the same seed (its manifest's sha256). CORPUS_ARGS: e.g. --pages.
CORPUS_ARGS ?=
corpus: $(VENV)/.synced
	$(BIN)/python -m benchmarks.corpus $(CORPUS_ARGS)

# The seed paper's workload through the product (drop, stages, export) beside the GPT-2 tokenizer alone and, when
# SEED_PAPER_DIR names a checkout of the paper's code (SEED_PAPER_PYTHON: a python with its requirements), that code.
bench-seed-paper: $(VENV)/.synced
	$(BIN)/python -m benchmarks.seed_paper

bench-dedup: $(VENV)/.synced
	$(BIN)/python -m benchmarks.dedup

# The full fault-injection suite (about 30 minutes; root, for a tmpfs): its figures go into benchmarks/results/chaos.md.
chaos: $(VENV)/.synced
	$(BIN)/python -m benchmarks.chaos

bench-oversized: $(VENV)/.synced
	$(BIN)/python -m benchmarks.oversized

# What a process pays before it does anything: imports, with and without compiled bytecode.
bench-startup: $(VENV)/.synced
	@$(COMPILE)
	$(BIN)/python -m benchmarks.startup

# Decontamination: recall on planted GSM8K items, false positives, the block's speed, the index's memory.
bench-decontamination: $(VENV)/.synced
	$(BIN)/python -m benchmarks.decontamination

# Enrichment: entities, keywords and summaries per CPU-second and peak RSS, the entity batch path, 1 and 2 workers.
bench-enrich: $(VENV)/.synced
	$(BIN)/python -m benchmarks.enrich

# Masking names: precision and recall on the hand-labelled passages, regular expressions against the NER model.
bench-pii-names: $(VENV)/.synced
	$(BIN)/python -m benchmarks.pii_names

# Word segmenters per language against datatrove's tokenizers: agreement, CPU-s per MB and words per CPU-s, one core.
bench-segmenters: $(VENV)/.synced
	taskset -c 1 $(BIN)/python -m benchmarks.segmenters

# One URL found in 1,000 parts: through the id indexes, against a scan of every part.
bench-trace: $(VENV)/.synced
	$(BIN)/python -m benchmarks.trace

# The backfill forecasts against the rebuilds they forecast (a held-back crawl, the demo's --change and --takedown).
bench-forecast: $(VENV)/.synced
	$(BIN)/python -m benchmarks.forecast

# Dagster's cost per run and per step, from the runs `make demo` made.
bench-run-overhead: $(VENV)/.synced
	$(BIN)/python -m benchmarks.run_overhead

# `make demo` from a clean state, timed, with the runs it made (each round in a state home of its own).
bench-demo: $(VENV)/.synced
	@$(COMPILE)
	$(BIN)/python -m benchmarks.demo_time

bench-lake-io: $(VENV)/.synced
	$(BIN)/python -m benchmarks.lake_io

# The cluster runner's overhead against the pool, driver memory at 100k units, 1-3 workers, S3 requests per file.
bench-cluster: $(VENV)/.synced
	$(BIN)/python -m benchmarks.cluster

# Ray against Dask distributed: cold starts idle and loaded, loopback confinement, a killed worker, per-task cost.
# Ray is not a dependency: it is installed into .bench/engine-bakeoff/ on first use.
bench-engine-bakeoff: $(VENV)/.synced
	LLM_ASSETS_UV="$(UV)" $(BIN)/python -m benchmarks.engine_bakeoff

# The project against datatrove 0.10.1 as FineWeb runs it, re-run on the same corpus, one core, interleaved pairs:
# benchmarks/results/compare.md and its rows of BENCHMARKS.md's summary table. datatrove is installed into .bench/compare/ on first use.
bench-compare: $(VENV)/.synced
	@$(COMPILE)
	LLM_ASSETS_UV="$(UV)" $(BIN)/python -m benchmarks.compare --output BENCHMARKS.md --json .bench/compare/results.json

# duplicate_clusters' work units on synthetic signatures at 1M, 10M and 30M documents (`--sizes`; goal: the largest
# unit's and the driver's peak RSS within +10% from 1M to 30M), beside datatrove 0.10.1's MinhashDedupBuckets +
# MinhashDedupCluster at 1M (its environment is bench-compare's, .bench/compare/). About an hour on 2 idle cores;
# 30M needs about 35 GB of free disk for the store's band index (in a temporary folder, removed at the end).
bench-dump-scale: $(VENV)/.synced
	LLM_ASSETS_UV="$(UV)" $(BIN)/python -m benchmarks.dump_scale --output BENCHMARKS.md --json .bench/dump_scale.json

# The whole dedup path (signatures -> clusters -> removal) against datatrove 0.10.1's four MinHash stages as FineWeb runs
# them, on 100,000 documents of real text with planted copies, one core, interleaved pairs (bench-compare's
# environment, .bench/compare/).
bench-dedup-path: $(VENV)/.synced
	LLM_ASSETS_UV="$(UV)" $(BIN)/python -m benchmarks.dedup_path --output BENCHMARKS.md --json .bench/dedup-path/results.json

# Extractors' and trafilatura presets' main-text F1 (shingles and ROUGE-LSum) on five public benchmarks with ground
# truth (checkouts named by EXTRACTION_BENCH_SCRAPINGHUB, EXTRACTION_BENCH_READABILITY, EXTRACTION_BENCH_TRAFILATURA,
# EXTRACTION_BENCH_NEWSPAPER4K, EXTRACTION_BENCH_CLEANPORTALEVAL; `python -m benchmarks.extraction_quality --help` says
# where to get them), agreement with trafilatura on the shared WARC pages, pages per CPU-second; each page's scores go
# to .bench/extraction_pages.jsonl, from which `python -m benchmarks.routing_model` trains and judges the routing model.
bench-extraction-quality: $(VENV)/.synced
	$(BIN)/python -m benchmarks.extraction_quality --json .bench/extraction_quality.json --pages .bench/extraction_pages.jsonl

# Extractors that are not dependencies (trafipy, rs-trafilatura, magic-html, a selectolax heuristic, justext,
# readability-lxml, goose3, newspaper4k, boilerpy3, inscriptis, html-text) beside ours, on the same sets and metric as
# bench-extraction-quality, one core, interleaved. Installed into .bench/extractors/ (uv, on a Python >= 3.12 when the
# machine has one) on first use; the tables go to benchmarks/results/extractors.md.
bench-extractors: $(VENV)/.synced
	LLM_ASSETS_UV="$(UV)" $(BIN)/python -m benchmarks.extractor_candidates --output benchmarks/results/extractors.md --json .bench/extractors/results.json

# The whole path at size, as a user runs it: the corpus (`make corpus`, CORPUS) dropped as two crawls with `llm-assets
# drop`, built by the sensor's runs and one stale backfill per crawl through a code server and dagster-daemon of its
# own home (.bench/crawl/home, fresh each run; CRAWL_FLAGS=--resume picks up after the last phase done), the second
# crawl forecast from the first before it is built, every record accounted for, beside datatrove's FineWeb pipeline
# (benchmarks/crawl_datatrove.py; CRAWL_FLAGS=--no-anchor skips it). CRAWL_RUNNER=dask runs the units on a local Dask
# cluster. Figures: benchmarks/results/crawl.md, BENCHMARKS.md's summary, .bench/crawl/results.json.
CORPUS ?= .bench/corpus
CRAWL_RUNNER ?= pool
CRAWL_FLAGS ?=
bench-crawl: $(VENV)/.synced
	@$(COMPILE)
	LLM_ASSETS_UV="$(UV)" $(BIN)/python -m benchmarks.crawl --corpus $(CORPUS) --runner $(CRAWL_RUNNER) \
		--output BENCHMARKS.md --json .bench/crawl/results.json $(CRAWL_FLAGS)

# Two pool workers against one on the corpus's files and texts (documents, tokenized), alternating.
bench-crawl-scaling: $(VENV)/.synced
	$(BIN)/python -m benchmarks.crawl_scaling --corpus $(CORPUS) --output BENCHMARKS.md \
		--json .bench/crawl/scaling.json

# A real Dask cluster on 127.0.0.1 (a scheduler and NODES-1 workers), and the demo with every unit on it. Its
# workers read the embedded store's credentials from $(STATE)/store/credentials.env, the file every unit names.
NODES ?= 3
cluster-start: $(VENV)/.synced
	$(BIN)/llm-assets cluster start --nodes $(NODES)

cluster-stop: $(VENV)/.synced
	$(BIN)/llm-assets cluster stop

demo-cluster: cluster-start
	@$(COMPILE)
	LLM_ASSETS_SETTINGS=llm_assets/settings.cluster.yaml $(BIN)/llm-assets demo

store-start: $(VENV)/.synced
	$(BIN)/llm-assets store start

store-stop: $(VENV)/.synced
	$(BIN)/llm-assets store stop

clean:
	-$(BIN)/llm-assets deploy down
	-$(BIN)/llm-assets cluster stop
	-$(BIN)/llm-assets store stop
	rm -rf $(STATE)
