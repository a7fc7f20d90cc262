"""The runtime variants of the Docker-backed tests and the ``runc_only`` marker (no Docker)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.private_docker import RUNSC_CONFIG
from tests.runtimes import SYSTEM, VARIANTS, Variant, apply_runc_only, item_variant


def test_variant_ids_keep_the_runc_names() -> None:
    assert [v.id for v in VARIANTS] == [
        "container",
        "process",
        "runsc-container",
        "runsc-process",
        "pods",
    ]


def test_runsc_is_registered_without_network() -> None:
    # a bare --add-runtime fails: "cannot run with network enabled in root network namespace"
    assert RUNSC_CONFIG["runtimes"]["runsc"]["runtimeArgs"] == ["--network=none"]


def test_system_engine_changes_nothing() -> None:
    assert SYSTEM.env == {} and SYSTEM.docker == ["docker"]


@dataclass
class FakeCallSpec:
    params: dict[str, Any]


@dataclass
class FakeItem:
    """The part of a collected pytest item that apply_runc_only reads and writes."""

    marker: Any
    callspec: FakeCallSpec
    nodeid: str = "tests/test_x.py::test_y"
    added: list[Any] = field(default_factory=list)

    def get_closest_marker(self, name: str) -> Any:
        return self.marker if name == "runc_only" else None

    def add_marker(self, marker: Any) -> None:
        self.added.append(marker)


def item(marker: Any, variant: Variant) -> Any:
    return FakeItem(marker, FakeCallSpec({"boxed_service": variant, "n": 1}))


def test_runc_only_skips_the_runsc_variants_with_the_reason() -> None:
    marker = pytest.mark.runc_only("reads host /proc").mark
    runc, runsc = (
        item(marker, Variant("runc", "process")),
        item(marker, Variant("runsc", "process")),
    )
    apply_runc_only([runc, runsc])
    assert runc.added == []
    (skip,) = runsc.added
    assert skip.mark.name == "skip" and skip.mark.kwargs["reason"] == "runc only: reads host /proc"
    assert item_variant(runsc) == Variant("runsc", "process")


@pytest.mark.parametrize("marker", [pytest.mark.runc_only, pytest.mark.runc_only(" ")])
def test_runc_only_without_a_reason_is_a_usage_error(marker: Any) -> None:
    with pytest.raises(pytest.UsageError, match="runc_only needs a reason"):
        apply_runc_only([item(marker.mark, Variant("runc", "container"))])
