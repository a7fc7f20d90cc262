"""The languages boxed runs: one registry of names, versions and commands.

Python runs in the supervisor's own child (``guest/runner.py``); the others are programs the
child execs instead: bash reads its script from a file, C and C++ are first compiled by a
*compile step* (its own limits) whose output becomes the program of the runs that follow.
Everything runs in the sandbox; the commands are the sandbox image's (Debian bookworm).
"""

from __future__ import annotations

from dataclasses import dataclass

# Where the guest installs a compiled program (root's, 0755: runnable, not replaceable; see
# guest/supervisor.py) and the name of the compiler's output in the run directory.
PROGRAM_DIR = "/box"
PROGRAM = "prog"
# The image's precompiled bits/stdc++.h (docker/sandbox/Dockerfile: CPP_PCH_DIR), built for
# exactly CPP_PCH_FLAGS, the C++ compile's own language and optimization flags.
CPP_PCH_DIR = "/opt/boxed/pch"
CPP_PCH_FLAGS = ("-std=c++17", "-O2")


@dataclass(frozen=True)
class Language:
    """One language: how its code is compiled (if at all) and run inside the sandbox."""

    name: str
    aliases: tuple[str, ...]
    version: str
    source: str | None  # the file the code is written to (None: Python, run in-process)
    compile: tuple[str, ...] | None  # the compile command, in the run directory
    run: tuple[str, ...]  # the command of each run ("python": how python -c would run it)
    pch_dir: str | None = None  # an include directory of precompiled headers for ``compile``

    @property
    def compiled(self) -> bool:
        return self.compile is not None

    def compile_argv(self, pch: bool) -> tuple[str, ...]:
        """The compile command; with ``pch``, the precompiled headers' directory is searched
        first (g++ uses a header's ``.gch`` there only when it is valid for the compile, else
        goes on to the header itself: the program means the same either way)."""
        assert self.compile is not None
        if not pch or self.pch_dir is None:
            return self.compile
        return (self.compile[0], "-I", self.pch_dir, *self.compile[1:])

    def describe(self) -> dict[str, object]:
        """What ``GET /languages`` says about it."""
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "version": self.version,
            "source_file": self.source,
            "compile_command": " ".join(self.compile) if self.compile else None,
            "run_command": " ".join(self.run),
        }


GCC = "12.2.0"  # Debian bookworm's gcc/g++ (the Dockerfile's GCC_VERSION, checked at build)
LANGUAGES = (
    Language("python", ("python3", "py"), "3.11.2", None, None, ("python3", "-c", "<code>")),
    Language(
        "c",
        ("gcc",),
        f"gcc {GCC} (C17)",
        "main.c",
        ("/usr/bin/gcc", "-std=gnu17", "-O2", "-pipe", "-o", PROGRAM, "main.c", "-lm"),
        (f"{PROGRAM_DIR}/{PROGRAM}",),
    ),
    Language(
        "cpp",
        ("c++", "cxx", "g++", "cpp17"),
        f"g++ {GCC} (C++17)",
        "main.cpp",
        ("/usr/bin/g++", *CPP_PCH_FLAGS, "-pipe", "-o", PROGRAM, "main.cpp"),
        (f"{PROGRAM_DIR}/{PROGRAM}",),
        pch_dir=CPP_PCH_DIR,
    ),
    Language("bash", ("sh", "shell"), "5.2.15", "main.sh", None, ("/bin/bash", "main.sh")),
)
BY_NAME = {lang.name: lang for lang in LANGUAGES}
SPELLINGS = {spelling: lang.name for lang in LANGUAGES for spelling in (lang.name, *lang.aliases)}
"""Accepted spellings (any case) of each supported language, to its one name."""


def get(name: str) -> Language:
    """The language of a normalized name (the request models normalize spellings)."""
    return BY_NAME[name]


def normalize(value: str) -> str | None:
    """The one name of a spelling (any case), or None when no language is spelled so."""
    return SPELLINGS.get(value.strip().lower())
