"""The demo: real WARC files dropped as two crawls, the sensor evaluated, its runs executed, a summary printed."""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import warnings
from pathlib import Path

import dagster as dg
import polars as pl
import yaml
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from llm_assets.core.lake import parse_raw_key
from llm_assets.core.partition import LakeInput, committed
from llm_assets.core.tokenize import train_bytelevel_bpe
from llm_assets.crawl_stats.spec import SPEC as CRAWL_STATS
from llm_assets.dagster_private import RUN_KEY_TAG, SENSOR_NAME_TAG
from llm_assets import environment
from llm_assets.dedup.spec import CLUSTERS_SPEC
from llm_assets.failures import FailedRun, first_error, report
from llm_assets.enriched.spec import SPEC as ENRICHED
from llm_assets.image_text_pairs.spec import SPEC as IMAGE_TEXT_PAIRS
from llm_assets.partitions import crawl_shard_key
from llm_assets.releases.spec import SPEC as RELEASE
from llm_assets.settings import PROJECT_ROOT, Settings
from llm_assets.stale import stale_partitions

SHARED_WARC = PROJECT_ROOT.parent / "shared" / "data" / "warc"
QUIET = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}  # what stages say (progress), not engine events
SENSOR_CURSOR_KEY = "llm_assets/demo/raw_drop_sensor"

# Two crawls, so crawl partitions are real: files grouped by the era of their crawl.
DEMO_CRAWLS = {
    "CC-MAIN-2020-34": [
        "resiliparse__warcfile.CC-MAIN-2020-34.warc.gz",
        "aut__example.IAH-2008-archive.org.warc.gz",
        "pywb__iana.warc.gz",
    ],
    "CC-MAIN-2024-22": [
        "whirlwind__CC-MAIN-2024-22.warc.gz",
        "dolma__sample-0000.warc.gz",
        "dolma__sample-0001.warc.gz",
    ],
}


def demo_files(workdir: Path, settings: Settings) -> tuple[dict[str, list[Path]], Settings]:
    """crawl -> local files to drop, and the settings to run them with: the shared real WARC files, or a generated
    sample where they are absent."""
    if SHARED_WARC.is_dir():
        return {crawl: [SHARED_WARC / name for name in names if (SHARED_WARC / name).exists()]
                for crawl, names in DEMO_CRAWLS.items()}, settings
    environment.private_dir(workdir)
    out = {}
    for i, crawl in enumerate(["SAMPLE-2025-01", "SAMPLE-2025-02"]):
        path = workdir / f"sample-{i}.warc.gz"
        path.write_bytes(sample_warc(seed=i, pages=12))
        out[crawl] = [path]
    return out, with_sample_tokenizer(workdir, settings)


def with_sample_tokenizer(workdir: Path, settings: Settings) -> Settings:
    """Without the shared GPT-2 files: the settings pointed at a small byte-level BPE trained on sample text, so the
    tokenized stage still runs a real tokenizer."""
    if settings.tokenized.resolved_path().exists():
        return settings
    rng = random.Random(0)
    texts = [" ".join(rng.choice(_WORDS) for _ in range(200)) for _ in range(200)]
    tokenizer = workdir / "tokenizer.json"
    train_bytelevel_bpe(texts, 1000, [settings.tokenized.eos_token], tokenizer)
    print(f"../shared/data is absent: generated a sample crawl and a sample tokenizer ({tokenizer})")
    return settings.model_copy(update={"tokenized": settings.tokenized.model_copy(
        update={"tokenizer_path": str(tokenizer)})})


_WORDS = ("data river model token corpus archive crawl page text language quality filter shard lake "
          "training science history music garden city people water energy market school").split()


def sample_warc(seed: int, pages: int) -> bytes:
    """A small WARC (gzip per record) of generated English HTML pages, for machines without ../shared/data."""
    rng = random.Random(seed)
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for n in range(pages):
        paragraphs = "".join(
            "<p>" + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 90))).capitalize() + ".</p>"
            for _ in range(rng.randint(3, 6))
        )
        html = (f"<html><head><title>Sample page {n}</title></head><body><article><h1>Sample page {n}</h1>"
                f"{paragraphs}</article></body></html>").encode()
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        record = writer.create_warc_record(f"http://sample-{seed}.example/page/{n}", "response",
                                           payload=io.BytesIO(html), http_headers=headers)
        writer.write_record(record)
    return buf.getvalue()


