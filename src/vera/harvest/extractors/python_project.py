"""``pyproject.toml``: a Python project's name, version, licence, ``requires-python``, its
dependencies (PEP 621 ``dependencies`` and ``optional-dependencies``, PEP 735
``dependency-groups``, Poetry's tables) and what they say it is built on.

The subject is the project's declared ``name`` (``[project]`` or ``[tool.poetry]``); a
file naming none speaks for its folder of the repository.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from vera.harvest.facts import DEPENDENCIES, LICENSE, RUNTIME, Document, Fact
from vera.harvest.locate import toml_array_end, toml_key_line, toml_string_line, toml_table
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "version", "license", "uses_runtime", "depends_on", "built_with", "uses_database_driver",
    "uses_test_runner"
})


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "pyproject.toml"


def extract(doc: Document) -> Iterator[Fact]:
    try:
        data = tomllib.loads(doc.text)
    except tomllib.TOMLDecodeError:
        return
    project = _table(data.get("project"))
    poetry = _table(_table(data.get("tool")).get("poetry"))
    name = project.get("name") or poetry.get("name")
    subject = name if isinstance(name, str) and name else doc.subject_for_directory()
    for table_name, table in (("project", project), ("tool.poetry", poetry)):
        yield from _metadata(doc, subject, table_name, table)
    yield from _pep621_dependencies(doc, subject, project)
    groups = data.get("dependency-groups")
    if isinstance(groups, dict):
        for group, items in groups.items():
            yield from _array(doc, subject, "dependency-groups", group, items, group)
    yield from _poetry_dependencies(doc, subject, poetry)


def _table(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _metadata(doc: Document, subject: str, table_name: str, table: dict[str, Any]
              ) -> Iterator[Fact]:
    lines = toml_table(doc.lines, table_name)
    if lines is None or not table:
        return
    version = table.get("version")
    if isinstance(version, str) and (line := toml_key_line(doc.lines, lines, "version")):
        yield doc.fact(subject, "version", version, line, slot="version",
                       document_type=DEPENDENCIES)
    licence = table.get("license")
    if isinstance(licence, dict):
        licence = licence.get("text")
    if isinstance(licence, str) and licence.strip() and "\n" not in licence.strip():
        line = toml_key_line(doc.lines, lines, "license")
        if line is not None:
            yield doc.fact(subject, "license", licence.strip(), line, slot="license",
                           document_type=LICENSE)
    requires = table.get("requires-python")
    if isinstance(requires, str) and (line := toml_key_line(doc.lines, lines, "requires-python")):
        yield doc.fact(subject, "uses_runtime", f"Python {requires}", line, slot="Python",
                       document_type=RUNTIME, quote=requires)


def _pep621_dependencies(doc: Document, subject: str, project: dict[str, Any]) -> Iterator[Fact]:
    yield from _array(doc, subject, "project", "dependencies", project.get("dependencies"), "")
    extras = project.get("optional-dependencies")
    if isinstance(extras, dict):
        for extra, items in extras.items():
            yield from _array(doc, subject, "project.optional-dependencies", extra, items, extra)


def _array(doc: Document, subject: str, table_name: str, key: str, items: object, group: str
           ) -> Iterator[Fact]:
    table = toml_table(doc.lines, table_name)
    if table is None or not isinstance(items, list):
        return
    first = toml_key_line(doc.lines, table, key)
    if first is None:
        return
    span = (first, toml_array_end(doc.lines, first, table[1]))
    after = first
    for item in items:
        if not isinstance(item, str):
            continue  # an include-group table names no package
        try:
            requirement = Requirement(item)
        except InvalidRequirement:
            continue
        line = toml_string_line(doc.lines, span, item, after)
        if line is None:
            continue
        after = line
        yield from dependency_facts(doc, subject, "python", requirement.name, item.strip(), line,
                                    group=group)


def _poetry_dependencies(doc: Document, subject: str, poetry: dict[str, Any]) -> Iterator[Fact]:
    tables = [("dependencies", ""), ("dev-dependencies", "dev")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        tables += [(f"group.{g}.dependencies", g) for g in groups]
    for suffix, group in tables:
        deps: Any = poetry
        for part in suffix.split("."):
            deps = deps.get(part) if isinstance(deps, dict) else None
        table = toml_table(doc.lines, f"tool.poetry.{suffix}")
        if not isinstance(deps, dict) or table is None:
            continue
        for name, spec in deps.items():
            if name == "python":
                if isinstance(spec, str) and (line := toml_key_line(doc.lines, table, name)):
                    yield doc.fact(subject, "uses_runtime", f"Python {spec}", line,
                                   slot="Python", document_type=RUNTIME, quote=spec)
                continue
            version = spec.get("version") if isinstance(spec, dict) else spec
            line = toml_key_line(doc.lines, table, name)
            if line is None:
                continue
            requirement = f"{name} {version}" if isinstance(version, str) else name
            yield from dependency_facts(doc, subject, "python", name, requirement, line,
                                        group=group)
