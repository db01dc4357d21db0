"""`make corpus`: builds the benchmark crawl (see `benchmarks/corpus/__init__.py`).

    .venv/bin/python -m benchmarks.corpus [--out .bench/corpus] [--seed 41] [--pages 120000]
                                          [--pages-per-file 2000] [--workers 2] [--slice]

Prints the manifest's counts and sha256. A corpus already built with the same options is checked (every file's
sha256 against the manifest) and left as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

from benchmarks.corpus.build import DEBS, Options, build

ROOT = Path(__file__).resolve().parents[2]
SHARED_WARC = ROOT.parent / "shared" / "data" / "warc"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "corpus")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--pages", type=int, default=Options.pages, help="HTML pages with text")
    parser.add_argument("--pages-per-file", type=int, default=Options.pages_per_file)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slice", action="store_true", help="two packages only (de, ja), as the tests use")
    parser.add_argument("--debs", type=Path, default=DEBS, help="where packages are downloaded and unpacked")
    parser.add_argument("--warc-dir", type=Path, default=SHARED_WARC, help="the real pages the templates come from")
    args = parser.parse_args(argv)
    if not args.warc_dir.is_dir():
        raise SystemExit(f"{args.warc_dir}: not found (the shared WARC files give the page templates)")
    opts = Options(out=args.out, seed=args.seed, pages=args.pages, pages_per_file=args.pages_per_file,
                   full=not args.slice, workers=args.workers, debs=args.debs)
    target = args.out / "manifest.json"
    if target.exists() and (existing := _current(target, opts)):
        print(f"{target}: already built with these options, every file checked (sha256 {existing})")
        return
    if (args.out / "crawls").exists():
        shutil.rmtree(args.out / "crawls")
    target.unlink(missing_ok=True)
    manifest = build(opts, args.warc_dir)
    counts = manifest["counts"]
    print(f"{args.out}: {len(manifest['files'])} WARC files, {counts['bytes'] / 1e9:.2f} GB, {counts['html_pages']:,} "
          f"HTML pages with text, {len(counts['languages'])} languages in {len(counts['scripts'])} scripts, "
          f"records {counts['records']}, in {manifest['build_seconds']} s; sha256 {manifest['sha256']}",
          file=sys.stderr)


def _current(target: Path, opts: Options) -> str | None:
    manifest = json.loads(target.read_text())
    same = (manifest.get("seed"), manifest.get("pages_planned"), manifest.get("pages_per_file"),
            manifest.get("full")) == (opts.seed, opts.pages, opts.pages_per_file, opts.full)
    if not same:
        return None
    for f in manifest["files"]:
        path = target.parent / f["path"]
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != f["sha256"]:
            return None
    return manifest["sha256"]


if __name__ == "__main__":
    main()
