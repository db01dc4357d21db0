"""BENCHMARKS.md's summary table and the details files under `benchmarks/results/` that it links.

A benchmark publishes its figures in two places: its details (tables per round, profiles, notes) in
`benchmarks/results/<name>.md`, between its own markers so that hand-written notes around them stay, and its
headline figures as rows of the summary table. The rows live in `benchmarks/results/summary.json`, one object per
row in table order, and the table between `<!-- summary:begin -->` and `<!-- summary:end -->` of BENCHMARKS.md is
rendered from that file: a benchmark replaces its own rows (by key) and leaves the others' alone, so every row keeps
the date and commit it was measured at.

    .venv/bin/python -m benchmarks.summary   # re-render the table from summary.json (after editing it by hand)
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "BENCHMARKS.md"
BEGIN, END = "<!-- summary:begin -->", "<!-- summary:end -->"
HEADERS = ("measure", "current", "target", "met?", "measured", "command", "details")


@dataclass(frozen=True)
class Row:
    """One measure: `key` identifies it across runs (`<benchmark>:<measure>`); `details` is the file name under
    `benchmarks/results/`; `met` says whether the target is met ("yes", "no", "—" without a target, or a short
    qualified verdict); `measured` is "date, commit" (filled in by `publish` when empty)."""

    key: str
    measure: str
    current: str
    command: str
    details: str
    target: str = "—"
    met: str = "—"
    measured: str = ""


def verdict(met: bool) -> str:
    return "yes" if met else "no"


def results_dir(output: Path) -> Path:
    """The details folder beside an output file (BENCHMARKS.md at the project root: benchmarks/results/)."""
    return output.resolve().parent / "benchmarks" / "results"


def details_path(output: Path, name: str) -> Path:
    return results_dir(output) / f"{name}.md"


def stamp() -> str:
    """Today's date and the checkout's commit, as a row's "measured"."""
    got = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    commit = got.stdout.strip() or "?"
    return f"{datetime.now(timezone.utc):%Y-%m-%d}, {commit}{'+' if dirty else ''}"


def load_rows(output: Path) -> list[Row]:
    path = results_dir(output) / "summary.json"
    return [Row(**r) for r in json.loads(path.read_text())] if path.exists() else []


def merge(rows: list[Row], new: list[Row]) -> list[Row]:
    """`rows` with each of `new` in place of the row of its key; a new key goes after the last row of its details
    file (the end when there is none)."""
    out = list(rows)
    for row in new:
        keys = [r.key for r in out]
        if row.key in keys:
            out[keys.index(row.key)] = row
            continue
        same = [i for i, r in enumerate(out) if r.details == row.details]
        out.insert(same[-1] + 1 if same else len(out), row)
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for r in rows:
        met = "**no**" if r.met == "no" else r.met
        name = r.details.removesuffix(".md")
        cells = [r.measure, r.current, r.target, met, r.measured, f"`{r.command}`",
                 f"[{name}](benchmarks/results/{r.details})"]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def write_summary(output: Path, rows: list[Row]) -> None:
    folder = results_dir(output)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps([asdict(r) for r in rows], indent=1, ensure_ascii=False) + "\n")
    replace_section(output, BEGIN, END, render_table(rows), first=True)


def update_rows(output: Path, rows: list[Row], measured: str | None = None) -> None:
    """Replace these rows of the summary (stamped with `measured`, or today and the commit) and re-render it."""
    when = measured or stamp()
    stamped = [r if r.measured else Row(**{**asdict(r), "measured": when}) for r in rows]
    write_summary(output, merge(load_rows(output), stamped))


def replace_section(path: Path, begin: str, end: str, body: str, first: bool = False) -> str:
    """Replace the text between the markers, or add it with its markers: appended, or with `first` right under
    the file's title; the rest of the file is left alone. Returns the text replaced ("" when there was none)."""
    block = f"{begin}\n\n{body.rstrip()}\n\n{end}"
    text = path.read_text() if path.exists() else ("# Benchmarks\n" if first else "")
    old = ""
    if begin in text and end in text.split(begin, 1)[1]:
        head, rest = text.split(begin, 1)
        old, tail = rest.split(end, 1)
        text = head + block + tail
    elif first:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{block}\n\n{rest.lstrip(chr(10))}"
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + block + "\n"
    path.write_text(text)
    return old.strip("\n")


def archive(path: Path, old: str, new: str) -> None:
    """Keep a replaced run: `old` goes on top of `<name>.history.md` beside the details file `path` (newest first),
    which the details file links; nothing when it is empty or the same as `new` (a re-render)."""
    if not old.strip() or old.strip() == new.strip():
        return
    history = path.with_name(f"{path.stem}.history.md")
    link = f"Earlier runs: [{history.name}]({history.name})"
    header = f"# {path.stem}: earlier runs\n\n[The latest run]({path.name}); newest first.\n"
    rest = history.read_text().split("\n", 3)[3] if history.exists() else ""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    history.write_text(f"{header}\n<!-- replaced {when} -->\n\n{old.strip()}\n\n{rest.lstrip()}".rstrip() + "\n")
    text = path.read_text()
    if link not in text:
        title, _, body = text.partition("\n\n")
        first, _, after = body.partition("\n")
        path.write_text(f"{title}\n\n{first} · {link}\n{after}")


def publish(output: Path, name: str, begin: str, end: str, body: str, rows: list[Row],
            measured: str | None = None) -> Path:
    """Write `body` between `begin` and `end` of the details file `name` (created with a title and a link back to
    the summary when missing) and these rows into the summary of `output`. Returns the details file."""
    path = details_path(output, name)
    ensure_details(path)
    archive(path, replace_section(path, begin, end, body), body)
    update_rows(output, rows, measured)
    return path


def ensure_details(path: Path) -> None:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {path.stem}\n\n[Summary of every benchmark](../../BENCHMARKS.md)\n")


def details_links(text: str) -> list[str]:
    """The details files the summary table of a BENCHMARKS.md text links, in order."""
    table = text.split(BEGIN, 1)[1].split(END, 1)[0] if BEGIN in text else ""
    return re.findall(r"\]\((benchmarks/results/[^)]+)\)", table)


def main() -> None:
    write_summary(BENCHMARKS, load_rows(BENCHMARKS))
    print(f"{BENCHMARKS}: {len(load_rows(BENCHMARKS))} rows")


if __name__ == "__main__":
    main()
