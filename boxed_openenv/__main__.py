"""``python -m boxed_openenv`` (and ``boxed-openenv``): the server, or one clear line when
the openenv extra is missing."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from boxed_openenv.server import main as serve
    except ModuleNotFoundError as exc:  # openenv-core is an extra: say which, not a traceback
        if exc.name is None or not exc.name.startswith("openenv"):
            raise
        from boxed_openenv import EXTRA_MISSING

        sys.exit(EXTRA_MISSING.format(missing=exc.name))
    serve()


if __name__ == "__main__":
    main()
