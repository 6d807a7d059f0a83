"""Runs the real stack (`vera up`) as a user would, in a temporary data dir, through the one
launcher (``vera.stack.launcher.launch``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vera.stack.launcher import LaunchedStack, launch, launch_env


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("stack") / "data"
    with launch(data_dir) as running:
        yield running


# The authenticated profile (tests/e2e/test_auth_flow.py): built-in JWT verification and
# open registration, so the documented register -> API key -> mcp-token flow runs end to end.
AUTH_SECRET = "e2e-shared-mcp-signing-secret-0123456789abcdef"
AUTH_ISSUER = "https://auth.vera.e2e"
AUTH_AUDIENCE = "https://mcp.vera.e2e"


@pytest.fixture(scope="module")
def auth_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    data_dir = tmp_path_factory.mktemp("auth-stack") / "data"
    env = launch_env(
        data_dir,
        VERA_API__OPEN_REGISTRATION="true",
        VERA_MCP__JWT_SECRET=AUTH_SECRET,
        VERA_MCP__AUTH_ISSUER=AUTH_ISSUER,
        VERA_MCP__AUTH_AUDIENCE=AUTH_AUDIENCE,
    )
    with launch(data_dir, env) as running:
        yield running
