"""The anchor's side of `make bench-crawl`: datatrove 0.10.1's FineWeb pipeline, as its example `fineweb.py` runs it,
over a crawl's WARC files, every stage on `--workers` cores, measured per stage.

    .bench/compare/datatrove-venv/bin/python benchmarks/crawl_anchor.py --input DIR --work DIR [--workers 2]
        --lid PATH --tokenizer DIR [--extract-timeout S] --out result.json

Runs with the anchor's own interpreter: it imports datatrove and the standard library only (and
compare_anchor.py beside it), never the project. Every `*.warc.gz` under --input, recursively; the first folder
below --input names a file's crawl (files directly in --input form the crawl "_"). Each stage runs once per crawl,
one `LocalPipelineExecutor(tasks=<its input files>, workers=--workers)` each (FineWeb ran its filtering and its
MinHash deduplication per dump; the product dedups within a crawl too), the crawls one after the other:

  filter      WarcReader -> URLFilter -> Trafilatura(favour_precision=True, deduplicate=False, datatrove's default
              timeout as FineWeb left it, 1 s of wall time, unless --extract-timeout) -> LanguageFilter(en) ->
              GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter(filter_no_terminal_punct=False) ->
              FineWebQualityFilter -> JsonlWriter, each filter with FineWeb's exclusion writer
              (removed/<n>_<block>/<crawl>); one task per WARC file
  signatures  JsonlReader -> MinhashDedupSignature (FineWeb's MinhashConfig: sha1 64-bit, 14 x 8, 5-grams)
  buckets     MinhashDedupBuckets, one task per bucket (14)
  clusters    MinhashDedupCluster, one task (datatrove requires it)
  dedup       JsonlReader -> MinhashDedupFilter -> JsonlWriter (the same tasks as signatures: it finds a document
              by its index within its task)
  tokenize    JsonlReader -> DocumentTokenizer(GPT-2, eos "<|endoftext|>"; its tokenizer.json is made from
              --tokenizer's encoder.json + vocab.bpe before the first stage, untimed)

Each stage is a fresh process of this interpreter (`--stage NAME`), made a child subreaper, which reaps every
descendant before it exits (the executor's forkserver and its pool workers, the Manager, and trafilatura's timeout
child of each worker, also when orphaned): so the wait4 of that process (this script's driver) counts the CPU of
every process the stage ran. Figures per stage:

  cpu_s         user + system CPU seconds of the stage's process and all its descendants (wait4)
  wall_s        wall seconds of the stage's process, from its start (imports included) to its exit
  peak_rss_mib  the largest peak RSS of any one of those processes (wait4's ru_maxrss)
  docs_in       documents its reader produced (filter: the HTML responses WarcReader decoded); None for buckets
                and clusters, which read signatures and duplicate pairs
  docs_out      documents it wrote (filter, dedup), signed (signatures) or tokenized (tokenize); None for buckets
                and clusters
  bytes_out     bytes of the files it wrote (not its logs)
  blocks        each block's own counters as datatrove keeps them (summed over crawls and tasks; `<name>.n`: how
                many updates made a counter, where that differs from its total) and its own seconds
  killed_strays the command lines of descendants still alive 30 s after the stage ended, killed (none expected)

`total`: cpu_s, wall_s and bytes_out summed, peak_rss_mib the largest, docs_in of filter, docs_out of tokenize,
tokens. The documents that stages chain: filter.docs_out == signatures.docs_in == dedup.docs_in, and dedup.docs_in -
dedup.docs_out == clusters' "to_remove", dedup.docs_out == tokenize.docs_in.

The result (--out, also printed as one line):

  {"stages": {name: {"cpu_s", "wall_s", "peak_rss_mib", "docs_in", "docs_out", "bytes_out", "blocks", "crawls"}},
   "total": {...}, "tokens": int, "kept_filtered": path, "kept_dedup": path, "dropped": path, "extract_timeouts": int,
   "extract_broken": int, "crawls": {crawl: [WARC files]},
   "settings": {...}, "versions": {...}, "loadavg": {"before", "after"}, "cpus": int}

A crawl that a stage leaves without documents is skipped by the later stages (its "tasks" 0): datatrove's readers
fail on an empty folder.

kept_filtered and kept_dedup (under --work) are JSON Lines, one row per document kept after the filter stage and
after deduplication: {"crawl", "warc_file" (the WARC file's name), "record_id" (WARC-Record-ID: WarcReader's
document id), "url" (WARC-Target-URI)}. dropped: the same and "block" for every document a block removed (url,
non_english, gopher_rep, gopher_qual, c4, fineweb_qual: from FineWeb's exclusion writers; minhash: in kept_filtered,
not in kept_dedup). An HTML response in none of them was lost in extraction (timeout, error or empty text), or
never became a document (WarcReader reads only responses whose payload is HTML and decodes).

Offline: lid.176 is --lid (datatrove would download lid.176.bin), the Public Suffix List is tldextract's snapshot;
both are patched in the forkserver too, which imports this file before it forks the executor's workers.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# compare_anchor lies beside this file however it is loaded: as a script, by the forkserver, by a test.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_anchor  # noqa: E402

STAGES = ("filter", "signatures", "buckets", "clusters", "dedup", "tokenize")
LID_ENV = "CRAWL_ANCHOR_LID"  # set by a stage's process: the forkserver inherits it and patches on import
EOS = "<|endoftext|>"
VERSIONS = ("datatrove", "trafilatura", "lxml", "warcio", "fasttext-numpy2-wheel", "spacy", "tldextract", "numpy",
            "tokenizers", "multiprocess")
MIB = 1024 * 1024

if os.environ.get(LID_ENV):
    # The forkserver runs this file's top level before forking workers; patches made in main() would not reach
    # them, and their LanguageFilter would try to download lid.176.bin.
    compare_anchor.offline(os.environ[LID_ENV])


# Input and layout ------------------------------------------------------------------------------------------------


def crawls_of(input_dir: Path) -> dict[str, list[str]]:
    """crawl -> its WARC files as paths relative to the crawl's folder, sorted."""
    out: dict[str, list[str]] = {}
    for path in sorted(input_dir.rglob("*.warc.gz")):
        rel = path.relative_to(input_dir)
        crawl = rel.parts[0] if len(rel.parts) > 1 else "_"
        out.setdefault(crawl, []).append(str(rel.relative_to(crawl)) if crawl != "_" else str(rel))
    return out


