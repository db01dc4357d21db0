"""BENCHMARKS.md: one summary table on top, each row with a command that exists and a details file that exists;
the benchmarks write their details under benchmarks/results/ and replace only their own rows."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from benchmarks import compare, harness
from benchmarks.summary import BEGIN, END, STALE, Row, details_links, load_rows, publish, render_table, stale_keys

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "BENCHMARKS.md"


def table_rows(text: str) -> list[list[str]]:
    """The cells of the summary table's rows (header and rule left out); `\\|` inside a cell is not a separator."""
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("|")][2:]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))] for line in lines]


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def test_benchmarks_md_opens_with_the_summary_table_and_stays_short():
    text = BENCHMARKS.read_text()
    title, _, rest = text.partition("\n")
    assert title == "# Benchmarks"
    before = rest.split(BEGIN, 1)[0]
    assert BEGIN in rest and "|" not in before and "\n#" not in before, "the summary table comes first"
    # 15,000 until the at-size rows (bench-crawl, its forecast replay, two workers, beside datatrove) came in; the
    # house's restructure (a short front page, details behind it) is to bring it back down
    assert len(text.encode()) < 20_000
    rows = table_rows(text)
    assert len(rows) >= 30
    assert all(len(r) == 7 for r in rows), [r for r in rows if len(r) != 7]


def test_every_row_names_a_command_that_exists_and_links_a_file_that_exists():
    rows = table_rows(BENCHMARKS.read_text())
    targets = make_targets()
    for measure, current, _target, _met, measured, command, details in rows:
        assert current and measured, measure
        cmd = command.strip("`")
        make = re.fullmatch(r"make ([\w-]+)", cmd)
        module = re.search(r"python -m benchmarks\.(\w+)", cmd)
        assert make or module, f"{measure}: {cmd} is neither a make target nor a benchmarks module"
        if make:
            assert make.group(1) in targets, f"{measure}: no target {make.group(1)} in the Makefile"
        else:
            assert (ROOT / "benchmarks" / f"{module.group(1)}.py").is_file(), f"{measure}: {cmd}"
        (link,) = re.findall(r"\]\(([^)]+)\)", details)
        assert link.startswith("benchmarks/results/") and (ROOT / link).is_file(), f"{measure}: {link}"


def test_the_table_is_the_rendering_of_summary_json():
    """Every benchmark renders the table from benchmarks/results/summary.json: an edit of the table alone would be
    lost at the next run."""
    text = BENCHMARKS.read_text()
    rows = load_rows(BENCHMARKS)
    marked = {r.key for r, cells in zip(rows, table_rows(text), strict=True) if cells[4].endswith(STALE)}
    assert render_table(rows, marked) in text
    assert len(details_links(text)) == len(load_rows(BENCHMARKS))


def test_publish_replaces_its_own_rows_and_section_and_keeps_the_rest(tmp_path):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\nHow to read the table.\n")
    a = Row("a:x", "measure x", "1.0×", "make bench-a", "a.md", "≥ 2×", "no")
    b = Row("b:y", "measure y", "3", "make bench-b", "b.md")
    publish(output, "a", "<!-- a:begin -->", "<!-- a:end -->", "## A\n\nfirst run", [a])
    publish(output, "b", "<!-- b:begin -->", "<!-- b:end -->", "## B\n\nonly run", [b], measured="2026-01-02, abc")
    details = tmp_path / "benchmarks" / "results" / "a.md"
    details.write_text(details.read_text() + "\nNotes by hand, kept across runs.\n")
    again = Row("a:x", "measure x", "2.5×", "make bench-a", "a.md", "≥ 2×", "yes")
    new = Row("a:z", "measure z", "7", "make bench-a", "a.md")
    publish(output, "a", "<!-- a:begin -->", "<!-- a:end -->", "## A\n\nsecond run", [again, new])

    text = output.read_text()
    assert text.startswith("# Benchmarks\n\n<!-- summary:begin -->") and "How to read the table." in text
    rows = table_rows(text)
    assert [r[0] for r in rows] == ["measure x", "measure z", "measure y"]  # a new key goes after its file's rows
    assert rows[0][1:4] == ["2.5×", "≥ 2×", "yes"] and rows[2][4] == "2026-01-02, abc"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d, \w+\+?", rows[0][4])
    body = details.read_text()
    assert "second run" in body and "first run" not in body and "Notes by hand, kept across runs." in body
    assert "[Summary of every benchmark](../../BENCHMARKS.md)" in body
    assert json.loads((tmp_path / "benchmarks" / "results" / "summary.json").read_text())[2]["key"] == "b:y"


