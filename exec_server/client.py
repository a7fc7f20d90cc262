"""The Python client, under its old import path: it lives in :mod:`boxed_client` now.

``from exec_server.client import Client`` keeps working; new code writes
``from boxed_client import Client``, which installs without the server (httpx and pydantic
only). This module re-exports, it defines nothing.
"""

from __future__ import annotations

from boxed_client import *  # noqa: F403  (every public name, loaded here at once)
from boxed_client import __all__ as __all__
