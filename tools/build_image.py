"""Build the images: with a registry (the default) or fully offline from Debian packages.

Offline, the base root filesystem comes from ``debootstrap`` (Debian's package mirror is the
only network it needs) and is loaded with ``docker import``; the Dockerfiles then build on it
with ``--network host`` and install Python packages only from wheels already on disk.

Both ways, the sandbox gets Debian bookworm's Python 3.11 and the packages pinned in
``docker/sandbox/requirements.txt``, recorded in the image's labels (read back by
:mod:`exec_server.image_labels`).

Run from a source checkout (it needs the ``docker/`` folder beside it; it is not part of the
installed package): ``python -m tools.build_image [--offline] [--if-stale] [--server] [--base B]
[--tag T]``. ``--if-stale`` builds only when the image is missing or its labels differ from what
the Dockerfile declares (an image from before a toolchain or a pin changed); offline, a base
made from another package list is made again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

DOCKER_DIR = Path(__file__).resolve().parent.parent / "docker"
OFFLINE_BASE = "boxed-base:bookworm"
DEBIAN_MIRROR = os.environ.get("BOXED_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# The sandbox's Python packages come from pinned wheels (docker/sandbox/requirements.txt), not
# from Debian: its python3-sympy and python3-numpy are older than what an online build gets.
# gcc/g++ (and libc6-dev, which g++ pulls in only through libstdc++'s headers) compile the C
# and C++ submissions of /judge and /execute inside the sandbox.
BASE_PACKAGES = ["python3", "python3-pip", "ca-certificates", "gcc", "g++", "libc6-dev"]
# Trimmed from the root filesystem: caches and documentation nobody in a sandbox reads.
_PRUNE = ["var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info"]


def _run(cmd: list[str], **kwargs: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # noqa: S603 - fixed argument lists


def image_exists(tag: str) -> bool:
    result = subprocess.run(["docker", "image", "inspect", tag], capture_output=True)
    return result.returncode == 0


def image_labels(tag: str) -> dict[str, str] | None:
    """The image's labels ({} when it has none), or None when there is no such image."""
    result = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", tag],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        return None
    return json.loads(result.stdout or "null") or {}


BASE_LABEL = "boxed.base_packages"


def base_is_current(tag: str = OFFLINE_BASE) -> bool:
    """Whether the offline base exists and was made from today's ``BASE_PACKAGES``."""
    labels = image_labels(tag)
    return labels is not None and labels.get(BASE_LABEL) == ",".join(BASE_PACKAGES)


def build_offline_base(
    tag: str = OFFLINE_BASE, suite: str = "bookworm", mirror: str = DEBIAN_MIRROR
) -> str:
    """debootstrap a minimal Debian with Python, pip and the C/C++ toolchain, and
    ``docker import`` it."""
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed (apt-get install -y debootstrap)")
    with tempfile.TemporaryDirectory(prefix="boxed-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                suite,
                str(root),
                mirror,
            ]
        )
        for sub in _PRUNE:
            shutil.rmtree(root / sub, ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        _run(
            [
                "docker",
                "import",
                "--change",
                'CMD ["python3"]',
                "--change",
                f"LABEL {BASE_LABEL}={','.join(BASE_PACKAGES)}",
                "-",
                tag,
            ],  # fmt: skip
            stdin=tar.stdout,
        )
        if tar.wait() != 0:
            raise RuntimeError("tar of the root filesystem failed")
    return tag


def build(
    name: str, tag: str, *, base: str | None = None, build_args: dict[str, str] | None = None
) -> str:
    """``docker build`` one of the images under ``docker/`` (``sandbox`` or ``server``)."""
    context = DOCKER_DIR.parent if name == "server" else DOCKER_DIR / name
    cmd = ["docker", "build", "--network", "host", "-t", tag]
    cmd += ["-f", str(DOCKER_DIR / name / "Dockerfile")]
    args = dict(build_args or {})
    if base:
        args["BASE"] = base
    for key, value in args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    _run([*cmd, str(context)])
    return tag


SANDBOX_DIR = DOCKER_DIR / "sandbox"
SANDBOX_REQUIREMENTS = SANDBOX_DIR / "requirements.txt"
SANDBOX_WHEELS_DIR = SANDBOX_DIR / "wheels"
SANDBOX_PYTHON = "3.11"  # Debian bookworm's python3, online and offline


def sandbox_pins(path: Path = SANDBOX_REQUIREMENTS) -> dict[str, str]:
    """The sandbox's pinned packages, ``{name: version}``, from its requirements file."""
    pins = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                raise ValueError(f"{path}: {line!r} is not pinned as name==version")
            pins[name.strip()] = version.strip()
    return pins


def download_sandbox_wheels() -> Path:
    """Fetch on this host the wheels of the sandbox's pinned packages, for the offline build
    (manylinux wheels for the image's Python, whatever Python runs here)."""
    machine = platform.machine()
    SANDBOX_WHEELS_DIR.mkdir(parents=True, exist_ok=True)
    _run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
            "--python-version", SANDBOX_PYTHON, "--implementation", "cp",
            "--platform", f"manylinux2014_{machine}", "--platform", f"manylinux_2_28_{machine}",
            "-d", str(SANDBOX_WHEELS_DIR), "-r", str(SANDBOX_REQUIREMENTS),
        ]
    )  # fmt: skip
    return SANDBOX_WHEELS_DIR


