"""``Cargo.toml``: a Rust package's name, version, licence, ``rust-version`` and its
dependencies (``dependencies``, ``dev-dependencies``, ``build-dependencies``,
``workspace.dependencies``), with the version each declares.

The subject is ``[package] name``; a workspace root naming none speaks for its folder.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from typing import Any

from vera.harvest.facts import DEPENDENCIES, LICENSE, RUNTIME, Document, Fact
from vera.harvest.locate import toml_key_line, toml_table
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "version", "license", "uses_runtime", "depends_on", "built_with", "uses_database_driver",
    "uses_test_runner"
})

TABLES = {"dependencies": "", "dev-dependencies": "dev", "build-dependencies": "build",
          "workspace.dependencies": "workspace"}


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "Cargo.toml"


def extract(doc: Document) -> Iterator[Fact]:
    try:
        data = tomllib.loads(doc.text)
    except tomllib.TOMLDecodeError:
        return
    package: dict[str, Any] = data["package"] if isinstance(data.get("package"), dict) else {}
    name = package.get("name")
    subject = name if isinstance(name, str) and name else doc.subject_for_directory()
    table = toml_table(doc.lines, "package")
    if table is not None:
        for key, predicate, document_type in (("version", "version", DEPENDENCIES),
                                              ("license", "license", LICENSE),
                                              ("rust-version", "uses_runtime", RUNTIME)):
            value = package.get(key)
            if not isinstance(value, str) or not (line := toml_key_line(doc.lines, table, key)):
                continue
            object_ = f"Rust {value}" if key == "rust-version" else value
            yield doc.fact(subject, predicate, object_, line, slot=key,
                           document_type=document_type, quote=value)
    for table_name, group in TABLES.items():
        deps: Any = data
        for part in table_name.split("."):
            deps = deps.get(part) if isinstance(deps, dict) else None
        if not isinstance(deps, dict):
            continue
        yield from _dependencies(doc, subject, table_name, group, deps)


def _dependencies(doc: Document, subject: str, table_name: str, group: str,
                  deps: dict[str, Any]) -> Iterator[Fact]:
    table = toml_table(doc.lines, table_name)
    for dep, spec in deps.items():
        version = spec.get("version") if isinstance(spec, dict) else spec
        own = toml_table(doc.lines, f"{table_name}.{dep}")  # [dependencies.serde]
        if table is not None and (line := toml_key_line(doc.lines, table, dep)):
            start, end = line, line
        elif own is not None:
            start, end = own
            while end > start and not doc.lines[end - 1].strip():
                end -= 1
        else:
            continue
        requirement = f"{dep} {version}" if isinstance(version, str) else dep
        package = spec.get("package", dep) if isinstance(spec, dict) else dep
        yield from dependency_facts(doc, subject, "rust", package if isinstance(package, str)
                                    else dep, requirement, start, end, group=group)
