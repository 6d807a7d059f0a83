"""Curation, the one layer the REST routes (``vera.api.curation``) and the console
(``vera.api.console``) both call: who may curate a project, and the decisions a curator
takes there (verify, reject, retract, ingest).

Agents never reach it: the MCP gateway has no curation tool. ``curator_of`` is the one
permission check, identity's rule (``AuthorizeCurator``: the project's owner, or an owner
or curator of its workspace); unreadable is ``project_out_of_scope``, readable but not
curated ``unauthorized``. What a decision writes is the knowledge service's to decide.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from vera import limits
from vera.api.auth import RestCaller
from vera.api.routing import RequestBody
from vera.errors import InvalidInput, ProjectOutOfScope, Unauthorized
from vera.identity.v1 import identity_pb2 as ipb
from vera.ingest_records import FACTS_PER_CALL, ParsedFile
from vera.knowledge.v1 import knowledge_service_pb2 as kpb
from vera.rpc.backends import Backends

# IngestKnowledge writes a batch in one transaction: give it longer than a read.
INGEST_CALL_SECONDS = 120.0
MAX_REASON = 2048
# Proposals decided by one group decision (a page of the console's bulk review,
# ListPendingProposals' largest).
MAX_GROUP = 100


# What a curator sends with a decision: the REST body and the console's form alike.


class VerifyBody(RequestBody):
    """Unset trust tier and authority keep what the proposal carries."""

    trust_tier: Annotated[int, Field(ge=0, le=limits.TRUST_TIER[1])] | None = None
    authority: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    note: Annotated[str, Field(max_length=MAX_REASON)] = ""


class SettingsBody(RequestBody):
    """A project's curation settings, whole. two_person_verification: verifying a
    proposal is refused to the principal that proposed it (off by default)."""

    two_person_verification: bool


class ReasonBody(RequestBody):
    reason: Annotated[str, Field(min_length=1, max_length=MAX_REASON)]


@dataclass(frozen=True)
class IngestOutcome:
    """What one ingest wrote: (created, deduplicated) per kind, corrections as (applied,
    already recorded), the keys it answered and the warnings, by the record they came from."""

    counts: dict[str, tuple[int, int]]
    corrections: tuple[int, int]
    fact_keys: list[str]
    correction_fact_keys: list[str]
    warnings: list[dict[str, Any]]
    change_position: int


@dataclass(frozen=True)
class Curator:
    """A caller allowed to curate ``project`` (made only by ``curator_of``)."""

    backends: Backends
    caller: RestCaller
    project: ipb.Project

    @property
    def _scope(self) -> str:
        return self.project.project_id

    async def verify(self, fact_key: str, decision: VerifyBody) -> kpb.VerifyProposalResponse:
        message = kpb.VerifyProposalRequest(
            curator_principal_id=self.caller.principal_id, scope_id=self._scope,
            fact_key=fact_key, note=decision.note)
        if decision.trust_tier is not None:
            message.trust_tier = decision.trust_tier
        if decision.authority is not None:
            message.authority = decision.authority
        return await self.backends.knowledge.VerifyProposal(message)

    async def reject(self, fact_key: str, decision: ReasonBody) -> kpb.RejectProposalResponse:
        return await self.backends.knowledge.RejectProposal(kpb.RejectProposalRequest(
            curator_principal_id=self.caller.principal_id, scope_id=self._scope,
            fact_key=fact_key, reason=decision.reason))

    async def verify_group(self, fact_keys: list[str], decision: VerifyBody) -> int:
        """Bulk review: each proposal verified as ``verify`` does, with one decision for
        all, in order; a refusal stops there (those before it stay verified, so sending the
        group again verifies the rest). Answers how many were verified."""
        for fact_key in _group(fact_keys):
            await self.verify(fact_key, decision)
        return len(fact_keys)

    async def reject_group(self, fact_keys: list[str], decision: ReasonBody) -> int:
        """Bulk review: each proposal rejected as ``reject`` does, with the one reason
        (a refusal stops there, as in ``verify_group``)."""
        for fact_key in _group(fact_keys):
            await self.reject(fact_key, decision)
        return len(fact_keys)

    async def retract(self, source_id: str, decision: ReasonBody) -> kpb.RetractSourceResponse:
        return await self.backends.knowledge.RetractSource(kpb.RetractSourceRequest(
            curator_principal_id=self.caller.principal_id, scope_id=self._scope,
            source_id=source_id, reason=decision.reason))

    async def preview_retraction(self, source_id: str) -> kpb.RetractSourceResponse:
        """What retracting the source would do, computed by the retraction itself
        (``validate_only``) and written nowhere."""
        return await self.backends.knowledge.RetractSource(kpb.RetractSourceRequest(
            curator_principal_id=self.caller.principal_id, scope_id=self._scope,
            source_id=source_id, validate_only=True))

    async def settings(self) -> kpb.CurationSettings:
        """The project's curation settings (two-person verification), which every curator
        reads; knowledge enforces them."""
        reply = await self.backends.knowledge.GetCurationSettings(
            kpb.GetCurationSettingsRequest(scope_id=self._scope))
        return reply.settings

    async def change_settings(self, change: SettingsBody) -> kpb.CurationSettings:
        """Only the project's owner changes its settings (``unauthorized``, required_role
        ``owner``); curators read them."""
        if self.project.owner_principal_id != self.caller.principal_id:
            raise Unauthorized(required_role="owner")
        reply = await self.backends.knowledge.SetCurationSettings(kpb.SetCurationSettingsRequest(
            principal_id=self.caller.principal_id, scope_id=self._scope,
            settings=kpb.CurationSettings(
                two_person_verification=change.two_person_verification)))
        return reply.settings

    async def check_whole(self, parsed: ParsedFile) -> None:
        """The request, checked whole by knowledge before its first write (repository
        mappings, then facts in several calls, then corrections), so that a refused request
        writes nothing; a refusal names the record (``records[i]``)."""
        try:
            await self.backends.knowledge.IngestKnowledge(
                kpb.IngestKnowledgeRequest(
                    principal_id=self.caller.principal_id, scope_id=self._scope,
                    sources=parsed.sources, entities=parsed.entities,
                    facts=[*parsed.facts,
                           *(replacement for _, replacement, _ in parsed.corrections)],
                    validate_only=True,
                    corrected_fact_keys=[corrects for corrects, _, _ in parsed.corrections]),
                timeout=INGEST_CALL_SECONDS)
        except InvalidInput as refused:
            raise _naming_record(refused, parsed) from None

    async def ingest(self, parsed: ParsedFile) -> IngestOutcome:
        """Loads validated records as this curator: repositories mapped to the project, then
        sources, entities and facts, then corrections. Idempotent: a batch sent again
        creates nothing, so a load cut off half-way is finished by sending it again."""
        backends = self.backends
        await self.check_whole(parsed)
        for repository in sorted(parsed.repositories):
            await backends.identity.MapRepository(ipb.MapRepositoryRequest(
                principal_id=self.caller.principal_id, project_id=self._scope,
                repository=repository))
        counts = {"sources": [0, 0], "entities": [0, 0], "facts": [0, 0]}
        fact_keys: list[str] = []
        warnings: list[dict[str, Any]] = []
        position = 0
        chunks = [parsed.facts[i:i + FACTS_PER_CALL]
                  for i in range(0, len(parsed.facts), FACTS_PER_CALL)] or [[]]
        for number, chunk in enumerate(chunks):
            reply = await backends.knowledge.IngestKnowledge(
                kpb.IngestKnowledgeRequest(
                    principal_id=self.caller.principal_id, scope_id=self._scope, facts=chunk,
                    # Sources and entities ride with the first call so later facts cite them.
                    sources=parsed.sources if number == 0 else [],
                    entities=parsed.entities if number == 0 else [],
                ),
                timeout=INGEST_CALL_SECONDS,
            )
            for name, pair in counts.items():
                pair[0] += getattr(reply, name).created
                pair[1] += getattr(reply, name).deduplicated
            fact_keys += reply.fact_keys
            first = number * FACTS_PER_CALL
            warnings += [_warning(w, parsed.fact_lines, first) for w in reply.warnings]
            position = max(position, reply.change_position)
        corrections = [0, 0]
        replacement_keys: list[str] = []
        for corrects, replacement, reason in parsed.corrections:
            corrected = await backends.knowledge.CorrectFact(kpb.CorrectFactRequest(
                principal_id=self.caller.principal_id, scope_id=self._scope,
                fact_key=corrects, replacement=replacement, reason=reason))
            corrections[0 if corrected.created else 1] += 1
            replacement_keys.append(corrected.replacement.fact_key)
            position = max(position, corrected.change_position)
        return IngestOutcome(
            counts={name: (c, d) for name, (c, d) in counts.items()},
            corrections=(corrections[0], corrections[1]), fact_keys=fact_keys,
            correction_fact_keys=replacement_keys, warnings=warnings,
            change_position=position)


def _group(fact_keys: list[str]) -> list[str]:
    """A group decision's keys, bounded before any is decided."""
    if not fact_keys:
        raise InvalidInput("fact_keys", "at least one proposal", reason="required")
    if len(fact_keys) > MAX_GROUP:
        raise InvalidInput("fact_keys", f"at most {MAX_GROUP}", reason="too_many")
    if len(set(fact_keys)) != len(fact_keys):
        raise InvalidInput("fact_keys", "each proposal once", reason="duplicate")
    return fact_keys


