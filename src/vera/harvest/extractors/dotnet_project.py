"""MSBuild project files (``*.csproj``, ``*.fsproj``, ``*.vbproj``) and the files that
share their settings across a folder (``Directory.Build.props``, ``Directory.Packages.props``):
the target frameworks, the package's version and licence expression, and the NuGet
packages it references (``PackageReference``), manages centrally (``PackageVersion``) or
references in every project (``GlobalPackageReference``), each with its version as written.

The subject is the project's ``AssemblyName``, else the project file's name without its
extension (MSBuild's own default); a ``Directory.*.props`` file speaks for its folder. A
value built from a property (``$(AspireVersion)``) is stated as written, never resolved,
and what stands under a ``Condition`` holds only sometimes, so it is not stated. A file
declaring a DTD or an entity is not read (``vera.harvest.locate.xml_tree``).
"""

from __future__ import annotations

from collections.abc import Iterator

from vera.harvest.facts import DEPENDENCIES, LICENSE, RUNTIME, Document, Fact
from vera.harvest.locate import XmlElement, xml_tree
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "version", "license", "uses_runtime", "depends_on", "built_with", "uses_database_driver",
    "uses_test_runner"
})

PROJECT_SUFFIXES = (".csproj", ".fsproj", ".vbproj")
SHARED_FILES = frozenset({"Directory.Build.props", "Directory.Packages.props"})
# Item → the dependency group its facts are stated in.
PACKAGE_ITEMS = {"PackageReference": "", "PackageVersion": "managed",
                 "GlobalPackageReference": "global"}


def wants(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(PROJECT_SUFFIXES) or name in SHARED_FILES


def extract(doc: Document) -> Iterator[Fact]:
    project = xml_tree(doc.text)
    if project is None or project.tag != "Project":
        return
    properties = _properties(project)
    assembly = properties.get("AssemblyName")
    if doc.name in SHARED_FILES:
        subject = doc.subject_for_directory()
    elif assembly is not None and _literal(name := assembly.text.strip()):
        subject = name
    else:
        subject = doc.name.rsplit(".", 1)[0]
    for key, predicate, document_type in (("Version", "version", DEPENDENCIES),
                                          ("PackageLicenseExpression", "license", LICENSE)):
        element = properties.get(key)
        if element is not None and _literal(value := element.text.strip()):
            yield doc.fact(subject, predicate, value, element.start, element.end, slot=key,
                           document_type=document_type)
    yield from _frameworks(doc, subject, properties)
    for group in _unconditioned(project, "ItemGroup"):
        for item in group.children:
            if item.tag in PACKAGE_ITEMS and "Condition" not in item.attributes:
                yield from _package(doc, subject, item, PACKAGE_ITEMS[item.tag])


def _literal(value: str) -> bool:
    return bool(value) and "$(" not in value


def _unconditioned(project: XmlElement, tag: str) -> list[XmlElement]:
    return [e for e in project.all(tag) if "Condition" not in e.attributes]


def _properties(project: XmlElement) -> dict[str, XmlElement]:
    """Each property set without a condition, by name: the last assignment wins, as in
    MSBuild."""
    return {p.tag: p for group in _unconditioned(project, "PropertyGroup")
            for p in group.children if "Condition" not in p.attributes}


def _frameworks(doc: Document, subject: str, properties: dict[str, XmlElement]
                ) -> Iterator[Fact]:
    """``.NET <target framework moniker as written>`` (``net8.0``, ``netstandard2.0``,
    ``net472``) for ``TargetFramework``, one per moniker of ``TargetFrameworks``."""
    for key in ("TargetFramework", "TargetFrameworks"):
        element = properties.get(key)
        if element is None:
            continue
        monikers = [m.strip() for m in element.text.split(";") if _literal(m.strip())]
        for moniker in monikers:
            slot = "dotnet" if key == "TargetFramework" else f"dotnet:{moniker}"
            yield doc.fact(subject, "uses_runtime", f".NET {moniker}", element.start,
                           element.end, slot=slot, document_type=RUNTIME, quote=moniker)


def _package(doc: Document, subject: str, item: XmlElement, group: str) -> Iterator[Fact]:
    name = item.attributes.get("Include", "").strip()
    if not _literal(name) or ";" in name or "*" in name:
        return
    version = item.attributes.get("Version", "").strip() or item.value("Version")
    requirement = f"{name} {version}" if version else name
    yield from dependency_facts(doc, subject, "nuget", name, requirement, item.start, item.end,
                                group=group)