def drop_files(lake, files: dict[str, list[Path]]) -> list[str]:
    keys = []
    for crawl, paths in files.items():
        for path in paths:
            key = f"raw/{crawl}/{path.name}"
            parse_raw_key(key)  # a crawl or file name that cannot be a key fails here, before any upload
            lake.put_file(key, path)
            keys.append(key)
    return keys


def evaluate_sensor(instance, defs) -> list:
    """One tick of the raw-drop sensor, as the daemon would run it: cursor kept in the instance, its observations
    reported, new crawls registered, and requests whose run key already ran skipped."""
    raw_drop_sensor = defs.resolve_sensor_def("raw_drop_sensor")
    store = defs.resources["store"]
    cursor = instance.run_storage.get_cursor_values({SENSOR_CURSOR_KEY}).get(SENSOR_CURSOR_KEY)
    while True:
        with dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs,
                                     resources={"store": store}) as context:
            result = raw_drop_sensor(context)
        cursor = result.cursor
        instance.run_storage.set_cursor_values({SENSOR_CURSOR_KEY: cursor})
        if json.loads(cursor).get("scan") is None:
            break
    for event in result.asset_events:  # the raw files' versions, on record before the runs read them
        instance.report_runless_asset_event(event)
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return [r for r in result.run_requests
            if not instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: r.run_key}), limit=1)]


def _run(job, partition_key, instance, failed: list[FailedRun], tags=None):
    """Run `job` for one partition in this process; a failure is said at once and added to `failed`."""
    result = job.execute_in_process(partition_key=partition_key, instance=instance, tags=tags,
                                    raise_on_error=False, run_config=QUIET)
    if not result.success:
        failure = FailedRun(job.name, str(partition_key) if partition_key else None, result.run_id,
                            first_error(result.all_events))
        report(failure)
        failed.append(failure)
    return result


def run_requested(instance, defs, requests) -> list[FailedRun]:
    """Execute each requested partition through lake_job in this process, tagged as the sensor's run."""
    job = defs.resolve_job_def("lake_job")
    failed: list[FailedRun] = []
    for i, request in enumerate(requests, 1):
        print(f"[{i}/{len(requests)}] lake_job {request.partition_key}", flush=True)
        tags = {**request.tags, RUN_KEY_TAG: request.run_key, SENSOR_NAME_TAG: "raw_drop_sensor"}
        _run(job, request.partition_key, instance, failed, tags)
    return failed


def _metadata(result, asset: str) -> dict:
    for event in result.get_asset_materialization_events():
        if event.materialization.asset_key.path[-1] == asset:
            return {k: v.value for k, v in event.materialization.metadata.items()}
    return {}


def run_crawl_level(instance, defs, crawls: list[str]) -> list[FailedRun]:
    """Materialize each crawl's crawl-level assets (duplicate clusters over every shard, crawl stats) and print
    the filter funnel chart and what deduplication removed, as the UI shows them."""
    job = defs.resolve_job_def("crawl_job")
    failed: list[FailedRun] = []
    for crawl in crawls:
        print(f"crawl_job {crawl}", flush=True)
        result = _run(job, crawl, instance, failed)
        if not result.success:
            continue
        stats, dedup = _metadata(result, CRAWL_STATS.name), _metadata(result, CLUSTERS_SPEC.name)
        print(f"\ncrawl_stats {crawl}: the filter funnel (the UI shows it as a chart)")
        for row in stats["funnel"].records:
            step, block, reason, n = (row.data[k] for k in ("step", "block", "reason", "documents"))
            label = step if step in ("in", "out") else f"- {block} {reason}"
            print(f"  {label:<52} {n:>8,}")
        print(f"duplicate_clusters {crawl}: {dedup['duplicates_removed']:,} of {dedup['documents']:,} filtered "
              f"documents removed {dedup['removed_by_reason']}\n")
    return failed


def job_assets(defs, job_name: str) -> set[str]:
    """The assets a job of the definitions materializes."""
    job = next(j for j in defs.jobs if j.name == job_name)
    return {key.path[-1] for key in job.selection.resolve(defs.resolve_asset_graph())}


def stale_keys(instance, lake, settings: Settings, defs, job_name: str, failed: list[FailedRun]) -> list:
    """The partitions of `job_name`'s assets the stale planner lists, as partition keys, but those whose run (or
    whose crawl's run) failed earlier in this demo: the planner lists a failed partition to retry it, and a demo
    does not retry its own failures (each is said once, when it happens)."""
    assets = job_assets(defs, job_name)
    gave_up = {f.partition for f in failed if f.partition}
    parts = sorted({p.partition for p in stale_partitions(instance, lake, settings) if p.asset in assets
                    and p.partition not in gave_up and p.partition.split("|")[0] not in gave_up})
    return [crawl_shard_key(*p.split("|")) if "|" in p else p for p in parts]


