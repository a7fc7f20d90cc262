"""Every default a doc states for a ``BOXED_*`` setting is the settings model's own: a table row
(`` | `BOXED_X` | `V` | ``) or a note (`` `BOXED_X` (V) ``, `` (default V) ``), numbers with their
units (s, KiB, MiB) converted. A statement it cannot read as a value (``(then 429)``) is prose,
not a default, and is passed over."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from exec_server.settings import Settings

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
STATED = re.compile(
    r"`BOXED_(?P<name>[A-Z0-9_]+)`"
    r"(?: \| `(?P<cell>[^`]*)` \|| \((?:default )?(?P<note>[^)]{1,30})\))"
)
NUMBER = re.compile(r"^`?(?P<n>\d[\d,]*(?:\.\d+)?)\s*(?P<unit>s|KiB|MiB|GiB)?`?(?: by default)?$")
UNIT = {None: 1, "s": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def stated_defaults() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        for m in STATED.finditer(page.read_text()):
            found.append((page.name, m["name"].lower(), m["cell"] or m["note"]))
    return found


def as_value(text: str, field: str) -> Any:
    """The stated value, or None when the text is prose about the setting."""
    text = text.strip()
    if (m := NUMBER.match(text)) is not None:
        n = float(m["n"].replace(",", ""))
        unit = m["unit"]
        if unit in ("KiB", "MiB", "GiB") and re.search(r"(^|_)mb(_|$)", field):  # in MiB
            return n * UNIT[unit] / 1024**2
        return n * UNIT[unit]
    if re.fullmatch(r"[\w.:,/=-]+", text) and not text.isdigit():
        return text
    return None


def test_every_stated_default_is_the_settings_own() -> None:
    defaults = Settings(_env_file=None).model_dump()  # type: ignore[call-arg]
    wrong, checked = [], 0
    for page, field, text in stated_defaults():
        if field not in defaults:
            continue  # not a setting of the service (an example's own variable)
        stated, actual = as_value(text, field), defaults[field]
        if stated is None or actual is None:
            continue
        checked += 1
        if isinstance(stated, float):
            ok = isinstance(actual, int | float) and not isinstance(actual, bool)
            ok = ok and abs(stated - float(actual)) < 1e-9
        else:
            shown = ",".join(actual) if isinstance(actual, list | tuple) else str(actual)
            ok = stated.lower() == shown.lower()
        if not ok:
            wrong.append(
                f"{page}: BOXED_{field.upper()} stated {text!r}, the default is {actual!r}"
            )
    assert checked >= 20, f"only {checked} stated defaults read: is the pattern still right?"
    assert wrong == []


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [("4 MiB", "max_files_bytes", 4 * 1024**2), ("256 MiB", "memory_mb_default", 256)],
)
def test_units_are_converted(text: str, field: str, value: float) -> None:
    assert as_value(text, field) == value