def dockerfile_labels() -> dict[str, str]:
    """The labels the sandbox Dockerfile gives its image (from its ``ARG`` defaults)."""
    text = (SANDBOX_DIR / "Dockerfile").read_text()
    args = {k: v.strip("'") for k, v in re.findall(r"^ARG (\w+)=(.*)$", text, re.MULTILINE)}
    return {
        "boxed.python": args["PYTHON_VERSION"],
        "boxed.packages": args["PACKAGES"],
        "boxed.gcc": args["GCC_VERSION"],
    }


def sandbox_is_current(tag: str) -> bool:
    """Whether the image exists with the labels today's Dockerfile would give it."""
    labels = image_labels(tag)
    if labels is None:
        return False
    wanted = dockerfile_labels()
    try:
        same_packages = json.loads(labels.get("boxed.packages", "null")) == json.loads(
            wanted["boxed.packages"]
        )
    except ValueError:
        return False
    return same_packages and all(labels.get(k) == wanted[k] for k in ("boxed.python", "boxed.gcc"))


STAGE_LABEL = "boxed.stage=sandbox-packages"  # the Dockerfile's pip stage


def stage_images() -> set[str]:
    """The untagged pip-stage images the classic builder keeps (about 600 MB each)."""
    out = subprocess.run(
        ["docker", "image", "ls", "-q", "--filter", f"label={STAGE_LABEL}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def build_sandbox_image(
    tag: str,
    *,
    offline: bool = False,
    base: str | None = None,
    base_tag: str = OFFLINE_BASE,
    keep_stage: bool = False,
) -> str:
    """Build the sandbox image; offline, make the Debian base (``base_tag``) first when it is
    missing or was made from another package list, and download the pinned wheels on this
    host. The pip stage's image this build made is removed unless ``keep_stage`` (those of
    other builds, other users' included, are left alone)."""
    if offline:
        if base is None:
            base = base_tag
            if not base_is_current(base):
                build_offline_base(base)
        download_sandbox_wheels()
    before = stage_images()
    build("sandbox", tag, base=base)
    if not keep_stage:
        for made in sorted(stage_images() - before):
            _run(["docker", "image", "rm", made])
    return tag


SERVER_IMAGE = "boxed-server:latest"
WHEELS_DIR = DOCKER_DIR / "server" / "wheels"


def download_wheels(python_version: str = "3.11") -> Path:
    """Fetch wheels of the service's dependencies on this host, for an image built offline."""
    project = tomllib.loads((DOCKER_DIR.parent / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], "setuptools>=68", "wheel"]
    WHEELS_DIR.mkdir(parents=True, exist_ok=True)
    _run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
            "--python-version", python_version, "-d", str(WHEELS_DIR), *requirements,
        ]
    )  # fmt: skip
    return WHEELS_DIR


