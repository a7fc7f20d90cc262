"""The README's docs map names every page under docs/, and every page it names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_docs_map_lists_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Docs\n", 1)[1].split("\n## ", 1)[0]
    mapped = set(re.findall(r"^\| \[docs/([\w.-]+\.md)\]", section, flags=re.M))
    pages = {p.name for p in (REPO / "docs").glob("*.md")}
    assert mapped == pages, {"unmapped": pages - mapped, "missing": mapped - pages}
