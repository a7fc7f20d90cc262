"""The seccomp profile of a forkable session's container: the sandboxes' profile plus user
namespaces, and nothing more.

A session's fork gets a host uid of its own through user namespaces (``guest/forks.py``): the
interpreter and its fork each ``unshare(CLONE_NEWUSER)``, and PID 1 enters a namespace's parent
(``setns(fd, CLONE_NEWUSER)``) to write the maps of a fork's fork. The sandboxes' profile
(Docker's default, ``seccomp.json``) refuses both without CAP_SYS_ADMIN, so this profile allows
exactly those two calls with exactly that flag: no other namespace (mount, network, pid...) can
be made, ``clone`` still refuses every namespace flag, and ``mount`` stays refused. The price:
code in such a container can make user namespaces of its own, which own no other namespace and
map only its own uid; the kernel code reachable as "root in a user namespace that owns nothing"
is the attack surface added (docs/sessions.md, "Forks").
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

CLONE_NEWUSER = 0x10000000
SANDBOX_PROFILE = Path(__file__).parent / "seccomp.json"


def _exactly_newuser(name: str, index: int) -> dict[str, Any]:
    return {
        "names": [name],
        "action": "SCMP_ACT_ALLOW",
        "args": [{"index": index, "value": CLONE_NEWUSER, "valueTwo": 0, "op": "SCMP_CMP_EQ"}],
        "comment": "boxed session forks: user namespaces only",
        "includes": {},
        "excludes": {},
    }


@cache
def session_profile() -> str:
    """The profile as Docker's ``security_opt`` takes it (JSON text)."""
    profile = json.loads(SANDBOX_PROFILE.read_text())
    profile["syscalls"] += [_exactly_newuser("unshare", 0), _exactly_newuser("setns", 1)]
    return json.dumps(profile)
