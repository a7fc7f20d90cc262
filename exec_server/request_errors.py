"""The two ways a request fails that are not the code's doing (``http/errors.py`` maps them)."""

from __future__ import annotations


class RequestError(Exception):
    """The caller asked for something invalid (HTTP 4xx)."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail


class ServiceUnavailable(Exception):
    """The service cannot run code right now (HTTP 503 with Retry-After)."""
