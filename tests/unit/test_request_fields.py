"""vera.request_fields: one parse per kind of request field, one error per bad value."""

from __future__ import annotations

import uuid

import pytest

from vera.errors import InvalidInput
from vera.request_fields import (
    MAX_UUID_TEXT,
    as_uuid,
    optional_uuid,
    page_size,
    parse_uuid,
    parse_uuids,
)

ID = uuid.UUID("7c9e6679-7425-40de-944b-e07fc1f90ae7")


def _refusal(call) -> tuple[str, str]:
    with pytest.raises(InvalidInput) as caught:
        call()
    return caught.value.field, caught.value.metadata["reason"]


def test_a_uuid_reads_with_the_padding_a_client_left() -> None:
    assert parse_uuid("scope_id", f" {ID}\n") == ID
    assert optional_uuid("scope_id", str(ID).upper()) == ID


@pytest.mark.parametrize("value", ["nope", "7c9e6679-7425-40de-944b", "1" * 33, "x" * 100_000])
def test_a_malformed_uuid_names_its_field(value: str) -> None:
    assert _refusal(lambda: parse_uuid("principal_id", value)) == ("principal_id", "malformed")
    assert _refusal(lambda: optional_uuid("entity_id", value)) == ("entity_id", "malformed")
    assert as_uuid(value) is None


def test_an_empty_uuid_is_required_or_absent() -> None:
    assert _refusal(lambda: parse_uuid("scope_id", "")) == ("scope_id", "required")
    assert optional_uuid("scope_id", "") is None
    assert as_uuid("") is None


def test_a_uuid_longer_than_any_spelling_is_refused_unread() -> None:
    padded = " " * (MAX_UUID_TEXT - len(str(ID))) + str(ID)
    assert as_uuid(padded) == ID
    assert as_uuid(" " + padded) is None


def test_a_repeated_uuid_field_names_the_element() -> None:
    assert parse_uuids("scope_ids", [str(ID), str(ID)]) == [ID, ID]
    assert parse_uuids("scope_ids", []) == []
    assert _refusal(lambda: parse_uuids("scope_ids", [str(ID), "", "x"])) == (
        "scope_ids[1]", "required")
    assert _refusal(lambda: parse_uuids("scope_ids", [str(ID), "x"])) == (
        "scope_ids[1]", "malformed")


def test_a_page_size_defaults_and_is_bounded() -> None:
    assert page_size(0, default=50, maximum=100) == 50
    assert page_size(1, default=50, maximum=100) == 1
    assert page_size(100, default=50, maximum=100) == 100
    for value in (-1, 101):
        with pytest.raises(InvalidInput) as caught:
            page_size(value, default=50, maximum=100)
        assert caught.value.field == "page_size"
        assert caught.value.metadata == {
            "field": "page_size", "reason": "out_of_range", "maximum": "100"}
    assert _refusal(lambda: page_size(-5, default=1, maximum=2, field="limit")) == (
        "limit", "out_of_range")
