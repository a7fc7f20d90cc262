"""Operator images: the allow-list, the filesystem check, and derived images on a real engine.

Unit tests (no Docker) cover the allow-list's format and refusals, the tar scan (device nodes
outside /dev, hard links to them, set-uid files), its cache, and the engine's routing and
refusals over the fake backend. The Docker tests build one derived image with
``tools.derive_image`` (a wheel made here, no network, and a file) plus a set-uid root binary
on it, once per session, and run a service that lists them.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import tarfile
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from boxed_client import AsyncClient, Client
from exec_server.app import Executor
from exec_server.image_scan import ImageScan, ScanCache, scan_tar
from exec_server.images import DEFAULT, MAX_IMAGE_POOL, ImageSet, allow_list
from exec_server.models import ExecuteRequest, SessionCreateRequest
from exec_server.request_errors import RequestError, ServiceUnavailable
from exec_server.settings import Settings
from tests.conftest import IMAGE, ServiceProcess, instance_containers, running_service
from tools.build_image import main as build_image_main
from tools.derive_image import Derivation, derive

# -- the allow-list --------------------------------------------------------------------------


def test_default_is_always_listed_as_the_sandbox_image() -> None:
    specs = allow_list(Settings(sandbox_image="my-sandbox:1"))
    assert list(specs) == [DEFAULT]
    assert specs[DEFAULT].image == "my-sandbox:1"


def test_entries_are_a_reference_or_an_object_with_limits(tmp_path: Path) -> None:
    more = tmp_path / "images.json"
    more.write_text(json.dumps({"geo": {"image": "geo:2", "memory_mb_max": 512, "pool_size": 1}}))
    settings = Settings(images={"tools": "tools:1"}, images_file=str(more), memory_mb_max=1024)
    images = ImageSet(settings)
    assert [i.name for i in images] == [DEFAULT, "tools", "geo"]
    geo = images.named("geo")
    assert (geo.settings.sandbox_image, geo.settings.memory_mb_max, geo.spec.pool_size) == (
        "geo:2",
        512,
        1,
    )
    assert geo.settings.memory_mb_default == 256  # the server's, under the image's maximum
    assert images.named("tools").settings.memory_mb_max == 1024  # unset: the server's
    assert images.named(None).name == DEFAULT


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ({"default": "x:1"}, "BOXED_SANDBOX_IMAGE"),
        ({"Bad Name": "x:1"}, "lower-case"),
        ({"x": {"image": "x:1", "memory_mb_max": 4096}}, "exceeds BOXED_MEMORY_MB_MAX"),
        ({"x": {"image": "x:1", "timeout_max": 999}}, "exceeds BOXED_TIMEOUT_MAX"),
        ({"x": {"image": "x:1", "pool_size": MAX_IMAGE_POOL + 1}}, "less than or equal"),
        ({"x": {"image": "x:1", "privileged": True}}, "Extra inputs"),
        ({"x": {}}, "Field required"),
    ],
)
def test_a_bad_entry_stops_the_start_saying_why(images: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        allow_list(Settings(images=images))


def test_the_same_name_in_the_variable_and_the_file_is_refused(tmp_path: Path) -> None:
    more = tmp_path / "images.json"
    more.write_text(json.dumps({"x": "x:2"}))
    with pytest.raises(ValueError, match="in both"):
        allow_list(Settings(images={"x": "x:1"}, images_file=str(more)))


def test_a_name_off_the_list_is_a_422_naming_the_list() -> None:
    images = ImageSet(Settings(images={"tools": "tools:1"}))
    with pytest.raises(RequestError) as caught:
        images.named("boxed-sandbox:latest")  # a reference is not a name
    assert caught.value.status_code == 422
    assert caught.value.field == "image"
    assert "default, tools" in caught.value.detail


# -- the filesystem scan ---------------------------------------------------------------------


def rootfs_tar(*members: tarfile.TarInfo) -> bytes:
    """An uncompressed tar of ``members`` (files get a few bytes of content)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member in members:
            data = b"x" * member.size if member.isfile() else None
            tar.addfile(member, io.BytesIO(data) if data else None)
    return out.getvalue()


