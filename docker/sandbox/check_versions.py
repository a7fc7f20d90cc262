"""Build checks of the sandbox image, so that it never holds other versions than it declares.

``check_versions.py dependencies REQUIREMENTS`` (in the stage that ran pip, which has pip):
every dependency of a pinned package is pinned too, at a version it accepts (pip ran with
``--no-deps``, so nothing unpinned comes in).

``check_versions.py versions PYTHON_VERSION PACKAGES_JSON REQUIREMENTS`` (in the final image:
it checks what ``import`` will find): the interpreter and the installed packages are exactly
the ones the image's labels declare and the requirements file pins; prints them as JSON (kept
as /etc/boxed-sandbox.json).
"""

import json
import platform
import re
import sys
from importlib.metadata import PackageNotFoundError, requires, version


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: str) -> dict[str, str]:
    found = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if line:
                name, sep, pinned = line.partition("==")
                if not sep:
                    sys.exit(f"{path}: {line!r} is not pinned as name==version")
                found[canonical(name)] = pinned.strip()
    return found


def dependencies(requirements: str) -> list[str]:
    from pip._vendor.packaging.requirements import Requirement

    pinned = pins(requirements)
    problems = []
    for name in pinned:
        for spec in requires(name) or []:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra's or another platform's dependency
            got = pinned.get(canonical(req.name))
            if got is None or got not in req.specifier:
                problems.append(f"{name} needs {req}, pinned: {got}")
    return problems


def versions(python: str, packages_json: str, requirements: str) -> list[str]:
    labels = {canonical(k): v for k, v in json.loads(packages_json).items()}
    pinned = pins(requirements)
    problems = []
    if labels != pinned:
        problems.append(f"the PACKAGES label {labels} differs from {requirements} {pinned}")
    if platform.python_version() != python:
        problems.append(f"python is {platform.python_version()}, the label says {python}")
    installed = {}
    for name in pinned:
        try:
            installed[name] = version(name)
        except PackageNotFoundError:
            installed[name] = None
    if installed != pinned:
        problems.append(f"installed {installed}, pinned {pinned}")
    if not problems:
        report = {"python": platform.python_version(), "packages": installed}
        print(json.dumps(report, sort_keys=True))
    return problems


if __name__ == "__main__":
    check = {"dependencies": dependencies, "versions": versions}[sys.argv[1]]
    problems = check(*sys.argv[2:])
    if problems:
        sys.exit("sandbox image: " + "; ".join(problems))
