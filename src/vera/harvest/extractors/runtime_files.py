"""Version files that pin a language runtime: ``.python-version``, ``.nvmrc``,
``.node-version``, ``.go-version``, ``.ruby-version``, ``.tool-versions`` (asdf, mise),
``rust-toolchain`` and ``rust-toolchain.toml``.

Each yields ``<repository or folder> uses_runtime "<runtime> <version as written>"``; the
runtime's name comes from the file's own name (or, in ``.tool-versions``, the line's first
word). ``requires-python``, ``engines`` and go.mod's ``go`` line are their manifests'
extractors' (python_project, node_package, go_module).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator

from vera.harvest.facts import RUNTIME, Document, Fact
from vera.harvest.locate import toml_key_line, toml_table

PREDICATES = frozenset({"uses_runtime"})

SINGLE = {".python-version": "Python", ".nvmrc": "Node.js", ".node-version": "Node.js",
          ".go-version": "Go", ".ruby-version": "Ruby", "rust-toolchain": "Rust"}
_VERSION = re.compile(r"^[\w.+\-/]+$")


def wants(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in SINGLE or name in (".tool-versions", "rust-toolchain.toml")


def extract(doc: Document) -> Iterator[Fact]:
    subject = doc.subject_for_directory()
    if doc.name == "rust-toolchain.toml":
        yield from _rust_toolchain_toml(doc, subject)
        return
    for number, line in enumerate(doc.lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if doc.name == ".tool-versions":
            tool, *versions = text.split()
            if versions and _VERSION.match(versions[0]):
                yield doc.fact(subject, "uses_runtime", f"{tool} {versions[0]}", number,
                               slot=tool, document_type=RUNTIME, quote=versions[0])
        elif _VERSION.match(text):
            runtime = SINGLE[doc.name]
            yield doc.fact(subject, "uses_runtime", f"{runtime} {text}", number,
                           slot=f"{runtime}:{text}" if doc.name == ".python-version" else runtime,
                           document_type=RUNTIME, quote=text)
            if doc.name != ".python-version":  # pyenv lists several; the others pin one
                return


def _rust_toolchain_toml(doc: Document, subject: str) -> Iterator[Fact]:
    try:
        channel = tomllib.loads(doc.text).get("toolchain", {}).get("channel")
    except tomllib.TOMLDecodeError:
        return
    table = toml_table(doc.lines, "toolchain")
    if isinstance(channel, str) and table is not None:
        line = toml_key_line(doc.lines, table, "channel")
        if line is not None:
            yield doc.fact(subject, "uses_runtime", f"Rust {channel}", line, slot="Rust",
                           document_type=RUNTIME, quote=channel)
