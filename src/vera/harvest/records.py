"""A harvest as the curated records `vera ingest` loads (``vera.ingest_records``).

Each file that states something becomes one source: its id is the repository's canonical
identity and the file's path (the same id at every commit, so a later harvest refreshes
it rather than adding another), its URI names the commit (each commit the source is seen
at is kept as one of its versions), and its ``observed_at`` is the commit's time. Each
fact cites its file's source with the line range as locator and the exact lines as
evidence, is valid from the commit's time (or the date the file gives the statement), and
is bound to the repository, the branch harvested and the file's folder (the retrieval
binding: an agent working under that folder is served these facts first).
"""

from __future__ import annotations

from datetime import datetime
from posixpath import dirname
from typing import Any

from vera.harvest.facts import Fact

SOURCE_TYPE = "repository_file"


def source_id(repository: str, path: str) -> str:
    """``github.com/acme/shop/services/api/pyproject.toml``: stable across commits."""
    return f"{repository}/{path}"


def file_uri(repository: str, commit: str, path: str) -> str:
    """The file at the commit, in the hosting service's page layout (GitLab's has a
    ``/-/``; GitHub's, which Gitea, Forgejo and Bitbucket Server redirect, has none)."""
    marker = "/-/blob/" if repository.split("/", 1)[0].startswith("gitlab.") else "/blob/"
    return f"https://{repository}{marker}{commit}/{path}"


def source_record(repository: str, commit: str, committed_at: datetime, path: str
                  ) -> dict[str, Any]:
    return {"type": "source", "id": source_id(repository, path), "source_type": SOURCE_TYPE,
            "title": path, "uri": file_uri(repository, commit, path),
            "observed_at": committed_at.isoformat()}


def fact_record(fact: Fact, repository: str, branch: str, committed_at: datetime,
                trust_tier: int | None = None) -> dict[str, Any] | None:
    """The fact as a ``fact`` record, or None when it cannot be dated honestly: a decision
    the file says no longer holds, with no date of its own, has no validity to close."""
    record: dict[str, Any] = {
        "type": "fact", "subject": fact.subject, "predicate": fact.predicate,
        "object": fact.object, "source": source_id(repository, fact.path),
        "evidence": fact.evidence, "locator": fact.locator,
        "valid_from": (fact.valid_from or committed_at).isoformat(),
        "repository": repository, "code_path": dirname(fact.path),
        "document_type": fact.document_type,
    }
    if fact.until_commit:
        if fact.valid_from is None or fact.valid_from >= committed_at:
            return None
        record["valid_to"] = committed_at.isoformat()
    if branch:
        record["branch"] = branch
    if not record["code_path"]:
        del record["code_path"]
    if trust_tier is not None:
        record["trust_tier"] = trust_tier
    return record