def crawl_folder(input_dir: Path, crawl: str) -> Path:
    return input_dir if crawl == "_" else input_dir / crawl


REMOVED = ("1_url", "2_non_english", "3_gopher_rep", "4_gopher_qual", "5_c4", "6_fineweb_qual")


def outputs(work: Path, stage: str, crawl: str) -> list[Path]:
    """The folders a stage writes for one crawl (its bytes_out)."""
    return {
        "filter": [work / "filtered" / crawl, *(work / "removed" / r / crawl for r in REMOVED)],
        "signatures": [work / "minhash" / crawl / "signatures"],
        "buckets": [work / "minhash" / crawl / "buckets"],
        "clusters": [work / "minhash" / crawl / "remove_ids"],
        "dedup": [work / "dedup" / crawl],
        "tokenize": [work / "tokens" / crawl],
    }[stage]


def jsonl_files(folder: Path) -> int:
    return len(list(folder.glob("*.jsonl.gz"))) if folder.is_dir() else 0


# One stage, in its own process -----------------------------------------------------------------------------------


def pipeline_for(stage: str, crawl: str, files: list[str], args) -> tuple[list, int]:
    """One crawl's pipeline of `stage` and its number of tasks; ([], 0) when an earlier stage left it nothing
    (datatrove's readers fail on an empty folder)."""
    from datatrove.pipeline.dedup import MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
        URLFilter,
    )
    from datatrove.pipeline.readers import JsonlReader, WarcReader
    from datatrove.pipeline.tokens import DocumentTokenizer
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    work = Path(args.work)
    config = compare_anchor.fineweb_minhash_config()
    filtered, dedup = work / "filtered" / crawl, work / "dedup" / crawl
    minhash = work / "minhash" / crawl

    def removed(name: str, **kw) -> JsonlWriter:
        return JsonlWriter(str(work / "removed" / name / crawl), **kw)

    source = {"signatures": filtered, "dedup": filtered, "tokenize": dedup}.get(stage)
    if (source and not jsonl_files(source)) or (stage in ("buckets", "clusters")
                                                 and not (minhash / "signatures").is_dir()):
        return [], 0
    if stage == "filter":
        paths = work / "paths" / f"{crawl}.txt"  # exactly these files, one task each, in this order
        paths.parent.mkdir(parents=True, exist_ok=True)
        paths.write_text("".join(f"{f}\n" for f in files))
        return [
            WarcReader(str(crawl_folder(Path(args.input), crawl)), paths_file=str(paths),
                       default_metadata={"dump": crawl}),
            URLFilter(exclusion_writer=removed("1_url")),
            Trafilatura(favour_precision=True, deduplicate=False, **extract_timeout(args)),
            # English, as FineWeb ran it: datatrove 0.10.1's default is every language (languages=None)
            LanguageFilter(languages=["en"],
                           exclusion_writer=removed("2_non_english", output_filename="${language}/${rank}.jsonl.gz")),
            GopherRepetitionFilter(exclusion_writer=removed("3_gopher_rep")),
            GopherQualityFilter(exclusion_writer=removed("4_gopher_qual")),
            C4QualityFilter(filter_no_terminal_punct=False, exclusion_writer=removed("5_c4")),
            FineWebQualityFilter(exclusion_writer=removed("6_fineweb_qual")),
            JsonlWriter(str(filtered)),
        ], len(files)
    # The document stages after filtering read what the previous one wrote: one task per file, the same tasks in
    # signatures and dedup (MinhashDedupFilter finds a document by its index within its task).
    if stage == "signatures":
        return [JsonlReader(str(filtered)), MinhashDedupSignature(str(minhash / "signatures"), config=config)], \
            jsonl_files(filtered)
    if stage == "buckets":
        return [MinhashDedupBuckets(str(minhash / "signatures"), str(minhash / "buckets"), config=config)], \
            config.num_buckets
    if stage == "clusters":
        return [MinhashDedupCluster(str(minhash / "buckets"), str(minhash / "remove_ids"), config=config)], 1
    if stage == "dedup":
        return [JsonlReader(str(filtered)), MinhashDedupFilter(str(minhash / "remove_ids")), JsonlWriter(str(dedup))], \
            jsonl_files(filtered)
    if stage == "tokenize":
        return [JsonlReader(str(dedup)),
                DocumentTokenizer(str(work / "tokens" / crawl), tokenizer_name_or_path=str(work / "tokenizer.json"),
                                  eos_token=EOS)], jsonl_files(dedup)
    raise ValueError(stage)


