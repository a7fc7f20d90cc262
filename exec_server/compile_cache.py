"""The compile cache: compiled C and C++ programs kept by the service, so that identical
submissions (a GRPO group's, or one program that verl sends once per test) compile once.

An entry is keyed by everything a compile's output depends on that the service knows: the
compile command (compiler, flags, the precompiled-header directory when it is searched), the
compiler's version, the sandbox image's id, the compile step's limits, the source and the
request's input files (the code may include them). It holds the program's bytes, their
SHA-256 taken when it was stored (checked again before a binary is handed out: a changed entry
is dropped, never installed) and what the compiler printed (answered again on a hit).

Entries come only from compiles that ended by themselves, alone, in a sandbox proven clean
before the compile and again after it (``runs.Runs`` stores an entry only once the clean-up
after the compile passed); a failed compile is never stored. The cache lives in the service's
memory, out of every sandbox's reach, bounded in bytes (``BOXED_COMPILE_CACHE_MB``), least
recently used first out.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from . import metrics
from .verdict import RunLimits

log = logging.getLogger("boxed.compile_cache")
ENTRY_MAX_BYTES = 16 * 1024 * 1024  # a larger program is compiled every time, never kept
KEY_VERSION = b"boxed-compile-cache-1"  # change it when what goes into a key changes


@dataclass(frozen=True)
class CachedProgram:
    """One compiled program and what its compile printed."""

    binary: bytes
    sha256: str  # of ``binary`` when it was stored
    stdout: bytes
    stderr: bytes

    @classmethod
    def of(cls, binary: bytes, stdout: bytes, stderr: bytes) -> CachedProgram:
        """An entry for ``binary``, hashed now."""
        return cls(binary, hashlib.sha256(binary).hexdigest(), stdout, stderr)

    @property
    def size(self) -> int:
        return len(self.binary) + len(self.stdout) + len(self.stderr)

    def intact(self) -> bool:
        """Whether ``binary`` still has the hash it was stored with."""
        return hashlib.sha256(self.binary).hexdigest() == self.sha256


def program_key(
    *,
    argv: Iterable[str],
    version: str,
    image: str,
    limits: RunLimits,
    source: str,
    files: Iterable[tuple[str, bytes]] = (),
) -> str:
    """The cache key of a compile: a SHA-256 over each part, every part length-prefixed (no
    two different compiles can spell the same byte string)."""
    digest = hashlib.sha256(KEY_VERSION)

    def part(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)

    for arg in argv:
        part(b"argv:" + arg.encode())
    part(b"version:" + version.encode())
    part(b"image:" + image.encode())
    part(b"limits:" + repr(limits).encode())
    part(b"source:" + source.encode())
    for name, data in sorted(files):
        part(b"file:" + name.encode())
        part(data)
    return digest.hexdigest()


class CompileCache:
    """Compiled programs by ``program_key``, at most ``max_bytes`` in all (LRU)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, CachedProgram] = OrderedDict()
        self.sizes: dict[str, int] = {}  # as stored: what an entry takes, whatever it holds now
        self.bytes_used = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def entry_max_bytes(self) -> int:
        """The largest program kept (what a compile fetches back for the cache)."""
        return min(ENTRY_MAX_BYTES, self.max_bytes)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> CachedProgram | None:
        """The program stored under ``key`` when its bytes still hash as stored, else None
        (a changed entry is dropped)."""
        entry = self.entries.get(key)
        if entry is None:
            metrics.count_compile_cache("miss")
            return None
        if not entry.intact():
            log.warning("compile cache entry %s changed since it was stored: dropped", key[:16])
            self._drop(key)
            metrics.count_compile_cache("rejected")
            return None
        self.entries.move_to_end(key)
        metrics.count_compile_cache("hit")
        return entry

    def put(self, key: str, program: CachedProgram) -> bool:
        """Keep a program a clean compile made (evicting the least recently used ones);
        whether it was kept (one larger than ``entry_max_bytes`` is not)."""
        if not program.binary or len(program.binary) > self.entry_max_bytes:
            return False
        if program.size > self.max_bytes or not program.intact():
            return False
        self._drop(key)
        while self.entries and self.bytes_used + program.size > self.max_bytes:
            self._drop(next(iter(self.entries)))
        self.entries[key] = program
        self.sizes[key] = program.size
        self.bytes_used += program.size
        metrics.count_compile_cache("stored")
        return True

    def _drop(self, key: str) -> None:
        if self.entries.pop(key, None) is not None:
            self.bytes_used -= self.sizes.pop(key)
