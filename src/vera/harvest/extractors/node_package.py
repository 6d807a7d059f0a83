"""``package.json``: a Node package's name, version, licence, ``engines``, dependencies
(``dependencies``, ``devDependencies``, ``peerDependencies``, ``optionalDependencies``)
and ``scripts``.

The subject is the package's ``name``; a file naming none speaks for its folder. Files
under ``node_modules/`` are someone else's packages and are never read.
"""

from __future__ import annotations

from collections.abc import Iterator

from vera.harvest.facts import BUILD, DEPENDENCIES, LICENSE, RUNTIME, Document, Fact
from vera.harvest.locate import json_member_line, json_package, json_string_members
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "version", "license", "uses_runtime", "depends_on", "built_with", "uses_database_driver",
    "uses_test_runner", "defines_script"
})

GROUPS = {"dependencies": "", "devDependencies": "dev", "peerDependencies": "peer",
          "optionalDependencies": "optional"}


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "package.json" and "node_modules/" not in f"/{path}"


def extract(doc: Document) -> Iterator[Fact]:
    package = json_package(doc)
    if package is None:
        return
    data, subject = package
    for key, predicate, document_type in (("version", "version", DEPENDENCIES),
                                          ("license", "license", LICENSE)):
        value = data.get(key)
        if isinstance(value, str) and value and (line := json_member_line(doc.lines, key, value)):
            yield doc.fact(subject, predicate, value, line, slot=key, document_type=document_type)
    for key, group in GROUPS.items():
        for member, value, line in json_string_members(doc.lines, data, key):
            yield from dependency_facts(doc, subject, "node", member, f"{member} {value}", line,
                                        group=group)
    for member, value, line in json_string_members(doc.lines, data, "engines"):
        yield doc.fact(subject, "uses_runtime", f"{member} {value}", line, slot=member,
                       document_type=RUNTIME, quote=value)
    for member, value, line in json_string_members(doc.lines, data, "scripts"):
        yield doc.fact(subject, "defines_script",
                       f"{member}: {value}", line, slot=member, document_type=BUILD, quote=value)

