"""The package layout holds: imports run one way (no cycle between modules or packages, each package
importing only those docs/ARCHITECTURE.md allows) and units stay short enough to read.

The checks read the source with `ast` (imports inside functions count too), so they see what a
reader sees; each is also run on a small package made to break it, to show it can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "trajcomp"

# What each package may import (besides itself and trajcomp.version). `api` is the top-level public
# modules: trajcomp/__init__.py, hf.py and ray.py.
ALLOWED = {
    "core": set(),
    "formats": {"core"},
    "summarizers": {"core"},
    "reports": {"core", "formats"},
    "engines": {"core", "formats", "summarizers", "reports"},
    "cli": {"core", "formats", "summarizers", "reports", "engines"},
    "api": {"core", "engines"},
}
LEAVES = {"version"}  # imported from anywhere, imports nothing
# Inside a package, its folders (and, where named, its top-level modules) are layered the same way: each
# imports only those it names (docs/ARCHITECTURE.md). A package's top-level modules not named in TOP are
# its top: they may import anything of it.
FOLDERS = {
    # engines/ by job: object storage at the bottom, the run's flow, then parts and resume beside buying
    # summaries, and the runners on top.
    "engines": {
        "storage": set(),
        "flow": {"storage"},
        "parts": {"flow", "storage"},
        "summaries": {"flow", "storage"},
        "runners": {"flow", "storage", "parts", "summaries"},
    },
    # core/ by job: the row dialects at the bottom, counting, the row's figures (data), planning and
    # pruning, the config, the summary turn, segments; compressor.py on top.
    "core": {
        "dialects": set(),
        "counting": {"dialects"},
        "data": set(),
        "planning": {"dialects", "counting", "data"},
        "config": {"dialects", "planning"},
        "summary": {"dialects", "counting", "planning", "data", "config"},
        "segments": {"dialects", "counting", "planning", "data", "config", "summary"},
    },
    # reports/: the report itself (its top-level modules), its HTML page, and `show`'s rows of an output.
    "reports": {
        "report": set(),
        "html": {"report"},
        "show": {"report", "html"},
    },
}
# Top-level modules that sit in a layer of their package's FOLDERS.
TOP = {
    "core": {"metrics": "data", "row_result": "data", "json_codec": "data", "config": "config",
             "config_layout": "config"},
    "reports": {name: "report" for name in ("schema", "build", "reading", "comparison", "text", "numbers")},
}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_FOLDER_MODULES = 12


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at `root`, by dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module `name` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            subs = [f"{target}.{alias.name}" for alias in node.names]
            found.update(sub for sub in subs if sub in known)
            if not all(sub in known for sub in subs):
                found.add(target)
    return {m for m in found if m in known and m != name}


def graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("hf", "ray"):
        return "api"
    return parts[1]


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    between: dict[str, set[str]] = {}
    for module, targets in edges.items():
        for target in targets:
            a, b = layer(module), layer(target)
            if a != b:
                between.setdefault(a, set()).add(b)
    return between


def forbidden(edges: dict[str, set[str]]) -> list[str]:
    """Imports that go where the layering does not allow, as 'module -> module'."""
    wrong = []
    for module, targets in sorted(edges.items()):
        mine = layer(module)
        if mine in LEAVES and targets:
            wrong.append(f"{module} -> {sorted(targets)}")
        for target in sorted(targets):
            theirs = layer(target)
            if theirs != mine and theirs not in LEAVES and theirs not in ALLOWED.get(mine, set()):
                wrong.append(f"{module} -> {target}")
    return wrong


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    """The package's import graph, read once for the tests below."""
    return graph(PACKAGE)


def test_no_module_imports_itself_in_a_cycle(edges):
    assert cycle(edges) is None


def test_no_package_imports_another_in_a_cycle(edges):
    assert cycle(package_edges(edges)) is None


def test_every_package_imports_only_what_the_layering_allows(edges):
    assert forbidden(edges) == []
    assert set(map(layer, edges)) == set(ALLOWED) | LEAVES  # no package the layering does not name


def folder(module: str) -> tuple[str, str] | None:
    """(package, layer) of a module inside a package that FOLDERS layers; None for its top."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in FOLDERS:
        return None
    package = parts[1]
    if len(parts) > 3:
        return package, parts[2]
    name = TOP.get(package, {}).get(parts[2])
    return (package, name) if name else None


def folders_forbidden(edges: dict[str, set[str]]) -> list[str]:
    """Imports between a package's folders that go up or sideways, as 'module -> module'."""
    wrong = []
    for module, targets in sorted(edges.items()):
        mine = folder(module)
        for target in sorted(targets):
            theirs = folder(target)
            if mine and theirs and mine[0] == theirs[0] and theirs != mine \
                    and theirs[1] not in FOLDERS[mine[0]].get(mine[1], set()):
                wrong.append(f"{module} -> {target}")
    return wrong


def test_folders_import_only_those_below_them(edges):
    assert folders_forbidden(edges) == []
    for package, layers in FOLDERS.items():
        inside = [m for m in edges if layer(m) == package and len(m.split(".")) > 3]
        # every module below the top level is in a named folder, and every folder is named
        assert {m.split(".")[2] for m in inside} <= set(layers), package


