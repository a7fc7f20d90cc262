"""The import graph of ``exec_server/`` has no cycle, and the guest imports no host module.

Every ``import`` and ``from ... import`` counts, at module level and inside functions alike (a
function-local import that dodges a cycle is still a cycle in the design); only imports under
``if TYPE_CHECKING:`` do not, since they never run. ``from . import x`` counts as importing the
module ``x`` when there is one, else the package. The guest (``exec_server/guest/``) is shipped
into the sandbox as sources, where no host module exists: it may import only its own modules.
"""

from __future__ import annotations

import ast
import graphlib
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "exec_server"
GUEST = f"{PACKAGE}.guest"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (a folder under ``root``) by dotted name; a package is named
    by its ``__init__.py``."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """The imports a module runs: all of them, wherever they are, but for the body of an
    ``if TYPE_CHECKING:`` (its ``else`` runs, so it counts)."""

    def __init__(self) -> None:
        self.found: list[ast.Import | ast.ImportFrom] = []

    def visit_If(self, node: ast.If) -> None:
        if _type_checking_only(node):
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append(node)


def imported_modules(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the module ``module``) imports."""
    visitor = _Imports()
    visitor.visit(ast.parse(source))
    anchor = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in visitor.found:
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = importlib.util.resolve_name("." * node.level + (node.module or ""), anchor)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            targets.add(submodule if submodule in known else base)
    return targets & known


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of ``package`` it imports."""
    modules = module_names(root, package)
    known = set(modules)
    return {
        name: imported_modules(path.read_text(), name, path.name == "__init__.py", known) - {name}
        for name, path in modules.items()
    }


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path (its first module again at the end), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as found:
        return list(reversed(found.args[1]))
    return None


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_walk_counts_function_local_imports_and_skips_type_checking_ones(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "VERSION = 1\n",
            "a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from .c import C\nelse:\n    from . import d\n"
                "def f():\n    from .b import thing\n"
            ),
            "b.py": "from . import VERSION\nimport pkg.sub.e\n",
            "c.py": "",
            "d.py": "",
            "sub/__init__.py": "from .. import a\nfrom .e import x\n",
            "sub/e.py": "",
        },
    )
    assert import_graph(root, "pkg") == {
        "pkg": set(),
        "pkg.a": {"pkg.b", "pkg.d"},
        "pkg.b": {"pkg", "pkg.sub.e"},
        "pkg.c": set(),
        "pkg.d": set(),
        "pkg.sub": {"pkg.a", "pkg.sub.e"},
        "pkg.sub.e": set(),
    }


def test_a_cycle_is_found_with_its_path(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "engine.py": "def start():\n    from .sessions import Manager\n",
            "sessions.py": "from .limits import resolve\n",
            "limits.py": "from pkg import engine\n",
        },
    )
    found = cycle(import_graph(root, "pkg"))
    assert found is not None and found[0] == found[-1] and len(found) == 4
    assert set(found) == {"pkg.engine", "pkg.sessions", "pkg.limits"}
    for before, after in zip(found, found[1:], strict=False):
        assert after in import_graph(root, "pkg")[before]
    assert cycle({"pkg.a": {"pkg.b"}, "pkg.b": set()}) is None


def test_exec_server_has_no_import_cycle() -> None:
    graph = import_graph(REPO, PACKAGE)
    assert {"exec_server.engine", "exec_server.sessions", "exec_server.judge"} <= set(graph)
    found = cycle(graph)
    assert found is None, "import cycle: " + " -> ".join(found or [])


@pytest.mark.parametrize("use_case", ["execute", "judge", "sessions"])
def test_no_use_case_imports_another(use_case: str) -> None:
    """Execute, judge and sessions run on the engine; only the app factory assembles them."""
    imported = import_graph(REPO, PACKAGE)[f"{PACKAGE}.{use_case}"]
    others = {f"{PACKAGE}.{name}" for name in ("execute", "judge", "sessions", "app")} - {
        f"{PACKAGE}.{use_case}"
    }
    assert not imported & others, f"{use_case} imports {sorted(imported & others)}"


def test_the_guest_imports_no_host_module() -> None:
    graph = import_graph(REPO, PACKAGE)
    guest = {name for name in graph if name == GUEST or name.startswith(GUEST + ".")}
    assert len(guest) > 5
    host = {
        module: sorted(target for target in graph[module] if target not in guest)
        for module in sorted(guest)
    }
    assert not any(host.values()), f"guest modules import host modules: {host}"
