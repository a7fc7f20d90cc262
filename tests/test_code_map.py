"""docs/architecture.md's code map names only files that exist where it puts them, and names
every module and package of the service's top level: a module added, moved or removed without
its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "architecture.md"
NAME = re.compile(r"(?<![/\w.-])[\w.-]+\.(?:py|json)\b")  # not a route: /openapi.json
ENTRY = re.compile(r"^(?P<indent> *)(?P<path>[\w.-]+/)(?=\s|$)")


def code_map() -> str:
    text = PAGE.read_text()
    section = text.split("## The code map\n", 1)[1]
    return section.split("```text\n", 1)[1].split("```", 1)[0]


def named_files() -> list[Path]:
    """Each file the map names, under the folder of the entry it is written in (a top-level
    entry ``exec_server/``, or one of its folders ``  http/``)."""
    found, top, folder = [], Path(), Path()
    for line in code_map().splitlines():
        if (m := ENTRY.match(line)) is not None:
            if m["indent"]:
                folder = top / m["path"]
            else:
                top = folder = Path(m["path"])
        elif line[:2] == "  " and line[2:3] != " ":  # a module of the top-level entry
            folder = top
        found += [folder / name for name in NAME.findall(line)]
    return found


def test_every_file_the_map_names_exists_where_it_says() -> None:
    names = named_files()
    assert len(names) > 50, "the map's layout changed: is the parser still right?"
    missing = [str(p) for p in names if not (REPO / p).is_file()]
    assert missing == [], (
        f"docs/architecture.md's code map names files that are not there: {missing}"
    )


def test_every_module_and_package_of_the_service_is_on_the_map() -> None:
    named = {str(p) for p in named_files()}
    text = code_map()
    service = REPO / "exec_server"
    modules = {f"exec_server/{p.name}" for p in service.glob("*.py") if p.name != "__init__.py"}
    packages = {p.name for p in service.iterdir() if (p / "__init__.py").is_file()}
    unmapped = sorted(modules - named) + [
        f"exec_server/{p}/" for p in sorted(packages) if not re.search(rf"^  {p}/", text, re.M)
    ]
    assert unmapped == [], f"add to docs/architecture.md's code map: {unmapped}"