def test_no_folder_holds_more_than_a_dozen_modules():
    crowded = {str(d.relative_to(PACKAGE.parent)): n for d in PACKAGE.rglob("*") if d.is_dir()
               and (n := len([f for f in d.glob("*.py") if f.name != "__init__.py"])) > MAX_FOLDER_MODULES}
    assert crowded == {}


def test_the_row_core_names_no_summarizer_module(edges):
    # It depends on the interface; implementations come from the caller or the entry-point group,
    # so not even a string (an import_module target) may name one.
    for name, path in modules(PACKAGE).items():
        if layer(name) != "core":
            continue
        assert not any(t.startswith("trajcomp.summarizers") for t in edges[name]), name
        strings = [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
                   and isinstance(n.value, str)]
        assert not [s for s in strings if "trajcomp.summarizers." in s], name


def _long_units(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(root.parent)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}: {length} lines")
    return found


def test_modules_and_functions_stay_short():
    assert _long_units(PACKAGE) == []


# ---- the checks themselves fail on a package that breaks them ----------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "trajcomp"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "engines/__init__.py": "",
        "engines/cache.py": "from ..summarizers.base import Summarizer\n",
        "summarizers/__init__.py": "",
        "summarizers/base.py": "def f():\n    from ..engines import cache\n",
    })
    edges = graph(root)
    assert cycle(edges) in (
        ["trajcomp.engines.cache", "trajcomp.summarizers.base", "trajcomp.engines.cache"],
        ["trajcomp.summarizers.base", "trajcomp.engines.cache", "trajcomp.summarizers.base"],
    )
    assert forbidden(edges) == ["trajcomp.summarizers.base -> trajcomp.engines.cache"]


@pytest.mark.parametrize("source", ["from ..reports import schema\n", "import trajcomp.reports.schema\n",
                                    "from trajcomp.reports.schema import Report\n"])
def test_the_core_importing_a_report_is_refused(tmp_path, source):
    root = _package(tmp_path, {
        "__init__.py": "", "core/__init__.py": "", "core/metrics.py": source,
        "reports/__init__.py": "", "reports/schema.py": "Report = 1\n",
    })
    assert forbidden(graph(root)) == ["trajcomp.core.metrics -> trajcomp.reports.schema"]
    assert package_edges(graph(root)) == {"core": {"reports"}}


def test_an_engines_folder_importing_one_above_it_is_refused(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "", "engines/__init__.py": "", "engines/flow/__init__.py": "",
        "engines/flow/paths.py": "from ..parts.checkpoint import WorkDir\n",
        "engines/parts/__init__.py": "", "engines/parts/checkpoint.py": "from ..flow import paths\n",
    })
    assert folders_forbidden(graph(root)) == ["trajcomp.engines.flow.paths -> trajcomp.engines.parts.checkpoint"]


def test_a_long_function_or_module_is_found(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    root = _package(tmp_path, {"__init__.py": "", "long.py": "def f():\n" + body + "\n" * MAX_MODULE_LINES})
    assert [line.split(":")[0] for line in _long_units(root)] == ["trajcomp/long.py", "trajcomp/long.py"]


def test_a_core_folder_importing_one_above_it_is_refused(tmp_path):
    # the dialects, at the bottom of the core, reaching up into planning (as validity once did)
    root = _package(tmp_path, {
        "__init__.py": "", "core/__init__.py": "", "core/dialects/__init__.py": "",
        "core/dialects/validity.py": "from ..planning.planner import alternation_parity\n",
        "core/planning/__init__.py": "", "core/planning/planner.py": "from ..dialects import validity\n",
        "core/config.py": "from .summary import passes\n",
        "core/summary/__init__.py": "", "core/summary/passes.py": "",
    })
    assert folders_forbidden(graph(root)) == ["trajcomp.core.config -> trajcomp.core.summary.passes",
                                              "trajcomp.core.dialects.validity -> trajcomp.core.planning.planner"]


def test_a_crowded_folder_is_found(tmp_path, monkeypatch):
    root = _package(tmp_path, {"__init__.py": "", **{f"core/m{i}.py": "" for i in range(MAX_FOLDER_MODULES + 1)}})
    monkeypatch.setattr(__import__(__name__), "PACKAGE", root)
    with pytest.raises(AssertionError):
        test_no_folder_holds_more_than_a_dozen_modules()


def named_folders(page: str, root: Path) -> list[str]:
    """The package's folders that docs/ARCHITECTURE.md does not name (as `folder/`, relative to trajcomp/)."""
    folders = sorted(str(d.relative_to(root)) + "/" for d in root.rglob("*") if (d / "__init__.py").exists())
    return [f for f in folders if f"`{f}`" not in page]


def test_the_architecture_page_names_every_folder_on_one_page():
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert named_folders(page, PACKAGE) == []
    assert page.count("\n") <= 80  # one page


def test_a_folder_the_page_does_not_name_is_found(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "core/__init__.py": "", "core/new/__init__.py": ""})
    assert named_folders("| `core/` | the row core |", root) == ["core/new/"]
