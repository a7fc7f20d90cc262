"""The shape the code keeps: no module of ``exec_server/`` or ``boxed_client/`` uses another
module's private (``_``) names, by import or by attribute, and no function of the guest programs
is more complex than ruff's McCabe count of 15 (the seam between host and sandbox stays
readable)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

from ruff.__main__ import find_ruff_bin

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "exec_server"
PROJECT_PACKAGES = ("boxed_client", "exec_server", "scorer", "boxed_guest")
MAX_COMPLEXITY = 15


def private(name: str) -> bool:
    """A private name: a leading underscore; not a dunder, nor a sunder (``_value2member_map_``:
    the names of Python's enum machinery, not a module's own)."""
    return name.startswith("_") and not name.endswith("_")


def from_project(node: ast.Import | ast.ImportFrom, name: str) -> bool:
    """Whether an import brings in one of this project's modules (relative or by name)."""
    if isinstance(node, ast.ImportFrom) and node.level:
        return True
    module = node.module if isinstance(node, ast.ImportFrom) and node.module else name
    return module.split(".")[0] in PROJECT_PACKAGES


def private_uses(source: str) -> list[str]:
    """Where ``source`` uses a private name of another of this project's modules: imported by
    name, or read as an attribute of a name bound by an import of a project module."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    imported = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for alias in node.names:
            if not from_project(node, alias.name):
                continue
            if isinstance(node, ast.ImportFrom) and private(alias.name):
                found.append((node.lineno, f"imports {alias.name}"))
            imported.add((alias.asname or alias.name).split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in imported:
                found.append((node.lineno, f"uses {ast.unparse(node)}"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_the_check_finds_private_use_in_any_form() -> None:
    source = (
        "import os\nfrom . import supervisor\nfrom .runner import _exit_code\n"
        "import exec_server.guest.zygote as z\n"
        "os._exit(0)\nsupervisor._send(1, b'')\nz.libc._handle\nsupervisor.KILL\n"
        "supervisor.Kind._value2member_map_\n"
    )
    assert private_uses(source) == [
        "line 3: imports _exit_code",
        "line 6: uses supervisor._send",
        "line 7: uses z.libc._handle",
    ]


def test_no_module_uses_another_modules_private_names() -> None:
    found = {
        str(path.relative_to(REPO)): uses
        for package in (PACKAGE, REPO / "boxed_client")
        for path in sorted(package.rglob("*.py"))
        if (uses := private_uses(path.read_text()))
    }
    assert found == {}


def test_no_guest_function_is_more_complex_than_15() -> None:
    proc = subprocess.run(
        [
            find_ruff_bin(),
            "check",
            "--no-cache",
            "--isolated",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--output-format",
            "json",
            str(PACKAGE / "guest"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode in (0, 1), proc.stderr
    too_complex = [
        f"{v['filename']}:{v['location']['row']}: {v['message']}" for v in json.loads(proc.stdout)
    ]
    assert too_complex == []
