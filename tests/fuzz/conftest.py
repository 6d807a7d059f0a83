"""Hypothesis profiles of the hostile-input suites: ``vera-fuzz`` (the default here, what
CI runs: few examples per tool, derandomized, so a failure reproduces on every run) and
``vera-fuzz-deep`` (random, many examples, for a longer hunt:
``pytest tests/fuzz --hypothesis-profile=vera-fuzz-deep``). The suites' stack and client
helpers are ``fuzz_stack``; ``stack`` is the one this package's fuzz and transport
modules share (the hostile corpus runs its own, with quotas on)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fuzz_stack import running_stack
from hypothesis import HealthCheck, settings

from vera.stack.launcher import LaunchedStack

# Schema-generated arguments take a real round trip each, so Hypothesis' speed checks
# would only ever measure the stack.
_SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "vera-fuzz",
    max_examples=10,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=_SLOW_IS_FINE,
)
settings.register_profile(
    "vera-fuzz-deep",
    max_examples=300,
    deadline=None,
    suppress_health_check=_SLOW_IS_FINE,
)


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaunchedStack]:
    """The widest tool profile (it serves every tool of every profile), quotas and the REST
    API's rate limits out of reach so the fuzzer's volume meets the tools and routes rather
    than their buckets, and 1 s body and header timeouts on
    both HTTP fronts so the slow-loris checks finish quickly."""
    data_dir = tmp_path_factory.mktemp("fuzz-stack") / "data"
    with running_stack(
        data_dir,
        VERA_MCP__TOOL_PROFILE="compatibility",
        VERA_MCP__QUOTA_ENABLED="false",
        VERA_API__REQUESTS_PER_MINUTE_PER_KEY="1000000",
        VERA_API__REQUESTS_PER_MINUTE_PER_ADDRESS="1000000",
        VERA_MCP__BODY_TIMEOUT_SECONDS="1",
        VERA_API__BODY_TIMEOUT_SECONDS="1",
        VERA_MCP__HEADER_TIMEOUT_SECONDS="1",
        VERA_API__HEADER_TIMEOUT_SECONDS="1",
    ) as running:
        yield running
