"""``go.mod``: the module path, its ``go`` and ``toolchain`` lines, and its direct
requirements (``// indirect`` ones are what the modules it requires need, not it).

Go's module file has no Python parser; its grammar is line-based (a directive, or a
parenthesized block of them), read here as ``cmd/go`` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from vera.harvest.facts import RUNTIME, Document, Fact
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "uses_runtime", "depends_on", "built_with", "uses_database_driver", "uses_test_runner"
})

_LINE = re.compile(r"^\s*(?P<verb>module|go|toolchain|require)\s+(?P<rest>.+?)\s*$")
_REQUIRE = re.compile(r"^\s*(?P<path>[^\s()]+)\s+(?P<version>v\S+)\s*$")


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "go.mod"


def extract(doc: Document) -> Iterator[Fact]:
    module = ""
    block = ""
    for number, raw in enumerate(doc.lines, start=1):
        code, _, comment = raw.partition("//")
        indirect = comment.strip() == "indirect" or comment.strip().startswith("indirect;")
        if block:
            if code.strip() == ")":
                block = ""
            elif block == "require" and not indirect:
                yield from _require(doc, module, code, number)
            continue
        match = _LINE.match(code)
        if match is None:
            continue
        verb, rest = match["verb"], match["rest"]
        subject = module or doc.subject_for_directory()
        if rest == "(":
            block = verb
        elif verb == "module":
            module = rest.strip('"')
        elif verb == "go":
            yield doc.fact(subject, "uses_runtime", f"Go {rest}", number, slot="Go",
                           document_type=RUNTIME, quote=rest)
        elif verb == "toolchain":
            yield doc.fact(subject, "uses_runtime", f"Go toolchain {rest}", number,
                           slot="Go toolchain", document_type=RUNTIME, quote=rest)
        elif verb == "require" and not indirect:
            yield from _require(doc, module, rest, number)


def _require(doc: Document, module: str, text: str, number: int) -> Iterator[Fact]:
    match = _REQUIRE.match(text)
    if match is None:
        return
    yield from dependency_facts(doc, module or doc.subject_for_directory(), "go", match["path"],
                                f"{match['path']} {match['version']}", number)
