"""Build an operator image offline: the sandbox image plus Debian packages, Python wheels and
files, labelled with what it adds (``GET /images`` shows it; docs/sandbox-image.md).

* **Python packages** come as wheels: a path to a ``.whl``, or a requirement that ``pip
  download`` fetches on this host for the image's Python (manylinux or pure-Python wheels, with
  their dependencies; those the base already holds at the same version are skipped). They are
  unpacked on this host (``pip install --target``, no index) and copied into the image, which
  compiles their bytecode and checks that ``import`` finds exactly those versions.
* **Debian packages** are installed with apt from the base's sources (``BOXED_DEBIAN_MIRROR``
  for the offline base), the build running with ``--network host`` as the base's does; their
  installed versions are read back into the label.
* **Files** are copied as they are (``SRC:DEST``, mode kept), owned by root.

The image keeps the base's user, working directory and labels; ``boxed.packages`` gains the
new Python packages and ``boxed.adds`` records ``{"base", "base_id", "pip", "apt", "files"}``.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from exec_server.image_labels import PACKAGES_LABEL, PYTHON_LABEL
from exec_server.images import ADDS_LABEL, NAME

DERIVED_LABEL = "boxed.derived"  # the name it was derived as
DEFAULT_TAG = "boxed-derived:{name}"
RESERVED = {"default", "latest"}


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, **kwargs)  # noqa: S603 - argument lists


def inspect(image: str) -> dict[str, object]:
    """``docker image inspect`` of ``image``; ValueError when there is no such image."""
    result = subprocess.run(
        ["docker", "image", "inspect", image], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ValueError(f"no image {image}: build it first (python -m tools.build_image)")
    return json.loads(result.stdout)[0]


def wheel_name_version(path: Path) -> tuple[str, str]:
    """A wheel's distribution name (normalized) and version, from its file name."""
    name, version = path.name.split("-")[:2]
    return re.sub(r"[-_.]+", "-", name).lower(), version


@dataclass
class Derivation:
    """What to add to ``base``."""

    name: str
    base: str
    pip: list[str] = field(default_factory=list)  # wheel paths or requirements
    apt: list[str] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)  # (source, absolute dest)

    def check(self) -> None:
        if not NAME.match(self.name) or self.name in RESERVED:
            raise ValueError(f"{self.name!r}: a name of the allow-list's kind, not default/latest")
        for source, dest in self.files:
            if not source.is_file():
                raise ValueError(f"--file {source}: not a file")
            if not dest.startswith("/") or dest.endswith("/") or re.search(r"\s", dest):
                raise ValueError(f"--file ...:{dest}: not an absolute file path without spaces")
        for package in self.apt:
            if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+~:-]+)?", package):
                raise ValueError(f"--apt {package!r} is not a Debian package name[=version]")


def gather_wheels(pip: list[str], python: str, into: Path) -> list[Path]:
    """The wheels of ``pip``: given paths copied, requirements downloaded for the image's
    Python (``python``: ``3.11``) with their dependencies."""
    into.mkdir(parents=True, exist_ok=True)
    requirements = []
    for item in pip:
        path = Path(item)
        if item.endswith(".whl"):
            if not path.is_file():
                raise ValueError(f"--pip {item}: no such wheel")
            shutil.copy2(path, into / path.name)
        else:
            requirements.append(item)
    if requirements:
        machine = platform.machine()
        _run(
            [
                sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                "--python-version", python, "--implementation", "cp",
                "--platform", f"manylinux2014_{machine}", "--platform", f"manylinux_2_28_{machine}",
                "-d", str(into), *requirements,
            ]
        )  # fmt: skip
    return sorted(into.glob("*.whl"))


def unpack_wheels(wheels: list[Path], site: Path) -> list[str]:
    """Install ``wheels`` into ``site`` on this host (no index, no dependency resolution: the
    set is complete); the top-level names they put there."""
    _run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
            "--no-compile", "--disable-pip-version-check", "--target", str(site),
            *map(str, wheels),
        ]
    )  # fmt: skip
    shutil.rmtree(site / "bin", ignore_errors=True)
    return sorted(p.name for p in site.iterdir())


