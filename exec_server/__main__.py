"""Command line: `python -m exec_server [serve] [--host H] [--port P]` and `build-image`."""

from __future__ import annotations

import argparse
import sys


def _serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from .app import create_app
    from .settings import Settings

    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    settings = Settings(**overrides)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(levelname)s:     %(name)s %(message)s"
    )
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        timeout_graceful_shutdown=settings.timeout_max + 5,
    )
    return 0


def _build_image(args: argparse.Namespace) -> int:
    from .image import build_sandbox_image
    from .settings import Settings

    tag = args.tag or Settings().sandbox_image
    build_sandbox_image(tag, offline=args.offline, base=args.base)
    print(f"built {tag}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exec_server")
    sub = parser.add_subparsers(dest="command")
    for p in (parser, sub.add_parser("serve", help="run the HTTP service (default)")):
        p.add_argument("--host", default=None, help="default 127.0.0.1 (BOXED_HOST)")
        p.add_argument("--port", type=int, default=None, help="default 5002 (BOXED_PORT)")
        p.add_argument("--log-level", default="info")
    image = sub.add_parser("build-image", help="build the sandbox image")
    image.add_argument("--offline", action="store_true", help="base from Debian packages")
    image.add_argument("--base", default=None, help="base image (build argument BASE)")
    image.add_argument("--tag", default=None, help="default BOXED_SANDBOX_IMAGE")
    args = parser.parse_args(argv)
    if args.command == "build-image":
        return _build_image(args)
    return _serve(args)


if __name__ == "__main__":
    sys.exit(main())
