"""Test scripts judged outside the submission's process (exec_server/guest/harness.py).

The codec between the harness and the submission (``guest/values.py``) keeps every literal type
and lets nothing with behaviour through; against a real service in every isolation mode and
runtime (``boxed_service``), a wrong submission that forges a pass the ways an in-process
harness allowed (patched builtins, frames and ``gc``, always-equal objects, the marker written
by hand, leaving early) is never accepted, and the submission cannot signal, trace or read the
harness's process.
"""

from __future__ import annotations

import math

import httpx
import pytest

from exec_server.guest.values import MAX_BYTES, MAX_DEPTH, BadValue, decode, encode
from exec_server.settings import Settings

PLAIN = [
    None,
    True,
    0,
    -5,
    2**200,
    -(2**70),
    10**5000,
    1.5,
    -0.0,
    math.inf,
    -math.inf,
    1 + 2j,
    complex(1, -math.inf),
    "a'\"\n\x00é",
    b"\x00\xff",
    (),
    (1,),
    [1, [2, (3,)]],
    set(),
    {1, 2},
    frozenset(),
    frozenset({1, (2, 3)}),
    {},
    {(1, 2): [3], None: {frozenset({1}): b""}, 1.5: set(), False: 1j},
]


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
def test_plain_values_keep_their_types(value: object) -> None:
    back = decode(encode(value))
    assert back == value and type(back) is type(value)
    if type(value) is float:
        assert math.copysign(1, back) == math.copysign(1, value)


def test_nan_crosses_as_nan() -> None:
    back = decode(encode([math.nan, complex(math.nan, math.inf)]))
    assert math.isnan(back[0]) and math.isnan(back[1].real) and back[1].imag == math.inf


class AlwaysEqual:
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


class Int(int):
    pass


@pytest.mark.parametrize("value", [AlwaysEqual(), [AlwaysEqual()], {1: object()}, len, Int(3)])
def test_nothing_with_behaviour_is_encoded(value: object) -> None:
    with pytest.raises(BadValue, match="not a plain value"):
        encode(value)


def test_caps_on_depth_and_size() -> None:
    nested: list = []
    for _ in range(MAX_DEPTH + 1):
        nested = [nested]
    with pytest.raises(BadValue, match="nested"):
        encode(nested)
    with pytest.raises(BadValue, match="nested|not a plain value"):
        decode("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))
    with pytest.raises(BadValue, match="over"):
        encode("x" * MAX_BYTES)
    with pytest.raises(BadValue, match="over"):
        decode("1" * (MAX_BYTES + 1))


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('id')",
        "x",
        "(1).real",
        "1e308 * 10",
        "'a' + 'b'",
        "{**a}",
        "set([1])",
        "...",
        "{[1]: 2}",
        "-'a'",
        "-" * 100_000 + "1",
        "lambda: 1",
    ],
)
def test_decode_never_evaluates(text: str) -> None:
    with pytest.raises(BadValue):
        decode(text)


# -- against a real service ------------------------------------------------------------------
SCRIPT = """
def check(candidate):
    assert candidate(1) == 2
    assert candidate(41) == 42
    assert not (candidate(0) != 1)
"""
WRONG = "def inc(x):\n    return x + 2\n"

FORGERIES = {
    # the old driver exec'd the script through builtins.exec: swap its check for a no-op
    "patched-builtins": WRONG
    + """
import builtins
_exec = builtins.exec
def _patched(code, ns=None, *rest):
    _exec(code, ns, *rest)
    if isinstance(ns, dict) and "check" in ns:
        ns["check"] = lambda candidate: None
builtins.exec = _patched
builtins.AssertionError = type("AssertionError", (Exception,), {})
""",
    # find the pass marker in the caller's frames and objects, write it, and leave
    "frames-and-gc": WRONG
    + """
import gc, os, re, sys
def _markers():
    frame = sys._getframe()
    while frame is not None:
        for const in frame.f_code.co_consts:
            if isinstance(const, str):
                yield from re.findall("\\x1eboxed-[0-9a-f]+:", const)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            for key in ("passed", "ok", "success"):
                if obj.get(key) is False:
                    obj[key] = True
for _marker in _markers():
    sys.stdout.write("\\n" + _marker + "pass\\n")
    sys.stdout.flush()
    os._exit(0)
""",
    "always-equal": """
class _Yes:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
def inc(x):
    return _Yes()
""",
    "marker-written": WRONG
    + """
import os, sys
for _stream in (sys.stdout, sys.stderr):
    _stream.write("\\npass\\nOK\\naccepted\\n")
    _stream.flush()
for _name in ("/tmp/pass", "/tmp/run/pass", "pass"):
    try:
        open(_name, "w").write("pass")
    except OSError:
        pass
""",
    "exit-0-before-asserts": WRONG + "import os\nos._exit(0)\n",
    "systemexit-in-call": "def inc(x):\n    raise SystemExit(0)\n",
    "systemexit-at-load": WRONG + "raise SystemExit(0)\n",
    "kill-the-parent": """
import os, signal
def inc(x):
    for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
        try:
            os.kill(os.getppid(), sig)
        except OSError:
            pass
    return x + 2
""",
}