def run_partitions(instance, defs, job_name: str, keys: list, note: str = "") -> list[FailedRun]:
    """Run `job_name` for each partition key in this process; -> the runs that failed."""
    job = defs.resolve_job_def(job_name)
    failed: list[FailedRun] = []
    for i, key in enumerate(keys, 1):
        print(f"[{i}/{len(keys)}] {job_name} {key}{note}", flush=True)
        _run(job, key, instance, failed)
    return failed


def run_stale_lake(instance, defs, lake, settings: Settings, failed: list[FailedRun]) -> list[FailedRun]:
    """lake_job for the partitions still stale after the sensor's runs (code or settings changed since the last
    build), so that the demo always ends with nothing stale."""
    return run_partitions(instance, defs, "lake_job", stale_keys(instance, lake, settings, defs, "lake_job", failed),
                          " (stale)")


def drop_eval_sets(lake, settings: Settings) -> list[str]:
    """The GSM8K test set of ../shared/data under evals/: the demo's release is decontaminated against it."""
    path = SHARED_WARC.parent / "evals" / GSM8K
    if not path.exists():
        return []
    lake.put_file(key := f"{settings.evals.prefix}{GSM8K}", path)
    return [key]


def run_curated(instance, defs, lake, settings: Settings, failed: list[FailedRun]) -> list[FailedRun]:
    """curated_job (deduplicated → tokenized), then enrich_job, for the partitions the stale planner lists (but
    those that failed earlier in the demo)."""
    curated = run_partitions(instance, defs, "curated_job",
                             stale_keys(instance, lake, settings, defs, "curated_job", failed))
    return curated + run_partitions(instance, defs, "enrich_job",
                                    stale_keys(instance, lake, settings, defs, "enrich_job", failed + curated))


def run_curation(instance, defs) -> list[FailedRun]:
    """The takedown requests and the eval index in force, as assets (the filtered runs read the same lists)."""
    print("curation_job", flush=True)
    failed: list[FailedRun] = []
    _run(defs.resolve_job_def("curation_job"), None, instance, failed)
    return failed


def run_release(instance, defs) -> list[FailedRun]:
    """Write the settings' training release from every tokenized partition and print what it holds."""
    print("release_job", flush=True)
    failed: list[FailedRun] = []
    result = _run(defs.resolve_job_def("release_job"), None, instance, failed)
    if not result.success:
        return failed
    m = _metadata(result, RELEASE.name)
    print(f"\nrelease {m['release']}: {m['documents']:,} documents, {m['tokens']:,} tokens → {m['sequences']:,} "
          f"sequences of {m['context']:,} (padding {m['padding_pct']:.2f}%, truncated {m['truncated_pct']:.2f}%)"
          f"{' (already released: unchanged)' if m['reused'] else ''}\n"
          "  look at it: .venv/bin/llm-assets show release --limit 2 --json")
    return []


