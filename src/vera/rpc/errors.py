"""Maps VeraError to a gRPC status carrying exactly one google.rpc.ErrorInfo, and back."""

from __future__ import annotations

import logging

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from vera.errors import (
    ERROR_DOMAIN,
    ERRORS_BY_REASON,
    InvalidInput,
    Unauthenticated,
    Unauthorized,
    Unavailable,
    VeraError,
)

log = logging.getLogger(__name__)

# ErrorInfo metadata ``credential`` of a refused internal assertion or calling component
# (vera.rpc.auth), which tells it apart from an end user's failed authentication.
INTERNAL_CREDENTIAL = "internal"


def to_rpc_status(error: VeraError) -> grpc.Status:
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(
        code=code_pb2.Code.Value(error.status), message=error.message, details=[detail]
    )
    return rpc_status.to_status(status)


def error_info(error: grpc.aio.AioRpcError | grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    # Raised RPC errors are also grpc.Call objects at runtime; the stubs type them apart.
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


def from_rpc_error(error: grpc.aio.AioRpcError) -> VeraError:
    """Rebuilds the domain error a service raised; transport failures become Unavailable."""
    info = error_info(error)
    if info is None or info.domain != ERROR_DOMAIN:
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return Unavailable(f"service call failed: {error.code().name}")
        return VeraError(f"service call failed: {error.code().name}")
    cls = ERRORS_BY_REASON.get(info.reason, VeraError)
    metadata = dict(info.metadata)
    if (cls in (Unauthenticated, Unauthorized)
            and metadata.get("credential") == INTERNAL_CREDENTIAL):
        # The service refused this process's own assertion or component: a deployment
        # fault, never the end user's, so callers must not answer it as a failed login.
        log.warning("an internal call was refused (%s): check VERA_RPC__AUTH_KEY and "
                    "vera.rpc.callers", metadata.get("reason", "unknown"))
        return VeraError("internal call refused", **metadata)
    if cls is InvalidInput:
        field = metadata.pop("field", "")
        err: VeraError = InvalidInput(field, error.details() or "", **metadata)
    else:
        err = cls(error.details() or "", **metadata)
    return err
