"""GitLab CI (``.gitlab-ci.yml``): the commands each job's ``script`` runs and the image
it runs in (the job's own ``image``).

The subject is the job, ``…/.gitlab-ci.yml#test``. Hidden jobs (``.name``, templates
for ``extends``) run nothing themselves and are skipped; ``include``d files are not
followed.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from vera.harvest.facts import BUILD, INFRASTRUCTURE, Document, Fact
from vera.harvest.locate import (
    mapping_get,
    mapping_items,
    mapping_value,
    node_lines,
    scalar,
    sequence_items,
    yaml_documents,
)
from vera.limits import PREDICATE_OBJECT

PREDICATES = frozenset({"uses_image", "ci_runs"})

RESERVED = frozenset({"default", "include", "stages", "variables", "workflow", "image",
                      "services", "cache", "before_script", "after_script", "spec"})


def wants(path: str) -> bool:
    return path == ".gitlab-ci.yml"


def extract(doc: Document) -> Iterator[Fact]:
    try:
        documents = yaml_documents(doc.text)
    except yaml.YAMLError:
        return
    for root in documents[-1:]:  # a spec: header is its own document before the jobs
        for job_key, job in mapping_items(root):
            job_id = scalar(job_key)
            if not job_id or job_id in RESERVED or job_id.startswith("."):
                continue
            subject = doc.subject_for_item(job_id)
            image = mapping_get(job, "image")
            if image is not None:
                name = scalar(image[1]) or scalar(mapping_value(image[1], "name"))
                if name:
                    first, last = image[0].start_mark.line + 1, node_lines(image[1], doc.lines)[1]
                    yield doc.fact(subject, "uses_image", name, first, last, slot="image",
                                   document_type=INFRASTRUCTURE)
            script = mapping_value(job, "script")
            commands = sequence_items(script) or ([script] if script is not None else [])
            for command in commands:
                text = scalar(command)
                if not text or len(text.strip()) > PREDICATE_OBJECT[1]:
                    continue
                first, last = node_lines(command, doc.lines)
                yield doc.fact(subject, "ci_runs", text.strip(), first, last,
                               slot=f"script:{text.strip()}", document_type=BUILD,
                               quote=text.strip().splitlines()[0])
