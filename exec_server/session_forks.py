"""Forks of a session (``POST /sessions/{id}/fork``): the sandbox side.

A fork is a new session whose interpreter is a copy of its parent's (``fork``), made in the
parent's container by the session program (``guest/forks.py``: its own host uid through a user
namespace, its own copy of the working directory). A new container per fork could not copy a
running interpreter's memory in tens of milliseconds; the price is what the members of one
container share: its cgroup (memory and pids, sized for ``max_forks`` more interpreters), its
CPU quota, its /tmp and the one stream to its session program, so their calls run one at a
time (``Family.lock``).

Every member is a ``SessionSandbox`` of its own (``MemberSandbox``): its calls, verdicts and
``ended`` are its own; discarding one ends its interpreter only, and the container goes when
the last member does (deleting a parent leaves its forks running).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from .backends.base import Job, SandboxError, SessionSandbox
from .backends.supervised import SupervisedSandbox
from .guest.protocol import FileReport, FileRequest
from .verdict import Observation


class ForkRefused(Exception):
    """The session could not be forked by its own state (409): made without forks, every
    fork taken, threads left running, the nesting limit, an interpreter that did not play
    its part."""


class Family:
    """A session's container shared by its first interpreter and its forks: one request at a
    time on its stream, removed with its last member."""

    def __init__(self, sandbox: SupervisedSandbox) -> None:
        self.sandbox = sandbox
        self.lock = asyncio.Lock()
        self.members: set[int] = {0}


class MemberSandbox:
    """One interpreter of a family, as the session that holds it sees its sandbox."""

    def __init__(self, family: Family, member: int) -> None:
        self.family, self.member = family, member
        self.id = family.sandbox.id  # the container's: spared by the reaper while one is open
        self.memory_mb = family.sandbox.memory_mb
        self.ended = False

    async def run(self, job: Job) -> Observation:
        async with self.family.lock:
            sandbox = self.family.sandbox
            sandbox.ended = False  # the container's flag speaks of this call's interpreter only
            try:
                return await sandbox.run(job, member=self.member)
            finally:
                self.ended = sandbox.ended

    def is_alive(self) -> bool:
        return self.family.sandbox.is_alive()

    async def file_request(
        self, request: FileRequest, data: bytes = b""
    ) -> tuple[FileReport, bytes]:
        """A file request on this member's own working directory, with its own uid."""
        async with self.family.lock:
            return await self.family.sandbox.file_request(
                replace(request, member=self.member), data
            )

    async def discard(self) -> bool:
        """End this interpreter; the container goes with the last one."""
        family = self.family
        async with family.lock:
            family.members.discard(self.member)
            if family.members:
                if family.sandbox.is_alive():
                    try:
                        await family.sandbox.member_request("end", self.member)
                    except SandboxError:
                        pass  # its other members find the container broken on their next call
                return True
        return await family.sandbox.discard()


async def fork(sandbox: SessionSandbox) -> tuple[MemberSandbox, MemberSandbox]:
    """Fork the interpreter of ``sandbox``: (the parent's sandbox from now on, the fork's).
    Raises ForkRefused (the session's doing: 409) or SandboxError (the container's)."""
    if isinstance(sandbox, MemberSandbox):
        parent = sandbox
    elif isinstance(sandbox, SupervisedSandbox):
        parent = MemberSandbox(Family(sandbox), 0)
    else:
        raise ForkRefused("sessions of this backend cannot fork")
    family = parent.family
    async with family.lock:
        report = await family.sandbox.member_request("fork", parent.member)
    if report.refused is not None:
        raise ForkRefused(f"the session cannot fork: {report.refused}")
    family.members.add(report.member)
    return parent, MemberSandbox(family, report.member)
