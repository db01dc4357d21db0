"""The word split's cost in FineWeb-2's filter blocks, one commit against another: per language, the CPU seconds of
the three blocks FineWeb-2 runs (gopher_repetition, fineweb_quality, gopher_quality, resolved for the language by
`FilteredSettings().chain_for(language)`) over the same documents, the words split first (`segment.with_words`,
timed apart) and the blocks' `apply_filters` after, and whether the two commits keep and drop the same documents.

Made for the change of the spaced languages' split from a regex imitating spaCy (f596cba) to spaCy's own tokenizer
(2c6a81a); any two commits can be compared.

Documents per language (the same bytes for both commits): the Universal Declaration of Human Rights of
`../shared/data/text/nltk-data__udhr2.zip`, its lines recombined into `--pages` pages (`benchmarks.languages`'
`udhr_pages`), plus real prose: the Debian Administrator's Handbook in the language (`llm_assets_support.debian_docs`,
its sections of at least 150 words; Hindi, which the handbook lacks, LibreOffice's Hindi help instead), each
document its blocks joined by newlines, up to `--handbook-mb` MB of text per language (the packages as `make corpus`
leaves them in `.bench/corpus/debs`, or `--debs`; fetched with `apt-get download` when absent).

Each commit is checked out in a detached worktree (`--scratch`) and measured in its own process (this file run as
a plain script with PYTHONPATH at that worktree, so that each imports its own `llm_assets`), one process per commit
and round, interleaved A B A B, pinned by the caller (`taskset`). In each process, per language: one batch warms
the segmenter and the blocks (outside the timing), the segmenters' memory is cleared (`segment.forget`), then the
documents go through in batches of `filtered.BATCH_ROWS` and time.process_time() is read around `with_words` and
around `apply_filters` (every_document, as the filtered stage measures).

    taskset -c 1 .venv/bin/python -m benchmarks.word_split [--old f596cba] [--new 2c6a81a] [--rounds 3]
        [--pages 200] [--handbook-mb 1.2] [--debs .bench/corpus/debs] [--output benchmarks/results/word-split.md]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# language -> its UDHR file; the controls' segmenters (hi, zh, ja) did not change
LANGUAGES = {"de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "el": "ell_monotonic", "ar": "arb", "it": "ita",
             "pt": "por_PT", "nl": "nld", "pl": "pol", "tr": "tur", "sv": "swe", "en": "eng", "hi": "hin",
             "zh": "cmn_hans", "ja": "jpn"}
CONTROLS = ("hi", "zh", "ja")
BLOCKS = ("gopher_repetition", "fineweb_quality", "gopher_quality")


# ---- the worker: imports only the llm_assets of the checkout on its PYTHONPATH ----

def worker(docs_path: str, languages: list[str], out_path: str) -> None:
    import polars as pl
    import pyarrow as pa

    import llm_assets
    from llm_assets.core import filtered, segment
    from llm_assets.core.documents import SCHEMA
    from llm_assets.core.filters.base import score_filters
    from llm_assets.settings import FilteredSettings

    settings = FilteredSettings()
    all_docs = pl.read_parquet(docs_path)
    out: dict = {"llm_assets": str(Path(llm_assets.__file__).resolve().parent.parent), "languages": {}}
    for lang in languages:
        rows = all_docs.filter(pl.col("language") == lang)
        table = pa.Table.from_pylist([{"doc_id": i, "url": "", "text": t}
                                      for i, t in zip(rows["id"], rows["text"], strict=True)], SCHEMA)
        df = pl.from_arrow(table)
        assert isinstance(df, pl.DataFrame)
        df = df.with_columns(language=pl.lit(lang), language_score=pl.lit(1.0, pl.Float32))
        batches = [df.slice(i, filtered.BATCH_ROWS) for i in range(0, df.height, filtered.BATCH_ROWS)]
        blocks = [b for b in settings.chain_for(lang) if b.name in BLOCKS]
        assert sorted(b.name for b in blocks) == sorted(BLOCKS), [b.name for b in blocks]  # in the chain's order
        score_filters(segment.with_words(df.head(8)), blocks)  # segmenter loaded, patterns compiled: not timed
        segment.forget()
        words_s = blocks_s = 0.0
        decisions: dict[str, str | None] = {}
        n_words = 0
        for b in batches:
            t0 = time.process_time()
            with_words = segment.with_words(b)
            t1 = time.process_time()
            scored = score_filters(with_words, blocks)
            t2 = time.process_time()
            words_s += t1 - t0
            blocks_s += t2 - t1
            n_words += int(with_words["_words"].list.len().sum())
            decisions.update(dict.fromkeys(scored.kept["doc_id"].to_list()))
            dropped = scored.dropped
            decisions.update(zip(dropped["doc_id"].to_list(),
                                 (f"{f}:{r}" for f, r in zip(dropped["filter"], dropped["reason"], strict=True)),
                                 strict=True))
        out["languages"][lang] = {"docs": df.height, "words": n_words, "words_cpu_s": words_s,
                                  "blocks_cpu_s": blocks_s, "decisions": decisions,
                                  "segmenter": segment.segmenter_of(lang),
                                  "thresholds": [b.model_dump(mode="json") for b in blocks]}
    Path(out_path).write_text(json.dumps(out, ensure_ascii=False))


# ---- the driver ----

def documents(pages: int, handbook_mb: float, debs: Path) -> list[dict]:
    """id, language, text of every document, in a stable order."""
    from benchmarks.languages import udhr_lines, udhr_pages
    from llm_assets_support import debian_docs as sources
    from llm_assets_support.shared_data import SHARED_DATA

    udhr = SHARED_DATA / "text" / "nltk-data__udhr2.zip"
    prose: dict[str, list] = {}
    wanted = (sources.Package("debian-handbook", "handbook"), sources.Package("libreoffice-help-hi", "lo_help"))
    found = sources.fetch(wanted, debs)
    for p in wanted:
        for t in sources.cached_texts(p, sources.unpack(found[p.name], debs / "unpacked"), found[p.name]):
            if t.language in LANGUAGES and (p.layout == "handbook" or t.language == "hi"):
                prose.setdefault(t.language, []).append(t)
    out = []
    for lang, name in LANGUAGES.items():
        out += [{"id": f"udhr/{name}/{k}", "language": lang, "source": "udhr", "text": text}
                for k, text in enumerate(udhr_pages(udhr_lines(udhr, name), pages, name))]
        size = 0
        for t in prose.get(lang, []):
            text = "\n".join(b.text for b in t.blocks)
            size += len(text.encode())
            if size > handbook_mb * 1e6:
                break
            out.append({"id": f"{t.package}/{t.path}", "language": lang, "source": t.package, "text": text})
    return out


def worktree(commit: str, scratch: Path) -> tuple[Path, str]:
    sha = subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout.strip()
    path = scratch / f"wt-{sha}"
    if not path.exists():
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(path), sha], cwd=ROOT, check=True)
    return path, sha


def run_side(checkout: Path, script: Path, docs: Path, languages: list[str], out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run([sys.executable, str(script), "--worker", str(docs), str(out), *languages], cwd=checkout, env=env,
                   check=True)
    got = json.loads(out.read_text())
    if Path(got["llm_assets"]) != checkout.resolve():
        raise SystemExit(f"the worker imported {got['llm_assets']}, not {checkout}")
    return got


def summarise(docs: list[dict], rounds: dict[str, list[dict]], old: str, new: str) -> dict:
    out = {}
    for lang in LANGUAGES:
        mine = [d for d in docs if d["language"] == lang]
        a, b = rounds[old][0]["languages"][lang], rounds[new][0]["languages"][lang]
        keep_a = {k for k, v in a["decisions"].items() if v is None}
        keep_b = {k for k, v in b["decisions"].items() if v is None}
        differing = [k for k in a["decisions"] if a["decisions"][k] != b["decisions"][k]]
        reasons_differ = len(differing)
        changes = collections.Counter(f"{a['decisions'][k] or 'kept'} → {b['decisions'][k] or 'kept'}"
                                      for k in differing)
        sources = collections.Counter(next(d["source"] for d in mine if d["id"] == k) for k in differing)
        side = {}
        for label in (old, new):
            rs = [r["languages"][lang] for r in rounds[label]]
            total = [r["words_cpu_s"] + r["blocks_cpu_s"] for r in rs]
            side[label] = {"total_cpu_s": total, "words_cpu_s": [r["words_cpu_s"] for r in rs],
                           "blocks_cpu_s": [r["blocks_cpu_s"] for r in rs], "words": rs[0]["words"],
                           "segmenter": rs[0]["segmenter"], "kept": sum(v is None for v in rs[0]["decisions"].values()),
                           "docs_per_cpu_s": len(mine) / statistics.median(total)}
        out[lang] = {"docs": len(mine), "udhr_docs": sum(d["source"] == "udhr" for d in mine),
                     "mb": sum(len(d["text"].encode()) for d in mine) / 1e6, "sides": side,
                     "ratio": side[new]["docs_per_cpu_s"] / side[old]["docs_per_cpu_s"],
                     "keep_differs": len(keep_a ^ keep_b), "reason_differs": reasons_differ,
                     "kept_only_old": sorted(keep_a - keep_b)[:5], "kept_only_new": sorted(keep_b - keep_a)[:5],
                     "same_thresholds": a["thresholds"] == b["thresholds"],
                     "changes": dict(changes.most_common()), "differing_sources": dict(sources)}
    return out


def report(summary: dict, old: str, new: str, meta: dict) -> str:
    def mmm(xs: list[float]) -> str:
        return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}"

    lines = [
        "# Word split: FineWeb-2's filter blocks per language, the regex split against spaCy's tokenizer", "",
        f"What `benchmarks/word_split.py` measures (its docstring has the method): per language, the CPU seconds of "
        f"FineWeb-2's three blocks ({', '.join(BLOCKS)}, each language's thresholds from "
        f"`FilteredSettings().chain_for`) with the words split first (`segment.with_words`), at {old} (old: spaced "
        f"languages split by a pattern imitating spaCy) and at {new} (new: spaCy's own tokenizer on the distinct "
        f"whitespace-free chunks of a batch), on the same documents, one process per commit and round, interleaved "
        f"A B A B; hi, zh and ja are controls (their segmenters did not change).", "",
        f"- Command: `{meta['command']}`",
        f"- Measured {meta['date']} on {meta['machine']}; {meta['rounds']} rounds per commit, pinned to one core "
        f"(`taskset -c 1`), CPU time (time.process_time), the other core possibly busy with other work.",
        f"- Commits: old {old} (committed {meta['old_subject']}), new {new} (committed {meta['new_subject']}).",
        f"- Documents per language: {meta['pages']} UDHR pages (`benchmarks.languages.udhr_pages`) + the Debian "
        f"Administrator's Handbook's sections in the language up to {meta['handbook_mb']} MB (Hindi: LibreOffice's "
        f"help), blocks joined by newlines; MB of UTF-8 text.",
        "- docs per CPU-s: documents over the median CPU seconds of `with_words` + `score_filters` over the rounds; "
        "ratio: new over old (above 1: the new code is faster). split: `with_words` alone; blocks: `score_filters` "
        "after it (which may split again where a block needs more than the words column).",
        "- keep/drop differs: documents one commit keeps and the other drops (first round; the decisions do not "
        "change between rounds); reason differs: documents whose decision or first failing block and rule differ.",
        "",
        "| language | segmenter old → new | documents (UDHR + prose) | MB | old docs/CPU-s | new docs/CPU-s | "
        "new/old | old split CPU-s (min/med/max) | new split CPU-s (min/med/max) | old blocks CPU-s (med) | "
        "new blocks CPU-s (med) | kept old / new | keep/drop differs | reason differs |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for lang, s in summary.items():
        a, b = s["sides"][old], s["sides"][new]
        lines.append(
            f"| {lang}{' (control)' if lang in CONTROLS else ''} | {a['segmenter']} → {b['segmenter']} | "
            f"{s['docs']:,} ({s['udhr_docs']:,} + {s['docs'] - s['udhr_docs']:,}) | {s['mb']:.2f} | "
            f"{a['docs_per_cpu_s']:,.0f} | {b['docs_per_cpu_s']:,.0f} | {s['ratio']:.2f} | {mmm(a['words_cpu_s'])} | "
            f"{mmm(b['words_cpu_s'])} | {statistics.median(a['blocks_cpu_s']):.3f} | "
            f"{statistics.median(b['blocks_cpu_s']):.3f} | {a['kept']:,} / {b['kept']:,} | {s['keep_differs']:,} | "
            f"{s['reason_differs']:,} |")
    spaced = [lang for lang in summary if lang not in CONTROLS]
    mb = sum(summary[lang]["mb"] for lang in spaced)

    def total(label: str, key: str) -> float:
        return sum(statistics.median(summary[lang]["sides"][label][key]) for lang in spaced)

    lines += [
        "",
        f"Spaced languages together ({len(spaced)}, {mb:.1f} MB): split + blocks "
        f"{total(old, 'total_cpu_s'):.2f} → {total(new, 'total_cpu_s'):.2f} CPU-s "
        f"({total(old, 'total_cpu_s') / mb:.3f} → {total(new, 'total_cpu_s') / mb:.3f} CPU-s per MB); the split alone "
        f"{total(old, 'words_cpu_s'):.2f} → {total(new, 'words_cpu_s'):.2f} CPU-s.",
    ]
    lines += ["", "Where the decisions differ (first failing block:rule, old → new; the documents' source) and the "
              "words the split gave in all (old → new):", ""]
    for lang, s in summary.items():
        a, b = s["sides"][old], s["sides"][new]
        where = ", ".join(f"{n} {src}" for src, n in s["differing_sources"].items()) or "none"
        changes = "; ".join(f"{change}: {n}" for change, n in s["changes"].items()) or "—"
        lines.append(f"- {lang}: words {a['words']:,} → {b['words']:,} ({b['words'] / a['words'] - 1:+.1%}); "
                     f"documents: {where}; {changes}")
    if not all(s["same_thresholds"] for s in summary.values()):
        lines += ["", "Thresholds differ between the commits for: "
                  + ", ".join(lang for lang, s in summary.items() if not s["same_thresholds"]) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[4:], sys.argv[3])
        return
    from benchmarks.corpus.build import DEBS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="f596cba")
    parser.add_argument("--new", default="2c6a81a")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=200, help="UDHR pages per language")
    parser.add_argument("--handbook-mb", type=float, default=1.2, help="MB of handbook prose per language")
    parser.add_argument("--debs", type=Path, default=DEBS, help="the corpus' Debian packages (make corpus)")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/word-split"))
    parser.add_argument("--languages", nargs="*", default=list(LANGUAGES))
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "word-split.md")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    for lang in [lang for lang in LANGUAGES if lang not in args.languages]:
        del LANGUAGES[lang]

    args.scratch.mkdir(parents=True, exist_ok=True)
    docs = documents(args.pages, args.handbook_mb, args.debs)
    import polars as pl

    docs_path = args.scratch / "docs.parquet"
    pl.DataFrame(docs).write_parquet(docs_path)
    script = args.scratch / "word_split_worker.py"  # alone in its folder: nothing of this checkout is importable
    shutil.copyfile(__file__, script)
    (old_dir, old), (new_dir, new) = worktree(args.old, args.scratch), worktree(args.new, args.scratch)
    rounds: dict[str, list[dict]] = {old: [], new: []}
    try:
        for r in range(args.rounds):
            for label, checkout in ((old, old_dir), (new, new_dir)):
                print(f"round {r + 1}/{args.rounds}: {label}", file=sys.stderr, flush=True)
                rounds[label].append(run_side(checkout, script, docs_path, list(LANGUAGES),
                                              args.scratch / f"{label}-{r}.json"))
    finally:  # the repository keeps no worktree of ours
        for checkout in (old_dir, new_dir):
            subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=ROOT, capture_output=True)
    summary = summarise(docs, rounds, old, new)

    def subject(sha: str) -> str:
        return subprocess.run(["git", "log", "-1", "--format=%cs", sha], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    meta = {"command": "taskset -c 1 .venv/bin/python -m benchmarks.word_split " + " ".join(sys.argv[1:]),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}",
            "rounds": args.rounds, "pages": args.pages, "handbook_mb": args.handbook_mb,
            "old_subject": subject(old), "new_subject": subject(new)}
    text = report(summary, old, new, meta)
    args.output.write_text(text)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "summary": summary}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