def dockerfile(
    derivation: Derivation,
    site_dir: str,
    top_level: list[str],
    pip_versions: dict[str, str],
    user: str,
) -> str:
    """The build's Dockerfile: apt, then the unpacked wheels, then the files."""
    lines = ["ARG BASE", "FROM ${BASE}", "USER 0:0"]
    if derivation.apt:
        packages = " ".join(derivation.apt)
        lines.append(
            "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
            f"--no-install-recommends {packages} && apt-get clean "
            "&& rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin"
        )
    if pip_versions:
        targets = " ".join(f"{site_dir}/{name}" for name in top_level)
        lines += [
            f"COPY site/ {site_dir}/",
            "COPY check_pip.py /tmp/check_pip.py",
            f"RUN python3 -m compileall -q {targets} >/dev/null; "
            "python3 /tmp/check_pip.py && rm /tmp/check_pip.py",
        ]
    for index, (source, dest) in enumerate(derivation.files):
        lines.append(f"COPY files/{index}/{source.name} {dest}")
    if user:
        lines.append(f"USER {user}")
    return "\n".join(lines) + "\n"


# Run in the image: what ``import`` finds is what the label will say.
CHECK_PIP = """import importlib.metadata, json, sys
want = json.loads(%r)
got = {name: importlib.metadata.version(name) for name in want}
sys.exit(0 if got == want else f"installed {got}, wanted {want}")
"""


def apt_versions(tag: str, packages: list[str]) -> dict[str, str]:
    """The installed versions of ``packages`` in ``tag`` (dpkg's own record)."""
    names = [p.split("=", 1)[0] for p in packages]
    out = _run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "dpkg-query", tag,
         "-W", "-f", "${Package}=${Version}\\n", *names],
        capture_output=True,
    ).stdout  # fmt: skip
    return dict(line.split("=", 1) for line in out.split())


def derive(derivation: Derivation, tag: str | None = None) -> str:
    """Build ``derivation`` as ``tag`` (default ``boxed-derived:NAME``); the tag."""
    derivation.check()
    tag = tag or DEFAULT_TAG.format(name=derivation.name)
    base = inspect(derivation.base)
    config = base.get("Config") or {}
    labels: dict[str, str] = dict(config.get("Labels") or {})  # type: ignore[union-attr]
    python = ".".join((labels.get(PYTHON_LABEL) or "3.11").split(".")[:2])
    site_dir = f"/usr/local/lib/python{python}/dist-packages"
    packages: dict[str, str] = json.loads(labels.get(PACKAGES_LABEL) or "{}")
    with tempfile.TemporaryDirectory(prefix="boxed-derive-") as tmp:
        context = Path(tmp)
        pip_versions: dict[str, str] = {}
        top_level: list[str] = []
        if derivation.pip:
            wheels = []
            for wheel in gather_wheels(derivation.pip, python, context / "wheels"):
                name, version = wheel_name_version(wheel)
                if packages.get(name) == version:
                    continue  # the base holds it already
                if not zipfile.is_zipfile(wheel):
                    raise ValueError(f"{wheel.name} is not a wheel")
                wheels.append(wheel)
                pip_versions[name] = version
            if wheels:
                top_level = unpack_wheels(wheels, context / "site")
        for index, (source, _dest) in enumerate(derivation.files):
            (context / "files" / str(index)).mkdir(parents=True)
            shutil.copy2(source, context / "files" / str(index) / source.name)
        user = str(config.get("User") or "")
        text = dockerfile(derivation, site_dir, top_level, pip_versions, user)
        (context / "check_pip.py").write_text(CHECK_PIP % json.dumps(pip_versions))
        (context / "Dockerfile").write_text(text)
        adds = {
            "base": derivation.base,
            "base_id": base["Id"],
            "pip": pip_versions,
            "apt": {p: "" for p in derivation.apt},
            "files": [dest for _source, dest in derivation.files],
        }
        new_labels = {
            DERIVED_LABEL: derivation.name,
            PACKAGES_LABEL: json.dumps(dict(sorted({**packages, **pip_versions}.items()))),
        }
        build = ["docker", "build", "--network", "host", "--build-arg", f"BASE={base['Id']}"]
        for key, value in new_labels.items():
            build += ["--label", f"{key}={value}"]
        _run([*build, "--label", f"{ADDS_LABEL}={json.dumps(adds)}", "-t", tag, str(context)])
        if derivation.apt:  # now that they are installed: their versions, in a label-only build
            adds["apt"] = apt_versions(tag, derivation.apt)
            (context / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\n")
            _run(
                [
                    "docker", "build", "--build-arg", f"BASE={tag}",
                    "--label", f"{ADDS_LABEL}={json.dumps(adds)}", "-t", tag, str(context),
                ]
            )  # fmt: skip
    return tag
