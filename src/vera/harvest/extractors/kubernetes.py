"""Kubernetes manifests (any YAML file whose documents carry ``apiVersion`` and ``kind``):
each workload's container images and ports, each Service's ports.

The subject is the object, ``…/deploy.yaml#Deployment/payments``. Helm templates (text
with ``{{``) are not YAML until rendered and are never read; chart values are ``helm``'s.
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
    walk,
    yaml_documents,
)

PREDICATES = frozenset({"uses_image", "exposes_port"})

_MARKERS = (re.compile(r"^apiVersion:", re.M), re.compile(r"^kind:", re.M))
_OTHER_YAML = re.compile(r"(^|/)(\.github/|\.gitlab-ci\.ya?ml$|(docker-)?compose[^/]*$|values[^/]*$"
                         r"|Chart\.ya?ml$|[^/]*(openapi|swagger)[^/]*$)")


def wants(path: str) -> bool:
    return path.endswith((".yaml", ".yml")) and not _OTHER_YAML.search(path)


def extract(doc: Document) -> Iterator[Fact]:
    if "{{" in doc.text or not all(marker.search(doc.text) for marker in _MARKERS):
        return
    try:
        documents = yaml_documents(doc.text)
    except yaml.YAMLError:
        return
    for root in documents:
        kind = scalar(mapping_value(root, "kind"))
        name = scalar(mapping_value(mapping_value(root, "metadata"), "name"))
        if not kind or not name or not scalar(mapping_value(root, "apiVersion")):
            continue
        subject = doc.subject_for_item(f"{kind}/{name}")
        for node in walk(root):
            for key, value in mapping_items(node):
                if scalar(key) in ("containers", "initContainers"):
                    for container in sequence_items(value):
                        yield from _container(doc, subject, container)
        if kind == "Service":
            for port in sequence_items(mapping_value(mapping_value(root, "spec"), "ports")):
                item = mapping_get(port, "port")
                if item is not None and (number := scalar(item[1])):
                    line = item[0].start_mark.line + 1
                    yield doc.fact(subject, "exposes_port", number, line, slot=f"port:{number}",
                                   document_type=INFRASTRUCTURE)


def _container(doc: Document, subject: str, container: yaml.Node) -> Iterator[Fact]:
    cname = scalar(mapping_value(container, "name")) or ""
    image = mapping_get(container, "image")
    if image is not None and (value := scalar(image[1])):
        line = image[0].start_mark.line + 1
        yield doc.fact(subject, "uses_image", value, line, node_lines(image[1], doc.lines)[1],
                       slot=f"image:{cname}", document_type=INFRASTRUCTURE)
    for port in sequence_items(mapping_value(container, "ports")):
        item = mapping_get(port, "containerPort")
        if item is not None and (value := scalar(item[1])):
            line = item[0].start_mark.line + 1
            yield doc.fact(subject, "exposes_port", value, line, slot=f"port:{cname}:{value}",
                           document_type=INFRASTRUCTURE)
