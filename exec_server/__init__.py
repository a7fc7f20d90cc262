"""boxed execution service: run model-written code in throwaway, locked-down sandboxes.

Importing this package stays cheap: Docker, FastAPI and sympy are only imported by the
modules that need them (``exec_server.app``, ``exec_server.sandbox``...).
"""

__version__ = "0.1.0"  # the one place it is written: pyproject.toml and the app read it
