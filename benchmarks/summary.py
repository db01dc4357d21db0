"""BENCHMARKS.md's summary table and the details files under `benchmarks/results/` that it links.

A benchmark publishes its figures in two places: its details (tables per round, profiles, notes) in
`benchmarks/results/<name>.md`, between its own markers so that hand-written notes around them stay, and its
headline figures as rows of the summary table. The rows live in `benchmarks/results/summary.json`, one object per
row in table order, and the table between `<!-- summary:begin -->` and `<!-- summary:end -->` of BENCHMARKS.md is
rendered from that file: a benchmark replaces its own rows (by key) and leaves the others' alone, so every row keeps
the date and commit it was measured at, and the conditions its run saw (`benchmarks.harness`).

Every render marks the rows whose measured code changed since their commit (`stale_keys`): their figure is of other
code until their command runs again. `make snapshots` re-renders it.

    .venv/bin/python -m benchmarks.summary   # re-render the table from summary.json (after editing it by hand)
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.harness import RUN, conditions_text

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "BENCHMARKS.md"
BEGIN, END = "<!-- summary:begin -->", "<!-- summary:end -->"
HEADERS = ("measure", "current", "target", "met?", "measured", "command", "details")


@dataclass(frozen=True)
class Row:
    """One measure: `key` identifies it across runs (`<benchmark>:<measure>`); `details` is the file name under
    `benchmarks/results/`; `met` says whether the target is met ("yes", "no", "—" without a target, or a short
    qualified verdict); `measured` is "date, commit" and `conditions` the load and CPU its run saw (both filled in
    from the run's `benchmarks.harness.RUN` by `publish` when empty)."""

    key: str
    measure: str
    current: str
    command: str
    details: str
    target: str = "—"
    met: str = "—"
    measured: str = ""
    conditions: str = ""


def verdict(met: bool) -> str:
    return "yes" if met else "no"


def results_dir(output: Path) -> Path:
    """The details folder beside an output file (BENCHMARKS.md at the project root: benchmarks/results/)."""
    return output.resolve().parent / "benchmarks" / "results"


def details_path(output: Path, name: str) -> Path:
    return results_dir(output) / f"{name}.md"


def stamp() -> str:
    """The date and the commit this run started at, as a row's "measured"."""
    return f"{RUN.started:%Y-%m-%d}, {RUN.commit}"


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


# Reporting and configuring, not measuring: a change to how figures are written, or a new setting, makes no figure
# stale (a setting's default that changes a figure lives with the code it configures).
NOT_MEASURED = {"benchmarks", "benchmarks.report", "benchmarks.summary", "llm_assets.settings"}
PROJECT = ("benchmarks", "llm_assets", "llm_assets_support", "resources")


def benchmark_module(row: Row, makefile: str) -> str | None:
    """The module a row's command runs: named in the command (`-m benchmarks.x`) or in the recipe of the make
    target it names."""
    if found := re.search(r"-m (benchmarks\.\w+)", row.command):
        return found.group(1)
    if target := re.search(r"make (bench[\w-]*)", row.command):
        recipe = re.search(rf"^{re.escape(target.group(1))}:.*\n((?:\t.*\n?)*)", makefile, re.M)
        if recipe and (found := re.search(r"-m (benchmarks\.\w+)", recipe.group(1))):
            return found.group(1)
    return None


class Tree:
    """A checkout's files as of a commit (None: as checked out), read by path."""

    def __init__(self, root: Path, commit: str | None = None):
        self.root, self.commit = root, commit
        self.paths = None if commit is None else set(subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", commit], cwd=root, capture_output=True, text=True,
            check=True).stdout.split())

    def file(self, module: str) -> str | None:
        base = "/".join(module.split("."))
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if (self.root / path).exists() if self.paths is None else path in self.paths:
                return path
        return None

    def read(self, path: str) -> str:
        if self.commit is None:
            return (self.root / path).read_text()
        return subprocess.run(["git", "show", f"{self.commit}:{path}"], cwd=self.root, capture_output=True,
                              text=True, check=True).stdout


