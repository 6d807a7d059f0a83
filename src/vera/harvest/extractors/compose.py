"""Compose files (``compose.yaml``, ``docker-compose.yml`` and their ``.override`` /
``.<name>`` variants): each service's image, published ports and ``depends_on``.

The subject is the service, named inside its file (``…/compose.yaml#db``). A service
that only ``build``s has no image the file names, so it yields none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml

from vera.harvest.facts import INFRASTRUCTURE, Document, Fact
from vera.harvest.locate import (
    mapping_get,
    mapping_items,
    mapping_value,
    node_lines,
    scalar,
    sequence_items,
    yaml_documents,
)

PREDICATES = frozenset({"uses_image", "exposes_port", "depends_on"})

_NAME = re.compile(r"^(?:docker-)?compose(?:\.[\w-]+)?\.ya?ml$")


def wants(path: str) -> bool:
    return bool(_NAME.match(path.rsplit("/", 1)[-1]))


def extract(doc: Document) -> Iterator[Fact]:
    try:
        documents = yaml_documents(doc.text)
    except yaml.YAMLError:
        return
    for root in documents[:1]:
        for key, service in mapping_items(mapping_value(root, "services")):
            name = scalar(key)
            if name is None:
                continue
            subject = doc.subject_for_item(name)
            image = mapping_get(service, "image")
            if image is not None and (value := scalar(image[1])):
                line = image[0].start_mark.line + 1
                end = node_lines(image[1], doc.lines)[1]
                yield doc.fact(subject, "uses_image", value, line, end, slot="image",
                               document_type=INFRASTRUCTURE)
            for port in sequence_items(mapping_value(service, "ports")):
                value = scalar(port) or scalar(mapping_value(port, "published"))
                target = scalar(mapping_value(port, "target"))
                if value is None and target is None:
                    continue
                first, last = node_lines(port, doc.lines)
                shown = value if value and scalar(port) else \
                    f"{value or ''}:{target or ''}".strip(":")
                yield doc.fact(subject, "exposes_port", shown, first, last, slot=f"port:{shown}",
                               document_type=INFRASTRUCTURE, quote=value or target or shown)
            depends = mapping_value(service, "depends_on")
            names = [(scalar(n), n) for n in sequence_items(depends)] + [
                (scalar(k), k) for k, _ in mapping_items(depends)]
            for other, node in names:
                if other:
                    line = node.start_mark.line + 1
                    yield doc.fact(subject, "depends_on", doc.subject_for_item(other), line,
                                   slot=f"service:{other}", document_type=INFRASTRUCTURE,
                                   quote=other)
