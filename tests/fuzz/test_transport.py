"""Hostile HTTP around the MCP endpoint and the REST API of the real stack (`vera up`).

Each refused request must be answered as it should and leave nothing behind: every
malformed request here carries a ``knowledge_propose`` with its own ``task_ref``, and the
proposal report, which records every attempt that reached the tool, must hold none of
them. Already covered elsewhere, and not repeated here: an oversize declared body (MCP:
tests/gateway/test_auth_attacks.py::test_an_oversized_body_is_413_before_any_lookup; REST:
tests/api/test_body_bounds.py), a body nested past the parser's limit
(tests/gateway/test_http.py::test_a_deeply_nested_body_is_a_parse_error_not_a_crash),
Host and Origin on in-process apps (tests/gateway/test_http.py, tests/api/
test_browser_attacks.py), and the REST API's content types (test_browser_attacks.py).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fuzz_stack import api_url, mcp_session, serving
from harness import without_ids

from vera.stack.launcher import LaunchedStack

pytestmark = pytest.mark.e2e

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
JSON_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
BODY_TIMEOUT_SECONDS = 1.0  # the package stack's VERA_*__BODY_TIMEOUT_SECONDS
HEADER_TIMEOUT_SECONDS = 1.0  # the package stack's VERA_*__HEADER_TIMEOUT_SECONDS
# Standard JSON-RPC codes, and the SDK's header-mismatch code (2026-07-28).
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
HEADER_MISMATCH = -32020


def propose(task_ref: str) -> dict[str, Any]:
    return {
        "subject": "transport-check",
        "predicate": "uses",
        "object": "nothing",
        "task_ref": task_ref,
    }


def tool_call(task_ref: str, *, modern: bool = False, **fields: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "knowledge_propose", "arguments": propose(task_ref)}
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params, **fields}


def attempts(stack: LaunchedStack, task_ref: str) -> int:
    """How many proposals with ``task_ref`` reached the tool (each attempt is recorded)."""
    with mcp_session(stack) as session:
        report = session.call_tool("knowledge_proposal_report", {"task_ref": task_ref})
    return len(report.structured_content["attempts"])


def authorized(stack: LaunchedStack) -> dict[str, str]:
    """JSON_HEADERS and the stack's local MCP token (the gateway refuses a call without)."""
    return {**JSON_HEADERS, "authorization": f"Bearer {stack.mcp_token()}"}


def post(
    stack: LaunchedStack, body: Any, headers: dict[str, str | None], url: str | None = None
) -> httpx.Response:
    """POSTs ``body`` to the stack's MCP endpoint (or ``url``) with its token."""
    merged = {**authorized(stack), **headers}
    sent = {name: value for name, value in merged.items() if value is not None}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url or stack.mcp_url, content=content, headers=sent, timeout=30)


def jsonrpc_code(response: httpx.Response) -> int | None:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def ref() -> str:
    return f"transport-{uuid.uuid4().hex[:12]}"


MALFORMED = {
    # name: (body for a task_ref, HTTP status, JSON-RPC code)
    "not json": (
        lambda r: b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", ' + r.encode(),
        400,
        PARSE_ERROR,
    ),
    "not utf-8": (lambda r: b"\xff\xfe" + json.dumps(tool_call(r)).encode(), 400, PARSE_ERROR),
    "empty": (lambda r: b"", 400, PARSE_ERROR),
    "a bare number": (lambda r: b"42", 400, INVALID_PARAMS),
    "no jsonrpc member": (
        lambda r: {k: v for k, v in tool_call(r).items() if k != "jsonrpc"},
        400,
        INVALID_PARAMS,
    ),
    "jsonrpc 1.0": (lambda r: tool_call(r, jsonrpc="1.0"), 400, INVALID_PARAMS),
    "method not a string": (lambda r: tool_call(r, method=7), 400, INVALID_PARAMS),
    "params an array": (lambda r: tool_call(r, params=[propose(r)]), 400, INVALID_PARAMS),
    "unknown method": (lambda r: tool_call(r, method="tools/run"), 200, METHOD_NOT_FOUND),
    "tool name missing": (
        lambda r: tool_call(r, params={"arguments": propose(r)}),
        200,
        INVALID_PARAMS,
    ),
    "arguments an array": (
        lambda r: tool_call(r, params={"name": "knowledge_propose", "arguments": [propose(r)]}),
        200,
        INVALID_PARAMS,
    ),
    "a batch of two": (lambda r: [tool_call(r), tool_call(r, id=2)], 400, INVALID_PARAMS),
    "a batch of one": (lambda r: [tool_call(r)], 400, INVALID_PARAMS),
    "an empty batch": (lambda r: [], 400, INVALID_PARAMS),
    # A request without an id is a notification: it is accepted and answered with nothing,
    # and must run no tool. An id that is an object makes it one too.
    "a notification": (lambda r: {k: v for k, v in tool_call(r).items() if k != "id"}, 202, None),
    "an object id": (lambda r: tool_call(r, id={"a": 1}), 202, None),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_json_rpc_is_refused_and_runs_no_tool(stack: LaunchedStack, case: str) -> None:
    make, status, code = MALFORMED[case]
    task_ref = ref()
    body = make(task_ref)
    response = post(stack, body, {"mcp-protocol-version": LEGACY})
    assert (response.status_code, jsonrpc_code(response)) == (status, code), response.text
    assert attempts(stack, task_ref) == 0


def test_a_well_formed_call_with_the_same_shape_runs(stack: LaunchedStack) -> None:
    """The control for the malformed cases: the same request, well formed, is one attempt."""
    task_ref = ref()
    response = post(stack, tool_call(task_ref), {"mcp-protocol-version": LEGACY})
    assert response.status_code == 200 and "result" in response.json(), response.text
    assert attempts(stack, task_ref) == 1


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
    ],
)
def test_a_body_that_is_not_json_by_its_content_type_is_415_naming_it(
    stack: LaunchedStack, content_type: str | None
) -> None:
    task_ref = ref()
    response = post(stack, tool_call(task_ref), {"content-type": content_type})
    assert response.status_code == 415
    assert without_ids(response.json()["error"]["data"]) == {
        "code": "invalid_input",
        "field": "content-type",
        "reason": "unsupported_media_type",
    }
    assert attempts(stack, task_ref) == 0


