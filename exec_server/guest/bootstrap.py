"""Installs the guest modules from ``argv[1]`` (name -> source, packed as
``protocol.pack_sources`` packs it: JSON, zlib, base64) as the package
``boxed_guest`` and runs the configuration's ``program`` (``supervisor`` unless it says
``session``, or ``zygote`` when the supervisor starts one) with the configuration in
``argv[2]`` (JSON: ``protocol.GuestConfig``, refused when its version is not the guest's).

The sandbox image holds only an interpreter and packages; the guest programs come with each
container's command, so the host and the sandbox can never run different protocol versions.

With ``socket`` in the configuration, the program is served over a unix socket instead of the
engine's attach stream (fewer copies: no dockerd or containerd-shim between the two ends). It
listens on that path, in a directory only root can enter, until either the host connects,
from outside the container (through ``/proc/<pid>/root``), or the host writes a byte on stdin
to say that it cannot and keeps the attach stream. The connection then becomes the program's
stdin and stdout, the path is removed and the listener closed, all before the program starts:
no snippet ever runs while anyone could connect.

The program runs with an empty environment: it starts itself again without one when it has
any (as the engine starts it), since what ``/proc/<pid>/environ`` shows is the initial stack,
which gVisor before ``release-20251215.0`` shows every uid. The environment its snippets get is
the configuration's ``env`` (also for the zygotes, which the supervisor starts with none).
"""

import base64
import json
import os
import select
import socket
import sys
import types
import zlib


def start_again_without_environment():
    """Exec this program again with an empty environment, unless it has none already.
    ``-X utf8=0`` keeps the interpreter as ``LANG=C.UTF-8`` set it up: without a locale in the
    environment Python would turn its UTF-8 mode on (``sys.flags.utf8_mode``)."""
    with open("/proc/self/environ", "rb") as f:
        if not f.read(1):
            return
    utf8 = [] if "utf8" in sys._xoptions else ["-X", "utf8=0"]
    os.execve(sys.executable, [sys.executable, *utf8, *sys.orig_argv[1:]], {})


def serve_over_socket(path):
    """Make a connection to ``path`` stdin and stdout, unless the host keeps the attach stream
    (its byte on stdin), or went away (end of stdin: exit)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    ready, _, _ = select.select([listener, 0], [], [])
    if listener in ready:
        connection, _ = listener.accept()
        os.dup2(connection.fileno(), 0)
        os.dup2(connection.fileno(), 1)
        connection.close()
    elif not os.read(0, 1):
        os._exit(0)
    listener.close()
    os.unlink(path)


start_again_without_environment()
package = types.ModuleType("boxed_guest")
package.__path__ = []
# the supervisor starts its zygotes with some of them
package.sources = json.loads(zlib.decompress(base64.b64decode(sys.argv[1])))
sys.modules["boxed_guest"] = package
for name, source in package.sources.items():
    module = types.ModuleType(f"boxed_guest.{name}")
    module.__package__ = "boxed_guest"
    sys.modules[module.__name__] = module
    exec(compile(source, f"<boxed_guest/{name}.py>", "exec"), module.__dict__)
    setattr(package, name, module)
del name, source, module
config = package.protocol.GuestConfig.from_wire(json.loads(sys.argv[2]))  # checks the version
if config.socket:
    serve_over_socket(config.socket)
os.environ.clear()  # the interpreter's own (its locale coercion sets LC_CTYPE)
os.environ.update(entry.split("=", 1) for entry in config.env)
getattr(package, config.program).main(config)
