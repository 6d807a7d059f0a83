"""Where a parsed value stands in its file.

The maintained parsers (``tomllib``, ``json``) give values but no line numbers, so a value
is located by searching its own text in the lines of its table or object: found exactly,
or the fact is dropped (never a guessed line). YAML (and JSON read as YAML, for OpenAPI)
comes from PyYAML's node tree, whose marks give every node's lines; XML from expat, which
gives each element's first and last line.
"""

from __future__ import annotations

import json
import re
import xml.parsers.expat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from vera.harvest.facts import Document

# Bounds on walking a YAML node graph: aliases can make it a DAG with many paths.
MAX_YAML_DEPTH = 64


def find_line(lines: list[str], pattern: re.Pattern[str], start: int = 1,
              end: int | None = None) -> int | None:
    """The first 1-based line in [start, end] that ``pattern`` searches, or None."""
    last = len(lines) if end is None else min(end, len(lines))
    for number in range(max(start, 1), last + 1):
        if pattern.search(lines[number - 1]):
            return number
    return None


# --- TOML ---------------------------------------------------------------------------------

_TABLE_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def _header_name(line: str) -> str | None:
    match = _TABLE_HEADER.match(line)
    if match is None:
        return None
    return ".".join(part.strip().strip('"').strip("'") for part in match.group(1).split("."))


def toml_table(lines: list[str], name: str) -> tuple[int, int] | None:
    """Lines (1-based, inclusive) of table ``[name]``: its header to the line before the
    next header; (1, last header - 1) for the root table (name "")."""
    start = 1 if name == "" else None
    for number, line in enumerate(lines, start=1):
        header = _header_name(line)
        if header is None:
            continue
        if start is not None:
            return (start, number - 1)
        if header == name:
            start = number
    return None if start is None else (start, len(lines))


def toml_key_line(lines: list[str], table: tuple[int, int], key: str) -> int | None:
    """The line assigning ``key`` (bare, quoted, or dotted from it) inside ``table``."""
    quoted = re.escape(key)
    pattern = re.compile(rf"^\s*(?:{quoted}|\"{quoted}\"|'{quoted}')\s*(?:=|\.)")
    return find_line(lines, pattern, table[0], table[1])


def toml_string_line(lines: list[str], table: tuple[int, int], value: str,
                     after: int = 0) -> int | None:
    """The line holding the string literal ``value`` (either quote style) in ``table``."""
    literal = re.compile("|".join(re.escape(q + value + q) for q in ('"', "'")))
    return find_line(lines, literal, max(table[0], after), table[1])


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')


def _code(line: str) -> str:
    """A line without its string literals and comment, for counting brackets."""
    return _STRINGS.sub('""', line).split("#", 1)[0]


def toml_array_end(lines: list[str], start: int, end: int) -> int:
    """The line closing the array opened on line ``start``."""
    depth = 0
    for number in range(start, end + 1):
        code = _code(lines[number - 1])
        depth += code.count("[") - code.count("]")
        if depth <= 0:
            return number
    return end


# --- JSON ---------------------------------------------------------------------------------


