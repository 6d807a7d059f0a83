"""Edits of runtime config files that keep every byte VERA did not mean to change.

JSON and JSONC (``.mcp.json``, ``.claude/settings.json``, ``opencode.json[c]``) are edited
by splicing text at the spans json-five's round-trip model reports, so comments, ordering,
trailing commas and unrelated keys stay as they were. TOML (``.codex/config.toml``) goes
through tomlkit, which keeps comments and layout. Every edit is parsed back and compared
with the intended value; any difference raises :class:`UnsafeEdit`, and the caller shows a
manual patch instead of writing.

An insert followed by the matching remove gives back the original text, which is what lets
``vera disconnect`` leave a file exactly as the user had it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import tomlkit
from json5 import loads as _json5_loads
from json5.loader import ModelLoader
from json5.loader import loads as _model_loads
from json5.model import JSONArray, JSONObject
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table

Path = tuple[str, ...]


class UnsafeEdit(Exception):
    """A file VERA cannot change safely: unparseable, or the edit would not round-trip."""


def fingerprint(value: Any) -> str:
    """A stable hash of a parsed value (key order and formatting do not matter)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def text_fingerprint(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- JSON / JSONC


def parse_json(text: str) -> Any:
    """Parses JSON or JSONC (comments, trailing commas) into plain Python values."""
    if not text.strip():
        return {}
    try:
        return _json5_loads(text)
    except Exception as exc:  # json-five raises several unrelated exception types
        raise UnsafeEdit(f"not valid JSON/JSONC: {exc}") from exc


def _model(text: str) -> Any:
    try:
        return _model_loads(text, loader=ModelLoader()).value
    except Exception as exc:
        raise UnsafeEdit(f"not valid JSON/JSONC: {exc}") from exc


# json-five keeps a node's character offsets only on its tokens; its public positions are
# line and column, from which the splice would have to re-derive offsets.
def _start(node: Any) -> int:
    return node._tok.index  # noqa: SLF001


def _end(node: Any) -> int:
    return node._end_tok.end  # noqa: SLF001


def _children(node: Any) -> list[tuple[str | None, Any, Any]]:
    """(key, key node, value node) per element; key is None in an array."""
    if isinstance(node, JSONObject):
        return [(getattr(k, "characters", None) or getattr(k, "name", None), k, v)
                for k, v in zip(node.keys, node.values, strict=True)]
    return [(None, v, v) for v in node.values]


def _find(root: Any, path: Path) -> Any:
    node = root
    for key in path:
        if not isinstance(node, JSONObject):
            return None
        node = next((v for k, _, v in _children(node) if k == key), None)
        if node is None:
            return None
    return node


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _only_space(fragment: str) -> bool:
    return fragment.strip() == ""


def _render(value: Any, indent: str) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def _element_indent(text: str, container: Any) -> str | None:
    """The indentation of the container's elements, or None for a one-line container."""
    children = _children(container)
    if children:
        first = children[0][1]
        before = text[_line_start(text, _start(first)):_start(first)]
        return before if _only_space(before) else None
    close = _end(container) - 1
    before = text[_line_start(text, close):close]
    if _only_space(before) and "\n" in text[_start(container):close]:
        return before + "  "
    return None


def _insert(text: str, container: Any, key: str | None, value: Any) -> str:
    children = _children(container)
    trailing = container.trailing_comma is not None
    indent = _element_indent(text, container)
    member = ("" if key is None else json.dumps(key) + ": ") + _render(value, indent or "")
    close = _end(container) - 1
    if indent is None:  # a one-line container: `{}` or `{ "a": 1 }`
        if not children:
            return text[:close] + member + text[close:]
        last_end = _end(children[-1][2])
        if trailing:
            return text[:close] + " " + member + "," + text[close:]
        return text[:last_end] + ", " + member + text[last_end:]
    at = _line_start(text, close)
    if not _only_space(text[at:close]):  # `... }` shares its line with content
        at = close
        member_text = "\n" + indent + member + ("," if trailing else "") + "\n"
    else:
        member_text = indent + member + ("," if trailing else "") + "\n"
    if children and not trailing:
        last_end = _end(children[-1][2])
        return text[:last_end] + "," + text[last_end:at] + member_text + text[at:]
    return text[:at] + member_text + text[at:]


def _comma_after(text: str, index: int) -> int | None:
    """The index of a comma that follows ``index`` across spaces only, or None."""
    rest = text[index:]
    stripped = rest.lstrip(" \t")
    return index + len(rest) - len(stripped) if stripped.startswith(",") else None


def _remove(text: str, container: Any, index: int) -> str:
    """Removes one element, undoing exactly what :func:`_insert` added."""
    children = _children(container)
    _, first_node, value_node = children[index]
    start, end = _start(first_node), _end(value_node)
    own_comma = _comma_after(text, end)
    if own_comma is not None:
        end = own_comma + 1
    prev_end = _end(children[index - 1][2]) if index > 0 else None
    line = _line_start(text, start)
    newline = text.find("\n", end)
    if _only_space(text[line:start]) and newline != -1 and _only_space(text[end:newline]):
        text = text[:line] + text[newline + 1:]  # the element owns its lines
        if own_comma is None and prev_end is not None:
            comma = _comma_after(text, prev_end)
            if comma is None:
                raise UnsafeEdit("cannot find the separator before the element")
            text = text[:comma] + text[comma + 1:]
        return text
    if own_comma is not None:
        start = start - 1 if text[start - 1] == " " else start
        return text[:start] + text[end:]
    if prev_end is not None:
        return text[:prev_end] + text[end:]
    return text[:start] + text[end:]


def json_set(text: str, path: Path, value: Any) -> tuple[str, Path]:
    """Adds ``value`` at ``path``, creating missing parent objects as one block.

    Returns the new text and the path of the topmost key it created (what ownership
    records). Raises :class:`UnsafeEdit` when the key exists or a parent is not an object.
    """
    if not text.strip():  # a new file: VERA's block is all of it
        block: Any = value
        for key in reversed(path[1:]):
            block = {key: block}
        return json.dumps({path[0]: block}, indent=2, ensure_ascii=False) + "\n", path[:1]
    root = _model(text)
    if not isinstance(root, JSONObject):
        raise UnsafeEdit("the file's top level is not an object")
    depth = 0
    node = root
    while depth < len(path) - 1:
        child = _find(node, path[depth:depth + 1])
        if child is None:
            break
        if not isinstance(child, JSONObject):
            raise UnsafeEdit(f"{'.'.join(path[:depth + 1])} is not an object")
        node, depth = child, depth + 1
    if _find(node, path[depth:depth + 1]) is not None:
        raise UnsafeEdit(f"{'.'.join(path[:depth + 1])} already exists")
    block = value
    for key in reversed(path[depth + 1:]):
        block = {key: block}
    new_text = _insert(text, node, path[depth], block)
    expected = copy.deepcopy(parse_json(text))
    cursor = expected
    for key in path[:depth]:
        cursor = cursor[key]
    cursor[path[depth]] = block
    _verify(new_text, expected)
    return new_text, path[:depth + 1]


def json_append(text: str, path: Path, item: Any) -> str:
    """Appends ``item`` to the array at ``path`` (which must exist)."""
    root = _model(text)
    node = _find(root, path)
    if not isinstance(node, JSONArray):
        raise UnsafeEdit(f"{'.'.join(path)} is not an array")
    new_text = _insert(text, node, None, item)
    expected = copy.deepcopy(parse_json(text))
    _get(expected, path).append(item)
    _verify(new_text, expected)
    return new_text


def json_delete(text: str, path: Path) -> str:
    """Removes the key at ``path``; the text around it stays as it was."""
    root = _model(text)
    parent = _find(root, path[:-1])
    if not isinstance(parent, JSONObject):
        raise UnsafeEdit(f"{'.'.join(path[:-1])} is not an object")
    keys = [k for k, _, _ in _children(parent)]
    if path[-1] not in keys:
        raise UnsafeEdit(f"{'.'.join(path)} does not exist")
    new_text = _remove(text, parent, keys.index(path[-1]))
    expected = copy.deepcopy(parse_json(text))
    del _get(expected, path[:-1])[path[-1]]
    _verify(new_text, expected)
    return new_text


def json_remove_item(text: str, path: Path, item_fingerprint: str) -> str:
    """Removes the first array element at ``path`` whose fingerprint matches."""
    root = _model(text)
    node = _find(root, path)
    if not isinstance(node, JSONArray):
        raise UnsafeEdit(f"{'.'.join(path)} is not an array")
    values = _get(parse_json(text), path)
    matches = [i for i, v in enumerate(values) if fingerprint(v) == item_fingerprint]
    if not matches:
        raise UnsafeEdit(f"{'.'.join(path)} has no such element")
    new_text = _remove(text, node, matches[0])
    expected = copy.deepcopy(parse_json(text))
    del _get(expected, path)[matches[0]]
    _verify(new_text, expected)
    return new_text


def _get(value: Any, path: Path) -> Any:
    for key in path:
        value = value[key]
    return value


def get_json(value: Any, path: Path) -> Any:
    """The value at ``path`` in parsed JSON, or None."""
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _verify(new_text: str, expected: Any) -> None:
    if parse_json(new_text) != expected:
        raise UnsafeEdit("the edited file does not parse back to the intended value")


# ---------------------------------------------------------------- TOML


def parse_toml(text: str) -> dict[str, Any]:
    try:
        return tomlkit.parse(text).unwrap()
    except TOMLKitError as exc:
        raise UnsafeEdit(f"not valid TOML: {exc}") from exc


def toml_set_table(text: str, path: Path, value: dict[str, Any]) -> tuple[str, Path]:
    """Adds the table ``[a.b]`` at ``path`` (``a`` may exist); returns text and owned path."""
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise UnsafeEdit(f"not valid TOML: {exc}") from exc
    parent: Any = doc
    owned_depth = len(path)
    for depth, key in enumerate(path[:-1]):
        if key not in parent:
            parent[key] = tomlkit.table(is_super_table=True)
            owned_depth = min(owned_depth, depth + 1)
        parent = parent[key]
        if not isinstance(parent, Table | tomlkit.TOMLDocument):
            raise UnsafeEdit(f"{'.'.join(path[:depth + 1])} is not a table")
    if path[-1] in parent:
        raise UnsafeEdit(f"{'.'.join(path)} already exists")
    table = tomlkit.table()
    for key, item in value.items():
        table[key] = item
    if text and not text.endswith("\n"):
        raise UnsafeEdit("the file does not end with a newline")
    parent[path[-1]] = table
    new_text = tomlkit.dumps(doc)
    expected = parse_toml(text)
    cursor = expected
    for key in path[:-1]:
        cursor = cursor.setdefault(key, {})
    cursor[path[-1]] = value
    if parse_toml(new_text) != expected or not new_text.startswith(text.rstrip("\n")):
        raise UnsafeEdit("the edited file does not parse back to the intended value")
    return new_text, path[:owned_depth]


def toml_delete(text: str, path: Path) -> str:
    """Removes the table or key at ``path``; a table VERA appended leaves no trace."""
    doc = tomlkit.parse(text)
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    if path[-1] not in parent:
        raise UnsafeEdit(f"{'.'.join(path)} does not exist")
    del parent[path[-1]]
    new_text = tomlkit.dumps(doc)
    expected = parse_toml(text)
    cursor = expected
    for key in path[:-1]:
        cursor = cursor[key]
    del cursor[path[-1]]
    if parse_toml(new_text) != expected:
        raise UnsafeEdit("the edited file does not parse back to the intended value")
    # tomlkit keeps the blank line it put before an appended table.
    while new_text.endswith("\n\n"):
        new_text = new_text[:-1]
    return new_text


def toml_set_key(text: str, path: Path, value: Any) -> str:
    """Sets one key at the top level or in an existing table (``[mcp_servers.vera]`` reused
    from the user)."""
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise UnsafeEdit(f"not valid TOML: {exc}") from exc
    parent: Any = doc
    for key in path[:-1]:
        if key not in parent or not isinstance(parent[key], Table):
            raise UnsafeEdit(f"{'.'.join(path[:-1])} is not a table")
        parent = parent[key]
    if path[-1] in parent:
        raise UnsafeEdit(f"{'.'.join(path)} already exists")
    parent[path[-1]] = value
    new_text = tomlkit.dumps(doc)
    # tomlkit puts a blank line between a top-level key it inserts and the table after it;
    # without it, removing the key later gives back the user's text byte for byte.
    line = tomlkit.dumps({path[-1]: value})
    if len(path) == 1 and new_text.replace(line + "\n", "", 1) == text:
        new_text = new_text.replace(line + "\n", line, 1)
    expected = parse_toml(text)
    _get(expected, path[:-1])[path[-1]] = value
    if parse_toml(new_text) != expected:
        raise UnsafeEdit("the edited file does not parse back to the intended value")
    return new_text


def get_path(value: Any, path: Path) -> Any:
    """The value at ``path`` in a parsed document, or None."""
    return get_json(value, path)
