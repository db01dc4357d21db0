"""The package's import graph, read from the source: no circle, and no arrow from a lower layer to a higher one.

Every `import` and `from … import` inside `llm_assets` and `resources` counts, wherever it stands: at the top, in a
function (imported late for start-up time, still a dependency) or under `TYPE_CHECKING`.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("llm_assets", "resources")

# Lowest first: the folders of the package. A module may import its own layer and those below; the core imports only
# the core. A new top-level module is placed here, so that where it sits is a decision.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("llm_assets", "llm_assets.core")),  # pure processing
    ("base", ("llm_assets.settings", "llm_assets.settings_reference", "llm_assets.registry", "llm_assets.stage",
              "llm_assets.report", "llm_assets.charts", "llm_assets.loader")),  # what a stage is, settings, charts
    ("platform", ("llm_assets.platform",)),  # store, cluster, Dagster's instance, deployment
    ("stages", ("llm_assets.stages",)),  # one module per stage, no Dagster
    ("tools", ("llm_assets.tools",)),  # the planner, status, trace, export, takedowns, without the definitions
    ("dagster", ("resources", "llm_assets.dagster")),  # the adapter, jobs, sensors, checks
    ("entry points", ("llm_assets.definitions", "llm_assets.cli")),
]


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project's modules `name` imports; `from package import module` is an import of the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            wanted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1], *filter(None, [base])])
            for alias in node.names:
                wanted.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    found = set()
    for module in wanted:
        while module and module not in known:
            module = module.rpartition(".")[0]
        if module and module != name:
            found.add(module)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def layer_of(module: str) -> int:
    """The layer of the longest prefix that names the module (a package's root names only itself)."""
    best = max(((len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
                if module == p or (module.startswith(p + ".") and p != "llm_assets")), default=None)
    if best is None:
        raise AssertionError(f"{module} is in no layer of {__file__}'s LAYERS: place it")
    return best[1]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                on_stack.discard(w)
                component.append(w)
            on_stack.discard(v)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read_from_every_kind_of_import():
    edges = graph()
    assert "llm_assets.core.lake" in edges["llm_assets.registry"]  # under TYPE_CHECKING
    assert "llm_assets.platform.runners" in edges["llm_assets.stages.crawl_stats"]  # inside a method
    assert "llm_assets.charts" in edges["llm_assets.stages.filtered"]  # `from llm_assets import charts`


def test_no_import_circle():
    assert circles(graph()) == []


def test_no_import_from_a_lower_layer_to_a_higher_one():
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
              for a, targets in graph().items() for b in sorted(targets) if layer_of(b) > layer_of(a)]
    assert upward == []


def test_the_checks_fail_on_a_circle_and_an_upward_arrow():
    edges = {"llm_assets.core.a": {"llm_assets.tools.stale"}, "llm_assets.tools.stale": {"llm_assets.core.a"}}
    assert circles(edges) == [["llm_assets.core.a", "llm_assets.tools.stale"]]
    assert layer_of("llm_assets.tools.stale") > layer_of("llm_assets.core.a")
    with pytest.raises(AssertionError, match="no layer"):
        layer_of("llm_assets.somewhere_new")


def test_status_the_planner_and_the_stage_specs_import_no_dagster():
    """`llm-assets status`, `stale` without an instance, `trace` and `export` read the stage list without Dagster:
    importing a stage module for its specs must not import it."""
    code = ("import json, sys\nimport llm_assets.tools.status, llm_assets.tools.stale, llm_assets.tools.trace\n"
            "import llm_assets.tools.export\n"
            "print(json.dumps(sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))[:5]))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    assert json.loads(out.splitlines()[-1]) == []


def test_the_stage_modules_import_no_dagster():
    """A stage is Dagster-free (`llm_assets.stage`): no stage module imports Dagster, nor a module of the project
    that does, wherever the import stands; the adapter alone knows both."""
    edges, found = graph(), modules()

    def imports_dagster(module: str) -> bool:
        tree = ast.parse(found[module].read_text())
        return any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "dagster" for a in n.names)
                   or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "dagster"
                   for n in ast.walk(tree))

    def reached(module: str) -> set[str]:
        seen, todo = set(), [module]
        while todo:
            if (m := todo.pop()) not in seen:
                seen.add(m)
                todo += edges[m]
        return seen

    stages = [m for m in found if m.startswith("llm_assets.stages.") or m == "llm_assets.stage"]
    dagster = {m: sorted(d for d in reached(m) if imports_dagster(d)) for m in stages}
    assert {m: d for m, d in dagster.items() if d} == {}
