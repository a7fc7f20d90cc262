"""The entry point of a sandbox pod (stdlib only): serve the supervisor over one TCP connection.

A pod cannot be attached to like a Docker container, so the service reaches its supervisor over
the pod network. This program listens on a port, accepts one connection at a time and
authenticates it with an HMAC challenge-response over a shared secret (a file only root can
read; the snippet's uid cannot, and this process never reads it: a forked helper does, so no
copy of the secret is in the memory every snippet child is forked from). Both sides prove that
they know the secret, so a snippet that somehow listened on the port could not pass for a
sandbox either. The first connection that passes is the pod's only session: the listening
socket is closed (other replicas of the service are refused from then on), the service sends
the guest modules and the supervisor's configuration, and the connection becomes the
supervisor's stdin and stdout, over which it speaks exactly the protocol of ``protocol.py``
(or, for a session, the session program's: ``session.py``).

A pod serves one session. When it ends (the service closed the connection or went away) this
program exits; a restarted container finds the marker it left in its state directory and
refuses to serve again, since ``/tmp`` may hold what a snippet left: the service deletes such
pods (their restart count is not zero), and the controller replaces them with fresh ones.

Like ``bootstrap.py``, it runs with an empty environment (it starts itself again without the
pod's), and the supervisor's snippets get the configuration's ``env``.

Wire format of the hand-shake (before the protocol starts):
  sandbox -> service: ``GREETING``, a 32-byte challenge
  service -> sandbox: a 32-byte nonce, ``proof(key, SERVICE, challenge, nonce)``
  sandbox -> service: ``proof(key, SANDBOX, challenge, nonce)``
  service -> sandbox: a 4-byte big-endian length, JSON ``{"modules": {name: source},
  "config": {...}}`` (``protocol.GuestConfig``); the supervisor then writes its ready marker.
"""

import argparse
import hashlib
import hmac
import json
import os
import socket
import sys
import types

GREETING = b"boxed-listener/1\n"
SERVICE, SANDBOX = b"service", b"sandbox"
NONCE_SIZE = 32
PROOF_SIZE = 32
HANDSHAKE_SECONDS = 5.0  # a connection that does not finish the hand-shake by then is dropped
MAX_BOOTSTRAP = 4 * 1024 * 1024
MARKER = "served"
AUTH_OK = 0
# A dead peer (node gone, no FIN) must end the session: then the pod is retired, not stuck.
KEEPALIVE = ((socket.TCP_KEEPIDLE, 30), (socket.TCP_KEEPINTVL, 10), (socket.TCP_KEEPCNT, 3))


def proof(key, role, challenge, nonce):
    """What ``role`` sends to prove it holds ``key`` (HMAC-SHA256 over both random values)."""
    return hmac.new(key, role + challenge + nonce, hashlib.sha256).digest()


def read_key(path):
    with open(path, "rb") as f:
        key = f.read().strip()
    if len(key) < 16:
        raise ValueError(f"the shared secret in {path} is shorter than 16 bytes")
    return key


def receive_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed during the hand-shake")
        data += chunk
    return bytes(data)


def _answer_challenge(conn, key_path):
    """The sandbox's side of the hand-shake; True when the peer proved it holds the key."""
    challenge = os.urandom(NONCE_SIZE)
    conn.sendall(GREETING + challenge)
    nonce = receive_exact(conn, NONCE_SIZE)
    claimed = receive_exact(conn, PROOF_SIZE)
    key = read_key(key_path)
    if not hmac.compare_digest(claimed, proof(key, SERVICE, challenge, nonce)):
        return False
    conn.sendall(proof(key, SANDBOX, challenge, nonce))
    return True