def member(
    name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, **fields: object
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = 3 if kind == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def char_device(name: str) -> tarfile.TarInfo:
    return member(name, tarfile.CHRTYPE, 0o666, devmajor=1, devminor=3)


def test_device_nodes_outside_dev_are_refused_those_in_dev_are_not() -> None:
    scan = scan_tar(
        io.BytesIO(
            rootfs_tar(
                char_device("./dev/null"),
                member("dev/sda", tarfile.BLKTYPE, devmajor=8, devminor=0),
                char_device("./opt/evil-null"),
                member("/srv/disk", tarfile.BLKTYPE, devmajor=8, devminor=0),
                member("./devices/readme"),
                # a hard link to a node in /dev is that node, under another name
                member("usr/lib/mem", tarfile.LNKTYPE, linkname="./dev/null"),
            )
        )
    )
    assert scan.device_nodes == ["opt/evil-null", "srv/disk", "usr/lib/mem"]
    assert scan.refusal is not None and "/opt/evil-null" in scan.refusal
    assert "CVE-2026-96812" in scan.refusal
    assert scan.entries == 6


def test_setuid_and_setgid_files_are_reported_not_refused() -> None:
    scan = scan_tar(
        io.BytesIO(
            rootfs_tar(
                member("usr/bin/su", mode=0o4755),
                member("usr/bin/wall", mode=0o2755),
                member("usr/bin/env", mode=0o755),
                member("tmp", tarfile.DIRTYPE, mode=0o1777),
            )
        )
    )
    assert scan.setuid_files == ["usr/bin/su", "usr/bin/wall"]
    assert scan.device_nodes == [] and scan.refusal is None


def test_scans_are_kept_by_image_id_on_disk(tmp_path: Path) -> None:
    scan = ImageScan(entries=3, setuid_files=["usr/bin/su"])
    ScanCache(str(tmp_path / "scans")).put("sha256:abc123", scan)
    assert ScanCache(str(tmp_path / "scans")).get("sha256:abc123") == scan
    assert ScanCache(str(tmp_path / "scans")).get("sha256:other") is None


def test_off_keeps_scans_in_memory_only() -> None:
    assert Settings(image_scan_dir="off").image_scan_dir is None
    assert Settings().image_scan_dir == "/run/boxed/images"


def test_a_scan_directory_others_may_write_is_not_trusted(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "abc123.json").write_text(json.dumps(ImageScan(entries=1).as_dict()))
    shared.chmod(0o777)
    assert ScanCache(str(shared)).get("sha256:abc123") is None  # a forged "clean" is ignored


# -- the engine over the fake backend ----------------------------------------------------------


def fake_executor(**images: object) -> Executor:
    settings = Settings(
        instance=f"images-{uuid.uuid4().hex[:6]}",
        process_backend="fake",
        container_backend="fake",
        pool_size=1,
        images=images,
        image_scan_dir=None,
    )
    return Executor(settings)


def test_a_request_runs_on_the_pools_of_the_image_it_names() -> None:
    async def scenario() -> None:
        executor = fake_executor(tools={"image": "tools:1", "timeout_max": 2})
        await executor.start()
        try:
            await executor.execute(ExecuteRequest(code="1", image="tools"), "r1")
            await executor.execute(ExecuteRequest(code="2"), "r2")
            engine = executor.engine
            ran = {
                name: [job.code for pool in pools.values() for job in pool.backend.jobs]
                for name, pools in engine.image_pools.items()
            }
            assert ran == {DEFAULT: ["2"], "tools": ["1"]}
            with pytest.raises(RequestError, match="timeout 5 s exceeds the maximum 2 s"):
                await executor.execute(ExecuteRequest(code="3", image="tools", timeout=5), "r3")
            with pytest.raises(RequestError, match="not one of this server's images"):
                await executor.execute(ExecuteRequest(code="4", image="nope"), "r4")
            info = await executor.sessions.create(SessionCreateRequest(image="tools"), "me")
            assert info.image == "tools" and info.timeout == 2  # the image's limits
            with pytest.raises(RequestError, match="timeout 3 s exceeds the maximum 2 s"):
                await executor.sessions.execute(
                    info.session_id, ExecuteRequest(code="5", timeout=3), "r5", "me"
                )
            session_backend = engine.image_pools["tools"]["process"].backend
            assert info.session_id in {
                s.session_id for s in session_backend.sandboxes.values() if hasattr(s, "spec")
            }
        finally:
            await executor.stop()

    asyncio.run(scenario())


def test_an_image_with_a_device_node_stops_the_start() -> None:
    async def scenario() -> None:
        executor = fake_executor(evil="evil:1")
        for pool in executor.engine.image_pools["evil"].values():
            pool.backend.image_scan = ImageScan(entries=2, device_nodes=["opt/evil-null"])
        with pytest.raises(RuntimeError, match="'evil'.*refused.*/opt/evil-null"):
            await executor.start()
        await executor.stop()

    asyncio.run(scenario())


def test_an_image_refused_after_the_start_answers_503_the_others_still_run() -> None:
    async def scenario() -> None:
        executor = fake_executor(tools="tools:1")
        await executor.start()
        try:
            engine = executor.engine
            backend = engine.image_pools["tools"]["process"].backend
            backend.image_id = "sha256:moved"  # its tag now names another image...
            backend.image_scan = ImageScan(entries=2, device_nodes=["opt/evil-null"])
            await engine.check_backend()  # ...which the next check scans and refuses
            with pytest.raises(ServiceUnavailable, match="refused"):
                await executor.execute(ExecuteRequest(code="1", image="tools"), "r1")
            unavailable = executor.readiness()["images_unavailable"]
            assert list(unavailable) == ["tools"] and "/opt/evil-null" in unavailable["tools"]
            answer = await executor.execute(ExecuteRequest(code="2"), "r2")
            assert answer.status == "ok"
        finally:
            await executor.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--derive", "latest"], "not default/latest"),
        (["--derive", "Geo"], "not default/latest"),
        (["--derive", "geo", "--file", "pyproject.toml:relative/path"], "absolute file path"),
        (["--derive", "geo", "--file", "no-such-file:/opt/x"], "not a file"),
        (["--derive", "geo", "--apt", "bc; rm -rf /"], "not a Debian package"),
    ],
)
def test_the_builder_refuses_a_bad_derivation_at_once(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_image_main(argv)


# -- on a real engine --------------------------------------------------------------------------

DERIVED = "boxed-sandbox-test:probe"
SETUID = "boxed-sandbox-test:setuid"
DEVICE = "boxed-sandbox-test:devnode"
PROBE_WHEEL = "boxed_probe-1.0-py3-none-any.whl"
SUID_PYTHON = "/usr/local/bin/suid-python"


def tiny_wheel(path: Path, name: str = "boxed_probe", version: str = "1.0") -> Path:
    """A pure-Python wheel made here (no index is reached): ``import boxed_probe`` works."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(path, "w") as wheel:
        for name_in_zip, text in files.items():
            wheel.writestr(name_in_zip, text)
    return path


def docker_build(tag: str, dockerfile: str) -> None:
    subprocess.run(
        ["docker", "build", "-q", "--network", "none", "-t", tag, "-"],
        input=dockerfile.encode(),
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def derived_images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The derived image (a wheel and a file on the sandbox image), a set-uid root copy of
    python3 on it, and an imported root filesystem with a device node outside /dev; removed
    after (each is seconds to rebuild)."""
    work = tmp_path_factory.mktemp("derive")
    note = work / "note.txt"
    note.write_text("from the operator\n")
    derivation = Derivation(
        "probe", IMAGE, pip=[str(tiny_wheel(work / PROBE_WHEEL))], files=[(note, "/opt/note.txt")]
    )
    derive(derivation, DERIVED)
    docker_build(
        SETUID,
        f"FROM {DERIVED}\nUSER 0:0\n"
        f"RUN cp /usr/bin/python3.11 {SUID_PYTHON} && chmod 4755 {SUID_PYTHON}\n"
        "USER 10001:10001\n",
    )
    rootfs = rootfs_tar(member("etc/hostname"), char_device("opt/evil-null"))
    subprocess.run(["docker", "import", "-", DEVICE], input=rootfs, check=True, capture_output=True)
    try:
        yield {"probe": DERIVED, "setuid": SETUID, "device": DEVICE}
    finally:
        subprocess.run(["docker", "rmi", SETUID, DERIVED, DEVICE], capture_output=True)


@pytest.fixture(scope="module")
def service(derived_images: dict[str, str]) -> Iterator[str]:
    images = {
        "probe": {"image": derived_images["probe"], "memory_mb_max": 512, "session_pool_size": 1},
        "setuid": derived_images["setuid"],
    }
    with running_service(BOXED_POOL_SIZE="1", BOXED_IMAGES=json.dumps(images)) as svc:
        yield svc.url


IMPORT_PROBE = "import boxed_probe; print(boxed_probe.VERSION, open('/opt/note.txt').read())"


@pytest.mark.docker
def test_images_lists_each_image_with_its_versions_and_what_it_adds(service: str) -> None:
    images = {i["name"]: i for i in httpx.get(f"{service}/images").json()["images"]}
    assert list(images) == ["default", "probe", "setuid"]
    assert all(i["available"] and i["problem"] is None for i in images.values())
    probe = images["probe"]
    assert probe["reference"] == DERIVED and probe["image_id"].startswith("sha256:")
    assert probe["adds"]["pip"] == {"boxed-probe": "1.0"}
    assert probe["adds"]["files"] == ["/opt/note.txt"]
    assert probe["versions"]["packages"]["boxed-probe"] == "1.0"
    assert probe["versions"]["python"] == images["default"]["versions"]["python"]
    assert probe["limits"]["memory_mb_max"] == 512 and probe["pool_size"] == 0
    assert probe["session_pool_size"] == 1 and images["setuid"]["session_pool_size"] == 0
    assert images["default"]["adds"] is None and images["default"]["pool_size"] == 1
    # the set-uid python is found (and reported as inert), beside the base's own
    assert images["setuid"]["setuid_files"] == images["default"]["setuid_files"] + 1


@pytest.mark.docker
def test_the_derived_image_has_its_package_the_default_does_not(service: str) -> None:
    probe = httpx.post(
        f"{service}/execute", json={"code": IMPORT_PROBE, "image": "probe"}, timeout=60
    ).json()
    assert (probe["status"], probe["stdout"]) == ("ok", "1.0 from the operator\n\n")
    default = httpx.post(f"{service}/execute", json={"code": IMPORT_PROBE}, timeout=60).json()
    assert default["status"] == "error" and "No module named 'boxed_probe'" in default["stderr"]
    judged = httpx.post(
        f"{service}/judge",
        json={
            "code": "import boxed_probe\nprint(boxed_probe.VERSION)",
            "image": "probe",
            "tests": [{"input": "", "expected_output": "1.0"}],
        },
        timeout=60,
    ).json()
    assert judged["verdict"] == "accepted"
    sandbox_fusion = httpx.post(
        f"{service}/run_code", json={"code": IMPORT_PROBE, "image": "probe"}, timeout=60
    ).json()
    assert sandbox_fusion["status"] == "Success"


def warm_sessions_made(service: str) -> float:
    text = httpx.get(f"{service}/metrics").text
    found = re.search(r'^boxed_session_sandboxes_total{start="warm"} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def wait_session_pool(service: str, image: str) -> None:
    deadline = time.monotonic() + 60
    while httpx.get(f"{service}/readyz").json()["session_pool_ready"].get(image) != 1:
        assert time.monotonic() < deadline, "the image's session pool did not fill"
        time.sleep(0.05)


@pytest.mark.docker
def test_a_session_keeps_its_image(service: str) -> None:
    """...also one handed out warm from the image's own session pool."""
    wait_session_pool(service, "probe")
    warm_before = warm_sessions_made(service)
    created = httpx.post(f"{service}/sessions", json={"image": "probe"}, timeout=60)
    assert created.status_code == 201 and created.json()["image"] == "probe"
    assert created.json()["memory_mb"] <= 512  # the image's limits
    assert warm_sessions_made(service) == warm_before + 1
    sid = created.json()["session_id"]
    try:
        for code in ("import boxed_probe", "print(boxed_probe.VERSION)"):
            call = httpx.post(
                f"{service}/sessions/{sid}/execute", json={"code": code}, timeout=60
            ).json()
            assert call["status"] == "ok", call
        assert call["stdout"] == "1.0\n"
        per_call = httpx.post(
            f"{service}/sessions/{sid}/execute",
            json={"code": "1", "image": "default"},
            timeout=60,
        )
        assert per_call.status_code == 422 and "image" in per_call.json()["detail"]
    finally:
        httpx.delete(f"{service}/sessions/{sid}", timeout=60)


@pytest.mark.docker
def test_the_clients_name_an_image(service: str) -> None:
    with Client(service) as client:
        assert client.execute(IMPORT_PROBE, image="probe").stdout.startswith("1.0")
        with client.session(image="probe") as session:
            assert session.execute("import boxed_probe").status == "ok"
            assert session.info is not None and session.info.image == "probe"

    async def asynchronously() -> None:
        async with AsyncClient(service) as client:
            answer = await client.execute(IMPORT_PROBE, image="probe")
            assert answer.status == "ok"
            async with client.session(image="probe") as session:
                assert (await session.execute("import boxed_probe")).status == "ok"

    asyncio.run(asynchronously())


@pytest.mark.docker
def test_unknown_names_and_references_are_422_and_limits_are_the_images(service: str) -> None:
    for name in ("nope", IMAGE, DERIVED):
        answer = httpx.post(f"{service}/execute", json={"code": "1", "image": name}, timeout=60)
        assert answer.status_code == 422
        assert answer.json()["detail"] == (
            f"image {name!r} is not one of this server's images: default, probe, setuid"
        )
    session = httpx.post(f"{service}/sessions", json={"image": "nope"}, timeout=60)
    assert session.status_code == 422
    too_big = httpx.post(
        f"{service}/execute", json={"code": "1", "image": "probe", "memory_mb": 1024}, timeout=60
    )
    assert too_big.status_code == 422
    assert too_big.json()["detail"] == "memory_mb 1024 exceeds the maximum 512"


SUID_SNIPPET = f"""
import re
import subprocess
out = subprocess.run(
    ["{SUID_PYTHON}", "-c", "import os; print(os.geteuid(), os.getuid())"],
    capture_output=True, text=True,
)
print(out.stdout.strip(), out.returncode)
"""


@pytest.mark.docker
@pytest.mark.parametrize("isolation", ["process", "container"])
def test_a_setuid_root_binary_gives_a_snippet_no_root(service: str, isolation: str) -> None:
    # Control: without no-new-privileges, the same binary run by an unprivileged user is root.
    control = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", "10001:10001", SETUID,
         SUID_PYTHON, "-c", "import os; print(os.geteuid())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert control.stdout.strip() == "0"
    answer = httpx.post(
        f"{service}/execute",
        json={"code": SUID_SNIPPET, "image": "setuid", "isolation": isolation},
        timeout=60,
    ).json()
    assert answer["status"] == "ok", answer
    euid, uid, code = answer["stdout"].split()
    assert code == "0" and euid == uid and euid != "0"


@pytest.mark.docker
def test_an_image_with_a_device_node_outside_dev_is_refused_at_start(
    derived_images: dict[str, str],
) -> None:
    env = {"BOXED_IMAGES": json.dumps({"evil": derived_images["device"]})}
    service = ServiceProcess(BOXED_POOL_SIZE="0", **env)
    try:
        with pytest.raises(AssertionError) as failed:
            service.start(ready_timeout=60)
        assert service.proc is not None and service.proc.wait(30) != 0
    finally:
        if service.proc is not None:
            service.stop()
    log = str(failed.value)
    assert "image 'evil'" in log and "refused" in log and "/opt/evil-null" in log
    assert instance_containers(service.instance) == []  # the scan's container is gone too