def build_server_image(
    tag: str = SERVER_IMAGE, *, offline: bool = False, base: str | None = None
) -> str:
    """Build the service image; offline, on the Debian base with wheels from this host."""
    if offline:
        base = base or OFFLINE_BASE
        if not image_exists(base):
            build_offline_base(base)
        download_wheels()
    return build("server", tag, base=base)


EXAMPLES = """examples:
  python -m tools.build_image --offline              # no registry: base from Debian packages
  python -m tools.build_image --offline --if-stale   # only when missing or out of date
  python -m tools.build_image --offline --server     # the service image too, for compose
  python -m tools.build_image --offline --base-tag my-base:bookworm --tag my-sandbox:dev
  python -m tools.build_image --derive geo --pip shapely==2.0.6 --apt libgeos-c1v5
      # an operator image boxed-derived:geo on the sandbox image; list it in BOXED_IMAGES

docs/sandbox-image.md has the details (what is in the image, adding a package)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.build_image",
        description="Build boxed's sandbox image (and with --server the service image):\n"
        "with a registry, or with --offline from Debian packages and wheels downloaded here.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="no registry: make the base with debootstrap and docker import (needs "
        "debootstrap and Debian's mirror), install Python packages from wheels downloaded here",
    )
    parser.add_argument(
        "--base",
        default=None,
        help="build on this existing image instead (build argument BASE); default: "
        "debian:bookworm-slim online, the offline base with --offline",
    )
    parser.add_argument(
        "--base-tag",
        default=OFFLINE_BASE,
        help=f"--offline: the tag the Debian base is made under and looked for (default "
        f"{OFFLINE_BASE}); another tag builds a second base beside a shared one",
    )
    parser.add_argument(
        "--tag",
        default=None,
        help="the sandbox image's tag (default: BOXED_SANDBOX_IMAGE, boxed-sandbox:latest)",
    )
    parser.add_argument("--server", action="store_true", help=f"also build {SERVER_IMAGE}")
    derive = parser.add_argument_group(
        "operator images", "--derive NAME builds one on the sandbox image (tools/derive_image.py)"
    )
    derive.add_argument(
        "--derive",
        metavar="NAME",
        help="build the operator image NAME (tag: --tag, default boxed-derived:NAME)",
    )
    derive.add_argument(
        "--from",
        dest="derive_from",
        default=None,
        help="--derive: the image to start from (default: BOXED_SANDBOX_IMAGE)",
    )
    derive.add_argument(
        "--pip",
        action="append",
        default=[],
        metavar="PKG",
        help="--derive: a wheel file, or a requirement downloaded here with its dependencies",
    )
    derive.add_argument(
        "--apt", action="append", default=[], metavar="PKG", help="--derive: a Debian package"
    )
    derive.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="SRC:DEST",
        help="--derive: copy the file SRC to the absolute path DEST (mode kept)",
    )
    parser.add_argument(
        "--if-stale",
        action="store_true",
        help="build only when the image is missing or its labels differ from the Dockerfile's",
    )
    parser.add_argument(
        "--keep-stage",
        action="store_true",
        help="keep this build's untagged pip-stage image (about 600 MB) as a build cache",
    )
    args = parser.parse_args(argv)
    from exec_server.settings import Settings

    if args.derive:
        from tools.derive_image import Derivation, derive

        files = [(Path(src), dest) for src, _, dest in (f.rpartition(":") for f in args.file)]
        base = args.derive_from or Settings().sandbox_image
        derivation = Derivation(args.derive, base, args.pip, args.apt, files)
        print(f"built {derive(derivation, args.tag)}")
        return 0
    tag = args.tag or Settings().sandbox_image
    base_options = {"offline": args.offline, "base": args.base}
    if args.if_stale and sandbox_is_current(tag):
        print(f"{tag} is current")
    else:
        build_sandbox_image(tag, **base_options, base_tag=args.base_tag, keep_stage=args.keep_stage)
        print(f"built {tag}")
    if args.server:
        server_base = args.base or (args.base_tag if args.offline else None)
        print(f"built {build_server_image(offline=args.offline, base=server_base)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