def authenticate(conn, key_path):
    """Run the hand-shake in a forked helper that alone reads the secret; True if it passed."""
    pid = os.fork()
    if pid == 0:
        try:
            ok = _answer_challenge(conn, key_path)
        except BaseException:  # noqa: BLE001 - any failure is a refusal
            ok = False
        os._exit(AUTH_OK if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == AUTH_OK


def start_again_without_environment():
    """Exec this program again with an empty environment, unless it has none already (as
    ``bootstrap.py`` does, and why)."""
    with open("/proc/self/environ", "rb") as f:
        if not f.read(1):
            return
    utf8 = [] if "utf8" in sys._xoptions else ["-X", "utf8=0"]
    os.execve(sys.executable, [sys.executable, *utf8, *sys.orig_argv[1:]], {})


def accept_service(server, key_path):
    """Wait for a connection that passes the hand-shake (probes and strangers are dropped)."""
    while True:
        conn, _ = server.accept()
        conn.settimeout(HANDSHAKE_SECONDS)
        if authenticate(conn, key_path):
            return conn
        conn.close()


def install(modules):
    """Install the guest modules the service sent as the package ``boxed_guest`` (as
    ``bootstrap.py`` does for a Docker sandbox); the package."""
    package = types.ModuleType("boxed_guest")
    package.__path__ = []
    package.sources = modules  # the supervisor starts its zygotes with some of them
    sys.modules["boxed_guest"] = package
    for name, source in modules.items():
        module = types.ModuleType(f"boxed_guest.{name}")
        module.__package__ = "boxed_guest"
        sys.modules[module.__name__] = module
        exec(compile(source, f"<boxed_guest/{name}.py>", "exec"), module.__dict__)
        setattr(package, name, module)
    return package


def serve(port, key_path, state_dir, host="::", private_dirs=()):
    marker = os.path.join(state_dir, MARKER)
    if os.path.exists(marker):
        sys.exit("boxed listener: this container served before; waiting to be deleted")
    for path in private_dirs:
        # A Kubernetes emptyDir is made world-writable; these must be root's alone (as the
        # Docker backends' tmpfs mode=0755 makes /box, where /judge installs programs).
        os.chmod(path, 0o755)
    family = socket.AF_INET6 if socket.has_ipv6 and ":" in host else socket.AF_INET
    try:
        server = socket.create_server(
            (host, port), family=family, backlog=8, dualstack_ipv6=family == socket.AF_INET6
        )
    except OSError:  # no IPv6 in this network namespace
        server = socket.create_server(("0.0.0.0", port), backlog=8)
    conn = accept_service(server, key_path)
    server.close()  # claimed: nobody else connects from now on
    with open(marker, "w") as f:
        f.write("1")
    size = int.from_bytes(receive_exact(conn, 4), "big")
    if size > MAX_BOOTSTRAP:
        sys.exit("boxed listener: bootstrap too large")
    bootstrap = json.loads(receive_exact(conn, size))
    conn.setblocking(True)  # the supervisor reads and writes with plain blocking calls
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in KEEPALIVE:
        conn.setsockopt(socket.IPPROTO_TCP, option, value)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    package = install(bootstrap["modules"])
    # Read by the guest's own protocol, which refuses a configuration of another version.
    config = package.protocol.GuestConfig.from_wire(bootstrap["config"])
    os.dup2(conn.fileno(), 0)
    os.dup2(conn.fileno(), 1)
    conn.close()
    os.environ.clear()
    os.environ.update(entry.split("=", 1) for entry in config.env)
    getattr(package, config.program).main(config)


def main(argv=None):
    start_again_without_environment()
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--port", type=int, default=7000)
    parser.add_argument("--host", default="::")
    parser.add_argument("--key", required=True, help="file with the shared secret (root only)")
    parser.add_argument("--state", required=True, help="directory that outlives a restart")
    parser.add_argument(
        "--private-dir", action="append", default=[], help="made writable by root only"
    )
    args = parser.parse_args(argv)
    serve(args.port, args.key, args.state, args.host, args.private_dir)


if __name__ == "__main__":
    main()
