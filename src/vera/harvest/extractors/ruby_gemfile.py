"""``Gemfile`` (or ``gems.rb``): the Ruby a project runs on (``ruby "3.3.0"``) and the gems
it depends on (``gem "rails", "~> 7.1"``), with the Bundler group they are declared in.

A Gemfile is Ruby, and it is never run: only the literal forms are read, line by line. A
``gem`` whose name or version is anything but a plain string literal (a variable,
``ENV[...]``, an interpolated ``"#{...}"``) is not stated, nor one that holds only
sometimes: under a trailing ``if``/``unless``, or inside any block but ``group``,
``platforms``, ``source``, ``git`` and ``path`` (an ``if ... end``, ``install_if``, a
method). ``ruby
file: ".ruby-version"`` names no version here (runtime_files reads that file), and a
``ruby`` with an ``engine:`` is not plain Ruby. The subject is the folder the Gemfile
speaks for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from vera.harvest.facts import RUNTIME, Document, Fact
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "uses_runtime", "depends_on", "built_with", "uses_database_driver", "uses_test_runner"
})

NAMES = frozenset({"Gemfile", "gems.rb"})
# Blocks whose gems are still declared unconditionally (a group names when Bundler
# installs them, a platform block where, a source, git or path block from where).
PLAIN_BLOCKS = frozenset({"group", "platforms", "platform", "source", "git", "github", "path"})
# A statement continues on the next line while its line ends with a comma; bounded.
MAX_STATEMENT_LINES = 8

_STRING = re.compile(r""""([^"\\#]*)"|'([^'\\]*)'""")
_SYMBOL = re.compile(r":(\w+)")
_CALL = re.compile(r"^(gem|ruby)(?:\((.*)\)|\s+(.*))$")
_BLOCK_START = re.compile(r"\bdo(?:\s*\|[^|]*\|)?$")
_WORD = re.compile(r"^\w+")
_KEYWORD_BLOCK = re.compile(r"^(?:if|unless|case|while|until|begin|def|class|module)\b")
_MODIFIER = re.compile(r"\s(?:if|unless)\s")
_KEY = re.compile(r"^(?:(\w+):|:(\w+)\s*=>)\s*(.*)$")


@dataclass(frozen=True)
class _Block:
    kind: str
    groups: tuple[str, ...] = ()


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] in NAMES


def extract(doc: Document) -> Iterator[Fact]:
    subject = doc.subject_for_directory()
    blocks: list[_Block] = []
    number = 0
    while number < len(doc.lines):
        start = number + 1
        code = _code(doc.lines[number])
        while code.endswith(",") and number + 1 < len(doc.lines) and \
                number + 2 - start < MAX_STATEMENT_LINES:
            number += 1
            code = f"{code} {_code(doc.lines[number])}"
        number += 1
        if code == "end" or code.startswith("end "):
            if blocks:
                blocks.pop()
            continue
        if (block := _block(code)) is not None:
            blocks.append(block)
            continue
        if any(b.kind not in PLAIN_BLOCKS for b in blocks) or _MODIFIER.search(f" {code} "):
            continue
        call = _CALL.match(code)
        if call is None:
            continue
        arguments = _arguments(call.group(2) if call.group(2) is not None else call.group(3))
        if call.group(1) == "ruby":
            yield from _ruby(doc, subject, arguments, start, number)
            continue
        groups = next((b.groups for b in reversed(blocks) if b.kind == "group"), ())
        yield from _gem(doc, subject, arguments, groups, start, number)


def _code(line: str) -> str:
    """The line without its comment (a ``#`` outside a string literal), stripped."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:index].strip()
    return line.strip()


def _block(code: str) -> _Block | None:
    """The block ``code`` opens, if any (``group :test do``, ``if ENV["CI"]``)."""
    if _KEYWORD_BLOCK.match(code):
        return _Block("conditional")
    if _BLOCK_START.search(code) is None:
        return None
    word = _WORD.match(code)
    kind = word.group(0) if word else "expression"
    if kind != "group":
        return _Block(kind)
    arguments = _arguments(code[len("group"):code.rindex("do")].strip().strip("()"))
    names = _symbols(", ".join(a for a in arguments if not _KEY.match(a)))  # optional: true
    return _Block("group", names) if names else _Block("conditional")


def _arguments(text: str) -> list[str]:
    """Top-level comma-separated arguments, strings and brackets kept whole."""
    parts, depth, quote, current = [], 0, "", ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def _literal(argument: str) -> str | None:
    """The text of a plain string literal (no escape, no interpolation), else None."""
    match = _STRING.fullmatch(argument)
    if match is None:
        return None
    return match.group(1) if match.group(1) is not None else match.group(2)


def _symbols(text: str) -> tuple[str, ...]:
    """Group names written as symbols or strings: ``:test``, ``[:development, :test]``,
    ``%i[development test]``, ``"test"``; () when anything else is written."""
    text = text.strip()
    if text.startswith(("%i[", "%w[", "%i(", "%w(")):
        return tuple(text[3:-1].split())
    items = _arguments(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
    names = []
    for item in items:
        symbol = _SYMBOL.fullmatch(item)
        name = symbol.group(1) if symbol else _literal(item)
        if not name:
            return ()
        names.append(name)
    return tuple(names)


def _ruby(doc: Document, subject: str, arguments: list[str], start: int, end: int
          ) -> Iterator[Fact]:
    version = _literal(arguments[0]) if arguments else None
    if version and not any(_KEY.match(a) for a in arguments[1:]):  # engine: "jruby" …
        yield doc.fact(subject, "uses_runtime", f"Ruby {version}", start, end, slot="ruby",
                       document_type=RUNTIME, quote=version)


def _gem(doc: Document, subject: str, arguments: list[str], groups: tuple[str, ...],
         start: int, end: int) -> Iterator[Fact]:
    name = _literal(arguments[0]) if arguments else None
    if not name:
        return
    constraints: list[str] = []
    for argument in arguments[1:]:
        key = _KEY.match(argument)
        if key is not None:
            if (key.group(1) or key.group(2)) in ("group", "groups"):
                groups = _symbols(key.group(3))
                if not groups:
                    return
            continue
        constraint = _literal(argument)
        if constraint is None:
            return  # a computed version: the requirement is not what the file writes
        constraints.append(constraint)
    requirement = f"{name} {', '.join(constraints)}" if constraints else name
    yield from dependency_facts(doc, subject, "rubygems", name, requirement, start, end,
                                group=",".join(groups))
