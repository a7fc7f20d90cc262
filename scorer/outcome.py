"""Whose result an answer is: the code's, the infrastructure's, or the grader's.

The taxonomy is part of the wire a client reads, so its one home is
:mod:`boxed_client.outcome` (stdlib only: importing it does not import httpx); the scorer and the
service import it from here, as before.
"""

from __future__ import annotations

from boxed_client.outcome import (
    KIND,
    RETRYABLE,
    Failure,
    FailureCode,
    OutcomeKind,
    outcome_fields,
)

__all__ = ["KIND", "RETRYABLE", "Failure", "FailureCode", "OutcomeKind", "outcome_fields"]
