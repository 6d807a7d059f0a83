"""Dockerfiles (``Dockerfile``, ``*.Dockerfile``, ``Dockerfile.*``, ``Containerfile``),
parsed by ``dockerfile-parse``: each stage's base image and each ``EXPOSE``d port.

The subject is the Dockerfile itself. A base image is stated as written, before any build
argument is substituted (``FROM python:${PY}`` says ``python:${PY}``); ``FROM`` a previous
stage's name is no image and yields nothing.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from dockerfile_parse import DockerfileParser

from vera.harvest.facts import INFRASTRUCTURE, Document, Fact

PREDICATES = frozenset({"base_image", "exposes_port"})


def wants(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in ("Dockerfile", "Containerfile") or name.endswith(".Dockerfile") \
        or name.startswith("Dockerfile.")


def extract(doc: Document) -> Iterator[Fact]:
    # In memory: without a file object the parser writes its content to ./Dockerfile.
    parser = DockerfileParser(fileobj=io.BytesIO(), env_replace=False)
    parser.content = doc.text
    try:
        structure = parser.structure
    except Exception:  # a file the parser cannot read states nothing
        return
    subject = doc.subject_for_file()
    stages: set[str] = set()
    stage = 0
    for instruction in structure:
        start, end = instruction["startline"] + 1, instruction["endline"] + 1
        words = instruction["value"].split()
        if instruction["instruction"] == "FROM":
            args = [w for w in words if not w.startswith("--")]
            if not args:
                continue
            image = args[0]
            if len(args) >= 3 and args[1].lower() == "as":
                stages.add(args[2].lower())
            stage += 1
            if image.lower() in stages or image == "scratch":
                continue
            yield doc.fact(subject, "base_image", image, start, end, slot=f"stage:{stage}",
                           document_type=INFRASTRUCTURE)
        elif instruction["instruction"] == "EXPOSE":
            for port in words:
                yield doc.fact(subject, "exposes_port", port, start, end, slot=f"port:{port}",
                               document_type=INFRASTRUCTURE)
