"""boxed execution service: run model-written code in throwaway, locked-down sandboxes.

Importing this package stays cheap: Docker, FastAPI and sympy are only imported by the
modules that need them (``exec_server.app``, ``exec_server.sandbox``...).
"""

from boxed_client import __version__  # written once, in the client's package: both share it

__all__ = ["__version__"]