_CHECKED_FIELD = re.compile(r"^(facts|corrected_fact_keys)\[(\d+)\]")


def _naming_record(refused: InvalidInput, parsed: ParsedFile) -> InvalidInput:
    """``refused`` with its field the record it came from: the check's facts are the
    file's facts, then its corrections' replacements."""
    match = _CHECKED_FIELD.match(refused.field)
    if match is None:
        return refused
    index = int(match[2])
    if match[1] == "facts" and index < len(parsed.facts):
        line = parsed.fact_lines[index]
    else:
        index -= len(parsed.facts) if match[1] == "facts" else 0
        if not 0 <= index < len(parsed.correction_lines):
            return refused
        line = parsed.correction_lines[index]
    detail = refused.field[match.end():].lstrip(".")
    return InvalidInput(f"records[{line}]", refused.message, reason="invalid_record",
                        index=line, detail=f"{detail or 'record'}: "
                        f"{refused.metadata.get('reason', 'invalid')}")


def _warning(warning: kpb.IngestWarning, fact_records: list[int], first: int) -> dict[str, Any]:
    """A flagged field by the record it came from (a fact's by its record index)."""
    record, _, name = warning.field.partition("].")
    if record.startswith("facts["):
        index = fact_records[first + int(record.removeprefix("facts["))]
        return {"record": index, "field": name, "reason": warning.reason,
                "codepoint": warning.codepoint}
    return {"record": None, "field": warning.field, "reason": warning.reason,
            "codepoint": warning.codepoint}


