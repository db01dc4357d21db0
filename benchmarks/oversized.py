"""`make bench-oversized`: peak memory of the reader on a file holding one 200 MB record between normal ones.

    .venv/bin/python -m benchmarks.oversized [--mb 200]

Writes, into a temporary folder (written piece by piece, never held whole), a JSON Lines file whose middle line is
one document of `--mb` MB (WikiText-2 text from ../shared/data, escaped and repeated) between two small ones, the
same file gzip-compressed, a JSON array with the same three elements, and a JSON Lines file whose big text also
holds an emoji every ~100 KB, as UTF-8 (Python then stores each of its characters in 4 bytes). Each case is read
in its own fresh process, so that its peak RSS (`ru_maxrss`) is its own: by `read_records` (the documents unit's
reader, default settings: the big record is quarantined as `oversized`), and, for comparison, the way the reader
used to read JSON Lines (`for line in file: json.loads(line)`, the big document kept). Prints a Markdown table:
RSS after the imports, peak RSS, how much the peak grew while reading, what came out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import MIB, n, table

ROOT = Path(__file__).resolve().parents[1]
WIKITEXT = ROOT.parent / "shared" / "data" / "text" / "pytorch-examples__wikitext-2-v1.valid.txt"

CHILD = """
import json, resource, sys, time
from llm_assets.core.readers import ReaderSettings, ReadReport, read_records
how, path = sys.argv[1], sys.argv[2]
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
base, start = rss(), time.perf_counter()
if how == "reader":
    report = ReadReport()
    with open(path, "rb") as f:
        kept = [len(r.text) for r in read_records(f, path, ReaderSettings(), report)]
    quarantined = [q["reason"] for q in report.quarantined]
else:  # the reader before: every line read and parsed whole
    with open(path, "rb") as f:
        kept = [len(json.loads(line)["text"]) for line in f]
    quarantined = []
print(json.dumps({"base": base, "peak": rss(), "seconds": time.perf_counter() - start, "kept": kept,
                  "quarantined": quarantined}))
"""


def write_files(folder: Path, mb: int) -> dict[str, Path]:
    text = WIKITEXT.read_text()[:1_000_000]
    ascii_piece = json.dumps(text)[1:-1].encode()  # escaped: the pieces join into one JSON string
    emoji_piece = json.dumps(text.replace(" = ", " 😀 ", 10), ensure_ascii=False)[1:-1].encode()
    small = [json.dumps({"id": "before", "text": "a short document"}).encode(),
             json.dumps({"id": "after", "text": "another short document"}).encode()]
    jsonl, array, emoji = folder / "big.jsonl", folder / "big.json", folder / "emoji.jsonl"
    for path, piece, (opening, separator, closing) in ((jsonl, ascii_piece, (b"", b"\n", b"\n")),
                                                        (array, ascii_piece, (b"[", b",\n", b"]")),
                                                        (emoji, emoji_piece, (b"", b"\n", b"\n"))):
        with path.open("wb") as f:
            f.write(opening + small[0] + separator + b'{"id": "big", "text": "')
            for _ in range(mb * 1_000_000 // len(piece) + 1):
                f.write(piece)
            f.write(b'"}' + separator + small[1] + closing)
    with jsonl.open("rb") as src, gzip.open(folder / "big.jsonl.gz", "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return {"JSON Lines": jsonl, "JSON Lines, gzip": folder / "big.jsonl.gz", "JSON array": array,
            "JSON Lines, emoji": emoji}


def measure(how: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, how, str(path)], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the big record in MB")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-oversized-"))
    try:
        files = write_files(folder, args.mb)
        line_bytes = files["JSON Lines"].stat().st_size
        cases = [("`read_records`", "reader", name) for name in files]
        cases += [("before: `for line in file: json.loads(line)`", "whole", name)
                  for name in ("JSON Lines", "JSON Lines, emoji")]
        rows = []
        for label, how, name in cases:
            out = measure(how, files[name])
            rows.append([label, name, n(out["base"] / MIB), n(out["peak"] / MIB), n((out["peak"] - out["base"]) / MIB),
                         n(out["seconds"], 1), f"{len(out['kept'])} kept, {', '.join(out['quarantined']) or 'none'}"
                         " quarantined"])
        print(f"{time.strftime('%Y-%m-%d')}: a {args.mb} MB record between two small ones "
              f"(JSON Lines file: {n(line_bytes)} bytes)\n")
        print(table(["read by", "file", "RSS after imports (MiB)", "peak RSS (MiB)", "growth (MiB)", "seconds",
                     "records"], rows, "llrrrrl"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
