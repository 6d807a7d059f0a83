"""A logged traceback names where and what failed, never what a caller sent: the process
format every VERA entrypoint sets (``configure_logging``) withholds exception messages."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
from collections.abc import Iterator

import pydantic
import pytest

from vera.errors import InvalidInput
from vera.logs import configure_logging

CANARY = "canary-query-7f3a"


@pytest.fixture
def process_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """What the process writes to stderr once configured as an entrypoint configures it."""
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("INFO", "gateway")
    yield stderr
    root.handlers[:] = handlers
    root.setLevel(level)


def validate_limit(raw: str) -> int:
    return pydantic.TypeAdapter(int).validate_python(raw)


def test_a_logged_traceback_keeps_frames_and_types_but_no_message(process_logging) -> None:
    try:
        validate_limit(CANARY)  # pydantic quotes the input: input_value='canary-…'
    except pydantic.ValidationError:
        logging.getLogger("vera.test").exception("tool failed unexpectedly")
    err = process_logging.getvalue()
    assert CANARY not in err
    assert "gateway ERROR vera.test: tool failed unexpectedly" in err
    assert "in validate_limit" in err
    assert "pydantic_core._pydantic_core.ValidationError: message withheld" in err


def test_a_chain_keeps_each_link_and_a_vera_error_its_reason(process_logging) -> None:
    try:
        try:
            raise ValueError(CANARY)
        except ValueError as exc:
            raise InvalidInput("query", f"bad {CANARY}") from exc
    except InvalidInput:
        logging.getLogger("vera.test").exception("refused")
    try:
        try:
            raise KeyError(CANARY)
        except KeyError:
            raise RuntimeError(CANARY)  # noqa: B904 - the implicit context is the point
    except RuntimeError:
        logging.getLogger("vera.test").exception("failed while handling")
    err = process_logging.getvalue()
    assert CANARY not in err
    assert "builtins.ValueError: message withheld" in err
    assert "direct cause of the following exception" in err
    assert "vera.errors.InvalidInput(INVALID_INPUT): message withheld" in err
    assert "builtins.KeyError: message withheld" in err
    assert "During handling of the above exception" in err
    assert "builtins.RuntimeError: message withheld" in err


def test_a_task_groups_members_are_each_named(process_logging) -> None:
    async def fails() -> None:
        raise OSError(CANARY)

    async def gathered() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(fails())

    try:
        asyncio.run(gathered())
    except ExceptionGroup:
        logging.getLogger("vera.test").exception("background loop failed")
    err = process_logging.getvalue()
    assert CANARY not in err
    assert "builtins.ExceptionGroup: message withheld" in err
    assert "in fails" in err
    assert "builtins.OSError: message withheld" in err