def json_package(doc: Document) -> tuple[dict[str, Any], str] | None:
    """A package manifest's top-level object and its subject: the ``name`` it gives, else
    the folder it speaks for; None when the file is no JSON object."""
    try:
        data = json.loads(doc.text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("name")
    return data, name if isinstance(name, str) and name else doc.subject_for_directory()


def json_member_line(lines: list[str], key: str, value: str | None = None, start: int = 1,
                     end: int | None = None) -> int | None:
    """The line of member ``"key": "value"`` (or ``"key":`` when value is None)."""
    pattern = rf"{re.escape(json.dumps(key))}\s*:"
    if value is not None:
        pattern += rf"\s*{re.escape(json.dumps(value))}"
    return find_line(lines, re.compile(pattern), start, end)


def json_object_lines(lines: list[str], key: str, start: int = 1) -> tuple[int, int] | None:
    """Lines of the object member ``"key": { ... }`` (brace depth from its line)."""
    return _json_bracketed(lines, key, "{", "}", start)


def json_array_lines(lines: list[str], key: str, start: int = 1,
                     end: int | None = None) -> tuple[int, int] | None:
    """Lines of the array member ``"key": [ ... ]`` in [start, end]."""
    return _json_bracketed(lines, key, "[", "]", start, end)


def _json_bracketed(lines: list[str], key: str, opener: str, closer: str, start: int,
                    end: int | None = None) -> tuple[int, int] | None:
    pattern = re.compile(rf"{re.escape(json.dumps(key))}\s*:\s*{re.escape(opener)}")
    first = find_line(lines, pattern, start, end)
    if first is None:
        return None
    depth = 0
    for number in range(first, len(lines) + 1):
        code = _code(lines[number - 1])
        depth += code.count(opener) - code.count(closer)
        if depth <= 0:
            return (first, number)
    return None


def json_string_members(lines: list[str], data: dict[str, Any], key: str
                        ) -> Iterator[tuple[str, str, int]]:
    """(name, value, line) of each string member of the top-level object ``key`` of
    ``data`` (the parsed file), found in its lines."""
    members = data.get(key)
    span = json_object_lines(lines, key) if isinstance(members, dict) else None
    if span is None or not isinstance(members, dict):
        return
    for member, value in members.items():
        if isinstance(value, str):
            line = json_member_line(lines, member, value, span[0], span[1])
            if line is not None:
                yield member, value, line


def json_written(value: str) -> str:
    """A string as a JSON file writes it, without its quotes (escapes kept): what the
    file's lines hold, to quote as a fact's evidence."""
    return json.dumps(value)[1:-1]


def json_string_line(lines: list[str], value: str, start: int, end: int) -> int | None:
    """The line of the string literal ``value`` (an array item) in [start, end]."""
    return find_line(lines, re.compile(re.escape(json.dumps(value))), start, end)


# --- YAML ---------------------------------------------------------------------------------


def yaml_documents(text: str) -> list[yaml.Node]:
    """Every document's node tree (never constructed into Python objects, so no tag can
    run anything); raises yaml.YAMLError."""
    return [node for node in yaml.compose_all(text, Loader=yaml.SafeLoader) if node is not None]


def node_lines(node: yaml.Node, lines: list[str]) -> tuple[int, int]:
    """1-based first and last line of ``node``'s own text (trailing blank and comment lines,
    which PyYAML's end mark may run over, excluded)."""
    start = node.start_mark.line + 1
    end_mark = node.end_mark
    end = end_mark.line + 1
    if end_mark.line >= len(lines) or not lines[end_mark.line][: end_mark.column].strip():
        end -= 1  # the mark sits at the start of the next token's line (or past the end)
    end = min(end, len(lines))
    while end > start and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return start, max(start, end)


def scalar(node: yaml.Node | None) -> str | None:
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return None


def mapping_items(node: yaml.Node | None) -> Iterator[tuple[yaml.Node, yaml.Node]]:
    if isinstance(node, yaml.MappingNode):
        yield from node.value


def mapping_get(node: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    for k, v in mapping_items(node):
        if scalar(k) == key:
            return k, v
    return None


def mapping_value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    item = mapping_get(node, key)
    return None if item is None else item[1]


def sequence_items(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def item_lines(key: yaml.Node, value: yaml.Node, lines: list[str]) -> tuple[int, int]:
    """Lines of a mapping member: its key's line through its value's end."""
    return key.start_mark.line + 1, node_lines(value, lines)[1]


def walk(node: yaml.Node, depth: int = 0) -> Iterator[yaml.Node]:
    """Every node under ``node`` (itself included), bounded in depth."""
    if depth > MAX_YAML_DEPTH:
        return
    yield node
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from walk(k, depth + 1)
            yield from walk(v, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from walk(child, depth + 1)


def plain(node: yaml.Node | None, depth: int = 0) -> Any:
    """A node as plain str / list / dict values (every scalar a string), bounded."""
    if node is None or depth > MAX_YAML_DEPTH:
        return None
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    if isinstance(node, yaml.SequenceNode):
        return [plain(child, depth + 1) for child in node.value]
    if isinstance(node, yaml.MappingNode):
        return {scalar(k): plain(v, depth + 1) for k, v in node.value if scalar(k) is not None}
    return None


# --- XML ----------------------------------------------------------------------------------


@dataclass
class XmlElement:
    """An element with its local tag, attributes, text and lines: ``start`` is its start
    tag's first line (where its attributes stand, a start tag may span lines up to the
    element's ``end``), ``end`` its end tag's last line."""

    tag: str
    attributes: dict[str, str]
    start: int
    end: int = 0
    text: str = ""
    children: list[XmlElement] = field(default_factory=list)

    def child(self, tag: str) -> XmlElement | None:
        return next((c for c in self.children if c.tag == tag), None)

    def all(self, *path: str) -> list[XmlElement]:
        found = [self]
        for tag in path:
            found = [c for e in found for c in e.children if c.tag == tag]
        return found

    def value(self, tag: str) -> str:
        element = self.child(tag)
        return element.text.strip() if element is not None else ""


class _Refused(Exception):
    pass


def xml_tree(text: str) -> XmlElement | None:
    """The document's root element, or None when it is not well-formed XML or declares a
    DTD or an entity: no build file needs either, and expanding entities is how XML is
    made to explode, so such a file is not read at all."""
    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[XmlElement] = []
    roots: list[XmlElement] = []

    def start(name: str, attributes: dict[str, str]) -> None:
        element = XmlElement(name.rsplit(":", 1)[-1], attributes, parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)

    def end(_name: str) -> None:
        stack.pop().end = parser.CurrentLineNumber

    def characters(data: str) -> None:
        if stack:
            stack[-1].text += data

    def refuse(*_args: object) -> None:
        raise _Refused

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(text, True)
    except (xml.parsers.expat.ExpatError, _Refused):
        return None
    return roots[0] if roots else None
