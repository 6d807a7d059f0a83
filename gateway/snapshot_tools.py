"""The snapshot tools (advanced profile): create a snapshot and read one back.
``SNAPSHOT_TOOLS`` are their specs; their bodies are in ``snapshot_handlers``.

A snapshot pins one project scope, a valid-time boundary (``as_of``), a system-time
boundary (its creation time) and the retrieval contract version. Replaying a query
against it passes those boundaries to retrieval, which keeps every fact version with its
transaction interval, so later writes cannot change the answer. A replay served by a
different retrieval contract fails closed with ``unsupported_version`` instead of
returning a different result. A foreign snapshot reads exactly like a missing one.
"""

from __future__ import annotations

from vera.gateway import schemas, snapshot_handlers
from vera.gateway.arguments import RESOLVED_PROJECT
from vera.gateway.auth import AuthClass
from vera.gateway.bounds import ArgumentSpec, string, timestamp
from vera.gateway.spec import Hints, ToolSpec
from vera.limits import ID_LIKE

SNAPSHOT = schemas.obj(
    {
        "snapshot_id": schemas.STR,
        "project": schemas.PROJECT_REF,
        "as_of": schemas.TS,
        "known_as_of": schemas.TS,
        "created_at": schemas.TS,
        "fact_count": schemas.INT,
        "versions": schemas.obj(
            {
                "assembler": schemas.STR,
                "ontology": schemas.OPT_STR,
                "policy": schemas.STR,
                "embedding": schemas.OPT_STR,
                "index": schemas.OPT_STR,
            }
        ),
        "source_boundaries": schemas.obj(
            {
                "source_count": schemas.INT,
                "oldest_observed_at": schemas.TS,
                "newest_observed_at": schemas.TS,
                "change_position": schemas.INT,
            }
        ),
    }
)


SNAPSHOT_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="knowledge_get_snapshot",
        title="Get a snapshot",
        description=(
            "A snapshot's metadata: its project, valid-time and system-time boundaries, fact "
            "count, source boundaries and the pinned ontology, policy, embedding and index "
            "versions. A missing or foreign snapshot fails with invalid_input (snapshot_id)."
        ),
        arguments=ArgumentSpec(
            (string("snapshot_id", ID_LIKE, "The snapshot id.", required=True),)
        ),
        output_schema=SNAPSHOT,
        hints=Hints(read_only=True, idempotent=True),
        auth_class=AuthClass.READ,
        bucket="read",
        cost="low",
        handler=snapshot_handlers.get_snapshot,
    ),
    ToolSpec(
        name="knowledge_create_snapshot",
        title="Create a snapshot",
        description=(
            "Freeze an immutable snapshot of the active facts of one resolved project, so a "
            "workflow can reproduce knowledge_get_context or knowledge_search later with "
            "snapshot_id. A deliberate, explicit workflow write: never part of automatic "
            "saving. Not idempotent; send an idempotency key to retry safely."
        ),
        arguments=ArgumentSpec(
            (
                RESOLVED_PROJECT,
                timestamp(
                    "as_of", "Valid-time boundary (ISO-8601); defaults to the creation time."
                ),
            )
        ),
        output_schema=SNAPSHOT,
        hints=Hints(read_only=False, idempotent=False),
        auth_class=AuthClass.SNAPSHOT,
        bucket="snapshot",
        cost="high",
        handler=snapshot_handlers.create_snapshot,
        accepts_idempotency_key=True,
    ),
)
