"""``build.gradle`` / ``build.gradle.kts``: a Gradle project's version, Java release and
the dependencies its ``dependencies { }`` block declares in the literal forms
(``implementation 'group:artifact:version'``, ``testImplementation("group:artifact")``),
each in its configuration.

A build script is a program (Groovy or Kotlin), and it is never run: only those literal
forms are read, line by line, with the blocks they stand in tracked by their braces.
Anything computed is not stated: an interpolated string (``"...:${springVersion}"``), a
version catalog entry (``libs.spring.web``), ``platform(...)``, the map form
(``group: ..., name: ...``), and what a ``buildscript``, ``allprojects``, ``subprojects``
or ``configure`` block declares for other builds. The subject is the project's folder
(its name is in ``settings.gradle``, not read here). Coordinates are Maven's, so their
roles come from the Maven table.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from vera.harvest.facts import DEPENDENCIES, RUNTIME, Document, Fact
from vera.harvest.roles import dependency_facts

PREDICATES = frozenset({
    "version", "uses_runtime", "depends_on", "built_with", "uses_database_driver",
    "uses_test_runner"
})

NAMES = frozenset({"build.gradle", "build.gradle.kts"})
# Configurations whose dependencies are the project's own code's (group ""); any other
# configuration (testImplementation, runtimeOnly, annotationProcessor...) is the group.
MAIN_CONFIGURATIONS = frozenset({"implementation", "api", "compile"})
# Blocks that configure other builds or the build script itself, not this project.
FOREIGN_BLOCKS = frozenset({"buildscript", "allprojects", "subprojects", "configure", "project"})

_DEPENDENCY = re.compile(
    r"""^(\w+)\s*(?:\(\s*)?(['"])([^'"$\\\s]+)\2\s*\)?\s*\{?$""")
_COORDINATES = re.compile(r"^([^:\s]+):([^:\s@]+)(?::([^:\s@]+))?(?::[^:\s@]+)?(?:@\w+)?$")
_VERSION = re.compile(r"""^version\s*=\s*(['"])([^'"$\\]+)\1$""")
_TOOLCHAIN = re.compile(
    r"(?:languageVersion(?:\s*=\s*|\.set\(\s*)JavaLanguageVersion\.of\(\s*(\d+)\s*\)"
    r"|jvmToolchain\(\s*(\d+)\s*\))")
_SOURCE = re.compile(
    r"""^(?:java\.)?sourceCompatibility\s*=\s*(?:JavaVersion\.(VERSION_(\d+(?:_\d+)?))"""
    r"""|(['"]?)(\d+(?:\.\d+)?)\3)$""")
_WORDS = re.compile(r"\w+")


def wants(path: str) -> bool:
    return path.rsplit("/", 1)[-1] in NAMES


def extract(doc: Document) -> Iterator[Fact]:
    subject = doc.subject_for_directory()
    java: list[tuple[int, Fact]] = []
    for number, code, blocks in _statements(doc.lines):
        if not blocks and (version := _VERSION.match(code)):
            yield doc.fact(subject, "version", version.group(2), number, slot="version",
                           document_type=DEPENDENCIES)
        elif blocks == ["dependencies"] and (dependency := _DEPENDENCY.match(code)):
            yield from _dependency(doc, subject, dependency, number)
        elif not FOREIGN_BLOCKS & set(blocks):
            java.extend(_java(doc, subject, code, number))
    if java:  # a toolchain says what the build runs on, before sourceCompatibility
        yield min(java, key=lambda ranked: (ranked[0], ranked[1].start))[1]


def _statements(lines: list[str]) -> Iterator[tuple[int, str, list[str]]]:
    """Each line's code (comments removed, stripped) with the names of the blocks it
    stands in (``["java", "toolchain"]``), tracked by braces outside strings."""
    blocks: list[str] = []
    in_comment = False
    for number, line in enumerate(lines, start=1):
        code, in_comment = _strip_comments(line, in_comment)
        yield number, code, list(blocks)
        _track(code, blocks)


def _strip_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    out, quote, index = "", "", 0
    while index < len(line):
        pair = line[index:index + 2]
        char = line[index]
        if in_comment:
            if pair == "*/":
                in_comment, index = False, index + 2
                continue
        elif quote:
            out += char
            if char == "\\":
                out += line[index + 1:index + 2]
                index += 1
            elif char == quote:
                quote = ""
        elif pair == "//":
            break
        elif pair == "/*":
            in_comment, index = True, index + 2
            continue
        else:
            out += char
            quote = char if char in "\"'" else ""
        index += 1
    return out.strip(), in_comment


def _track(code: str, blocks: list[str]) -> None:
    quote, before = "", ""
    for char in code:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "{":
            words = _WORDS.findall(before.split("(", 1)[0])  # tasks.named('x') {: "named"
            blocks.append(words[-1] if words else "")
            before = ""
            continue
        elif char == "}":
            if blocks:
                blocks.pop()
            before = ""
            continue
        before += char


def _dependency(doc: Document, subject: str, match: re.Match[str], number: int
                ) -> Iterator[Fact]:
    configuration, written = match.group(1), match.group(3)
    coordinates = _COORDINATES.match(written)
    if coordinates is None:
        return
    group_id, artifact, version = coordinates.groups()
    name = f"{group_id}:{artifact}"
    requirement = f"{name} {version}" if version else name
    group = "" if configuration in MAIN_CONFIGURATIONS else configuration
    yield from dependency_facts(doc, subject, "maven", name, requirement, number, group=group,
                                quote=written)


def _java(doc: Document, subject: str, code: str, number: int
          ) -> Iterator[tuple[int, Fact]]:
    """(rank, fact) of the Java release a line sets: 0 for a toolchain, 1 for
    ``sourceCompatibility`` (``VERSION_1_8`` is Java 1.8)."""
    if toolchain := _TOOLCHAIN.search(code):
        release = toolchain.group(1) or toolchain.group(2)
        yield 0, doc.fact(subject, "uses_runtime", f"Java {release}", number, slot="java",
                          document_type=RUNTIME, quote=toolchain.group(0))
    elif source := _SOURCE.match(code):
        written = source.group(1) or source.group(4)
        release = (source.group(2) or source.group(4)).replace("_", ".")
        yield 1, doc.fact(subject, "uses_runtime", f"Java {release}", number, slot="java",
                          document_type=RUNTIME, quote=written)
