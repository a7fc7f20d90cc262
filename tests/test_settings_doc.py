"""docs/settings.md is the settings model's own table: a setting added, renamed or changed
without regenerating the page fails here, with the command that regenerates it."""

from __future__ import annotations

import pytest
from pydantic import Field
from pydantic.fields import FieldInfo

from exec_server.settings import Settings
from tools import settings_doc


def test_the_committed_page_is_the_generators_output() -> None:
    committed = settings_doc.PAGE.read_text()
    assert committed == settings_doc.render(), (
        f"docs/settings.md is stale: run `{settings_doc.COMMAND}` and commit the page"
    )


def test_every_setting_has_a_row_under_its_environment_name() -> None:
    page = settings_doc.render()
    for name, field in Settings.model_fields.items():
        assert f"| `{settings_doc.env_names(name, field)[0]}` |" in page, name


def test_a_setting_without_a_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fields: dict[str, FieldInfo] = {**Settings.model_fields, "undocumented": Field(default=1)}
    monkeypatch.setattr(Settings, "model_fields", fields)
    with pytest.raises(settings_doc.MissingDescription, match="undocumented.*tools.settings_doc"):
        settings_doc.render()


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("max_body_bytes", 8 * 1024 * 1024, "8 MiB"),
        ("output_max_bytes", 65536, "64 KiB"),
        ("max_fetch_bytes", 1000, "1000"),
        ("memory_mb_max", 2048, "2048 MiB"),
        ("timeout_default", 5.0, "5 s"),
        ("session_idle_timeout_max", 0.5, "0.5 s"),
        ("result_cache", True, "true"),
        ("pool_size", 4, "4"),
    ],
)
def test_values_are_shown_with_their_units(name: str, value: object, shown: str) -> None:
    assert settings_doc.with_unit(name, value) == shown


def test_a_per_request_default_names_its_server_maximum() -> None:
    field = Settings.model_fields["memory_mb_default"]
    assert settings_doc.bounds_cell("memory_mb_default", field) == (
        ">= 64 MiB; <= `BOXED_MEMORY_MB_MAX`"
    )


def test_a_former_name_is_listed_beside_the_setting() -> None:
    field = Settings.model_fields["backend_check_interval"]
    assert settings_doc.env_names("backend_check_interval", field) == [
        "BOXED_BACKEND_CHECK_INTERVAL",
        "BOXED_DOCKER_CHECK_INTERVAL",
    ]
    assert "`BOXED_DOCKER_CHECK_INTERVAL`" in settings_doc.row("backend_check_interval", field)