def takedown_step(instance, defs, lake, settings: Settings) -> list[FailedRun]:
    """The takedown demo: a request for one released document's URL, the plan (exactly the partitions that hold
    it, and the release), the rebuild, and where the request stands: removed, in a new release, the old one
    superseded."""
    from llm_assets import takedown
    from llm_assets.core.release import latest_release
    from llm_assets.core.takedowns import TakedownRequest
    from llm_assets.dedup.spec import DEDUPLICATED_SPEC
    from llm_assets.loader import ReleaseLoader, SupersededReleaseWarning

    crawls = [c for c in instance.get_dynamic_partitions("crawl")]
    old = latest_release(lake, settings.release.name)
    manifests = [m for c in crawls for m in committed(lake, DEDUPLICATED_SPEC.name, c, settings.shard_keys()).values()
                 if m.rows]
    if old is None or not manifests:
        raise LookupError("no release yet: run `make demo` first")
    url = LakeInput(lake, DEDUPLICATED_SPEC.name, manifests[:1]).scan().select("url").head(1).collect()["url"][0]
    request = TakedownRequest(url=url, reason="demo: a site owner's request", requested_by="demo",
                              date=dt.date.today())
    print(f"takedown add --url {url}: written to {lake.url(takedown.add(lake, request))}")
    failed = run_curation(instance, defs)
    planned = stale_partitions(instance, lake, settings)
    for p in planned:
        print(f"  stale  {p.asset:<18} {p.partition or '(unpartitioned)':<24} {p.cause}")
    failed += run_partitions(instance, defs, "lake_job", stale_keys(instance, lake, settings, defs, "lake_job",
                                                                    failed))
    failed += run_crawl_level(instance, defs, sorted({p.partition.split("|")[0] for p in planned
                                                      if p.asset == CLUSTERS_SPEC.name}))
    failed += run_curated(instance, defs, lake, settings, failed)
    failed += run_release(instance, defs)
    print()
    print(takedown.format_status([s for s in takedown.status(lake, settings, crawls) if s.target == request.target]))
    uri = lake.url(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ReleaseLoader(uri, storage_options=lake.config.boto_options(lake.credentials))
    said = [str(w.message) for w in caught if issubclass(w.category, SupersededReleaseWarning)]
    print(f"\nthe loader on the previous release: {said[0] if said else 'no warning'}\n"
          "  (ReleaseLoader(..., on_superseded='refuse') refuses it)")
    return failed


CHANGED_SETTINGS = "changed-settings.yaml"
GSM8K = "openai-grade-school-math__gsm8k_test.jsonl"
LATE_DROP = ("CC-MAIN-2024-22", "late-drop.warc.gz", "dolma__sample-0001.warc.gz")


def write_changed_settings(source: Path, workdir: Path) -> Path:
    """The settings file `source` with one threshold changed: Gopher's minimum words per document, 50 → 80."""
    data = yaml.safe_load(source.read_text())
    chain = data.setdefault("filtered", {}).setdefault("chain", [{"block": "gopher_quality"}])
    next(b for b in chain if b["block"] == "gopher_quality")["min_doc_words"] = 80
    path = workdir / CHANGED_SETTINGS
    environment.private_dir(workdir)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def drop_late_file(lake) -> str:
    crawl, name, source = LATE_DROP
    key = f"raw/{crawl}/{name}"
    if (SHARED_WARC / source).exists():
        lake.put_file(key, SHARED_WARC / source)
    else:
        lake.put_bytes(key, sample_warc(seed=7, pages=6))
    return key


def image_pair_examples(lake, settings: Settings, crawls: list[str], n: int = 3) -> str:
    """A few image–text pairs of the demo crawls, to look at."""
    lines = ["image–text pairs, for example:"]
    for crawl in crawls:
        manifests = list(committed(lake, IMAGE_TEXT_PAIRS.name, crawl, settings.shard_keys()).values())
        if not manifests:  # not built (its runs failed): nothing to show
            continue
        pairs = (LakeInput(lake, IMAGE_TEXT_PAIRS.name, manifests).scan()
                 .filter(pl.col("alt").str.len_chars() > 10).head(n).collect())
        for image_url, alt in pairs.select("image_url", "alt").iter_rows():
            lines.append(f"  [{crawl}] {alt[:60]!r} → {image_url[:90]}")
    return "\n".join(lines) if len(lines) > 1 else ""


def enrichment_examples(lake, settings: Settings, crawls: list[str], n: int = 2) -> str:
    """A few enriched documents of each crawl: their entities, keywords and summary."""
    lines = ["enriched documents, for example (`llm-assets show enriched --crawl C` for more):"]
    for crawl in crawls:
        manifests = list(committed(lake, ENRICHED.name, crawl, settings.shard_keys()).values())
        docs = (LakeInput(lake, ENRICHED.name, manifests).scan().filter(pl.col("entities").list.len() >= 3)
                .sort("doc_id").head(n).collect()) if manifests else pl.DataFrame()
        for row in docs.iter_rows(named=True):
            lines += [f"  [{crawl}] {row['url']}", *describe_enriched(row, "    ")]
    return "\n".join(lines) if len(lines) > 1 else ""


def describe_enriched(row: dict, indent: str = "") -> list[str]:
    """One enriched row, for people: entities with label and mentions, keywords, the summary."""
    entities = ", ".join(f"{e['text']} ({e['label']}{' ×%d' % e['count'] if e['count'] > 1 else ''})"
                         for e in (row["entities"] or [])[:6])
    keywords = ", ".join(k["keyword"] for k in (row["keywords"] or [])[:6])
    summary = (row["summary"] or "")[:300] + ("…" if len(row["summary"] or "") > 300 else "")
    return [f"{indent}entities: {entities or '-'}", f"{indent}keywords: {keywords or '-'}",
            f"{indent}summary:  {summary or '-'}", *([f"{indent}skipped:  {'; '.join(row['skipped'])}"]
                                                    if row.get("skipped") else [])]
