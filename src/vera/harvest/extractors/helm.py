"""Helm charts: ``Chart.yaml`` (the chart's version and the charts it depends on, such as
a ``postgresql`` or ``redis`` subchart) and values files (``values.yaml``,
``values-*.yaml``): every ``image`` block with a ``repository`` and every ``service``
block with a ``port``, the conventional keys charts render from.

A values file's subject is the key path inside it (``…/values.yaml#worker.image``); an
image is stated as ``[registry/]repository[:tag]`` from the block's own literal values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml

from vera.harvest.facts import DEPENDENCIES, INFRASTRUCTURE, Document, Fact
from vera.harvest.locate import (
    item_lines,
    mapping_get,
    mapping_items,
    mapping_value,
    scalar,
    sequence_items,
    yaml_documents,
)

PREDICATES = frozenset({"version", "depends_on", "uses_image", "exposes_port"})

_VALUES = re.compile(r"^values(?:[-.][\w-]+)?\.ya?ml$")
MAX_DEPTH = 12


def wants(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in ("Chart.yaml", "Chart.yml") or bool(_VALUES.match(name))


def extract(doc: Document) -> Iterator[Fact]:
    try:
        documents = yaml_documents(doc.text)
    except yaml.YAMLError:
        return
    if not documents:
        return
    if doc.name.startswith("Chart."):
        yield from _chart(doc, documents[0])
    else:
        yield from _values(doc, documents[0], "", 0)


def _chart(doc: Document, root: yaml.Node) -> Iterator[Fact]:
    name = scalar(mapping_value(root, "name"))
    if not name:
        return
    version = mapping_get(root, "version")
    if version is not None and (value := scalar(version[1])):
        yield doc.fact(name, "version", value, version[0].start_mark.line + 1, slot="version",
                       document_type=DEPENDENCIES)
    for dependency in sequence_items(mapping_value(root, "dependencies")):
        dep = scalar(mapping_value(dependency, "name"))
        if not dep:
            continue
        dep_version = scalar(mapping_value(dependency, "version"))
        first = dependency.start_mark.line + 1
        last = max(k.start_mark.line + 1 for k, _ in mapping_items(dependency))
        yield doc.fact(name, "depends_on", f"{dep} {dep_version}" if dep_version else dep, first,
                       last, slot=f"chart:{dep}", document_type=INFRASTRUCTURE, quote=dep)


def _values(doc: Document, node: yaml.Node, path: str, depth: int) -> Iterator[Fact]:
    if depth > MAX_DEPTH:
        return
    for key, value in mapping_items(node):
        name = scalar(key)
        if not name:
            continue
        here = f"{path}.{name}" if path else name
        if name == "image" and (repository := scalar(mapping_value(value, "repository"))):
            registry = scalar(mapping_value(value, "registry"))
            tag = scalar(mapping_value(value, "tag"))
            image = (f"{registry}/" if registry else "") + repository + (f":{tag}" if tag else "")
            first, last = item_lines(key, value, doc.lines)
            yield doc.fact(doc.subject_for_item(path or "image"), "uses_image", image, first, last,
                           slot=f"image:{here}", document_type=INFRASTRUCTURE, quote=repository)
        elif name == "service" and (port := mapping_get(value, "port")) is not None \
                and (number := scalar(port[1])):
            yield doc.fact(doc.subject_for_item(path or "service"), "exposes_port", number,
                           port[0].start_mark.line + 1, slot=f"port:{here}",
                           document_type=INFRASTRUCTURE)
        else:
            yield from _values(doc, value, here, depth + 1)
