"""The one rule for hidden text (vera.text): what counts, and how it is escaped."""

from __future__ import annotations

import pytest

from vera.text import escape_hidden, first_hidden, is_hidden


@pytest.mark.parametrize(
    "char",
    [
        "\n",
        "\x00",
        "\u202e",
        "\u200b",
        "\u00ad",
        "\U000e0041",
        "\u2028",
        "\u115f",
        "\u1160",
        "\u3164",
        "\uffa0",
        "\u2800",
        "\u034f",
    ],
)
def test_characters_a_reader_cannot_see_are_hidden(char: str) -> None:
    assert is_hidden(char)
    assert first_hidden(f"team{char}a") == char
    assert char not in escape_hidden(f"team{char}a")


@pytest.mark.parametrize("text", ["payments-api", "Zoë", "東京", "🛠️ tools", "a b"])
def test_visible_text_is_left_alone(text: str) -> None:
    assert first_hidden(text) is None
    assert escape_hidden(text) == text


def test_the_quick_check_agrees_with_the_rule_on_every_code_point() -> None:
    # first_hidden answers from str.isprintable when it can; the rule is is_hidden.
    disagree = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # lone surrogates never arrive in decoded text
        char = chr(cp)
        text = f"a{char}b"
        expected = char if is_hidden(char) else None
        if first_hidden(text) != expected:
            disagree.append(f"U+{cp:04X}")
    assert disagree == []
