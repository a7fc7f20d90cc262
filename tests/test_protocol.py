"""The wire between host and guest as types (``guest/protocol.py``): every message round-trips
through JSON, a key too many, a missing one, a value of another type or another protocol
version is refused, and what the host builds is what the guest reads."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from typing import Any

import pytest

from exec_server.backends.base import Job, SessionSpec
from exec_server.backends.supervised import Preload, SupervisedSandbox, supervisor_config
from exec_server.guest import bootstrap_source, module_sources, packed_sources
from exec_server.guest.protocol import (
    VERSION,
    Anomaly,
    CleanupVerdict,
    FetchedFile,
    GuestConfig,
    Message,
    ProtocolError,
    RunReport,
    RunRequest,
    SessionLimits,
    Skipped,
    ZygoteLink,
    read_result,
    unpack_sources,
)
from exec_server.settings import Settings
from exec_server.verdict import RunLimits

CONFIG = GuestConfig(
    uid=10001,
    gid=10002,
    harness_uid=10003,
    harness_gid=10004,
    output_cap=65536,
    nofile=64,
    fsize=1 << 20,
    cpus=1.5,
    nproc=None,
    preload=["sympy"],
    preload_at_start=True,
    reuse=True,
    bootstrap="print()",
    env=["PATH=/usr/bin", "LANG=C.UTF-8"],
    session=SessionLimits(memory_mb=512, cpu_budget=30.0),
    zygote=ZygoteLink(socket=5, report=6, heavy=True),
)
REPORT = RunReport(
    exit_code=137,
    signal=9,
    killed_for="wall",
    started=True,
    memory_error=False,
    oom_killed=False,
    duration_ms=12.5,
    cpu_ms=None,
    max_rss_kb=9000,
    strays=1,
    installed=True,
    fetched_files=[FetchedFile("out.txt", "ok", 3), FetchedFile("p/maps", "refused: a link")],
)
MESSAGES: list[Message] = [
    CONFIG,
    RunRequest(wall=1.0, cpu=2.0, memory_mb=256, heavy=False, last=True, argv=["/bin/x"]),
    REPORT,
    Skipped(),
    Anomaly("supervisor failed: OSError()"),
    CleanupVerdict(clean=False, problems=["/tmp not empty"], memory_grown_kb=3),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_through_json(message: Message) -> None:
    assert type(message).from_json(message.to_json()) == message
    assert set(json.loads(message.to_json())) == {f.name for f in dataclasses.fields(message)}


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_key_too_many_or_missing_is_refused(message: Message) -> None:
    wire = message.to_wire()
    with pytest.raises(ProtocolError, match=r"unknown keys \['fetched'\]"):
        type(message).from_wire({**wire, "fetched": {}})
    name = next(iter(wire))
    del wire[name]
    with pytest.raises(ProtocolError, match=rf"missing keys \['{name}'\]"):
        type(message).from_wire(wire)


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"uid": "10001"}, "GuestConfig.uid: expected int"),
        ({"uid": True}, "GuestConfig.uid: expected int"),
        ({"preload": "sympy"}, "GuestConfig.preload: expected a list"),
        ({"preload": [1]}, "GuestConfig.preload: expected str"),
        (
            {"session": {"memory_mb": 512, "fork_uids": []}},
            r"SessionLimits: .*missing keys \['cpu_budget'\]",
        ),
        ({"nproc": 1.5}, "GuestConfig.nproc: expected int"),
    ],
)
def test_a_value_of_another_type_is_refused(changes: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ProtocolError, match=fragment):
        GuestConfig.from_wire({**CONFIG.to_wire(), **changes})


def test_an_int_is_read_where_a_float_is_meant_and_uid_gid_are_ints() -> None:
    config = GuestConfig.from_wire({**CONFIG.to_wire(), "cpus": 2})
    assert config.cpus == 2.0 and isinstance(config.cpus, float)
    assert (config.uid, config.gid) == (10001, 10002)


@pytest.mark.parametrize("version", [None, 0, VERSION + 1, "1"])
def test_a_configuration_of_another_version_is_refused_with_a_clear_message(
    version: object,
) -> None:
    wire = {**CONFIG.to_wire(), "version": version}
    if version is None:
        del wire["version"]
    with pytest.raises(ProtocolError, match=f"host speaks protocol version {version!r}"):
        GuestConfig.from_wire(wire)


def test_a_result_frame_is_one_of_three_records() -> None:
    assert read_result(REPORT.to_json()) == REPORT
    assert read_result(b'{"skipped": true}') == Skipped()
    assert read_result(b'{"anomaly": "x"}') == Anomaly("x")
    with pytest.raises(ProtocolError, match="missing keys"):
        read_result(b'{"exit_code": 0}')
    with pytest.raises(ProtocolError, match="expected an object"):
        read_result(b"[1]")


@pytest.mark.parametrize(
    "session", [None, SessionSpec(memory_mb=300, cpu_budget=12.0, session_id="s1")]
)
def test_the_hosts_configuration_is_what_the_guest_reads(session: SessionSpec | None) -> None:
    settings = Settings(harness_user="10003:10004")
    config = supervisor_config(
        settings,
        reuse=True,
        nproc=None,
        preload_at_start=False,
        user=(10001, 10002),
        session=session,
    )
    read = GuestConfig.from_wire(json.loads(json.dumps(config.to_wire())))
    assert read == config and (read.uid, read.gid) == (10001, 10002)
    assert (read.harness_uid, read.harness_gid) == (10003, 10004)
    assert read.program == ("session" if session else "supervisor")
    assert read.preload == ([] if session else list(settings.preload_modules))
    if session is not None:
        assert read.session == SessionLimits(memory_mb=300, cpu_budget=12.0)


def test_the_hosts_request_header_is_what_the_guest_reads() -> None:
    class Silent:  # the request is only built here, never sent
        pass

    sandbox = SupervisedSandbox(
        "f" * 64, Silent(), 256, reusable=True, max_runs=5, preload=Preload(available=True)
    )  # type: ignore[arg-type]
    job = Job(
        code="import numpy",
        stdin="",
        limits=RunLimits(2, 3, 256, 65536),
        files=(("a.txt", b"abc"),),
        fetch=("out.txt",),
        fetch_bytes=100,
        more=True,
    )
    data = sandbox._request(job, following=2)
    size = int.from_bytes(data[:4], "big")
    header = RunRequest.from_json(data[4 : 4 + size])
    assert header == RunRequest(
        wall=2.0,
        cpu=3.0,
        memory_mb=256,
        heavy=True,
        last=False,
        keep=True,
        then=2,
        files=True,
        fetch=["out.txt"],
        fetch_cap=100,
        preload=True,  # this snippet needs the preload modules: they are recent from now on
        size=len(data) - 4 - size,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": VERSION + 1}, f"host speaks protocol version {VERSION + 1}, this guest"),
        ({"uid": None}, "missing keys \\['uid'\\]"),
        ({"fetched": {}}, "unknown keys \\['fetched'\\]"),
    ],
)
def test_a_guest_started_with_another_configuration_refuses_to_start(
    change: dict[str, Any], message: str
) -> None:
    """The bootstrap a sandbox runs (as the Docker backends start it) reads its configuration
    through the protocol before anything else: it fails loudly, on its stderr, which the host
    quotes in the warm-up error."""
    wire = {**CONFIG.to_wire(), "zygote": None, **change}
    wire = {key: value for key, value in wire.items() if value is not None or key != "uid"}
    proc = subprocess.run(
        [sys.executable, "-I", "-c", bootstrap_source(), packed_sources()] + [json.dumps(wire)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.rstrip().splitlines()[-1].startswith("boxed_guest.protocol.ProtocolError")
    assert re.search(message, proc.stderr), proc.stderr


@pytest.mark.parametrize("program", ["supervisor", "session"])
def test_the_guests_sources_fit_one_command_line_argument_with_room_to_grow(program: str) -> None:
    """The Docker backends pass the sources a program needs as one argument of the container's
    command, and ``execve`` refuses an argument over 128 KiB (``MAX_ARG_STRLEN``): every
    container would fail to start. Packed, they must stay under half of that."""
    packed = packed_sources(program)
    assert len(packed) < 128 * 1024 // 2, len(packed)
    assert unpack_sources(packed) == module_sources(program)
    assert len(json.dumps(module_sources(program))) > len(packed)  # the packing makes room
    assert program in module_sources(program) and "zygote" in module_sources(program)
    # test scripts are judged by the one-shot supervisor's zygotes only
    assert ("harness" in module_sources(program)) == (program == "supervisor")