def extract_timeout(args) -> dict:
    """Trafilatura's per-page limit: datatrove's default (FineWeb set none) unless --extract-timeout names one."""
    return {"timeout": args.extract_timeout} if args.extract_timeout else {}


def counters(stats) -> dict[str, dict[str, float]]:
    """Each block's counters from a PipelineStats: a counter's total, and as `<counter>.n` how many updates made it
    where that differs (the tokenizer's `tokens.n` is the documents it tokenized), and the block's seconds."""
    out: dict[str, dict[str, float]] = {}
    for s in stats.stats:
        row: dict[str, float] = {}
        for k, metric in s.stats.items():
            row[k] = metric.total
            if metric.n != metric.total or k == "tokens":  # summed over crawls: kept whenever it is docs
                row[f"{k}.n"] = metric.n
        row["seconds"] = s.time_stats.total
        out[s.name] = row
    return out


def become_subreaper() -> None:
    """Orphaned descendants (a killed worker's extraction child, the forkserver) are reparented to this process,
    which reaps them: their CPU then reaches this process's own wait4 figures."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def reap_all(deadline_s: float = 30.0) -> list[str]:
    """Wait for every descendant left; strays are killed (by pid: all of them are this stage's processes) after
    `deadline_s`. -> the command lines of those killed."""
    # The forkserver and the resource tracker outlive the executor, each until its pipe from this process closes:
    # stop them so that they exit (and reap their children) now.
    from multiprocess import forkserver, resource_tracker

    for helper in (forkserver._forkserver, resource_tracker._resource_tracker):
        try:
            helper._stop()
        except Exception:  # noqa: BLE001 - private API: if it moved, the deadline below still ends the wait
            pass
    end = time.monotonic() + deadline_s
    killed: list[str] = []
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid:
            continue
        if time.monotonic() > end:
            for child in children():
                killed.append(cmdline(child))
                os.kill(child, 9)
            end = time.monotonic() + deadline_s
        time.sleep(0.05)


def cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")[:300]
    except OSError:
        return str(pid)


def children() -> list[int]:
    me, out = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                out.append(int(entry))
    return out


def run_stage(args) -> dict:
    """One stage over every crawl: its blocks' counters per crawl and the bytes it wrote."""
    become_subreaper()
    os.environ[LID_ENV] = args.lid  # before the executor starts its forkserver, which imports this file
    compare_anchor.offline(args.lid)
    try:
        per_crawl, stage_bytes = run_crawls(args)
    except BaseException:
        reap_all(deadline_s=0)  # a failed stage leaves none of its workers behind (its forkserver held ~760 MB)
        raise
    killed = reap_all()
    return {"stage": args.stage, "crawls": per_crawl, "bytes_out": stage_bytes, "killed_strays": killed}


def run_crawls(args) -> tuple[dict, int]:
    """The stage's pipeline over each crawl in turn: its blocks' counters per crawl, and the bytes it wrote."""
    from datatrove.executor import LocalPipelineExecutor

    work = Path(args.work)
    per_crawl, stage_bytes = {}, 0
    for crawl, files in crawls_of(Path(args.input)).items():
        pipeline, tasks = pipeline_for(args.stage, crawl, files, args)
        if not tasks:
            per_crawl[crawl] = {"tasks": 0, "bytes_out": 0, "blocks": {}}
            continue
        executor = LocalPipelineExecutor(pipeline, tasks=tasks, workers=args.workers, skip_completed=False,
                                         logging_dir=str(work / "logs" / args.stage / crawl))
        stats = executor.run()
        written = sum(f.stat().st_size for folder in outputs(work, args.stage, crawl) if folder.is_dir()
                      for f in folder.rglob("*") if f.is_file())
        per_crawl[crawl] = {"tasks": tasks, "bytes_out": written, "blocks": counters(stats)}
        stage_bytes += written
    return per_crawl, stage_bytes


# The driver: every stage, measured -------------------------------------------------------------------------------


def make_tokenizer(folder: Path, out: Path) -> None:
    """tokenizer.json for DocumentTokenizer (it loads a file or a hub name): --tokenizer's own, or GPT-2's byte-level
    BPE built from encoder.json + vocab.bpe, <|endoftext|> a special token as in GPT-2's."""
    if (folder / "tokenizer.json").is_file():
        shutil.copyfile(folder / "tokenizer.json", out)
        return
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(folder / "encoder.json"), str(folder / "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(EOS, special=True)])
    tok.save(str(out))


def run_measured(stage: str, args) -> dict:
    """`stage` in a fresh process of this interpreter; its JSON line plus wait4's figures for its whole tree."""
    work = Path(args.work)
    cmd = [sys.executable, os.path.abspath(__file__), "--stage", stage, "--input", args.input, "--work", args.work,
           "--workers", str(args.workers), "--lid", args.lid, "--tokenizer", args.tokenizer,
           "--extract-timeout", str(args.extract_timeout or 0)]
    log_dir = work / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{stage}.stdout", "w+") as out, open(log_dir / f"{stage}.stderr", "w") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.startswith("{")]
    code = os.waitstatus_to_exitcode(status)
    if code != 0 or not lines:
        tail = (log_dir / f"{stage}.stderr").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"stage {stage} failed ({code}); {log_dir / (stage + '.stderr')}:\n{tail}")
    got = json.loads(lines[-1])
    blocks: dict[str, dict[str, float]] = {}
    for c in got["crawls"].values():
        for name, row in c["blocks"].items():
            mine = blocks.setdefault(name, {})
            for k, v in row.items():
                mine[k] = mine.get(k, 0) + v
    docs_in, docs_out = flow(stage, blocks)
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall, "peak_rss_mib": usage.ru_maxrss * 1024 / MIB,
            "docs_in": docs_in, "docs_out": docs_out, "bytes_out": got["bytes_out"], "blocks": blocks,
            "crawls": {k: {"tasks": v["tasks"], "bytes_out": v["bytes_out"]} for k, v in got["crawls"].items()},
            "killed_strays": got["killed_strays"]}


def block(blocks: dict, word: str) -> dict:
    """The counters of the block whose name holds `word` (datatrove's names carry an emoji)."""
    found = [row for name, row in blocks.items() if word.lower() in name.lower()]
    return found[0] if found else {}


def flow(stage: str, blocks: dict) -> tuple[int | None, int | None]:
    """docs_in, docs_out of a stage from its blocks' counters (see the module docstring)."""
    if stage == "filter":
        return int(block(blocks, "warc").get("documents", 0)), int(block(blocks, "jsonl").get("total", 0))
    reader = int(block(blocks, "jsonl").get("documents", 0)) if stage in ("signatures", "dedup", "tokenize") else None
    if stage == "signatures":
        return reader, int(block(blocks, "stage 1").get("total", 0))
    if stage == "dedup":
        return reader, int(block(blocks, "stage 4").get("forwarded", 0))
    if stage == "tokenize":
        return reader, int(block(blocks, "tokeniz").get("tokens.n", 0))
    return None, None


def documents(folder: Path):
    """(crawl, document) of every JSON Lines file under folder/<crawl>/, at any depth (the language block's
    exclusion writer adds a folder per language)."""
    for path in sorted(folder.glob("*/**/*.jsonl.gz")):
        with gzip.open(path, "rt") as src:
            for line in src:
                yield path.relative_to(folder).parts[0], json.loads(line)


def identity(crawl: str, doc: dict) -> dict:
    """A document's identity in its input: WarcReader's id is the WARC-Record-ID, its metadata the URL and file."""
    meta = doc.get("metadata", {})
    return {"crawl": crawl, "warc_file": os.path.basename(meta.get("file_path", "")), "record_id": doc["id"],
            "url": meta.get("url"), "language": meta.get("language")}


def write_rows(rows, out: Path) -> int:
    n = 0
    with open(out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
            n += 1
    return n


def identities(work: Path) -> dict[str, Path]:
    """kept_filtered, kept_dedup and dropped (each document a block removed, and which: the filters' exclusion
    writers, and "minhash" for what deduplication removed; pages the extractor lost appear nowhere, as in datatrove)
    as JSON Lines under `work`."""
    out = {name: work / f"{name}.jsonl" for name in ("kept_filtered", "kept_dedup", "dropped")}
    after_filter = [identity(c, d) for c, d in documents(work / "filtered")]
    after_dedup = [identity(c, d) for c, d in documents(work / "dedup")]
    write_rows(after_filter, out["kept_filtered"])
    write_rows(after_dedup, out["kept_dedup"])
    still = {(r["crawl"], r["record_id"]) for r in after_dedup}
    dropped = [{**identity(c, d), "block": name.split("_", 1)[1]} for name in REMOVED
               for c, d in documents(work / "removed" / name)]
    dropped += [{**r, "block": "minhash"} for r in after_filter if (r["crawl"], r["record_id"]) not in still]
    write_rows(dropped, out["dropped"])
    return out


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in VERSIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def run_all(args) -> dict:
    work = Path(args.work)
    for sub in ("filtered", "removed", "minhash", "dedup", "tokens", "logs", "paths"):  # a rerun starts clean
        shutil.rmtree(work / sub, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    make_tokenizer(Path(args.tokenizer), work / "tokenizer.json")
    crawls = crawls_of(Path(args.input))
    if not crawls:
        raise SystemExit(f"no *.warc.gz under {args.input}")
    stages, load_before = {}, os.getloadavg()
    for stage in STAGES:
        print(f"[crawl_anchor {time.strftime('%H:%M:%S')}] {stage}", file=sys.stderr, flush=True)
        stages[stage] = run_measured(stage, args)
    tokens = int(block(stages["tokenize"]["blocks"], "tokeniz").get("tokens", 0))
    extraction = block(stages["filter"]["blocks"], "trafilatura")
    lists = identities(work)
    from datatrove.pipeline.extractors import Trafilatura

    return {
        "stages": stages,
        "total": {"cpu_s": sum(s["cpu_s"] for s in stages.values()),
                  "wall_s": sum(s["wall_s"] for s in stages.values()),
                  "peak_rss_mib": max(s["peak_rss_mib"] for s in stages.values()),
                  "docs_in": stages["filter"]["docs_in"], "docs_out": stages["tokenize"]["docs_out"],
                  "bytes_out": sum(s["bytes_out"] for s in stages.values()), "tokens": tokens},
        "tokens": tokens, **{name: str(path) for name, path in lists.items()},
        # Pages dropped by Trafilatura's wall-clock limit (and by its child's failed restarts, counted apart by
        # datatrove): how far the machine's load changed what the anchor kept.
        "extract_timeouts": int(extraction.get("timeout", 0)),
        "extract_broken": int(extraction.get("broken_process", 0) + extraction.get("clean_error", 0)),
        "crawls": crawls,
        "settings": {"workers": args.workers, "trafilatura_timeout_s": Trafilatura(**extract_timeout(args)).timeout,
                     "minhash": str(compare_anchor.fineweb_minhash_config()), "eos": EOS,
                     "dedup_scope": "per crawl"},
        "versions": versions(),
        # Trafilatura's limit is wall time: on a loaded machine more pages time out (blocks["...Trafilatura"]).
        "loadavg": {"before": load_before, "after": os.getloadavg()}, "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, help="a folder of *.warc.gz, one sub-folder per crawl")
    parser.add_argument("--work", required=True, help="the stages' files, logs and the kept documents' lists")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of each executor (default 2)")
    parser.add_argument("--lid", required=True, help="a local fastText lid.176 model (.bin or .ftz)")
    parser.add_argument("--tokenizer", required=True, help="GPT-2's folder: encoder.json + vocab.bpe (or a "
                        "tokenizer.json)")
    parser.add_argument("--extract-timeout", type=float, default=0, help="Trafilatura's wall-clock limit per page "
                        "in seconds (default: datatrove's, 1 s, which drops pages on a loaded machine)")
    parser.add_argument("--out", help="write the result here too")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)  # internal: one measured stage
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.stage:
        print(json.dumps(run_stage(args)), flush=True)
        return
    result = run_all(args)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
