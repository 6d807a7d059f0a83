"""Hidden text: characters a reader cannot see but that change what a line says.

Control characters (newlines included), format characters (bidi embeddings, overrides and
isolates, zero-width spaces and joiners, the soft hyphen, TAG characters U+E0000..E007F),
the line and paragraph separators U+2028/U+2029, and the letters and symbols that render
as nothing (Hangul fillers, the Braille blank, the combining grapheme joiner). One home for
the rule: the knowledge service refuses them in proposals and flags them at ingest; the
gateway escapes them in every line it renders, so a fact can never render as, or forge,
another line.
"""

from __future__ import annotations

import unicodedata
from typing import Any

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
# Blank by design though not format characters: an invisible "word" can make two names
# look the same. (Variation selectors stay visible: emoji need them.)
_BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def is_hidden(char: str) -> bool:
    return unicodedata.category(char) in _HIDDEN_CATEGORIES or char in _BLANK_GLYPHS


def first_hidden(text: str, allowed: str = "") -> str | None:
    """The first hidden character of ``text`` not in ``allowed``, or None."""
    # str.isprintable is False for every Cc, Cf, Zl and Zp character (and for a few
    # visible ones), in C: the gateway escapes every string it renders, and the per
    # character scan was a sixth of its CPU per call.
    if text.isprintable() and not any(glyph in text for glyph in _BLANK_GLYPHS):
        return None
    return next((c for c in text if is_hidden(c) and c not in allowed), None)


def codepoint(char: str) -> str:
    return f"U+{ord(char):04X}"


def neutralize_markdown_links(text: str) -> str:
    """``text`` with every markdown link and image (``[label](url)``, ``![alt](url)``)
    broken by escaping the parenthesis that opens its target, so a client that renders
    markdown shows stored text as written and never fetches an image or offers a link
    it carries (an image URL can leak data in its query)."""
    return text.replace("](", "]\\(")


def escape_hidden(text: str) -> str:
    """``text`` with every hidden character written as a visible escape (``\\n``,
    ``\\u202e``, ``\\U000e0041``), so it always stays on one line and shows what it holds."""
    if first_hidden(text) is None:
        return text
    out = []
    for c in text:
        if not is_hidden(c):
            out.append(c)
        elif c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return "".join(out)


def untrusted(value: Any) -> Any:
    """``value`` with every string in it (at any depth) passed through ``escape_hidden``
    and its markdown links and images broken: what a client may show of stored text."""
    if isinstance(value, str):
        return neutralize_markdown_links(escape_hidden(value))
    if isinstance(value, dict):
        return {k: untrusted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [untrusted(v) for v in value]
    return value