def test_a_client_that_accepts_no_json_is_406_and_runs_no_tool(stack: LaunchedStack) -> None:
    task_ref = ref()
    response = post(stack, tool_call(task_ref), {"accept": "text/html"})
    assert (response.status_code, jsonrpc_code(response)) == (406, INVALID_REQUEST)
    assert attempts(stack, task_ref) == 0


MODERN_HEADERS = {
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "knowledge_propose",
}
MISMATCHES = {
    "method header names another method": {"mcp-method": "tools/list"},
    "no method header": {"mcp-method": None},
    "name header names another tool": {"mcp-name": "knowledge_search"},
}


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_routing_headers_that_disagree_with_the_body_run_no_tool(
    stack: LaunchedStack, case: str
) -> None:
    """On 2026-07-28 the Mcp-Method and Mcp-Name headers route the request; the gateway
    routes by the body. A request whose headers say one thing and body another is refused
    before either path acts on it."""
    task_ref = ref()
    headers = {**MODERN_HEADERS, **MISMATCHES[case]}
    response = post(stack, tool_call(task_ref, modern=True), headers)
    assert (response.status_code, jsonrpc_code(response)) == (400, HEADER_MISMATCH)
    assert attempts(stack, task_ref) == 0
    agreeing = post(stack, tool_call(task_ref, modern=True), MODERN_HEADERS)
    assert agreeing.status_code == 200 and "result" in agreeing.json(), agreeing.text
    assert attempts(stack, task_ref) == 1


def test_a_discovery_body_under_a_tool_call_header_is_refused(stack: LaunchedStack) -> None:
    listing = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {"_meta": tool_call("x", modern=True)["params"]["_meta"]},
    }
    response = post(stack, listing, MODERN_HEADERS)
    assert (response.status_code, jsonrpc_code(response)) == (400, HEADER_MISMATCH)


def test_a_streamed_body_past_the_limit_is_413_while_it_streams(stack: LaunchedStack) -> None:
    """No Content-Length to refuse it by: it is cut off once it passes 1 MiB."""
    task_ref = ref()
    prefix = json.dumps(tool_call(task_ref))[:-2].encode()

    def chunks():
        yield prefix
        for _ in range(40):
            yield b" " * 64 * 1024

    response = httpx.post(stack.mcp_url, content=chunks(), headers=authorized(stack), timeout=30)
    assert response.status_code == 413
    assert without_ids(response.json()["error"]["data"]) == {
        "code": "invalid_input",
        "field": "body",
        "reason": "too_large",
    }
    assert attempts(stack, task_ref) == 0


def endpoints(stack: LaunchedStack) -> dict[str, str]:
    return {"mcp": stack.mcp_url, "rest": f"{api_url(stack)}/identity/mcp-token"}


@pytest.mark.parametrize("front", ["mcp", "rest"])
def test_a_foreign_host_is_421_and_a_foreign_origin_403_on_the_running_fronts(
    stack: LaunchedStack, front: str
) -> None:
    """What `vera up` configured for each front, checked on the running processes."""
    task_ref = ref()
    url = endpoints(stack)[front]
    body = tool_call(task_ref) if front == "mcp" else {}
    assert post(stack, body, {"host": "evil.example"}, url).status_code == 421
    assert post(stack, body, {"origin": "http://evil.example"}, url).status_code == 403
    port = urlsplit(url).port
    assert post(stack, body, {"origin": f"http://localhost:{port + 1}"}, url).status_code == 403
    assert attempts(stack, task_ref) == 0


