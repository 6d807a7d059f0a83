"""Client channels: every call gets a deadline and failures come back as VeraError."""

from __future__ import annotations

import grpc

from vera.rpc.errors import from_rpc_error


class _DeadlineAndErrors(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, deadline_seconds: float) -> None:
        self._deadline = deadline_seconds

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        if client_call_details.timeout is None:
            client_call_details = client_call_details._replace(timeout=self._deadline)
        call = await continuation(client_call_details, request)
        try:
            return await call
        except grpc.aio.AioRpcError as exc:
            raise from_rpc_error(exc) from None


def open_channel(address: str, deadline_seconds: float) -> grpc.aio.Channel:
    """A channel whose calls default to ``deadline_seconds`` and raise VeraError."""
    return grpc.aio.insecure_channel(
        address, interceptors=[_DeadlineAndErrors(deadline_seconds)]
    )
