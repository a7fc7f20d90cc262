"""The sandbox image's Python packages: one pin list (docker/sandbox/requirements.txt) that
the online and the offline build both install, the labels that record it, the build's own
checks, and an offline build (Docker) that holds exactly those versions."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from exec_server.image_labels import sandbox_versions
from tools import build_image as image

CHECK = image.SANDBOX_DIR / "check_versions.py"


def dockerfile_arg(name: str) -> str:
    text = (image.SANDBOX_DIR / "Dockerfile").read_text()
    [value] = re.findall(rf"^ARG {name}=(.*)$", text, re.MULTILINE)
    return value.strip("'")


def test_dockerfile_labels_match_the_pin_file() -> None:
    assert json.loads(dockerfile_arg("PACKAGES")) == image.sandbox_pins()
    assert dockerfile_arg("PYTHON_VERSION").startswith(image.SANDBOX_PYTHON + ".")
    assert set(image.sandbox_pins()) >= {"sympy", "mpmath", "numpy"}


def test_pins_must_be_exact(tmp_path: Path) -> None:
    loose = tmp_path / "requirements.txt"
    loose.write_text("# comment\nsympy==1.14.0  # exact\nnumpy>=2\n")
    with pytest.raises(ValueError, match="'numpy>=2' is not pinned"):
        image.sandbox_pins(loose)


def test_sandbox_versions_reads_the_labels() -> None:
    labels = {
        "boxed.python": "3.11.2",
        "boxed.packages": '{"sympy":"1.14.0","mpmath":"1.3.0","numpy":"2.4.6"}',
        "other": "x",
    }
    assert sandbox_versions(labels) == {
        "python": "3.11.2",
        "packages": {"mpmath": "1.3.0", "numpy": "2.4.6", "sympy": "1.14.0"},
    }


@pytest.mark.parametrize(
    "labels",
    [None, {}, {"boxed.packages": "not json"}, {"boxed.packages": '["sympy"]'}],
)
def test_sandbox_versions_unknown_is_none(labels: dict[str, str] | None) -> None:
    assert sandbox_versions(labels) == {"python": None, "packages": None}


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True)


def test_build_check_refuses_a_label_that_differs_from_the_pins(tmp_path: Path) -> None:
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("sympy==0.0.1\n")  # not what this host has either
    proc = check("versions", "0.0", '{"sympy": "0.0.2"}', str(reqs))
    assert proc.returncode == 1 and proc.stdout == ""
    assert "the PACKAGES label {'sympy': '0.0.2'} differs" in proc.stderr
    assert "the label says 0.0" in proc.stderr
    assert "installed {'sympy': '" in proc.stderr


def test_build_check_refuses_an_unpinned_dependency(tmp_path: Path) -> None:
    pytest.importorskip("sympy")
    from importlib.metadata import version

    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"sympy=={version('sympy')}\n")  # without mpmath
    proc = check("dependencies", str(reqs))
    assert proc.returncode == 1
    assert "sympy needs mpmath" in proc.stderr and "pinned: None" in proc.stderr
    reqs.write_text(f"sympy=={version('sympy')}\nmpmath=={version('mpmath')}\n")
    assert check("dependencies", str(reqs)).returncode == 0


# --- a real offline build -----------------------------------------------------------------

TAG = "boxed-sandbox:pins-test"  # not :latest, which other services here use


def docker(*args: str) -> str:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def offline_image() -> Iterator[str]:
    """The sandbox image built offline once for this module, removed after; the build
    leaves no untagged pip-stage image of its own behind (others' are not its to remove)."""
    before = image.stage_images()
    image.build_sandbox_image(TAG, offline=True)
    left = image.stage_images() - before
    try:
        assert left == set(), f"the build left its stage image: {left}"
        yield TAG
    finally:
        docker("rmi", TAG)
        for leftover in left:
            docker("rmi", leftover)


@pytest.mark.docker
def test_offline_image_holds_and_labels_the_pinned_versions(offline_image: str) -> None:
    pins = image.sandbox_pins()
    labels = json.loads(docker("image", "inspect", "-f", "{{json .Config.Labels}}", offline_image))
    expected = {"python": dockerfile_arg("PYTHON_VERSION"), "packages": pins}
    assert sandbox_versions(labels) == expected
    code = (
        "import platform, sympy, numpy, mpmath; "
        "print(platform.python_version(), sympy.__version__, numpy.__version__, "
        "mpmath.__version__)"
    )
    out = docker("run", "--rm", "--network", "none", offline_image, "python3", "-c", code)
    assert out.split() == [expected["python"], pins["sympy"], pins["numpy"], pins["mpmath"]]
    recorded = docker(
        "run", "--rm", "--network", "none", offline_image, "cat", "/etc/boxed-sandbox.json"
    )
    assert json.loads(recorded) == expected
    assert docker("run", "--rm", "--network", "none", offline_image, "id", "-u") == "10001"
    for compiler in ("gcc", "g++"):
        found = docker(
            "run", "--rm", "--network", "none", offline_image, compiler, "-dumpfullversion"
        )
        assert found == labels["boxed.gcc"] == dockerfile_arg("GCC_VERSION")
    assert image.sandbox_is_current(offline_image)


def test_the_toolchain_is_declared_once() -> None:
    from exec_server.languages import GCC

    assert dockerfile_arg("GCC_VERSION") == GCC
    assert image.dockerfile_labels()["boxed.gcc"] == GCC
    assert {"gcc", "g++", "libc6-dev"} <= set(image.BASE_PACKAGES)


def test_a_stale_image_is_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    current = dict(image.dockerfile_labels())
    found: dict[str, dict[str, str] | None] = {
        "missing": None,
        "current": current,
        "reordered": {**current, "boxed.packages": json.dumps(image.sandbox_pins())},
        "no-toolchain": {k: v for k, v in current.items() if k != "boxed.gcc"},
        "other-pins": {**current, "boxed.packages": '{"sympy": "1.0"}'},
    }
    monkeypatch.setattr(image, "image_labels", found.__getitem__)
    verdicts = {tag: image.sandbox_is_current(tag) for tag in found}
    assert verdicts == {
        "missing": False,
        "current": True,
        "reordered": True,
        "no-toolchain": False,
        "other-pins": False,
    }
    base = {"boxed.base_packages": ",".join(image.BASE_PACKAGES)}
    monkeypatch.setattr(image, "image_labels", {"new": base, "old": {}}.get)
    assert image.base_is_current("new") and not image.base_is_current("old")


def test_the_offline_base_tag_can_be_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second base can be built beside the shared one; the service image uses it too."""
    made: list[tuple[str, str]] = []
    monkeypatch.setattr(image, "sandbox_is_current", lambda tag: False)
    monkeypatch.setattr(image, "base_is_current", lambda tag: False)
    monkeypatch.setattr(image, "image_exists", lambda tag: ("base", tag) in made)
    monkeypatch.setattr(image, "build_offline_base", lambda tag: made.append(("base", tag)))
    monkeypatch.setattr(image, "download_sandbox_wheels", lambda: None)
    monkeypatch.setattr(image, "download_wheels", lambda: None)
    monkeypatch.setattr(image, "stage_images", set)
    monkeypatch.setattr(image, "build", lambda name, tag, base: made.append((name, base)) or tag)
    argv = ["--offline", "--base-tag", "mine:bookworm", "--tag", "mine:dev", "--server"]
    assert image.main(argv) == 0
    assert made == [
        ("base", "mine:bookworm"),
        ("sandbox", "mine:bookworm"),
        ("server", "mine:bookworm"),
    ]


def test_the_help_says_what_each_option_does() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tools.build_image", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout
    for option in ("--offline", "--base-tag", "--if-stale", "--keep-stage", "--server"):
        assert option in out
    assert "examples:" in out and "docs/sandbox-image.md" in out