def trickle(url: str, *, declared: int, pause: float, limit: float,
            token: str = "") -> tuple[bytes, float]:
    """Sends the headers of a POST declaring ``declared`` body bytes (with ``token``, if
    given), then one byte each ``pause`` seconds until the server answers (or ``limit``
    passes); the answer's raw bytes and how long after the headers it came."""
    parts = urlsplit(url)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        + (f"Authorization: Bearer {token}\r\n" if token else "")
        + f"Content-Length: {declared}\r\n\r\n"
    ).encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=limit) as sock:
        # Stamped before the headers go: the server's clock starts once it has read them,
        # which on a busy machine can come before this process runs its next line.
        started = time.monotonic()
        sock.sendall(head)
        sent = 0
        while time.monotonic() - started < limit:
            readable, _, _ = select.select([sock], [], [], pause)
            if readable:
                answered = time.monotonic() - started
                # One more byte after the answer: a server that kept the connection open
                # would wait for the rest of the body for as long as bytes keep coming,
                # and the read below would run into the socket's timeout.
                with contextlib.suppress(OSError):
                    sock.sendall(b" ")
                answer = b""
                with contextlib.suppress(ConnectionResetError):
                    while chunk := sock.recv(65536):
                        answer += chunk
                return answer, answered
            if sent < declared - 1:
                try:
                    sock.sendall(b" ")
                except OSError:
                    pass
                sent += 1
    return b"", limit


@pytest.mark.parametrize("front", ["mcp", "rest"])
def test_a_body_trickled_in_is_cut_off_with_408(stack: LaunchedStack, front: str) -> None:
    """Slow loris: a client that keeps sending a byte now and then would hold its
    connection (and its buffer) for ever; the whole body must arrive within the body
    timeout, or the request ends with 408 invalid_input naming the body."""
    # The gateway checks the token before it reads a body: a trickle needs a valid one.
    token = stack.mcp_token() if front == "mcp" else ""
    answer, after = trickle(endpoints(stack)[front], declared=10_000, pause=0.2, limit=30,
                            token=token)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer[:200]
    # Cut off by the body timeout (408, reason timeout) within the trickle's 30 s, while
    # bytes kept coming: not before the timeout, and no stopwatch bound after it.
    assert after >= BODY_TIMEOUT_SECONDS
    error = json.loads(body)["error"]
    if front == "mcp":
        error = error["data"]
    assert (error["code"], error["field"], error["reason"]) == ("invalid_input", "body", "timeout")
    assert not serving(stack)


@pytest.mark.parametrize("front", ["mcp", "rest"])
def test_headers_trickled_in_are_cut_off(stack: LaunchedStack, front: str) -> None:
    """Slow loris on the headers: uvicorn arms no timer before a request's headers are
    whole, so a client sending a header byte now and then held its connection for ever.
    The front closes it once the header timeout has passed, whatever keeps coming."""
    parts = urlsplit(endpoints(stack)[front])
    started = time.monotonic()
    closed_after = None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode())
        while time.monotonic() - started < 30:
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable:
                with contextlib.suppress(ConnectionResetError):
                    if sock.recv(65536):
                        continue
                closed_after = time.monotonic() - started
                break
            with contextlib.suppress(OSError):
                sock.sendall(b"X-Slow: a\r\n")
    # Closed while header bytes kept coming (on main: still open after 30 s), and not
    # before the header timeout.
    assert closed_after is not None
    # asyncio may run a timer up to its clock's resolution early (seen: 0.99997 s).
    assert closed_after >= HEADER_TIMEOUT_SECONDS - 0.01


def test_a_body_sent_in_pieces_within_the_timeout_is_served(stack: LaunchedStack) -> None:
    task_ref = ref()
    body = json.dumps(tool_call(task_ref)).encode()

    def pieces():
        for start in range(0, len(body), len(body) // 3 + 1):
            yield body[start : start + len(body) // 3 + 1]
            time.sleep(0.1)

    response = httpx.post(stack.mcp_url, content=pieces(), headers=authorized(stack), timeout=30)
    assert response.status_code == 200 and "result" in response.json(), response.text
    assert attempts(stack, task_ref) == 1


@pytest.mark.parametrize("front", ["mcp", "rest"])
def test_a_refusal_on_the_headers_closes_the_connection_its_body_was_due_on(
    stack: LaunchedStack, front: str
) -> None:
    """A foreign Host is refused before the body is read; the connection closes with the
    answer, so a client that goes on sending the body holds nothing."""
    parts = urlsplit(endpoints(stack)[front])
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: evil.example\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "Content-Length: 10000\r\n\r\n"
    ).encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head + b" ")
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
                with contextlib.suppress(OSError):
                    sock.sendall(b" ")  # the body goes on coming
    assert answer.startswith(b"HTTP/1.1 421"), answer[:200]
    assert b"connection: close" in answer.partition(b"\r\n\r\n")[0].lower()
