"""Run inside a session-hardened container as PID 1 (root): forks of interpreters in user
namespaces of their own (``exec_server.guest.forks``), with the isolation checks from each
side. Prints one JSON report. Stdlib only; the guest package is mounted at /probe.

Usage: python3 -I fork_probe.py FIRST_UID MIB ROUNDS
"""

import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, "/probe")
from guest import forks  # noqa: E402

FIRST, MIB, ROUNDS = (int(a) for a in sys.argv[1:4])
BLOCK = list(range(FIRST, FIRST + 8))


# -- a member: an interpreter serving commands on fd 3 ------------------------------------------
def serve(channel, namespace):
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 16, 4)
        if not message:
            os._exit(0)
        if message.startswith(b"fork"):
            uid = int(message.split()[1])
            fork_handler(channel, fds, uid)
            continue
        try:
            exec(message.decode(), namespace)
            channel.send(json.dumps(namespace.get("out")).encode())
        except BaseException as exc:  # noqa: BLE001
            channel.send(json.dumps(f"{type(exc).__name__}: {exc}").encode())


def fork_handler(channel, fds, uid):
    (child_end,) = fds
    middle = os.fork()
    if middle == 0:
        if os.fork() != 0:
            os._exit(0)  # the fork is PID 1's child from now on
        channel.close()
        child = socket.socket(fileno=child_end)
        old_root = os.getcwd()
        snapshot = forks.DirectorySnapshot(old_root)
        forks.enter_new_namespace()
        child.send(b"unshared")
        if child.recv(16) != b"mapped":
            os._exit(1)
        forks.become(uid, uid)
        target = f"/tmp/fork-{uid}"
        snapshot.write(target)
        os.chdir(target)
        os.dup2(child.fileno(), 3)
        child.detach()
        forks.carry_open_files({0, 1, 2, 3}, old_root, target)
        channel_ = socket.socket(fileno=3)
        channel_.send(b"ready")
        serve(channel_, NAMESPACE)
    os.close(child_end)
    os.waitpid(middle, 0)
    forks.enter_new_namespace()
    forks.drop_all_capabilities()
    channel.send(b"unshared")
    if channel.recv(16) != b"mapped":
        os._exit(1)
    channel.send(b"forked")


NAMESPACE = {}


def interpreter(theirs):
    os.dup2(theirs.fileno(), 3)
    os.setgroups([])
    os.setgid(FIRST)
    os.setuid(FIRST)
    forks.libc.prctl(4, 1, 0, 0, 0)
    os.mkdir(forks.RUN_DIR, 0o700)
    os.chdir(forks.RUN_DIR)
    os.umask(0o077)
    serve(socket.socket(fileno=3), NAMESPACE)


# -- PID 1 ---------------------------------------------------------------------------------------
class Member:
    def __init__(self, pid, sock, uid):
        self.pid, self.sock, self.uid, self.ns = pid, sock, uid, None

    def run(self, code):
        self.sock.send(code.encode())
        return json.loads(self.sock.recv(1 << 16))


def status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return fields


writer = forks.MapWriter(FIRST)
used = {FIRST}


def fork(member):
    uid = min(set(BLOCK) - used)
    used.add(uid)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    started = time.monotonic()
    socket.send_fds(member.sock, [b"fork %d" % uid], [theirs.fileno()])
    theirs.close()
    message, ancillary, _, _ = ours.recvmsg(16, socket.CMSG_SPACE(12))
    (pid, _, _) = struct.unpack("3i", ancillary[0][2][:12])
    assert message == b"unshared", message
    assert member.sock.recv(16) == b"unshared"
    free = set(BLOCK) - used
    writer.write(member.ns, [(member.pid, [member.uid, *free]), (pid, [uid, *free])])
    ours.send(b"mapped")
    member.sock.send(b"mapped")
    assert ours.recv(16) == b"ready"
    assert member.sock.recv(16) == b"forked"
    took = (time.monotonic() - started) * 1000
    child = Member(pid, ours, uid)
    member.ns = writer.namespace_of(member.pid)
    child.ns = writer.namespace_of(pid)
    return child, took


def main():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        interpreter(theirs)
    theirs.close()
    root = Member(pid, ours, FIRST)
    report = {}
    report["setup"] = root.run(
        f"blob = bytearray({MIB} << 20)\n"
        "for i in range(0, len(blob), 4096): blob[i] = 1\n"
        "import json, os, signal\nx = 41\n"
        "open('data.txt', 'w').write('0123456789')\n"
        "os.mkdir('sub'); open('sub/a', 'w').write('A')\n"
        "held = open('data.txt'); held.read(3)\nout = 'ok'"
    )
    times = []
    f1, took = fork(root)
    times.append(took)
    f2, took = fork(root)  # the parent's second fork: one level deeper
    times.append(took)
    f3, took = fork(f1)  # a fork of a fork
    times.append(took)
    members = {"root": root, "f1": f1, "f2": f2, "f3": f3}
    report["uids"] = {n: status(m.pid)["Uid"] for n, m in members.items()}
    report["caps"] = {
        n: [status(m.pid)[k][0] for k in ("CapEff", "CapPrm", "CapBnd")] for n, m in members.items()
    }
    report["tracer"] = {n: status(m.pid)["TracerPid"][0] for n, m in members.items()}
    report["state"] = {
        n: m.run("out = [x, len(blob), held.read(), os.getcwd(), open('sub/a').read()]")
        for n, m in members.items()
    }
    f1.run("x = 1000\nout = x")
    report["independent"] = {n: m.run("out = x") for n, m in members.items()}
    probe = (
        "def reach(pid, cwd):\n"
        "    r = []\n"
        "    try:\n        os.kill(pid, 0); r.append('signal')\n"
        "    except PermissionError: pass\n"
        "    try:\n        open(f'/proc/{pid}/mem', 'rb'); r.append('mem')\n"
        "    except PermissionError: pass\n"
        "    try:\n        open(f'{cwd}/data.txt').read(); r.append('files')\n"
        "    except PermissionError: pass\n"
        "    return r\n"
    )
    report["reach"] = {}
    for name, member in members.items():
        member.run(probe + "out = None")
        for other_name, other in members.items():
            if other is not member:
                cwd = forks.RUN_DIR if other is root else f"/tmp/fork-{other.uid}"
                got = member.run(f"out = reach({other.pid}, {cwd!r})")
                report["reach"][f"{name}->{other_name}"] = got
    report["fork_ms"] = times
    for _ in range(ROUNDS):
        _, took = fork(root) if len(used) < len(BLOCK) else (None, None)
        if took is not None:
            times.append(took)
    print(json.dumps(report))


main()
