"""Client channels: every call gets a deadline and, with the deployment's key, the
caller's internal assertion; reads are retried on UNAVAILABLE (``vera.rpc.retries``);
failures come back as VeraError."""

from __future__ import annotations

import grpc
from pydantic import SecretStr

from vera.observability import tracing
from vera.rpc.auth import METADATA_KEY, AssertionSigner, audience_of
from vera.rpc.errors import from_rpc_error
from vera.rpc.retries import CHANNEL_OPTIONS


class _CallPolicy(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, deadline_seconds: float, signer: AssertionSigner | None) -> None:
        self._deadline = deadline_seconds
        self._signer = signer

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        if client_call_details.timeout is None:
            client_call_details = client_call_details._replace(timeout=self._deadline)
        if self._signer is not None:
            metadata = grpc.aio.Metadata(*(client_call_details.metadata or ()))
            method = client_call_details.method
            path = method.decode("ascii") if isinstance(method, bytes) else method
            metadata[METADATA_KEY] = self._signer.header(audience_of(path))
            client_call_details = client_call_details._replace(metadata=metadata)
        call = await continuation(client_call_details, request)
        try:
            return await call
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None


def open_channel(
    address: str,
    deadline_seconds: float,
    *,
    auth_key: SecretStr | None = None,
    caller: str = "cli",
) -> grpc.aio.Channel:
    """A channel whose calls default to ``deadline_seconds`` and raise VeraError. With
    ``auth_key`` every call carries an assertion naming ``caller`` (gateway, api,
    retrieval, snapshot, cli) for the service it calls, minted once per channel and
    service and renewed before it expires.
    Reads that meet UNAVAILABLE are retried within that deadline (``vera.rpc.retries``)."""
    signer = AssertionSigner(auth_key, caller) if auth_key is not None else None
    return grpc.aio.insecure_channel(
        address,
        options=CHANNEL_OPTIONS,
        # The client span (tracing on) inside the policy: it sees the call's own status.
        interceptors=[_CallPolicy(deadline_seconds, signer), *tracing.grpc_client_interceptors()],
    )