async def curator_of(backends: Backends, caller: RestCaller, project: str) -> Curator:
    """The one permission check: ``caller`` as a curator of ``project`` (id or slug)."""
    reply = await backends.identity.AuthorizeCurator(
        ipb.AuthorizeCuratorRequest(principal_id=caller.principal_id, project=project))
    return Curator(backends, caller, reply.project)


async def ingesting_curator(backends: Backends, caller: RestCaller, project: str,
                            parsed: ParsedFile) -> Curator:
    """``curator_of``; an administrator's ingest into a slug no project holds yet creates
    the project, owned by the administrator (so `vera ingest` on a laptop needs no setup),
    once ``parsed`` is found whole: checked as against a project that holds nothing, so a
    refused request creates no project either."""
    try:
        return await curator_of(backends, caller, project)
    except ProjectOutOfScope:
        if not caller.admin:
            raise
    await Curator(backends, caller, ipb.Project(project_id=str(uuid.uuid4()))).check_whole(parsed)
    await backends.identity.EnsureProject(
        ipb.EnsureProjectRequest(principal_id=caller.principal_id, slug=project))
    return await curator_of(backends, caller, project)


HANDLE_LENGTH = 8


def principal_handle(principal_id: str) -> str:
    """The stable handle shown beside a principal's display name: the first hex digits of
    its id. Names are neither unique nor fixed, so one can be copied; the id is chosen by
    identity at random, so a handle cannot be picked to match another's."""
    return principal_id.replace("-", "")[:HANDLE_LENGTH]


async def actor_names(backends: Backends, principal_ids: Iterable[str]) -> dict[str, str]:
    """Display names of the principals whose actions a curator reads about (the change
    feed's actors), one lookup each; a principal identity no longer knows has none."""
    names = {}
    for principal_id in sorted({p for p in principal_ids if p}):
        try:
            reply = await backends.identity.GetPrincipal(
                ipb.GetPrincipalRequest(principal_id=principal_id))
        except InvalidInput:
            names[principal_id] = ""
            continue
        names[principal_id] = reply.principal.display_name
    return names
