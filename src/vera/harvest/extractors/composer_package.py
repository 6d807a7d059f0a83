"""``composer.json``: a PHP package's name, version, licence, the PHP it requires,
its dependencies (``require``, ``require-dev``) and ``scripts``.

The subject is the package's ``name``; a file naming none speaks for its folder. ``php``
in ``require`` is the runtime (``PHP ^8.2``); a PHP extension (``ext-intl``) or system
library (``lib-icu``) is a requirement like any package, stated as written; the other
platform names (``php-64bit``, ``composer-plugin-api``, ``hhvm``) are not stated. Files
under ``vendor/`` are someone else's packages and are never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from vera.harvest.facts import BUILD, DEPENDENCIES, LICENSE, RUNTIME, Document, Fact
from vera.harvest.locate import (
    json_array_lines,
    json_member_line,
    json_object_lines,
    json_package,
    json_string_line,
    json_string_members,
    json_written,
)
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "version", "license", "uses_runtime", "depends_on", "built_with", "uses_database_driver",
    "uses_test_runner", "defines_script"
})

GROUPS = {"require": "", "require-dev": "dev"}


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "composer.json" and "/vendor/" not in f"/{path}"


def extract(doc: Document) -> Iterator[Fact]:
    package = json_package(doc)
    if package is None:
        return
    data, subject = package
    version = data.get("version")
    if isinstance(version, str) and version and (
            line := json_member_line(doc.lines, "version", version)):
        yield doc.fact(subject, "version", version, line, slot="version",
                       document_type=DEPENDENCIES, quote=json_written(version))
    yield from _licences(doc, subject, data.get("license"))
    for key, group in GROUPS.items():
        for member, constraint, line in json_string_members(doc.lines, data, key):
            if member == "php":
                yield doc.fact(subject, "uses_runtime", f"PHP {constraint}", line,
                               slot=f"{group}:php" if group else "php", document_type=RUNTIME,
                               quote=json_written(constraint))
            elif "/" in member or member.startswith(("ext-", "lib-")):
                yield from dependency_facts(doc, subject, "composer", member,
                                            f"{member} {constraint}", line, group=group,
                                            quote=json_written(member))
    yield from _scripts(doc, subject, data.get("scripts"))


def _licences(doc: Document, subject: str, licence: Any) -> Iterator[Fact]:
    """``"license": "MIT"``, or each licence of ``"license": ["MIT", "GPL-3.0-only"]``."""
    if isinstance(licence, str) and licence:
        line = json_member_line(doc.lines, "license", licence)
        if line is not None:
            yield doc.fact(subject, "license", licence, line, slot=f"license:{licence}",
                           document_type=LICENSE, quote=json_written(licence))
        return
    span = json_array_lines(doc.lines, "license") if isinstance(licence, list) else None
    if span is None or not isinstance(licence, list):
        return
    for value in licence:
        if isinstance(value, str) and value and (
                line := json_string_line(doc.lines, value, span[0], span[1])):
            yield doc.fact(subject, "license", value, line, slot=f"license:{value}",
                           document_type=LICENSE, quote=json_written(value))


def _scripts(doc: Document, subject: str, scripts: Any) -> Iterator[Fact]:
    """``name: command``; a script of several commands states them one per line, cited
    by its whole array, and only when each of them is found there."""
    span = json_object_lines(doc.lines, "scripts") if isinstance(scripts, dict) else None
    if span is None or not isinstance(scripts, dict):
        return
    for name, value in scripts.items():
        if isinstance(value, str):
            line = json_member_line(doc.lines, name, value, span[0], span[1])
            if line is not None:
                yield doc.fact(subject, "defines_script", f"{name}: {value}", line, slot=name,
                               document_type=BUILD, quote=json_written(value))
            continue
        commands = value if isinstance(value, list) else []
        lines = json_array_lines(doc.lines, name, span[0], span[1]) if commands else None
        if lines is None or not all(
                isinstance(c, str) and json_string_line(doc.lines, c, lines[0], lines[1])
                for c in commands):
            continue
        yield doc.fact(subject, "defines_script", f"{name}: " + "\n".join(commands),
                       lines[0], lines[1], slot=name, document_type=BUILD,
                       quote=json_written(commands[-1]))

