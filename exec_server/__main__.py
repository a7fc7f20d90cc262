"""Command line: `python -m exec_server [serve] [--host H] [--port P]` and `healthcheck`.

Images are built from a source checkout: `python -m tools.build_image` (docs/sandbox-image.md).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time


def _serve(args: argparse.Namespace) -> int:

    import uvicorn

    from .app import create_app
    from .http_edge import server_config
    from .logging_filters import LOG_DATE_FORMAT, LOG_FORMAT, uvicorn_log_config
    from .settings import Settings

    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    settings = Settings(**overrides)
    logging.Formatter.converter = time.gmtime  # the lines' timestamps are UTC ("Z")
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT, datefmt=LOG_DATE_FORMAT)
    config = server_config(
        create_app(settings),
        settings,
        log_level=args.log_level,
        log_config=uvicorn_log_config(settings.access_log),  # no line for a passing probe
        access_log=settings.access_log != "off",
        timeout_graceful_shutdown=settings.timeout_max + 5,
    )
    uvicorn.Server(config).run()
    return 0


def _healthcheck(args: argparse.Namespace) -> int:
    """Exit 0 when the local service is ready (for container healthchecks)."""
    import urllib.request

    from .settings import Settings

    port = args.port if args.port is not None else Settings().port
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as response:
            return 0 if response.status == 200 else 1
    except OSError as exc:
        print(f"not ready: {url}: {exc}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exec_server")
    sub = parser.add_subparsers(dest="command")
    for p in (parser, sub.add_parser("serve", help="run the HTTP service (default)")):
        p.add_argument("--host", default=None, help="default 127.0.0.1 (BOXED_HOST)")
        p.add_argument("--port", type=int, default=None, help="default 5002 (BOXED_PORT)")
        p.add_argument("--log-level", default="info")
    health = sub.add_parser("healthcheck", help="exit 0 when the local service is ready")
    health.add_argument("--timeout", type=float, default=3.0)
    # SUPPRESS: given before the command (``--port N healthcheck``) it is kept, not reset
    health.add_argument("--port", type=int, default=argparse.SUPPRESS, help="default 5002")
    args = parser.parse_args(argv)
    if args.command == "healthcheck":
        return _healthcheck(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
