"""OpenAPI and Swagger documents (YAML or JSON files whose name says ``openapi`` or
``swagger``, and whose root has an ``openapi`` or ``swagger`` version and ``paths``): every
operation, ``METHOD /path``, of the API the document's ``info.title`` names.

JSON is read through PyYAML too (JSON is YAML), for the node marks that give each
operation's lines: the path's line through the method's line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml

from vera.harvest.facts import INTERFACE, Document, Fact
from vera.harvest.locate import mapping_items, mapping_value, scalar, yaml_documents

PREDICATES = frozenset({"endpoint"})

_NAME = re.compile(r"(openapi|swagger)[^/]*\.(ya?ml|json)$", re.IGNORECASE)
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_SPAN_LINES = 200


def wants(path: str) -> bool:
    return bool(_NAME.search(path.rsplit("/", 1)[-1]))


def extract(doc: Document) -> Iterator[Fact]:
    try:
        documents = yaml_documents(doc.text.replace("\t", "  ") if doc.name.endswith(".json")
                                   else doc.text)
    except yaml.YAMLError:
        return
    if not documents:
        return
    root = documents[0]
    if not (scalar(mapping_value(root, "openapi")) or scalar(mapping_value(root, "swagger"))):
        return
    title = scalar(mapping_value(mapping_value(root, "info"), "title"))
    subject = title or doc.subject_for_file()
    for path_key, operations in mapping_items(mapping_value(root, "paths")):
        path = scalar(path_key)
        if not path or not path.startswith("/"):
            continue
        for method_key, _ in mapping_items(operations):
            method = scalar(method_key)
            if method not in METHODS:
                continue
            first, last = path_key.start_mark.line + 1, method_key.start_mark.line + 1
            if last - first > MAX_SPAN_LINES:
                continue
            endpoint = f"{method.upper()} {path}"
            yield doc.fact(subject, "endpoint", endpoint, first, last, slot=endpoint,
                           document_type=INTERFACE, quote=path)
