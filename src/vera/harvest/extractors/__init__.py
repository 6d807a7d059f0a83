"""The extractors, one module per family of files (docs/harvest.md lists them).

Each module has ``wants(path) -> bool`` (a cheap test on the repository-relative path,
before anything is read), ``extract(document) -> Iterator[Fact]`` (pure: the document's
text in, facts out) and ``PREDICATES``, every predicate it can state.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Protocol

from vera.harvest.extractors import (
    adr,
    cargo_package,
    codeowners,
    compose,
    dockerfile,
    github_actions,
    gitlab_ci,
    go_module,
    helm,
    justfile,
    kubernetes,
    license_file,
    makefile,
    maven_pom,
    node_package,
    noxfile,
    openapi,
    python_project,
    requirements,
    runtime_files,
    terraform,
    tox_ini,
)
from vera.harvest.facts import Document, Fact


class Extractor(Protocol):
    PREDICATES: frozenset[str]

    def wants(self, path: str) -> bool: ...

    def extract(self, doc: Document) -> Iterator[Fact]: ...


MODULES: tuple[ModuleType, ...] = (
    codeowners, runtime_files, python_project, requirements, node_package, go_module,
    cargo_package, maven_pom, compose, dockerfile, kubernetes, helm, terraform, github_actions,
    gitlab_ci, makefile, justfile, tox_ini, noxfile, adr, openapi, license_file,
)
EXTRACTORS: tuple[Extractor, ...] = MODULES


def name_of(extractor: Extractor) -> str:
    return str(getattr(extractor, "__name__", "")).rsplit(".", 1)[-1]


def all_predicates() -> frozenset[str]:
    """Every predicate a harvest can state: the default ontology ships each of them."""
    return frozenset().union(*(e.PREDICATES for e in EXTRACTORS))
