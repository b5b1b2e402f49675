"""Error codes of the HTTP contract (SPEC C9) and the exception that carries them."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Envelope ``code`` values; the HTTP status mirrors the class (``http_status``)."""

    OK = 0
    NO_RELEVANT_MEMORY = 20001
    BAD_PARAMETER = 40001
    SENSITIVE_CONTENT_REFUSED = 40004
    UNAUTHENTICATED = 40101
    MEMORY_SWITCHED_OFF = 40301
    CROSS_APP_NOT_ENABLED = 40302
    FORBIDDEN = 40303
    NOT_FOUND = 40401
    CAPACITY_FULL = 42901
    IMPORTANT_LIMIT_EXCEEDED = 42902
    RATE_LIMITED = 42903
    EXTRACTION_FAILED = 50001
    DEPENDENCY_UNAVAILABLE = 50301
    RECALL_TIMEOUT = 50401

    @property
    def http_status(self) -> int:
        """HTTP status for this code: the first three digits, 200 for every 0xxxx/2xxxx code."""
        status = self.value // 100
        return 200 if status < 300 else status


class EngramError(Exception):
    """A failure with a contract error code and a message safe to show to callers."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"EngramError({self.code.name}, {self.message!r})"

    def __reduce__(self) -> tuple[type[EngramError], tuple[ErrorCode, str]]:
        # Crossing a process boundary (Ray) rebuilds the exception from these, code included.
        return (EngramError, (self.code, self.message))
