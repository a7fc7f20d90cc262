"""The two ways a request fails that are not the code's doing (``http/errors.py`` maps them)."""

from __future__ import annotations

from scorer.outcome import FailureCode


class RequestError(Exception):
    """The caller asked for something invalid (HTTP 4xx); ``field``: the body field it is
    about, listed in the answer's ``errors`` as a validation error would be."""

    def __init__(self, status_code: int, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail
        self.field = field


class ServiceUnavailable(Exception):
    """The service cannot run code right now (HTTP 503 with Retry-After); ``code`` says why,
    for the answer's ``failure`` (docs/failures.md)."""

    def __init__(self, detail: str, code: FailureCode = FailureCode.SANDBOX_UNAVAILABLE) -> None:
        super().__init__(detail)
        self.code = code