def _imports(tree: Tree, source: str) -> set[str]:
    """The project's modules a file imports, wherever the import stands (`from a import b`: b when a module)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if tree.file(f"{node.module}.{a.name}") else node.module
                     for a in node.names]
        else:
            continue
        found |= {n for n in names if n.split(".")[0] in PROJECT and tree.file(n)}
    return found


def measured_code(module: str, tree: Tree) -> dict[str, str]:
    """What a benchmark measures, as files (path -> source): its module and the benchmark modules it uses, followed
    through, and the project's modules each of those imports itself (the code it times, not all beneath it)."""
    files: dict[str, str] = {}
    seen, todo = set(), [module]
    while todo:
        if (m := todo.pop()) in seen or m in NOT_MEASURED or (path := tree.file(m)) is None:
            continue
        seen.add(m)
        files[path] = tree.read(path)
        for imported in _imports(tree, files[path]):
            if imported.startswith("benchmarks."):
                todo.append(imported)
            elif imported not in NOT_MEASURED and (other := tree.file(imported)) is not None:
                files.setdefault(other, tree.read(other))
    return files


def fingerprint(files: dict[str, str]) -> str:
    """The code itself: each file's syntax tree without its imports and docstrings (a module moved, an import
    renamed, a comment or docstring edited change no figure), whatever its path."""
    def code(source: str) -> str:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if hasattr(node, "body") and isinstance(node.body, list):
                node.body = [n for n in node.body if not isinstance(n, ast.Import | ast.ImportFrom)] or [ast.Pass()]
                if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                        and isinstance(node.body[0].value.value, str):
                    node.body = node.body[1:] or [ast.Pass()]
        return ast.dump(tree)

    return hashlib.sha256("\n".join(sorted(hashlib.sha256(code(s).encode()).hexdigest()
                                            for s in files.values())).encode()).hexdigest()[:16]


def stale_keys(rows: list[Row], root: Path = ROOT) -> set[str]:
    """The rows whose measured code differs from that code at the commit they were measured at: their figure is of
    other code, until their command runs again. A row whose commit this checkout does not have is not judged; one
    measured on uncommitted edits (`abc1234+`) is judged against its commit."""
    makefile = (root / "Makefile").read_text()
    trees: dict[str, Tree | None] = {"": Tree(root)}
    prints: dict[tuple[str, str], str] = {}

    def code(commit: str, module: str) -> str | None:
        if commit not in trees:
            known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=root, capture_output=True)
            trees[commit] = Tree(root, commit) if commit and not known.returncode else None
        if (tree := trees[commit]) is None:
            return None
        if (commit, module) not in prints:
            prints[commit, module] = fingerprint(measured_code(module, tree))
        return prints[commit, module]

    stale = set()
    for row in rows:
        commit = row.measured.rpartition(", ")[2].rstrip("+")
        module = benchmark_module(row, makefile)
        if module is not None and (then := code(commit, module)) is not None and then != code("", module):
            stale.add(row.key)
    return stale


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


STALE = "†"  # after `measured`: the code it measures changed since (`stale_keys`)


def render_table(rows: list[Row], stale: Collection[str] = ()) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for r in rows:
        met = "**no**" if r.met == "no" else r.met
        name = r.details.removesuffix(".md")
        cells = [r.measure, r.current, r.target, met, r.measured + (STALE if r.key in stale else ""),
                 f"`{r.command}`", f"[{name}](benchmarks/results/{r.details})"]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def write_summary(output: Path, rows: list[Row]) -> None:
    folder = results_dir(output)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps([asdict(r) for r in rows], indent=1, ensure_ascii=False) + "\n")
    root = output.resolve().parent
    replace_section(output, BEGIN, END, render_table(rows, stale_keys(rows, root) if (root / ".git").exists()
                                                     else set()), first=True)


def update_rows(output: Path, rows: list[Row], measured: str | None = None) -> None:
    """Replace these rows of the summary (stamped with `measured`, or the run's date and commit, and the run's
    conditions) and re-render it."""
    when, conditions = measured or stamp(), "" if measured else conditions_text(RUN.now())
    stamped = [Row(**{**asdict(r), "measured": r.measured or when, "conditions": r.conditions or conditions})
               for r in rows]
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
    if measured is None and "load average" not in body.lower():  # a run (not a re-render) silent on its conditions
        body = f"{body.rstrip()}\n\nConditions: {conditions_text(RUN.now())}.\n"
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
