"""Quotas hold exactly under concurrency across two gateway replicas: two more gateway
processes (``python -m vera.entrypoints.mcp.main``, as `vera up` and the chart run it)
over the running stack's services, each with a small read quota, take a burst of
concurrent calls from one principal; exactly the quota's worth succeed, split however the
replicas raced, and every other call is refused with ``quota_exceeded`` (bucket read).

The count lives in identity's PostgreSQL (``gateway/shared_quota.py``: one upsert that
refuses at the limit), which is why two processes cannot both take the last unit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ is a top-level folder, not part of the package
    sys.path.insert(0, str(ROOT))

from bench.gateway_overhead import MODERN, request_body, request_headers  # noqa: E402
from vera.api.identity import mint_mcp_token  # noqa: E402
from vera.config import load_settings  # noqa: E402
from vera.identity.v1 import identity_pb2  # noqa: E402
from vera.rpc.backends import Backends  # noqa: E402
from vera.stack.ports import free_port  # noqa: E402
from vera.stack.run_files import read_stack_file, stack_client_settings  # noqa: E402

pytestmark = pytest.mark.e2e

QUOTA = 7
CALLS = 40
WINDOW_S = 60  # the read bucket's fixed window (vera/quota.py)
BURST_MARGIN_S = 12  # the burst must not straddle a window boundary


@contextlib.contextmanager
def replicas(stack, count: int) -> Iterator[list[str]]:
    """``count`` gateway processes over the stack's services; yields their MCP URLs."""
    info = read_stack_file(stack.data_dir)
    assert info is not None
    key = (stack.data_dir / "run" / "rpc.key").read_text().strip()
    processes: list[subprocess.Popen] = []
    urls = []
    try:
        for n in range(count):
            port = free_port()
            env = {
                **stack.env,
                "VERA_RPC__AUTH_KEY": key,
                "VERA_MCP__PORT": str(port),
                "VERA_OBSERVABILITY__MCP_METRICS_PORT": str(free_port()),
                "VERA_MCP__QUOTA_READ_PER_MINUTE": str(QUOTA),
                **{
                    f"VERA_SERVICES__{name.upper()}": address
                    for name, address in info["services"].items()
                },
            }
            log = (stack.data_dir.parent / f"replica-{n}.log").open("ab")
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "vera.entrypoints.mcp.main"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
        give_up = time.monotonic() + 60
        for url, process in zip(urls, processes, strict=True):
            while True:
                assert process.poll() is None, f"replica at {url} exited"
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                assert time.monotonic() < give_up, f"replica at {url} never served"
                time.sleep(0.2)
        yield [f"{url}/mcp" for url in urls]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def new_principal(stack) -> str:
    settings = stack_client_settings(load_settings(), stack.data_dir)
    backends = Backends.open(settings, caller="cli")
    try:
        user = await backends.identity.CreateUser(
            identity_pb2.CreateUserRequest(display_name="quota burst")
        )
        key = await backends.identity.CreateApiKey(
            identity_pb2.CreateApiKeyRequest(principal_id=user.principal.principal_id)
        )
    finally:
        await backends.close()
    # Signed as the stack's gateways verify: its issuer settings are in its environment.
    issuer = load_settings(
        mcp={
            "jwt_secret": stack.env["VERA_MCP__JWT_SECRET"],
            "auth_issuer": stack.env["VERA_MCP__AUTH_ISSUER"],
            "auth_audience": stack.env["VERA_MCP__AUTH_AUDIENCE"],
        }
    )
    return mint_mcp_token(
        issuer, user.principal.principal_id, ["memory:read"], key_id=key.key.key_id
    ).token


async def search(http: httpx.AsyncClient, url: str, token: str) -> tuple[str, str | None]:
    """(outcome, bucket): ``ok``, or the MCP ``data.code`` and ``data.bucket``."""
    tool = "knowledge_search"
    headers = request_headers(tool, MODERN, token)
    response = await http.post(
        url, headers=headers, json=request_body(tool, MODERN, {"query": "who owns billing"})
    )
    message = response.json()
    if "error" in message:
        data = message["error"]["data"]
        return data["code"], data.get("bucket")
    assert response.status_code == 200 and not message["result"].get("isError"), message
    return "ok", None


async def wait_for_room_in_the_window() -> None:
    left = WINDOW_S - time.time() % WINDOW_S
    if left < BURST_MARGIN_S:
        await asyncio.sleep(left + 0.5)


async def test_a_concurrent_burst_over_two_replicas_gets_exactly_the_quota(auth_stack):
    token, bystander = await new_principal(auth_stack), await new_principal(auth_stack)
    with replicas(auth_stack, 2) as (a, b):
        limits = httpx.Limits(max_connections=CALLS, max_keepalive_connections=CALLS)
        async with httpx.AsyncClient(timeout=60, limits=limits) as http:
            # Warm both replicas' channels with another principal, so the burst races on
            # the counter and not on connection setup.
            assert await search(http, a, bystander) == ("ok", None)
            assert await search(http, b, bystander) == ("ok", None)
            await wait_for_room_in_the_window()
            window = int(time.time() // WINDOW_S)
            outcomes = await asyncio.gather(
                *(search(http, (a, b)[n % 2], token) for n in range(CALLS))
            )
            assert int(time.time() // WINDOW_S) == window, "the burst straddled a window"
            counted = Counter(outcomes)
            assert counted == {("ok", None): QUOTA, ("quota_exceeded", "read"): CALLS - QUOTA}, (
                json.dumps({f"{code}/{bucket}": n for (code, bucket), n in counted.items()})
            )
            # Spent for both replicas; the bystander's own budget is untouched by the burst.
            assert await search(http, a, token) == ("quota_exceeded", "read")
            assert await search(http, b, token) == ("quota_exceeded", "read")
            assert await search(http, b, bystander) == ("ok", None)
