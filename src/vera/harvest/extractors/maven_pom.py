"""``pom.xml``: a Maven project's artifact, version, licences, Java release and its
dependencies (``dependencies``, ``dependencyManagement``, the ``parent``), with the
version each declares as written.

The subject is the project's ``artifactId``; one naming none speaks for its folder. A
value built from a property (``${spring.version}``) is stated as written, never resolved.
A file declaring a DTD or an entity is not read: a POM needs neither, and expanding
entities is how XML is made to explode.
"""

from __future__ import annotations

import xml.parsers.expat
from collections.abc import Iterator
from dataclasses import dataclass, field

from vera.harvest.facts import DEPENDENCIES, LICENSE, RUNTIME, Document, Fact
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "version", "license", "uses_runtime", "depends_on", "built_with", "uses_database_driver",
    "uses_test_runner"
})

# The properties naming the Java release the build targets, most specific first.
JAVA_RELEASE = ("maven.compiler.release", "java.version", "maven.compiler.source")
SCOPES = frozenset({"test", "provided", "runtime", "system", "import"})


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == "pom.xml"


@dataclass
class _Element:
    tag: str
    start: int
    end: int = 0
    text: str = ""
    children: list[_Element] = field(default_factory=list)

    def child(self, tag: str) -> _Element | None:
        return next((c for c in self.children if c.tag == tag), None)

    def all(self, *path: str) -> list[_Element]:
        found = [self]
        for tag in path:
            found = [c for e in found for c in e.children if c.tag == tag]
        return found

    def value(self, tag: str) -> str:
        element = self.child(tag)
        return element.text.strip() if element is not None else ""


class _Refused(Exception):
    pass


def _parse(text: str) -> _Element | None:
    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_Element] = []
    roots: list[_Element] = []

    def start(name: str, _attributes: dict[str, str]) -> None:
        element = _Element(name.rsplit(":", 1)[-1], parser.CurrentLineNumber)
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
    return roots[0] if roots and roots[0].tag == "project" else None


def extract(doc: Document) -> Iterator[Fact]:
    project = _parse(doc.text)
    if project is None:
        return
    artifact = project.value("artifactId")
    subject = artifact if artifact and "${" not in artifact else doc.subject_for_directory()
    version = project.child("version")
    if version is not None and (value := version.text.strip()) and "${" not in value:
        yield doc.fact(subject, "version", value, version.start, version.end, slot="version",
                       document_type=DEPENDENCIES)
    for licence in project.all("licenses", "license"):
        name = licence.child("name")
        if name is not None and (value := name.text.strip()):
            yield doc.fact(subject, "license", value, name.start, name.end,
                           slot=f"license:{value}", document_type=LICENSE)
    properties = {p.tag: p for e in project.all("properties") for p in e.children}
    release = next((properties[k] for k in JAVA_RELEASE if k in properties
                    and properties[k].text.strip() and "${" not in properties[k].text), None)
    if release is not None:
        value = release.text.strip()
        yield doc.fact(subject, "uses_runtime", f"Java {value}", release.start, release.end,
                       slot="java", document_type=RUNTIME, quote=value)
    for dependency, group in _dependencies(project):
        yield from _dependency(doc, subject, dependency, group)


def _dependencies(project: _Element) -> Iterator[tuple[_Element, str]]:
    parent = project.child("parent")
    if parent is not None:
        yield parent, "parent"
    for dependency in project.all("dependencies", "dependency"):
        scope = dependency.value("scope")
        yield dependency, scope if scope in SCOPES else ""
    for dependency in project.all("dependencyManagement", "dependencies", "dependency"):
        yield dependency, "managed"


def _dependency(doc: Document, subject: str, dependency: _Element, group: str
                ) -> Iterator[Fact]:
    artifact = dependency.value("artifactId")
    if not artifact:
        return
    group_id = dependency.value("groupId")
    name = f"{group_id}:{artifact}" if group_id else artifact
    version = dependency.value("version")
    requirement = f"{name} {version}" if version else name
    yield from dependency_facts(doc, subject, "maven", name, requirement, dependency.start,
                                dependency.end, group=group, quote=artifact)