def judge(url: str, code: str, script: str = SCRIPT, entry: str | None = "inc") -> dict:
    body = {"code": code, "language": "python", "test_script": script, "entry_point": entry}
    r = httpx.post(f"{url}/judge", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.docker
@pytest.mark.parametrize("name", FORGERIES)
def test_a_forged_pass_is_never_accepted(boxed_service: str, name: str) -> None:
    answer = judge(boxed_service, FORGERIES[name])
    assert answer["verdict"] in ("wrong_answer", "runtime_error"), answer


PROBE = """
import ctypes, os
def probe():
    parent, found = os.getppid(), {}
    try:
        os.kill(parent, 0)
        found["signal"] = True
    except OSError:
        found["signal"] = False
    try:
        open(f"/proc/{parent}/mem", "rb").read(1)
        found["mem"] = True
    except OSError:
        found["mem"] = False
    # gVisor lets another uid list a process's descriptors: none may hold the script
    secret, found["script"] = ("harness-" + "secret").encode(), False
    try:
        for fd in os.listdir(f"/proc/{parent}/fd"):
            path = f"/proc/{parent}/fd/{fd}"
            if "memfd" in os.readlink(path) or os.readlink(path).startswith("/"):
                with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
                    found["script"] |= secret in f.read()
    except OSError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    found["ptrace"] = libc.ptrace(16, parent, 0, 0) == 0  # PTRACE_ATTACH
    found["same uid"] = os.stat(f"/proc/{parent}").st_uid == os.getuid()
    return found
"""
PROBE_SCRIPT = """
# harness-secret
def check(candidate):
    found = candidate()
    assert not any(found.values()), found
"""


@pytest.mark.docker
def test_the_submission_cannot_reach_the_harness(boxed_service: str) -> None:
    answer = judge(boxed_service, PROBE, PROBE_SCRIPT, "probe")
    assert answer["verdict"] == "accepted", answer["tests"][0]["stderr"]


VALUES = """
import math
def echo(x):
    return x
def make():
    return [math.nan, math.inf, -math.inf, 1 + 2j, 2**300, b"\\x00", frozenset({(1, 2)}),
            {(1, "a"): {None: set()}}, (True, 1.5, "é")]
def fail(kind):
    raise {"value": ValueError, "key": KeyError}[kind]("nope")
def helper(x):
    return x * 2
"""
VALUES_SCRIPT = """
import math
def check(candidate):
    value = make()
    assert math.isnan(value[0]) and value[1:] == [
        math.inf, -math.inf, 1 + 2j, 2**300, b"\\x00", frozenset({(1, 2)}),
        {(1, "a"): {None: set()}}, (True, 1.5, "é")]
    assert type(value[8]) is tuple and type(value[8][0]) is bool
    assert candidate({1: (2, [3])}) == {1: (2, [3])}
    assert helper(21) == 42  # a function of the code the script names, as HumanEval/32's poly
    for kind in ("value", "key"):
        try:
            fail(kind)
        except Exception as exc:
            assert type(exc).__module__ != "builtins" and "Error" in str(exc), exc
        else:
            raise AssertionError("no exception")
"""


@pytest.mark.docker
def test_values_and_exceptions_cross_as_data(boxed_service: str) -> None:
    answer = judge(boxed_service, VALUES, VALUES_SCRIPT, "echo")
    assert answer["verdict"] == "accepted", answer


@pytest.mark.docker
def test_a_value_over_the_caps_is_the_codes_verdict(boxed_service: str) -> None:
    code = "def inc(x):\n    v = []\n    for _ in range(500):\n        v = [v]\n    return v\n"
    assert judge(boxed_service, code)["verdict"] == "runtime_error"
    big = "def inc(x):\n    return 'x' * (8 << 20)\n"
    assert judge(boxed_service, big)["verdict"] == "runtime_error"


@pytest.mark.docker
def test_a_correct_submission_passes_and_a_wrong_one_fails(boxed_service: str) -> None:
    assert judge(boxed_service, "def inc(x):\n    return x + 1\n")["verdict"] == "accepted"
    assert judge(boxed_service, WRONG)["verdict"] == "wrong_answer"
    # no entry point: the script's own top-level asserts call the code's functions
    script = "assert inc(1) == 2\n"
    assert judge(boxed_service, "def inc(x):\n    return x + 1\n", script, None)["verdict"] == (
        "accepted"
    )


@pytest.mark.parametrize("user", ["0", "0:0", "harness", "10001:10001", "10001"])
def test_the_harness_user_is_another_non_root_uid(user: str) -> None:
    with pytest.raises(ValueError, match="BOXED_HARNESS_USER"):
        Settings(sandbox_user="10001:10001", harness_user=user)
    default = Settings()
    assert int(default.harness_user.split(":")[0]) not in default.sandbox_uid_range
    with pytest.raises(ValueError, match="BOXED_HARNESS_USER must be a uid outside"):
        Settings(sandbox_uids="20000-20010", harness_user="20005")
