"""GitHub Actions workflows (``.github/workflows/*.yml``): the commands each job runs
(every step's ``run``), and the container image a job runs in.

The subject is the job, ``…/ci.yml#test``. A step that only ``uses`` an action runs no
command the file shows and yields nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from vera.harvest.facts import BUILD, INFRASTRUCTURE, Document, Fact
from vera.harvest.locate import (
    item_lines,
    mapping_get,
    mapping_items,
    mapping_value,
    scalar,
    sequence_items,
    yaml_documents,
)
from vera.limits import PREDICATE_OBJECT

PREDICATES = frozenset({"uses_image", "ci_runs"})


def wants(path: str) -> bool:
    return path.startswith(".github/workflows/") and path.endswith((".yml", ".yaml")) \
        and path.count("/") == 2


def extract(doc: Document) -> Iterator[Fact]:
    try:
        documents = yaml_documents(doc.text)
    except yaml.YAMLError:
        return
    for root in documents[:1]:
        for job_key, job in mapping_items(mapping_value(root, "jobs")):
            job_id = scalar(job_key)
            if not job_id:
                continue
            subject = doc.subject_for_item(job_id)
            container = mapping_get(job, "container")
            if container is not None:
                image = scalar(container[1]) or scalar(mapping_value(container[1], "image"))
                if image:
                    first, last = item_lines(*container, doc.lines)
                    yield doc.fact(subject, "uses_image", image, first, last, slot="container",
                                   document_type=INFRASTRUCTURE)
            for number, step in enumerate(sequence_items(mapping_value(job, "steps")), start=1):
                run = mapping_get(step, "run")
                command = scalar(run[1]) if run else None
                if run is None or not command or len(command.strip()) > PREDICATE_OBJECT[1]:
                    continue
                first, last = item_lines(*run, doc.lines)
                name = scalar(mapping_value(step, "name")) or f"step {number}"
                yield doc.fact(subject, "ci_runs", command.strip(), first, last,
                               slot=f"run:{name}", document_type=BUILD,
                               quote=command.strip().splitlines()[0])
