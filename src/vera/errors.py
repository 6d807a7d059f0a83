"""One error hierarchy for every service; the domain raises these and nothing else.

Each error carries a stable UPPER_SNAKE ``reason`` (the ErrorInfo reason on the wire)
and a transport-neutral ``status`` name. ``vera.rpc.errors`` maps them to gRPC in one
place; the gateway maps reasons to the seed's MCP error codes in one place.
"""

from __future__ import annotations

from typing import ClassVar

ERROR_DOMAIN = "vera.dev"


class VeraError(Exception):
    reason: ClassVar[str] = "INTERNAL"
    status: ClassVar[str] = "INTERNAL"  # a grpc.StatusCode name

    def __init__(self, message: str = "", **metadata: object) -> None:
        super().__init__(message or self.reason.lower())
        self.message = message or self.reason.lower()
        # ErrorInfo metadata is string -> string; lists travel comma-joined.
        self.metadata: dict[str, str] = {
            key: ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            for key, value in metadata.items()
            if value is not None
        }


class InvalidInput(VeraError):
    """An argument is out of range or refers to nothing. ``field`` names it."""

    reason = "INVALID_INPUT"
    status = "INVALID_ARGUMENT"

    def __init__(self, field: str, message: str = "", **metadata: object) -> None:
        super().__init__(message or f"invalid value for {field}", field=field, **metadata)
        self.field = field


class NotFound(VeraError):
    reason = "NOT_FOUND"
    status = "NOT_FOUND"


class AmbiguousProject(VeraError):
    reason = "AMBIGUOUS_PROJECT"
    status = "FAILED_PRECONDITION"


class ProjectOutOfScope(VeraError):
    reason = "PROJECT_OUT_OF_SCOPE"
    status = "PERMISSION_DENIED"


class ExpiredContextPack(VeraError):
    reason = "EXPIRED_CONTEXT_PACK"
    status = "NOT_FOUND"


class UnsupportedVersion(VeraError):
    reason = "UNSUPPORTED_VERSION"
    status = "FAILED_PRECONDITION"


class Unauthenticated(VeraError):
    reason = "UNAUTHENTICATED"
    status = "UNAUTHENTICATED"


class Unauthorized(VeraError):
    reason = "UNAUTHORIZED"
    status = "PERMISSION_DENIED"


class QuotaExceeded(VeraError):
    reason = "QUOTA_EXCEEDED"
    status = "RESOURCE_EXHAUSTED"


class Unavailable(VeraError):
    """A dependency (a service, the database, the model) cannot be reached."""

    reason = "UNAVAILABLE"
    status = "UNAVAILABLE"


ERRORS_BY_REASON: dict[str, type[VeraError]] = {
    cls.reason: cls
    for cls in (
        VeraError,
        InvalidInput,
        NotFound,
        AmbiguousProject,
        ProjectOutOfScope,
        ExpiredContextPack,
        UnsupportedVersion,
        Unauthenticated,
        Unauthorized,
        QuotaExceeded,
        Unavailable,
    )
}
