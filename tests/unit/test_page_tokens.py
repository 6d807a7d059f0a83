"""vera.page_tokens' keyed cursors (a conflicts page's group id): what one writes the
other reads; anything else is invalid_input naming page_token."""

from __future__ import annotations

import base64
import re

import pytest

from vera import page_tokens
from vera.errors import InvalidInput

HEX = re.compile(r"[0-9a-f]{32}")
KEY = "0123456789abcdef" * 2


def test_a_key_reads_back_and_an_empty_token_is_the_first_page() -> None:
    token = page_tokens.encode_key(KEY, "g1:")
    assert "=" not in token
    assert page_tokens.decode_key(token, "g1:", HEX) == KEY
    assert page_tokens.decode_key("", "g1:", HEX) == ""
    # The wire form is the same base64 of "g1:<id>" conflicts pages always carried.
    assert base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)) == f"g1:{KEY}".encode()


@pytest.mark.parametrize("token", [
    "not-a-token!",
    page_tokens.encode_key(KEY, "g2:"),
    page_tokens.encode_key(KEY[:-1], "g1:"),
    page_tokens.encode_key(KEY.upper(), "g1:"),
    page_tokens.encode_position(7),
    "//8",  # not UTF-8
])
def test_anything_else_is_malformed(token: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        page_tokens.decode_key(token, "g1:", HEX)
    assert (caught.value.field, caught.value.metadata["reason"]) == ("page_token", "malformed")