def test_compare_renders_from_saved_json_into_its_details_file_and_rows(tmp_path):
    """`python -m benchmarks.compare --render-from results.json --output BENCHMARKS.md` re-renders a saved run."""
    saved = {"meta": {"date": "2026-11-26 02:19 UTC", "machine": "x86_64, 2 CPUs", "commit": "1d20ae8",
                      "load_before": "0.1", "load_after": "0.2", "minutes": 1.0, "core": 1, "pairs": 3,
                      "command": "make bench-compare", "anchor_versions": {"datatrove": "0.10.1"},
                      "ours_versions": {"polars": "2.1.0"}, "corpus": "6 WARC files"},
             "results": {"startup": {"command": "defs()", "imports": [],
                                     "runs": [{"wall_s": w, "cpu_s": w - 0.1} for w in (2.5, 2.8, 3.4)]}}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(saved))
    output = tmp_path / "BENCHMARKS.md"
    compare.main(["--render-from", str(path), "--output", str(output)])
    compare.main(["--render-from", str(path), "--output", str(output)])  # re-runnable: the same table again

    (row,) = table_rows(output.read_text())
    assert row[0].startswith("start-up: the code location in a fresh process")
    assert row[1].startswith("2.80") and row[2:6] == ["≤ 3 s", "yes", "2026-11-26, 1d20ae8", "`make bench-compare`"]
    details = (tmp_path / "benchmarks" / "results" / "compare.md").read_text()
    assert details.count("<!-- compare:begin -->") == 1 and "2.50 s wall" in details


def test_a_replaced_run_goes_to_the_history_file_which_the_details_file_links(tmp_path):
    output = tmp_path / "BENCHMARKS.md"
    row = Row("a:x", "measure x", "1", "make bench-a", "a.md")
    for run in ("run one", "run two", "run two", "run three"):  # the same run rendered again is not history
        publish(output, "a", "<!-- a:begin -->", "<!-- a:end -->", f"## A\n\n{run}", [row])
    results = tmp_path / "benchmarks" / "results"
    details, history = (results / "a.md").read_text(), (results / "a.history.md").read_text()
    assert "run three" in details and "run two" not in details and "[a.history.md](a.history.md)" in details
    assert details.count("a.history.md)") == 1
    assert history.index("run two") < history.index("run one") and history.count("run two") == 1
    assert "run three" not in history and history.startswith("# a: earlier runs")


def _git(root, *args) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


def test_a_row_is_stale_when_the_code_it_measures_changed_since_its_commit(tmp_path):
    """The code a row measures is its benchmark module (named by its make target), the benchmark modules it uses and
    the project modules those import themselves. Moving a module, renaming an import or editing a docstring or a
    comment changes no figure; a line of that code does, and so does the benchmark's own code."""
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "Makefile").write_text("bench-a:\n\t$(BIN)/python -m benchmarks.a --output BENCHMARKS.md\n")
    for folder in ("benchmarks", "llm_assets/core", "llm_assets/tools"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "benchmarks/a.py").write_text('"""Times x."""\nfrom llm_assets.core.x import f\n\nf()\n')
    (tmp_path / "llm_assets/core/x.py").write_text('"""x."""\nimport os\n\n\ndef f():\n    return 1\n')
    (tmp_path / "llm_assets/tools/y.py").write_text("def g():\n    return 2\n")  # not imported: not measured
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "first")
    first = _git(tmp_path, "rev-parse", "--short", "HEAD")
    rows = [Row("a:x", "x", "1", "make bench-a", "a.md", measured=f"2026-01-01, {first}"),
            Row("a:old", "x", "1", "make bench-a", "a.md", measured="2026-01-01, 0000000"),  # not in this history
            Row("c:none", "y", "1", "make chaos", "c.md", measured=f"2026-01-01, {first}")]  # no benchmark module

    def commit(path: str, text: str) -> set[str]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
        _git(tmp_path, "add", "-A")
        _git(tmp_path, "commit", "-qm", path)
        return stale_keys(rows, tmp_path)

    assert stale_keys(rows, tmp_path) == set()
    assert commit("llm_assets/tools/y.py", "def g():\n    return 3\n") == set()
    _git(tmp_path, "mv", "llm_assets/core/x.py", "llm_assets/core/z.py")
    assert commit("benchmarks/a.py", '"""Times x, moved."""\nfrom llm_assets.core.z import f  # moved\n\nf()\n') \
        == set()
    assert commit("llm_assets/core/z.py", '"""Another docstring."""\n\n\ndef f():\n    return 1\n') == set()
    assert commit("llm_assets/core/z.py", "def f():\n    return 2\n") == {"a:x"}


def test_a_run_publishes_the_conditions_it_was_measured_under_and_a_re_render_does_not(tmp_path):
    """Every benchmark publishes through `publish`: a run silent on its conditions gets its own run's (load average
    at its start and end, CPU model, commit) in its details and its rows; a re-render of a saved run (`measured`
    given) claims none."""
    output = tmp_path / "BENCHMARKS.md"
    live = Row("a:x", "measure x", "1.0×", "make bench-a", "a.md")
    publish(output, "a", "<!-- a:begin -->", "<!-- a:end -->", "## A\n\nfigures", [live])
    publish(output, "b", "<!-- b:begin -->", "<!-- b:end -->", "## B\n\nold figures",
            [Row("b:y", "measure y", "3", "make bench-b", "b.md")], measured="2026-01-02, abc")
    a, b = load_rows(output)
    details = (tmp_path / "benchmarks" / "results" / "a.md").read_text()
    for text in (a.conditions, details):
        assert f"at commit {harness.RUN.commit}" in text and harness.cpu_model() in text and "load average" in text
    assert a.measured == f"{harness.RUN.started:%Y-%m-%d}, {harness.RUN.commit}"
    assert b.conditions == "" and "load average" not in (tmp_path / "benchmarks" / "results" / "b.md").read_text()
