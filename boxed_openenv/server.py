"""The environment served by ``openenv-core``'s own app (HTTP and WebSocket), and its command:
``python -m boxed_openenv --port 8001 --boxed-url http://127.0.0.1:5002``."""

from __future__ import annotations

import argparse
import os
from functools import partial

import uvicorn
from fastapi import FastAPI
from openenv.core.env_server import create_app as openenv_app

from exec_server.client import Client

from .environment import BoxedCodeEnvironment
from .models import CodeAction, CodeObservation


def create_app(boxed_url: str | None = None, max_envs: int = 32) -> FastAPI:
    """``openenv-core``'s app over the environment; every environment shares one boxed
    client (thread-safe, one connection pool)."""
    client = Client(boxed_url or os.environ.get("BOXED_URL"), max_concurrency=max(max_envs, 8))
    factory = partial(BoxedCodeEnvironment, client)
    return openenv_app(
        factory, CodeAction, CodeObservation, env_name="boxed_code", max_concurrent_envs=max_envs
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="boxed-openenv", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--boxed-url", default=None, help="default: $BOXED_URL, else :5002")
    parser.add_argument("--max-envs", type=int, default=32, help="episodes (WebSockets) at once")
    args = parser.parse_args(argv)
    app = create_app(args.boxed_url, args.max_envs)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
