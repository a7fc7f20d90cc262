"""Write docs/settings.md from the settings model, so the table cannot miss a setting.

Every field of :class:`exec_server.settings.Settings` becomes one row: its environment
variable(s), its default (with its unit), its bounds (the validator's own, and the server-side
maximum a per-request default is held to) and its ``description=``. A field without a
description is refused: the page is the only place most settings are explained.

Run from a source checkout: ``python -m tools.settings_doc`` (writes the page) or
``python -m tools.settings_doc --check`` (exit 1 when the committed page is stale).
"""

from __future__ import annotations

import argparse
import re
import sys
import typing
from pathlib import Path

import annotated_types
from pydantic import AliasChoices
from pydantic.fields import FieldInfo

from exec_server.settings import Settings

PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
COMMAND = "python -m tools.settings_doc"
PREFIX = str(Settings.model_config.get("env_prefix", ""))
# Settings counted in seconds, by name (the model stores them as plain numbers).
SECONDS = re.compile(r"timeout|seconds|ttl|wait|interval|lifetime|retry_after")
HEADER = f"""# Settings

Every setting is an environment variable read at start-up (pydantic-settings, prefix
`{PREFIX}`); an empty value counts as unset and takes the default. `python -m exec_server --host H
--port P` overrides the first two. A per-request limit has a default, used when a request leaves
it out, and a server-side maximum: a request asking for more gets a 422 naming the maximum, and
the service refuses to start with a default above its maximum.

This page is generated from `exec_server/settings.py` (each field's `description=`): after
adding or changing a setting, run `{COMMAND}`; a test fails while the page is
stale.

| variable | default | bounds | what it sets |
|---|---|---|---|
"""


class MissingDescription(ValueError):
    """A setting without ``description=``: it would get a row that explains nothing."""


def env_names(name: str, field: FieldInfo) -> list[str]:
    """The environment variables a field is read from: its aliases when it has any."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [c for c in alias.choices if isinstance(c, str) and c.startswith(PREFIX)]
    if isinstance(alias, str):
        return [alias]
    return [f"{PREFIX}{name.upper()}"]


def number(value: float) -> str:
    """A number as a person writes it: no trailing ``.0``."""
    return str(int(value)) if float(value).is_integer() else str(value)


def with_unit(name: str, value: object) -> str:
    """A value with the unit its name implies: bytes as KiB/MiB where whole, MiB, seconds."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        if re.search(r"(^|_)bytes(_|$)", name):
            for unit, size in (("MiB", 1024**2), ("KiB", 1024)):
                if value and value % size == 0:
                    return f"{number(value / size)} {unit}"
            return number(value)
        if re.search(r"(^|_)mb(_|$)", name):
            return f"{number(value)} MiB"
        if SECONDS.search(name):
            return f"{number(value)} s"
        return number(value)
    return str(value)


def default_cell(name: str, field: FieldInfo) -> str:
    """The default: a value in backticks, ``unset``, or what a factory computes (its doc)."""
    if field.default_factory is not None:
        doc = (field.default_factory.__doc__ or "computed at start-up").split(":")[0]
        return f"computed: {doc.strip().rstrip('.').lower()}"
    if field.default is None:
        return "unset"
    return f"`{with_unit(name, field.default)}`"


def bounds_cell(name: str, field: FieldInfo) -> str:
    """What the validator allows: the field's bounds, its choices, and for a per-request
    default the server-side maximum (``X_default`` is held to ``X_max``)."""
    bounds = []
    for constraint in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(constraint, getattr(annotated_types, attr.capitalize())):
                bounds.append(f"{sign} {with_unit(name, getattr(constraint, attr))}")
    stem, _, role = name.rpartition("_")
    pair = {"default": f"{stem}_max", "max": f"{stem}_default"}.get(role)
    if pair in Settings.model_fields:
        sign = "<=" if role == "default" else ">="
        bounds.append(f"{sign} `{env_names(pair, Settings.model_fields[pair])[0]}`")
    if typing.get_origin(field.annotation) is typing.Literal:
        bounds.append(" or ".join(f"`{c}`" for c in typing.get_args(field.annotation)))
    return "; ".join(bounds)


def row(name: str, field: FieldInfo) -> str:
    """One table row; ``|`` in a description is escaped so it stays one cell."""
    names = env_names(name, field)
    variable = f"`{names[0]}`"
    description = " ".join((field.description or "").split()).replace("|", "\\|")
    if len(names) > 1:
        also = ", ".join(f"`{n}`" for n in names[1:])
        description += f" Also read as {also}, its former name."
    cells = [variable, default_cell(name, field), bounds_cell(name, field), description]
    return "| " + " | ".join(cells) + " |"


def render() -> str:
    """The whole page, one row per setting in the model's order."""
    missing = [n for n, f in Settings.model_fields.items() if not (f.description or "").strip()]
    if missing:
        raise MissingDescription(
            f"settings without a description= in exec_server/settings.py: {', '.join(missing)}; "
            f"give each one, then run `{COMMAND}`"
        )
    rows = [row(name, field) for name, field in Settings.model_fields.items()]
    return HEADER + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when docs/settings.md is stale"
    )
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != page:
            print(f"{PAGE} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE} ({len(Settings.model_fields)} settings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
